//! Model Context Protocol for keel: the `mcp` plugin that turns every configured MCP server's
//! tools into keel tools ([`client`], [`config`]). Built on the official Rust SDK, `rmcp`.
//! keel itself as an MCP server (`keel mcp-server`) is a front end: the `keel-mcp-server`
//! crate.

#![deny(missing_docs)]

pub mod auth;
pub mod bundles;
pub mod client;
pub mod config;
pub mod elicit;
pub mod plugin;
pub mod presenter;

pub use plugin::{ID, McpPlugin};
