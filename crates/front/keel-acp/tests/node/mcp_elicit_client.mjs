// An ACP client (the official TypeScript SDK) driving `keel acp` for keel's test of an MCP
// server's elicitation reaching the editor (crates/front/keel-cli/tests/acp_mcp_elicit.rs):
// the client declares form elicitation, allows each permission request once, answers the
// elicitation/create form with {name: "Ada", color: "green"}, and prints one JSON report
// (the forms it got, the agent's text) as its last stdout line.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const command = process.env.KEEL_ACP_COMMAND;
const args = JSON.parse(process.env.KEEL_ACP_ARGS ?? "[]");
const workspace = process.env.WORKSPACE;

const forms = [];
const updates = [];
const child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"] });
let stderr = "";
child.stderr.on("data", (d) => (stderr += d));
const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const conn = acp
  .client({ name: "keel-acp-mcp-elicit-test" })
  .onNotification("session/update", ({ params }) => updates.push(params))
  .onRequest("session/request_permission", async ({ params: req }) => ({
    outcome: { outcome: "selected", optionId: (req.options.find((o) => o.kind === "allow_once") ?? req.options[0]).optionId },
  }))
  .onRequest("elicitation/create", async ({ params: req }) => {
    forms.push(req);
    return { action: "accept", content: { name: "Ada", color: "green" } };
  })
  .connect(stream);
const timer = setTimeout(() => {
  console.error(`the scenario did not finish in 90 s; keel said:\n${stderr}`);
  process.exit(3);
}, 90_000);
const ctx = conn.agent;
await ctx.request("initialize", { protocolVersion: 1, clientCapabilities: { elicitation: { form: {} } } });
const session = await ctx.request("session/new", { cwd: workspace, mcpServers: [] });
const answer = await ctx.request("session/prompt", {
  sessionId: session.sessionId,
  prompt: [{ type: "text", text: "ask me" }],
});
child.stdin.end();
await exited;
clearTimeout(timer);
const text = updates
  .filter((u) => u.update.sessionUpdate === "agent_message_chunk")
  .map((u) => u.update.content?.text ?? "")
  .join("");
console.log(JSON.stringify({ stopReason: answer.stopReason, forms, text, stderr }));
process.exit(0);
