//! The MCP client: configured servers started on their own runtime ([`runtime`]), each a
//! [`server::Server`] (stdio through the subprocess service, streamable HTTP through keel's reqwest client, restarts), and their tools as keel
//! tools ([`tool`]: names, schemas, result mapping; [`source`]: the set, re-listed on change).

mod http;
pub mod prompts;
pub mod resources;
pub mod runtime;
pub mod server;
pub mod source;
mod stdio;
pub mod tool;
