//! The first hour in the interactive UI (the real `keel` binary in a `tmux` pane, against the
//! loopback mock model): the first screen says where you are and the keys that matter,
//! `/model` shows and switches (before the first prompt too), and `/init`, `/clear`,
//! `/status`, `/cost` and `/mcp` do what a newcomer expects (typed during a turn, a command
//! that needs an idle agent runs when the turn ends).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use support::tmux::{Tmux, have_tmux};
use support::{Env, Mock};

const SCRIPT: &str = r##"
responses:
  - text: "Hello from the model."
"##;

/// The model the mock session runs on unless switched (keel's configured default).
fn configured_model(screen: &str) -> bool {
    screen.contains("deepseek")
}

#[test]
fn the_first_screen_says_where_you_are_and_the_keys_that_matter() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let mut cmd = env.keel(&mock.base_url());
    cmd.args(["--sandbox", "read-only"]);
    let t = Tmux::start(env.root(), &cmd);
    let screen = t.wait_for_words("Welcome to keel");
    assert!(configured_model(&screen), "{screen}");
    assert!(screen.contains("sandbox read-only"), "{screen}");
    assert!(screen.contains("trusted"), "{screen}");
    for key in ["/help", "Esc Esc", "Shift-Tab", "Ctrl-C", "Ctrl-D"] {
        assert!(screen.contains(key), "{key:?} missing:\n{screen}");
    }
    // The status line names the model before any request.
    let status = t.wait_for("· context ");
    // The whole first screen, as a newcomer sees it (the workspace's path aside).
    let ws = env.ws.display().to_string();
    let first: Vec<&str> = status.lines().map(str::trim_end).collect();
    let end = first.iter().rposition(|l| !l.is_empty()).unwrap();
    insta::assert_snapshot!(
        "first_screen",
        first[..=end].join("\n").replace(&ws, "[WS]")
    );
    let last = status.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    assert!(
        status.contains(" deepseek") && !last.starts_with(" model "),
        "{status}"
    );

    t.submit("/model");
    let shown = t.wait_for_words("/model NAME switches");
    assert!(shown.contains("Model: deepseek"), "{shown}");
    assert!(!shown.contains("Model: ."), "{shown}");

    t.submit("/status");
    let status = t.wait_for_words("from cache");
    assert!(status.contains("Model deepseek"), "{status}");
    assert!(status.contains("Sandbox read-only"), "{status}");
    assert!(status.contains("Trust"), "{status}");

    t.submit("/cost");
    t.wait_for_words("Cost unknown");

    t.submit("/mcp");
    t.wait_for_words("No MCP servers");

    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
}

#[test]
fn a_model_switch_before_the_first_prompt_applies_and_is_confirmed() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for_words("Welcome to keel");
    t.submit("/model other-model");
    t.wait_for_words("Model: other-model");
    t.submit("hello");
    t.wait_for("Hello from the model.");
    let requests = mock.requests();
    assert_eq!(requests[0]["model"], "other-model", "{:?}", requests[0]);
    // A later switch is confirmed too.
    t.submit("/model third-model");
    t.wait_for_words("Model: third-model");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
}

#[test]
fn init_asks_the_model_to_write_agents_md() {
    if !have_tmux() {
        return;
    }
    // A fixture repository; the mock model reads its manifest, then writes AGENTS.md from it.
    let env = Env::new();
    env.write(
        "Cargo.toml",
        "[package]\nname = \"fixture-crate\"\nversion = \"0.1.0\"\nedition = \"2024\"\n",
    );
    env.write("README.md", "# fixture-crate\n\nRun `cargo test`.\n");
    env.write("src/lib.rs", "pub fn answer() -> u32 {\n    42\n}\n");
    let mock = Mock::start(
        r##"
responses:
  - match: { last_user_contains: "write an AGENTS.md file" }
    tool_calls: [{ id: r1, name: read, arguments: { path: Cargo.toml } }]
  - match: { last_tool_result_contains: "fixture-crate" }
    tool_calls: [{ id: w1, name: write, arguments: { path: AGENTS.md, content: "# fixture-crate\n\n- Build: `cargo build`\n- Test: `cargo test`\n" } }]
  - match: { last_tool_result_contains: "" }
    text: "I studied the repository and wrote AGENTS.md."
"##,
    );
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for_words("Welcome to keel");
    t.submit("/init");
    t.wait_for("I studied the repository and wrote AGENTS.md.");
    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "{requests:?}");
    let asked = support::last_user_text(&requests[0]);
    assert!(asked.contains("build, test"), "{asked}");
    // The model saw the manifest it read, and the guide it wrote is in the workspace.
    assert!(
        requests[1].to_string().contains("edition"),
        "{}",
        requests[1]
    );
    assert!(env.read("AGENTS.md").contains("Test: `cargo test`"));
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
}

#[test]
fn clear_starts_a_new_session() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for_words("Welcome to keel");
    t.submit("hello one");
    t.wait_for("Hello from the model.");
    t.submit("/clear");
    t.wait_for("new session");
    t.submit("hello two");
    t.wait_for("Hello from the model.");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    assert_eq!(env.session_files().len(), 2, "{:?}", env.session_files());
}

/// A command that needs an idle agent, typed while the answer still streams, waits for the
/// turn to end and runs then; what is typed after it waits behind it, in order.
#[test]
fn clear_typed_during_a_turn_runs_when_it_ends_and_what_follows_runs_after_it() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(
        r##"
responses:
  - match: { last_user_contains: "hello one" }
    behaviour: stall
    stall_ms: 4000
    text: "The slow answer takes its time to arrive, in two parts."
  - text: "Hello from the model."
"##,
    );
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for_words("Welcome to keel");
    t.submit("hello one");
    t.wait_for("The slow answer");
    t.submit("/clear");
    t.submit("hello two");
    // Both wait behind the running turn (the status line counts them).
    let waiting = t.wait_for("2 queued");
    assert!(!waiting.contains("new session"), "{waiting}");
    t.wait_for("new session");
    let after = t.wait_for("Hello from the model.");
    let (cleared, answered) = (
        after.find("new session").unwrap(),
        after.find("Hello from the model.").unwrap(),
    );
    assert!(cleared < answered, "{after}");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    // "hello two" went to the new session only.
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let second = requests[1].to_string();
    assert!(second.contains("hello two"), "{second}");
    assert!(!second.contains("hello one"), "{second}");
    assert_eq!(env.session_files().len(), 2, "{:?}", env.session_files());
}

#[test]
fn mcp_lists_the_configured_servers_with_their_tools() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    env.write(
        ".keel/config.toml",
        &format!(
            "[mcp_servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\n",
            support::node_bin("mcp-server-everything")
                .display()
                .to_string()
        ),
    );
    let mock = Mock::start(SCRIPT);
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for_words("Welcome to keel");
    t.submit("/mcp");
    let shown = t.wait_for_words("MCP servers:");
    assert!(shown.contains("everything on,"), "{shown}");
    assert!(!shown.contains("on, 0 tools"), "{shown}");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
}
