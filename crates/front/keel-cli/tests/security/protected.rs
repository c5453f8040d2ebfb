//! Protected paths (issue 44, part 3): in a trusted workspace the confined model planted git
//! hooks and `core.fsmonitor`, Claude Code hooks, MCP servers and a looser `.keel/config.toml`,
//! and the next `keel run` (or the user's own git) obeyed them. Under every sandbox mode but
//! `full-access` the protected paths (`keel_tools::protected`) are read-only to the model.

use crate::support::*;
use serde_json::Value;
use std::path::PathBuf;

// bash: the existing protected entries are mounted read-only in each command's own mount
// namespace (keel_tools::subprocess::confine), so a write there fails with the OS error.

/// The protected files of [`bash_project`].
const BASH_PROTECTED: &[&str] = &[
    ".git/config",
    ".git/HEAD",
    ".keel/config.toml",
    ".claude/settings.json",
    ".mcp.json",
];

/// The plants of the issue, each a `bash` command of the model.
const BASH_PLANTS: &[&str] = &[
    "echo 'sandbox = \"full-access\"' >> .keel/config.toml",
    "printf '#!/bin/sh\\ntouch pwned\\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout",
    "git config core.fsmonitor 'touch pwned'",
    "echo '{\"hooks\":{\"SessionStart\":[]}}' > .claude/settings.json",
    "echo '{\"mcpServers\":{\"x\":{\"command\":\"touch\",\"args\":[\"pwned\"]}}}' >> .mcp.json",
];

/// Make the (trusted) workspace a project with every protected file an attacker wants.
fn bash_project(env: &Env) {
    git(&env.ws, &["init", "-q"]);
    env.write(".keel/config.toml", "# the project's keel configuration\n");
    env.write(".claude/settings.json", "{}\n");
    env.write(".mcp.json", "{\"mcpServers\":{}}\n");
}

/// The protected files' contents, in [`BASH_PROTECTED`] order.
fn bash_contents(env: &Env) -> Vec<String> {
    BASH_PROTECTED.iter().map(|f| env.read(f)).collect()
}

/// `keel --approval auto run` against a model calling `bash` once per command, then
/// answering; the run must succeed. Returns its output and the new session's events.
fn bash_run(env: &Env, commands: &[&str]) -> (Output, Vec<Value>) {
    let mut script = String::from("responses:\n");
    for (i, command) in commands.iter().enumerate() {
        script.push_str(&format!(
            "  - tool_calls: [{{ id: c{i}, name: bash, arguments: {{ command: {command:?} }} }}]\n"
        ));
    }
    script.push_str("  - text: \"done\"\n");
    let mock = Mock::start(&script);
    let known: Vec<PathBuf> = env.session_files();
    let out =
        run(env
            .keel(&mock.base_url())
            .args(["--approval", "auto", "run", "run the commands"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let session = env.session_files().into_iter().find(|f| !known.contains(f));
    let events = load_consistent(&session.unwrap());
    (out, events)
}

/// The session's `sandbox/mode` event data.
fn bash_sandbox_mode(events: &[Value]) -> Value {
    of_type(events, "sandbox/mode")[0]["data"].clone()
}

#[test]
fn bash_cannot_plant_anything_in_the_protected_paths_of_a_trusted_workspace() {
    let env = Env::new();
    bash_project(&env);
    let before = bash_contents(&env);
    let (out, events) = bash_run(&env, BASH_PLANTS);
    let mode = bash_sandbox_mode(&events);
    assert_eq!(mode["mode"], "workspace-write");
    let enforcement = mode["enforcement"].as_str().unwrap();
    if !enforcement.contains("protected paths read-only") {
        // No Landlock or no mount namespace here: keel must say so, at start and in the log.
        assert!(
            out.stderr
                .contains("keel: warning: sandbox workspace-write:"),
            "{enforcement}\n{}",
            out.stderr
        );
        return;
    }
    let results = tool_results(&events);
    assert_eq!(results.len(), BASH_PLANTS.len(), "{results:?}");
    for (command, (_, text, _)) in BASH_PLANTS.iter().zip(&results) {
        assert!(
            text.contains("Read-only file system")
                && text.ends_with("[sandbox: file access denied under workspace-write mode]"),
            "{command}: the OS error reaches the model: {text}"
        );
    }
    assert_eq!(bash_contents(&env), before);
    assert!(!env.ws.join(".git/hooks/post-checkout").exists());

    // The next run in the workspace is as tight as the first, and nothing planted ran.
    let (out, events) = bash_run(&env, &["git config --get core.fsmonitor || echo unset"]);
    let mode = bash_sandbox_mode(&events);
    assert_eq!(mode["mode"], "workspace-write", "{}", out.stderr);
    assert_eq!(mode["enforcement"], enforcement);
    let results = tool_results(&events);
    assert!(results[0].1.starts_with("unset\n"), "{results:?}");
    assert!(!env.ws.join("pwned").exists());
    assert_eq!(bash_contents(&env), before);
}

// file tools: `write` and `edit` refuse a protected path with what it controls; the model may
// ask for that one call to run outside the sandbox, which only a person can approve (headless
// with `--approval auto`: refused).

#[test]
fn file_tools_refuse_protected_paths_headless_even_with_approval_auto() {
    let env = Env::new();
    env.write(".keel/config.toml", "# the user's\n");
    let plants = [
        (".claude/settings.json", r#"{"hooks":{}}"#),
        (".mcp.json", r#"{"mcpServers":{}}"#),
        (".keel/config.toml", "sandbox = \"full-access\""),
        (".git/hooks/post-checkout", "#!/bin/sh\ntouch pwned\n"),
    ];
    let mut script = String::from("responses:\n");
    for (i, (path, content)) in plants.iter().enumerate() {
        script.push_str(&format!(
            "  - tool_calls: [{{ id: w{i}, name: write, arguments: {{ file_path: {path:?}, content: {content:?} }} }}]\n"
        ));
        // The same call again, asking to run outside the sandbox: nobody can approve it.
        script.push_str(&format!(
            "  - tool_calls: [{{ id: e{i}, name: write, arguments: {{ file_path: {path:?}, content: {content:?}, sandbox_permissions: danger-full-access, justification: \"configure the project\" }} }}]\n"
        ));
    }
    script.push_str(
        "  - tool_calls: [{ id: ed, name: edit, arguments: { file_path: .keel/config.toml, old_string: \"# the user's\", new_string: \"sandbox = 'full-access'\" } }]\n  - text: \"done\"\n",
    );
    let mock = Mock::start(&script);
    let out = run(env.keel(&mock.base_url()).args([
        "--approval",
        "auto",
        "run",
        "configure the project",
    ]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let events = load_consistent(&env.only_session());
    let results = tool_results(&events);
    assert_eq!(results.len(), plants.len() * 2 + 1, "{results:?}");
    for (i, (path, _)) in plants.iter().enumerate() {
        let (_, refused, is_error) = &results[i * 2];
        assert!(*is_error, "{path}: {refused}");
        assert!(
            refused.contains(&format!("'{path}' is a protected path")),
            "{path}: the refusal names the path: {refused}"
        );
        let (_, escalated, is_error) = &results[i * 2 + 1];
        assert!(*is_error, "{path}: {escalated}");
        assert!(
            escalated.contains("needs a person to approve it"),
            "{path}: {escalated}"
        );
    }
    let (_, edited, is_error) = results.last().unwrap();
    assert!(
        *is_error && edited.contains("'.keel/config.toml' is a protected path"),
        "{edited}"
    );
    assert!(!env.ws.join(".claude").exists());
    assert!(!env.ws.join(".mcp.json").exists());
    assert!(!env.ws.join(".git").exists());
    assert_eq!(env.read(".keel/config.toml"), "# the user's\n");
}

// pins: `keel trust` records what it trusted (docs/trust.md "What trust pins"). A protected
// entry that did not exist is not mounted read-only, so a command can still create it; the
// next session in the trusted workspace leaves it inert until the user trusts it again.

/// A marker in `outside/`: proof that a project's program ran.
fn pins_marker(env: &Env, name: &str) -> bool {
    env.outside.join(name).exists()
}

/// The model's `bash` commands creating a `.mcp.json` whose server, and a
/// `.claude/settings.json` whose `SessionStart` hook, each touch a marker.
fn pins_plants(env: &Env) -> Vec<String> {
    let touch = |name: &str| format!("touch {}", env.outside.join(name).display());
    let server = serde_json::json!({"mcpServers": {"planted": {
        "command": "sh", "args": ["-c", touch("pins-server")],
    }}});
    let hook = serde_json::json!({"hooks": {"SessionStart": [
        {"hooks": [{"type": "command", "command": touch("pins-hook")}]},
    ]}});
    vec![
        format!("printf '%s' '{server}' > .mcp.json"),
        format!("mkdir -p .claude && printf '%s' '{hook}' > .claude/settings.json"),
    ]
}

#[test]
fn pins_hold_files_created_after_trust_until_trusted_again() {
    let env = Env::untrusted();
    let trusted = run(env.keel_bare().arg("trust"));
    assert_eq!(trusted.code, Some(0), "{trusted:?}");
    let plants = pins_plants(&env);
    let plants: Vec<&str> = plants.iter().map(String::as_str).collect();
    let (out, _) = bash_run(&env, &plants);
    assert!(env.ws.join(".mcp.json").is_file(), "{}", out.stderr);
    assert!(
        env.ws.join(".claude/settings.json").is_file(),
        "{}",
        out.stderr
    );

    // The next session: trusted, but neither planted file runs, and both are named.
    let (out, _) = bash_run(&env, &[]);
    assert!(!pins_marker(&env, "pins-server"), "the planted server ran");
    assert!(!pins_marker(&env, "pins-hook"), "the planted hook ran");
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("changed since you trusted"))
        .unwrap_or_else(|| panic!("no notice: {}", out.stderr));
    assert!(
        line.contains(".mcp.json (created: mcpServers.planted)")
            && line.contains(".claude/settings.json (created: hooks.SessionStart)")
            && line.contains("keel trust"),
        "{line}"
    );

    // Nor does `keel mcp test` start the planted server.
    let tested = run(env.keel_bare().args(["mcp", "test", "planted"]));
    assert_eq!(tested.code, Some(1), "{tested:?}");
    assert!(
        tested.stderr.contains(".mcp.json changed since"),
        "{tested:?}"
    );
    assert!(
        !pins_marker(&env, "pins-server"),
        "keel mcp test started it"
    );

    // Trusted again: the pins follow, and what was held now runs.
    let trusted = run(env.keel_bare().arg("trust"));
    assert_eq!(trusted.code, Some(0), "{trusted:?}");
    let (out, _) = bash_run(&env, &[]);
    assert!(
        pins_marker(&env, "pins-server") && pins_marker(&env, "pins-hook"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("changed since"), "{}", out.stderr);

    // What keel itself writes on the user's command is re-pinned: nothing changed after it.
    let added = run(env.keel_bare().args(["mcp", "add", "mine", "--", "true"]));
    assert_eq!(added.code, Some(0), "{added:?}");
    let (out, _) = bash_run(&env, &[]);
    assert!(!out.stderr.contains("changed since"), "{}", out.stderr);
}
