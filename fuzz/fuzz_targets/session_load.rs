//! The session loader ([`keel_session::store::load`]) on arbitrary files, both formats and both
//! readers: plain JSONL and zstd (frame by frame), the sequential reader and the two-thread
//! pipeline (forced on for any size through the fuzzing entry
//! [`keel_session::store::load::load_two_threads`]).
//!
//! Input: the file's bytes. If they start with the zstd magic they are written as a `.zst`
//! file as they are; otherwise as a plain `session.jsonl`, and the same text is also written
//! as a `.zst` file with one zstd frame per line (as keel writes durable batches) and loaded.
//! Checked: nothing panics; the two-thread reader agrees with the sequential one; a plain file
//! and its frame-per-line zstd twin load the same events, torn tail or not; a loaded session
//! survives crash repair, invariant checks and message derivation; the report's byte counts
//! add up.
#![no_main]

use keel_session::store::load::{load_sequential, load_two_threads};
use keel_session::{LoadError, Loaded};
use libfuzzer_sys::fuzz_target;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

/// In `/dev/shm` where there is one: the files are rewritten at every execution, and a disk
/// under them would cost more than the loads.
static DIR: LazyLock<tempfile::TempDir> = LazyLock::new(|| {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .expect("a temporary directory")
});

/// One compressor for the twins (a fresh zstd context per line was the biggest cost).
static COMPRESSOR: LazyLock<Mutex<zstd::bulk::Compressor<'static>>> =
    LazyLock::new(|| Mutex::new(zstd::bulk::Compressor::new(1).expect("a zstd compressor")));

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

fn outcome(r: &Result<Loaded, LoadError>) -> String {
    match r {
        Ok(l) => format!("{:?}\n{:?}", l.report, l.session),
        Err(e) => format!("error: {e}"),
    }
}

/// Loads `path` both ways, checks they agree and exercises the loaded session.
fn load_checked(path: &Path, file_len: usize) -> Result<Loaded, LoadError> {
    let seq = load_sequential(path);
    let two = load_two_threads(path, 64);
    assert_eq!(outcome(&seq), outcome(&two), "two-thread load differs");
    if let Ok(loaded) = &seq {
        let r = &loaded.report;
        assert_eq!(r.events, loaded.session.len());
        assert!(r.valid_len <= file_len as u64);
        if let Some(t) = &r.torn {
            assert_eq!(t.offset, r.valid_len);
            assert_eq!(t.offset + t.dropped_bytes, file_len as u64);
        } else {
            assert_eq!(r.valid_len, file_len as u64);
        }
        let mut session = loaded.session.clone();
        let _ = session.check_invariants();
        let _ = session.derive_messages();
        let _ = session.title();
        let _ = session.first_prompt();
        let _ = session.events().count();
        if let Err(e) = session.repair() {
            panic!("crash repair of a loaded session failed: {e}");
        }
        let _ = session.check_invariants();
        let _ = session.derive_messages();
    }
    seq
}

/// What must agree between a plain file and its zstd twin.
fn gist(r: &Result<Loaded, LoadError>) -> String {
    match r {
        Ok(l) => format!(
            "ok events={} lines={} torn={:?}",
            l.report.events,
            l.report.lines,
            l.report.torn.as_ref().map(|t| t.line)
        ),
        Err(LoadError::Io { .. }) => "io".to_owned(),
        Err(LoadError::Header { .. }) => "header".to_owned(),
        Err(LoadError::Version { found, .. }) => format!("version {found}"),
        Err(LoadError::Corrupt { line, .. }) => format!("corrupt at {line}"),
        Err(LoadError::UnknownEventType { line, .. }) => format!("unknown type at {line}"),
    }
}

fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let path = DIR.path().join(name);
    std::fs::write(&path, bytes).expect("write the input file");
    path
}

fuzz_target!(|data: &[u8]| {
    if data.starts_with(&ZSTD_MAGIC) {
        let path = write("session.jsonl.zst", data);
        let _ = load_checked(&path, data.len());
        return;
    }
    let plain = write("session.jsonl", data);
    let plain_result = load_checked(&plain, data.len());

    // The same lines, one zstd frame each.
    let mut framed = Vec::new();
    let mut compressor = COMPRESSOR.lock().expect("the compressor lock");
    for line in data.split_inclusive(|&b| b == b'\n') {
        framed.extend(compressor.compress(line).expect("zstd compresses"));
    }
    drop(compressor);
    let twin = write("twin.jsonl.zst", &framed);
    let twin_result = load_checked(&twin, framed.len());
    assert_eq!(
        gist(&plain_result),
        gist(&twin_result),
        "plain and zstd twin differ"
    );
});
