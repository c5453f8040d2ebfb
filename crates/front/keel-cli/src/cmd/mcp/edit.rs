//! `keel mcp add` and `keel mcp remove`: a server's table written to, or removed from, the
//! configuration file of a layer (comments and order kept, through `toml_edit`).

use super::*;

/// A server name: `[A-Za-z0-9_-]+`.
pub(super) fn check_name(name: &str) -> Result<()> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        bail!(
            "{name:?} is not a server name: use letters, digits, '_' and '-' only (its tools are mcp__NAME__TOOL)"
        );
    }
    Ok(())
}

pub(super) fn key_values(flag: &str, specs: &[String]) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for spec in specs {
        match spec.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                out.insert(k.trim().to_owned(), v.to_owned());
            }
            _ => bail!("{flag} {spec:?}: expected KEY=VALUE"),
        }
    }
    Ok(out)
}

pub(super) fn is_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The table `add` writes.
pub(super) fn new_table(args: &McpAddArgs) -> Result<(TomlServer, toml_edit::Table)> {
    let mut table = toml_edit::Table::new();
    let mut server = TomlServer::default();
    if let Some(url) = &args.url {
        table["url"] = toml_edit::value(url.as_str());
        server.url = Some(url.clone());
        let headers = key_values("--header", &args.headers)?;
        if !headers.is_empty() {
            let mut inline = toml_edit::InlineTable::new();
            for (k, v) in &headers {
                inline.insert(k, v.as_str().into());
            }
            table["headers"] = toml_edit::value(inline);
            server.headers = Some(headers);
        }
        if let Some(var) = &args.bearer_token_env_var {
            if !is_var_name(var) {
                bail!(
                    "--bearer-token-env-var takes the name of the environment variable holding the token (like TRACKER_TOKEN), not the token"
                );
            }
            table["bearer_token_env_var"] = toml_edit::value(var.as_str());
            server.bearer_token_env_var = Some(var.clone());
        }
    } else {
        let Some((command, rest)) = args.command.split_first() else {
            bail!(
                "give the server's command after `--` (keel mcp add NAME -- CMD ARGS…), or --url URL"
            );
        };
        table["command"] = toml_edit::value(command.as_str());
        server.command = Some(command.clone());
        if !rest.is_empty() {
            table["args"] = toml_edit::value(
                rest.iter()
                    .map(String::as_str)
                    .collect::<toml_edit::Array>(),
            );
            server.args = Some(rest.to_vec());
        }
        let env = key_values("--env", &args.env)?;
        if !env.is_empty() {
            let mut inline = toml_edit::InlineTable::new();
            for (k, v) in &env {
                inline.insert(k, v.as_str().into());
            }
            table["env"] = toml_edit::value(inline);
            server.env = Some(env);
        }
    }
    Ok((server, table))
}

pub(crate) fn read_doc(host: &Host, file: &Path) -> Result<toml_edit::DocumentMut> {
    let text = crate::cmd::config_file::read(host, file)?.unwrap_or_default();
    text.parse()
        .with_context(|| format!("{} is not valid TOML", file.display()))
}

/// Write `doc` to `file` after checking it still loads as a configuration layer.
pub(crate) fn write_doc(host: &Host, file: &Path, doc: &toml_edit::DocumentMut) -> Result<()> {
    let text = doc.to_string();
    keel_host::config::layer_from_text(&file.display().to_string(), &text)?;
    crate::cmd::config_file::write(host, file, &text)?;
    repin(host, file)
}

/// keel wrote `file` on the user's command: when it is the project's `.keel/config.toml` of a
/// trusted workspace and matched its pin before, the pin follows the write (docs/trust.md
/// "What trust pins"). A file changed since the workspace was trusted stays changed: this
/// write does not vouch for what it found there.
fn repin(host: &Host, file: &Path) -> Result<()> {
    let trust = &host.config().trust;
    let recorded = matches!(trust.source, keel_host::TrustSource::Recorded { .. });
    if !recorded || !trust.is_trusted() || trust.changed.iter().any(|c| file.ends_with(c.pinned)) {
        return Ok(());
    }
    keel_host::trust::pins::repin(&host.home().join("config.toml"), host.cwd(), file)?;
    Ok(())
}

pub(super) fn add(ctx: &Ctx, host: &Host, args: McpAddArgs) -> Result<ExitCode> {
    let name = args.name.as_str();
    check_name(name)?;
    let listing = listing(host, &display_var);
    if let Some(e) = listing.servers.get(name) {
        bail!(
            "an MCP server named '{name}' exists already (in {}); remove it first (`keel mcp remove {name}`) or pick another name",
            e.origin
        );
    }
    let (server, table) = new_table(&args)?;
    let resolved = config::from_toml(name, &server, "").map_err(|p| anyhow!(p.message))?;
    let file = if args.global {
        ctx.home.join("config.toml")
    } else {
        ctx.cwd.join(".keel").join("config.toml")
    };
    let mut doc = read_doc(host, &file)?;
    let servers = doc.as_table_mut().entry("mcp_servers").or_insert_with(|| {
        let mut t = toml_edit::Table::new();
        t.set_implicit(true);
        toml_edit::Item::Table(t)
    });
    let Some(servers) = servers.as_table_mut() else {
        bail!(
            "`mcp_servers` in {} is not a [mcp_servers] table; add the server there by hand",
            file.display()
        );
    };
    if servers.contains_key(name) {
        bail!(
            "an MCP server named '{name}' exists already (in {})",
            file.display()
        );
    }
    servers.insert(name, toml_edit::Item::Table(table));
    write_doc(host, &file, &doc)?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "added MCP server '{name}' ({}: {}) to {}",
        kind(&resolved.transport),
        resolved.transport.describe(),
        file.display()
    )?;
    let trust = &host.config().trust;
    if args.global || trust.is_trusted() {
        writeln!(out, "check it with `keel mcp test {name}`")?;
    } else {
        writeln!(
            std::io::stderr(),
            "warning: workspace {} is not trusted, so keel will not start '{name}' (nor any server of its .keel/config.toml): \
             run `keel trust` to trust it (docs/trust.md), or remove it (`keel mcp remove {name}`) and add it to your own \
             {} instead with `keel mcp add --global {name} …`",
            trust.root.display(),
            ctx.home.join("config.toml").display()
        )?;
    }
    let secrets: Vec<&String> = match &resolved.transport {
        Transport::Stdio { env, .. } => env.keys().filter(|k| secret_env(k)).collect(),
        Transport::Http { headers, .. } => headers.keys().filter(|k| secret_header(k)).collect(),
    };
    for k in secrets {
        writeln!(
            std::io::stderr(),
            "note: {k} looks secret; its value is stored in plain text in {}",
            file.display()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether a layer name is a file (not `defaults`, not a `-c` flag).
pub(super) fn is_file_layer(layer: &str) -> bool {
    layer != "defaults" && !layer.starts_with("-c ")
}

pub(super) fn remove(host: &Host, name: &str) -> Result<ExitCode> {
    let listing = listing(host, &display_var);
    let e = listing.get(name)?;
    let layers: Vec<String> = match &e.source {
        Source::McpJson { path } => bail!(
            "MCP server '{name}' is configured in {}, Claude Code's file, which keel only reads: remove it there. \
             (To turn it off for keel alone, add `[mcp_servers.{name}]` with `enabled = false` to keel's configuration.)",
            path.display()
        ),
        Source::Bundle { plugin } => bail!(
            "MCP server '{name}' comes from plugin {plugin}: `keel plugin disable {plugin}` turns it off, `keel plugin remove {plugin}` removes it"
        ),
        Source::Toml { layers } => layers.clone(),
        Source::LeftOut { path } => vec![path.display().to_string()],
    };
    let (files, flags): (Vec<&String>, Vec<&String>) =
        layers.iter().partition(|l| is_file_layer(l));
    if files.is_empty() {
        bail!(
            "MCP server '{name}' is set by {}, not by a file; there is nothing to remove",
            e.origin
        );
    }
    let mut out = std::io::stdout().lock();
    for layer in files {
        let file = PathBuf::from(layer);
        let mut doc = read_doc(host, &file)?;
        let servers = doc
            .get_mut("mcp_servers")
            .and_then(toml_edit::Item::as_table_like_mut)
            .ok_or_else(|| anyhow!("{} has no [mcp_servers] table", file.display()))?;
        if servers.remove(name).is_none() {
            bail!("{} has no [mcp_servers.{name}]", file.display());
        }
        let empty_implicit = doc
            .get("mcp_servers")
            .and_then(toml_edit::Item::as_table)
            .is_some_and(|t| t.is_empty() && t.is_implicit());
        if empty_implicit {
            doc.remove("mcp_servers");
        }
        write_doc(host, &file, &doc)?;
        writeln!(out, "removed MCP server '{name}' from {}", file.display())?;
    }
    for flag in flags {
        writeln!(
            out,
            "note: `{flag}` still sets keys of '{name}' for this command line"
        )?;
    }
    if let Some(path) = &e.overrides {
        writeln!(
            out,
            "note: the server of the same name in {path} is used from now on"
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
