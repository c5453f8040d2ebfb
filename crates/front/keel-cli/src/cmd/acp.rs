//! `keel acp`: keel as an Agent Client Protocol agent on stdin/stdout ([`keel_acp`]), for
//! editors such as Zed. Every ACP session's agent is built here like `keel run`'s (a new
//! session in the client's `cwd`) or `keel resume`'s (`session/load` of any keel session id).
//! Stdout carries only the protocol: every diagnostic goes to stderr.

use super::Ctx;
use super::source::{Say, Source};
use crate::cli::AcpArgs;
use anyhow::Result;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

/// `keel acp`.
pub fn run(ctx: &Ctx, args: AcpArgs) -> Result<ExitCode> {
    let flags = ctx.flags()?;
    let model = super::run::server_model(ctx, &flags, args.script.as_deref())?;
    let lineage = args.delegated_from.map(|parent| {
        (
            keel_protocol::SessionId(parent),
            args.delegation_depth.unwrap_or(1),
        )
    });
    let source = Source::new(ctx, flags, model, Say::Notes)
        .origin("acp")
        .lineage(lineage);
    let rt = super::run::runtime()?;
    let _ = writeln!(
        std::io::stderr(),
        "keel: ACP agent on stdio (workspace {})",
        ctx.cwd.display()
    );
    let served = rt.block_on(keel_acp::serve_stdio(source));
    rt.shutdown_timeout(Duration::from_secs(1));
    served.map_err(|e| anyhow::anyhow!("ACP connection failed: {}", e.message))?;
    Ok(ExitCode::SUCCESS)
}
