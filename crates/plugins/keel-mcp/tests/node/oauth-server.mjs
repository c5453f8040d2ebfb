// A streamable HTTP MCP server behind OAuth, for keel's OAuth and elicitation tests, built on
// the TypeScript SDK's own authorization server (mcpAuthRouter: metadata, dynamic client
// registration, /authorize with PKCE, /token) and bearer middleware. One port serves both:
// the MCP endpoint at /mcp and the authorization server at the root. The authorization
// endpoint approves at once (a person clicking "allow") and redirects with the code.
//
// Prints {"url": "http://127.0.0.1:PORT/mcp"} on its first stdout line.
//
// Environment:
//   TOKEN_TTL     seconds an access token lives, as told to the client (default 3600)
//   VALID_FOR     seconds the server honours the first token (default TOKEN_TTL): shorter
//                 makes a 401; refreshed tokens are honoured TOKEN_TTL seconds
//   MODE          ok (default) | open (no auth at all) | prm-garbage | no-s256 |
//                 token-fail | other-resource | refresh-fail
//   LOG           a file to append one line per token request to ("code", "refresh")
// Tools: whoami (says which client is authorized), ask (elicits a form and echoes the
// answer), ask-nested (elicits a schema keel cannot render).
import express from "express";
import http from "node:http";
import fs from "node:fs";
import { randomUUID } from "node:crypto";
import { z } from "zod";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { mcpAuthRouter, getOAuthProtectedResourceMetadataUrl } from "@modelcontextprotocol/sdk/server/auth/router.js";
import { requireBearerAuth } from "@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js";
import { InvalidGrantError, InvalidTokenError } from "@modelcontextprotocol/sdk/server/auth/errors.js";

const ttl = Number(process.env.TOKEN_TTL ?? "3600");
// How long the server really honours a token (default: what it tells the client).
const validFor = Number(process.env.VALID_FOR ?? String(ttl));
const mode = process.env.MODE ?? "ok";
const log = (line) => {
  if (process.env.LOG) fs.appendFileSync(process.env.LOG, line + "\n");
};

class Clients {
  constructor() { this.clients = new Map(); }
  async getClient(id) { return this.clients.get(id); }
  async registerClient(meta) {
    const client = { ...meta, client_id: randomUUID(), client_id_issued_at: Math.floor(Date.now() / 1000) };
    this.clients.set(client.client_id, client);
    return client;
  }
}

class Provider {
  constructor() {
    this.clientsStore = new Clients();
    this.codes = new Map();
    this.tokens = new Map();
    this.refresh = new Map();
  }
  async authorize(client, params, res) {
    const code = randomUUID();
    this.codes.set(code, { client, params });
    const target = new URL(params.redirectUri);
    target.searchParams.set("code", code);
    if (params.state !== undefined) target.searchParams.set("state", params.state);
    res.redirect(target.toString());
  }
  async challengeForAuthorizationCode(_client, code) {
    const data = this.codes.get(code);
    if (!data) throw new InvalidGrantError("unknown code");
    return data.params.codeChallenge;
  }
  issue(clientId, resource, honoured) {
    const token = randomUUID();
    const refresh = randomUUID();
    this.tokens.set(token, { clientId, resource, expiresAt: Date.now() + honoured * 1000 });
    this.refresh.set(refresh, { clientId, resource });
    return { access_token: token, token_type: "bearer", expires_in: ttl, refresh_token: refresh };
  }
  async exchangeAuthorizationCode(client, code, _verifier, _redirect, resource) {
    log("code");
    const data = this.codes.get(code);
    if (!data || data.client.client_id !== client.client_id) throw new InvalidGrantError("bad code");
    this.codes.delete(code);
    return this.issue(client.client_id, resource?.toString(), validFor);
  }
  async exchangeRefreshToken(client, refreshToken, _scopes, resource) {
    log("refresh");
    if (mode === "refresh-fail") throw new InvalidGrantError("refresh tokens are not honoured here");
    const data = this.refresh.get(refreshToken);
    if (!data || data.clientId !== client.client_id) throw new InvalidGrantError("unknown refresh token");
    this.refresh.delete(refreshToken);
    return this.issue(client.client_id, resource?.toString(), ttl);
  }
  async verifyAccessToken(token) {
    const data = this.tokens.get(token);
    if (!data || data.expiresAt < Date.now()) throw new InvalidTokenError("invalid or expired token");
    return { token, clientId: data.clientId, scopes: [], expiresAt: Math.floor(data.expiresAt / 1000) };
  }
}

function mcpServer(who) {
  const server = new McpServer({ name: "oauth-test", version: "0.0.0" });
  server.registerTool("whoami", { description: "who is authorized", inputSchema: {} }, async () => ({
    content: [{ type: "text", text: `authorized as ${who}` }],
  }));
  server.registerTool("ask", { description: "asks the person for a name and a color", inputSchema: {} }, async () => {
    const r = await server.server.elicitInput({
      message: "Who is there?",
      requestedSchema: {
        type: "object",
        required: ["name"],
        properties: {
          name: { type: "string", title: "Name", description: "Your name" },
          color: { type: "string", title: "Color", enum: ["red", "green"] },
        },
      },
    });
    return { content: [{ type: "text", text: `action=${r.action} content=${JSON.stringify(r.content ?? null)}` }] };
  });
  return server;
}

const httpServer = http.createServer();
httpServer.listen(0, "127.0.0.1", () => {
  const port = httpServer.address().port;
  const base = new URL(`http://127.0.0.1:${port}/`);
  const mcpUrl = new URL(`http://127.0.0.1:${port}/mcp`);
  const provider = new Provider();
  const app = express();
  app.use((req, _res, next) => { log(`${req.method} ${req.path} auth=${req.headers.authorization ? "yes" : "no"}`); next(); });
  if (mode === "prm-garbage") {
    app.get("/.well-known/oauth-protected-resource/mcp", (_q, res) => res.type("text/plain").send("this is not json"));
  }
  if (mode === "other-resource") {
    app.get("/.well-known/oauth-protected-resource/mcp", (_q, res) =>
      res.json({ resource: "https://elsewhere.example/mcp", authorization_servers: [base.href] }));
  }
  if (mode === "no-s256") {
    app.get("/.well-known/oauth-authorization-server", (_q, res) =>
      res.json({ issuer: base.href, authorization_endpoint: `${base.href}authorize`, token_endpoint: `${base.href}token`,
                 registration_endpoint: `${base.href}register`, response_types_supported: ["code"] }));
  }
  if (mode === "token-fail") {
    app.post("/token", (_q, res) => res.status(500).type("text/plain").send("token service down"));
  }
  app.use(mcpAuthRouter({ provider, issuerUrl: base, resourceServerUrl: mcpUrl, scopesSupported: ["mcp"] }));
  // Stateful sessions: the server remembers each client's capabilities (elicitation).
  const sessions = new Map();
  const handle = async (req, res) => {
    const id = req.headers["mcp-session-id"];
    let transport = id ? sessions.get(id) : undefined;
    if (!transport) {
      if (id) return res.status(404).json({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null });
      const server = mcpServer(req.auth?.clientId ?? "nobody");
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid) => sessions.set(sid, transport),
      });
      transport.onclose = () => { if (transport.sessionId) sessions.delete(transport.sessionId); };
      await server.connect(transport);
    }
    await transport.handleRequest(req, res, req.body);
  };
  const guard = mode === "open"
    ? (_q, _r, next) => next()
    : requireBearerAuth({ verifier: provider, resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(mcpUrl) });
  app.post("/mcp", guard, express.json(), handle);
  const existing = async (req, res) => {
    const transport = sessions.get(req.headers["mcp-session-id"]);
    if (!transport) return res.status(405).end();
    await transport.handleRequest(req, res);
  };
  app.get("/mcp", guard, existing);
  app.delete("/mcp", guard, existing);
  httpServer.on("request", app);
  process.stdout.write(JSON.stringify({ url: mcpUrl.href }) + "\n");
});
