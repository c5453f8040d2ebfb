//! `keel mcp-server`: keel as an MCP server on stdin/stdout ([`keel_mcp_server`]), with the
//! binary's agent source ([`super::source`]): each `keel` call builds an agent on a new session
//! the way `keel run` does, in the call's `cwd` with its `sandbox`, `approval` and `model` over
//! the global flags; each `keel_reply` resumes a session the way `keel resume` does. Stdout
//! carries only the protocol: every diagnostic goes to stderr.

use super::Ctx;
use super::source::{Say, Source};
use crate::cli::McpServerArgs;
use anyhow::Result;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

/// `keel mcp-server`.
pub fn run(ctx: &Ctx, args: McpServerArgs) -> Result<ExitCode> {
    let flags = ctx.flags()?;
    let model = super::run::server_model(ctx, &flags, args.script.as_deref())?;
    let source = Source::new(ctx, flags, model, Say::NotesAndTrust).origin("mcp");
    let rt = super::run::runtime()?;
    let _ = writeln!(
        std::io::stderr(),
        "keel: MCP server on stdio (tools keel, keel_reply; workspace {})",
        ctx.cwd.display()
    );
    let served = rt.block_on(keel_mcp_server::serve_stdio(source));
    // Calls that outlived the shutdown grace are abandoned with the process.
    rt.shutdown_timeout(Duration::from_secs(1));
    served?;
    Ok(ExitCode::SUCCESS)
}
