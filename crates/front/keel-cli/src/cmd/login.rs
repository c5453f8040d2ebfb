//! `keel login PROVIDER [--stdin]` and `keel logout PROVIDER`: a provider's API key stored in
//! `$KEEL_HOME/credentials.toml` ([`keel_host::credentials`]), never printed.

use super::Ctx;
use crate::cli::{LoginArgs, LogoutArgs};
use anyhow::{Context, Result, bail};
use keel_host::Credentials;
use keel_host::endpoint::DEEPSEEK_PROVIDER;
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

/// Run `keel login`.
pub fn login(ctx: &Ctx, args: &LoginArgs) -> Result<ExitCode> {
    let host = ctx.host()?;
    let provider = args.provider.as_str();
    let providers = &host.config().config.providers;
    if provider != DEEPSEEK_PROVIDER && !providers.contains_key(provider) {
        let mut known: Vec<&str> = providers.keys().map(String::as_str).collect();
        if !known.contains(&DEEPSEEK_PROVIDER) {
            known.insert(0, DEEPSEEK_PROVIDER);
        }
        bail!(
            "unknown provider {provider:?}: known providers are {} (add a [providers.{provider}] \
             table with base_url to the configuration first)",
            known.join(", ")
        );
    }
    // Read the store first: a file keel cannot read is reported, and never overwritten.
    let mut store = Credentials::load(&ctx.home)?;
    let text = if args.stdin || !std::io::stdin().is_terminal() {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .context("cannot read the key from stdin")?;
        line
    } else {
        rpassword::prompt_password(format!("API key for {provider} (not echoed): "))
            .context("cannot read the key from the terminal")?
    };
    if text.trim().is_empty() {
        bail!("no key read: nothing was stored (type or pipe the key, then Enter)");
    }
    let key = keel_llm::ApiKey::new(&text, "the key given to keel login")?;
    store.set(provider, key);
    store.save()?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "saved the key for {provider} in {} (mode 600)",
        store.path().display()
    )?;
    // Say when the environment will win over it.
    let flags = keel_host::Flags {
        provider: Some(provider.to_owned()),
        ..keel_host::Flags::default()
    };
    if let Ok(endpoint) = host.endpoint(&flags) {
        let var = endpoint.key.and_then(|k| k.var);
        if let Some(var) = var.filter(|v| std::env::var(v).is_ok_and(|x| !x.trim().is_empty())) {
            writeln!(
                out,
                "note: {var} is set in this environment and wins over the stored key"
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Run `keel logout`.
pub fn logout(ctx: &Ctx, args: &LogoutArgs) -> Result<ExitCode> {
    let provider = args.provider.as_str();
    let mut store = Credentials::load(&ctx.home)?;
    let mut out = std::io::stdout().lock();
    if store.remove(provider) {
        store.save()?;
        writeln!(
            out,
            "removed the stored key for {provider} from {}",
            store.path().display()
        )?;
    } else {
        writeln!(
            out,
            "no key stored for {provider} in {}",
            store.path().display()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
