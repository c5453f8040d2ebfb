// An MCP server built on the official TypeScript SDK whose tool set changes while a client is
// connected: calling `unlock` registers a `secret` tool, and the SDK sends
// `notifications/tools/list_changed` on its own (as every SDK server does on registerTool).
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";

const server = new McpServer({ name: "dynamic", version: "0.0.0" });
server.registerTool("unlock", { description: "adds the secret tool" }, async () => {
  if (!unlocked) {
    unlocked = true;
    server.registerTool("secret", { description: "tells the secret" }, async () => ({
      content: [{ type: "text", text: "the secret is 7421" }],
    }));
  }
  return { content: [{ type: "text", text: "unlocked" }] };
});
let unlocked = false;
await server.connect(new StdioServerTransport());
