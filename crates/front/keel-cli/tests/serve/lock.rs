//! One writer per session, across processes: the CLI refuses a session `keel serve` hosts,
//! naming the server's pid, and the server answers 409 `session_busy` for a session a `keel
//! resume` holds; readers (the listing, the log's stream, `keel sessions`, `keel fork`) are not
//! refused; a holder killed with SIGKILL blocks no one.

use crate::client::{Server, Sse, check_ids, listed, wait_idle};
use crate::support::{self, Env, HANG_GUARD, Mock};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const SCRIPT: &str = r#"
responses:
  - match: { last_user_contains: "first" }
    text: "First answer."
  - match: { last_user_contains: "take forever" }
    behaviour: stall
    text: "never arrives"
  - match: { last_user_contains: "after the kill" }
    text: "Answered after the kill."
  - match: { last_user_contains: "after the close" }
    text: "Answered after the close."
"#;

/// The sidecar lock file of a session file (keel_session::store::lock_path).
pub(crate) fn sidecar(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// The pid in `file`'s sidecar, once it is there and names `pid` (hang guard).
pub(crate) fn wait_holder(file: &Path, pid: u32) {
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        let held = std::fs::read_to_string(sidecar(file)).unwrap_or_default();
        if held.trim() == pid.to_string() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "hang guard: {} never held by {pid} (it says {held:?})",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn the_cli_refuses_a_session_the_server_holds_and_the_server_one_the_cli_holds() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    let server_pid = server.child.id();
    let id = server.create(&env.ws, "first question");
    let events = format!("/api/v1/sessions/{id}/events");
    Sse::open(&server, &events, None).until_turn_end();
    wait_idle(&server, &id);
    let file = env.only_session();
    wait_holder(&file, server_pid);
    let before = settled(&file);

    // The CLI is refused, naming the server's pid; nothing is written (no crash repair, no
    // prompt sent to the model).
    let busy = format!("session {id} is open in another keel process (pid {server_pid})");
    let asked = mock.requests().len();
    for args in [
        vec!["resume", id.as_str(), "a prompt from the CLI"],
        vec!["rewind", id.as_str(), "--undo"],
    ] {
        let out = support::run(env.keel(&mock.base_url()).args(&args));
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(&busy), "{args:?}: {}", out.stderr);
    }
    assert_eq!(
        mock.requests().len(),
        asked,
        "a refused resume asked the model"
    );
    assert_eq!(std::fs::read(&file).unwrap(), before, "a refused CLI wrote");

    // Readers are not refused: the CLI lists and forks it; the server still hosts it.
    let out = support::run(env.keel(&mock.base_url()).args(["sessions", "list"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains(&id), "{}", out.stdout);
    let out = support::run(env.keel(&mock.base_url()).args(["fork", &id]));
    assert_eq!(out.code, Some(0), "fork: {}", out.stderr);
    assert_eq!(listed(&server, &id)["status"], "idle");

    // Closed by the server, the session is the CLI's to open: a `keel resume` holds it (its
    // model stalls) and the server is refused with 409 naming the CLI's pid.
    let closed = server.call("POST", &format!("/api/v1/sessions/{id}/close"), None);
    assert_eq!(closed.json()["closed"], true, "{}", closed.body);
    assert!(!sidecar(&file).exists(), "the server released it");
    // Its stream, read to the end, then looked at again from there: nothing (the server
    // remembers where the unchanged file ends).
    let before = Sse::open(&server, &events, None).rest();
    let before_last = before.last().map(|(seq, _)| *seq);
    assert!(before_last.is_some(), "{before:?}");
    assert_eq!(Sse::open(&server, &events, before_last).rest(), vec![]);
    let cli = support::spawn(
        env.keel(&mock.base_url())
            .args(["resume", &id, "take forever"]),
    );
    wait_holder(&file, cli.pid() as u32);
    let refused = server.call(
        "POST",
        &format!("/api/v1/sessions/{id}/messages"),
        Some(&json!({"text": "after the kill"})),
    );
    assert_eq!(refused.status, 409, "{}", refused.body);
    let error = &refused.json()["error"];
    assert_eq!(error["code"], "session_busy", "{}", refused.body);
    assert_eq!(
        error["message"],
        format!(
            "session {id} is open in another keel process (pid {})",
            cli.pid()
        ),
    );
    assert_eq!(listed(&server, &id)["status"], "stored");
    // The server's stream of a session it does not host is a reader's: the log so far.
    let stored = Sse::open(&server, &events, None).rest();
    check_ids(&stored);

    // SIGKILL of the CLI mid-turn, once its request is with the model (which stalls): killed
    // before it was sent, the stalled answer would still be in the script, and the server's
    // next request (the unanswered "take forever" and "after the kill" merged into one user
    // message on the wire) would take it.
    let deadline = Instant::now() + HANG_GUARD;
    while !mock
        .requests()
        .iter()
        .any(|r| r.to_string().contains("take forever"))
    {
        assert!(Instant::now() < deadline, "hang guard: the CLI never asked");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The CLI wrote to the file since: looked at again from the same place, the stream
    // reads the log again and sends what the CLI added.
    let newer = Sse::open(&server, &events, before_last).rest();
    assert!(
        newer
            .iter()
            .any(|(_, e)| e["type"] == "user/message" && e.to_string().contains("take forever")),
        "{newer:?}"
    );
    // Its sidecar stays behind and blocks nobody.
    cli.signal(libc::SIGKILL);
    let out = cli.wait();
    assert_eq!(out.code, None, "killed: {out:?}");
    assert!(
        sidecar(&file).exists(),
        "a killed holder leaves its sidecar"
    );
    let sent = server.call(
        "POST",
        &format!("/api/v1/sessions/{id}/messages"),
        Some(&json!({"text": "after the kill"})),
    );
    assert_eq!(sent.status, 202, "{}", sent.body);
    let last = stored.last().map(|(seq, _)| *seq);
    let rest = Sse::open(&server, &events, last).until_where(|e| {
        e["type"] == "assistant/message" && e.to_string().contains("Answered after the kill.")
    });
    check_ids(&rest);
    wait_holder(&file, server_pid);

    // Closed again, the CLI resumes it and runs a turn to its end.
    wait_idle(&server, &id);
    let closed = server.call("POST", &format!("/api/v1/sessions/{id}/close"), None);
    assert_eq!(closed.json()["closed"], true, "{}", closed.body);
    let out = support::run(
        env.keel(&mock.base_url())
            .args(["resume", &id, "after the close"]),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout.contains("Answered after the close."),
        "{}",
        out.stdout
    );
    assert!(!sidecar(&file).exists(), "the CLI released it at exit");
    let events = support::load_consistent(&file);
    let answers = support::of_type(&events, "assistant/message");
    for said in [
        "First answer.",
        "Answered after the kill.",
        "Answered after the close.",
    ] {
        assert!(
            answers.iter().any(|e| e.to_string().contains(said)),
            "{said} lost: {answers:?}"
        );
    }
}

/// `s` as one shell word.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Run `cmd` in a terminal (a `tmux` pane of its own), its stderr to `dir/err.txt`; its exit
/// code and stderr. `None` without tmux (outside CI).
fn in_terminal(dir: &Path, cmd: &std::process::Command) -> Option<(String, String)> {
    let found = std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "tmux is needed (.ci/run installs it)"
        );
        return None;
    }
    let mut script = String::from("#!/bin/sh\n");
    for (k, v) in cmd.get_envs() {
        let k = k.to_str().unwrap();
        match v {
            Some(v) => script.push_str(&format!("export {k}={}\n", quote(v.to_str().unwrap()))),
            None => script.push_str(&format!("unset {k}\n")),
        }
    }
    script.push_str(&quote(cmd.get_program().to_str().unwrap()));
    for a in cmd.get_args() {
        script.push(' ');
        script.push_str(&quote(a.to_str().unwrap()));
    }
    script.push_str(" 2> err.txt\necho \"EXIT=$?\" > exit.tmp && mv exit.tmp exit.txt\n");
    std::fs::write(dir.join("run.sh"), script).unwrap();
    let socket = format!("keel-lock-test-{}", std::process::id());
    let status = std::process::Command::new("tmux")
        .args(["-L", &socket, "-f", "/dev/null", "new-session", "-d"])
        .args(["-x", "120", "-y", "40", "-c"])
        .arg(dir)
        .arg(format!("sh {}", dir.join("run.sh").display()))
        .env_remove("TMUX")
        .status()
        .unwrap();
    assert!(status.success(), "tmux new-session failed");
    let deadline = Instant::now() + HANG_GUARD;
    let exit = loop {
        if let Ok(text) = std::fs::read_to_string(dir.join("exit.txt")) {
            break text.trim().to_owned();
        }
        if Instant::now() >= deadline {
            let _ = std::process::Command::new("tmux")
                .args(["-L", &socket, "kill-server"])
                .status();
            panic!("hang guard: keel did not exit in the terminal");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // The pane is gone with its shell; a server left over is not.
    let _ = std::process::Command::new("tmux")
        .args(["-L", &socket, "kill-server"])
        .env_remove("TMUX")
        .stderr(std::process::Stdio::null())
        .status();
    Some((exit, std::fs::read_to_string(dir.join("err.txt")).unwrap()))
}

/// The bytes of `file` once they stop changing: the server may still append the end of a turn
/// (its checkpoint, its title) after a client has seen `turn/end`.
fn settled(file: &Path) -> Vec<u8> {
    let deadline = Instant::now() + HANG_GUARD;
    let mut last = std::fs::read(file).unwrap();
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = std::fs::read(file).unwrap();
        if now == last {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "hang guard: {} kept changing",
            file.display()
        );
        last = now;
    }
}

#[test]
fn the_terminal_ui_refuses_a_session_the_server_holds() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    let server_pid = server.child.id();
    let id = server.create(&env.ws, "first question");
    Sse::open(&server, &format!("/api/v1/sessions/{id}/events"), None).until_turn_end();
    let file = env.only_session();
    wait_holder(&file, server_pid);
    let before = settled(&file);
    let mut cmd = env.keel(&mock.base_url());
    cmd.args(["resume", &id]);
    let Some((exit, stderr)) = in_terminal(env.root(), &cmd) else {
        return;
    };
    assert_eq!(exit, "EXIT=2", "{stderr}");
    assert!(
        stderr.contains(&format!(
            "session {id} is open in another keel process (pid {server_pid})"
        )),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(&file).unwrap(),
        before,
        "the refused UI wrote"
    );
    assert_eq!(listed(&server, &id)["status"], "idle");
}
