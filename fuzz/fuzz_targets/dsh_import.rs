//! `keel sessions import` of a DeepSeek Harness (dsh) session log. The command itself lives in
//! the `keel` binary (`crates/front/keel-cli/src/cmd/sessions/transfer.rs`), which a fuzz target
//! cannot link; it is [`keel_session::Store::load`] of the dsh file, a copy of its first
//! `report.valid_len` bytes into keel's store and a load of that copy to verify it. This target
//! runs those library steps, plus `keel sessions check` ([`keel_session::view::check_file`]),
//! the transcript view and the plain-JSONL export (`keel sessions export`) read back.
//!
//! Input: the file's bytes, written under dsh's names — `session.jsonl.zstd` when they start
//! with the zstd magic, else `session.jsonl`. Checked: nothing panics; a file that loads
//! imports (its committed bytes load back, same events, no torn tail); its export loads back
//! with the same number of events.
#![no_main]

use keel_session::store::DSH_ZSTD_FILE;
use keel_session::view::{Transcript, check_file};
use keel_session::{Format, Store};
use libfuzzer_sys::fuzz_target;
use std::sync::LazyLock;

/// In `/dev/shm` where there is one (files are rewritten at every execution).
static DIR: LazyLock<tempfile::TempDir> = LazyLock::new(|| {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .expect("a temporary directory")
});

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

fuzz_target!(|data: &[u8]| {
    let src_dir = DIR.path().join("dsh");
    let dst_dir = DIR.path().join("keel");
    std::fs::create_dir_all(&src_dir).expect("create dir");
    std::fs::create_dir_all(&dst_dir).expect("create dir");
    for d in [&src_dir, &dst_dir] {
        for e in std::fs::read_dir(d).expect("read dir") {
            std::fs::remove_file(e.expect("dir entry").path()).expect("remove");
        }
    }
    let name = if data.starts_with(&ZSTD_MAGIC) {
        DSH_ZSTD_FILE
    } else {
        "session.jsonl"
    };
    let file = src_dir.join(name);
    std::fs::write(&file, data).expect("write the input file");

    // `keel sessions check`.
    let (report, _) = check_file(&src_dir);
    let _ = serde_json::to_string(&report);

    let Ok(loaded) = Store::load(&src_dir) else {
        return;
    };
    let session = &loaded.session;
    let header = session.header();
    let _ = header.cwd.as_deref();
    let _ = Transcript::build(session);

    // Import: copy the committed bytes under keel's name, load them back.
    let committed = &data[..usize::try_from(loaded.report.valid_len).expect("fits")];
    let dest = dst_dir.join(match loaded.report.format {
        Format::Plain => "session.jsonl",
        Format::Zstd => "session.jsonl.zst",
    });
    std::fs::write(&dest, committed).expect("write the copy");
    match Store::load(&dest) {
        Ok(back) => {
            assert_eq!(
                back.session.len(),
                session.len(),
                "imported copy lost events"
            );
            assert!(back.report.torn.is_none(), "imported copy has a torn tail");
        }
        Err(e) => panic!("the imported copy does not load back: {e}"),
    }

    // Export as plain JSONL and read it back.
    let mut out = serde_json::to_vec(header).expect("header encodes");
    out.push(b'\n');
    for ev in session.events() {
        serde_json::to_writer(&mut out, &*ev).expect("event encodes");
        out.push(b'\n');
    }
    std::fs::remove_file(&dest).expect("remove the copy");
    let export = dst_dir.join("session.jsonl");
    std::fs::write(&export, &out).expect("write the export");
    match Store::load(&export) {
        Ok(back) => assert_eq!(back.session.len(), session.len(), "export lost events"),
        Err(e) => panic!("the export does not load back: {e}"),
    }
});
