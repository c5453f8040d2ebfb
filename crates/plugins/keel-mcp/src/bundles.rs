//! MCP servers of the Claude Code plugin bundles the user installed and enabled
//! ([`keel_agent::plugin::Bundle`]).
//!
//! A bundle's servers are in `ROOT/.mcp.json` (the project file's `{"mcpServers": {...}}`
//! shape) and in an `mcpServers` object of `ROOT/.claude-plugin/plugin.json`. Both files are
//! opened beneath the bundle's folder (a link out of it is never followed). Values expand
//! `${VAR}` as a project's `.mcp.json` does, and `${CLAUDE_PLUGIN_ROOT}` is the bundle's
//! folder; a stdio server also gets `CLAUDE_PLUGIN_ROOT` in its environment (unless the entry
//! sets it). A server keeps its name unless a server of that name is already configured
//! (keel's configuration, the project's `.mcp.json`, an earlier bundle), then it is
//! `BUNDLE_SERVER`. Its origin names the bundle: `plugin NAME (ROOT/.mcp.json)`. Problems are
//! [`ConfigProblem`]s like those of the project's file.

use crate::config::{ConfigProblem, MAX_MCP_JSON_BYTES, ServerConfig, Transport};
use crate::config::{read_servers_file, servers_of};
use keel_agent::plugin::Bundle;
use serde_json::Value;
use std::collections::BTreeSet;

/// A bundle's server file, relative to its folder.
pub const BUNDLE_MCP_JSON: &str = ".mcp.json";
/// A bundle's manifest, relative to its folder (its `mcpServers` object is read).
pub const BUNDLE_MANIFEST: &str = ".claude-plugin/plugin.json";

/// The variable a bundle's values name its folder with.
const ROOT_VAR: &str = "CLAUDE_PLUGIN_ROOT";

/// `text` with what tool names may not hold (anything but ASCII letters, digits, `_`, `-`)
/// replaced by `_`.
fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The origin of a server of `bundle` configured in `file` (relative to its folder).
pub fn origin(bundle: &Bundle, file: &str) -> String {
    format!(
        "plugin {} ({})",
        bundle.name,
        bundle.root.join(file).display()
    )
}

/// The servers `bundle` defines, as written (names not yet deconflicted), expanded with `env`
/// for every variable but `CLAUDE_PLUGIN_ROOT`.
pub fn bundle_servers(
    bundle: &Bundle,
    env: &dyn Fn(&str) -> Option<String>,
) -> (Vec<ServerConfig>, Vec<ConfigProblem>) {
    let root = bundle.root.to_string_lossy().into_owned();
    let var = |name: &str| {
        if name == ROOT_VAR {
            Some(root.clone())
        } else {
            env(name)
        }
    };
    let mcp_json = origin(bundle, BUNDLE_MCP_JSON);
    let (mut servers, mut problems) = read_servers_file(
        &bundle.root,
        &bundle.root.join(BUNDLE_MCP_JSON),
        &mcp_json,
        &var,
    );
    let (inline, inline_problems) = manifest_servers(bundle, &var);
    servers.extend(inline);
    problems.extend(inline_problems);
    for s in &mut servers {
        if let Transport::Stdio { env, .. } = &mut s.transport {
            env.entry(ROOT_VAR.to_owned())
                .or_insert_with(|| root.clone());
        }
    }
    (servers, problems)
}

/// The `mcpServers` object of the bundle's manifest (nothing when it has none, or the
/// manifest is absent).
fn manifest_servers(
    bundle: &Bundle,
    var: &dyn Fn(&str) -> Option<String>,
) -> (Vec<ServerConfig>, Vec<ConfigProblem>) {
    let origin = origin(bundle, BUNDLE_MANIFEST);
    let problem = |message: String| ConfigProblem {
        server: "*".to_owned(),
        origin: origin.clone(),
        message,
    };
    let path = bundle.root.join(BUNDLE_MANIFEST);
    let read = keel_tools::beneath::Reader::beneath(&bundle.root)
        .and_then(|r| r.read_text(&path, MAX_MCP_JSON_BYTES));
    let text = match read {
        Ok(text) => text,
        Err(e) if e.is_not_found() => return (Vec::new(), Vec::new()),
        Err(e) => {
            return (
                Vec::new(),
                vec![problem(format!("{origin} not read: {}", e.reason()))],
            );
        }
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(manifest) => match manifest.get("mcpServers") {
            Some(Value::Object(servers)) => servers_of(servers, var, &origin),
            // Absent, or a form keel does not read (a path to another file).
            _ => (Vec::new(), Vec::new()),
        },
        Err(e) => (Vec::new(), vec![problem(format!("not JSON: {e}"))]),
    }
}

/// Add the servers of `bundles`, in order, to `servers` (the configured ones) and their
/// problems to `problems`. A bundle's server whose name is taken (by a configured server, one
/// with a problem, or an earlier bundle's) is renamed `BUNDLE_SERVER`; when that is taken too
/// it is left out with a problem. `servers` stays sorted by name.
pub fn add_bundle_servers(
    servers: &mut Vec<ServerConfig>,
    problems: &mut Vec<ConfigProblem>,
    bundles: &[Bundle],
    env: &dyn Fn(&str) -> Option<String>,
) {
    let mut taken: BTreeSet<String> = servers
        .iter()
        .map(|s| s.name.clone())
        .chain(
            problems
                .iter()
                .filter(|p| p.server != "*")
                .map(|p| p.server.clone()),
        )
        .collect();
    for bundle in bundles {
        let (found, found_problems) = bundle_servers(bundle, env);
        problems.extend(found_problems);
        for mut s in found {
            if taken.contains(&s.name) {
                let renamed = format!("{}_{}", sanitize(&bundle.name), s.name);
                if taken.contains(&renamed) {
                    problems.push(ConfigProblem {
                        message: format!(
                            "a server named '{}' and one named '{renamed}' are already configured",
                            s.name
                        ),
                        server: s.name,
                        origin: s.origin,
                    });
                    continue;
                }
                s.name = renamed;
            }
            taken.insert(s.name.clone());
            servers.push(s);
        }
    }
    servers.sort_by(|a, b| a.name.cmp(&b.name));
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::{TomlServer, resolve};
    use std::collections::BTreeMap;
    use std::path::Path;

    fn env(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "t0k".to_owned())
    }

    fn bundle(dir: &Path, name: &str, files: &[(&str, &str)]) -> Bundle {
        let root = dir.join(name);
        for (rel, text) in files {
            let path = root.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        std::fs::create_dir_all(&root).unwrap();
        Bundle {
            name: name.to_owned(),
            root,
        }
    }

    #[test]
    fn bundle_servers_expand_the_root_name_the_bundle_and_a_clash_gets_the_prefix() {
        let t = tempfile::tempdir().unwrap();
        let b = bundle(
            t.path(),
            "db.tools",
            &[
                (
                    ".mcp.json",
                    r#"{"mcpServers": {
                        "own": {"command": "${CLAUDE_PLUGIN_ROOT}/bin/srv", "args": ["--token", "${TOKEN}"]},
                        "same": {"command": "x"}
                    }}"#,
                ),
                (
                    ".claude-plugin/plugin.json",
                    r#"{"name": "db.tools", "mcpServers": {"inline": {"command": "${CLAUDE_PLUGIN_ROOT:-none}/inline"}}}"#,
                ),
            ],
        );
        let mut toml = BTreeMap::new();
        toml.insert(
            "same".to_owned(),
            TomlServer {
                command: Some("mine".into()),
                ..TomlServer::default()
            },
        );
        let (mut servers, mut problems) = resolve(&toml, &|_| "home".into(), None, &env);
        add_bundle_servers(&mut servers, &mut problems, std::slice::from_ref(&b), &env);
        assert!(problems.is_empty(), "{problems:?}");
        let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["db_tools_same", "inline", "own", "same"]);
        let own = &servers[2];
        let root = b.root.display().to_string();
        assert_eq!(
            own.transport.describe(),
            format!("{root}/bin/srv --token t0k")
        );
        assert_eq!(own.origin, format!("plugin db.tools ({root}/.mcp.json)"));
        match &own.transport {
            Transport::Stdio { env, .. } => assert_eq!(env[ROOT_VAR], root),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            servers[3].origin, "home",
            "the configured one keeps its name"
        );
        assert_eq!(servers[0].transport.describe(), "x");
        assert_eq!(
            servers[1].origin,
            format!("plugin db.tools ({root}/.claude-plugin/plugin.json)")
        );
        assert_eq!(servers[1].transport.describe(), format!("{root}/inline"));
    }

    #[test]
    fn a_bundle_server_named_as_a_project_one_is_prefixed_and_a_double_clash_is_a_problem() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(
            ws.join(".mcp.json"),
            r#"{"mcpServers": {"db": {"command": "project-db"}, "x_db": {"command": "taken"}}}"#,
        )
        .unwrap();
        let x = bundle(
            t.path(),
            "x",
            &[(
                ".mcp.json",
                r#"{"mcpServers": {"db": {"command": "bundle-db"}}}"#,
            )],
        );
        let y = bundle(
            t.path(),
            "y y",
            &[(
                ".mcp.json",
                r#"{"mcpServers": {"db": {"command": "other-db"}}}"#,
            )],
        );
        let (servers, problems) = crate::plugin::configured_with_bundles(
            &serde_json::json!({}),
            Some(&ws),
            &[x.clone(), y],
        );
        let names: Vec<(&str, String)> = servers
            .iter()
            .map(|s| (s.name.as_str(), s.transport.describe()))
            .collect();
        assert_eq!(
            names,
            [
                ("db", "project-db".to_owned()),
                ("x_db", "taken".to_owned()),
                ("y_y_db", "other-db".to_owned()),
            ]
        );
        let said: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].contains(&origin(&x, BUNDLE_MCP_JSON)) && said[0].contains("'x_db'"),
            "{said:?}"
        );
    }

    #[test]
    fn a_bundle_file_linked_out_of_the_bundle_is_never_read() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(
            t.path().join("outside.json"),
            r#"{"mcpServers": {"MARKER": {"command": "touch", "args": ["/tmp/MARKER"]}}}"#,
        )
        .unwrap();
        let b = bundle(t.path(), "linked", &[]);
        std::os::unix::fs::symlink("../outside.json", b.root.join(".mcp.json")).unwrap();
        let (mut servers, mut problems) = (Vec::new(), Vec::new());
        add_bundle_servers(&mut servers, &mut problems, &[b], &env);
        assert!(servers.is_empty());
        let said: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].contains("plugin linked (") && said[0].contains("not read"),
            "{said:?}"
        );
        assert!(!said[0].contains("MARKER"), "{said:?}");
    }
}
