// A minimal streamable HTTP front for a stdio MCP server, so the conformance suite's server
// scenarios (which speak HTTP) can reach `keel mcp-server` (which speaks stdio). It passes
// JSON-RPC messages through unchanged and adds nothing of its own to the protocol:
//   - POST `initialize` without a session: a new server process, its id as Mcp-Session-Id;
//   - POST with Mcp-Session-Id: that session's process;
//   - POST anything else without a session (2026-07-28 is stateless): one shared process;
//   - a request waits for the response with its id (JSON answer); a notification or response
//     gets 202; DELETE ends the session; GET is 405 (no server-initiated stream);
//   - a stateless request's error answer gets the HTTP status the 2026-07-28 streamable HTTP
//     transport gives it (404 for -32601, 400 for the others), from its JSON-RPC code alone.
// Usage: node stdio-bridge.mjs COMMAND [ARGS…]; prints `listening PORT` when ready. Not for
// anything but tests: loopback only, no authentication.
import http from "node:http";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import readline from "node:readline";

const [command, ...args] = process.argv.slice(2);
const sessions = new Map();

function start() {
  const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
  const waiting = new Map();
  readline.createInterface({ input: child.stdout }).on("line", (line) => {
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      return;
    }
    if (msg.id !== undefined && msg.method === undefined) {
      const key = JSON.stringify(msg.id);
      const resolve = waiting.get(key);
      if (resolve) {
        waiting.delete(key);
        resolve(msg);
      }
    }
    // Server requests and notifications have nowhere to go without a GET stream: dropped.
  });
  const ended = new Promise((resolve) => child.on("exit", resolve));
  return {
    child,
    send(msg) {
      child.stdin.write(JSON.stringify(msg) + "\n");
      if (msg.method === undefined || msg.id === undefined) return null;
      return new Promise((resolve) => {
        waiting.set(JSON.stringify(msg.id), resolve);
        ended.then(() =>
          resolve({ jsonrpc: "2.0", id: msg.id, error: { code: -32603, message: "the server exited" } }),
        );
      });
    },
  };
}

let shared = null;

const server = http.createServer((req, res) => {
  const sid = req.headers["mcp-session-id"];
  if (req.method === "DELETE") {
    const s = sessions.get(sid);
    if (s) {
      s.child.kill();
      sessions.delete(sid);
    }
    res.writeHead(s ? 200 : 404).end();
    return;
  }
  if (req.method !== "POST") {
    res.writeHead(405, { Allow: "POST, DELETE" }).end();
    return;
  }
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", async () => {
    let msg;
    try {
      msg = JSON.parse(body);
    } catch (e) {
      res.writeHead(400, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32700, message: `Parse error: ${e}` } }));
      return;
    }
    let session;
    const headers = { "Content-Type": "application/json" };
    if (sid !== undefined) {
      session = sessions.get(sid);
      if (!session) {
        res.writeHead(404, headers).end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32001, message: "Session not found" } }));
        return;
      }
    } else if (msg.method === "initialize") {
      session = start();
      const id = randomUUID();
      sessions.set(id, session);
      headers["Mcp-Session-Id"] = id;
    } else {
      shared ??= start();
      session = shared;
    }
    const answer = session.send(msg);
    if (!answer) {
      res.writeHead(202).end();
      return;
    }
    const reply = await answer;
    let status = 200;
    if (session === shared && reply.error) status = reply.error.code === -32601 ? 404 : 400;
    res.writeHead(status, headers).end(JSON.stringify(reply));
  });
});

server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
const stop = () => {
  for (const s of sessions.values()) s.child.kill();
  shared?.child.kill();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
