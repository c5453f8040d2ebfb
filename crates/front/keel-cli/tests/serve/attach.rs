//! `keel attach`: the terminal UI on a session of a running `keel serve`, in a real terminal
//! (the real binary in a `tmux` pane, as tests/tui.rs drives `keel`), against a real server
//! and the loopback mock model: a turn running on the server streams into the terminal, a
//! prompt typed there runs on the server, approvals are answered in the terminal or closed
//! there when another client answers them, a question the model asks is answered in the
//! terminal's form, Shift-Tab and `/plan` put the hosted session in plan mode and back, `/model`
//! switches its model, and leaving detaches (the session stays hosted, and attaching again
//! shows its history).

use crate::client::{Server, events_of, listed, wait_idle};
use crate::support::tmux::{Tmux, have_tmux, words};
use crate::support::{Env, Mock, load_consistent, tool_results};
use serde_json::{Value, json};
use std::process::Command;
use std::time::{Duration, Instant};

const SCRIPT: &str = r#"
responses:
  - match: { last_user_contains: "read slowly" }
    tool_calls:
      - { name: read, arguments: { path: notes.txt } }
  - match: { last_user_contains: "read slowly" }
    behaviour: stall
    stall_ms: 3000
    text: "The notes say hello, slowly."
  - match: { last_user_contains: "typed in the terminal" }
    text: "Answered from the server."
  - match: { last_user_contains: "run the check" }
    tool_calls:
      - { id: b1, name: bash, arguments: { command: "echo checked-by-keel" } }
  - match: { last_user_contains: "run the check" }
    tool_calls:
      - { id: b2, name: bash, arguments: { command: "echo checked-again" } }
  - match: { last_user_contains: "run the check" }
    text: "The check ran twice."
  - match: { last_user_contains: "before the restart" }
    text: "Said before the restart."
  - match: { last_user_contains: "while it was away" }
    text: "Said while the terminal was away."
  - match: { last_user_contains: "typed after the restart" }
    text: "Answered by the server started again."
  - match: { last_user_contains: "take forever" }
    behaviour: stall
  - match: { last_user_contains: "after the trust" }
    text: "Answered on the trusted agent."
"#;

/// `keel --cwd WS attach ARGS…` as a client of the test's server.
fn attach(env: &Env, args: &[&str]) -> Command {
    let mut cmd = crate::remote::client(env, &["attach"]);
    cmd.args(args);
    cmd
}

/// Session `id`'s log on disk (the server's `$KEEL_HOME`).
fn log_of(env: &Env, id: &str) -> String {
    let file = env
        .session_files()
        .into_iter()
        .find(|f| f.to_string_lossy().contains(id))
        .unwrap_or_else(|| panic!("no session file for {id}"));
    std::fs::read_to_string(file).unwrap()
}

#[test]
fn attach_streams_a_running_turn_runs_what_is_typed_and_detaches_leaving_the_session() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    env.write("notes.txt", "hello\n");
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    let id = server.create(&env.ws, "read slowly");

    // Attached while the turn runs (its answer stalls 3 s): the answer streams in.
    let t = Tmux::start_logged(
        env.root(),
        "first",
        &attach(&env, &[&id, "--server", &server.url]),
    );
    t.wait_for_in_history("read slowly");
    assert_eq!(
        listed(&server, &id)["status"],
        "running",
        "attached before the turn's answer"
    );
    t.wait_for_in_history("The notes say hello, slowly.");
    wait_idle(&server, &id);

    // A prompt typed in the terminal runs on the server.
    t.submit("typed in the terminal");
    t.wait_for_in_history("Answered from the server.");
    wait_idle(&server, &id);
    let log = log_of(&env, &id);
    assert!(
        log.contains("typed in the terminal") && log.contains("Answered from the server."),
        "the typed prompt's turn is in the server's log: {log}"
    );

    // Ctrl-D detaches: the session stays hosted, neither closed nor cancelled.
    t.keys(&["C-d"]);
    let (exit, err) = (t.wait_exit(), t.stderr());
    assert_eq!(exit, "EXIT=0", "{err}");
    assert!(err.contains(&format!("keel attach {id}")), "{err}");
    assert_eq!(listed(&server, &id)["status"], "idle");
    let after = log_of(&env, &id);
    assert!(
        !after.contains(r#""reason":{"kind":"cancelled""#),
        "no turn cancelled: {after}"
    );

    // Attached again (by the server's serve.json, the session by default: the newest here),
    // the history shows.
    let again = Tmux::start_logged(env.root(), "again", &attach(&env, &[]));
    let words = again.wait_for_in_history("Answered from the server.");
    assert!(words.contains("The notes say hello, slowly."), "{words}");
    // Esc Esc: the server's rewind list (`…/commands/rewind/choices`); the rewind runs there.
    again.esc_esc();
    again.wait_for_in_history("Rewind to just before");
    again.wait_for_in_history("turn 2 · typed in the terminal");
    again.keys(&["Enter"]);
    again.wait_for_in_history("Restore code and conversation");
    again.keys(&["Enter"]);
    again.wait_for_in_history("Rewound the conversation to just before turn 2");
    assert!(log_of(&env, &id).contains("surface/rewind"));
    // The rewound prompt is back in the editor: cleared, then /exit.
    again.keys(&["C-c"]);
    again.submit("/exit");
    let (exit, err) = (again.wait_exit(), again.stderr());
    assert_eq!(exit, "EXIT=0", "{err}");
    assert_eq!(listed(&server, &id)["status"], "idle");
}

#[test]
fn approvals_are_answered_in_the_terminal_and_close_there_when_another_client_answers() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let server = Server::start_with(
        &env,
        &mock,
        &["--sandbox", "read-only", "--approval", "ask"],
    );
    let created = server.call("POST", "/api/v1/sessions", Some(&json!({"cwd": env.ws})));
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.json()["id"].as_str().unwrap().to_owned();

    let t = Tmux::start_logged(
        env.root(),
        "first",
        &attach(&env, &[&id, "--server", &server.url]),
    );
    std::thread::sleep(Duration::from_millis(500));
    t.submit("run the check");
    // The first approval, answered in the terminal (Allow once).
    let modal = t.wait_for_in_history("Allow bash?");
    assert!(modal.contains("echo checked-by-keel"), "{modal}");
    t.keys(&["Enter"]);
    // The second, answered by another client over the API: the terminal's modal closes.
    let pending = wait_pending(&server, &id, "b2");
    t.wait_for_in_history("echo checked-again");
    let answered = server.call(
        "POST",
        &format!(
            "/api/v1/sessions/{id}/approvals/{}",
            pending["requestId"].as_str().unwrap()
        ),
        Some(&json!({"decision": "allow"})),
    );
    assert_eq!(answered.status, 200, "{}", answered.body);
    t.wait_for_in_history("The check ran twice.");
    t.wait_for_in_history("answered by another client");
    assert!(
        !t.screen().contains("Allow bash?"),
        "the modal closed: {}",
        t.screen()
    );
    wait_idle(&server, &id);
    // Both calls ran: the first allowed in the terminal, the second over the API.
    let file = env
        .session_files()
        .into_iter()
        .find(|f| f.to_string_lossy().contains(&id))
        .unwrap();
    let results = tool_results(&load_consistent(&file));
    let texts: Vec<(&str, bool)> = results
        .iter()
        .map(|(_, text, is_error)| (text.trim(), *is_error))
        .collect();
    assert_eq!(
        texts,
        vec![("checked-by-keel", false), ("checked-again", false)],
        "{results:?}"
    );
    t.keys(&["C-d"]);
    let (exit, err) = (t.wait_exit(), t.stderr());
    assert_eq!(exit, "EXIT=0", "{err}");
}

/// Wait until session `id` has an open request for call `call`; the request.
fn wait_pending(server: &Server, id: &str, call: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let reply = server.call("GET", &format!("/api/v1/sessions/{id}/pending"), None);
        if let Some(r) = reply.json()["requests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["callId"] == call)
        {
            return r.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no request for {call}: {}",
            reply.body
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_broken_stream_reconnects_to_the_server_started_again_and_shows_each_event_once() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let first = Server::start(&env, &mock);
    let port = first.addr.port();
    let id = first.create(&env.ws, "before the restart");
    wait_idle(&first, &id);
    let t = Tmux::start_logged(
        env.root(),
        "first",
        &attach(&env, &[&id, "--server", &first.url]),
    );
    t.wait_for_in_history("Said before the restart.");

    // The server dies (SIGKILL): the terminal says it reconnects, and keeps trying.
    let first_token = first.token.clone();
    let mut first = first;
    // SAFETY: kill(2) on the child we spawned and have not reaped.
    unsafe { libc::kill(first.child.id() as i32, libc::SIGKILL) };
    let _ = first.child.wait();
    drop(first);
    t.wait_for_words(&format!("reconnecting to http://127.0.0.1:{port}"));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        words(&t.screen()).contains("reconnecting to"),
        "still reconnecting: {}",
        t.screen()
    );

    // A new server on the same port and $KEEL_HOME (a new token, in serve.json). Another
    // client's message resumes the session there; the terminal follows it from the last
    // event it showed: the turn it missed shows, nothing shows twice.
    let second = Server::start_on(&env, &mock, &format!("127.0.0.1:{port}"), &[]);
    assert_ne!(second.token, first_token);
    let sent = second.call(
        "POST",
        &format!("/api/v1/sessions/{id}/messages"),
        Some(&json!({"text": "while it was away"})),
    );
    assert!(sent.status < 300, "{} {}", sent.status, sent.body);
    t.wait_for_in_history("Said while the terminal was away.");
    wait_idle(&second, &id);
    // Typed there: posted with the new server's token, its answer streams in.
    t.submit("typed after the restart");
    t.wait_for_in_history("Answered by the server started again.");
    wait_idle(&second, &id);
    assert!(
        !words(&t.screen()).contains("reconnecting to"),
        "{}",
        t.screen()
    );
    let history = words(&t.history());
    for said in [
        "Said before the restart.",
        "Said while the terminal was away.",
        "Answered by the server started again.",
    ] {
        assert_eq!(history.matches(said).count(), 1, "{said} once: {history}");
    }
    t.keys(&["C-d"]);
    let (exit, err) = (t.wait_exit(), t.stderr());
    assert_eq!(exit, "EXIT=0", "{err}");
    let log = log_of(&env, &id);
    assert!(
        log.contains("Answered by the server started again."),
        "{log}"
    );
}

#[test]
fn a_turn_running_at_attach_shows_running_and_ctrl_c_cancels_it_on_the_server() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    let id = server.create(&env.ws, "take forever");
    // The model has the request (it never answers).
    let deadline = Instant::now() + Duration::from_secs(60);
    while mock.requests().is_empty() {
        assert!(Instant::now() < deadline, "the model was never asked");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(listed(&server, &id)["status"], "running");

    let t = Tmux::start_logged(
        env.root(),
        "first",
        &attach(&env, &[&id, "--server", &server.url]),
    );
    t.wait_for_in_history("take forever");
    // Running: the status line's spinner; Ctrl-C cancels the turn there (POST …/cancel).
    t.wait_for("turn 1 step");
    t.keys(&["C-c"]);
    t.wait_for("cancelling the turn");
    wait_idle(&server, &id);
    let log = log_of(&env, &id);
    assert!(
        log.contains(r#""reason":{"kind":"aborted","reason":"cancelled by the user"}"#),
        "the turn was cancelled: {log}"
    );
    // Idle again: Ctrl-C no longer cancels (nothing runs), Ctrl-D leaves.
    std::thread::sleep(Duration::from_millis(1600));
    t.keys(&["C-d"]);
    let (exit, err) = (t.wait_exit(), t.stderr());
    assert_eq!(exit, "EXIT=0", "{err}");
}

#[test]
fn trust_in_an_attached_terminal_is_the_servers_and_holds_from_the_next_message() {
    if !have_tmux() {
        return;
    }
    let env = Env::untrusted();
    let hook = json!([{"hooks": [{"type": "command",
        "command": format!("touch {}", env.outside.join("prompt-submit").display())}]}]);
    env.write(
        ".claude/settings.json",
        &json!({"hooks": {"UserPromptSubmit": hook}}).to_string(),
    );
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    let created = server.call("POST", "/api/v1/sessions", Some(&json!({"cwd": env.ws})));
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.json()["id"].as_str().unwrap().to_owned();
    // The terminal's own configuration trusts the workspace; the server's does not, and that
    // is what it says at attach.
    let client_home = env.root().join("client-home");
    std::fs::create_dir_all(&client_home).unwrap();
    let trusted = crate::remote::client(&env, &["trust", env.ws.to_str().unwrap()])
        .env("KEEL_HOME", &client_home)
        .output()
        .unwrap();
    assert!(trusted.status.success(), "{trusted:?}");
    let mut cmd = attach(&env, &[&id, "--server", &server.url]);
    cmd.env("KEEL_HOME", &client_home);
    let t = Tmux::start_logged(env.root(), "first", &cmd);
    t.wait_for_in_history("is not trusted: ignored");
    t.wait_for_in_history("hooks.UserPromptSubmit); trust it");

    // /trust: the server's decision for the session's workspace.
    t.submit("/trust");
    t.wait_for_in_history("Ignored until you trust it");
    t.wait_for_in_history(".claude/settings.json: hooks.UserPromptSubmit");
    // /trust yes: recorded by the server; the session closed there, so that its next
    // message resumes it on an agent that runs the workspace's hook.
    t.submit("/trust yes");
    t.wait_for_in_history("is now trusted on the server");
    t.wait_for_in_history("From the session's next message these take effect");
    let cwd = env.ws.to_str().unwrap().replace('/', "%2F");
    let trust = server.call("GET", &format!("/api/v1/trust?cwd={cwd}"), None);
    assert_eq!(trust.json()["level"], "trusted", "{}", trust.body);
    assert_eq!(listed(&server, &id)["status"], "stored");
    t.submit("after the trust");
    t.wait_for_in_history("Answered on the trusted agent.");
    assert!(
        env.outside.join("prompt-submit").exists(),
        "the trusted workspace's hook ran on the resumed session"
    );
    t.keys(&["C-d"]);
    let (exit, err) = (t.wait_exit(), t.stderr());
    assert_eq!(exit, "EXIT=0", "{err}");
}

/// `GET /api/v1/sessions/{id}`: what the server's agent runs with.
fn state_of(server: &Server, id: &str) -> Value {
    let reply = server.call("GET", &format!("/api/v1/sessions/{id}"), None);
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()
}

/// Poll session `id`'s state until `done` holds; the state then.
fn wait_state(server: &Server, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let state = state_of(server, id);
        if done(&state) {
            return state;
        }
        assert!(Instant::now() < deadline, "never {what}: {state}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The `data` of each event of type `ty` in `events`.
fn data_of(events: &[Value], ty: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == ty)
        .map(|e| e["data"].clone())
        .collect()
}

const MODES_SCRIPT: &str = r#"
responses:
  - match: { last_user_contains: "hello there" }
    text: "Hello from the server."
  - match: { last_user_contains: "on the other model" }
    text: "Answered on the other model."
  - match: { last_user_contains: "ask me" }
    tool_calls:
      - id: q1
        name: ask_user_question
        arguments:
          questions:
            - { id: lang, header: Language, question: "Which language?", options: [ { label: Rust, description: "fast" }, { label: Go } ] }
            - { id: name, question: "What is the project called?" }
  - match: { last_tool_result_contains: "The user answered" }
    text: "Setting up now."
"#;

#[test]
fn shift_tab_and_slash_plan_in_an_attached_terminal_put_the_hosted_session_in_plan_mode_and_back() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(MODES_SCRIPT);
    let server = Server::start(&env, &mock);
    let id = server.create(&env.ws, "hello there");
    wait_idle(&server, &id);
    // The session runs read-only on the server: leaving plan mode goes back to that.
    let set = server.call(
        "POST",
        &format!("/api/v1/sessions/{id}/mode"),
        Some(&json!({"mode": "read-only"})),
    );
    assert_eq!(set.status, 200, "{}", set.body);
    assert_eq!(set.json()["mode"], "read-only", "{}", set.body);

    let t = Tmux::start_logged(
        env.root(),
        "first",
        &attach(&env, &[&id, "--server", &server.url]),
    );
    t.wait_for_in_history("Hello from the server.");
    t.wait_for("read-only");
    // Shift-Tab: `POST …/mode {"mode": "plan"}`; the server's agent is in plan mode.
    t.keys(&["BTab"]);
    t.wait_for_in_history("plan mode on");
    let state = wait_state(&server, &id, "in plan mode", |s| s["mode"] == "plan");
    assert_eq!(state["plan"], true, "{state}");
    // The status line shows it once the server's `plan/mode` event streams in.
    t.wait_for_words("· plan mode");
    let plans = data_of(&events_of(&env, &id), "plan/mode");
    assert_eq!(
        plans.last().map(|p| &p["active"]),
        Some(&json!(true)),
        "{plans:?}"
    );

    // `/plan` (as Shift-Tab) leaves it: back to the mode the session had (read-only), not
    // `default`.
    t.submit("/plan");
    t.wait_for_in_history("plan mode off");
    let state = wait_state(&server, &id, "out of plan mode", |s| s["plan"] == false);
    assert_eq!(state["mode"], "read-only", "{state}");
    assert_eq!(state["sandbox"], "read-only", "{state}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while words(&t.screen()).contains("· plan mode") {
        assert!(
            Instant::now() < deadline,
            "the status line still shows plan mode: {}",
            t.screen()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let events = events_of(&env, &id);
    let plans = data_of(&events, "plan/mode");
    assert_eq!(
        plans
            .iter()
            .map(|p| p["active"].clone())
            .collect::<Vec<_>>(),
        vec![json!(true), json!(false)],
        "{plans:?}"
    );
    let sandbox = data_of(&events, "sandbox/mode");
    assert_eq!(
        sandbox.last().map(|m| &m["mode"]),
        Some(&json!("read-only")),
        "{sandbox:?}"
    );
    t.keys(&["C-d"]);
    let (exit, err) = (t.wait_exit(), t.stderr());
    assert_eq!(exit, "EXIT=0", "{err}");
    assert_eq!(listed(&server, &id)["status"], "idle");
}

#[test]
fn slash_model_in_an_attached_terminal_switches_the_hosted_sessions_model() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(MODES_SCRIPT);
    let server = Server::start(&env, &mock);
    let id = server.create(&env.ws, "hello there");
    wait_idle(&server, &id);
    let before = state_of(&server, &id)["model"].clone();
    assert_ne!(before, "deepseek-v4-pro", "another model to begin with");
    assert_eq!(mock.requests()[0]["model"], before);

    let t = Tmux::start_logged(
        env.root(),
        "first",
        &attach(&env, &[&id, "--server", &server.url]),
    );
    t.wait_for_in_history("Hello from the server.");
    // `/model NAME`: `POST …/model`; the server rebuilds the session's agent on it.
    t.submit("/model deepseek-v4-pro");
    wait_state(&server, &id, "on deepseek-v4-pro", |s| {
        s["model"] == "deepseek-v4-pro"
    });
    let chosen = data_of(&events_of(&env, &id), "model/selected");
    assert_eq!(chosen.len(), 1, "{chosen:?}");
    assert_eq!(chosen[0]["model"], "deepseek-v4-pro", "{chosen:?}");

    // The next prompt typed there goes to the model by its new name.
    t.submit("on the other model");
    t.wait_for_in_history("Answered on the other model.");
    wait_idle(&server, &id);
    // The status line shows the model of the last request.
    t.wait_for("deepseek-v4-pro");
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[1]["model"], "deepseek-v4-pro", "{}", requests[1]);
    let log = log_of(&env, &id);
    assert!(log.contains("Answered on the other model."), "{log}");
    t.keys(&["C-d"]);
    let (exit, err) = (t.wait_exit(), t.stderr());
    assert_eq!(exit, "EXIT=0", "{err}");
    assert_eq!(listed(&server, &id)["status"], "idle");
}

#[test]
fn a_question_the_model_asks_is_answered_in_the_attached_terminal() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(MODES_SCRIPT);
    let server = Server::start(&env, &mock);
    let created = server.call("POST", "/api/v1/sessions", Some(&json!({"cwd": env.ws})));
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.json()["id"].as_str().unwrap().to_owned();
    let t = Tmux::start_logged(
        env.root(),
        "first",
        &attach(&env, &[&id, "--server", &server.url]),
    );
    std::thread::sleep(Duration::from_millis(500));
    t.submit("ask me about the project");
    // The server's open question (`pending`) is the terminal's form.
    let pending = wait_pending(&server, &id, "q1");
    assert_eq!(pending["kind"], "question", "{pending}");
    let first = t.wait_for("Which language?");
    assert!(first.contains("Language (1/2)"), "{first}");
    t.keys(&["2"]);
    t.wait_for("What is the project called?");
    t.submit("keelboat");
    // Posted to `…/questions/{requestId}`: the turn goes on with the answers.
    t.wait_for_in_history("Setting up now.");
    wait_idle(&server, &id);
    let open = server.call("GET", &format!("/api/v1/sessions/{id}/pending"), None);
    assert_eq!(open.json()["requests"], json!([]), "{}", open.body);
    let events = events_of(&env, &id);
    let answered = data_of(&events, "question/answered");
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert_eq!(
        answered[0]["answers"],
        json!({"lang": "Go", "name": "keelboat"}),
        "{answered:?}"
    );
    let results = tool_results(&events);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        results[0]
            .1
            .contains("The user answered:\nlang: Go\nname: keelboat")
            && !results[0].2,
        "{results:?}"
    );
    let second = &mock.requests()[1];
    assert!(
        second
            .to_string()
            .contains(r"The user answered:\nlang: Go\nname: keelboat"),
        "{second}"
    );
    t.keys(&["C-d"]);
    let (exit, err) = (t.wait_exit(), t.stderr());
    assert_eq!(exit, "EXIT=0", "{err}");
    assert_eq!(listed(&server, &id)["status"], "idle");
}

const FORK_SCRIPT: &str = r#"
responses:
  - match: { last_user_contains: "say hello" }
    text: "Hello from the server."
  - match: { last_user_contains: "said in the fork" }
    text: "Answered in the fork."
  - text: "Summary: the user said hello."
"#;

#[test]
fn compact_and_a_fork_in_an_attached_terminal_run_on_the_server() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(FORK_SCRIPT);
    let server = Server::start(&env, &mock);
    let id = server.create(&env.ws, "say hello");
    wait_idle(&server, &id);
    let t = Tmux::start_logged(
        env.root(),
        "first",
        &attach(&env, &[&id, "--server", &server.url]),
    );
    t.wait_for_in_history("Hello from the server.");

    // /compact: the server compacts the hosted session; the terminal shows it done.
    t.submit("/compact");
    t.wait_for_in_history("history compacted");
    wait_idle(&server, &id);
    let events = events_of(&env, &id);
    assert_eq!(data_of(&events, "compaction/end").len(), 1, "{events:?}");

    // Esc Esc, the turn, "Fork a new session from here": the server forks; the terminal
    // follows the fork, and what is typed next runs there, not in the first session.
    t.esc_esc();
    t.wait_for_in_history("Rewind to just before");
    t.keys(&["Enter"]);
    t.wait_for_in_history("Fork a new session from here");
    t.keys(&["4"]);
    t.wait_for_in_history("Forked just before turn 1");
    t.keys(&["C-u"]);
    t.submit("said in the fork");
    t.wait_for_in_history("Answered in the fork.");
    let sessions = server.call("GET", "/api/v1/sessions", None).json();
    let ids: Vec<String> = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 2, "{sessions}");
    let fork = ids.iter().find(|s| **s != id).unwrap();
    wait_idle(&server, fork);
    let forked = events_of(&env, fork);
    assert!(
        !data_of(&forked, "session/end-seed").is_empty(),
        "a fork: {forked:?}"
    );
    let said = |events: &[Value]| {
        data_of(events, "user/message")
            .iter()
            .any(|m| m.to_string().contains("said in the fork"))
    };
    assert!(said(&forked), "the fork got the message: {forked:?}");
    assert!(!said(&events_of(&env, &id)), "the first session did not");
    t.keys(&["C-d"]);
    let (exit, err) = (t.wait_exit(), t.stderr());
    assert_eq!(exit, "EXIT=0", "{err}");
    assert!(err.contains(&format!("keel attach {fork}")), "{err}");
}
