//! The interactive UI in a real terminal: the real `keel` binary in a `tmux` pane (installed by
//! `.ci/run`), against the loopback mock model. Keys go in with `send-keys`, the screen comes
//! back with `capture-pane`; the terminal's settings (`stty -a`) must be the same after keel
//! exits as before it started.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use std::process::Command;
use std::time::{Duration, Instant};
use support::tmux::{Tmux, have_tmux};
use support::{Env, Mock, load_consistent, of_type};

const SCRIPT: &str = r##"
responses:
  - match: { last_user_contains: "hello" }
    text: "# Hi there\n\nThis is **keel** answering.\n\n- first point\n- second point\n"
  - match: { last_user_contains: "please run" }
    tool_calls:
      - { id: b1, name: bash, arguments: { command: "echo from-bash" } }
  - match: { last_tool_result_contains: "from-bash" }
    text: "The command ran."
  - text: "Summary: the user said hello and ran one command."
"##;

#[test]
fn a_person_chats_approves_a_command_checks_status_compacts_and_leaves_a_clean_terminal() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let mut cmd = env.keel(&mock.base_url());
    // Read-only: bash needs approval, so the modal appears.
    cmd.args(["--sandbox", "read-only"]);
    // Prices for the mock's model (keel knows none for it): /status shows the cost.
    for price in ["input_price=2", "cached_input_price=0.5", "output_price=8"] {
        cmd.arg("-c")
            .arg(format!("models.deepseek-v4-flash.{price}"));
    }
    let t = Tmux::start(env.root(), &cmd);
    t.wait_for("approval ask");

    t.submit("hello");
    t.wait_for("Hi there");

    t.submit("please run the command");
    let modal = t.wait_for("Allow bash?");
    assert!(modal.contains("echo from-bash"), "{modal}");
    assert!(modal.contains("Allow once"), "{modal}");
    t.keys(&["Enter"]);
    let done = t.wait_for("The command ran.");
    assert!(done.contains("✓ bash echo from-bash"), "{done}");

    t.submit("/status");
    let status = t.wait_for("from cache");
    assert!(status.contains("Sandbox read-only"), "{status}");
    assert!(
        status.contains("Cost $0.0") && status.contains("at deepseek-v4-flash's prices"),
        "{status}"
    );

    t.submit("/compact");
    t.wait_for("history compacted");

    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    let (before, after) = t.stty();
    assert!(before.contains("speed"), "{before}");
    assert_eq!(before, after, "the terminal settings were not restored");

    // The log holds what the screen showed, approval included.
    let events = load_consistent(&env.only_session());
    let decided = of_type(&events, "approval/decided");
    assert_eq!(decided.len(), 1);
    assert_eq!(decided[0]["data"]["approved"], true);
    assert_eq!(of_type(&events, "compaction/end").len(), 1);

    // Resumed in a terminal, the history renders again, compaction marker included.
    let path = env.only_session();
    let mut resume = env.keel(&mock.base_url());
    resume.args(["resume", path.to_str().unwrap()]);
    let r = Tmux::start(env.root(), &resume);
    let screen = r.wait_for("resumed session");
    for seen in [
        "Hi there",
        "✓ bash echo from-bash",
        "The command ran.",
        "history compacted",
    ] {
        assert!(
            screen.contains(seen),
            "{seen:?} missing after resume:\n{screen}"
        );
    }
    r.keys(&["C-c"]);
    r.keys(&["C-c"]);
    assert_eq!(r.wait_exit(), "EXIT=0");
}

/// Ctrl-D while the model streams (stalled here) leaves at once, yet the turn is closed in the
/// log first: its `turn/end` is there, not left for the next resume's crash repair.
#[test]
fn ctrl_d_mid_turn_leaves_with_the_turn_closed_in_the_log() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "stall" }
    behaviour: stall
    text: "Half of this arrives, then nothing."
"#,
    );
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for("approval ask");
    t.submit("stall please");
    t.wait_for("Half of");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    let events = load_consistent(&env.only_session());
    let ends = of_type(&events, "turn/end");
    assert_eq!(ends.len(), 1, "the turn left open: {events:?}");
    assert_eq!(
        of_type(&events, "turn/start").len(),
        1,
        "one turn: {events:?}"
    );
}

#[test]
fn ctrl_c_during_a_long_tool_cancels_the_turn_and_the_log_stays_valid() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "wait" }
    tool_calls:
      - { id: s1, name: bash, arguments: { command: "sleep 30" } }
  - text: "unexpected"
"#,
    );
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for("approval ask");
    t.submit("wait for it");
    t.wait_for("bash sleep 30");
    std::thread::sleep(Duration::from_millis(300));
    t.keys(&["C-c"]);
    let screen = t.wait_for("turn cancelled");
    assert!(screen.contains("Ctrl-C again"), "{screen}");
    // Ctrl-C again leaves.
    t.keys(&["C-c"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    let (before, after) = t.stty();
    assert_eq!(before, after, "the terminal settings were not restored");
    let events = load_consistent(&env.only_session());
    let ends = of_type(&events, "turn/end");
    assert_eq!(ends.len(), 1);
    assert_eq!(
        ends[0]["data"]["reason"]["kind"], "aborted",
        "{:?}",
        ends[0]
    );
    assert_eq!(
        mock.requests().len(),
        1,
        "nothing was asked after the cancel"
    );
}

#[test]
fn without_a_terminal_keel_says_how_to_run_headless() {
    let env = Env::new();
    let out = support::run(env.keel_bare().stdin(std::process::Stdio::null()));
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("not a terminal"), "{}", out.stderr);
    assert!(out.stderr.contains("keel run"), "{}", out.stderr);
}

#[test]
fn keel_resume_in_a_terminal_picks_a_session_newest_first() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "alpha" }
    text: "Alpha answered."
  - match: { last_user_contains: "beta" }
    text: "Beta answered."
"#,
    );
    for prompt in ["alpha task", "beta task"] {
        let out = support::run(env.keel(&mock.base_url()).args(["run", prompt]));
        assert_eq!(out.code, Some(0), "{out:?}");
        // Distinct modification times, newest last.
        std::thread::sleep(Duration::from_millis(1100));
    }
    let mut cmd = env.keel(&mock.base_url());
    cmd.arg("resume");
    let t = Tmux::start(env.root(), &cmd);
    let picker = t.wait_for("Continue which session?");
    let beta = picker.find("beta task").expect("beta listed");
    let alpha = picker.find("alpha task").expect("alpha listed");
    assert!(beta < alpha, "newest first:\n{picker}");
    t.keys(&["Down"]);
    t.keys(&["Enter"]);
    let screen = t.wait_for("resumed session");
    assert!(screen.contains("Alpha answered."), "{screen}");
    assert!(!screen.contains("Beta answered."), "{screen}");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
}

#[test]
fn an_mcp_server_prompt_is_a_slash_command_that_sends_its_text() {
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
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "weather in Paris, France" }
    text: "Sunny in Paris."
"#,
    );
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for("approval ask");
    t.type_text("/mcp__everything__args");
    let offered = t.wait_for("/mcp__everything__args-prompt");
    assert!(offered.contains("[MCP everything]"), "{offered}");
    t.keys(&["C-u"]);
    t.submit("/mcp__everything__args-prompt Paris France");
    let screen = t.wait_for("Sunny in Paris.");
    assert!(
        screen.contains("What's weather in Paris, France?"),
        "{screen}"
    );
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
}

/// Two answers (one per keel run) of 90 numbered lines, more than the 40-row pane shows.
fn long_answer_script() -> String {
    let lines: Vec<String> = (1..=90).map(|i| format!("answer line {i:02}")).collect();
    let answer = format!(
        "  - match: {{ last_user_contains: \"long\" }}\n    text: {:?}\n",
        lines.join("\n\n")
    );
    format!("responses:\n{answer}{answer}")
}

#[test]
fn the_conversation_goes_into_the_terminals_own_scrollback_and_stays_after_exit() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(&long_answer_script());
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for("approval ask");
    t.submit("a long answer please");
    let screen = t.wait_for("answer line 90");
    // The start scrolled off the screen into the terminal's scrollback, in order, once.
    assert!(!screen.contains("a long answer please"), "{screen}");
    let history = t.history();
    let prompt = history.find("› a long answer please").expect(&history);
    let first = history.find("answer line 01").expect(&history);
    let last = history.find("answer line 90").expect(&history);
    assert!(prompt < first && first < last, "{history}");
    assert_eq!(history.matches("answer line 45").count(), 1, "{history}");

    // After exit the conversation is still there, and the shell's line comes under it.
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    let after = t.history();
    assert!(after.contains("answer line 01"), "{after}");
    assert!(after.contains("keel: session "), "{after}");
    assert!(
        after.find("answer line 90") < after.find("keel: session "),
        "{after}"
    );
    let (before, after) = t.stty();
    assert_eq!(before, after, "the terminal settings were not restored");

    // --alt-screen: the UI draws on the alternate screen and leaves nothing behind. (--plan
    // starts the session in plan mode.)
    let mut cmd = env.keel(&mock.base_url());
    cmd.args(["--alt-screen", "--plan"]);
    let a = Tmux::start(env.root(), &cmd);
    a.wait_for("plan mode");
    a.submit("a long answer please");
    a.wait_for("answer line 90");
    assert!(!a.history().contains("answer line 01"));
    a.keys(&["C-d"]);
    assert_eq!(a.wait_exit(), "EXIT=0");
    assert!(!a.history().contains("answer line 90"), "{}", a.history());
}

#[test]
fn review_runs_a_delegated_reviewer_and_its_findings_reach_the_next_turn() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    env.write("add.sh", "#!/bin/sh\necho $(( $1 - $2 ))\n");
    env.write(
        ".keel/config.toml",
        "[[plugins]]\nid = \"delegate\"\nenabled = true\n",
    );
    support::git(&env.ws, &["init", "-q"]);
    support::git(&env.ws, &["add", "-A"]);
    support::git(&env.ws, &["commit", "-qm", "start"]);
    env.write("add.sh", "#!/bin/sh\necho $(( $1 * $2 ))\n");
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "Review the change from HEAD" }
    text: "FINDING-1 high add.sh:2 multiplies instead of adding"
  - match: { last_user_contains: "NEXT" }
    text: "Fixing it now."
"#,
    );
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for("approval ask");
    t.submit("/review");
    let screen = t.wait_for("FINDING-1");
    assert!(screen.contains("multiplies instead of adding"), "{screen}");
    // The reviewer saw the change.
    assert!(
        mock.requests()[0]
            .to_string()
            .contains("+echo $(( $1 * $2 ))")
    );

    t.submit("NEXT fix them");
    t.wait_for("Fixing it now.");
    let last = mock.requests().last().unwrap().to_string();
    assert!(
        last.contains("FINDING-1") && last.contains("NEXT fix them"),
        "{last}"
    );
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
}

/// Code Mode in the terminal UI: a command a `run_code` program runs under the read-only
/// sandbox needs approval, the modal names it, and the person's "allow" reaches the program.
#[test]
fn an_approval_inside_a_program_is_asked_in_the_ui() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(support::PROGRAM_RUNS_A_COMMAND);
    let mut cmd = env.keel(&mock.base_url());
    cmd.args(["--sandbox", "read-only", "--tools-mode", "code"]);
    let t = Tmux::start(env.root(), &cmd);
    t.wait_for("approval ask");
    t.submit("run the program");
    let modal = t.wait_for("Allow bash?");
    assert!(modal.contains("echo from-the-program"), "{modal}");
    t.keys(&["Enter"]);
    t.wait_for("The program ran.");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    support::assert_program_command_approved(&load_consistent(&env.only_session()));
}

/// A command that asks to leave the sandbox opens its own modal with the model's reason; the
/// person allows it once and it runs unconfined (its write lands outside the workspace).
#[test]
fn an_escalated_command_is_asked_in_the_ui_with_its_justification() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let target = env.outside.join("escalated.txt");
    let script = format!(
        "responses:\n  - tool_calls: [{{ id: c1, name: write, arguments: {{ file_path: {:?}, content: \"x\", \
         sandbox_permissions: danger-full-access, justification: \"the report goes next to the repo\" }} }}]\n  \
         - text: \"Written.\"\n",
        target.display().to_string()
    );
    let mock = Mock::start(&script);
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for("approval ask");
    t.submit("write the report");
    let modal = t.wait_for("Run write outside the sandbox?");
    assert!(
        modal.contains("the report goes next to the repo"),
        "{modal}"
    );
    assert!(modal.contains("danger-full-access"), "{modal}");
    t.keys(&["Enter"]);
    t.wait_for("Written.");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "x");
}

/// A write to a protected path (issue 44): refused inside the sandbox, then asked in the UI with
/// the path and what it controls; allowed once, it lands.
#[test]
fn a_write_to_a_protected_path_is_asked_in_the_ui_naming_what_it_controls() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let script = "responses:\n  - tool_calls: [{ id: c1, name: write, arguments: { file_path: .mcp.json, content: \"{}\" } }]\n  \
         - tool_calls: [{ id: c2, name: write, arguments: { file_path: .mcp.json, content: \"{}\", \
         sandbox_permissions: danger-full-access, justification: \"the user asked for a server\" } }]\n  \
         - text: \"Configured.\"\n";
    let mock = Mock::start(script);
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for("approval ask");
    t.submit("add an MCP server");
    let modal = t.wait_for("Run write outside the sandbox?");
    assert!(modal.contains("protected path"), "{modal}");
    assert!(modal.contains("MCP servers"), "{modal}");
    assert!(
        !env.ws.join(".mcp.json").exists(),
        "nothing written before the answer"
    );
    t.keys(&["Enter"]);
    t.wait_for("Configured.");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    assert_eq!(
        std::fs::read_to_string(env.ws.join(".mcp.json")).unwrap(),
        "{}"
    );
    let events = load_consistent(&env.only_session());
    let results = support::tool_results(&events);
    assert!(
        results[0].1.contains("'.mcp.json' is a protected path"),
        "{results:?}"
    );
}

/// `/goal` in the terminal UI: round 1 is sent, the model pauses the goal, and the status line
/// says so; `/goal` alone answers without the model.
#[test]
fn a_goal_set_in_the_ui_shows_in_the_status_line() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(
        "responses:\n  - tool_calls: [{ id: p1, name: update_goal, arguments: { goal_id: g1, revision: 1, action: pause } }]\n  - text: \"Paused for now.\"\n",
    );
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for("approval ask");
    t.submit("/goal --max-rounds 5 tidy the code");
    t.wait_for("Paused for now.");
    t.wait_for("goal g1 paused");
    t.submit("/goal");
    t.wait_for("Goal g1 (paused, revision 2, round 1 of 5): tidy the code");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    assert_eq!(mock.requests().len(), 2);
}

/// A workspace whose `.claude/settings.json` has a `UserPromptSubmit` hook that leaves a
/// marker file in the workspace when it runs; `keel` runs without `--trust-project`.
fn workspace_with_a_hook() -> Env {
    let env = Env::untrusted();
    env.write(
        ".claude/settings.json",
        r#"{"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "touch hook-ran.txt"}]}]}}"#,
    );
    env
}

/// Answers any number of prompts.
const ANSWERS: &str = r#"
responses:
  - text: "First answer."
  - text: "Second answer."
  - text: "Third answer."
"#;

/// The trust level `$KEEL_HOME/config.toml` records for the workspace (`None`: nothing).
fn recorded_trust(env: &Env) -> Option<String> {
    let text = std::fs::read_to_string(env.home.join("config.toml")).ok()?;
    let config: toml::Table = text.parse().unwrap();
    let entry = config.get("projects")?.get(env.ws.to_str().unwrap())?;
    Some(entry.get("trust_level")?.as_str()?.to_owned())
}

/// Send `prompt` and wait for `answer` on the screen.
fn ask(t: &Tmux, prompt: &str, answer: &str) -> String {
    t.submit(prompt);
    t.wait_for_words(answer)
}

#[test]
fn trusting_a_workspace_at_the_question_runs_its_hooks_in_the_same_session() {
    if !have_tmux() {
        return;
    }
    let env = workspace_with_a_hook();
    let mock = Mock::start(ANSWERS);
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    let question = t.wait_for_words("Trust the files in this folder?");
    assert!(
        question.contains(".claude/settings.json: hooks.UserPromptSubmit"),
        "{question}"
    );
    assert_eq!(
        recorded_trust(&env),
        None,
        "nothing recorded before the answer"
    );
    t.keys(&["y"]);
    let screen = t.wait_for_words("approval ask");
    assert!(screen.contains("take effect"), "{screen}");
    assert_eq!(recorded_trust(&env).as_deref(), Some("trusted"));

    ask(&t, "hello", "First answer.");
    assert!(
        env.ws.join("hook-ran.txt").exists(),
        "the project's hook did not run after the workspace was trusted"
    );
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    // One session: the hook ran in the session the question opened.
    let events = load_consistent(&env.only_session());
    assert_eq!(of_type(&events, "turn/end").len(), 1);
}

#[test]
fn distrusting_a_workspace_keeps_its_hooks_inert_and_is_not_asked_again() {
    if !have_tmux() {
        return;
    }
    let env = workspace_with_a_hook();
    let mock = Mock::start(ANSWERS);
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for_words("Trust the files in this folder?");
    t.keys(&["n"]);
    // The notice is in the UI, and says what was ignored and how to trust.
    let screen = t.wait_for_words("is not trusted");
    assert!(screen.contains("hooks.UserPromptSubmit"), "{screen}");
    assert!(screen.contains("/trust"), "{screen}");
    assert!(screen.contains("will not ask again"), "{screen}");
    assert_eq!(recorded_trust(&env).as_deref(), Some("untrusted"));
    ask(&t, "hello", "First answer.");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    assert!(
        !env.ws.join("hook-ran.txt").exists(),
        "an untrusted hook ran"
    );
    // Nothing went to stderr (the terminal the UI draws on): only the transcript's line.
    assert!(!t.history().contains("keel: workspace"), "{}", t.history());

    // The second open asks nothing: the UI comes up with the notice.
    let again = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    let screen = again.wait_for_words("approval ask");
    assert!(!screen.contains("Trust the files"), "{screen}");
    assert!(screen.contains("is not trusted"), "{screen}");
    ask(&again, "hello again", "Second answer.");
    again.keys(&["C-d"]);
    assert_eq!(again.wait_exit(), "EXIT=0");
    assert!(
        !env.ws.join("hook-ran.txt").exists(),
        "an untrusted hook ran"
    );
    assert_eq!(recorded_trust(&env).as_deref(), Some("untrusted"));
}

#[test]
fn esc_at_the_question_records_nothing_and_keeps_the_workspace_untrusted() {
    if !have_tmux() {
        return;
    }
    let env = workspace_with_a_hook();
    let mock = Mock::start(ANSWERS);
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for_words("Trust the files in this folder?");
    t.keys(&["Escape"]);
    let screen = t.wait_for_words("nothing recorded");
    assert!(screen.contains("is not trusted"), "{screen}");
    ask(&t, "hello", "First answer.");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    assert!(
        !env.ws.join("hook-ran.txt").exists(),
        "an untrusted hook ran"
    );
    assert_eq!(recorded_trust(&env), None);
    // Asked again next time.
    let again = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    again.wait_for_words("Trust the files in this folder?");
    again.keys(&["C-c"]);
    again.wait_for_words("approval ask");
    again.keys(&["C-d"]);
    assert_eq!(again.wait_exit(), "EXIT=0");
    assert_eq!(recorded_trust(&env), None);
}

#[test]
fn trust_yes_in_an_untrusted_session_runs_the_hooks_from_the_next_prompt() {
    if !have_tmux() {
        return;
    }
    let env = workspace_with_a_hook();
    // A key that loosens what keel asks: it applies only in a trusted workspace.
    env.write(".keel/config.toml", "approval = \"auto\"\n");
    let mock = Mock::start(ANSWERS);
    // Recorded untrusted beforehand, with the real command.
    let out = support::run(env.keel(&mock.base_url()).args(["trust", "--revoke"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(recorded_trust(&env).as_deref(), Some("untrusted"));

    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for_words("approval ask");
    ask(&t, "first", "First answer.");
    assert!(
        !env.ws.join("hook-ran.txt").exists(),
        "an untrusted hook ran"
    );

    // `/trust` alone shows the decision and what it leaves alone.
    t.submit("/trust");
    let shown = t.wait_for_words("Ignored until you trust it");
    assert!(shown.contains("untrusted (recorded in"), "{shown}");

    t.submit("/trust yes");
    let changed = t.wait_for_words("From the next turn these take effect");
    assert!(
        changed.contains(".claude/settings.json: hooks.UserPromptSubmit"),
        "{changed}"
    );
    assert_eq!(recorded_trust(&env).as_deref(), Some("trusted"));
    // The rebuilt agent's approval policy, from the project's configuration.
    t.wait_for_words("approval allow");
    ask(&t, "second", "Second answer.");
    assert!(
        env.ws.join("hook-ran.txt").exists(),
        "the hook did not run after /trust yes"
    );
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    // The same session went on: both turns are in one consistent log.
    let events = load_consistent(&env.only_session());
    assert_eq!(of_type(&events, "turn/end").len(), 2);

    // And `/trust no` takes it back for the next prompt.
    std::fs::remove_file(env.ws.join("hook-ran.txt")).unwrap();
    let mut resume = env.keel(&mock.base_url());
    resume.args(["resume", "--last"]);
    let r = Tmux::start(env.root(), &resume);
    let screen = r.wait_for_words("resumed session");
    assert!(screen.contains("approval allow"), "{screen}");
    r.submit("/trust no");
    r.wait_for_words("From the next turn these stay inert");
    r.wait_for_words("approval ask");
    ask(&r, "third", "Third answer.");
    r.keys(&["C-d"]);
    assert_eq!(r.wait_exit(), "EXIT=0");
    assert!(!env.ws.join("hook-ran.txt").exists(), "a revoked hook ran");
    assert_eq!(recorded_trust(&env).as_deref(), Some("untrusted"));
}

/// `@a.png` in the composer sends the image with the message to a model with vision; a file
/// that is not an image is refused naming it, and a model without vision naming the model,
/// both without sending anything.
#[test]
fn an_at_mentioned_image_is_sent_with_the_message() {
    if !have_tmux() {
        return;
    }
    // A real 1×1 PNG.
    const PNG: &[u8] = b"\x89\x50\x4e\x47\x0d\x0a\x1a\x0a\x00\x00\x00\x0d\x49\x48\x44\x52\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90\x77\x53\xde\x00\x00\x00\x0c\x49\x44\x41\x54\x78\x9c\x63\xf8\xcf\xc0\x00\x00\x03\x01\x01\x00\xc9\xfe\x92\xef\x00\x00\x00\x00\x49\x45\x4e\x44\xae\x42\x60\x82";
    let env = Env::new();
    std::fs::write(
        env.home.join("config.toml"),
        "[models.\"seeing-model\"]\nvision = true\n",
    )
    .unwrap();
    std::fs::write(env.ws.join("a.png"), PNG).unwrap();
    env.write("fake.png", "not a picture\n");
    let mock = Mock::start("responses:\n  - text: \"I see a red dot.\"\n");

    let mut cmd = env.keel(&mock.base_url());
    cmd.args(["--model", "seeing-model"]);
    let t = Tmux::start(env.root(), &cmd);
    t.wait_for("approval ask");
    // (The cursor is not on the `@` word: Enter sends rather than taking a completion.)
    t.submit("what is @fake.png here");
    t.wait_for_words("@fake.png is not an image keel can send");
    t.keys(&["C-u"]);
    t.submit("what is in @a.png here?");
    t.wait_for("I see a red dot.");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    let requests = mock.requests();
    assert_eq!(requests.len(), 1, "the refused message was sent");
    let user = requests[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()
        .clone();
    let parts = user["content"].as_array().unwrap();
    assert!(
        parts.iter().any(|p| p["text"]
            .as_str()
            .is_some_and(|t| t.contains("what is in @a.png here?"))),
        "{user}"
    );
    let urls: Vec<&str> = parts
        .iter()
        .filter_map(|p| p["image_url"]["url"].as_str())
        .collect();
    assert_eq!(urls.len(), 1, "{user}");
    assert!(
        urls[0].starts_with("data:image/png;base64,iVBORw0KGgo"),
        "{user}"
    );
    drop(t);

    // The default model has no vision: the message is refused naming it.
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for("approval ask");
    t.submit("what is in @a.png here?");
    t.wait_for_words("model deepseek-v4-flash does not read images");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    assert_eq!(mock.requests().len(), 1, "the refused message was sent");
}

/// `ask_user_question` in the terminal: a form, one question at a time — a pick by number, a
/// multi-select toggled with Space, a free-text answer typed in the editor — and the answers
/// reach the model; a second form dismissed with Esc answers "declined".
#[test]
fn ask_user_question_is_a_form_whose_answers_reach_the_model() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "set up" }
    tool_calls:
      - id: q1
        name: ask_user_question
        arguments:
          questions:
            - { id: lang, header: Language, question: "Which language?", options: [ { label: Rust, description: "fast" }, { label: Go } ] }
            - { id: features, question: "Which features?", multi_select: true, options: [ { label: auth }, { label: logging }, { label: metrics } ] }
            - { id: name, question: "What is the project called?" }
  - match: { last_tool_result_contains: "The user answered" }
    text: "Setting up now."
  - match: { last_user_contains: "again" }
    tool_calls:
      - { id: q2, name: ask_user_question, arguments: { questions: [ { id: ok, question: "Proceed?", options: [ { label: "yes" }, { label: "no" } ] } ] } }
  - match: { last_tool_result_contains: "declined" }
    text: "Going on without an answer."
"#,
    );
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for("approval ask");
    t.submit("set up the project");
    let first = t.wait_for("Which language?");
    assert!(first.contains("Language (1/3)"), "{first}");
    assert!(first.contains("Rust — fast"), "{first}");
    t.keys(&["2"]);
    let second = t.wait_for("Which features?");
    assert!(second.contains("[ ] auth"), "{second}");
    t.keys(&["Space"]);
    t.keys(&["Down"]);
    t.keys(&["Down"]);
    t.keys(&["Space"]);
    t.wait_for("[x] metrics");
    t.keys(&["Enter"]);
    t.wait_for("What is the project called?");
    t.submit("keelboat");
    t.wait_for("Setting up now.");

    t.submit("again");
    t.wait_for("Proceed?");
    t.keys(&["Escape"]);
    t.wait_for("Going on without an answer.");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");

    let events = load_consistent(&env.only_session());
    let answered = of_type(&events, "question/answered");
    assert_eq!(answered.len(), 2);
    assert_eq!(answered[0]["data"]["by"], "user");
    assert_eq!(
        answered[0]["data"]["answers"],
        serde_json::json!({"lang": "Go", "features": ["auth", "metrics"], "name": "keelboat"})
    );
    assert_eq!(answered[1]["data"]["by"], "declined");
    let second = &mock.requests()[1];
    assert!(
        second
            .to_string()
            .contains(r"The user answered:\nlang: Go\nfeatures: auth, metrics\nname: keelboat"),
        "{second}"
    );
}

#[test]
fn agents_lists_the_live_subagents_and_opens_one() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(
        // The helper's answer reaches the parent in a turn of its own, or, when the helper is
        // quicker than the parent's next request, in that request: the answer's response comes
        // first so that both orders end with it.
        r#"
responses:
  - match: { last_message_contains: "answered:" }
    text: "The helper counted."
  - match: { last_user_contains: "start a helper" }
    tool_calls: [{ id: p1, name: subagent, arguments: { description: "counter", prompt: "Count to three.", run_in_background: true } }]
  - match: { last_tool_result_contains: "in the background" }
    text: "Helper started."
  - match: { last_user_contains: "Count to three." }
    text: "one two three"
"#,
    );
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for("approval ask");
    t.submit("start a helper");
    t.wait_for("The helper counted.");
    t.submit("/agents");
    t.wait_for("subagent-1  waiting for a message");
    t.submit("/agents open subagent-1");
    t.wait_for("assistant: one two three");
    t.submit("/agents stop subagent-1");
    t.wait_for("Stopped subagent-1.");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
}

/// The `schedule` and `present` plugins (turned on by the user's configuration) in the UI: a
/// schedule fires into the idle UI as a turn of its own, and the files that turn presented are
/// listed after it.
#[test]
fn a_schedule_fires_into_the_idle_ui_and_presented_files_are_listed() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    std::fs::write(
        env.home.join("config.toml"),
        "[[plugins]]\nid = \"schedule\"\nenabled = true\n\n[[plugins]]\nid = \"present\"\nenabled = true\n",
    )
    .unwrap();
    env.write("notes.md", "n\n");
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "remind me" }
    tool_calls: [{ id: c1, name: schedule_create, arguments: { prompt: "look at the notes", after_seconds: 2 } }]
  - match: { last_user_contains: "remind me" }
    text: "Reminder set."
  - match: { last_user_contains: "look at the notes" }
    tool_calls: [{ id: p1, name: present, arguments: { files: [ { path: notes.md, description: "the notes" } ] } }]
  - match: { last_user_contains: "look at the notes" }
    text: "The notes are fine."
"#,
    );
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for("approval ask");
    t.submit("remind me in two seconds");
    t.wait_for("Reminder set.");
    // Nobody types: the firing starts the turn.
    t.wait_for("scheduled prompt sched-1");
    t.wait_for("The notes are fine.");
    t.wait_for_words("Files presented: notes.md — the notes");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    assert_eq!(mock.requests().len(), 4);
    let events = load_consistent(&env.only_session());
    assert_eq!(of_type(&events, "schedule/fired").len(), 1);
}

/// A schedule still pending when `keel run` ended fires in the UI that resumes the session,
/// with nobody typing: the UI builds its agent on the runtime the timer needs.
#[test]
fn a_pending_schedule_fires_in_a_resumed_ui() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    std::fs::write(
        env.home.join("config.toml"),
        "[[plugins]]\nid = \"schedule\"\nenabled = true\n",
    )
    .unwrap();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "remind me" }
    tool_calls: [{ id: c1, name: schedule_create, arguments: { prompt: "feed the cat", after_seconds: 5 } }]
  - match: { last_user_contains: "remind me" }
    text: "Set."
  - match: { last_user_contains: "feed the cat" }
    text: "The cat is fed."
"#,
    );
    let out = support::run(
        env.keel(&mock.base_url())
            .args(["run", "remind me to feed the cat"]),
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    let mut cmd = env.keel(&mock.base_url());
    cmd.arg("resume");
    let t = Tmux::start(env.root(), &cmd);
    t.wait_for("Continue which session?");
    t.keys(&["Enter"]);
    t.wait_for("resumed session");
    t.wait_for("scheduled prompt sched-1");
    t.wait_for("The cat is fed.");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    let events = load_consistent(&env.only_session());
    assert_eq!(of_type(&events, "schedule/fired").len(), 1);
    assert!(of_type(&events, "schedule/missed").is_empty());
}

#[test]
fn the_session_picker_narrows_to_sessions_that_mention_a_search() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "alpha" }
    tool_calls: [{ id: a1, name: bash, arguments: { command: "echo the-heron-nests-here", description: "say" } }]
  - match: { last_tool_result_contains: "heron" }
    text: "Alpha answered."
  - match: { last_user_contains: "beta" }
    text: "Beta answered."
"#,
    );
    for prompt in ["alpha task", "beta task"] {
        let out =
            support::run(
                env.keel(&mock.base_url())
                    .args(["--approval", "auto", "run", prompt]),
            );
        assert_eq!(out.code, Some(0), "{out:?}");
    }
    let mut cmd = env.keel(&mock.base_url());
    cmd.arg("resume");
    let t = Tmux::start(env.root(), &cmd);
    let picker = t.wait_for("Continue which session?");
    assert!(
        picker.contains("beta task") && picker.contains("alpha task"),
        "{picker}"
    );
    // The word is only in a tool result of the older session.
    t.type_text("/heron");
    t.wait_for("Search: heron");
    t.keys(&["Enter"]);
    let narrowed = t.wait_for("Sessions mentioning \"heron\"");
    assert!(narrowed.contains("alpha task"), "{narrowed}");
    assert!(narrowed.contains("[heron]"), "{narrowed}");
    assert!(!narrowed.contains("beta task"), "{narrowed}");
    // Esc shows them all again; a search that finds nothing says so.
    t.keys(&["Escape"]);
    t.wait_for("beta task");
    t.submit("/nowhere");
    t.wait_for("No session here mentions \"nowhere\"");
    t.submit("/heron");
    t.wait_for("Sessions mentioning \"heron\"");
    t.keys(&["Enter"]);
    let screen = t.wait_for("resumed session");
    assert!(screen.contains("Alpha answered."), "{screen}");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
}

#[test]
fn esc_esc_lists_the_prompts_and_rewinds_code_and_conversation_or_forks() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    env.write("notes.txt", "original\n");
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "change the notes" }
    tool_calls: [{ id: b1, name: bash, arguments: { command: "echo changed > notes.txt; echo new > extra.txt", description: "change" } }]
  - match: { last_tool_result_contains: "" }
    text: "Notes changed."
  - match: { last_user_contains: "say hello" }
    text: "Hello there."
  - match: { last_user_contains: "change the notes" }
    tool_calls: [{ id: b2, name: bash, arguments: { command: "echo changed > notes.txt", description: "change" } }]
  - match: { last_tool_result_contains: "" }
    text: "Notes changed again."
"#,
    );
    let mut cmd = env.keel(&mock.base_url());
    cmd.args(["--approval", "auto"]);
    let t = Tmux::start(env.root(), &cmd);
    t.wait_for("approval allow");
    t.submit("change the notes");
    t.wait_for("Notes changed.");
    t.submit("say hello");
    t.wait_for("Hello there.");
    // Esc Esc: the prompts, newest first, with the files each turn changed.
    t.esc_esc_when_idle("Rewind to just before");
    t.wait_for("turn 2 · say hello · no file changed");
    t.wait_for("turn 1 · change the notes · 2 file(s): extra.txt, notes.txt");
    t.keys(&["Down"]);
    t.keys(&["Enter"]);
    t.wait_for("Restore code and conversation");
    t.keys(&["Enter"]);
    t.wait_for_words("Rewound the conversation to just before turn 1");
    assert_eq!(env.read("notes.txt"), "original\n");
    assert!(!env.ws.join("extra.txt").exists());
    // The prompt is back in the editor; sent again, the model sees no earlier history.
    let before = mock.requests().len();
    t.keys(&["Enter"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while mock.requests().len() < before + 2 {
        assert!(Instant::now() < deadline, "{}", t.screen());
        std::thread::sleep(Duration::from_millis(50));
    }
    t.wait_for("Notes changed again.");
    let requests = mock.requests();
    let resent = &requests[before];
    let users: Vec<String> = resent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect();
    assert_eq!(users.len(), 1, "{users:?}");
    assert!(users[0].contains("change the notes"), "{users:?}");
    // Fork a new session just before turn 1 of this one.
    t.esc_esc_when_idle("Rewind to just before");
    t.keys(&["Down"]);
    t.keys(&["Enter"]);
    t.wait_for("Fork a new session from here");
    t.keys(&["4"]);
    t.wait_for("Forked just before turn");
    t.keys(&["C-u", "C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    let files = env.session_files();
    assert_eq!(files.len(), 2, "{files:?}");
    let forked = files
        .iter()
        .map(|f| load_consistent(f))
        .find(|events| !of_type(events, "session/end-seed").is_empty())
        .expect("a forked session");
    assert!(!of_type(&forked, "turn/start").is_empty());
}

#[test]
fn a_model_chosen_with_slash_model_is_kept_by_the_session() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "first" }
    text: "First answer."
  - match: { last_user_contains: "second" }
    text: "Second answer."
"#,
    );
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for("approval ask");
    t.submit("first");
    t.wait_for("First answer.");
    // The answer is on screen before the turn ends (its checkpoint is taken after it), and
    // `/model` while a turn runs is refused with a notice: wait for the end in the log, and type
    // it again if the UI had not heard of the end yet.
    env.wait_for_log("turn/end", |events| !of_type(events, "turn/end").is_empty());
    let refusal = "wait for the turn to end";
    let mut chosen = false;
    for attempt in 1..=5 {
        t.submit("/model deepseek-v4-pro");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let logged = keel_session::Store::load(&env.only_session())
                .map(|loaded| support::to_values(&loaded.session))
                .unwrap_or_default();
            if !of_type(&logged, "model/selected").is_empty() {
                chosen = true;
                break;
            }
            if t.history().matches(refusal).count() >= attempt {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if chosen {
            break;
        }
    }
    assert!(chosen, "/model never took effect:\n{}", t.history());
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    let events = load_consistent(&env.only_session());
    let chosen = of_type(&events, "model/selected");
    assert_eq!(chosen.len(), 1, "{chosen:?}");
    assert_eq!(chosen[0]["data"]["model"], "deepseek-v4-pro");
    // A later headless resume builds on the session's model.
    let out = support::run(
        env.keel(&mock.base_url())
            .args(["resume", "--last", "second"]),
    );
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let last = mock.requests().last().cloned().unwrap();
    assert_eq!(last["model"], "deepseek-v4-pro", "{last}");
}

#[test]
fn rewind_in_the_ui_puts_the_files_back_and_undo_returns_them() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    env.write("notes.txt", "original\n");
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "change the notes" }
    tool_calls: [{ id: b1, name: bash, arguments: { command: "echo changed > notes.txt; echo new > extra.txt", description: "change" } }]
  - match: { last_tool_result_contains: "" }
    text: "Notes changed."
"#,
    );
    let mut cmd = env.keel(&mock.base_url());
    cmd.args(["--approval", "auto"]);
    let t = Tmux::start(env.root(), &cmd);
    t.wait_for("approval allow");
    t.submit("change the notes");
    t.wait_for("Notes changed.");
    assert_eq!(env.read("notes.txt"), "changed\n");
    t.submit("/rewind 1");
    // The files put back are named, each with what was done to it.
    let screen = t.wait_for_words("Rewound the files to before turn 1: 2 files put back:");
    assert!(screen.contains("notes.txt (restored)"), "{screen}");
    assert!(screen.contains("extra.txt (deleted)"), "{screen}");
    assert!(!screen.contains("/rewind 1,"), "{screen}");
    assert_eq!(env.read("notes.txt"), "original\n");
    assert!(!env.ws.join("extra.txt").exists());
    t.submit("/rewind undo");
    t.wait_for("before the last rewind");
    assert_eq!(env.read("notes.txt"), "changed\n");
    assert_eq!(env.read("extra.txt"), "new\n");
    t.submit("/rewind 7");
    t.wait_for("not turn 7");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
}

/// An MCP server's elicitation (`elicitation/create` during a tool call) is a form in the UI,
/// one question per field of its schema: a choice picked by number, free text typed; the
/// server gets the answers (`oauth-server.mjs`'s `ask` tool echoes them).
#[test]
fn an_mcp_elicitation_is_a_form_whose_answers_reach_the_server() {
    if !have_tmux() {
        return;
    }
    use std::io::BufRead as _;
    let env = Env::new();
    let dir = support::ensure_node_modules();
    /// Killed on drop, a failing test included.
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut server = Command::new("node")
        .arg(dir.join("oauth-server.mjs"))
        .env("MODE", "open")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = server.stdout.take().unwrap();
    let _server = Killed(server);
    let mut first = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut first)
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&first).unwrap();
    env.write(
        ".keel/config.toml",
        &format!(
            "[mcp_servers.form]\nurl = {:?}\n",
            v["url"].as_str().unwrap()
        ),
    );
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "ask me" }
    tool_calls:
      - { id: e1, name: mcp__form__ask, arguments: {} }
  - match: { last_tool_result_contains: "action=accept" }
    text: "The server heard you."
"#,
    );
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for("approval ask");
    t.submit("ask me");
    let form = t.wait_for("Who is there?");
    assert!(form.contains("[MCP server form]"), "{form}");
    assert!(form.contains("Your name (required)"), "{form}");
    t.submit("Ada");
    t.wait_for("green");
    t.keys(&["2"]);
    t.wait_for("The server heard you.");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    let events = load_consistent(&env.only_session());
    let results: Vec<_> = of_type(&events, "tool/result")
        .into_iter()
        .map(|e| e["data"].to_string())
        .collect();
    assert!(
        results
            .iter()
            .any(|r| r.contains(r#"action=accept content={\"name\":\"Ada\",\"color\":\"green\"}"#)),
        "{results:?}"
    );
}
