//! The file-backed journal and the offline validator: layout and permissions, determinism,
//! replay, crash (torn tail) and resume, tamper detection at every byte.

mod common;

use common::*;
use keel_protocol::SessionId;
use keel_provenance::{
    Direction, GRAPH_FILE, Journal, PreDecision, RECEIPTS_FILE, Snapshot, VerifyCode, journal_dir,
    trace, verify, verify_bytes,
};
use pretty_assertions::assert_eq;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn run_workload(home: &Path) -> std::path::PathBuf {
    let session = SessionId::from("session-1");
    let mut j = Journal::open_in_home(home, &session).unwrap_or_else(|e| panic!("{e}"));
    workload(j.recorder_mut());
    j.flush().unwrap_or_else(|e| panic!("{e}"));
    j.close().unwrap_or_else(|e| panic!("{e}"));
    journal_dir(home, &session).unwrap_or_else(|e| panic!("{e}"))
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0)
}

#[test]
fn layout_permissions_and_verification() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = run_workload(home.path());
    assert_eq!(dir, home.path().join("provenance").join("session-1"));
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join(RECEIPTS_FILE)), 0o600);
    assert_eq!(mode(&dir.join(GRAPH_FILE)), 0o600);
    let report = verify(&dir).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.receipts, 16);
    assert_eq!(report.graph_receipts, Some(16));
    assert_eq!(report.torn_tail, None);
    assert_eq!(report.run_id.as_deref(), Some("session-1"));
    assert!(matches!(
        journal_dir(home.path(), &SessionId::from("../x")),
        Err(keel_provenance::JournalError::BadSessionId(_))
    ));
}

#[test]
fn same_workload_gives_identical_bytes_and_replays_to_them() {
    let a = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let b = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (da, db) = (run_workload(a.path()), run_workload(b.path()));
    for f in [RECEIPTS_FILE, GRAPH_FILE] {
        let (x, y) = (std::fs::read(da.join(f)), std::fs::read(db.join(f)));
        assert!(x.is_ok());
        assert_eq!(x.ok(), y.ok(), "{f}");
    }
    // Replay: reopening rebuilds the same snapshot bytes (no open calls, nothing appended).
    let graph = std::fs::read(da.join(GRAPH_FILE)).unwrap_or_default();
    let j = Journal::open(&da, "session-1").unwrap_or_else(|e| panic!("{e}"));
    let (_, mut bytes) = j.snapshot().to_canonical();
    bytes.push(b'\n');
    assert_eq!(
        String::from_utf8_lossy(&bytes),
        String::from_utf8_lossy(&graph)
    );
    assert_eq!(j.resume_report().closed_calls, Vec::<String>::new());
    // An in-memory recorder of the same workload agrees too.
    let mut rec = keel_provenance::Recorder::new("session-1");
    workload(&mut rec);
    let (_, mut mem) = rec.snapshot().to_canonical();
    mem.push(b'\n');
    assert_eq!(mem, graph);
}

#[test]
fn torn_tail_verifies_as_prefix_and_resume_closes_open_calls() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = home.path().join("provenance").join("s");
    {
        let mut j = Journal::open(&dir, "s").unwrap_or_else(|e| panic!("{e}"));
        let rec = j.recorder_mut();
        assistant(
            rec,
            "ev-1",
            &[("done", "read", "{}"), ("open", "read", "{}")],
        );
        read_call(rec, "done", "t1");
        j.flush().unwrap_or_else(|e| panic!("{e}"));
        j.write_graph().unwrap_or_else(|e| panic!("{e}"));
        until_decision(j.recorder_mut(), "open", PreDecision::Allow);
        j.flush().unwrap_or_else(|e| panic!("{e}"));
        // The next receipt is being appended when the process is killed: half a line lands.
        j.recorder_mut().execute_enter(
            "open",
            keel_provenance::Dispatch {
                token: "t2",
                parent_token: None,
                arguments: keel_provenance::Payload::Null,
            },
        );
        let line = j.recorder_mut().drain_lines().pop().unwrap_or_default();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join(RECEIPTS_FILE))
            .unwrap_or_else(|e| panic!("{e}"));
        f.write_all(&line.as_bytes()[..line.len() / 2])
            .unwrap_or_else(|e| panic!("{e}"));
        // Dropped without close: SIGKILL.
    }
    let report = verify(&dir).unwrap_or_else(|e| panic!("{e}"));
    let torn = report
        .torn_tail
        .clone()
        .unwrap_or_else(|| panic!("torn tail not reported"));
    assert_eq!(torn.line, 15);
    assert_eq!(report.receipts, 14);
    assert_eq!(report.graph_receipts, Some(11));

    let j = Journal::open(&dir, "s").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(j.resume_report().torn_tail, Some(torn));
    assert_eq!(j.resume_report().closed_calls, ["open"]);
    let s = j.snapshot();
    assert!(!s.complete(), "a cut tail means lost capture");
    assert_eq!(
        s.failures()
            .iter()
            .map(|f| f.reason.as_str())
            .collect::<Vec<_>>(),
        ["journal_tail_torn"]
    );
    let closed: Vec<&str> = s
        .nodes()
        .iter()
        .filter_map(|n| n.category.map(|c| c.as_str()))
        .collect();
    assert_eq!(closed, ["outcome_unobserved"]);
    let graph_id = j.close().unwrap_or_else(|e| panic!("{e}"));
    let report = verify(&dir).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.torn_tail, None);
    assert_eq!(report.graph_id, Some(graph_id));
    assert_eq!(report.capture_failures, 1);
    assert_eq!(report.receipts, 16);
}

#[test]
fn graph_covering_a_torn_receipt_fails_with_incomplete_tail() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = run_workload(home.path());
    let path = dir.join(RECEIPTS_FILE);
    let bytes = std::fs::read(&path).unwrap_or_default();
    std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        verify(&dir).err().and_then(|e| e.code()),
        Some(VerifyCode::IncompleteJournalTail)
    );
    // Dropping whole lines is loss, not a tear.
    let cut = bytes[..bytes.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap_or(0)
        + 1;
    std::fs::write(&path, &bytes[..cut]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        verify(&dir).err().and_then(|e| e.code()),
        Some(VerifyCode::SilentOccurrenceLoss)
    );
}

#[test]
fn every_single_byte_flip_is_detected() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let session = SessionId::from("t");
    let dir = {
        // A small journal: a proposed call closed unobserved (3 receipts).
        let mut j = Journal::open_in_home(home.path(), &session).unwrap_or_else(|e| panic!("{e}"));
        assistant(j.recorder_mut(), "e", &[("c", "bash", "{}")]);
        j.close().unwrap_or_else(|e| panic!("{e}"));
        journal_dir(home.path(), &session).unwrap_or_else(|e| panic!("{e}"))
    };
    assert!(verify(&dir).is_ok());
    let receipts = std::fs::read(dir.join(RECEIPTS_FILE)).unwrap_or_default();
    let graph = std::fs::read(dir.join(GRAPH_FILE)).unwrap_or_default();
    assert!(receipts.len() > 1000 && graph.len() > 1000);
    // The in-memory entry point agrees with the file one on the untouched journal.
    assert!(verify_bytes(&receipts, Some(&graph)).is_ok());
    let check = |file: &'static str,
                 range: std::ops::Range<usize>|
     -> Vec<(&'static str, &'static str)> {
        let mut codes = Vec::new();
        for offset in range {
            let (mut r, mut g) = (receipts.clone(), graph.clone());
            let target = if file == RECEIPTS_FILE {
                &mut r
            } else {
                &mut g
            };
            target[offset] ^= 0x01;
            match verify_bytes(&r, Some(&g)) {
                Ok(report) => panic!("{file}: flip at byte {offset} went undetected: {report:?}"),
                Err(e) => codes.push((file, e.code().map_or("IO", |c| c.as_str()))),
            }
        }
        codes
    };
    let mut codes = std::collections::BTreeSet::new();
    std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for (file, len) in [(RECEIPTS_FILE, receipts.len()), (GRAPH_FILE, graph.len())] {
            let mid = len / 2;
            handles.push(scope.spawn(move || check(file, 0..mid)));
            handles.push(scope.spawn(move || check(file, mid..len)));
        }
        for h in handles {
            codes.extend(h.join().unwrap_or_else(|_| panic!("checker panicked")));
        }
    });
    assert!(
        codes.contains(&(RECEIPTS_FILE, "RECEIPT_HASH_MISMATCH")),
        "{codes:?}"
    );
    assert!(
        codes.contains(&(GRAPH_FILE, "GRAPH_HASH_MISMATCH")),
        "{codes:?}"
    );
}

#[test]
fn reordered_or_foreign_lines_fail_with_named_position() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = run_workload(home.path());
    let path = dir.join(RECEIPTS_FILE);
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.swap(3, 4);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap_or_else(|e| panic!("{e}"));
    match verify(&dir) {
        Err(keel_provenance::VerifyError::Failed(f)) => {
            assert_eq!(f.code, VerifyCode::ReceiptSequenceMismatch);
            assert_eq!(f.line, Some(4));
            assert_eq!(f.field.as_deref(), Some("sequence"));
        }
        other => panic!("expected a sequence mismatch, got {other:?}"),
    }
    // A graph from other receipts is a binding mismatch, named by field.
    std::fs::write(&path, &text).unwrap_or_else(|e| panic!("{e}"));
    let mut other = keel_provenance::Recorder::new("session-1");
    workload(&mut other);
    other.close_open_calls("close");
    assistant(&mut other, "extra", &[]);
    let compiled = Snapshot::compile("session-1", std::iter::empty()).map(|s| s.to_canonical());
    assert!(compiled.is_ok());
    let short = {
        // Same receipts but one fewer: a valid graph of a *different* prefix than it claims.
        let (_, mut g) = other.snapshot().to_canonical();
        g.push(b'\n');
        g
    };
    std::fs::write(dir.join(GRAPH_FILE), short).unwrap_or_else(|e| panic!("{e}"));
    assert!(verify(&dir).is_err());
}

#[test]
fn replayed_journal_answers_queries() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = run_workload(home.path());
    let j = Journal::open(&dir, "session-1").unwrap_or_else(|e| panic!("{e}"));
    let t = trace(j.snapshot(), "result:call_b", Direction::Backward, 32)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        t.nodes
            .iter()
            .any(|n| n.category.as_deref() == Some("denied"))
    );
    assert!(matches!(
        Journal::open(&dir, "other-run"),
        Err(keel_provenance::JournalError::RunMismatch { .. })
    ));
}

#[test]
fn read_only_load_matches_and_writes_nothing() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = home.path().join("provenance").join("live");
    let mut j = Journal::open(&dir, "live").unwrap_or_else(|e| panic!("{e}"));
    assistant(j.recorder_mut(), "ev-1", &[("open", "read", "{}")]);
    until_decision(j.recorder_mut(), "open", PreDecision::Allow);
    j.flush().unwrap_or_else(|e| panic!("{e}"));
    let before = std::fs::read(dir.join(RECEIPTS_FILE)).unwrap_or_default();
    let (loaded, torn) = keel_provenance::load_snapshot(&dir).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(torn, None);
    assert_eq!(loaded.to_canonical(), j.snapshot().to_canonical());
    // The open call was not closed and nothing was appended.
    assert_eq!(
        std::fs::read(dir.join(RECEIPTS_FILE)).unwrap_or_default(),
        before
    );
    assert!(loaded.nodes().iter().all(|n| n.category.is_none()));
}

#[test]
fn a_journal_that_captured_nothing_verifies_and_its_graph_is_still_checked() {
    // A subagent that only asked questions has an empty receipts.jsonl; its graph.json names
    // the run, and is checked against the empty compilation of that run.
    let home = tempfile::tempdir().unwrap();
    let mut j = Journal::open_in_home(home.path(), &SessionId("quiet".into())).unwrap();
    j.write_graph().unwrap();
    let dir = j.dir().to_owned();
    drop(j);
    let report = verify(&dir).unwrap();
    assert_eq!(
        (report.receipts, report.run_id.as_deref()),
        (0, Some("quiet"))
    );
    let graph = dir.join("graph.json");
    let bytes = std::fs::read(&graph).unwrap();
    let at = bytes.windows(5).position(|w| w == b"quiet").unwrap();
    let mut forged = bytes.clone();
    forged[at] = b'Q';
    std::fs::write(&graph, forged).unwrap();
    assert!(verify(&dir).is_err(), "a changed run id must not verify");
}

#[test]
fn graph_json_is_rewritten_only_when_receipts_changed_it() {
    let home = tempfile::tempdir().unwrap();
    let mut j = Journal::open_in_home(home.path(), &SessionId("steps".into())).unwrap();
    workload(j.recorder_mut());
    j.flush().unwrap();
    let first = j.write_graph().unwrap();
    let graph = j.dir().join(GRAPH_FILE);
    // A step boundary without new receipts: same id, the file is not written again.
    std::fs::remove_file(&graph).unwrap();
    assert_eq!(j.write_graph().unwrap(), first);
    assert_eq!(j.published_graph_id(), Some(first.as_str()));
    assert!(!graph.exists());
    // A new receipt changes the snapshot: published again, under a new id.
    read_call(j.recorder_mut(), "later", "t-later");
    assert_eq!(j.published_graph_id(), None);
    let second = j.write_graph().unwrap();
    assert_ne!(second, first);
    assert!(graph.is_file());
}
