//! `keel mcp list|get|add|remove|test|prompts` and the MCP lines of `keel config dump`, through
//! the real binary with a temp project and `$KEEL_HOME`. `test` and `prompts` start the real
//! `@modelcontextprotocol/server-everything` (Node) over stdio.

mod support;

use serde_json::Value;
use std::path::PathBuf;
use support::*;

fn keel(env: &Env, args: &[&str]) -> Output {
    run(env.keel_bare().args(args))
}

fn ok(env: &Env, args: &[&str]) -> String {
    let o = keel(env, args);
    assert_eq!(
        o.code,
        Some(0),
        "keel {args:?}\nstdout:\n{}\nstderr:\n{}",
        o.stdout,
        o.stderr
    );
    o.stdout
}

fn project_config(env: &Env) -> PathBuf {
    env.ws.join(".keel").join("config.toml")
}

fn global_config(env: &Env) -> PathBuf {
    env.home.join("config.toml")
}

/// The `mcp-server-everything` binary: the repository's pinned install
/// (`crates/plugins/keel-mcp/tests/node`, `npm ci` there), else `$KEEL_TEST_MCP_NODE_BIN` (a directory
/// holding it, e.g. `node_modules/.bin`).
fn everything_bin() -> PathBuf {
    support::node_bin("mcp-server-everything")
}

#[test]
fn add_list_get_and_remove_servers_in_their_files() {
    let env = Env::new();
    std::fs::create_dir_all(env.ws.join(".keel")).unwrap();
    // The project's file has comments and other settings that `add` keeps.
    std::fs::write(
        project_config(&env),
        "# project settings\nmodel = \"deepseek-chat\" # the cheap one\n\n[agent]\nmax_steps = 50\n",
    )
    .unwrap();

    let said = ok(
        &env,
        &[
            "mcp",
            "add",
            "files",
            "--env",
            "LOG_LEVEL=warn",
            "--env",
            "API_TOKEN=t0k-secret",
            "--",
            "npx",
            "-y",
            "@modelcontextprotocol/server-filesystem",
            ".",
        ],
    );
    assert!(said.contains("added MCP server 'files'"), "{said}");
    assert!(
        said.contains(&project_config(&env).display().to_string()),
        "{said}"
    );
    let text = std::fs::read_to_string(project_config(&env)).unwrap();
    assert!(
        text.starts_with("# project settings\nmodel = \"deepseek-chat\" # the cheap one\n"),
        "{text}"
    );
    assert!(text.contains("[agent]\nmax_steps = 50"), "{text}");
    assert!(text.contains("[mcp_servers.files]"), "{text}");

    ok(
        &env,
        &[
            "mcp",
            "add",
            "tracker",
            "--global",
            "--url",
            "https://mcp.example.com/mcp",
            "--bearer-token-env-var",
            "TRACKER_TOKEN",
            "--header",
            "X-Team=core",
        ],
    );
    let global = std::fs::read_to_string(global_config(&env)).unwrap();
    assert!(
        global.contains("[mcp_servers.tracker]")
            && global.contains("bearer_token_env_var = \"TRACKER_TOKEN\""),
        "{global}"
    );

    // list: both, with transport, state and origin.
    let list = ok(&env, &["mcp", "list"]);
    assert!(
        list.contains("files  stdio  enabled  npx -y @modelcontextprotocol/server-filesystem ."),
        "{list}"
    );
    assert!(
        list.contains(&format!("from {}", project_config(&env).display())),
        "{list}"
    );
    assert!(
        list.contains("tracker  http  enabled  https://mcp.example.com/mcp"),
        "{list}"
    );
    assert!(
        list.contains(&format!("from {}", global_config(&env).display())),
        "{list}"
    );
    let listed: Value = serde_json::from_str(&ok(&env, &["mcp", "list", "--json"])).unwrap();
    let servers = listed["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 2, "{listed}");
    assert_eq!(servers[0]["name"], "files");
    assert_eq!(servers[0]["type"], "stdio");
    assert_eq!(
        servers[0]["origin"],
        project_config(&env).display().to_string()
    );
    assert_eq!(servers[1]["name"], "tracker");
    assert_eq!(
        servers[1]["origin"],
        global_config(&env).display().to_string()
    );

    // get: the settings, secret-looking env values and the bearer token hidden.
    let get = run(env
        .keel_bare()
        .env("TRACKER_TOKEN", "tr-very-secret")
        .args(["mcp", "get", "tracker"]));
    assert_eq!(get.code, Some(0), "{}", get.stderr);
    assert!(
        get.stdout.contains("url: https://mcp.example.com/mcp")
            && get
                .stdout
                .contains("bearer_token_env_var: TRACKER_TOKEN (set)")
            && get.stdout.contains("headers: X-Team=core"),
        "{}",
        get.stdout
    );
    assert!(!get.stdout.contains("tr-very-secret"), "{}", get.stdout);
    let get = ok(&env, &["mcp", "get", "files"]);
    assert!(
        get.contains(&format!("origin: {}", project_config(&env).display())),
        "{get}"
    );
    assert!(get.contains("command: npx"), "{get}");
    assert!(
        get.contains("LOG_LEVEL=warn") && get.contains("API_TOKEN=<hidden>"),
        "{get}"
    );
    assert!(!get.contains("t0k-secret"), "{get}");
    let get: Value = serde_json::from_str(&ok(&env, &["mcp", "get", "files", "--json"])).unwrap();
    assert_eq!(get["env"]["API_TOKEN"], "<hidden>");
    assert_eq!(get["args"][0], "-y");

    // config dump: each server with where it came from.
    let dump = ok(&env, &["config", "dump"]);
    assert!(
        dump.contains(&format!(
            "mcp.files = \"npx -y @modelcontextprotocol/server-filesystem .\"  # {}; stdio",
            project_config(&env).display()
        )),
        "{dump}"
    );
    assert!(
        dump.contains(&format!(
            "mcp.tracker = \"https://mcp.example.com/mcp\"  # {}; http",
            global_config(&env).display()
        )),
        "{dump}"
    );
    assert!(
        dump.contains("mcp_servers.files.env.API_TOKEN = \"<hidden>\"")
            && dump.contains("mcp_servers.files.env.LOG_LEVEL = \"warn\""),
        "{dump}"
    );
    assert!(!dump.contains("t0k-secret"), "{dump}");

    // An existing name is refused, saying where it is; so is a bad name.
    let again = keel(&env, &["mcp", "add", "tracker", "--", "x"]);
    assert_ne!(again.code, Some(0));
    assert!(
        again.stderr.contains("'tracker' exists already")
            && again
                .stderr
                .contains(&global_config(&env).display().to_string()),
        "{}",
        again.stderr
    );
    let bad = keel(&env, &["mcp", "add", "my server", "--", "x"]);
    assert_ne!(bad.code, Some(0));
    assert!(bad.stderr.contains("not a server name"), "{}", bad.stderr);
    let bad = keel(&env, &["mcp", "add", "a.b", "--url", "https://x"]);
    assert!(bad.stderr.contains("not a server name"), "{}", bad.stderr);
    let token = keel(
        &env,
        &[
            "mcp",
            "add",
            "t2",
            "--url",
            "https://x",
            "--bearer-token-env-var",
            "sk-123",
        ],
    );
    assert!(token.stderr.contains("not the token"), "{}", token.stderr);
    let neither = keel(&env, &["mcp", "add", "t3"]);
    assert_ne!(neither.code, Some(0), "{}", neither.stderr);

    // remove: from the file that defines each, the rest of the file kept.
    let said = ok(&env, &["mcp", "remove", "tracker"]);
    assert!(
        said.contains(&format!(
            "removed MCP server 'tracker' from {}",
            global_config(&env).display()
        )),
        "{said}"
    );
    assert!(
        !std::fs::read_to_string(global_config(&env))
            .unwrap()
            .contains("tracker")
    );
    let said = ok(&env, &["mcp", "remove", "files"]);
    assert!(
        said.contains(&project_config(&env).display().to_string()),
        "{said}"
    );
    let text = std::fs::read_to_string(project_config(&env)).unwrap();
    assert_eq!(
        text,
        "# project settings\nmodel = \"deepseek-chat\" # the cheap one\n\n[agent]\nmax_steps = 50\n"
    );
    let none = keel(&env, &["mcp", "remove", "files"]);
    assert!(
        none.stderr.contains("no MCP server named 'files'"),
        "{}",
        none.stderr
    );
    assert!(ok(&env, &["mcp", "list"]).contains("no MCP servers configured"));
}

#[test]
fn mcp_json_servers_are_listed_with_their_path_and_not_removed() {
    let env = Env::new();
    env.write(
        ".mcp.json",
        r#"{"mcpServers": {
            "fs": {"command": "npx", "args": ["-y", "server-fs", "${KEEL_TEST_DIR}"], "env": {"FS_TOKEN": "${KEEL_TEST_SECRET}"}},
            "old": {"type": "sse", "url": "https://x/sse"}
        }}"#,
    );
    let json_path = env.ws.join(".mcp.json").display().to_string();
    let list = run(env
        .keel_bare()
        .env("KEEL_TEST_DIR", "/data")
        .env("KEEL_TEST_SECRET", "s3cret-value")
        .args(["mcp", "list"]));
    assert_eq!(list.code, Some(0), "{}", list.stderr);
    let out = list.stdout;
    assert!(
        out.contains("fs  stdio  enabled  npx -y server-fs ${KEEL_TEST_DIR}"),
        "values are shown as written: {out}"
    );
    assert!(out.contains(&format!("from {json_path}")), "{out}");
    assert!(
        out.contains("old  (not usable)") && out.contains("unknown transport type 'sse'"),
        "{out}"
    );
    assert!(!out.contains("s3cret-value"), "{out}");

    let get = run(env
        .keel_bare()
        .env("KEEL_TEST_DIR", "/data")
        .env("KEEL_TEST_SECRET", "s3cret-value")
        .args(["mcp", "get", "fs"]));
    assert!(get.stdout.contains("FS_TOKEN=<hidden>"), "{}", get.stdout);
    assert!(!get.stdout.contains("s3cret-value"), "{}", get.stdout);

    let dump = ok(&env, &["config", "dump"]);
    assert!(
        dump.contains(&format!("# {json_path}; problem: ")),
        "{dump}"
    );

    let remove = keel(&env, &["mcp", "remove", "fs"]);
    assert_ne!(remove.code, Some(0));
    assert!(
        remove.stderr.contains(&json_path) && remove.stderr.contains("Claude Code"),
        "{}",
        remove.stderr
    );
    assert!(env.read(".mcp.json").contains("\"fs\""));

    // A keel table of the same name wins over it; removing that table says the other is next.
    env.write(
        ".keel/config.toml",
        "[mcp_servers.fs]\ncommand = \"own-fs\"\n",
    );
    let list = ok(&env, &["mcp", "list"]);
    assert!(
        list.contains("fs  stdio  enabled  own-fs")
            && list.contains(&format!(
                "overrides the entry of the same name in {json_path}"
            )),
        "{list}"
    );
    let said = ok(&env, &["mcp", "remove", "fs"]);
    assert!(
        said.contains("removed MCP server 'fs' from")
            && said.contains(&format!("{json_path} is used")),
        "{said}"
    );
    assert_eq!(env.read(".keel/config.toml"), "");
}

#[test]
fn adding_a_name_that_mcp_json_has_is_refused() {
    let env = Env::new();
    env.write(".mcp.json", r#"{"mcpServers": {"fs": {"command": "npx"}}}"#);
    let o = keel(&env, &["mcp", "add", "fs", "--", "x"]);
    assert_ne!(o.code, Some(0));
    assert!(
        o.stderr.contains("exists already") && o.stderr.contains(".mcp.json"),
        "{}",
        o.stderr
    );
}

#[test]
fn test_lists_the_tools_of_server_everything_and_prompts_lists_its_prompts() {
    let env = Env::new();
    let bin = everything_bin();
    ok(
        &env,
        &[
            "mcp",
            "add",
            "everything",
            "--",
            bin.to_str().unwrap(),
            "stdio",
        ],
    );
    let out = ok(&env, &["mcp", "test", "everything"]);
    assert!(out.contains("MCP server 'everything'"), "{out}");
    // 15: keel declares elicitation, so the server adds its two elicitation tools.
    assert!(out.contains("listed 15 tools"), "{out}");
    assert!(
        out.contains("mcp__everything__trigger-elicitation-request"),
        "{out}"
    );
    for tool in ["echo", "get-sum", "get-tiny-image"] {
        let line = out
            .lines()
            .find(|l| {
                l.trim_start()
                    .starts_with(&format!("mcp__everything__{tool} "))
            })
            .unwrap_or_else(|| panic!("no line for {tool}: {out}"));
        let bytes: usize = line
            .split_whitespace()
            .nth(1)
            .and_then(|b| b.parse().ok())
            .unwrap_or_else(|| panic!("no size in {line:?}"));
        assert!(bytes > 20, "{line}");
    }
    assert!(out.contains("15 offered"), "{out}");

    let json: Value =
        serde_json::from_str(&ok(&env, &["mcp", "test", "everything", "--json"])).unwrap();
    let tools = json["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 15, "{json}");
    let echo = tools.iter().find(|t| t["tool"] == "echo").unwrap();
    assert_eq!(echo["name"], "mcp__everything__echo");
    assert!(echo["schema_bytes"].as_u64().unwrap() > 20);

    // disabled_tools: skipped, and said why.
    let cfg = env.ws.join(".keel/config.toml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("{text}disabled_tools = [\"echo\"]\n")).unwrap();
    let out = ok(&env, &["mcp", "test", "everything"]);
    assert!(
        out.contains("14 offered") && out.contains("1 skipped"),
        "{out}"
    );
    assert!(out.contains("echo: listed in disabled_tools"), "{out}");

    let prompts = ok(&env, &["mcp", "prompts", "everything"]);
    assert!(prompts.contains("everything: "), "{prompts}");
    for p in ["simple-prompt", "args-prompt"] {
        assert!(prompts.contains(&format!("  {p}  ")), "{prompts}");
    }
    assert!(prompts.contains("(required)"), "{prompts}");
    let all = ok(&env, &["mcp", "prompts", "--json"]);
    let all: Value = serde_json::from_str(&all).unwrap();
    assert_eq!(all[0]["server"], "everything");
    assert!(
        all[0]["prompts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "simple-prompt"),
        "{all}"
    );
}

#[test]
fn test_of_a_command_that_does_not_exist_fails_clearly() {
    let env = Env::new();
    ok(
        &env,
        &[
            "mcp",
            "add",
            "ghost",
            "--",
            "/nonexistent/keel-mcp-server",
            "--stdio",
        ],
    );
    let o = keel(&env, &["mcp", "test", "ghost"]);
    assert_eq!(o.code, Some(1), "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains("MCP server 'ghost' could not start")
            && o.stderr.contains("/nonexistent/keel-mcp-server"),
        "{}",
        o.stderr
    );
    // A server that starts and dies: its stderr tail is shown.
    ok(
        &env,
        &[
            "mcp",
            "add",
            "dies",
            "--",
            "sh",
            "-c",
            "echo broken config >&2; exit 3",
        ],
    );
    let o = keel(&env, &["mcp", "test", "dies"]);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(
        o.stderr.contains("exited (code 3)") && o.stderr.contains("broken config"),
        "{}",
        o.stderr
    );
    let o = keel(&env, &["mcp", "prompts", "dies"]);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
}
