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
use keel_mcp::client::tool::{SchemaError, assign_names, normalise_schema};
use keel_mcp::config::{self, ConfigProblem, ServerConfig, TomlServer, Transport};
use keel_tools::subprocess::is_secret_name;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

mod edit;
mod login;
mod start;

use edit::*;
pub(crate) use edit::{read_doc, write_doc};
use start::*;

/// Shown instead of a value whose name looks secret.
const HIDDEN: &str = "<hidden>";

/// Where a server is configured.
#[derive(Debug, Clone)]
enum Source {
    /// `[mcp_servers.NAME]` keys of these layers, in merge order (later ones win key by key).
    Toml { layers: Vec<String> },
    /// The project's `.mcp.json`.
    McpJson { path: PathBuf },
    /// An installed plugin bundle's (`keel plugin`).
    Bundle { plugin: String },
    /// The project's `.keel/config.toml`, whose `[mcp_servers]` trust left out (an untrusted
    /// workspace, or a file changed since it was trusted): listed, never started ([`inert`]).
    LeftOut { path: PathBuf },
}

/// One server as the configuration names it.
#[derive(Debug, Clone)]
struct Entry {
    name: String,
    source: Source,
    /// Where it is configured, for messages: the layer file(s), or the `.mcp.json` path.
    origin: String,
    /// Its settings, or what is wrong with them.
    resolved: Result<ServerConfig, ConfigProblem>,
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
                origin: p.origin.clone(),
                resolved: Err(p),
                overrides: None,
            },
        );
    }
    for (name, table) in &host.config().config.mcp_servers {
        let layers = host
            .config()
            .layers_setting(&format!("mcp_servers.{name}."));
        let origin = if layers.is_empty() {
            "configuration".to_owned()
        } else {
            layers.join(", ")
        };
        let overrides = out.servers.get(name).map(|e| e.origin.clone());
        let resolved = config::from_toml(name, table, &origin);
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
    add_bundles(host, var, &mut out);
    add_left_out(host, &mut out);
    out
}

/// The `[mcp_servers.NAME]` tables of the project's `.keel/config.toml` that trust left out of
/// the configuration (`Loaded::ignored`), so that `list`, `get` and `test` show them as inert
/// instead of not at all. A name configured elsewhere is that server.
fn add_left_out(host: &Host, out: &mut Listing) {
    let project = Path::new(".keel").join("config.toml");
    let Some(ignored) = host
        .config()
        .ignored
        .iter()
        .find(|i| i.file.ends_with(&project))
    else {
        return;
    };
    let names: Vec<&str> = ignored
        .what
        .iter()
        .filter_map(|w| w.strip_prefix("mcp_servers."))
        .map(|rest| rest.split('.').next().unwrap_or(rest))
        .filter(|name| !out.servers.contains_key(*name))
        .collect();
    if names.is_empty() {
        return;
    }
    let origin = ignored.file.display().to_string();
    let table = super::config_file::read(host, &ignored.file)
        .and_then(|text| {
            let text = text.unwrap_or_default();
            Ok(keel_host::config::layer_from_text(&origin, &text)?)
        })
        .map(|layer| layer.table);
    for name in names {
        let resolved = match &table {
            Ok(t) => {
                let value = t
                    .get("mcp_servers")
                    .and_then(|s| s.get(name))
                    .cloned()
                    .unwrap_or(toml::Value::Table(toml::Table::new()));
                match TomlServer::deserialize(value) {
                    Ok(server) => config::from_toml(name, &server, &origin),
                    Err(e) => Err(ConfigProblem {
                        server: name.to_owned(),
                        origin: origin.clone(),
                        message: e.to_string(),
                    }),
                }
            }
            Err(e) => Err(ConfigProblem {
                server: name.to_owned(),
                origin: origin.clone(),
                message: format!("{e:#}"),
            }),
        };
        out.servers.insert(
            name.to_owned(),
            Entry {
                name: name.to_owned(),
                source: Source::LeftOut {
                    path: ignored.file.clone(),
                },
                origin: origin.clone(),
                resolved,
                overrides: None,
            },
        );
    }
}

/// The servers of the user's enabled plugin bundles (docs/plugins.md), after the configured
/// ones; a name already taken gets the plugin's prefix, as in a run.
fn add_bundles(host: &Host, var: &dyn Fn(&str) -> Option<String>, out: &mut Listing) {
    let bundles = keel_host::bundles::enabled(host.home(), host.cwd());
    if bundles.is_empty() {
        return;
    }
    let mut servers: Vec<ServerConfig> = Vec::new();
    let mut problems: Vec<ConfigProblem> = Vec::new();
    for e in out.servers.values() {
        match &e.resolved {
            Ok(c) => servers.push(c.clone()),
            Err(p) => problems.push(p.clone()),
        }
    }
    let before = problems.len();
    keel_mcp::bundles::add_bundle_servers(&mut servers, &mut problems, &bundles, var);
    let plugin_of = |origin: &str| {
        origin
            .strip_prefix("plugin ")
            .and_then(|rest| rest.split_once(' '))
            .map(|(name, _)| name.to_owned())
            .unwrap_or_default()
    };
    for s in servers {
        if out.servers.contains_key(&s.name) {
            continue;
        }
        out.servers.insert(
            s.name.clone(),
            Entry {
                name: s.name.clone(),
                source: Source::Bundle {
                    plugin: plugin_of(&s.origin),
                },
                origin: s.origin.clone(),
                resolved: Ok(s),
                overrides: None,
            },
        );
    }
    out.file_problems.extend(problems.into_iter().skip(before));
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
        McpCommand::Login {
            name,
            no_browser,
            timeout,
        } => login::login(ctx, &host, &name, no_browser, timeout),
        McpCommand::Logout { name } => login::logout(ctx, &host, &name),
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
        Source::Bundle { .. } => "plugin",
        Source::LeftOut { .. } => "toml",
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
        Err(p) => (Value::Null, Value::Null, Value::Null, json!(p.message)),
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
        let servers: Vec<Value> = listing
            .servers
            .values()
            .map(|e| with_inert(host, e, entry_json(e)))
            .collect();
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
            writeln!(out, "    problem: {}", problem.message)?;
        }
    }
    for p in &listing.file_problems {
        writeln!(out, "{}: problem: {}", p.origin, p.message)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `v` with `"inert": WHY` when the server is not started ([`inert`]).
fn with_inert(host: &Host, e: &Entry, mut v: Value) -> Value {
    if let Some(why) = inert(host, e) {
        v["inert"] = json!(why);
    }
    v
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
        serde_json::to_writer_pretty(&mut out, &with_inert(host, e, settings_json(e)))?;
        writeln!(out)?;
        return Ok(if e.resolved.is_ok() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    writeln!(out, "{}", e.name)?;
    writeln!(out, "  origin: {}", e.origin)?;
    if let Some(why) = inert(host, e) {
        writeln!(out, "  inert: {why}")?;
    }
    if let Some(path) = &e.overrides {
        writeln!(out, "  overrides: the entry of the same name in {path}")?;
    }
    let c = match &e.resolved {
        Ok(c) => c,
        Err(problem) => {
            writeln!(out, "  problem: {}", problem.message)?;
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
                notes.push_str(&format!("; problem: {}", p.message));
                "?".to_owned()
            }
        };
        if let Some(path) = &e.overrides {
            notes.push_str(&format!("; overrides the entry in {path}"));
        }
        if let Some(why) = inert(host, e) {
            notes.push_str(&format!("; {why}"));
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
