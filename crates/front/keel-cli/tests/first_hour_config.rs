//! What a newcomer trips over in the first hour, through the real binary: `keel mcp add` in an
//! untrusted workspace (said at once; the server listed as inert, with why), and `keel config
//! dump|get|set|path` reflecting the run's flags and editing the user's file.

mod support;

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

const NOT_TRUSTED: &str = "is not trusted (keel trust, or --trust-project for one run)";

#[test]
fn mcp_add_in_an_untrusted_workspace_warns_and_the_server_is_listed_inert() {
    let env = Env::untrusted();
    let added = keel(&env, &["mcp", "add", "files", "--", "echo", "hi"]);
    assert_eq!(added.code, Some(0), "{}", added.stderr);
    // Written where asked, and said at once that it will not start, with both ways out.
    let file = env.read(".keel/config.toml");
    assert!(file.contains("[mcp_servers.files]"), "{file}");
    assert!(
        added.stderr.contains("is not trusted")
            && added.stderr.contains("keel trust")
            && added.stderr.contains("--global"),
        "{}",
        added.stderr
    );

    let list = ok(&env, &["mcp", "list"]);
    assert!(!list.contains("no MCP servers configured"), "{list}");
    assert!(list.contains("files  stdio"), "{list}");
    assert!(list.contains(NOT_TRUSTED), "{list}");

    let json: serde_json::Value =
        serde_json::from_str(&ok(&env, &["mcp", "list", "--json"])).unwrap();
    let inert = json["servers"][0]["inert"].as_str().unwrap_or_default();
    assert!(inert.contains(NOT_TRUSTED), "{json}");

    let get = ok(&env, &["mcp", "get", "files"]);
    assert!(
        get.contains("inert: not started") && get.contains("command: echo"),
        "{get}"
    );

    let test = keel(&env, &["mcp", "test", "files"]);
    assert_eq!(test.code, Some(1), "{}", test.stderr);
    assert!(
        test.stderr.contains(NOT_TRUSTED) && !test.stderr.contains("no MCP server named"),
        "{}",
        test.stderr
    );

    // Adding it again names the file it is in; removing it edits that file.
    let again = keel(&env, &["mcp", "add", "files", "--", "echo", "hi"]);
    assert_ne!(again.code, Some(0));
    assert!(again.stderr.contains("exists already"), "{}", again.stderr);
    ok(&env, &["mcp", "remove", "files"]);
    assert!(!env.read(".keel/config.toml").contains("mcp_servers.files"));
}

#[test]
fn config_dump_shows_the_flags_as_their_layers() {
    let env = Env::new();
    let dump = ok(
        &env,
        &[
            "--model",
            "my-model",
            "--sandbox",
            "read-only",
            "--context-window",
            "50000",
            "config",
            "dump",
        ],
    );
    assert!(dump.contains("model = \"my-model\"  # --model"), "{dump}");
    assert!(
        dump.contains("sandbox.mode = \"read-only\"  # --sandbox"),
        "{dump}"
    );
    assert!(
        dump.contains("models.my-model.context_window = 50000  # --context-window"),
        "{dump}"
    );
    assert!(
        dump.contains("endpoint.model = \"my-model\"  # --model"),
        "{dump}"
    );
    assert!(dump.contains("endpoint.context_window = 50000"), "{dump}");
}

#[test]
fn config_dump_under_base_url_shows_the_provider_the_run_uses() {
    let env = Env::new();
    std::fs::write(env.home.join("config.toml"), "provider = \"openai\"\n").unwrap();
    let dump = ok(
        &env,
        &["--base-url", "http://127.0.0.1:9/v1", "config", "dump"],
    );
    let line = dump
        .lines()
        .find(|l| l.starts_with("endpoint.provider = "))
        .unwrap_or_default();
    assert!(
        line.starts_with("endpoint.provider = \"openai\"")
            && line.contains("--base-url: requests go to http://127.0.0.1:9/v1"),
        "{dump}"
    );
    assert!(
        dump.contains("endpoint.base_url = \"http://127.0.0.1:9/v1\"  # --base-url"),
        "{dump}"
    );
}

#[test]
fn config_set_get_and_path() {
    let env = Env::new();
    let path = env.home.join("config.toml");
    std::fs::write(&path, "# mine\nmodel = \"old\" # keep this comment\n").unwrap();

    assert_eq!(
        ok(&env, &["config", "path"]).trim(),
        path.display().to_string()
    );
    assert_eq!(
        ok(&env, &["config", "path", "--project"]).trim(),
        env.ws.join(".keel/config.toml").display().to_string()
    );

    ok(&env, &["config", "set", "model", "new-model"]);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("# mine") && text.contains("model = \"new-model\" # keep this comment"),
        "{text}"
    );
    assert_eq!(
        ok(&env, &["config", "get", "model"]).trim(),
        "\"new-model\""
    );
    // Flags count.
    assert_eq!(
        ok(&env, &["--model", "flagged", "config", "get", "model"]).trim(),
        "\"flagged\""
    );

    ok(&env, &["config", "set", "agent.max_steps", "12"]);
    assert_eq!(ok(&env, &["config", "get", "agent.max_steps"]).trim(), "12");
    let unset = keel(&env, &["config", "get", "no.such.key"]);
    assert_eq!(unset.code, Some(1), "{}", unset.stdout);

    // A value the configuration does not accept: refused, the file as it was.
    let before = std::fs::read_to_string(&path).unwrap();
    for (key, value) in [
        ("sandbox.mode", "7"),
        ("agent.max_steps", "lots"),
        ("nonsense", "1"),
    ] {
        let bad = keel(&env, &["config", "set", key, value]);
        assert_ne!(bad.code, Some(0), "{key} = {value} accepted");
        assert!(bad.stderr.contains("refused"), "{}", bad.stderr);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
    }
    // One that loads alone but not merged (no such provider table): refused as well.
    let bad = keel(&env, &["config", "set", "provider", "nowhere"]);
    assert_ne!(bad.code, Some(0), "{}", bad.stdout);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
}
