// keel as the client of the conformance suite's elicitation scenarios: the suite appends the
// MCP server's URL. A fresh $KEEL_HOME names it as server `conf`; `keel run --script` (a
// canned model, no network) calls the scenario's tool, and this script plays the person on
// `--inbox-stdin`, accepting every form as offered (each field left to its default).
// Needs KEEL_BIN (the keel binary).
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";

const url = process.argv[process.argv.length - 1];
const tools = { "elicitation-sep1034-client-defaults": "test_client_elicitation_defaults" };
const tool = tools[process.env.MCP_CONFORMANCE_SCENARIO];
if (!tool) {
  console.error(`no tool known for scenario ${process.env.MCP_CONFORMANCE_SCENARIO}`);
  process.exit(2);
}
const home = fs.mkdtempSync(path.join(os.tmpdir(), "keel-conf-home-"));
const ws = fs.mkdtempSync(path.join(os.tmpdir(), "keel-conf-ws-"));
fs.writeFileSync(path.join(home, "config.toml"), `[mcp_servers.conf]\nurl = ${JSON.stringify(url)}\n`);
const script = path.join(home, "script.yaml");
fs.writeFileSync(script, `responses:
  - tool_calls:
      - { id: c1, name: mcp__conf__${tool}, arguments: {} }
  - match: { last_tool_result_contains: "" }
    text: "DONE"
`);
const keel = spawn(process.env.KEEL_BIN, ["--cwd", ws, "--approval", "auto", "run", "--script", script, "--json", "--inbox-stdin", "go"], {
  env: { ...process.env, KEEL_HOME: home },
  stdio: ["pipe", "pipe", "inherit"],
});
readline.createInterface({ input: keel.stdout }).on("line", (line) => {
  let ev;
  try { ev = JSON.parse(line); } catch { return; }
  if (ev.type === "question/asked") {
    keel.stdin.write(JSON.stringify({ answer: { call_id: ev.data.callId, answers: {} } }) + "\n");
  } else if (ev.type === "tool/result") {
    console.log(JSON.stringify(ev.data));
  } else if (ev.type === "turn/end") {
    keel.stdin.end();
  }
});
keel.on("exit", (code) => {
  fs.rmSync(home, { recursive: true, force: true });
  fs.rmSync(ws, { recursive: true, force: true });
  process.exit(code ?? 1);
});
