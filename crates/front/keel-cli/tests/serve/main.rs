//! `keel serve` end to end: the real binary on a loopback port with the loopback mock model,
//! driven by a small HTTP/1.1 client written here ([`client`]): sessions created and prompted
//! over the API, their events read as Server-Sent Events by two clients, by a client that
//! reconnects mid-turn with `Last-Event-ID` and by one that stops reading; a turn steered and
//! cancelled; a server killed mid-turn and its sessions resumed by the next; 50 sessions at
//! once; 1,000 idle connections; the security checks (token, `Host`, `Origin`) and the JSON
//! errors. Only the model is mocked.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../support/mod.rs"]
mod support;

mod approvals;
mod attach;
mod client;
mod crash;
mod lock;
mod private;
mod remote;
mod routes;
mod schemathesis;
mod tls;
mod web_app;

use client::{
    Server, Sse, check_ids, connect, listed, receive_buffer, request, seq_types, wait_idle,
};
use serde_json::{Value, json};
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;
use support::{Env, HANG_GUARD, Mock};

const SCRIPT: &str = r#"
responses:
  - match: { last_user_contains: "read the notes" }
    text: "Let me read the file."
    tool_calls:
      - { name: read, arguments: { path: notes.txt } }
  - match: { last_user_contains: "read the notes" }
    text: "The notes say hello."
  - match: { last_user_contains: "second" }
    text: "Second answer."
  - match: { last_user_contains: "take forever" }
    behaviour: stall
    text: "never arrives"
  - match: { last_user_contains: "take forever" }
    text: "Done waiting."
"#;

#[test]
fn sessions_run_and_stream_over_the_api() {
    let env = Env::new();
    env.write("notes.txt", "hello\n");
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);

    // serve.json: the same URL and token, this pid, the owner's only.
    let state = env.home.join("serve.json");
    let meta = std::fs::metadata(&state).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(saved["url"], server.url.as_str());
    assert_eq!(saved["token"], server.token.as_str());
    assert_eq!(saved["pid"], server.child.id());

    // A session without a prompt; two clients watch it before its first turn.
    let created = server.call("POST", "/api/v1/sessions", Some(&json!({"cwd": env.ws})));
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.json()["id"].as_str().unwrap().to_owned();
    let events = format!("/api/v1/sessions/{id}/events");
    let mut first = Sse::open(&server, &events, None);
    let mut second = Sse::open(&server, &events, None);
    let sent = server.call(
        "POST",
        &format!("/api/v1/sessions/{id}/messages"),
        Some(&json!({"text": "read the notes", "delivery": "queue"})),
    );
    assert_eq!(sent.status, 202, "{}", sent.body);
    let seen = first.until_turn_end();
    check_ids(&seen);
    assert_eq!(seen[0].0, 0, "from the log's first event");
    let types: Vec<&str> = seen
        .iter()
        .map(|(_, e)| e["type"].as_str().unwrap())
        .collect();
    for t in [
        "turn/start",
        "tool/call",
        "tool/result",
        "assistant/message",
        "turn/end",
    ] {
        assert!(types.contains(&t), "{t} in {types:?}");
    }
    assert_eq!(
        second.until_turn_end(),
        seen,
        "two clients see the same events"
    );

    // A reconnect mid-turn continues after the last event received: nothing lost or repeated.
    let mid = seen
        .iter()
        .find(|(_, e)| e["type"] == "tool/call")
        .map(|(id, _)| *id)
        .unwrap();
    let mut again = Sse::open(&server, &events, Some(mid));
    let rest = again.until_turn_end();
    let expected: Vec<(u64, Value)> = seen.iter().filter(|(id, _)| *id > mid).cloned().collect();
    assert_eq!(rest, expected);
    // `?after=` does the same.
    let mut after = Sse::open(&server, &format!("{events}?after={mid}"), None);
    assert_eq!(after.until_turn_end(), expected);

    // A session created with a prompt (and a model of its own) runs it; its stream has the
    // whole turn.
    let created = server.call(
        "POST",
        "/api/v1/sessions",
        Some(&json!({"cwd": env.ws, "prompt": "second question", "model": "deepseek-reasoner"})),
    );
    assert_eq!(created.status, 201, "{}", created.body);
    let other = created.json()["id"].as_str().unwrap().to_owned();
    let turn =
        Sse::open(&server, &format!("/api/v1/sessions/{other}/events"), None).until_turn_end();
    check_ids(&turn);
    assert!(turn.iter().any(|(_, e)| e["type"] == "assistant/message"));
    let asked = mock.requests();
    assert_eq!(asked.last().unwrap()["model"], "deepseek-reasoner");
    assert_ne!(
        asked[0]["model"], "deepseek-reasoner",
        "the other session keeps the default"
    );

    // Both are listed, hosted live; cancelling an idle session cancels nothing.
    let list = server.call("GET", "/api/v1/sessions", None);
    assert_eq!(list.status, 200, "{}", list.body);
    let sessions = list.json()["sessions"].as_array().unwrap().clone();
    for want in [&id, &other] {
        let row = sessions
            .iter()
            .find(|s| s["id"] == want.as_str())
            .unwrap_or_else(|| panic!("{want} not listed: {sessions:?}"));
        assert!(
            matches!(row["status"].as_str(), Some("idle" | "running")),
            "{row}"
        );
        assert!(
            row.get("updatedAt").is_some() && row.get("title").is_some(),
            "{row}"
        );
    }
    let cancel = server.call("POST", &format!("/api/v1/sessions/{id}/cancel"), None);
    assert_eq!(cancel.status, 200, "{}", cancel.body);

    // The OpenAPI document names the routes.
    let doc = server.call("GET", "/api/v1/openapi.json", None).json();
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["paths"]["/api/v1/sessions/{id}/events"]["get"].is_object());
}

#[test]
fn a_running_turn_is_watched_live_and_cancelled() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    let id = server.create(&env.ws, "take forever");
    let events = format!("/api/v1/sessions/{id}/events");

    // Two clients while the turn runs (the model stalls); one leaves mid-turn.
    let mut watcher = Sse::open(&server, &events, None);
    let mut leaver = Sse::open(&server, &events, None);
    let started = watcher.until("turn/start");
    let left = leaver.until("turn/start");
    assert_eq!(left, started);
    drop(leaver);
    let list = server.call("GET", "/api/v1/sessions", None).json();
    let row = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id.as_str())
        .cloned()
        .unwrap();
    assert_eq!(row["status"], "running", "{row}");

    // A steer goes into the running turn.
    let steered = server.call(
        "POST",
        &format!("/api/v1/sessions/{id}/messages"),
        Some(&json!({"text": "and be quick", "delivery": "steer"})),
    );
    assert_eq!(steered.status, 202, "{}", steered.body);
    assert_eq!(steered.json()["delivery"], "steer");

    // A start beyond the log and a bad Last-Event-ID are JSON 400s.
    let r = server.call("GET", &format!("{events}?after=100000"), None);
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("no event 100000"), "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "beyond_log", "{}", r.body);
    let auth = server.auth();
    let host = server.host();
    let r = request(
        server.addr,
        "GET",
        &events,
        &[
            ("Host", &host),
            ("Authorization", &auth),
            ("Last-Event-ID", "x"),
        ],
        None,
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.error_code(), "bad_request");

    // Cancelled: the turn ends; the watcher sees it live, the returning client exactly the rest.
    let cancel = server.call("POST", &format!("/api/v1/sessions/{id}/cancel"), None);
    assert_eq!(cancel.status, 200, "{}", cancel.body);
    assert_eq!(cancel.json()["cancelled"], true);
    let mut all = started.clone();
    all.extend(watcher.until_turn_end());
    check_ids(&all);
    let last = left.last().unwrap().0;
    let mut back = Sse::open(&server, &events, Some(last));
    let mut joined = left.clone();
    joined.extend(back.until_turn_end());
    assert_eq!(joined, all, "a reconnect loses and repeats nothing");

    // Closed: no longer hosted, still stored.
    let closed = server.call("POST", &format!("/api/v1/sessions/{id}/close"), None);
    assert_eq!(closed.status, 200, "{}", closed.body);
    assert_eq!(closed.json()["closed"], true);
    assert_eq!(listed(&server, &id)["status"], "stored");
    let again = server.call("POST", &format!("/api/v1/sessions/{id}/close"), None);
    assert_eq!(again.json()["closed"], false);
}

#[test]
fn a_killed_server_leaves_sessions_that_the_next_one_streams_and_resumes() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let mut server = Server::start(&env, &mock);
    let id = server.create(&env.ws, "read the notes");
    let events = format!("/api/v1/sessions/{id}/events");
    let mut watch = Sse::open(&server, &events, None);
    let mut seen = watch.until_turn_end();
    // The first turn is on disk; a second one runs (the model stalls) when the server dies.
    env.wait_for_log("the first turn's end", |evs| {
        evs.iter().any(|e| e["type"] == "turn/end")
    });
    let sent = server.call(
        "POST",
        &format!("/api/v1/sessions/{id}/messages"),
        Some(&json!({"text": "take forever"})),
    );
    assert_eq!(sent.status, 202, "{}", sent.body);
    seen.extend(watch.until("turn/start"));
    // The stalled request reached the model (a killed server's next must not find it unused).
    let deadline = std::time::Instant::now() + HANG_GUARD;
    while mock.requests().len() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "hang guard: no third request"
        );
        std::thread::sleep(Duration::from_millis(10));
    }

    // SIGKILL mid-turn.
    // SAFETY: kill(2) on the child we spawned and have not reaped.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGKILL) };
    let _ = server.child.wait();
    drop(server);
    // Its session's lock file stays behind, and blocks no one (the OS released the lock).
    let file = env.only_session();
    assert!(lock::sidecar(&file).exists());

    // The next server lists the session as stored and streams what was committed, then ends.
    let server = Server::start(&env, &mock);
    assert_eq!(listed(&server, &id)["status"], "stored");
    let stored = Sse::open(&server, &events, None).rest();
    check_ids(&stored);
    assert!(
        stored.iter().any(|(_, e)| e["type"] == "turn/end"),
        "the first turn survives: {stored:?}"
    );
    let n = stored.len().min(seen.len());
    assert_eq!(seq_types(&stored[..n]), seq_types(&seen[..n]));

    // A message resumes it (crash repair) and runs a turn, streamed live from where the stored
    // log ended.
    let sent = server.call(
        "POST",
        &format!("/api/v1/sessions/{id}/messages"),
        Some(&json!({"text": "second question", "delivery": "steer"})),
    );
    assert_eq!(sent.status, 202, "{}", sent.body);
    assert_eq!(
        sent.json()["delivery"],
        "queue",
        "no turn ran to steer into"
    );
    let last = stored.last().unwrap().0;
    let rest = Sse::open(&server, &events, Some(last)).until_where(|e| {
        e["type"] == "assistant/message" && e.to_string().contains("Second answer.")
    });
    assert_eq!(rest[0].0, last + 1);
    check_ids(&rest);
    lock::wait_holder(&file, server.child.id());
    assert!(matches!(
        listed(&server, &id)["status"].as_str(),
        Some("running" | "idle")
    ));
}

#[test]
fn sigterm_interrupts_running_turns_and_exits() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let mut server = Server::start(&env, &mock);
    let id = server.create(&env.ws, "take forever");
    let mut watch = Sse::open(&server, &format!("/api/v1/sessions/{id}/events"), None);
    watch.until("turn/start");
    let deadline = std::time::Instant::now() + HANG_GUARD;
    while mock.requests().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "hang guard: no request"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The model stalls; SIGTERM ends the turn (as Ctrl-C would) and the server exits cleanly,
    // with the watcher still connected.
    let status = server.stop();
    assert_eq!(status.code(), Some(0), "{status:?}");
    let events = support::load_consistent(&env.only_session());
    let reasons = support::turn_end_reasons(&events);
    assert_eq!(reasons.len(), 1, "the turn ended on disk: {events:?}");
    assert_eq!(reasons[0]["kind"], "aborted", "{reasons:?}");
    assert!(!env.home.join("serve.json").exists());
}

#[test]
fn fifty_sessions_run_at_once_in_one_server() {
    const N: usize = 50;
    let mut script = String::from("responses:\n");
    for i in 0..N {
        script.push_str(&format!(
            "  - match: {{ last_user_contains: \"task {i}.\" }}\n    text: \"answer {i}.\"\n"
        ));
    }
    let env = Env::new();
    let mock = Mock::start(&script);
    let server = Server::start(&env, &mock);
    // Created at once, from N clients.
    let ids: Vec<String> = std::thread::scope(|scope| {
        let created: Vec<_> = (0..N)
            .map(|i| {
                let server = &server;
                let ws = &env.ws;
                scope.spawn(move || {
                    let created = server.call(
                        "POST",
                        "/api/v1/sessions",
                        Some(&json!({"cwd": ws, "prompt": format!("task {i}.")})),
                    );
                    assert_eq!(created.status, 201, "{}", created.body);
                    created.json()["id"].as_str().unwrap().to_owned()
                })
            })
            .collect();
        created.into_iter().map(|t| t.join().unwrap()).collect()
    });
    for (i, id) in ids.iter().enumerate() {
        let turn =
            Sse::open(&server, &format!("/api/v1/sessions/{id}/events"), None).until_turn_end();
        check_ids(&turn);
        let answer = turn
            .iter()
            .find(|(_, e)| e["type"] == "assistant/message")
            .unwrap_or_else(|| panic!("session {i}: no answer: {turn:?}"));
        assert!(
            answer.1.to_string().contains(&format!("answer {i}.")),
            "{}",
            answer.1
        );
    }
    let list = server.call("GET", "/api/v1/sessions", None).json();
    assert_eq!(list["sessions"].as_array().unwrap().len(), N);
    for id in &ids {
        wait_idle(&server, id);
    }
    assert_eq!(mock.requests().len(), N);
    // The server holds each of them (one writer per session).
    let files = env.session_files();
    assert_eq!(files.len(), N);
    for file in &files {
        lock::wait_holder(file, server.child.id());
    }
}

#[test]
fn a_thousand_idle_connections_leave_the_server_serving() {
    let env = Env::new();
    env.write("notes.txt", "hello\n");
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    // This process needs the descriptors too.
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit on a struct we own.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = limit.rlim_max.min(65_536);
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
    }
    let idle: Vec<TcpStream> = (0..1000).map(|_| connect(server.addr)).collect();
    // Half of them sent half a request.
    for mut c in idle.iter().step_by(2) {
        c.write_all(b"GET /api/v1/sessions HTTP/1.1\r\nHost: ")
            .unwrap();
    }
    let list = server.call("GET", "/api/v1/sessions", None);
    assert_eq!(list.status, 200, "{}", list.body);
    let id = server.create(&env.ws, "read the notes");
    let turn = Sse::open(&server, &format!("/api/v1/sessions/{id}/events"), None).until_turn_end();
    assert!(turn.iter().any(|(_, e)| e["type"] == "assistant/message"));
    drop(idle);
}

#[test]
fn a_client_that_stops_reading_holds_up_nobody() {
    // A long answer streamed in small pieces: tens of thousands of events, megabytes of SSE.
    let text = "0123456789abcdef".repeat(60_000);
    let script = format!(
        "responses:\n  - match: {{ last_user_contains: \"long answer\" }}\n    chunk_size: 32\n    text: \"{text}\"\n"
    );
    let env = Env::new();
    let mock = Mock::start(&script);
    let server = Server::start(&env, &mock);
    let created = server.call("POST", "/api/v1/sessions", Some(&json!({"cwd": env.ws})));
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.json()["id"].as_str().unwrap().to_owned();
    let events = format!("/api/v1/sessions/{id}/events");

    // One client stops reading at once, with a tiny receive buffer; another reads.
    let mut stuck = Sse::open(&server, &events, None);
    receive_buffer(&stuck, 4096);
    let mut reader = Sse::open(&server, &events, None);
    let sent = server.call(
        "POST",
        &format!("/api/v1/sessions/{id}/messages"),
        Some(&json!({"text": "long answer"})),
    );
    assert_eq!(sent.status, 202, "{}", sent.body);

    // The turn ends and the reading client sees all of it while the other reads nothing.
    let all = reader.until_turn_end();
    check_ids(&all);
    assert!(all.len() > 10_000, "{} events", all.len());
    let answer = all
        .iter()
        .find(|(_, e)| e["type"] == "assistant/message")
        .unwrap();
    assert!(answer.1.to_string().contains(&text[..1000]));
    wait_idle(&server, &id);

    // The slow client, reading at last, gets every event in order: nothing lost or repeated.
    receive_buffer(&stuck, 4 << 20);
    let late = stuck.until_turn_end();
    assert_eq!(late.len(), all.len());
    assert_eq!(seq_types(&late), seq_types(&all));
}

#[test]
fn every_request_is_checked() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    let host = server.host();
    let auth = server.auth();

    // No token: 401.
    let r = request(
        server.addr,
        "GET",
        "/api/v1/sessions",
        &[("Host", &host)],
        None,
    );
    assert_eq!(r.status, 401, "{}", r.body);
    assert_eq!(r.error_code(), "unauthorized");
    let wrong = format!("Bearer {}", "0".repeat(64));
    let r = request(
        server.addr,
        "GET",
        "/api/v1/sessions",
        &[("Host", &host), ("Authorization", &wrong)],
        None,
    );
    assert_eq!(r.status, 401);

    // The token but a foreign Host (DNS rebinding): 403.
    let evil = format!("evil.example:{}", server.addr.port());
    let r = request(
        server.addr,
        "GET",
        "/api/v1/sessions",
        &[("Host", &evil), ("Authorization", &auth)],
        None,
    );
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(r.error_code(), "forbidden_host");

    // A cross-origin POST: 403; the server's own origin passes.
    let body = json!({"cwd": env.ws});
    let r = request(
        server.addr,
        "POST",
        "/api/v1/sessions",
        &[
            ("Host", &host),
            ("Authorization", &auth),
            ("Origin", "http://evil.example"),
        ],
        Some(&body),
    );
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(r.error_code(), "forbidden_origin");
    let own = format!("http://localhost:{}", server.addr.port());
    let r = request(
        server.addr,
        "GET",
        "/api/v1/sessions",
        &[("Host", &host), ("Authorization", &auth), ("Origin", &own)],
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);

    // The printed URL sets the cookie, which then is the token.
    let path = format!("/?token={}", server.token);
    let r = request(server.addr, "GET", &path, &[("Host", &host)], None);
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location"), Some("/"));
    let cookie = r.header("set-cookie").unwrap().to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap();
    let r = request(
        server.addr,
        "GET",
        "/api/v1/sessions",
        &[("Host", &host), ("Cookie", pair)],
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);

    // An unknown session: a JSON 404, for its events, messages and cancel alike.
    for (method, path, body) in [
        ("GET", "/api/v1/sessions/no-such-session/events", None),
        (
            "POST",
            "/api/v1/sessions/no-such-session/messages",
            Some(json!({"text": "hi"})),
        ),
        ("POST", "/api/v1/sessions/no-such-session/cancel", None),
        ("POST", "/api/v1/sessions/no-such-session/close", None),
        ("GET", "/api/v1/nothing-here", None),
    ] {
        let r = server.call(method, path, body.as_ref());
        assert_eq!(r.status, 404, "{method} {path}: {}", r.body);
        assert_eq!(r.error_code(), "not_found");
    }

    // A cwd that does not exist, one that is a file, and a malformed body: 400 naming it.
    let missing = env.root().join("no-such-dir");
    let r = server.call("POST", "/api/v1/sessions", Some(&json!({"cwd": missing})));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no-such-dir"),
        "{}",
        r.body
    );
    env.write("file.txt", "x");
    let r = server.call(
        "POST",
        "/api/v1/sessions",
        Some(&json!({"cwd": env.ws.join("file.txt")})),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("not a directory"), "{}", r.body);
    let r = server.call(
        "POST",
        "/api/v1/sessions",
        Some(&json!({"prompt": "no cwd"})),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.error_code(), "bad_request");

    // A body over the limit: 413.
    let big = json!({"cwd": "x".repeat(1 << 20)});
    let r = server.call("POST", "/api/v1/sessions", Some(&big));
    assert_eq!(r.status, 413, "{}", r.body);
    assert_eq!(r.error_code(), "bad_body");

    // SIGTERM: a clean exit, and serve.json is gone.
    let mut server = server;
    let status = server.stop();
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(!env.home.join("serve.json").exists());
}

#[test]
fn trusted_hosts_are_accepted_as_the_server() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let server = Server::start_with(&env, &mock, &["--trusted-host", "Keel.Test"]);
    let port = server.addr.port();
    let auth = server.auth();
    let (trusted, origin, other) = (
        format!("keel.test:{port}"),
        format!("http://keel.test:{port}"),
        format!("evil.keel.test:{port}"),
    );
    let get = |headers: &[(&str, &str)]| {
        request(server.addr, "GET", "/api/v1/sessions", headers, None).status
    };
    assert_eq!(get(&[("Host", &trusted), ("Authorization", &auth)]), 200);
    let host = server.host();
    assert_eq!(
        get(&[
            ("Host", &host),
            ("Authorization", &auth),
            ("Origin", &origin)
        ]),
        200
    );
    assert_eq!(get(&[("Host", &other), ("Authorization", &auth)]), 403);
    assert_eq!(
        get(&[("Host", &trusted)]),
        401,
        "a trusted host still needs the token"
    );

    // Not a host name: refused before anything is printed.
    let out = support::run(env.keel(&mock.base_url()).args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--trusted-host",
        "evil.example:80",
    ]));
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains("not a host name"), "{}", out.stderr);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
}

#[test]
fn wildcard_and_remote_addresses_are_refused() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let out = support::run(
        env.keel(&mock.base_url())
            .args(["serve", "--listen", "0.0.0.0:0"]),
    );
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains("wildcard"), "{}", out.stderr);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(!env.home.join("serve.json").exists());

    // An address beyond loopback (TEST-NET-1, on no interface here): refused without TLS ...
    let out = support::run(
        env.keel(&mock.base_url())
            .args(["serve", "--listen", "192.0.2.1:0"]),
    );
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains("not a loopback address") && out.stderr.contains("--tls-cert"),
        "{}",
        out.stderr
    );
    // ... and tried with --insecure-no-tls (the bind itself fails: no interface has it).
    let out = support::run(env.keel(&mock.base_url()).args([
        "serve",
        "--listen",
        "192.0.2.1:0",
        "--insecure-no-tls",
    ]));
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains("cannot listen on 192.0.2.1"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "{}", out.stdout);
}
