//! `keel config dump|path|get|set`: the merged configuration with the layer of each key (the
//! run's flags as layers of their own), every MCP server with where it is configured (a layer
//! file or the `.mcp.json` path), the model endpoint; one key's effective value; a key written
//! to the user's (or the project's) configuration file.

use super::Ctx;
use crate::cli::ConfigCommand;
use anyhow::{Context, Result, anyhow, bail};
use keel_host::config::Loaded;
use keel_host::{Host, ModelSource};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use toml::{Table, Value};

/// Run a `config` subcommand.
pub fn run(ctx: &Ctx, cmd: ConfigCommand) -> Result<ExitCode> {
    match cmd {
        ConfigCommand::Dump => dump(ctx),
        ConfigCommand::Path { project } => {
            writeln!(std::io::stdout(), "{}", file(ctx, project).display())?;
            Ok(ExitCode::SUCCESS)
        }
        ConfigCommand::Get { key } => get(ctx, &key),
        ConfigCommand::Set {
            key,
            value,
            project,
        } => set(ctx, &key, &value, project),
    }
}

/// The file `config set` writes.
fn file(ctx: &Ctx, project: bool) -> PathBuf {
    if project {
        ctx.cwd.join(".keel").join("config.toml")
    } else {
        ctx.home.join("config.toml")
    }
}

fn dump(ctx: &Ctx) -> Result<ExitCode> {
    let host = ctx.host()?;
    let flags = ctx.flags()?;
    let route = route(&host, &flags);
    let mut out = std::io::stdout().lock();
    let loaded = effective(ctx, &host, route.as_ref().ok())?;
    out.write_all(keel_host::config::dump(&loaded).as_bytes())?;
    out.write_all(super::mcp::dump(&host).as_bytes())?;
    let endpoint = match host.endpoint(&flags) {
        Ok(endpoint) => {
            let text = endpoint.dump(
                |var| std::env::var(var).is_ok_and(|v| !v.trim().is_empty()),
                &keel_host::Credentials::load(&ctx.home),
            );
            // The provider line, with what `--base-url` leaves of the provider.
            let rest = text.split_once('\n').map_or("", |(_, rest)| rest);
            let note = if endpoint.base_url_origin == "--base-url" {
                format!(
                    "  # --base-url: requests go to {} with no configured or stored key; the provider's other settings apply",
                    endpoint.base_url
                )
            } else {
                String::new()
            };
            let provider = route.as_ref().map_or(&endpoint.provider, |r| &r.provider);
            format!("endpoint.provider = {provider:?}{note}\n{rest}")
        }
        Err(e) => format!("# endpoint: {e}\n"),
    };
    out.write_all(endpoint.as_bytes())?;
    match &route {
        Ok(r) => out.write_all(
            format!(
                "endpoint.model = {:?}  # {}\nendpoint.context_window = {}  # {}\nendpoint.max_output = {}  # {}\n",
                r.model,
                layer(&loaded, "model"),
                r.info.context_window,
                if flags.context_window.is_some() {
                    "--context-window"
                } else {
                    "the model's"
                },
                r.info.max_output,
                if flags.max_output.is_some() {
                    "--max-output"
                } else {
                    "the model's"
                },
            )
            .as_bytes(),
        )?,
        Err(e) => out.write_all(format!("# model: {e}\n").as_bytes())?,
    }
    out.write_all(trust_dump(host.config()).as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// What the run's model route is ([`keel_host::ModelRoute`]).
struct Route {
    model: String,
    provider: String,
    info: keel_llm::ModelInfo,
}

/// The model route the run would take: model, provider name, window. The key is a placeholder
/// (nothing is sent; the dump names where the real one comes from), so a missing key does not
/// hide the rest.
fn route(host: &Host, flags: &keel_host::Flags) -> Result<Route> {
    let mut flags = flags.clone();
    flags.api_key = Some(keel_llm::ApiKey::new("placeholder", "config dump")?);
    let factory = host.factory(flags, ModelSource::Configured)?;
    let r = factory.route();
    Ok(Route {
        model: r.model.clone(),
        provider: r.provider_name.clone(),
        info: r.info,
    })
}

/// The layer that set `key` in `loaded`.
fn layer<'l>(loaded: &'l Loaded, key: &str) -> &'l str {
    loaded.origin.get(key).map_or("?", String::as_str)
}

/// The configuration as the run sees it: secrets of MCP servers hidden, and the run's typed
/// flags as layers of their own (`--model`, `--sandbox`, …) over the keys they replace; the
/// model the run uses when no layer names one.
fn effective(ctx: &Ctx, host: &Host, route: Option<&Route>) -> Result<Loaded> {
    let flags = ctx.flags()?;
    let mut loaded = super::mcp::redacted(host.config());
    let mut put = |key: &str, value: Value, layer: &str| {
        let parts: Vec<&str> = key.split('.').collect();
        let mut table = &mut loaded.table;
        for (i, part) in parts.iter().enumerate() {
            if i + 1 == parts.len() {
                table.insert((*part).to_owned(), value.clone());
                break;
            }
            let next = table
                .entry((*part).to_owned())
                .or_insert_with(|| Value::Table(Table::new()));
            if !next.is_table() {
                *next = Value::Table(Table::new());
            }
            let Value::Table(t) = next else { break };
            table = t;
        }
        loaded.origin.insert(key.to_owned(), layer.to_owned());
    };
    if let Some(m) = &flags.model {
        put("model", Value::String(m.clone()), "--model");
    } else if let Some(r) = route.filter(|_| !host.config().table.contains_key("model")) {
        put("model", Value::String(r.model.clone()), "built-in default");
    }
    if let Some(p) = &flags.provider {
        put("provider", Value::String(p.clone()), "--provider");
    }
    if let Some(s) = flags.sandbox {
        put(
            "sandbox.mode",
            Value::String(s.as_str().to_owned()),
            "--sandbox",
        );
    }
    if let Some(a) = flags.approval {
        put(
            "approval",
            Value::String(a.as_str().to_owned()),
            "--approval",
        );
    }
    if let Some(r) = route {
        // `--context-window` and `--max-output` are the run's model's.
        let (model, cw, mo) = (r.model.clone(), flags.context_window, flags.max_output);
        if let Some(n) = cw {
            let key = format!("models.{model}.context_window");
            put(&key, Value::Integer(i64::try_from(n)?), "--context-window");
        }
        if let Some(n) = mo {
            let key = format!("models.{model}.max_output");
            put(&key, Value::Integer(i64::try_from(n)?), "--max-output");
        }
    }
    Ok(loaded)
}

/// The value at dotted `key` (a part may itself hold dots: `models.gpt-4.1.max_output`).
fn lookup<'t>(table: &'t Table, key: &str) -> Option<&'t Value> {
    let parts: Vec<&str> = key.split('.').collect();
    for i in (1..=parts.len()).rev() {
        let Some(v) = table.get(&parts[..i].join(".")) else {
            continue;
        };
        if i == parts.len() {
            return Some(v);
        }
        if let Some(found) = v.as_table().and_then(|t| lookup(t, &parts[i..].join("."))) {
            return Some(found);
        }
    }
    None
}

fn get(ctx: &Ctx, key: &str) -> Result<ExitCode> {
    let host = ctx.host()?;
    let route = route(&host, &ctx.flags()?).ok();
    let loaded = effective(ctx, &host, route.as_ref())?;
    let Some(value) = lookup(&loaded.table, key) else {
        writeln!(std::io::stderr(), "keel: {key} is not set")?;
        return Ok(ExitCode::from(1));
    };
    let text = match value {
        Value::Table(t) => toml::to_string(t)?,
        other => format!("{other}\n"),
    };
    std::io::stdout().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// VALUE as TOML, else as a string.
fn parse_value(raw: &str) -> toml_edit::Value {
    format!("v = {raw}")
        .parse::<toml_edit::DocumentMut>()
        .ok()
        .and_then(|doc| doc.get("v").and_then(|i| i.as_value()).cloned())
        .map_or_else(
            || raw.into(),
            |mut v| {
                v.decor_mut().clear();
                v
            },
        )
}

fn set(ctx: &Ctx, key: &str, raw: &str, project: bool) -> Result<ExitCode> {
    let host = ctx.host()?;
    let path = file(ctx, project);
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.trim().is_empty()) {
        bail!("{key:?} is not a dotted key (like model or sandbox.mode)");
    }
    let before = super::config_file::read(&host, &path)?;
    let mut doc = super::mcp::read_doc(&host, &path)?;
    let (last, parents) = parts.split_last().ok_or_else(|| anyhow!("an empty key"))?;
    let mut table: &mut dyn toml_edit::TableLike = doc.as_table_mut();
    let mut at = String::new();
    for part in parents {
        at = if at.is_empty() {
            (*part).to_owned()
        } else {
            format!("{at}.{part}")
        };
        let item = table
            .entry(part)
            .or_insert(toml_edit::Item::Table(toml_edit::Table::new()));
        table = item
            .as_table_like_mut()
            .ok_or_else(|| anyhow!("{at} in {} is not a table", path.display()))?;
    }
    let mut value = parse_value(raw);
    match table.get_mut(last).and_then(toml_edit::Item::as_value_mut) {
        Some(old) => {
            // Keep the comment after the old value.
            *value.decor_mut() = old.decor().clone();
            *old = value;
        }
        None => {
            table.insert(last, toml_edit::Item::Value(value));
        }
    }
    super::mcp::write_doc(&host, &path, &doc)
        .with_context(|| format!("{key} = {raw} is refused; {} is unchanged", path.display()))?;
    // The merged configuration must load too, and name an endpoint when it did before
    // (`provider` naming a table).
    let flags = ctx.flags()?;
    let merged = ctx
        .host()
        .and_then(|new| match (host.endpoint(&flags), new.endpoint(&flags)) {
            (Ok(_), Err(e)) => Err(e.into()),
            _ => Ok(()),
        });
    if let Err(e) = merged {
        match &before {
            Some(text) => super::config_file::write(&host, &path, text),
            None => super::config_file::remove(&host, &path),
        }
        .with_context(|| format!("cannot restore {}", path.display()))?;
        bail!(
            "{key} = {raw} is refused: {e:#}; {} is unchanged",
            path.display()
        );
    }
    writeln!(std::io::stdout(), "{key} set in {}", path.display())?;
    let trust = &host.config().trust;
    if project && !trust.is_trusted() {
        writeln!(
            std::io::stderr(),
            "note: workspace {} is not trusted: keys of its .keel/config.toml that widen what runs are ignored until `keel trust` (docs/trust.md)",
            trust.root.display()
        )?;
    }
    Ok(ExitCode::SUCCESS)
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
