//! `keel run --server URL` (docs/serve.md, "keel run --server"): the real `keel run` as a
//! client of a real `keel serve` on a loopback port, the model mocked. Its output and exit
//! code against a local `keel run` of the same script; its `--json` lines against the log
//! the server stores and against what a second client watching the session's stream sees;
//! Ctrl-C cancelling the turn on the server; the errors (a wrong token, no token, no server,
//! the flags a run through a server refuses).

use crate::client::{Server, Sse, listed};
use crate::support::{Env, HANG_GUARD, Mock, Output, load_consistent, run, spawn};
use serde_json::{Value, json};
use std::process::Command;
use std::time::{Duration, Instant};

const SCRIPT: &str = r#"
responses:
  - match: { last_user_contains: "read the notes" }
    text: "Let me read the file."
    tool_calls:
      - { name: read, arguments: { path: notes.txt } }
  - match: { last_user_contains: "read the notes" }
    text: "The notes say hello."
  - match: { last_user_contains: "read slowly" }
    tool_calls:
      - { name: read, arguments: { path: notes.txt } }
  - match: { last_user_contains: "read slowly" }
    behaviour: stall
    stall_ms: 1500
    text: "The notes say hello, slowly."
  - match: { last_user_contains: "what is this" }
    text: "A pixel."
  - match: { last_user_contains: "run the check" }
    tool_calls:
      - { id: b1, name: bash, arguments: { command: "echo checked-by-keel" } }
  - match: { last_user_contains: "run the check" }
    text: "Checked."
  - match: { last_user_contains: "take forever" }
    behaviour: stall
    text: "I am going to take a very long time over this answer, and it never arrives."
"#;

/// `keel --cwd WS SUBCOMMAND…` as a client of the test's server: its `$KEEL_HOME` and nothing of
/// the environment that would configure a model or name another server.
pub(crate) fn client(env: &Env, words: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_keel"));
    for var in [
        "DEEPSEEK_BASE_URL",
        "DEEPSEEK_API_KEY",
        "KEEL_HOME",
        "KEEL_SERVE_TOKEN",
        "RUST_LOG",
        "DSH_TOOLS_MODE",
        "TMUX",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("KEEL_HOME", &env.home)
        .env("HOME", env.root())
        .env("TMPDIR", env.root().join("tmp"))
        .arg("--cwd")
        .arg(&env.ws)
        .args(words);
    cmd
}

/// `keel --cwd WS run --server URL ARGS…` ([`client`]), stdin closed.
pub(crate) fn remote(env: &Env, url: &str, args: &[&str]) -> Command {
    let mut cmd = client(env, &["run", "--server", url]);
    cmd.args(args).stdin(std::process::Stdio::null());
    cmd
}

/// The server's address without the token (`http://127.0.0.1:PORT`).
fn bare(server: &Server) -> String {
    format!("http://{}", server.host())
}

/// Stderr without the line naming where the session is (its id and file, or its server).
fn progress_lines(out: &Output) -> Vec<String> {
    out.stderr
        .lines()
        .map(|l| match l.split_once(" — session ") {
            Some((before, _)) => before.to_owned(),
            None => l.to_owned(),
        })
        .collect()
}

fn lines_as_json(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The id of the one session the server lists, once it is listed (polled; hang guard).
fn the_session(server: &Server) -> String {
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        let list = server.call("GET", "/api/v1/sessions", None).json();
        // Hosted, not only on disk: a session being created is listed from its file (as
        // `stored`) an instant before the server hosts it, and a stream opened then is the
        // stored log's, which ends.
        if let Some([one]) = list["sessions"].as_array().map(Vec::as_slice)
            && one["status"] != "stored"
        {
            return one["id"].as_str().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "hang guard: no session: {list}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Events with what differs between two runs of one script taken out: times, ids, the
/// session's own id and paths.
fn comparable(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_run_through_the_server_prints_what_a_local_run_prints() {
    // The same script run locally and through a server.
    let local_env = Env::new();
    local_env.write("notes.txt", "hello\n");
    let local_mock = Mock::start(SCRIPT);
    let local = run(local_env
        .keel(&local_mock.base_url())
        .args(["run", "read the notes"]));
    assert_eq!(local.code, Some(0), "{}", local.stderr);

    let env = Env::new();
    env.write("notes.txt", "hello\n");
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    // The URL as the server printed it (with its token).
    let out = run(&mut remote(&env, &server.url, &["read the notes"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "The notes say hello.\n");
    assert_eq!(out.stdout, local.stdout, "the same answer on stdout");
    assert_eq!(
        progress_lines(&out),
        progress_lines(&local),
        "the same progress on stderr\nremote:\n{}\nlocal:\n{}",
        out.stderr,
        local.stderr
    );
    let id = the_session(&server);
    assert!(
        out.stderr
            .contains(&format!("— session {id} (on {})", bare(&server))),
        "{}",
        out.stderr
    );
    // The session stays on the server, and ran in the client's directory.
    let row = listed(&server, &id);
    assert!(
        matches!(row["status"].as_str(), Some("idle" | "running")),
        "{row}"
    );
    assert_eq!(row["cwd"], json!(env.ws), "{row}");

    // A turn that fails ends as a local run's does: exit 1. The script has no answer left
    // for this prompt; the token now comes from $KEEL_HOME/serve.json (the bare address).
    let failed = run(&mut remote(&env, &bare(&server), &["something else"]));
    assert_eq!(failed.code, Some(1), "{}", failed.stderr);
    assert!(
        failed.stderr.contains("ended: error INVALID_REQUEST"),
        "{}",
        failed.stderr
    );
    assert_eq!(failed.stdout, "");
    // And KEEL_SERVE_TOKEN is read when the URL has none (a home without serve.json).
    let elsewhere = tempfile::tempdir().unwrap();
    let with_env = run(remote(&env, &bare(&server), &["again"])
        .env("KEEL_HOME", elsewhere.path())
        .env("KEEL_SERVE_TOKEN", &server.token));
    assert_eq!(with_env.code, Some(1), "{}", with_env.stderr);
    assert!(
        with_env.stderr.contains("turn 1 ended"),
        "{}",
        with_env.stderr
    );
}

#[test]
fn json_through_the_server_is_the_servers_log_and_what_another_client_sees() {
    let env = Env::new();
    env.write("notes.txt", "hello\n");
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    let keel = spawn(&mut remote(&env, &server.url, &["--json", "read slowly"]));
    // A second client watches the session while the turn runs (its answer stalls 1.5 s).
    let id = the_session(&server);
    let mut watcher = Sse::open(&server, &format!("/api/v1/sessions/{id}/events"), None);
    let watched: Vec<Value> = watcher
        .until_turn_end()
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    let out = keel.wait();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines = lines_as_json(&out.stdout);
    let (header, events) = lines.split_first().expect("a header line");

    // The header and the events, exactly as the server stores them (up to the turn's end).
    let path = env.only_session();
    let text = std::fs::read_to_string(&path).unwrap();
    let stored_header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(header, &stored_header);
    assert_eq!(header["id"], id.as_str());
    let stored = load_consistent(&path);
    assert!(stored.len() >= events.len(), "{stored:?}");
    assert_eq!(
        events,
        &stored[..events.len()],
        "the server's log, event for event"
    );
    assert_eq!(events.last().unwrap()["type"], "turn/end");
    assert_eq!(
        events.last().unwrap()["data"]["reason"]["kind"],
        "completed"
    );
    assert_eq!(events, watched.as_slice(), "what the other client saw");
    assert!(
        events.iter().any(|e| e["type"] == "assistant/message"
            && e["data"]["message"]["content"]
                .to_string()
                .contains("slowly")),
        "the answer is in the stream"
    );

    // A local `keel run --json` of the same script prints the same events (times and ids
    // apart), after its own header.
    let local_env = Env::new();
    local_env.write("notes.txt", "hello\n");
    let local_mock = Mock::start(SCRIPT);
    let local = run(local_env
        .keel(&local_mock.base_url())
        .args(["run", "--json", "read slowly"]));
    assert_eq!(local.code, Some(0), "{}", local.stderr);
    let local_lines = lines_as_json(&local.stdout);
    assert_eq!(local_lines[0]["type"], "session");
    assert_eq!(header["type"], "session");
    assert_eq!(comparable(&local_lines[1..]), comparable(events));
}

#[test]
fn ctrl_c_cancels_the_turn_on_the_server() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    let keel = spawn(&mut remote(&env, &server.url, &["take forever"]));
    // The model stalls mid-answer (polled in the log: hang guard); a watcher sees the turn.
    let id = the_session(&server);
    env.wait_for_log("a streamed text delta", |events| {
        events
            .iter()
            .any(|e| e["type"] == "assistant/chunk" && e["data"]["chunk"]["type"] == "text-delta")
    });
    let events = format!("/api/v1/sessions/{id}/events");
    let mut watcher = Sse::open(&server, &events, None);
    watcher.until("turn/start");
    assert_eq!(listed(&server, &id)["status"], "running");
    keel.signal(libc::SIGINT);
    let out = keel.wait();
    // As a local run interrupted by Ctrl-C: exit 1, the turn aborted.
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(out.stderr.contains("cancelling the turn"), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("ended: aborted (cancelled by the user)"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stdout, "", "no answer");
    // The server cancelled it: the log has the aborted turn; the session stays hosted.
    let end = watcher.until_turn_end().pop().unwrap().1;
    assert_eq!(
        end["data"]["reason"],
        json!({"kind": "aborted", "reason": "cancelled by the user"})
    );
    let row = listed(&server, &id);
    assert!(
        matches!(row["status"].as_str(), Some("idle" | "running")),
        "{row}"
    );
}

#[test]
fn a_wrong_token_no_token_no_server_and_local_flags_are_clear_errors() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    let address = bare(&server);

    // A wrong token: the server's 401, named, exit 2; no session created.
    let out = run(&mut remote(
        &env,
        &format!("{address}/?token=n0t-th3-t0ken"),
        &["hi"],
    ));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "the keel server at {address} answered 401 unauthorized"
        )),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("n0t-th3-t0ken"),
        "the token is not echoed: {}",
        out.stderr
    );
    let list = server.call("GET", "/api/v1/sessions", None).json();
    assert_eq!(list["sessions"], json!([]), "{list}");

    // No token anywhere: the URL has none, no KEEL_SERVE_TOKEN, serve.json names another
    // server (here: no serve.json at all).
    let elsewhere = tempfile::tempdir().unwrap();
    let out = run(remote(&env, &address, &["hi"]).env("KEEL_HOME", elsewhere.path()));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("no token for the keel server at {address}"))
            && out.stderr.contains("KEEL_SERVE_TOKEN"),
        "{}",
        out.stderr
    );

    // Nothing listening: the address named.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let nowhere = format!("http://127.0.0.1:{port}");
    let out = run(&mut remote(&env, &format!("{nowhere}/?token=t"), &["hi"]));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("cannot reach the keel server at {nowhere}")),
        "{}",
        out.stderr
    );

    // Flags of a local agent are refused, named.
    for (args, flag) in [
        (vec!["--script", "s.yaml", "hi"], "--script"),
        (vec!["--zstd", "hi"], "--zstd"),
        (vec!["--goal", "be done"], "--goal"),
        (vec!["--plan", "hi"], "--plan"),
        (vec!["--sandbox", "read-only", "hi"], "--sandbox"),
        (vec!["--approval", "auto", "hi"], "--approval"),
        (vec!["--trust-project", "hi"], "--trust-project"),
        (vec!["-c", "agent.max_steps=3", "hi"], "-c"),
    ] {
        let out = run(&mut remote(&env, &server.url, &args));
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(flag), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains("--server"), "{args:?}: {}", out.stderr);
    }
    let list = server.call("GET", "/api/v1/sessions", None).json();
    assert_eq!(list["sessions"], json!([]), "nothing was created: {list}");

    // An error answer of the server is named with its code and message: an image for a model
    // without vision (checked by the server; the session it was for stays, empty).
    std::fs::write(env.ws.join("a.png"), PNG).unwrap();
    let out = run(&mut remote(
        &env,
        &server.url,
        &["--image", "a.png", "what is this?"],
    ));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "the keel server at {address} answered 400 bad_request: "
        )) && out.stderr.contains("deepseek-v4-flash"),
        "{}",
        out.stderr
    );
}

/// A real 1×1 PNG.
const PNG: &[u8] = b"\x89\x50\x4e\x47\x0d\x0a\x1a\x0a\x00\x00\x00\x0d\x49\x48\x44\x52\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90\x77\x53\xde\x00\x00\x00\x0c\x49\x44\x41\x54\x78\x9c\x63\xf8\xcf\xc0\x00\x00\x03\x01\x01\x00\xc9\xfe\x92\xef\x00\x00\x00\x00\x49\x45\x4e\x44\xae\x42\x60\x82";

#[test]
fn an_image_goes_to_the_model_through_the_server() {
    let env = Env::new();
    std::fs::write(
        env.home.join("config.toml"),
        "[models.\"seeing-model\"]\nvision = true\n",
    )
    .unwrap();
    std::fs::write(env.ws.join("a.png"), PNG).unwrap();
    let mock = Mock::start(SCRIPT);
    let server = Server::start_with(&env, &mock, &["--model", "seeing-model"]);
    let out = run(&mut remote(
        &env,
        &server.url,
        &["--image", "a.png", "what is this?"],
    ));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "A pixel.\n");
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let user = crate::support::last_user_message(&requests[0]).to_string();
    use base64::Engine;
    let url = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(PNG)
    );
    assert!(
        user.contains(&url) && user.contains("what is this?"),
        "{user}"
    );
}

#[test]
fn an_approval_waits_for_another_client() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    // `bash` asks in a read-only sandbox under --approval ask.
    let server = Server::start_with(
        &env,
        &mock,
        &["--sandbox", "read-only", "--approval", "ask"],
    );
    let keel = spawn(&mut remote(&env, &server.url, &["run the check"]));
    let id = the_session(&server);
    let deadline = Instant::now() + HANG_GUARD;
    let request = loop {
        let r = server.call("GET", &format!("/api/v1/sessions/{id}/pending"), None);
        if let Some(first) = r.json()["requests"]
            .as_array()
            .and_then(|a| a.first().cloned())
        {
            break first;
        }
        assert!(Instant::now() < deadline, "hang guard: nothing asked");
        std::thread::sleep(Duration::from_millis(20));
    };
    let request_id = request["requestId"].as_str().unwrap();
    // The run does not answer it: another client does.
    let answered = server.call(
        "POST",
        &format!("/api/v1/sessions/{id}/approvals/{request_id}"),
        Some(&json!({"decision": "allow"})),
    );
    assert_eq!(answered.status, 200, "{}", answered.body);
    let out = keel.wait();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "Checked.\n");
    assert!(
        out.stderr.contains(&format!(
            "keel: bash waits for approval from another client of the server (request \
             {request_id}"
        )),
        "{}",
        out.stderr
    );
}
