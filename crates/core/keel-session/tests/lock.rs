//! One writer per session: a session another process writes is refused naming its pid, readers
//! are not, and a holder's death (SIGKILL) frees it. The other process is this test binary run
//! again as `child_holds_the_session` with `KEEL_LOCK_TEST_HOLD` set.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::B;
use keel_protocol::*;
use keel_session::store::lock_path;
use keel_session::*;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const HOLD: &str = "KEEL_LOCK_TEST_HOLD";

/// A session with one full turn, stored under `home`; its file.
fn stored(home: &Path) -> PathBuf {
    let mut b = B::new();
    b.full_turn(1);
    let store = Store::new(home.to_owned());
    let ps = PersistentSession::create(
        &store,
        Path::new("/home/user/project"),
        b.s,
        WriterOptions::default(),
    )
    .unwrap();
    let path = ps.writer().path().to_owned();
    ps.close().unwrap();
    path
}

/// Not a test of its own: in the child, hold the session named by `KEEL_LOCK_TEST_HOLD` open
/// for writing, say so on stdout and wait to be killed.
#[test]
fn child_holds_the_session() {
    let Some(path) = std::env::var_os(HOLD) else {
        return;
    };
    let (mut ps, _, _) = PersistentSession::resume(Path::new(&path), WriterOptions::default())
        .expect("the child opens the session");
    ps.push(EventBody::TurnStart(TurnStart { turn: TurnNo(2) }))
        .unwrap();
    ps.flush().unwrap();
    println!("HOLDING {}", std::process::id());
    std::thread::sleep(std::time::Duration::from_secs(120));
}

/// Start the child holding `path`; returns once it holds it.
fn holder(path: &Path) -> Child {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_holds_the_session", "--nocapture"])
        .args(["--test-threads", "1"])
        .env(HOLD, path)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = std::io::BufReader::new(child.stdout.take().unwrap());
    for line in out.lines() {
        let line = line.unwrap();
        if line.contains("HOLDING") {
            return child;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the child never held the session");
}

#[test]
fn a_session_another_process_writes_is_refused_naming_its_pid_until_it_dies() {
    let home = tempfile::tempdir().unwrap();
    let path = stored(home.path());
    let id = path
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let mut child = holder(&path);
    let pid = child.id();

    let e = PersistentSession::resume(&path, WriterOptions::default()).unwrap_err();
    let said = e.to_string();
    assert_eq!(
        said,
        format!("session {id} is open in another keel process (pid {pid})")
    );
    assert!(
        matches!(&e, PersistentError::Store(StoreError::Busy { pid: Some(p), .. }) if *p == pid),
        "{e:?}"
    );
    let before = std::fs::read(&path).unwrap();
    // Refused before anything was touched: the holder's file is as it wrote it.
    assert!(PersistentSession::reopen(&path, WriterOptions::default()).is_err());
    assert_eq!(std::fs::read(&path).unwrap(), before);
    // Readers are never blocked.
    let loaded = Store::load(&path).unwrap();
    assert!(!loaded.session.is_empty());
    let listed = Store::new(home.path().to_owned()).list(None);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, id);
    assert!(listed[0].problem.is_none(), "{:?}", listed[0].problem);

    // SIGKILL: the OS releases the lock; the sidecar it left blocks no one.
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(lock_path(&path).exists(), "the dead holder's sidecar stays");
    let (ps, _, repair) = PersistentSession::resume(&path, WriterOptions::default()).unwrap();
    // The child's open turn 2 was closed by crash repair: its events were kept.
    assert_eq!(repair.closed_turn, Some(TurnNo(2)));
    let sidecar = std::fs::read_to_string(lock_path(&path)).unwrap();
    assert_eq!(sidecar.trim(), std::process::id().to_string());
    drop(ps);
    assert!(!lock_path(&path).exists(), "released on drop");
}

#[test]
fn a_second_writer_in_this_process_is_refused_and_the_first_keeps_writing() {
    let home = tempfile::tempdir().unwrap();
    let path = stored(home.path());
    let (mut first, _, _) = PersistentSession::resume(&path, WriterOptions::default()).unwrap();
    let e = PersistentSession::resume(&path, WriterOptions::default()).unwrap_err();
    assert!(
        e.to_string().contains(&format!(
            "is already open for writing in this keel process (pid {})",
            std::process::id()
        )),
        "{e}"
    );
    // A fork writes a new session: not refused.
    let parent = first.session().clone();
    let child = parent
        .fork(Seq(parent.len()), SessionId("forked".into()))
        .unwrap();
    let store = Store::new(home.path().to_owned());
    let forked =
        PersistentSession::create(&store, Path::new("/p"), child, WriterOptions::default());
    assert!(forked.is_ok());
    first
        .push(EventBody::TurnStart(TurnStart { turn: TurnNo(2) }))
        .unwrap();
    first.flush().unwrap();
    let n = first.session().len();
    drop(first);
    let (again, _, _) = PersistentSession::resume(&path, WriterOptions::default()).unwrap();
    assert!(again.session().len() >= n);
}

#[test]
fn a_released_session_can_be_opened_again_and_the_released_writer_refuses_appends() {
    let home = tempfile::tempdir().unwrap();
    let path = stored(home.path());
    let (mut first, _, _) = PersistentSession::resume(&path, WriterOptions::default()).unwrap();
    first.release().unwrap();
    let (second, _, _) = PersistentSession::resume(&path, WriterOptions::default()).unwrap();
    first
        .push(EventBody::TurnStart(TurnStart { turn: TurnNo(2) }))
        .unwrap();
    assert!(matches!(first.flush(), Err(StoreError::WriterGone { .. })));
    drop(second);
}

#[test]
fn creating_a_session_file_another_writer_holds_is_refused_before_the_exists_check() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x").join("session.jsonl");
    let b = {
        let mut b = B::new();
        b.full_turn(1);
        b
    };
    let w = Store::create_at(&path, &b.s, WriterOptions::default()).unwrap();
    let e = Store::create_at(&path, &b.s, WriterOptions::default()).unwrap_err();
    assert!(matches!(e, StoreError::Busy { .. }), "{e}");
    w.close().unwrap();
    let e = Store::create_at(&path, &b.s, WriterOptions::default()).unwrap_err();
    assert!(matches!(e, StoreError::Exists { .. }), "{e}");
}
