//! keel as an MCP server (`keel mcp-server`).
