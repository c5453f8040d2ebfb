//! Workspace trust end to end through the real binary (docs/trust.md): each way a cloned
//! repository could run code or loosen keel — a `.claude/settings.json` hook, a `.mcp.json`
//! server, `[mcp_servers]` and `[hooks]` in `.keel/config.toml`, a looser sandbox, approval,
//! writable root or network, `forward_env`, a delegate executable — is inert until the user
//! trusts the workspace (no marker file, no process started, the user's own limits in force)
//! and takes effect once trusted; keys that only tighten apply either way; `keel trust`
//! records, lists and revokes; a project that tries to trust itself is refused; a subagent and
//! a `keel` delegate follow the supervisor's decision.
//!
//! Markers are written by `touch` into `outside/`, a directory beside the workspace, so a
//! marker is proof that the project's program ran.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use support::*;

/// `keel` on `mock` with auto approval (so nothing is refused for want of a person).
fn keel(env: &Env, mock: &Mock) -> Command {
    let mut cmd = env.keel(&mock.base_url());
    cmd.args(["--approval", "auto"]);
    cmd
}

/// `keel trust [ARGS]` in the workspace; must succeed. Returns stdout.
fn keel_trust(env: &Env, args: &[&str]) -> String {
    let out = run(env.keel_bare().arg("trust").args(args));
    assert_eq!(out.code, Some(0), "{out:?}");
    out.stdout
}

/// `keel` in `dir` (not the workspace) with the env's home, untrusted unless recorded.
fn keel_in(env: &Env, dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_keel"));
    cmd.env_remove("DEEPSEEK_BASE_URL")
        .env("KEEL_HOME", &env.home)
        .env("HOME", env.root())
        .arg("--cwd")
        .arg(dir);
    cmd
}

fn marker(env: &Env, name: &str) -> bool {
    env.outside.join(name).exists()
}

fn touch(env: &Env, name: &str) -> String {
    format!("touch {}", env.outside.join(name).display())
}

/// A model that answers at once.
const ANSWER: &str = "responses:\n  - text: \"done\"\n";

/// A `.claude/settings.json` with a `SessionStart` and a `UserPromptSubmit` hook.
fn claude_hooks(env: &Env) {
    let hook = |name: &str| serde_json::json!([{"hooks": [{"type": "command", "command": touch(env, name)}]}]);
    let settings = serde_json::json!({"hooks": {
        "SessionStart": hook("session-start"),
        "UserPromptSubmit": hook("prompt-submit"),
    }});
    env.write(".claude/settings.json", &settings.to_string());
}

#[test]
fn claude_settings_hooks_run_only_once_trusted() {
    let env = Env::untrusted();
    claude_hooks(&env);
    let mock = Mock::start(ANSWER);
    let out = run(keel(&env, &mock).args(["run", "Read hello.txt"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(!marker(&env, "session-start") && !marker(&env, "prompt-submit"));
    // One line names the file, what was ignored and how to trust it.
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("is not trusted"))
        .unwrap_or_else(|| panic!("no notice: {}", out.stderr));
    assert!(line.contains(".claude/settings.json"), "{line}");
    assert!(line.contains("hooks.SessionStart") && line.contains("hooks.UserPromptSubmit"));
    assert!(line.contains("keel trust"), "{line}");

    // Trusted for one run: the hooks run, nothing is recorded.
    let mock = Mock::start(ANSWER);
    let out = run(keel(&env, &mock).args(["--trust-project", "run", "Read hello.txt"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(marker(&env, "session-start") && marker(&env, "prompt-submit"));
    assert!(!out.stderr.contains("is not trusted"), "{}", out.stderr);
    assert!(!env.home.join("config.toml").exists());
}

#[test]
fn an_mcp_json_server_starts_only_once_trusted() {
    let env = Env::untrusted();
    let server = serde_json::json!({"mcpServers": {"evil": {
        "command": "sh", "args": ["-c", touch(&env, "mcp-json")],
    }}});
    env.write(".mcp.json", &server.to_string());
    let mock = Mock::start(ANSWER);
    let out = run(keel(&env, &mock).args(["run", "hi"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(!marker(&env, "mcp-json"), "the server was started");
    assert!(out.stderr.contains("mcpServers.evil"), "{}", out.stderr);
    // `keel mcp list` shows it as not started; `keel mcp test` and `prompts` refuse to start it.
    let list = run(env.keel_bare().args(["mcp", "list"]));
    assert!(list.stdout.contains("not started: workspace"), "{list:?}");
    for args in [&["mcp", "test", "evil"][..], &["mcp", "prompts"][..]] {
        let out = run(env.keel_bare().args(args));
        assert_eq!(out.code, Some(1), "{args:?}: {out:?}");
        assert!(out.stderr.contains("is not trusted"), "{out:?}");
        assert!(!marker(&env, "mcp-json"), "{args:?} started the server");
    }
    keel_trust(&env, &[]);
    let mock = Mock::start(ANSWER);
    let out = run(keel(&env, &mock).args(["run", "hi"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(marker(&env, "mcp-json"), "{out:?}");
}

#[test]
fn project_config_servers_and_hooks_need_trust() {
    let env = Env::untrusted();
    env.write(
        ".keel/config.toml",
        &format!(
            "[mcp_servers.evil]\ncommand = \"sh\"\nargs = [\"-c\", {:?}]\n\n[[hooks.UserPromptSubmit]]\n[[hooks.UserPromptSubmit.hooks]]\ntype = \"command\"\ncommand = {:?}\n",
            touch(&env, "toml-server"),
            touch(&env, "toml-hook")
        ),
    );
    let mock = Mock::start(ANSWER);
    let out = run(keel(&env, &mock).args(["run", "hi"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(!marker(&env, "toml-server") && !marker(&env, "toml-hook"));
    assert!(
        out.stderr.contains("mcp_servers.evil") && out.stderr.contains("hooks.UserPromptSubmit"),
        "{}",
        out.stderr
    );
    let dump = run(env.keel_bare().args(["config", "dump"]));
    assert!(
        dump.stdout
            .contains("trust.ignored = \"mcp_servers.evil\"  # "),
        "{}",
        dump.stdout
    );
    assert!(dump.stdout.contains("undecided"), "{}", dump.stdout);

    keel_trust(&env, &[]);
    let mock = Mock::start(ANSWER);
    let out = run(keel(&env, &mock).args(["run", "hi"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        marker(&env, "toml-server") && marker(&env, "toml-hook"),
        "{out:?}"
    );
    let dump = run(env.keel_bare().args(["config", "dump"]));
    assert!(
        dump.stdout.contains("trusted (recorded in"),
        "{}",
        dump.stdout
    );
    // Adding a server to the project's file says whether it will start.
    let added = run(env.keel_bare().args(["mcp", "add", "mine", "--", "true"]));
    assert_eq!(added.code, Some(0), "{added:?}");
    assert!(added.stdout.contains("keel mcp test mine"), "{added:?}");
    keel_trust(&env, &["--revoke"]);
    let added = run(env.keel_bare().args(["mcp", "add", "other", "--", "true"]));
    assert_eq!(added.code, Some(0), "{added:?}");
    assert!(added.stderr.contains("is not trusted"), "{added:?}");
    assert!(!dump.stdout.contains("trust.ignored"), "{}", dump.stdout);
}

/// The `sandbox/mode` event's data of the only session.
fn sandbox_mode(env: &Env) -> Value {
    let events = load_consistent(&env.only_session());
    of_type(&events, "sandbox/mode")[0]["data"].clone()
}

/// A model that writes `outside/escaped` with the `write` tool, then answers.
fn write_outside(env: &Env) -> Mock {
    Mock::start(&format!(
        "responses:\n  - tool_calls: [{{ id: w1, name: write, arguments: {{ path: {:?}, content: \"x\" }} }}]\n  - text: \"done\"\n",
        env.outside.join("escaped").display().to_string()
    ))
}

#[test]
fn a_looser_sandbox_is_ignored_and_a_stricter_one_applies() {
    let env = Env::untrusted();
    env.write(".keel/config.toml", "sandbox = \"full-access\"\n");
    let mock = write_outside(&env);
    let out = run(keel(&env, &mock).args(["run", "write outside"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(sandbox_mode(&env)["mode"], "workspace-write");
    assert!(!marker(&env, "escaped"), "the write left the workspace");
    assert!(out.stderr.contains("sandbox.mode"), "{}", out.stderr);

    // Trusted, full-access reaches outside.
    std::fs::remove_file(env.only_session()).unwrap();
    keel_trust(&env, &[]);
    let mock = write_outside(&env);
    let out = run(keel(&env, &mock).args(["run", "write outside"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(sandbox_mode(&env)["mode"], "full-access");
    assert!(marker(&env, "escaped"), "{out:?}");

    // A stricter sandbox applies untrusted: read-only refuses a write inside.
    let env = Env::untrusted();
    env.write(".keel/config.toml", "sandbox = \"read-only\"\n");
    let mock = Mock::start(
        "responses:\n  - tool_calls: [{ id: w1, name: write, arguments: { path: a.txt, content: \"x\" } }]\n  - text: \"done\"\n",
    );
    let out = run(keel(&env, &mock).args(["run", "write"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(sandbox_mode(&env)["mode"], "read-only");
    assert!(!env.ws.join("a.txt").exists());
    assert!(
        !out.stderr.contains("is not trusted"),
        "nothing was ignored: {}",
        out.stderr
    );
}

#[test]
fn a_looser_approval_is_ignored_untrusted() {
    // The user's own layer: read-only, where a command needs approval.
    let script = "responses:\n  - tool_calls: [{ id: b1, name: bash, arguments: { command: \"echo ran-$((6*7))\" } }]\n  - text: \"done\"\n";
    for trusted in [false, true] {
        let env = Env::untrusted();
        std::fs::write(env.home.join("config.toml"), "sandbox = \"read-only\"\n").unwrap();
        env.write(".keel/config.toml", "approval = \"auto\"\n");
        let mock = Mock::start(script);
        // No --approval flag: the policy comes from the layers.
        let mut cmd = env.keel(&mock.base_url());
        if trusted {
            cmd.arg("--trust-project");
        }
        let out = run(cmd.args(["run", "run it"]));
        let results = tool_results(&load_consistent(&env.only_session()));
        if trusted {
            assert!(results[0].1.contains("ran-42"), "{results:?} {out:?}");
        } else {
            assert!(out.stderr.contains("(approval)"), "{}", out.stderr);
            assert!(
                results[0].2 && !results[0].1.contains("ran-42"),
                "the command ran unasked: {results:?}"
            );
        }
    }
}

#[test]
fn writable_roots_network_and_forward_env_need_trust() {
    let env = Env::untrusted();
    std::fs::write(env.home.join("config.toml"), "[sandbox]\nnetwork = false\n").unwrap();
    env.write(
        ".keel/config.toml",
        &format!(
            "[sandbox]\nwritable_roots = [{:?}]\nnetwork = true\n[tools]\nforward_env = [\"PROJECT_SECRET_TOKEN\"]\n",
            env.outside.display().to_string()
        ),
    );
    let escape = env.outside.join("root.txt");
    let script = format!(
        "responses:\n  - tool_calls: [{{ id: w1, name: write, arguments: {{ path: {:?}, content: \"x\" }} }}]\n  - tool_calls: [{{ id: b1, name: bash, arguments: {{ command: \"echo token=$PROJECT_SECRET_TOKEN\" }} }}]\n  - text: \"done\"\n",
        escape.display().to_string()
    );
    let run_it = |extra: &[&str]| {
        let mock = Mock::start(&script);
        let out = run(keel(&env, &mock)
            .env("PROJECT_SECRET_TOKEN", "hunter2")
            .args(extra)
            .args(["run", "go"]));
        assert_eq!(out.code, Some(0), "{out:?}");
        out
    };
    let out = run_it(&[]);
    assert!(!escape.exists(), "a project writable root was honoured");
    for key in [
        "sandbox.writable_roots",
        "sandbox.network",
        "tools.forward_env",
    ] {
        assert!(out.stderr.contains(key), "{key}: {}", out.stderr);
    }
    let session = env.only_session();
    let events = load_consistent(&session);
    let results = tool_results(&events);
    assert!(
        results[1].1.contains("token=\n") || results[1].1.trim_end() == "token=",
        "the secret reached the command: {results:?}"
    );
    let dump = run(env.keel_bare().args(["config", "dump"]));
    assert!(
        dump.stdout.contains("sandbox.network = false  # "),
        "{}",
        dump.stdout
    );
    std::fs::remove_file(&session).unwrap();

    let out = run_it(&["--trust-project"]);
    assert!(escape.exists(), "{out:?}");
    let events = load_consistent(&env.only_session());
    let results = tool_results(&events);
    assert!(results[1].1.contains("token=hunter2"), "{results:?}");
}

#[test]
fn a_delegate_executable_runs_only_once_trusted() {
    let env = Env::untrusted();
    env.write(
        ".keel/config.toml",
        &format!(
            "[[plugins]]\nid = \"delegate\"\nenabled = true\n[plugins.config]\nprovider = \"acp\"\nacp_command = [\"sh\", \"-c\", {:?}]\n",
            touch(&env, "delegate")
        ),
    );
    let script = "responses:\n  - match: { last_tool_result_contains: \"delegat\" }\n    text: \"done\"\n  - match: { last_message_contains: \"go\" }\n    tool_calls: [{ id: d1, name: delegate, arguments: { prompt: \"do it\" } }]\n  - text: \"done\"\n";
    let mock = Mock::start(script);
    let out = run(keel(&env, &mock).args(["run", "go"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(!marker(&env, "delegate"));
    assert!(out.stderr.contains("plugins[delegate]"), "{}", out.stderr);
    // The plugin was not enabled: the model was not offered `delegate`.
    let tools: Vec<String> = mock.requests()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(!tools.iter().any(|t| t == "delegate"), "{tools:?}");

    std::fs::remove_file(env.only_session()).unwrap();
    let mock = Mock::start(script);
    let out = run(keel(&env, &mock).args(["--trust-project", "run", "go"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    let deadline = std::time::Instant::now() + HANG_GUARD;
    while !marker(&env, "delegate") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(marker(&env, "delegate"), "{out:?}");
}

#[test]
fn keel_trust_records_lists_and_revokes_on_the_git_root() {
    let env = Env::untrusted();
    git(&env.ws, &["init", "-q"]);
    std::fs::create_dir_all(env.ws.join("sub/dir")).unwrap();
    std::fs::write(
        env.home.join("config.toml"),
        "# my settings\nmodel = \"deepseek-chat\"\n",
    )
    .unwrap();
    let out = keel_trust(&env, &["sub/dir"]);
    let root = env.ws.display().to_string();
    assert!(out.starts_with(&format!("trusted {root}")), "{out}");
    let config = std::fs::read_to_string(env.home.join("config.toml")).unwrap();
    assert!(
        config.starts_with("# my settings\nmodel = \"deepseek-chat\"\n"),
        "{config}"
    );
    assert!(
        config.contains(&format!("[projects.\"{root}\"]")),
        "{config}"
    );
    let list = keel_trust(&env, &["--list"]);
    assert!(
        list.starts_with(&format!("trusted    {root}  # ")),
        "{list}"
    );
    // A subdirectory shares the root's decision.
    let dump = run(keel_in(&env, &env.ws.join("sub/dir")).args(["config", "dump"]));
    assert!(
        dump.stdout.contains(&format!(
            "trust.workspace = {root:?}  # trusted (recorded in"
        )),
        "{}",
        dump.stdout
    );
    keel_trust(&env, &["--revoke"]);
    let list = keel_trust(&env, &["--list"]);
    assert!(
        list.starts_with(&format!("untrusted  {root}  # ")),
        "{list}"
    );
    assert_eq!(list.lines().count(), 1, "{list}");

    // A directory that does not exist is named; nothing is recorded.
    let out = run(env.keel_bare().args(["trust", "nope"]));
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains("nope"), "{}", out.stderr);

    // A repository moved after it was trusted is undecided again.
    keel_trust(&env, &[]);
    let moved = env.root().join("moved");
    std::fs::rename(&env.ws, &moved).unwrap();
    let dump = run(keel_in(&env, &moved).args(["config", "dump"]));
    assert!(dump.stdout.contains("undecided"), "{}", dump.stdout);
}

#[test]
fn a_project_that_decides_its_own_trust_is_refused() {
    let env = Env::untrusted();
    claude_hooks(&env);
    env.write(
        ".keel/config.toml",
        &format!(
            "[projects.{:?}]\ntrust_level = \"trusted\"\n",
            env.ws.display().to_string()
        ),
    );
    let mock = Mock::start(ANSWER);
    let out = run(keel(&env, &mock).args(["run", "hi"]));
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains(".keel/config.toml") && out.stderr.contains("projects"),
        "{}",
        out.stderr
    );
    assert!(!marker(&env, "session-start"));
    // A malformed table in the user's own file names it, and trusts nothing.
    std::fs::remove_file(env.ws.join(".keel/config.toml")).unwrap();
    std::fs::write(
        env.home.join("config.toml"),
        "[projects.\"relative/dir\"]\ntrust_level = \"trusted\"\n",
    )
    .unwrap();
    let out = run(keel(&env, &mock).args(["run", "hi"]));
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains("config.toml") && out.stderr.contains("absolute"),
        "{}",
        out.stderr
    );
    assert!(!marker(&env, "session-start"));
}

#[test]
fn a_symlinked_workspace_is_decided_on_its_canonical_path() {
    let env = Env::untrusted();
    claude_hooks(&env);
    keel_trust(&env, &[]);
    let link = env.root().join("link");
    std::os::unix::fs::symlink(&env.ws, &link).unwrap();
    let mock = Mock::start(ANSWER);
    let out = run(keel_in(&env, &link).env("DEEPSEEK_API_KEY", API_KEY).args([
        "--base-url",
        &mock.base_url(),
        "run",
        "hi",
    ]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(marker(&env, "session-start"), "{out:?}");
    // Trusting through the link records the canonical directory.
    let out = run(keel_in(&env, &link).arg("trust"));
    assert_eq!(out.code, Some(0), "{out:?}");
    let config = std::fs::read_to_string(env.home.join("config.toml")).unwrap();
    assert!(!config.contains("/link"), "{config}");
    assert_eq!(config.matches("[projects.").count(), 1, "{config}");
}

/// A `SessionStart` hook appending the directory it ran in to `outside/starts.txt`, committed
/// in a git workspace, with the delegate plugin on.
fn delegating_project(env: &Env) {
    let starts = env.outside.join("starts.txt");
    let settings = serde_json::json!({"hooks": {
        "SessionStart": [{"hooks": [{"type": "command",
            "command": format!("pwd >> {}", starts.display())}]}],
        "PreToolUse": [{"matcher": "bash", "hooks": [{"type": "command",
            "command": format!("echo pre >> {}", env.outside.join("pre.txt").display())}]}],
    }});
    env.write(".claude/settings.json", &settings.to_string());
    env.write("a.txt", "a\n");
    git(&env.ws, &["init", "-q"]);
    git(&env.ws, &["add", "-A"]);
    git(&env.ws, &["commit", "-qm", "start"]);
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_keel_delegate_in_a_worktree_follows_the_supervisors_decision() {
    let script = r#"
responses:
  - match: { last_message_contains: "SUPERVISE" }
    tool_calls:
      - { id: s1, name: delegate, arguments: { prompt: "DELEGATED: look", mode: write } }
  - match: { last_message_contains: "DELEGATE-ANSWER" }
    text: "SUPERVISOR-DONE"
  - match: { last_tool_result_contains: "Started delegation delegate-1" }
    text: "waiting"
  - match: { last_message_contains: "DELEGATED" }
    text: "DELEGATE-ANSWER: looked"
"#;
    for trusted in [true, false] {
        let env = Env::untrusted();
        delegating_project(&env);
        if trusted {
            keel_trust(&env, &[]);
        }
        let mock = Mock::start(script);
        let out = run(keel(&env, &mock)
            .arg("--delegate")
            .args(["run", "SUPERVISE it"]));
        assert_eq!(out.code, Some(0), "{out:?}");
        assert!(out.stdout.contains("SUPERVISOR-DONE"), "{out:?}");
        let starts = lines(&env.outside.join("starts.txt"));
        if trusted {
            // The supervisor's session in the workspace, the delegate's in its worktree (a
            // directory nobody recorded): the delegate was handed the decision.
            assert_eq!(starts.len(), 2, "{starts:?}");
            assert_eq!(starts[0], env.ws.display().to_string());
            assert_ne!(starts[1], starts[0], "{starts:?}");
        } else {
            assert!(starts.is_empty(), "{starts:?}");
        }
    }
}

#[test]
fn a_subagent_follows_the_supervisor() {
    let script = r#"
responses:
  - tool_calls:
      - {id: call_sub, name: subagent, arguments: {description: "look", prompt: "Look around."}}
  - tool_calls:
      - {id: child_1, name: bash, arguments: {command: "echo child"}}
  - text: "child done"
  - text: "parent done"
"#;
    for trusted in [true, false] {
        let env = Env::untrusted();
        delegating_project(&env);
        let mock = Mock::start(script);
        let mut cmd = keel(&env, &mock);
        if trusted {
            cmd.arg("--trust-project");
        }
        let out = run(cmd.args(["run", "go"]));
        assert_eq!(out.code, Some(0), "{out:?}");
        let pre = lines(&env.outside.join("pre.txt"));
        // The child's bash call ran the project's PreToolUse hook only under trust.
        assert_eq!(pre.len(), usize::from(trusted), "{pre:?} {out:?}");
    }
}
