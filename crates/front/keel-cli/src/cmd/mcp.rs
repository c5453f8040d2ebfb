//! `keel mcp list|get|add|remove|test|prompts`, and the MCP lines of `keel config dump`
//! (docs/mcp.md, "Managing servers: keel mcp").
//!
//! Servers come from the `[mcp_servers.NAME]` tables of the configuration layers (the origin of
//! one is the layer file(s) that set its keys) and from the project's `.mcp.json` (its path).
//! What is shown never holds a secret: `.mcp.json` values are shown as written (`${VAR}` is not
//! expanded for display), environment values and headers whose names look secret are hidden,
//! and a bearer token is only ever named by its variable. `test` and `prompts` start servers
//! the way `keel run` does: through keel's subprocess service (credential scrub, the
//! configuration's `tools.forward_env` (`Host::subprocess`), own process group) on the MCP runtime.

use super::Ctx;
use crate::cli::{McpAddArgs, McpCommand};
use anyhow::{Context, Result, anyhow, bail};
use keel_host::Host;
use keel_mcp::client::runtime::McpRuntime;
use keel_mcp::client::server::{Server, StartFailure};
use keel_mcp::client::tool::{assign_names, normalise_schema};
use keel_mcp::config::{self, ConfigProblem, ServerConfig, TomlServer, Transport};
use keel_tools::subprocess::is_secret_name;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

/// Shown instead of a value whose name looks secret.
const HIDDEN: &str = "<hidden>";

/// Where a server is configured.
#[derive(Debug, Clone)]
enum Source {
    /// `[mcp_servers.NAME]` keys of these layers, in merge order (later ones win key by key).
    Toml { layers: Vec<String> },
    /// The project's `.mcp.json`.
    McpJson { path: PathBuf },
}

/// One server as the configuration names it.
#[derive(Debug, Clone)]
struct Entry {
    name: String,
    source: Source,
    /// Where it is configured, for messages: the layer file(s), or the `.mcp.json` path.
    origin: String,
    /// Its settings, or what is wrong with them.
    resolved: Result<ServerConfig, String>,
    /// The `.mcp.json` path of an entry of the same name this TOML table overrides.
    overrides: Option<String>,
}

/// Every configured server by name, and the problems of a `.mcp.json` that cannot be read as
/// a whole.
#[derive(Debug, Default)]
struct Listing {
    servers: BTreeMap<String, Entry>,
    file_problems: Vec<ConfigProblem>,
}

impl Listing {
    fn get(&self, name: &str) -> Result<&Entry> {
        self.servers.get(name).ok_or_else(|| {
            anyhow!("no MCP server named '{name}' is configured (`keel mcp list` shows them)")
        })
    }
}

/// The value of `${VAR}` for display: the reference itself when `VAR` is set (so nothing
/// expanded is printed), nothing when it is not (the problem is reported).
fn display_var(name: &str) -> Option<String> {
    std::env::var_os(name).map(|_| format!("${{{name}}}"))
}

/// The value of `${VAR}` for starting a server.
fn real_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The layers that set keys of `[mcp_servers.NAME]`, in merge order.
fn layers_of(host: &Host, name: &str) -> Vec<String> {
    let loaded = host.config();
    let prefix = format!("mcp_servers.{name}.");
    let mut layers: Vec<String> = Vec::new();
    for (key, layer) in &loaded.origin {
        if key.starts_with(&prefix) && !layers.contains(layer) {
            layers.push(layer.clone());
        }
    }
    layers.sort_by_key(|l| loaded.layer_index(l));
    layers
}

fn listing(host: &Host, var: &dyn Fn(&str) -> Option<String>) -> Listing {
    let mut out = Listing::default();
    let json_path = host.cwd().join(".mcp.json");
    let (json, problems) = config::read_mcp_json(host.cwd(), var);
    for s in json {
        out.servers.insert(
            s.name.clone(),
            Entry {
                name: s.name.clone(),
                source: Source::McpJson {
                    path: json_path.clone(),
                },
                origin: s.origin.clone(),
                resolved: Ok(s),
                overrides: None,
            },
        );
    }
    for p in problems {
        if p.server == "*" {
            out.file_problems.push(p);
            continue;
        }
        out.servers.insert(
            p.server.clone(),
            Entry {
                name: p.server.clone(),
                source: Source::McpJson {
                    path: json_path.clone(),
                },
                origin: p.origin,
                resolved: Err(p.message),
                overrides: None,
            },
        );
    }
    for (name, table) in &host.config().config.mcp_servers {
        let layers = layers_of(host, name);
        let origin = if layers.is_empty() {
            "configuration".to_owned()
        } else {
            layers.join(", ")
        };
        let overrides = out.servers.get(name).map(|e| e.origin.clone());
        let resolved = config::from_toml(name, table, &origin).map_err(|p| p.message);
        out.servers.insert(
            name.clone(),
            Entry {
                name: name.clone(),
                source: Source::Toml { layers },
                origin,
                resolved,
                overrides,
            },
        );
    }
    out
}

/// Run a `keel mcp` subcommand.
pub fn run(ctx: &Ctx, cmd: McpCommand) -> Result<ExitCode> {
    let host = ctx.host()?;
    match cmd {
        McpCommand::List { json } => list(&host, json),
        McpCommand::Get { name, json } => get(&host, &name, json),
        McpCommand::Add(args) => add(ctx, &host, args),
        McpCommand::Remove { name } => remove(&host, &name),
        McpCommand::Test { name, json } => test(ctx, &host, &name, json),
        McpCommand::Prompts { name, json } => prompts(ctx, &host, name.as_deref(), json),
    }
}

fn kind(t: &Transport) -> &'static str {
    match t {
        Transport::Stdio { .. } => "stdio",
        Transport::Http { .. } => "http",
    }
}

fn source_name(s: &Source) -> &'static str {
    match s {
        Source::Toml { .. } => "toml",
        Source::McpJson { .. } => ".mcp.json",
    }
}

fn entry_json(e: &Entry) -> Value {
    let (kind, transport, enabled, problem) = match &e.resolved {
        Ok(c) => (
            json!(kind(&c.transport)),
            json!(c.transport.describe()),
            json!(c.enabled),
            Value::Null,
        ),
        Err(p) => (Value::Null, Value::Null, Value::Null, json!(p)),
    };
    let mut v = json!({
        "name": e.name,
        "type": kind,
        "transport": transport,
        "enabled": enabled,
        "origin": e.origin,
        "source": source_name(&e.source),
        "problem": problem,
    });
    if let Source::Toml { layers } = &e.source {
        v["layers"] = json!(layers);
    }
    if let Some(path) = &e.overrides {
        v["overrides"] = json!(path);
    }
    v
}

fn list(host: &Host, as_json: bool) -> Result<ExitCode> {
    let listing = listing(host, &display_var);
    let mut out = std::io::stdout().lock();
    if as_json {
        let servers: Vec<Value> = listing.servers.values().map(entry_json).collect();
        let problems: Vec<Value> = listing
            .file_problems
            .iter()
            .map(|p| json!({"origin": p.origin, "problem": p.message}))
            .collect();
        serde_json::to_writer_pretty(&mut out, &json!({"servers": servers, "problems": problems}))?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    if listing.servers.is_empty() && listing.file_problems.is_empty() {
        writeln!(
            out,
            "no MCP servers configured ([mcp_servers.NAME] in a config.toml, or the project's .mcp.json); add one with `keel mcp add NAME -- CMD ARGS…`"
        )?;
    }
    for e in listing.servers.values() {
        match &e.resolved {
            Ok(c) => writeln!(
                out,
                "{}  {}  {}  {}",
                e.name,
                kind(&c.transport),
                if c.enabled { "enabled" } else { "disabled" },
                c.transport.describe()
            )?,
            Err(_) => writeln!(out, "{}  (not usable)", e.name)?,
        }
        if let Some(why) = inert(host, e) {
            writeln!(out, "    {why}")?;
        }
        writeln!(out, "    from {}", e.origin)?;
        if let Some(path) = &e.overrides {
            writeln!(out, "    overrides the entry of the same name in {path}")?;
        }
        if let Err(problem) = &e.resolved {
            writeln!(out, "    problem: {problem}")?;
        }
    }
    for p in &listing.file_problems {
        writeln!(out, "{}: problem: {}", p.origin, p.message)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether a header's value is hidden: secret-looking names and the credential headers.
fn secret_header(name: &str) -> bool {
    is_secret_name(OsStr::new(name))
        || ["authorization", "proxy-authorization", "cookie"]
            .contains(&name.to_ascii_lowercase().as_str())
}

fn shown(map: &BTreeMap<String, String>, secret: fn(&str) -> bool) -> BTreeMap<String, String> {
    map.iter()
        .map(|(k, v)| {
            let v = if secret(k) {
                HIDDEN.to_owned()
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect()
}

fn secret_env(name: &str) -> bool {
    is_secret_name(OsStr::new(name))
}

fn settings_json(e: &Entry) -> Value {
    let mut v = entry_json(e);
    let Ok(c) = &e.resolved else {
        return v;
    };
    match &c.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            v["command"] = json!(command);
            v["args"] = json!(args);
            v["env"] = json!(shown(env, secret_env));
            v["cwd"] = json!(cwd);
        }
        Transport::Http {
            url,
            headers,
            bearer_token_env_var,
        } => {
            v["url"] = json!(url);
            v["headers"] = json!(shown(headers, secret_header));
            v["bearer_token_env_var"] = json!(bearer_token_env_var);
        }
    }
    v["startup_timeout_sec"] = json!(c.startup_timeout.as_secs_f64());
    v["tool_timeout_sec"] = json!(c.tool_timeout.as_secs_f64());
    v["enabled_tools"] = json!(c.enabled_tools);
    v["disabled_tools"] = json!(c.disabled_tools);
    v
}

fn pairs(map: &BTreeMap<String, String>) -> String {
    if map.is_empty() {
        return "(none)".into();
    }
    map.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn get(host: &Host, name: &str, as_json: bool) -> Result<ExitCode> {
    let listing = listing(host, &display_var);
    let e = listing.get(name)?;
    let mut out = std::io::stdout().lock();
    if as_json {
        serde_json::to_writer_pretty(&mut out, &settings_json(e))?;
        writeln!(out)?;
        return Ok(if e.resolved.is_ok() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    writeln!(out, "{}", e.name)?;
    writeln!(out, "  origin: {}", e.origin)?;
    if let Some(path) = &e.overrides {
        writeln!(out, "  overrides: the entry of the same name in {path}")?;
    }
    let c = match &e.resolved {
        Ok(c) => c,
        Err(problem) => {
            writeln!(out, "  problem: {problem}")?;
            return Ok(ExitCode::from(1));
        }
    };
    writeln!(out, "  type: {}", kind(&c.transport))?;
    writeln!(out, "  enabled: {}", c.enabled)?;
    match &c.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            writeln!(out, "  command: {command}")?;
            writeln!(out, "  args: {}", serde_json::to_string(args)?)?;
            writeln!(out, "  env: {}", pairs(&shown(env, secret_env)))?;
            match cwd {
                Some(d) => writeln!(out, "  cwd: {}", d.display())?,
                None => writeln!(out, "  cwd: (the workspace)")?,
            }
        }
        Transport::Http {
            url,
            headers,
            bearer_token_env_var,
        } => {
            writeln!(out, "  url: {url}")?;
            writeln!(out, "  headers: {}", pairs(&shown(headers, secret_header)))?;
            match bearer_token_env_var {
                Some(var) => writeln!(
                    out,
                    "  bearer_token_env_var: {var} ({})",
                    if std::env::var_os(var).is_some() {
                        "set"
                    } else {
                        "NOT SET"
                    }
                )?,
                None => writeln!(out, "  bearer_token_env_var: (none)")?,
            }
        }
    }
    writeln!(
        out,
        "  startup_timeout_sec: {}",
        c.startup_timeout.as_secs_f64()
    )?;
    writeln!(out, "  tool_timeout_sec: {}", c.tool_timeout.as_secs_f64())?;
    match &c.enabled_tools {
        Some(only) => writeln!(out, "  enabled_tools: {}", only.join(", "))?,
        None => writeln!(out, "  enabled_tools: (all)")?,
    }
    if c.disabled_tools.is_empty() {
        writeln!(out, "  disabled_tools: (none)")?;
    } else {
        writeln!(out, "  disabled_tools: {}", c.disabled_tools.join(", "))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A server name: `[A-Za-z0-9_-]+`.
fn check_name(name: &str) -> Result<()> {
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

fn key_values(flag: &str, specs: &[String]) -> Result<BTreeMap<String, String>> {
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

fn is_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The table `add` writes.
fn new_table(args: &McpAddArgs) -> Result<(TomlServer, toml_edit::Table)> {
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

fn read_doc(file: &Path) -> Result<toml_edit::DocumentMut> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
    };
    text.parse()
        .with_context(|| format!("{} is not valid TOML", file.display()))
}

/// Write `doc` to `file` after checking it still loads as a configuration layer.
fn write_doc(file: &Path, doc: &toml_edit::DocumentMut) -> Result<()> {
    let text = doc.to_string();
    keel_host::config::layer_from_text(&file.display().to_string(), &text)?;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(file, text).with_context(|| format!("cannot write {}", file.display()))
}

fn add(ctx: &Ctx, host: &Host, args: McpAddArgs) -> Result<ExitCode> {
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
    let mut doc = read_doc(&file)?;
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
    write_doc(&file, &doc)?;
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
            "note: workspace {} is not trusted, so keel starts no server of its .keel/config.toml; trust it with `keel trust` (docs/trust.md)",
            trust.root.display()
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
fn is_file_layer(layer: &str) -> bool {
    layer != "defaults" && !layer.starts_with("-c ")
}

fn remove(host: &Host, name: &str) -> Result<ExitCode> {
    let listing = listing(host, &display_var);
    let e = listing.get(name)?;
    let layers = match &e.source {
        Source::McpJson { path } => bail!(
            "MCP server '{name}' is configured in {}, Claude Code's file, which keel only reads: remove it there. \
             (To turn it off for keel alone, add `[mcp_servers.{name}]` with `enabled = false` to keel's configuration.)",
            path.display()
        ),
        Source::Toml { layers } => layers,
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
        let mut doc = read_doc(&file)?;
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
        write_doc(&file, &doc)?;
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

/// What came of starting one server.
type Started = Result<
    (
        Vec<rmcp::model::Tool>,
        Option<Result<Vec<rmcp::model::Prompt>, String>>,
    ),
    StartFailure,
>;

/// Start every one of `configs` at once (each within its startup timeout), list its tools
/// (and its prompts when `with_prompts`), stop it; in the order given.
fn start_all(
    ctx: &Ctx,
    host: &Host,
    configs: Vec<ServerConfig>,
    with_prompts: bool,
) -> Result<Vec<Started>> {
    let runtime = McpRuntime::start().context("cannot start the MCP runtime")?;
    let sp = host.subprocess(&ctx.home.join("spill").join("mcp"));
    let servers: Vec<Arc<Server>> = configs
        .into_iter()
        .map(|c| Arc::new(Server::new(c, sp.clone(), ctx.cwd.clone())))
        .collect();
    runtime
        .wait(async move {
            let tasks: Vec<_> = servers
                .into_iter()
                .map(|s| {
                    tokio::spawn(async move {
                        let tools = s.start().await?;
                        let prompts = if with_prompts {
                            Some(s.prompts().await)
                        } else {
                            None
                        };
                        s.stop().await;
                        Ok((tools, prompts))
                    })
                })
                .collect();
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.unwrap_or_else(|e| {
                    Err(StartFailure {
                        reason: format!("the start task failed: {e}"),
                        stderr_tail: String::new(),
                    })
                }));
            }
            out
        })
        .ok_or_else(|| anyhow!("the MCP runtime stopped while the server started"))
}

fn failure_text(name: &str, f: &StartFailure) -> String {
    let mut s = format!("MCP server '{name}' could not start: {}", f.reason);
    if !f.stderr_tail.is_empty() {
        s.push_str("\nits stderr ends:\n");
        s.push_str(&f.stderr_tail);
    }
    s
}

fn usable<'e>(host: &Host, e: &'e Entry) -> Result<&'e ServerConfig, String> {
    if let Some(why) = inert(host, e) {
        return Err(format!("MCP server '{}' ({}): {why}", e.name, e.origin));
    }
    e.resolved
        .as_ref()
        .map_err(|p| format!("MCP server '{}' ({}): {p}", e.name, e.origin))
}

/// Why a `.mcp.json` server of an untrusted workspace is not started (docs/trust.md).
fn inert(host: &Host, e: &Entry) -> Option<String> {
    let trust = &host.config().trust;
    (matches!(e.source, Source::McpJson { .. }) && !trust.is_trusted()).then(|| {
        format!(
            "not started: workspace {} is not trusted (keel trust, or --trust-project for one run)",
            trust.root.display()
        )
    })
}

fn test(ctx: &Ctx, host: &Host, name: &str, as_json: bool) -> Result<ExitCode> {
    let listing = listing(host, &real_var);
    let e = listing.get(name)?;
    let c = match usable(host, e) {
        Ok(c) => c.clone(),
        Err(problem) => {
            writeln!(std::io::stderr(), "keel: {problem}")?;
            return Ok(ExitCode::from(1));
        }
    };
    if !c.enabled && !as_json {
        writeln!(
            std::io::stderr(),
            "note: '{name}' is disabled (keel run does not start it); testing it anyway"
        )?;
    }
    let began = Instant::now();
    let started = start_all(ctx, host, vec![c.clone()], false)?
        .pop()
        .ok_or_else(|| anyhow!("no outcome"))?;
    let secs = began.elapsed().as_secs_f64();
    let (mut tools, _) = match started {
        Ok(t) => t,
        Err(f) => {
            if as_json {
                let mut out = std::io::stdout().lock();
                serde_json::to_writer_pretty(
                    &mut out,
                    &json!({"server": name, "origin": e.origin, "transport": c.transport.describe(),
                            "started": false, "error": f.reason, "stderrTail": f.stderr_tail}),
                )?;
                writeln!(out)?;
            }
            writeln!(std::io::stderr(), "keel: {}", failure_text(name, &f))?;
            return Ok(ExitCode::from(1));
        }
    };
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    let mut skipped: Vec<Value> = Vec::new();
    let mut allowed = Vec::new();
    for t in tools.iter() {
        if c.allows(&t.name) {
            allowed.push(t);
        } else {
            let why = if c.disabled_tools.iter().any(|d| d == t.name.as_ref()) {
                "listed in disabled_tools"
            } else {
                "not listed in enabled_tools"
            };
            skipped.push(json!({"tool": t.name, "name": null, "reason": why}));
        }
    }
    let names = assign_names(
        &allowed
            .iter()
            .map(|t| (c.name.clone(), t.name.to_string()))
            .collect::<Vec<_>>(),
    );
    let mut offered: Vec<Value> = Vec::new();
    for (t, keel_name) in allowed.into_iter().zip(names) {
        let checked = normalise_schema(&t.input_schema).and_then(|s| {
            keel_tools::schema::check_foreign_schema(&s)
                .map(|()| s)
                .map_err(|e| format!("its input schema cannot be offered: {e}"))
        });
        match checked {
            Ok(schema) => offered.push(json!({
                "tool": t.name,
                "name": keel_name,
                "schema_bytes": serde_json::to_vec(&schema)?.len(),
            })),
            Err(why) => skipped.push(json!({"tool": t.name, "name": keel_name, "reason": why})),
        }
    }
    let total: u64 = offered
        .iter()
        .filter_map(|t| t["schema_bytes"].as_u64())
        .sum();
    let mut out = std::io::stdout().lock();
    if as_json {
        serde_json::to_writer_pretty(
            &mut out,
            &json!({
                "server": name, "origin": e.origin, "transport": c.transport.describe(),
                "enabled": c.enabled, "started": true, "seconds": secs,
                "tools": offered, "skipped": skipped, "schema_bytes": total,
            }),
        )?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "MCP server '{name}' ({}; from {}) started in {secs:.2} s and listed {} tools",
        c.transport.describe(),
        e.origin,
        tools.len()
    )?;
    let width = offered
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::len))
        .max()
        .unwrap_or(0);
    for t in &offered {
        writeln!(
            out,
            "  {:width$}  {} bytes",
            t["name"].as_str().unwrap_or(""),
            t["schema_bytes"]
        )?;
    }
    if !skipped.is_empty() {
        writeln!(out, "skipped:")?;
        for s in &skipped {
            let tool = s["tool"].as_str().unwrap_or("");
            match s["name"].as_str() {
                Some(n) => writeln!(
                    out,
                    "  {tool} ({n}): {}",
                    s["reason"].as_str().unwrap_or("")
                )?,
                None => writeln!(out, "  {tool}: {}", s["reason"].as_str().unwrap_or(""))?,
            }
        }
    }
    writeln!(
        out,
        "{} offered ({total} schema bytes), {} skipped; stopped",
        offered.len(),
        skipped.len()
    )?;
    Ok(ExitCode::SUCCESS)
}

fn prompts(ctx: &Ctx, host: &Host, name: Option<&str>, as_json: bool) -> Result<ExitCode> {
    let listing = listing(host, &real_var);
    let entries: Vec<&Entry> = match name {
        Some(n) => vec![listing.get(n)?],
        None => listing
            .servers
            .values()
            .filter(|e| e.resolved.as_ref().map_or(true, |c| c.enabled))
            .collect(),
    };
    let mut failed = false;
    let mut results: Vec<Value> = Vec::new();
    let mut configs = Vec::new();
    for e in &entries {
        match usable(host, e) {
            Ok(c) => configs.push(c.clone()),
            Err(problem) => {
                failed = true;
                writeln!(std::io::stderr(), "keel: {problem}")?;
                results.push(json!({"server": e.name, "error": problem}));
            }
        }
    }
    let names: Vec<String> = configs.iter().map(|c| c.name.clone()).collect();
    let outcomes = if configs.is_empty() {
        Vec::new()
    } else {
        start_all(ctx, host, configs, true)?
    };
    let mut out = std::io::stdout().lock();
    if entries.is_empty() && !as_json {
        writeln!(out, "no enabled MCP servers configured")?;
    }
    for (server, outcome) in names.iter().zip(outcomes) {
        match outcome {
            Err(f) => {
                failed = true;
                writeln!(std::io::stderr(), "keel: {}", failure_text(server, &f))?;
                results.push(
                    json!({"server": server, "error": f.reason, "stderrTail": f.stderr_tail}),
                );
            }
            Ok((_, None)) => {}
            Ok((_, Some(Err(why)))) => {
                failed = true;
                writeln!(std::io::stderr(), "keel: MCP server '{server}': {why}")?;
                results.push(json!({"server": server, "error": why}));
            }
            Ok((_, Some(Ok(prompts)))) => {
                if !as_json {
                    print_prompts(&mut out, server, &prompts)?;
                }
                results.push(json!({"server": server, "prompts": prompts}));
            }
        }
    }
    if as_json {
        serde_json::to_writer_pretty(&mut out, &results)?;
        writeln!(out)?;
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn print_prompts(
    out: &mut impl Write,
    server: &str,
    prompts: &[rmcp::model::Prompt],
) -> Result<()> {
    match prompts.len() {
        0 => writeln!(out, "{server}: no prompts")?,
        1 => writeln!(out, "{server}: 1 prompt")?,
        n => writeln!(out, "{server}: {n} prompts")?,
    }
    for p in prompts {
        match p.description.as_deref().filter(|d| !d.is_empty()) {
            Some(d) => writeln!(out, "  {}  {d}", p.name)?,
            None => writeln!(out, "  {}", p.name)?,
        }
        for a in p.arguments.iter().flatten() {
            let required = if a.required == Some(true) {
                " (required)"
            } else {
                ""
            };
            match a.description.as_deref().filter(|d| !d.is_empty()) {
                Some(d) => writeln!(out, "      {}{required}  {d}", a.name)?,
                None => writeln!(out, "      {}{required}", a.name)?,
            }
        }
    }
    Ok(())
}

/// `loaded` for `keel config dump`: the values of `[mcp_servers.*]` `env` entries and headers
/// whose names look secret replaced by `<hidden>` (as `keel mcp get` shows them).
pub(super) fn redacted(loaded: &keel_host::config::Loaded) -> keel_host::config::Loaded {
    let mut loaded = loaded.clone();
    let servers = loaded
        .table
        .get_mut("mcp_servers")
        .and_then(toml::Value::as_table_mut);
    for server in servers
        .into_iter()
        .flat_map(|t| t.iter_mut().map(|(_, v)| v))
    {
        for (key, secret) in [
            ("env", secret_env as fn(&str) -> bool),
            ("headers", secret_header),
        ] {
            let Some(map) = server.get_mut(key).and_then(toml::Value::as_table_mut) else {
                continue;
            };
            for (name, value) in map.iter_mut() {
                if secret(name) {
                    *value = toml::Value::String(HIDDEN.to_owned());
                }
            }
        }
    }
    loaded
}

/// The MCP lines of `keel config dump`: every server with where it is configured, as
/// `mcp.NAME = "TRANSPORT"  # ORIGIN[; disabled][; problem: …]`.
pub(super) fn dump(host: &Host) -> String {
    let listing = listing(host, &display_var);
    let mut out = String::new();
    for e in listing.servers.values() {
        let mut notes = e.origin.clone();
        let value = match &e.resolved {
            Ok(c) => {
                notes.push_str(&format!("; {}", kind(&c.transport)));
                if !c.enabled {
                    notes.push_str("; disabled");
                }
                format!("{:?}", c.transport.describe())
            }
            Err(p) => {
                notes.push_str(&format!("; problem: {p}"));
                "?".to_owned()
            }
        };
        if let Some(path) = &e.overrides {
            notes.push_str(&format!("; overrides the entry in {path}"));
        }
        out.push_str(&format!("mcp.{} = {value}  # {notes}\n", e.name));
    }
    for p in &listing.file_problems {
        out.push_str(&format!(
            "mcp.* = ?  # {}; problem: {}\n",
            p.origin, p.message
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_variable_names_are_checked() {
        assert!(check_name("files_2-x").is_ok());
        for bad in ["", "a b", "a.b", "é", "a/b"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(is_var_name("TRACKER_TOKEN") && is_var_name("_x1"));
        assert!(!is_var_name("sk-abc") && !is_var_name("1X") && !is_var_name(""));
    }

    #[test]
    fn secret_values_are_hidden_by_name() {
        let map: BTreeMap<String, String> = [("LOG_LEVEL", "warn"), ("API_TOKEN", "t0k")]
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let s = shown(&map, secret_env);
        assert_eq!(s["LOG_LEVEL"], "warn");
        assert_eq!(s["API_TOKEN"], HIDDEN);
        assert!(secret_header("Authorization") && !secret_header("Accept"));
    }
}
