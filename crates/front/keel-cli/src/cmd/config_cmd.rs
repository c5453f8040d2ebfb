//! `keel config dump`: the merged configuration with the layer of each key, every MCP server
//! with where it is configured (a layer file or the `.mcp.json` path), and the model endpoint.

use super::Ctx;
use crate::cli::ConfigCommand;
use anyhow::Result;
use std::io::Write;
use std::process::ExitCode;

/// Run a `config` subcommand.
pub fn run(ctx: &Ctx, cmd: ConfigCommand) -> Result<ExitCode> {
    match cmd {
        ConfigCommand::Dump => {
            let host = ctx.host()?;
            let mut out = std::io::stdout().lock();
            let loaded = super::mcp::redacted(host.config());
            out.write_all(keel_host::config::dump(&loaded).as_bytes())?;
            out.write_all(super::mcp::dump(&host).as_bytes())?;
            let endpoint = match host.endpoint(&ctx.flags()?) {
                Ok(endpoint) => endpoint.dump(
                    |var| std::env::var(var).is_ok_and(|v| !v.trim().is_empty()),
                    &keel_host::Credentials::load(&ctx.home),
                ),
                Err(e) => format!("# endpoint: {e}\n"),
            };
            out.write_all(endpoint.as_bytes())?;
            out.write_all(trust_dump(host.config()).as_bytes())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `trust.*` lines: the workspace's decision and, when untrusted, each ignored project key or
/// file with the file that holds it.
fn trust_dump(loaded: &keel_host::config::Loaded) -> String {
    let t = &loaded.trust;
    let mut out = format!(
        "trust.workspace = {:?}  # {}\n",
        t.root.display().to_string(),
        t.describe()
    );
    for i in &loaded.ignored {
        for what in &i.what {
            out.push_str(&format!(
                "trust.ignored = {:?}  # {}\n",
                what,
                i.file.display()
            ));
        }
    }
    out
}
