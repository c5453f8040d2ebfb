//! The rest of the API surface, each route doing what the command line or the terminal UI does:
//! `POST …/fork` (then the fork prompted, the original unchanged), `POST …/rewind` (the files
//! and the conversation back, read back from the log), `POST …/mode` and `…/model` (their
//! events on a stream opened before, which follows the session onto its rebuilt agent),
//! `GET /api/v1/sessions?q=` (a session found by a word of its prompt), images in a message
//! (in the model's request), and the 404s, 400s and 409s of these routes.

use crate::client::{Server, Sse, wait_idle};
use crate::support::{Env, Mock, load_consistent, of_type, session_id};
use serde_json::{Value, json};
use std::cell::Cell;
use std::path::PathBuf;

const SCRIPT: &str = r#"
responses:
  - match: { last_user_contains: "first question" }
    text: "First answer."
  - match: { last_user_contains: "fork question" }
    text: "Fork answer."
  - match: { last_user_contains: "second question" }
    text: "Second answer."
  - match: { last_user_contains: "effort question" }
    text: "Effort answer."
  - match: { last_user_contains: "<goal_round" }
    tool_calls:
      - { id: g1, name: update_goal, arguments: { goal_id: "g1", revision: 1, action: complete } }
  - match: { last_tool_result_contains: "complete" }
    text: "Goal reached."
  - match: { last_user_contains: "Say hello to" }
    text: "Hello, custom."
  - match: { last_user_contains: "start a job" }
    tool_calls:
      - { id: j1, name: bash, arguments: { command: "echo job-started; sleep 600", run_in_background: true, description: "a long sleep" } }
  - match: { last_tool_result_contains: "bash-" }
    text: "Started."
  - match: { last_user_contains: "show me the report" }
    tool_calls:
      - { id: p1, name: present, arguments: { files: [ { path: "report.md", description: "the report" }, { path: "page.html" }, { path: "blob.bin" } ] } }
  - match: { last_tool_result_contains: "Presented" }
    text: "There they are."
  - match: { last_user_contains: "Context compaction" }
    text: "Summary: a goal reached, a greeting sent."
  - match: { last_user_contains: "write the notes" }
    tool_calls:
      - { id: r1, name: read, arguments: { file_path: "notes.txt" } }
      - { id: w1, name: write, arguments: { file_path: "notes.txt", content: "rewritten\n" } }
  - match: { last_tool_result_contains: "notes.txt" }
    text: "Notes written."
  - match: { last_user_contains: "what is this" }
    text: "A tiny GIF."
  - match: { last_user_contains: "take forever" }
    behaviour: stall
    text: "never arrives"
  - match: { last_user_contains: "take forever" }
    text: "Done waiting."
"#;

/// "GIF89a!" is enough of a GIF for keel's check.
const GIF_B64: &str = "R0lGODlhIQ==";

fn post(server: &Server, path: &str, body: Value) -> crate::client::Reply {
    server.call("POST", path, Some(&body))
}

/// The session file of `id`.
fn file_of(env: &Env, id: &str) -> PathBuf {
    env.session_files()
        .into_iter()
        .find(|f| session_id(f) == id)
        .unwrap_or_else(|| panic!("no session file of {id}"))
}

/// Read `id`'s stream until it has `n` `turn/end` events.
fn until_turn_ends(server: &Server, id: &str, n: usize) -> Vec<(u64, Value)> {
    let ends = Cell::new(0);
    Sse::open(server, &format!("/api/v1/sessions/{id}/events"), None).until_where(|e| {
        if e["type"] == "turn/end" {
            ends.set(ends.get() + 1);
        }
        ends.get() == n
    })
}

fn texts(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "assistant/message")
        .map(|e| e.to_string())
        .collect()
}

/// A 400 `bad_request` whose message names `what`.
fn bad(reply: &crate::client::Reply, what: &str) {
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.error_code(), "bad_request");
    assert!(reply.body.contains(what), "{what} named in {}", reply.body);
}

#[test]
fn a_fork_is_a_new_session_and_its_turns_leave_the_original_unchanged() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    let id = server.create(&env.ws, "first question");
    until_turn_ends(&server, &id, 1);
    wait_idle(&server, &id);
    let original = file_of(&env, &id);
    let before = load_consistent(&original);

    // An `at` beyond the log, of the wrong type, an unknown field, an unknown session.
    let fork = format!("/api/v1/sessions/{id}/fork");
    bad(&post(&server, &fork, json!({"at": 100_000})), "at");
    bad(&post(&server, &fork, json!({"at": "end"})), "at");
    bad(&post(&server, &fork, json!({"from": 1})), "from");
    let missing = post(&server, "/api/v1/sessions/0193-nope/fork", json!({}));
    assert_eq!(missing.status, 404, "{}", missing.body);
    assert_eq!(missing.error_code(), "not_found");

    // At the end (the default), as `keel fork` does.
    let forked = post(&server, &fork, json!({}));
    assert_eq!(forked.status, 201, "{}", forked.body);
    let child = forked.json()["id"].as_str().unwrap().to_owned();
    assert_ne!(child, id);
    let sent = post(
        &server,
        &format!("/api/v1/sessions/{child}/messages"),
        json!({"text": "fork question"}),
    );
    assert_eq!(sent.status, 202, "{}", sent.body);
    let seen = until_turn_ends(&server, &child, 2);
    let seen: Vec<Value> = seen.into_iter().map(|(_, e)| e).collect();
    let said = texts(&seen);
    assert!(
        said.contains("First answer."),
        "seeded with the original: {said}"
    );
    assert!(said.contains("Fork answer."), "{said}");
    // The fork's turn saw the original's first turn.
    let last = mock.requests().pop().unwrap().to_string();
    assert!(last.contains("first question") && last.contains("fork question"));
    wait_idle(&server, &child);

    // The original: the same log, and its stream ends after its first turn.
    assert_eq!(
        load_consistent(&original),
        before,
        "the original is unchanged"
    );
    assert!(!texts(&load_consistent(&file_of(&env, &child))).is_empty());
    assert!(!texts(&before).contains("Fork answer."));

    // At a seq: just before the first turn, so nothing of it is kept.
    let start = before.iter().find(|e| e["type"] == "turn/start").unwrap()["seq"]
        .as_u64()
        .unwrap();
    let early = post(&server, &fork, json!({"at": start}));
    assert_eq!(early.status, 201, "{}", early.body);
    let early = early.json()["id"].as_str().unwrap().to_owned();
    let events = load_consistent(&file_of(&env, &early));
    assert!(of_type(&events, "turn/end").is_empty(), "{events:?}");
}

#[test]
fn a_rewind_puts_the_files_and_the_conversation_back_and_the_log_says_so() {
    let env = Env::new();
    env.write("notes.txt", "original\n");
    let mock = Mock::start(SCRIPT);
    let server = Server::start_with(&env, &mock, &["--approval", "auto"]);
    let id = server.create(&env.ws, "first question");
    until_turn_ends(&server, &id, 1);
    wait_idle(&server, &id);
    let sent = post(
        &server,
        &format!("/api/v1/sessions/{id}/messages"),
        json!({"text": "write the notes"}),
    );
    assert_eq!(sent.status, 202, "{}", sent.body);
    let turn = until_turn_ends(&server, &id, 2);
    wait_idle(&server, &id);
    assert_eq!(env.read("notes.txt"), "rewritten\n", "{turn:?}");

    // Malformed: no `to`, a `to` of no form, a scope of none; an unknown session.
    let rewind = format!("/api/v1/sessions/{id}/rewind");
    bad(&post(&server, &rewind, json!({})), "to");
    bad(&post(&server, &rewind, json!({"to": "soon"})), "to");
    bad(
        &post(&server, &rewind, json!({"to": "2", "scope": "all"})),
        "scope",
    );
    let missing = post(
        &server,
        "/api/v1/sessions/0193-nope/rewind",
        json!({"to": "1"}),
    );
    assert_eq!(missing.status, 404, "{}", missing.body);
    assert_eq!(env.read("notes.txt"), "rewritten\n", "nothing changed");

    // Just before turn 2, as `keel rewind --to 2` and the UI's /rewind 2.
    let done = post(&server, &rewind, json!({"to": "2"}));
    assert_eq!(done.status, 200, "{}", done.body);
    let message = done.json()["message"].as_str().unwrap().to_owned();
    assert!(message.contains("turn 2"), "{message}");
    assert_eq!(env.read("notes.txt"), "original\n", "the file is back");

    // The log read back over the API: the files' restore and the conversation's rewind.
    let log: Vec<Value> = Sse::open(&server, &format!("/api/v1/sessions/{id}/events"), None)
        .until("surface/rewind")
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    assert_eq!(of_type(&log, "checkpoint/restored").len(), 1, "{log:?}");
    let rewinds = of_type(&log, "surface/rewind");
    assert_eq!(rewinds[0]["data"]["turn"], 2, "{}", rewinds[0]);
    let on_disk = load_consistent(&file_of(&env, &id));
    assert_eq!(of_type(&on_disk, "surface/rewind").len(), 1);

    // The next turn runs on the rewound conversation: turn 2's prompt is not in it.
    let sent = post(
        &server,
        &format!("/api/v1/sessions/{id}/messages"),
        json!({"text": "second question"}),
    );
    assert_eq!(sent.status, 202, "{}", sent.body);
    until_turn_ends(&server, &id, 3);
    let last = mock.requests().pop().unwrap().to_string();
    assert!(last.contains("second question"), "{last}");
    assert!(!last.contains("write the notes"), "rewound away: {last}");
}

#[test]
fn mode_and_model_switches_are_on_the_stream_and_refused_mid_turn() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    let created = post(&server, "/api/v1/sessions", json!({"cwd": env.ws}));
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.json()["id"].as_str().unwrap().to_owned();
    // Opened before the switches: it follows the session onto its rebuilt agent.
    let mut stream = Sse::open(&server, &format!("/api/v1/sessions/{id}/events"), None);

    let mode = format!("/api/v1/sessions/{id}/mode");
    bad(&post(&server, &mode, json!({"mode": "fast"})), "fast");
    bad(&post(&server, &mode, json!({})), "mode");
    let set = post(&server, &mode, json!({"mode": "plan"}));
    assert_eq!(set.status, 200, "{}", set.body);
    assert_eq!(set.json()["mode"], "plan");
    let seen = stream.until("plan/mode");
    assert_eq!(seen.last().unwrap().1["data"]["active"], true, "{seen:?}");
    let set = post(&server, &mode, json!({"mode": "read-only"}));
    assert_eq!(set.json()["mode"], "read-only", "{}", set.body);
    let seen = stream.until("sandbox/mode");
    assert!(
        seen.last().unwrap().1.to_string().contains("read-only"),
        "{seen:?}"
    );

    let model = format!("/api/v1/sessions/{id}/model");
    bad(&post(&server, &model, json!({"model": 7})), "model");
    bad(&post(&server, &model, json!({"effort": "HIGH!"})), "effort");
    bad(&post(&server, &model, json!({})), "model, effort");

    // The reasoning effort alone: the same model, the effort in the log and in the next request.
    let set = post(&server, &model, json!({"effort": "low"}));
    assert_eq!(set.status, 200, "{}", set.body);
    let configured = set.json()["model"].as_str().unwrap().to_owned();
    assert_eq!(set.json()["effort"], "low", "{}", set.body);
    let seen = stream.until("model/selected");
    let chosen = &seen.last().unwrap().1["data"];
    assert_eq!(chosen["effort"], "low", "{seen:?}");
    assert_eq!(chosen["model"], configured.as_str(), "{seen:?}");
    let sent = post(
        &server,
        &format!("/api/v1/sessions/{id}/messages"),
        json!({"text": "effort question"}),
    );
    assert_eq!(sent.status, 202, "{}", sent.body);
    stream.until_turn_end();
    let request = mock.requests().pop().unwrap();
    assert_eq!(request["model"], configured.as_str(), "{request}");
    assert_eq!(request["reasoning_effort"], "low", "{request}");
    wait_idle(&server, &id);

    // Then the model: the effort chosen stays.
    let switched = post(&server, &model, json!({"model": "deepseek-reasoner"}));
    assert_eq!(switched.status, 200, "{}", switched.body);
    assert_eq!(switched.json()["model"], "deepseek-reasoner");
    assert_eq!(switched.json()["effort"], "low", "{}", switched.body);
    let seen = stream.until("model/selected");
    assert_eq!(seen.last().unwrap().1["data"]["model"], "deepseek-reasoner");

    // The next turn runs on it (and on the modes), streamed to the same client.
    let sent = post(
        &server,
        &format!("/api/v1/sessions/{id}/messages"),
        json!({"text": "second question"}),
    );
    assert_eq!(sent.status, 202, "{}", sent.body);
    let turn: Vec<Value> = stream
        .until_turn_end()
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    assert!(texts(&turn).contains("Second answer."), "{turn:?}");
    let request = mock.requests().pop().unwrap();
    assert_eq!(request["model"], "deepseek-reasoner", "{request}");
    wait_idle(&server, &id);

    // A session created in a mode is in it before its first turn.
    let created = post(
        &server,
        "/api/v1/sessions",
        json!({"cwd": env.ws, "mode": "plan"}),
    );
    assert_eq!(created.status, 201, "{}", created.body);
    let planned = created.json()["id"].as_str().unwrap().to_owned();
    let events =
        Sse::open(&server, &format!("/api/v1/sessions/{planned}/events"), None).until("plan/mode");
    assert_eq!(events.last().unwrap().1["data"]["active"], true);
    bad(
        &post(
            &server,
            "/api/v1/sessions",
            json!({"cwd": env.ws, "mode": "fast"}),
        ),
        "fast",
    );

    // Mid-turn, a rewind, a mode or a model switch waits: 409 turn_running.
    let busy = server.create(&env.ws, "take forever");
    Sse::open(&server, &format!("/api/v1/sessions/{busy}/events"), None).until("turn/start");
    for (route, body) in [
        ("mode", json!({"mode": "default"})),
        ("model", json!({"model": "deepseek-chat"})),
        ("rewind", json!({"to": "1"})),
    ] {
        let r = post(&server, &format!("/api/v1/sessions/{busy}/{route}"), body);
        assert_eq!(r.status, 409, "{route}: {}", r.body);
        assert_eq!(r.error_code(), "turn_running", "{route}");
    }
    // A fork only reads: not refused.
    let forked = post(&server, &format!("/api/v1/sessions/{busy}/fork"), json!({}));
    assert_eq!(forked.status, 201, "{}", forked.body);
    let cancelled = post(
        &server,
        &format!("/api/v1/sessions/{busy}/cancel"),
        json!({}),
    );
    assert_eq!(cancelled.status, 200, "{}", cancelled.body);

    // Unknown sessions.
    for route in ["mode", "model"] {
        let r = post(
            &server,
            &format!("/api/v1/sessions/0193-nope/{route}"),
            json!({"mode": "plan", "model": "x"}),
        );
        assert_eq!(r.status, 404, "{route}: {}", r.body);
    }
}

#[test]
fn a_search_finds_a_session_by_a_word_of_its_prompt() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    let zebra = server.create(&env.ws, "first question about zebras");
    let other = server.create(&env.ws, "second question");
    for id in [&zebra, &other] {
        until_turn_ends(&server, id, 1);
        wait_idle(&server, id);
    }
    let found = server.call("GET", "/api/v1/sessions?q=zebras", None);
    assert_eq!(found.status, 200, "{}", found.body);
    let rows = found.json()["sessions"].as_array().unwrap().clone();
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec![zebra.as_str()], "{}", found.body);
    assert!(rows[0]["snippet"].as_str().unwrap().contains("[zebras]"));
    assert_eq!(rows[0]["status"], "idle");
    // Every word must be there.
    let both = server.call("GET", "/api/v1/sessions?q=question%20zebras", None);
    assert_eq!(both.json()["sessions"].as_array().unwrap().len(), 1);
    let none = server.call("GET", "/api/v1/sessions?q=giraffes", None);
    assert_eq!(none.json()["sessions"], json!([]), "{}", none.body);
    bad(&server.call("GET", "/api/v1/sessions?q=", None), "q");
    bad(
        &server.call("GET", "/api/v1/sessions?query=x", None),
        "query",
    );
}

#[test]
fn an_image_reaches_the_model_and_other_forms_are_refused() {
    let env = Env::new();
    std::fs::write(
        env.home.join("config.toml"),
        "[models.\"seeing-model\"]\nvision = true\n",
    )
    .unwrap();
    let mock = Mock::start(SCRIPT);
    let server = Server::start_with(&env, &mock, &["--model", "seeing-model"]);
    let created = post(&server, "/api/v1/sessions", json!({"cwd": env.ws}));
    let id = created.json()["id"].as_str().unwrap().to_owned();
    let messages = format!("/api/v1/sessions/{id}/messages");
    let say = |images: Value| {
        post(
            &server,
            &messages,
            json!({"text": "what is this?", "images": images}),
        )
    };
    bad(&say(json!(["/etc/hosts"])), "images[0]");
    bad(&say(json!(["https://example.com/a.gif"])), "data URL");
    bad(&say(json!([format!("data:image/gif,{GIF_B64}")])), "base64");
    bad(&say(json!(["data:text/plain;base64,aGk="])), "text/plain");
    bad(
        &say(json!([format!("data:image/png;base64,{GIF_B64}")])),
        "image/gif",
    );
    bad(
        &say(json!(["data:image/gif;base64,aGVsbG8="])),
        "not an image",
    );
    bad(&say(json!(["data:image/gif;base64,@@"])), "base64");
    bad(&say(json!("data:image/gif")), "images");
    assert!(mock.requests().is_empty(), "nothing was sent");

    let url = format!("data:image/gif;base64,{GIF_B64}");
    let sent = say(json!([url]));
    assert_eq!(sent.status, 202, "{}", sent.body);
    until_turn_ends(&server, &id, 1);
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let user = crate::support::last_user_message(&requests[0]);
    let urls: Vec<&str> = user["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["image_url"]["url"].as_str())
        .collect();
    assert_eq!(urls, vec![url.as_str()], "{user}");
    // The log holds a reference, not the bytes.
    let log = load_consistent(&file_of(&env, &id))
        .iter()
        .map(Value::to_string)
        .collect::<String>();
    assert!(log.contains("keel-attachment:") && !log.contains(GIF_B64));
    wait_idle(&server, &id);

    // On a model without vision, refused naming it.
    let switched = post(
        &server,
        &format!("/api/v1/sessions/{id}/model"),
        json!({"model": "deepseek-chat"}),
    );
    assert_eq!(switched.status, 200, "{}", switched.body);
    bad(&say(json!([url])), "deepseek-chat");
    let missing = post(
        &server,
        "/api/v1/sessions/0193-nope/messages",
        json!({"text": "hi", "images": [url]}),
    );
    assert_eq!(missing.status, 404, "{}", missing.body);
}

#[test]
fn the_trust_question_is_asked_and_answered_over_the_api() {
    let env = Env::untrusted();
    let hook = |name: &str| {
        json!([{"hooks": [{"type": "command",
            "command": format!("touch {}", env.outside.join(name).display())}]}])
    };
    env.write(
        ".claude/settings.json",
        &json!({"hooks": {"UserPromptSubmit": hook("prompt-submit")}}).to_string(),
    );
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    let cwd = env.ws.to_str().unwrap();
    let query = format!("/api/v1/trust?cwd={}", cwd.replace('/', "%2F"));

    // Undecided, and trusting would change something: a client asks.
    let asked = server.call("GET", &query, None);
    assert_eq!(asked.status, 200, "{}", asked.body);
    let asked = asked.json();
    assert_eq!(asked["decided"], false, "{asked}");
    assert_eq!(asked["level"], "untrusted", "{asked}");
    assert_eq!(asked["ask"], true, "{asked}");
    assert_eq!(
        asked["files"][0]["file"], ".claude/settings.json",
        "{asked}"
    );
    assert_eq!(
        asked["files"][0]["what"][0], "hooks.UserPromptSubmit",
        "{asked}"
    );
    assert!(
        asked["notice"]
            .as_str()
            .unwrap()
            .contains(".claude/settings.json")
    );

    // A session before the answer: the hook stays inert.
    let before = server.create(&env.ws, "first question");
    until_turn_ends(&server, &before, 1);
    assert!(!env.outside.join("prompt-submit").exists(), "ran untrusted");

    // Bad answers change nothing.
    bad(
        &post(
            &server,
            "/api/v1/trust",
            json!({"cwd": cwd, "level": "maybe"}),
        ),
        "maybe",
    );
    bad(
        &post(
            &server,
            "/api/v1/trust",
            json!({"cwd": "ws", "level": "trusted"}),
        ),
        "absolute",
    );
    bad(&server.call("GET", "/api/v1/trust", None), "cwd");
    assert_eq!(server.call("GET", &query, None).json()["decided"], false);

    // Trusted: recorded in the user's configuration; sessions from now on follow it.
    let recorded = post(
        &server,
        "/api/v1/trust",
        json!({"cwd": cwd, "level": "trusted"}),
    );
    assert_eq!(recorded.status, 200, "{}", recorded.body);
    let recorded = recorded.json();
    assert_eq!(recorded["level"], "trusted", "{recorded}");
    assert_eq!(recorded["decided"], true, "{recorded}");
    assert_eq!(recorded["ask"], false, "{recorded}");
    let file = PathBuf::from(recorded["recordedIn"].as_str().unwrap());
    assert!(file.starts_with(&env.home), "{recorded}");
    assert!(std::fs::read_to_string(&file).unwrap().contains("trusted"));
    let after = server.create(&env.ws, "second question");
    until_turn_ends(&server, &after, 1);
    assert!(
        env.outside.join("prompt-submit").exists(),
        "the trusted workspace's hook did not run"
    );
}

#[test]
fn slash_commands_run_over_the_api_the_goal_among_them() {
    let env = Env::new();
    env.write(".keel/commands/greet.md", "Say hello to $ARGUMENTS.\n");
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    let created = post(&server, "/api/v1/sessions", json!({"cwd": env.ws}));
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.json()["id"].as_str().unwrap().to_owned();
    let commands = format!("/api/v1/sessions/{id}/commands");

    // Listed: compact, the custom command, the plugins' (the goal's).
    let listed = server.call("GET", &commands, None);
    assert_eq!(listed.status, 200, "{}", listed.body);
    let rows = listed.json()["commands"].as_array().unwrap().clone();
    let kind_of = |name: &str| {
        rows.iter()
            .find(|r| r["name"] == name)
            .map(|r| r["kind"].as_str().unwrap().to_owned())
    };
    assert_eq!(kind_of("compact").as_deref(), Some("builtin"), "{rows:?}");
    assert_eq!(kind_of("greet").as_deref(), Some("custom"), "{rows:?}");
    assert_eq!(kind_of("goal").as_deref(), Some("plugin"), "{rows:?}");
    // keel's own agent command, as every front end offers it.
    assert!(kind_of("init").is_some(), "{rows:?}");

    // No goal yet: pausing it is refused, naming why; nothing else happens.
    let mut stream = Sse::open(&server, &format!("/api/v1/sessions/{id}/events"), None);
    let refused = post(
        &server,
        &format!("{commands}/goal"),
        json!({"args": "pause"}),
    );
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert_eq!(refused.error_code(), "command_refused");

    // The goal set: its round prompt queued as a turn, the goal completed by the model.
    let set = post(
        &server,
        &format!("{commands}/goal"),
        json!({"args": "--max-rounds 3 greet the world"}),
    );
    assert_eq!(set.status, 202, "{}", set.body);
    assert!(
        set.json()["prompt"]
            .as_str()
            .unwrap()
            .contains("greet the world"),
        "{}",
        set.body
    );
    let seen = stream.until("goal/set");
    assert_eq!(
        seen.last().unwrap().1["data"]["objective"],
        "greet the world"
    );
    let turn: Vec<Value> = stream
        .until_where(|e| e["type"] == "goal/set" && e["data"]["status"] == "complete")
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    assert!(!turn.is_empty());
    stream.until_turn_end();
    wait_idle(&server, &id);
    // Its status, said by the command itself.
    let status = post(&server, &format!("{commands}/goal"), json!({}));
    assert_eq!(status.status, 200, "{}", status.body);
    assert!(
        status.json()["message"]
            .as_str()
            .unwrap()
            .contains("greet the world"),
        "{}",
        status.body
    );

    // A custom command: expanded and sent as a turn.
    let greeted = post(
        &server,
        &format!("{commands}/greet"),
        json!({"args": "keel"}),
    );
    assert_eq!(greeted.status, 202, "{}", greeted.body);
    assert_eq!(
        greeted.json()["prompt"],
        "Say hello to keel.",
        "{}",
        greeted.body
    );
    let turn: Vec<Value> = stream
        .until_turn_end()
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    assert!(texts(&turn).contains("Hello, custom."), "{turn:?}");
    wait_idle(&server, &id);

    // compact, between turns; with no body at all.
    let compacted = server.call("POST", &format!("{commands}/compact"), None);
    assert_eq!(compacted.status, 200, "{}", compacted.body);
    assert!(
        compacted.json()["message"]
            .as_str()
            .unwrap()
            .contains("Compacted"),
        "{}",
        compacted.body
    );
    stream.until("compaction/end");

    // Unknown commands and sessions: 404; a bad body: 400.
    let r = post(&server, &format!("{commands}/nothing"), json!({}));
    assert_eq!(r.status, 404, "{}", r.body);
    let r = post(
        &server,
        "/api/v1/sessions/0193-nope/commands/goal",
        json!({}),
    );
    assert_eq!(r.status, 404, "{}", r.body);
    bad(
        &post(&server, &format!("{commands}/goal"), json!({"argz": "x"})),
        "argz",
    );
}

#[test]
fn background_jobs_are_listed_read_and_killed_over_the_api() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    let id = server.create(&env.ws, "start a job");
    until_turn_ends(&server, &id, 1);
    let jobs = format!("/api/v1/sessions/{id}/jobs");
    let listed = server.call("GET", &jobs, None);
    assert_eq!(listed.status, 200, "{}", listed.body);
    let rows = listed.json()["jobs"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["kind"], "bash", "{rows:?}");
    assert_eq!(rows[0]["status"], "running", "{rows:?}");
    assert_eq!(rows[0]["description"], "a long sleep", "{rows:?}");
    let job = rows[0]["id"].as_str().unwrap().to_owned();

    // Its output, once it printed.
    let deadline = std::time::Instant::now() + crate::support::HANG_GUARD;
    loop {
        let shown = server.call("GET", &format!("{jobs}/{job}"), None);
        assert_eq!(shown.status, 200, "{}", shown.body);
        if shown.json()["output"]
            .as_str()
            .unwrap()
            .contains("job-started")
        {
            assert_eq!(shown.json()["job"]["status"], "running");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", shown.body);
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    // Killed: settled as killed, and listed so.
    let killed = post(&server, &format!("{jobs}/{job}/kill"), json!({}));
    assert_eq!(killed.status, 200, "{}", killed.body);
    assert_eq!(killed.json()["job"]["status"], "killed", "{}", killed.body);
    let listed = server.call("GET", &jobs, None).json();
    assert_eq!(listed["jobs"][0]["status"], "killed", "{listed}");

    // Unknown jobs and sessions: 404; a stored session has none.
    let r = server.call("GET", &format!("{jobs}/bash-99"), None);
    assert_eq!(r.status, 404, "{}", r.body);
    let r = post(&server, &format!("{jobs}/bash-99/kill"), json!({}));
    assert_eq!(r.status, 404, "{}", r.body);
    let r = server.call("GET", "/api/v1/sessions/0193-nope/jobs", None);
    assert_eq!(r.status, 404, "{}", r.body);
    let closed = post(&server, &format!("/api/v1/sessions/{id}/close"), json!({}));
    assert_eq!(closed.status, 200, "{}", closed.body);
    let listed = server.call("GET", &jobs, None);
    assert_eq!(listed.json()["jobs"], json!([]), "{}", listed.body);
}

#[test]
fn presented_files_are_listed_and_served_safely() {
    let env = Env::new();
    env.write("report.md", "# Report\nall good\n");
    env.write("page.html", "<script>alert(1)</script>");
    env.write("secret.txt", "not presented");
    std::fs::write(env.ws.join("blob.bin"), [0u8, 159, 146, 150, 255]).unwrap();
    std::fs::write(env.outside.join("outside.txt"), "OUTSIDE SECRET").unwrap();
    std::fs::write(
        env.home.join("config.toml"),
        "[[plugins]]\nid = \"present\"\nenabled = true\n",
    )
    .unwrap();
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    let id = server.create(&env.ws, "show me the report");
    until_turn_ends(&server, &id, 1);
    let files = format!("/api/v1/sessions/{id}/files");

    let listed = server.call("GET", &files, None);
    assert_eq!(listed.status, 200, "{}", listed.body);
    let rows = listed.json()["files"].as_array().unwrap().clone();
    let paths: Vec<&str> = rows.iter().map(|r| r["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["report.md", "page.html", "blob.bin"], "{rows:?}");
    assert_eq!(rows[0]["description"], "the report");
    assert!(rows[0]["seq"].as_u64().unwrap() > 0);

    let content = |path: &str| server.call("GET", &format!("{files}/content?path={path}"), None);
    let report = content("report.md");
    assert_eq!(report.status, 200, "{}", report.body);
    assert_eq!(report.body, "# Report\nall good\n");
    assert_eq!(
        report.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    // HTML is text: nothing runs in the server's origin.
    let page = content("page.html");
    assert_eq!(page.status, 200, "{}", page.body);
    assert_eq!(
        page.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    assert!(
        page.header("content-security-policy")
            .is_some_and(|c| c.contains("sandbox")),
        "{:?}",
        page.headers
    );
    // Bytes that are no text: a download.
    let blob = content("blob.bin");
    assert_eq!(
        blob.header("content-type"),
        Some("application/octet-stream")
    );
    assert!(
        blob.header("content-disposition")
            .is_some_and(|d| d.starts_with("attachment")),
        "{:?}",
        blob.headers
    );

    // Only what was presented: 404 for another file of the workspace.
    let r = content("secret.txt");
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(!r.body.contains("not presented"));
    // A presented file swapped for a link out of the workspace: refused, nothing read.
    std::fs::remove_file(env.ws.join("report.md")).unwrap();
    std::os::unix::fs::symlink(env.outside.join("outside.txt"), env.ws.join("report.md")).unwrap();
    let r = content("report.md");
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(!r.body.contains("OUTSIDE SECRET"), "{}", r.body);
    // Gone since: 410.
    std::fs::remove_file(env.ws.join("page.html")).unwrap();
    let r = content("page.html");
    assert_eq!(r.status, 410, "{}", r.body);
    // No path: 400; an unknown session: 404.
    let r = server.call("GET", &format!("{files}/content"), None);
    assert_eq!(r.status, 400, "{}", r.body);
    let r = server.call("GET", "/api/v1/sessions/0193-nope/files", None);
    assert_eq!(r.status, 404, "{}", r.body);

    // A stored session (closed) lists the same files.
    post(&server, &format!("/api/v1/sessions/{id}/close"), json!({}));
    let listed = server.call("GET", &files, None).json();
    assert_eq!(listed["files"].as_array().unwrap().len(), 3, "{listed}");
    assert_eq!(content("blob.bin").status, 200);
}

#[test]
fn a_message_sent_during_a_model_switch_is_never_lost() {
    const ROUNDS: usize = 8;
    let mut script = String::from("responses:\n");
    for _ in 0..ROUNDS {
        script.push_str(
            "  - match: { last_user_contains: \"race question\" }\n    text: \"Race answer.\"\n",
        );
    }
    let env = Env::new();
    let mock = Mock::start(&script);
    let server = Server::start(&env, &mock);
    let created = post(&server, "/api/v1/sessions", json!({"cwd": env.ws}));
    let id = created.json()["id"].as_str().unwrap().to_owned();
    let mut stream = Sse::open(&server, &format!("/api/v1/sessions/{id}/events"), None);
    for round in 0..ROUNDS {
        let model = if round % 2 == 0 {
            "deepseek-chat"
        } else {
            "deepseek-reasoner"
        };
        // The switch and the message at once: whichever wins, the message runs as a turn.
        std::thread::scope(|s| {
            let switch = s.spawn(|| {
                post(
                    &server,
                    &format!("/api/v1/sessions/{id}/model"),
                    json!({"model": model}),
                )
            });
            let sent = post(
                &server,
                &format!("/api/v1/sessions/{id}/messages"),
                json!({"text": format!("race question {round}")}),
            );
            assert_eq!(sent.status, 202, "round {round}: {}", sent.body);
            let switched = switch.join().unwrap();
            // Refused only because the message's turn was running.
            assert!(
                switched.status == 200
                    || (switched.status == 409 && switched.error_code() == "turn_running"),
                "round {round}: {}",
                switched.body
            );
        });
        let turn: Vec<Value> = stream
            .until_turn_end()
            .into_iter()
            .map(|(_, e)| e)
            .collect();
        assert!(
            texts(&turn).contains("Race answer."),
            "round {round}: {turn:?}"
        );
        wait_idle(&server, &id);
    }
}

#[test]
fn a_session_s_state_and_a_command_s_choices_are_read_over_the_api() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    let id = server.create(&env.ws, "first question");
    until_turn_ends(&server, &id, 1);
    wait_idle(&server, &id);
    let state = format!("/api/v1/sessions/{id}");

    let now = server.call("GET", &state, None);
    assert_eq!(now.status, 200, "{}", now.body);
    let now = now.json();
    assert_eq!(now["status"], "idle", "{now}");
    assert_eq!(now["mode"], "default", "{now}");
    assert_eq!(now["plan"], false, "{now}");
    assert_eq!(now["sandbox"], "workspace-write", "{now}");
    assert!(now["model"].is_string(), "{now}");
    assert!(now["events"].as_u64().unwrap() > 3, "{now}");
    assert_eq!(now["cwd"], env.ws.canonicalize().unwrap().to_str().unwrap());

    // After a mode and an effort switch, the state says so.
    let set = post(
        &server,
        &format!("{state}/mode"),
        json!({"mode": "read-only"}),
    );
    assert_eq!(set.status, 200, "{}", set.body);
    let set = post(&server, &format!("{state}/model"), json!({"effort": "low"}));
    assert_eq!(set.status, 200, "{}", set.body);
    let now = server.call("GET", &state, None).json();
    assert_eq!(now["mode"], "read-only", "{now}");
    assert_eq!(now["sandbox"], "read-only", "{now}");
    assert_eq!(now["effort"], "low", "{now}");

    // The rewind command's choices: the session's turn, with its prompt.
    let choices = server.call("GET", &format!("{state}/commands/rewind/choices"), None);
    assert_eq!(choices.status, 200, "{}", choices.body);
    let rows = choices.json()["choices"].as_array().unwrap().clone();
    assert!(!rows.is_empty(), "{rows:?}");
    assert_eq!(rows[0]["text"], "first question", "{rows:?}");
    assert!(rows[0]["seq"].as_u64().is_some(), "{rows:?}");
    let r = server.call("GET", &format!("{state}/commands/nothing/choices"), None);
    assert_eq!(r.status, 404, "{}", r.body);

    // Closed, the session is stored: its log says what it chose.
    post(&server, &format!("{state}/close"), json!({}));
    let stored = server.call("GET", &state, None).json();
    assert_eq!(stored["status"], "stored", "{stored}");
    assert_eq!(stored["effort"], "low", "{stored}");
    assert_eq!(stored["sandbox"], "read-only", "{stored}");
    assert_eq!(stored["mode"], Value::Null, "{stored}");
    let r = server.call("GET", "/api/v1/sessions/0193-nope", None);
    assert_eq!(r.status, 404, "{}", r.body);
}

#[test]
fn a_session_seen_in_the_listing_while_it_is_created_streams_its_turn() {
    const ROUNDS: usize = 10;
    let mut script = String::from("responses:\n");
    for _ in 0..ROUNDS {
        script.push_str(
            "  - match: { last_user_contains: \"created question\" }\n    text: \"Created answer.\"\n",
        );
    }
    let env = Env::new();
    let mock = Mock::start(&script);
    let server = Server::start(&env, &mock);
    let mut seen = std::collections::HashSet::new();
    for round in 0..ROUNDS {
        std::thread::scope(|s| {
            let created = s.spawn(|| {
                post(
                    &server,
                    "/api/v1/sessions",
                    json!({"cwd": env.ws, "prompt": "created question"}),
                )
            });
            // The new session, as soon as the listing shows it (it may still be `stored`: its
            // file exists before the server hosts it); its stream must be the live one.
            let deadline = std::time::Instant::now() + crate::support::HANG_GUARD;
            let id = loop {
                let list = server.call("GET", "/api/v1/sessions", None).json();
                let new = list["sessions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| r["id"].as_str().unwrap().to_owned())
                    .find(|id| !seen.contains(id));
                if let Some(id) = new {
                    break id;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "round {round}: {list}"
                );
            };
            seen.insert(id.clone());
            let turn: Vec<Value> =
                Sse::open(&server, &format!("/api/v1/sessions/{id}/events"), None)
                    .until_turn_end()
                    .into_iter()
                    .map(|(_, e)| e)
                    .collect();
            assert!(
                texts(&turn).contains("Created answer."),
                "round {round}: {turn:?}"
            );
            assert_eq!(created.join().unwrap().status, 201, "round {round}");
        });
    }
}
