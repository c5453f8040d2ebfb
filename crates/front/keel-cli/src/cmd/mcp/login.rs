//! `keel mcp login NAME` and `keel mcp logout NAME`: OAuth for streamable HTTP servers
//! (keel_mcp::auth; docs/mcp.md, "OAuth").

use super::*;
use keel_mcp::auth::{self, Browser, TokenStore};
use std::time::Duration;

/// The configured streamable HTTP server `name`: its URL.
fn http_url(host: &Host, name: &str) -> Result<String> {
    let listing = listing(host, &real_var);
    let e = listing.get(name)?;
    let c = usable(host, e).map_err(|p| anyhow!("{p}"))?;
    match &c.transport {
        Transport::Http { url, .. } => Ok(url.clone()),
        Transport::Stdio { .. } => bail!(
            "MCP server '{name}' is a stdio server; OAuth is for streamable HTTP servers (`url`)"
        ),
    }
}

/// Prints the URL on stderr and, unless told not to, opens it with `$BROWSER` (a command;
/// the URL is its last argument) or the system's opener.
struct Opener {
    launch: bool,
}

impl Browser for Opener {
    fn open(&self, url: &str) {
        let _ = writeln!(
            std::io::stderr(),
            "Open this URL to authorize keel (waiting for the redirect on 127.0.0.1):\n\n  {url}\n"
        );
        if !self.launch {
            return;
        }
        let command: Vec<String> = match std::env::var("BROWSER") {
            Ok(b) if !b.trim().is_empty() => b.split_whitespace().map(str::to_owned).collect(),
            _ if cfg!(target_os = "macos") => vec!["open".into()],
            _ => vec!["xdg-open".into()],
        };
        let Some((program, args)) = command.split_first() else {
            return;
        };
        let spawned = std::process::Command::new(program)
            .args(args)
            .arg(url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        match spawned {
            // Reaped in the background; keel does not wait for the browser.
            Ok(mut child) => {
                std::thread::spawn(move || child.wait());
            }
            Err(e) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "(could not start {program}: {e}; open the URL yourself)"
                );
            }
        }
    }
}

pub(super) fn login(
    ctx: &Ctx,
    host: &Host,
    name: &str,
    no_browser: bool,
    timeout: u64,
) -> Result<ExitCode> {
    let url = http_url(host, name)?;
    let store = TokenStore::new(&ctx.home);
    let runtime = McpRuntime::start().context("cannot start the MCP runtime")?;
    let opener = Opener {
        launch: !no_browser,
    };
    let name_owned = name.to_owned();
    let url_owned = url.clone();
    let outcome = runtime
        .wait(async move {
            auth::login(
                &store,
                &name_owned,
                &url_owned,
                &opener,
                Duration::from_secs(timeout),
            )
            .await
        })
        .ok_or_else(|| anyhow!("the MCP runtime stopped during the login"))?;
    match outcome {
        Ok(token) => {
            let expiry = match token.expires_at {
                Some(at) => {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs());
                    format!("; it expires in {} s", at.saturating_sub(now))
                }
                None => String::new(),
            };
            let refresh = if token.refresh_token.is_some() {
                " (refreshable)"
            } else {
                ""
            };
            writeln!(
                std::io::stdout(),
                "logged in to MCP server '{name}' ({}){refresh}{expiry}",
                config::redact_url(&url)
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            writeln!(std::io::stderr(), "keel: login failed: {e}")?;
            Ok(ExitCode::from(1))
        }
    }
}

pub(super) fn logout(ctx: &Ctx, host: &Host, name: &str) -> Result<ExitCode> {
    let url = http_url(host, name)?;
    let store = TokenStore::new(&ctx.home);
    if store.remove(&url)? {
        writeln!(
            std::io::stdout(),
            "logged out of MCP server '{name}' ({}): its stored token is removed",
            config::redact_url(&url)
        )?;
    } else {
        writeln!(
            std::io::stdout(),
            "no stored token for MCP server '{name}' ({})",
            config::redact_url(&url)
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
