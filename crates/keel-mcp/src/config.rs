//! MCP server configuration: `[mcp_servers.NAME]` and the project's `.mcp.json`.
