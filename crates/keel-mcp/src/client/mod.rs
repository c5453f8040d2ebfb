//! The MCP client: configured servers started on their own runtime ([`runtime`]), each a
//! [`server::Server`] (stdio through the subprocess service, streamable HTTP through keel's reqwest client, restarts), and their tools as keel
//! tools ([`tool`]: names, schemas, result mapping).

mod http;
pub mod resources;
pub mod runtime;
pub mod server;
mod stdio;
pub mod tool;
