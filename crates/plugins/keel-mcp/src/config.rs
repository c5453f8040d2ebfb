//! MCP server configuration in the shapes users already have: keel's TOML
//! `[mcp_servers.NAME]` (Codex's keys) and the project's `.mcp.json` (Claude Code's
//! `mcpServers` object, with `${VAR}` and `${VAR:-default}` expansion). A server named in both
//! is keel's: the TOML entry wins.
//!
//! ```toml
//! [mcp_servers.files]
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
//! env = { LOG_LEVEL = "warn" }       # set on the server (after the credential scrub)
//! startup_timeout_sec = 10
//! tool_timeout_sec = 60
//! disabled_tools = ["write_file"]
//!
//! [mcp_servers.tracker]
//! url = "https://mcp.example.com/mcp"
//! bearer_token_env_var = "TRACKER_TOKEN"
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Default time a server has to answer `initialize` and `tools/list`.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time limit of one tool call.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// One `[mcp_servers.NAME]` table as written (Codex's keys). Unknown keys are rejected by the
/// configuration loader, naming the layer that holds them.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TomlServer {
    /// stdio: the program.
    pub command: Option<String>,
    /// stdio: its arguments.
    pub args: Option<Vec<String>>,
    /// stdio: variables set on the server (explicitly forwarded past the credential scrub).
    pub env: Option<BTreeMap<String, String>>,
    /// stdio: its working directory (default: the workspace).
    pub cwd: Option<PathBuf>,
    /// Streamable HTTP: the endpoint.
    pub url: Option<String>,
    /// Streamable HTTP: extra headers.
    pub headers: Option<BTreeMap<String, String>>,
    /// Streamable HTTP: the variable holding the bearer token (never logged).
    pub bearer_token_env_var: Option<String>,
    /// `false` keeps the server configured but off.
    pub enabled: Option<bool>,
    /// Seconds to answer `initialize` and list tools (default 10).
    pub startup_timeout_sec: Option<f64>,
    /// Seconds one tool call may take (default 60).
    pub tool_timeout_sec: Option<f64>,
    /// Only these tools are offered (all when unset).
    pub enabled_tools: Option<Vec<String>>,
    /// These tools are never offered.
    pub disabled_tools: Option<Vec<String>>,
    /// The MCP protocol version to speak (default: `server/discover` for 2026-07-28 first,
    /// then `initialize` with 2025-11-25).
    pub protocol_version: Option<String>,
}

impl std::fmt::Debug for TomlServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names of `env` and `headers`, never their values (they may hold credentials).
        let keys = |m: &Option<BTreeMap<String, String>>| {
            m.as_ref().map(|m| m.keys().cloned().collect::<Vec<_>>())
        };
        f.debug_struct("TomlServer")
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &keys(&self.env))
            .field("cwd", &self.cwd)
            .field("url", &self.url.as_deref().map(redact_url))
            .field("headers", &keys(&self.headers))
            .field("bearer_token_env_var", &self.bearer_token_env_var)
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

/// `url` without its user information, query and fragment (what messages and events show);
/// `(not a URL)` when it does not parse.
pub fn redact_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => "(not a URL)".to_owned(),
    }
}

/// How keel reaches a server.
#[derive(Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking JSON-RPC on stdin/stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set on it.
        env: BTreeMap<String, String>,
        /// Its working directory (`None`: the workspace).
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        /// The endpoint.
        url: String,
        /// Extra headers.
        headers: BTreeMap<String, String>,
        /// The variable holding the bearer token.
        bearer_token_env_var: Option<String>,
    },
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &env.keys().collect::<Vec<_>>())
                .field("cwd", cwd)
                .finish(),
            Transport::Http {
                url,
                headers,
                bearer_token_env_var,
            } => f
                .debug_struct("Http")
                .field("url", &redact_url(url))
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .field("bearer_token_env_var", bearer_token_env_var)
                .finish(),
        }
    }
}

impl Transport {
    /// What to call it in messages and events: the command line, or the URL without user
    /// information, query or fragment.
    pub fn describe(&self) -> String {
        match self {
            Transport::Stdio { command, args, .. } => std::iter::once(command.as_str())
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            Transport::Http { url, .. } => redact_url(url),
        }
    }
}

/// One configured server, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Its name (the `NAME` of `mcp__NAME__tool`).
    pub name: String,
    /// How to reach it.
    pub transport: Transport,
    /// Whether it is used.
    pub enabled: bool,
    /// Time to start and list tools.
    pub startup_timeout: Duration,
    /// Time per tool call.
    pub tool_timeout: Duration,
    /// Only these tools (all when `None`).
    pub enabled_tools: Option<Vec<String>>,
    /// Never these tools.
    pub disabled_tools: Vec<String>,
    /// Where it was configured (a configuration layer, or the `.mcp.json` path).
    pub origin: String,
    /// The protocol version to speak, one of
    /// [`PROTOCOL_VERSIONS`](crate::client::server::PROTOCOL_VERSIONS); `None`: negotiate.
    pub protocol_version: Option<String>,
}

impl ServerConfig {
    /// Whether the tool called `tool` (the server's own name) is offered.
    pub fn allows(&self, tool: &str) -> bool {
        self.enabled_tools
            .as_ref()
            .is_none_or(|only| only.iter().any(|t| t == tool))
            && !self.disabled_tools.iter().any(|t| t == tool)
    }
}

/// A configuration problem: which server, where, what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MCP server '{server}' ({origin}): {message}")]
pub struct ConfigProblem {
    /// The server.
    pub server: String,
    /// Where it was configured.
    pub origin: String,
    /// What is wrong.
    pub message: String,
}

/// A timeout setting outside (0, 86400] seconds.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("{0} is not a number of seconds in (0, 86400]")]
struct BadSeconds(f64);

fn seconds(v: Option<f64>, default: Duration) -> Result<Duration, BadSeconds> {
    match v {
        None => Ok(default),
        Some(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => Ok(Duration::from_secs_f64(s)),
        Some(s) => Err(BadSeconds(s)),
    }
}

/// Resolve one TOML table.
pub fn from_toml(name: &str, t: &TomlServer, origin: &str) -> Result<ServerConfig, ConfigProblem> {
    let problem = |message: String| ConfigProblem {
        server: name.to_owned(),
        origin: origin.to_owned(),
        message,
    };
    let transport = match (&t.command, &t.url) {
        (Some(command), None) => {
            if t.headers.is_some() || t.bearer_token_env_var.is_some() {
                return Err(problem(
                    "`headers` and `bearer_token_env_var` belong to a `url` server, not a `command` one".into(),
                ));
            }
            Transport::Stdio {
                command: command.clone(),
                args: t.args.clone().unwrap_or_default(),
                env: t.env.clone().unwrap_or_default(),
                cwd: t.cwd.clone(),
            }
        }
        (None, Some(url)) => {
            if t.args.is_some() || t.env.is_some() || t.cwd.is_some() {
                return Err(problem(
                    "`args`, `env` and `cwd` belong to a `command` server, not a `url` one".into(),
                ));
            }
            Transport::Http {
                url: url.clone(),
                headers: t.headers.clone().unwrap_or_default(),
                bearer_token_env_var: t.bearer_token_env_var.clone(),
            }
        }
        (Some(_), Some(_)) => return Err(problem("give `command` or `url`, not both".into())),
        (None, None) => {
            return Err(problem(
                "give `command` (a stdio server) or `url` (streamable HTTP)".into(),
            ));
        }
    };
    let known = crate::client::server::PROTOCOL_VERSIONS;
    if let Some(v) = &t.protocol_version
        && !known.contains(&v.as_str())
    {
        return Err(problem(format!(
            "protocol_version {v:?} is not one keel speaks ({})",
            known.join(", ")
        )));
    }
    Ok(ServerConfig {
        name: name.to_owned(),
        transport,
        enabled: t.enabled.unwrap_or(true),
        startup_timeout: seconds(t.startup_timeout_sec, DEFAULT_STARTUP_TIMEOUT)
            .map_err(|e| problem(format!("startup_timeout_sec: {e}")))?,
        tool_timeout: seconds(t.tool_timeout_sec, DEFAULT_TOOL_TIMEOUT)
            .map_err(|e| problem(format!("tool_timeout_sec: {e}")))?,
        enabled_tools: t.enabled_tools.clone(),
        disabled_tools: t.disabled_tools.clone().unwrap_or_default(),
        origin: origin.to_owned(),
        protocol_version: t.protocol_version.clone(),
    })
}

/// Why `${VAR}` expansion failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    /// `${` without its `}`.
    #[error("unclosed '${{' in {0:?}")]
    Unclosed(String),
    /// A variable without a default is not set.
    #[error("${{{0}}} is not set")]
    Unset(String),
}

/// Expand `${VAR}` and `${VAR:-default}` in `text` with `var`; an unset variable without a
/// default is an error naming it. `$` not followed by `{` is kept.
pub fn expand(text: &str, var: &dyn Fn(&str) -> Option<String>) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(end) = after.find('}') else {
            return Err(ExpandError::Unclosed(text.to_owned()));
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        match (var(name), default) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => return Err(ExpandError::Unset(name.to_owned())),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Largest `.mcp.json` read (1 MiB); a larger one is not read and is one problem.
pub const MAX_MCP_JSON_BYTES: u64 = 1024 * 1024;

/// The servers of the project's `.mcp.json` (`{"mcpServers": {NAME: {...}}}`), expanded with
/// `var`. A server that cannot be used (unknown transport, unset variable, bad shape) is left
/// out and reported; a file that is not JSON is one problem. The file is opened beneath
/// `project` ([`keel_tools::beneath`]) and must be a regular file of at most
/// [`MAX_MCP_JSON_BYTES`]: a link out of the workspace, a FIFO or a larger file is never read
/// and is one problem naming it.
pub fn read_mcp_json(
    project: &Path,
    var: &dyn Fn(&str) -> Option<String>,
) -> (Vec<ServerConfig>, Vec<ConfigProblem>) {
    let path = project.join(".mcp.json");
    read_servers_file(project, &path, &path.display().to_string(), var)
}

/// The servers of the `{"mcpServers": {...}}` file `path`, opened beneath `base` as
/// [`read_mcp_json`] opens the project's; `origin` names it in the servers and the problems.
pub(crate) fn read_servers_file(
    base: &Path,
    path: &Path,
    origin: &str,
    var: &dyn Fn(&str) -> Option<String>,
) -> (Vec<ServerConfig>, Vec<ConfigProblem>) {
    let origin = origin.to_owned();
    let problem = |server: &str, message: String| ConfigProblem {
        server: server.to_owned(),
        origin: origin.clone(),
        message,
    };
    let read = keel_tools::beneath::Reader::beneath(base)
        .and_then(|r| r.read_text(path, MAX_MCP_JSON_BYTES));
    let text = match read {
        Ok(text) => text,
        Err(e) if e.is_not_found() => return (Vec::new(), Vec::new()),
        Err(e) => {
            return (
                Vec::new(),
                vec![problem("*", format!("{origin} not read: {}", e.reason()))],
            );
        }
    };
    let root: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return (Vec::new(), vec![problem("*", format!("not JSON: {e}"))]),
    };
    let Some(servers) = root.get("mcpServers").and_then(Value::as_object) else {
        return (
            Vec::new(),
            vec![problem("*", "no `mcpServers` object".into())],
        );
    };
    servers_of(servers, var, &origin)
}

/// The servers of an `mcpServers` object, expanded with `var`; each entry that cannot be
/// used is a problem of `origin`.
pub(crate) fn servers_of(
    servers: &serde_json::Map<String, Value>,
    var: &dyn Fn(&str) -> Option<String>,
    origin: &str,
) -> (Vec<ServerConfig>, Vec<ConfigProblem>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for (name, entry) in servers {
        match mcp_json_server(name, entry, var, origin) {
            Ok(s) => out.push(s),
            Err(e) => problems.push(ConfigProblem {
                server: name.clone(),
                origin: origin.to_owned(),
                message: e.to_string(),
            }),
        }
    }
    (out, problems)
}

/// Why a `.mcp.json` server entry cannot be used (its problem's message).
#[derive(Debug, thiserror::Error)]
enum EntryError {
    /// The entry is not a JSON object.
    #[error("not an object")]
    NotAnObject,
    /// A key (or `key.name` of a map) that must be a string.
    #[error("`{0}` must be a string")]
    NotString(String),
    /// A key that must be an object.
    #[error("`{0}` must be an object")]
    NotObject(String),
    /// `args` holds something other than strings.
    #[error("`args` must be strings")]
    ArgsNotStrings,
    /// `args` is not an array.
    #[error("`args` must be an array")]
    ArgsNotArray,
    /// A `${VAR}` of the value at `at` cannot be expanded.
    #[error("{at}: {source}")]
    Expand {
        /// The key (`command`, `env.NAME`, `args`).
        at: String,
        /// Why.
        source: ExpandError,
    },
    /// A transport named without the key it needs.
    #[error("a `{transport}` server needs `{needs}`")]
    Incomplete {
        /// The transport type given.
        transport: String,
        /// The key it needs (`command` or `url`).
        needs: &'static str,
    },
    /// A transport type keel does not speak.
    #[error(
        "unknown transport type '{0}' (keel speaks \"stdio\" and \"http\"; the legacy \"sse\" transport is not supported)"
    )]
    UnknownTransport(String),
    /// Neither `command` nor `url`.
    #[error("give `command` (stdio) or `url` (http)")]
    NoTransport,
}

fn mcp_json_server(
    name: &str,
    entry: &Value,
    var: &dyn Fn(&str) -> Option<String>,
    origin: &str,
) -> Result<ServerConfig, EntryError> {
    let obj = entry.as_object().ok_or(EntryError::NotAnObject)?;
    let expanded =
        |at: String, s: &str| expand(s, var).map_err(|source| EntryError::Expand { at, source });
    let text = |key: &str| -> Result<Option<String>, EntryError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => expanded(key.to_owned(), s).map(Some),
            Some(_) => Err(EntryError::NotString(key.to_owned())),
        }
    };
    let map = |key: &str| -> Result<BTreeMap<String, String>, EntryError> {
        let mut out = BTreeMap::new();
        match obj.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (k, v) in m {
                    let v = v
                        .as_str()
                        .ok_or_else(|| EntryError::NotString(format!("{key}.{k}")))?;
                    out.insert(k.clone(), expanded(format!("{key}.{k}"), v)?);
                }
            }
            Some(_) => return Err(EntryError::NotObject(key.to_owned())),
        }
        Ok(out)
    };
    let kind = text("type")?;
    let transport = match kind.as_deref() {
        None | Some("stdio") if obj.contains_key("command") => Transport::Stdio {
            command: text("command")?.unwrap_or_default(),
            args: match obj.get("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|v| {
                        v.as_str()
                            .ok_or(EntryError::ArgsNotStrings)
                            .and_then(|s| expanded("args".to_owned(), s))
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(EntryError::ArgsNotArray),
            },
            env: map("env")?,
            cwd: text("cwd")?.map(PathBuf::from),
        },
        None | Some("http" | "streamable-http") if obj.contains_key("url") => Transport::Http {
            url: text("url")?.unwrap_or_default(),
            headers: map("headers")?,
            bearer_token_env_var: None,
        },
        Some(other @ ("stdio" | "http" | "streamable-http")) => {
            return Err(EntryError::Incomplete {
                transport: other.to_owned(),
                needs: if other == "stdio" { "command" } else { "url" },
            });
        }
        Some(other) => return Err(EntryError::UnknownTransport(other.to_owned())),
        None => return Err(EntryError::NoTransport),
    };
    Ok(ServerConfig {
        name: name.to_owned(),
        transport,
        enabled: obj.get("disabled").and_then(Value::as_bool) != Some(true),
        startup_timeout: DEFAULT_STARTUP_TIMEOUT,
        tool_timeout: DEFAULT_TOOL_TIMEOUT,
        enabled_tools: None,
        disabled_tools: Vec::new(),
        origin: origin.to_owned(),
        protocol_version: None,
    })
}

/// Every configured server, by name: the TOML tables (with the layer of each, from `origins`)
/// over the `.mcp.json` ones of `project` (`None`: the project's file is not read, as in a
/// workspace the user does not trust). Returns the servers and the problems (each server with a
/// problem is left out).
pub fn resolve(
    toml: &BTreeMap<String, TomlServer>,
    origin_of: &dyn Fn(&str) -> String,
    project: Option<&Path>,
    var: &dyn Fn(&str) -> Option<String>,
) -> (Vec<ServerConfig>, Vec<ConfigProblem>) {
    let (json, mut problems) = match project {
        Some(project) => read_mcp_json(project, var),
        None => (Vec::new(), Vec::new()),
    };
    let mut by_name: BTreeMap<String, ServerConfig> =
        json.into_iter().map(|s| (s.name.clone(), s)).collect();
    for (name, t) in toml {
        match from_toml(name, t, &origin_of(name)) {
            Ok(s) => {
                by_name.insert(name.clone(), s);
            }
            Err(p) => {
                by_name.remove(name);
                problems.push(p);
            }
        }
    }
    (by_name.into_values().collect(), problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME_DIR" => Some("/h".into()),
            "TOKEN" => Some("t0k".into()),
            _ => None,
        }
    }

    #[test]
    fn urls_and_credentials_stay_out_of_messages_and_debug() {
        assert_eq!(
            redact_url("https://u:p@h.example:8443/mcp?key=s3cret#x"),
            "https://h.example:8443/mcp"
        );
        assert_eq!(
            redact_url("http://127.0.0.1:9/mcp"),
            "http://127.0.0.1:9/mcp"
        );
        let mut headers = BTreeMap::new();
        headers.insert("Authorization".to_owned(), "Bearer s3cret".to_owned());
        let t = Transport::Http {
            url: "https://h/mcp?token=s3cret".into(),
            headers: headers.clone(),
            bearer_token_env_var: None,
        };
        let shown = format!("{t:?} {}", t.describe());
        assert!(
            !shown.contains("s3cret") && shown.contains("Authorization"),
            "{shown}"
        );
        let mut env = BTreeMap::new();
        env.insert("API_TOKEN".to_owned(), "s3cret".to_owned());
        let toml = TomlServer {
            command: Some("x".into()),
            env: Some(env),
            headers: Some(headers),
            ..TomlServer::default()
        };
        let shown = format!("{toml:?}");
        assert!(
            !shown.contains("s3cret") && shown.contains("API_TOKEN"),
            "{shown}"
        );
    }

    #[test]
    fn variables_expand_with_defaults_and_unset_ones_are_named() {
        assert_eq!(expand("${HOME_DIR}/x $y", &env).unwrap(), "/h/x $y");
        assert_eq!(expand("${NOPE:-d}", &env).unwrap(), "d");
        assert_eq!(
            expand("${NOPE}", &env).unwrap_err().to_string(),
            "${NOPE} is not set"
        );
        assert!(
            expand("${OPEN", &env)
                .unwrap_err()
                .to_string()
                .contains("unclosed")
        );
    }

    #[test]
    fn toml_tables_resolve_and_bad_ones_say_why() {
        let t = TomlServer {
            command: Some("srv".into()),
            args: Some(vec!["-v".into()]),
            tool_timeout_sec: Some(2.5),
            disabled_tools: Some(vec!["rm".into()]),
            ..TomlServer::default()
        };
        let s = from_toml("a", &t, "project").unwrap();
        assert_eq!(s.transport.describe(), "srv -v");
        assert_eq!(s.tool_timeout, Duration::from_millis(2500));
        assert_eq!(s.startup_timeout, DEFAULT_STARTUP_TIMEOUT);
        assert!(s.allows("ls") && !s.allows("rm"));
        let both = TomlServer {
            command: Some("x".into()),
            url: Some("http://h".into()),
            ..TomlServer::default()
        };
        let e = from_toml("b", &both, "home").unwrap_err().to_string();
        assert_eq!(
            e,
            "MCP server 'b' (home): give `command` or `url`, not both"
        );
        let bad = TomlServer {
            url: Some("http://h".into()),
            startup_timeout_sec: Some(-1.0),
            ..TomlServer::default()
        };
        assert!(
            from_toml("c", &bad, "x")
                .unwrap_err()
                .message
                .contains("startup_timeout_sec")
        );
    }

    #[test]
    fn mcp_json_servers_merge_under_toml_ones_and_bad_entries_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(".mcp.json"),
            r#"{"mcpServers": {
                "fs": {"command": "npx", "args": ["-y", "server-fs", "${HOME_DIR}"], "env": {"T": "${TOKEN}"}},
                "web": {"type": "http", "url": "https://x/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
                "old": {"type": "sse", "url": "https://x/sse"},
                "unset": {"command": "x", "args": ["${MISSING}"]},
                "same": {"command": "from-json"}
            }}"#,
        )
        .unwrap();
        let mut toml = BTreeMap::new();
        toml.insert(
            "same".to_owned(),
            TomlServer {
                command: Some("from-toml".into()),
                ..TomlServer::default()
            },
        );
        let (servers, problems) = resolve(&toml, &|_| "home".into(), Some(dir.path()), &env);
        let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["fs", "same", "web"]);
        assert_eq!(servers[0].transport.describe(), "npx -y server-fs /h");
        assert_eq!(servers[1].transport.describe(), "from-toml");
        assert_eq!(servers[1].origin, "home");
        match &servers[2].transport {
            Transport::Http { headers, .. } => assert_eq!(headers["Authorization"], "Bearer t0k"),
            other => panic!("{other:?}"),
        }
        let said: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(said[0].contains("'old'") && said[0].contains("unknown transport type 'sse'"));
        assert!(said[1].contains("'unset'") && said[1].contains("${MISSING} is not set"));
    }

    #[test]
    fn an_mcp_json_linked_out_of_the_workspace_or_a_fifo_is_never_read() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(
            tmp.path().join("outside.json"),
            r#"{"mcpServers": {"MARKER": {"command": "touch", "args": ["/tmp/MARKER"]}}}"#,
        )
        .unwrap();
        std::os::unix::fs::symlink("../outside.json", ws.join(".mcp.json")).unwrap();
        let (servers, problems) = read_mcp_json(&ws, &env);
        assert!(servers.is_empty());
        let said: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains(".mcp.json") && said[0].contains("outside the workspace"));
        assert!(!said[0].contains("MARKER"), "{said:?}");

        std::fs::remove_file(ws.join(".mcp.json")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(ws.join(".mcp.json"))
            .status()
            .unwrap();
        assert!(made.success());
        let (servers, problems) = read_mcp_json(&ws, &env);
        assert!(servers.is_empty());
        assert_eq!(problems.len(), 1);
        assert!(problems[0].to_string().contains("a FIFO"), "{problems:?}");
    }
}
