//! Model Context Protocol for keel: the `mcp` plugin that turns every configured MCP server's
//! tools into keel tools ([`client`], [`config`]), and keel itself as an MCP server
//! ([`server`], `keel mcp-server`). Built on the official Rust SDK, `rmcp`.

#![deny(missing_docs)]

pub mod client;
pub mod config;
pub mod plugin;
pub mod server;

pub use plugin::{ID, McpPlugin};
