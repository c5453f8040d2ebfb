//! `keel serve --private` (the Python SDK's server): no serve.json written or removed, and the
//! server stops cleanly when its stdin closes; and any server catches SIGTERM from the moment
//! it prints its URL.

use crate::support::{Env, HANG_GUARD, Mock};
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

/// Start `keel serve` with piped stdin; the child and its first stdout line.
fn start(env: &Env, mock: &Mock, extra: &[&str]) -> (Child, String) {
    let mut child = env
        .keel(&mock.base_url())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (child, line)
}

fn wait(child: &mut Child) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + HANG_GUARD;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "hang guard: keel serve did not stop"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_private_server_leaves_serve_json_alone_and_stops_when_its_stdin_closes() {
    let env = Env::new();
    let mock = Mock::start("responses:\n  - text: \"hi\"\n");
    let theirs = "{\"url\": \"http://127.0.0.1:7878/?token=theirs\", \"pid\": 1}\n";
    std::fs::write(env.home.join("serve.json"), theirs).unwrap();
    let (mut child, line) = start(&env, &mock, &["--private"]);
    assert!(line.starts_with("keel serve: http://127.0.0.1:"), "{line}");
    assert_eq!(
        std::fs::read_to_string(env.home.join("serve.json")).unwrap(),
        theirs
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "it serves while stdin is open"
    );
    drop(child.stdin.take());
    let status = wait(&mut child);
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert_eq!(
        std::fs::read_to_string(env.home.join("serve.json")).unwrap(),
        theirs
    );
}

#[test]
fn a_sigterm_right_after_the_url_stops_the_server_cleanly() {
    let env = Env::new();
    let mock = Mock::start("responses:\n  - text: \"hi\"\n");
    for _ in 0..3 {
        let (mut child, line) = start(&env, &mock, &[]);
        assert!(line.starts_with("keel serve: "), "{line}");
        // SAFETY: kill(2) on the child we spawned and have not reaped.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let status = wait(&mut child);
        assert_eq!(
            status.code(),
            Some(0),
            "killed instead of stopping: {status:?}"
        );
        assert!(!env.home.join("serve.json").exists());
    }
}
