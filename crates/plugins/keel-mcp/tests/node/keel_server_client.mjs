// A real MCP client (the official TypeScript SDK) driving `keel mcp-server` over stdio, for
// keel-cli's tests/mcp_server.rs. It runs one scenario and prints one JSON report line on
// stdout; the Rust test asserts on the report and on the session files keel wrote.
//
//   KEEL_MCP_COMMAND=/path/to/keel KEEL_MCP_ARGS='["--base-url","…","mcp-server"]' \
//     node keel_server_client.mjs main|bad-input
//
// keel inherits this process's environment (KEEL_HOME, HOME, TMPDIR…) and stderr.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const scenario = process.argv[2];
const command = process.env.KEEL_MCP_COMMAND;
const args = JSON.parse(process.env.KEEL_MCP_ARGS ?? "[]");
const TIMEOUT = 120_000; // hang guard only

const transport = new StdioClientTransport({
  command,
  args,
  env: { ...process.env },
  stderr: "inherit",
});
const client = new Client({ name: "keel-test-client", version: "0.0.0" });
// Anything on keel's stdout that is not a protocol message shows up here. Progress for a
// request this client has just cancelled may still be on its way (the protocol allows it):
// that is kept apart.
const transportErrors = [];
const lateProgress = [];
let cancelSent = false;
client.onerror = (e) => {
  const message = String(e?.message ?? e);
  if (cancelSent && message.includes("progress notification for an unknown token")) {
    lateProgress.push(message);
  } else {
    transportErrors.push(message);
  }
};
await client.connect(transport);
// The SDK dispatches a notification in a microtask but a response at once, so a progress
// notification read in the same chunk as its request's response would be handled after it
// and dropped as "unknown token" although keel sent it first. Handing responses on a
// macrotask later restores the wire order (keel's own order is what the test checks).
const dispatch = transport.onmessage;
transport.onmessage = (message, extra) => {
  if ("id" in message && ("result" in message || "error" in message)) {
    setImmediate(() => dispatch(message, extra));
  } else {
    dispatch(message, extra);
  }
};
const say = (what) => process.stderr.write(`client: ${what}\n`);

/** Call a tool, collecting its progress messages; errors are reported, not thrown. */
async function call(name, args, extra = {}) {
  say(`call ${name} ${JSON.stringify(args)}`);
  const progress = [];
  try {
    const result = await client.callTool({ name, arguments: args }, undefined, {
      timeout: TIMEOUT,
      onprogress: (p) => {
        progress.push(p.message ?? "");
        extra.onprogress?.(p);
      },
      signal: extra.signal,
    });
    say(`${name} answered`);
    return { result, progress };
  } catch (e) {
    say(`${name} failed: ${e.message ?? e}`);
    return { error: { code: e.code ?? null, message: String(e.message ?? e) }, progress };
  }
}

const sessionOf = (progress) => {
  for (const m of progress) {
    const hit = /^session (\S+) started$/.exec(m);
    if (hit) return hit[1];
  }
  return null;
};

const report = { scenario };

if (scenario === "main") {
  report.serverVersion = client.getServerVersion();
  report.tools = (await client.listTools()).tools;

  // A task with a tool call, then a reply in the same session.
  report.first = await call("keel", { prompt: "write hello into hello.txt" });
  const sid = report.first.result?.structuredContent?.sessionId;
  report.reply = await call("keel_reply", { session_id: sid, prompt: "second question" });

  // A stalled call, a concurrent call answered meanwhile, then the stalled call cancelled.
  const abort = new AbortController();
  let stalledSession = null;
  let stepped;
  const stepping = new Promise((resolve) => (stepped = resolve));
  const stalled = call(
    "keel",
    { prompt: "stall please" },
    {
      signal: abort.signal,
      onprogress: (p) => {
        const hit = /^session (\S+) started$/.exec(p.message ?? "");
        if (hit) stalledSession = hit[1];
        if (/^turn 1 step 1$/.test(p.message ?? "")) stepped();
      },
    },
  );
  await Promise.race([
    stepping,
    new Promise((_, reject) =>
      setTimeout(() => reject(new Error("the stalled call never reported its step")), 60_000).unref(),
    ),
  ]);
  say("the stalled call is in its first step");
  report.concurrent = await call("keel", { prompt: "concurrent task" });
  cancelSent = true;
  abort.abort("the test cancels");
  report.cancelled = await stalled;
  report.cancelledSession = stalledSession;

  // The server still serves, and the cancelled session continues (once its turn has ended).
  for (let attempt = 0; attempt < 200; attempt++) {
    report.afterCancel = await call("keel_reply", {
      session_id: stalledSession,
      prompt: "after cancel",
    });
    const text = report.afterCancel.result?.content?.[0]?.text ?? "";
    if (!(report.afterCancel.result?.isError && text.includes("is running a turn"))) break;
    await new Promise((r) => setTimeout(r, 50));
  }
} else if (scenario === "bad-input") {
  report.tools = (await client.listTools()).tools.map((t) => t.name);
  report.unknownSession = await call("keel_reply", {
    session_id: "00000000-no-such-session",
    prompt: "hello?",
  });
  report.missingPrompt = await call("keel", {});
  report.badSandbox = await call("keel", { prompt: "x", sandbox: "yolo" });
  report.wrongType = await call("keel_reply", { session_id: 42, prompt: "x" });
  report.unknownTool = await call("no_such_tool", {});
  report.badCwd = await call("keel", { prompt: "x", cwd: "no/such/dir" });
} else if (scenario === "options") {
  // Every optional argument of the keel tool (keel runs with --script here).
  report.call = await call("keel", {
    prompt: "where are you?",
    cwd: "sub",
    sandbox: "read-only",
    approval: "never",
    model: "other-model",
  });
} else {
  throw new Error(`unknown scenario ${scenario}`);
}
report.transportErrors = transportErrors;
report.lateProgress = lateProgress;

say("closing");
await client.close();
say("closed");
process.stdout.write(JSON.stringify(report) + "\n");
