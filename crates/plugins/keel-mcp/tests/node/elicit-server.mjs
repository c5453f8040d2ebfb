// A raw stdio MCP server (no SDK) for keel's elicitation tests, speaking the 2026-07-28
// multi-round form whatever version was negotiated:
//   `greet`   answers its first call with {resultType: "input_required", inputRequests:
//             {user_name: elicitation/create form}, requestState: "s1"} and the retry (with
//             inputResponses and the echoed requestState) with "Hello, NAME!" (or what came
//             back, when it was not an accepted form);
//   `nested`  sends elicitation/create with a schema keel cannot ask (an object field) and
//             answers with the action it got back.
import readline from "node:readline";

const send = (msg) => process.stdout.write(JSON.stringify(msg) + "\n");
const tools = [
  { name: "greet", description: "greets the person", inputSchema: { type: "object", properties: {} } },
  { name: "nested", description: "asks a nested form", inputSchema: { type: "object", properties: {} } },
];
let next = 1000;
const waiting = new Map();

const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  if (msg.id !== undefined && msg.method === undefined) {
    const done = waiting.get(msg.id);
    waiting.delete(msg.id);
    if (done) done(msg);
    return;
  }
  if (msg.id === undefined) return;
  switch (msg.method) {
    case "initialize":
      send({ jsonrpc: "2.0", id: msg.id, result: {
        protocolVersion: msg.params?.protocolVersion ?? "2025-11-25",
        capabilities: { tools: {} }, serverInfo: { name: "elicit", version: "0.0.0" } } });
      break;
    case "tools/list":
      send({ jsonrpc: "2.0", id: msg.id, result: { tools } });
      break;
    case "tools/call": {
      const p = msg.params ?? {};
      if (p.name === "greet") {
        const r = p.inputResponses?.user_name;
        if (!r) {
          send({ jsonrpc: "2.0", id: msg.id, result: {
            resultType: "input_required",
            inputRequests: { user_name: { method: "elicitation/create", params: {
              mode: "form", message: "What is your name?",
              requestedSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] } } } },
            requestState: "s1" } });
        } else {
          const text = r.action === "accept" && p.requestState === "s1"
            ? `Hello, ${r.content.name}!`
            : `no name: ${JSON.stringify(r)} state=${p.requestState}`;
          send({ jsonrpc: "2.0", id: msg.id, result: { content: [{ type: "text", text }] } });
        }
      } else if (p.name === "nested") {
        const id = next++;
        waiting.set(id, (reply) => send({ jsonrpc: "2.0", id: msg.id, result: {
          content: [{ type: "text", text: `reply=${JSON.stringify(reply.result ?? reply.error)}` }] } }));
        send({ jsonrpc: "2.0", id, method: "elicitation/create", params: {
          mode: "form", message: "Where do you live?",
          requestedSchema: { type: "object", properties: { address: { type: "object", properties: { city: { type: "string" } } } } } } });
      } else {
        send({ jsonrpc: "2.0", id: msg.id, error: { code: -32602, message: `no tool ${p.name}` } });
      }
      break;
    }
    default:
      send({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: `no method ${msg.method}` } });
  }
});
