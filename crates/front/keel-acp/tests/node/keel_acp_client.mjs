// A real ACP client (the official TypeScript SDK, pinned in package-lock.json) driving
// `keel acp` for keel's tests (crates/front/keel-cli/tests/acp.rs). It spawns the binary named by
// KEEL_ACP_COMMAND with the JSON array of KEEL_ACP_ARGS, runs a scenario and prints one JSON
// report as its last stdout line; the Rust test asserts on it.
//
// Scenario `main`: initialize; session/new in WORKSPACE; plan mode; a prompt that reads and
// edits notes.txt, with the plan's permission request answered "allow once"; a prompt whose
// `bash sleep 30` is cancelled mid-tool; stdin closed. Then a second process loads the session
// and the replayed updates are recorded, and a missing session id is loaded. Scenarios
// `editor`, `reload`, `ask` and `rewind` are described where they are defined.
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const command = process.env.KEEL_ACP_COMMAND;
const args = JSON.parse(process.env.KEEL_ACP_ARGS ?? "[]");
const workspace = process.env.WORKSPACE;

/** Start `keel acp` and connect an SDK client to it; `updates` and `permissions` fill up.
 * With `editor` (a map of absolute path → unsaved buffer text) the client also serves
 * fs/read_text_file (the buffer when it has one, else the disk) and fs/write_text_file (the
 * buffer and the disk), recording each write in `writes`. */
function start(answer, editor, elicit) {
  const child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const updates = [];
  const permissions = [];
  const reads = [];
  const writes = [];
  let app = acp
    .client({ name: "keel-acp-test" })
    .onNotification("session/update", ({ params }) => {
      updates.push(params);
    })
    .onRequest("session/request_permission", async ({ params: req }) => {
      permissions.push(req);
      return { outcome: { outcome: "selected", optionId: answer(req) } };
    });
  if (elicit) {
    app = app.onRequest("elicitation/create", async ({ params: req }) => elicit(req));
  }
  if (editor) {
    app = app
      .onRequest("fs/read_text_file", async ({ params: req }) => {
        reads.push(req.path);
        const content = editor.has(req.path) ? editor.get(req.path) : readFileSync(req.path, "utf8");
        return { content };
      })
      .onRequest("fs/write_text_file", async ({ params: req }) => {
        writes.push({ path: req.path, content: req.content });
        editor.set(req.path, req.content);
        writeFileSync(req.path, req.content);
        return {};
      });
  }
  const conn = app.connect(stream);
  return { child, conn, ctx: conn.agent, updates, permissions, reads, writes, exited, stderr: () => stderr };
}

/** The compact shape of an update the Rust test compares. */
function shape(n) {
  const u = n.update;
  const out = { kind: u.sessionUpdate };
  switch (u.sessionUpdate) {
    case "agent_message_chunk":
    case "agent_thought_chunk":
    case "user_message_chunk":
      out.text = u.content?.text;
      break;
    case "tool_call":
      Object.assign(out, {
        id: u.toolCallId,
        title: u.title,
        toolKind: u.kind,
        status: u.status,
        locations: (u.locations ?? []).map((l) => l.path),
        content: u.content ?? [],
      });
      break;
    case "tool_call_update":
      Object.assign(out, {
        id: u.toolCallId,
        status: u.status,
        text: (u.content ?? []).map((c) => c.content?.text ?? "").join(""),
      });
      break;
    case "plan":
      out.entries = u.entries;
      break;
    case "current_mode_update":
      out.mode = u.currentModeId;
      break;
    default:
      break;
  }
  return out;
}

async function errorOf(p) {
  try {
    return { result: await p };
  } catch (e) {
    return { error: { code: e.code, message: e.message } };
  }
}

async function main() {
  const report = {};
  const first = start((req) => "allow_once");
  const { ctx } = first;
  report.initialize = await ctx.request("initialize", {
    protocolVersion: 1,
    clientCapabilities: {},
    clientInfo: { name: "keel-acp-test", version: "0" },
  });
  const session = await ctx.request("session/new", { cwd: workspace, mcpServers: [] });
  report.newSession = session;
  const sessionId = session.sessionId;
  report.setMode = await ctx.request("session/set_mode", { sessionId, modeId: "plan" });

  // Turn 1: plan, approval, read and edit.
  let mark = first.updates.length;
  const edit = await ctx.request("session/prompt", {
    sessionId,
    prompt: [{ type: "text", text: "please fix the greeting in notes.txt" }],
  });
  report.edit = {
    stopReason: edit.stopReason,
    updates: first.updates.slice(mark).map(shape),
    permissions: first.permissions.map((p) => ({
      title: p.toolCall.title,
      toolKind: p.toolCall.kind,
      options: p.options.map((o) => [o.optionId, o.kind]),
      content: p.toolCall.content ?? [],
    })),
  };

  // Turn 2: cancelled while `bash sleep 30` runs.
  mark = first.updates.length;
  const started = Date.now();
  const slow = ctx.request("session/prompt", {
    sessionId,
    prompt: [{ type: "text", text: "run the slow command" }],
  });
  // Wait for the bash tool call to be announced, then cancel.
  for (let i = 0; i < 600; i++) {
    if (first.updates.slice(mark).some((n) => n.update.sessionUpdate === "tool_call" && n.update.kind === "execute")) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  await new Promise((r) => setTimeout(r, 300));
  await ctx.notify("session/cancel", { sessionId });
  const cancelled = await slow;
  report.cancel = {
    stopReason: cancelled.stopReason,
    seconds: (Date.now() - started) / 1000,
    updates: first.updates.slice(mark).map(shape),
  };

  first.child.stdin.end();
  report.firstExit = await first.exited;

  // A second process loads the session: the history comes back as updates.
  const second = start(() => "reject");
  await second.ctx.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
  const loaded = await second.ctx.request("session/load", { sessionId, cwd: workspace, mcpServers: [] });
  report.load = { response: loaded, updates: second.updates.map(shape) };
  report.missing = await errorOf(
    second.ctx.request("session/load", { sessionId: "no-such-session-0000", cwd: workspace, mcpServers: [] }),
  );
  // A prompt with an image: the default model has no vision, so keel refuses it.
  report.image = await errorOf(
    second.ctx.request("session/prompt", {
      sessionId,
      prompt: [{ type: "image", mimeType: "image/png", data: "iVBORw0KGgo=" }],
    }),
  );
  second.child.stdin.end();
  report.secondExit = await second.exited;
  report.stderr = first.stderr() + second.stderr();
  return report;
}

// Scenario `editor`: a client offering its file system and an MCP server of its own. A prompt
// reads notes.txt (an unsaved buffer differs from the disk), edits it and writes a new file
// through the client, and calls the session's MCP server; then the read-only mode (a write
// refused, a command asked about and allowed always, the same command again not asked) and
// the auto mode; then a second process loads the session.
async function editor() {
  const report = {};
  const notes = `${workspace}/notes.txt`;
  const buffers = new Map([[notes, "an unsaved draft\n"]]);
  const answer = (req) => (req.toolCall.kind === "execute" ? "allow_always" : "reject");
  const first = start(answer, buffers);
  const { ctx } = first;
  report.initialize = await ctx.request("initialize", {
    protocolVersion: 1,
    clientCapabilities: { fs: { readTextFile: true, writeTextFile: true } },
  });
  const session = await ctx.request("session/new", {
    cwd: workspace,
    mcpServers: [{ name: "scratch", command: process.env.MCP_EVERYTHING, args: ["stdio"], env: [] }],
  });
  report.newSession = session;
  const sessionId = session.sessionId;
  const prompt = async (text) => {
    const mark = first.updates.length;
    const asked = first.permissions.length;
    const answer = await ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
    return {
      stopReason: answer.stopReason,
      updates: first.updates.slice(mark).map(shape),
      permissions: first.permissions.slice(asked).map((p) => p.toolCall.title),
    };
  };
  report.tidy = await prompt("tidy notes");
  report.reads = first.reads;
  report.writes = first.writes;
  report.readOnly = await ctx.request("session/set_mode", { sessionId, modeId: "read-only" });
  report.look = await prompt("look around");
  report.auto = await ctx.request("session/set_mode", { sessionId, modeId: "auto" });
  report.badMode = await errorOf(ctx.request("session/set_mode", { sessionId, modeId: "yolo" }));
  report.modeUpdates = first.updates.filter((n) => n.update.sessionUpdate === "current_mode_update").map(shape);
  first.child.stdin.end();
  report.firstExit = await first.exited;

  const second = start(() => "reject");
  await second.ctx.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
  report.load = await second.ctx.request("session/load", { sessionId, cwd: workspace, mcpServers: [] });
  second.child.stdin.end();
  report.secondExit = await second.exited;
  report.stderr = first.stderr() + second.stderr();
  return report;
}

// Scenario `reload`: a mode is the session's. The first process sets `read-only` and is
// killed (SIGKILL: no goodbye); a new process loads the session and runs a prompt whose command
// must be asked about (the client rejects it).
async function reload() {
  const report = {};
  const first = start(() => "reject");
  await first.ctx.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
  const session = await first.ctx.request("session/new", { cwd: workspace, mcpServers: [] });
  const sessionId = session.sessionId;
  report.newSession = session;
  report.setMode = await first.ctx.request("session/set_mode", { sessionId, modeId: "read-only" });
  first.child.kill("SIGKILL");
  report.firstExit = await first.exited;

  const second = start(() => "reject");
  await second.ctx.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
  report.load = await second.ctx.request("session/load", { sessionId, cwd: workspace, mcpServers: [] });
  const mark = second.updates.length;
  const answer = await second.ctx.request("session/prompt", {
    sessionId,
    prompt: [{ type: "text", text: "check the build" }],
  });
  report.prompt = {
    stopReason: answer.stopReason,
    updates: second.updates.slice(mark).map(shape),
    permissions: second.permissions.map((p) => ({ title: p.toolCall.title, toolKind: p.toolCall.kind })),
  };
  second.child.stdin.end();
  report.secondExit = await second.exited;
  report.stderr = first.stderr() + second.stderr();
  return report;
}

// Scenario `ask`: ask_user_question. A client declaring form elicitation gets one
// elicitation/create form for all the questions and accepts it; a client without it is asked
// each question that has options as a permission request (the language: the second option;
// anything else: the first), and a form-less client is not asked the free-text question.
async function ask() {
  const report = {};
  const forms = [];
  const elicit = (req) => {
    forms.push(req);
    return { action: "accept", content: { lang: "Go", features: ["auth", "metrics"], name: "keelboat" } };
  };
  const first = start(() => "skip", undefined, elicit);
  report.initialize = await first.ctx.request("initialize", {
    protocolVersion: 1,
    clientCapabilities: { elicitation: { form: {} } },
  });
  const one = await first.ctx.request("session/new", { cwd: workspace, mcpServers: [] });
  const formAnswer = await first.ctx.request("session/prompt", {
    sessionId: one.sessionId,
    prompt: [{ type: "text", text: "ask with a form" }],
  });
  report.form = {
    sessionId: one.sessionId,
    stopReason: formAnswer.stopReason,
    forms,
    permissions: first.permissions.length,
    text: first.updates.map(shape).filter((u) => u.kind === "agent_message_chunk").map((u) => u.text).join(""),
  };
  first.child.stdin.end();
  report.firstExit = await first.exited;

  const pick = (req) => (req.toolCall.title.startsWith("Language") ? req.options[1].optionId : req.options[0].optionId);
  const second = start(pick);
  await second.ctx.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
  const two = await second.ctx.request("session/new", { cwd: workspace, mcpServers: [] });
  const permAnswer = await second.ctx.request("session/prompt", {
    sessionId: two.sessionId,
    prompt: [{ type: "text", text: "ask by permission" }],
  });
  report.permission = {
    sessionId: two.sessionId,
    stopReason: permAnswer.stopReason,
    permissions: second.permissions.map((p) => ({
      title: p.toolCall.title,
      options: p.options.map((o) => [o.optionId, o.name, o.kind]),
    })),
    text: second.updates.map(shape).filter((u) => u.kind === "agent_message_chunk").map((u) => u.text).join(""),
  };
  second.child.stdin.end();
  report.secondExit = await second.exited;
  report.stderr = first.stderr() + second.stderr();
  return report;
}

/** Scenario `rewind`: a prompt whose `bash` changes notes.txt (allowed once), then the
 * `/rewind 1` and `/rewind undo` commands; notes.txt is read after each. */
async function rewind() {
  const c = start((req) => (req.options.find((o) => o.kind === "allow_once") ?? req.options[0]).optionId);
  await c.ctx.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
  const s = await c.ctx.request("session/new", { cwd: workspace, mcpServers: [] });
  const say = async (text) => {
    const before = c.updates.length;
    const r = await c.ctx.request("session/prompt", { sessionId: s.sessionId, prompt: [{ type: "text", text }] });
    const said = c.updates.slice(before).map(shape).filter((u) => u.kind === "agent_message_chunk");
    return { stopReason: r.stopReason, text: said.map((u) => u.text).join("") };
  };
  const notes = () => readFileSync(`${workspace}/notes.txt`, "utf8");
  const report = {};
  report.change = await say("change the notes");
  report.afterChange = notes();
  report.rewind = await say("/rewind 1");
  report.afterRewind = notes();
  report.undo = await say("/rewind undo");
  report.afterUndo = notes();
  report.commands = c.updates
    .filter((u) => u.update.sessionUpdate === "available_commands_update")
    .flatMap((u) => u.update.availableCommands.map((cmd) => cmd.name));
  c.child.stdin.end();
  report.exit = await c.exited;
  report.stderr = c.stderr();
  return report;
}

const scenario = process.argv[2] ?? "main";
const run = { main, editor, reload, ask, rewind }[scenario];
if (!run) {
  console.error(`unknown scenario ${scenario}`);
  process.exit(2);
}
const timer = setTimeout(() => {
  console.error("the scenario did not finish in 90 s");
  process.exit(3);
}, 90_000);
run()
  .then((report) => {
    clearTimeout(timer);
    console.log(JSON.stringify(report));
    process.exit(0);
  })
  .catch((e) => {
    clearTimeout(timer);
    console.error(e?.stack ?? String(e));
    process.exit(1);
  });
