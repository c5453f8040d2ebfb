// A misbehaving MCP server for keel's bad-input tests (raw JSON-RPC over stdio, no SDK): tool
// names with spaces and of 200 characters, a schema that is not an object schema, a 50 MB
// result, a tool whose call is answered with garbage on stdout (then the server exits), one
// that crashes the server, and one answered by a single 70 MiB line.
import readline from "node:readline";

const send = (msg) => process.stdout.write(JSON.stringify(msg) + "\n");
const tools = [
  { name: "ok", description: "answers fine", inputSchema: { type: "object" } },
  { name: "huge", description: "50 MB of text", inputSchema: { type: "object", properties: {} } },
  { name: "garbage", description: "answers with garbage", inputSchema: { type: "object" } },
  { name: "crash", description: "the server exits", inputSchema: { type: "object" } },
  { name: "oversized", description: "a 70 MiB line", inputSchema: { type: "object" } },
  { name: "with spaces here", description: "a name with spaces", inputSchema: { type: "object" } },
  { name: "x".repeat(200), description: "a 200-character name", inputSchema: { type: "object" } },
  { name: "bad schema", description: "not an object schema", inputSchema: { type: "array", items: {} } },
];

const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  if (msg.id === undefined) return; // a notification
  switch (msg.method) {
    case "initialize":
      send({
        jsonrpc: "2.0",
        id: msg.id,
        result: {
          protocolVersion: msg.params?.protocolVersion ?? "2025-06-18",
          capabilities: { tools: {} },
          serverInfo: { name: "bad", version: "0.0.0" },
        },
      });
      break;
    case "tools/list":
      send({ jsonrpc: "2.0", id: msg.id, result: { tools } });
      break;
    case "tools/call": {
      const name = msg.params?.name;
      if (name === "crash") process.exit(1);
      if (name === "oversized") {
        process.stdout.write('{"jsonrpc":"2.0","id":' + JSON.stringify(msg.id) + ',"result":{"content":[{"type":"text","text":"' + "z".repeat(70 * 1024 * 1024) + '"}]}}\n');
        return;
      }
      if (name === "garbage") {
        process.stdout.write("this is not JSON-RPC {{{\n", () => process.exit(3));
        return;
      }
      const text = name === "huge" ? "HUGE-START " + "y".repeat(50 * 1024 * 1024) : "fine";
      send({ jsonrpc: "2.0", id: msg.id, result: { content: [{ type: "text", text }] } });
      break;
    }
    default:
      send({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "no such method" } });
  }
});
