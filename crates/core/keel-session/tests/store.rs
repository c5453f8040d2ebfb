//! Persistence on real files: write/append/flush/load round trips (plain and zstd), torn tails
//! at every byte of the last batch, random damage earlier, random bytes, unknown types,
//! versions, resume with repair, list and resolve.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{B, header};
use keel_protocol::*;
use keel_session::*;
use pretty_assertions::assert_eq;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};

fn values(s: &Session) -> Vec<serde_json::Value> {
    s.events()
        .map(|e| serde_json::to_value(&*e).unwrap())
        .collect()
}

/// Two full turns written in two durable batches; returns the file and the byte length after
/// the first batch.
fn two_batches(dir: &Path, format: Format) -> (PathBuf, u64, Session) {
    let mut b = B::new();
    b.full_turn(1);
    let name = if format == Format::Zstd {
        "session.jsonl.zst"
    } else {
        "session.jsonl"
    };
    let path = dir.join("s").join(name);
    let opts = WriterOptions {
        format,
        ..WriterOptions::default()
    };
    let w = Store::create_at(&path, &b.s, opts).unwrap();
    let first = std::fs::metadata(&path).unwrap().len();
    let before = b.s.len();
    b.full_turn(2);
    for seq in before..b.s.len() {
        w.enqueue(&b.s.event(Seq(seq)).unwrap());
    }
    w.close().unwrap();
    (path, first, b.s)
}

#[test]
fn round_trip_plain_and_zstd() {
    for format in [Format::Plain, Format::Zstd] {
        let dir = tempfile::tempdir().unwrap();
        let (path, _, s) = two_batches(dir.path(), format);
        let loaded = Store::load(&path).unwrap();
        assert_eq!(loaded.report.torn, None);
        assert_eq!(loaded.report.format, format);
        assert_eq!(loaded.report.events, s.len());
        assert_eq!(loaded.session.header(), s.header());
        assert_eq!(values(&loaded.session), values(&s));
        assert_eq!(loaded.session.check_invariants(), Ok(()));
    }
}

#[test]
fn deltas_are_written_as_packed_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _, _) = two_batches(dir.path(), Format::Plain);
    let text = std::fs::read_to_string(path).unwrap();
    assert!(
        text.contains("{\"type\":\"text-chunks\",\"seq0\":"),
        "{text}"
    );
    for line in text.lines().skip(1) {
        keel_session::store::parse_record(line).unwrap();
    }
}

#[test]
fn create_never_clobbers() {
    let dir = tempfile::tempdir().unwrap();
    let s = Session::new(header("session-x"));
    let path = dir.path().join("session.jsonl");
    Store::create_at(&path, &s, WriterOptions::default())
        .unwrap()
        .close()
        .unwrap();
    let e = Store::create_at(&path, &s, WriterOptions::default()).unwrap_err();
    assert!(matches!(e, StoreError::Exists { .. }), "{e}");
}

/// Loading a prefix of a valid file: a committed prefix with the tail reported, or (when the
/// cut falls before a committed turn/end... impossible for a prefix) never a panic.
fn check_prefix(full: &Path, len: u64, first_batch: u64, full_session: &Session) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(full.file_name().unwrap());
    let bytes = std::fs::read(full).unwrap();
    std::fs::write(&p, &bytes[..len as usize]).unwrap();
    match Store::load(&p) {
        Ok(l) => {
            assert!(l.report.valid_len <= len);
            assert!(l.session.len() <= full_session.len());
            // What was loaded is exactly a prefix of what was written.
            let got = values(&l.session);
            assert_eq!(got[..], values(full_session)[..got.len()]);
            if len == bytes.len() as u64 {
                assert_eq!(l.report.torn, None);
            } else if len >= first_batch {
                assert!(
                    l.session.len() >= 14,
                    "the first batch is committed: {}",
                    l.session.len()
                );
            }
            if l.report.torn.is_none() {
                assert_eq!(l.report.valid_len, len);
            }
        }
        Err(e) => {
            assert!(
                len < first_batch,
                "cut at {len} >= first batch {first_batch}: {e}"
            );
            assert!(matches!(e, LoadError::Header { .. }), "{e}");
        }
    }
}

#[test]
fn truncation_at_every_byte_of_the_last_batch_and_random_earlier() {
    for format in [Format::Plain, Format::Zstd] {
        let dir = tempfile::tempdir().unwrap();
        let (path, first, s) = two_batches(dir.path(), format);
        let total = std::fs::metadata(&path).unwrap().len();
        for len in first..=total {
            check_prefix(&path, len, first, &s);
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for _ in 0..40 {
            check_prefix(&path, rng.gen_range(0..first), first, &s);
        }
    }
}

#[test]
fn resume_cuts_a_torn_tail_repairs_and_appends() {
    for format in [Format::Plain, Format::Zstd] {
        let dir = tempfile::tempdir().unwrap();
        let (path, _, _) = two_batches(dir.path(), format);
        // Open a third turn, crash mid-step with a half-written record.
        let loaded = Store::load(&path).unwrap();
        let mut s = loaded.session;
        let w =
            Store::open_for_append(&path, &s, &loaded.report, WriterOptions::default()).unwrap();
        let start = s.len();
        s.push(EventBody::TurnStart(TurnStart {
            turn: keel_protocol::TurnNo(3),
        }))
        .unwrap();
        s.push(EventBody::StepStart(StepRef {
            turn: keel_protocol::TurnNo(3),
            step: keel_protocol::StepNo(1),
        }))
        .unwrap();
        let mut b = B { s };
        b.assistant(3, 1, "", &[("k1", "bash"), ("k2", "read")]);
        b.tool_call(3, 1, "k1");
        for seq in start..b.s.len() {
            w.enqueue(&b.s.event(Seq(seq)).unwrap());
        }
        w.close().unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut f, b"{\"type\":\"tool/res").unwrap();
        drop(f);
        let (mut ps, report, repair) =
            PersistentSession::resume(&path, WriterOptions::default()).unwrap();
        assert!(report.torn.is_some(), "{report:?}");
        assert_eq!(repair.outcome_unknown, vec!["k1".to_owned()]);
        assert_eq!(repair.not_started, vec!["k2".to_owned()]);
        assert_eq!(repair.closed_turn, Some(keel_protocol::TurnNo(3)));
        ps.push(EventBody::TurnStart(TurnStart {
            turn: keel_protocol::TurnNo(4),
        }))
        .unwrap();
        let s = ps.close().unwrap();
        let again = Store::load(&path).unwrap();
        assert_eq!(
            again.report.torn, None,
            "the torn bytes were cut before appending"
        );
        assert_eq!(values(&again.session), values(&s));
        assert_eq!(again.session.check_invariants(), Ok(()));
        let EventBody::ToolResult(r) = &again.session.event(Seq(start + 5)).unwrap().body else {
            panic!()
        };
        assert_eq!(
            r.meta,
            Some(serde_json::json!({"code": "TOOL_NOT_STARTED"}))
        );
    }
}

#[test]
fn damage_before_the_last_turn_end_is_corruption_naming_file_line_and_seq() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _, _) = two_batches(dir.path(), Format::Plain);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines[5] = "{\"type\":\"step/end\",\"seq\":4,\"time\":1,\"data\":{\"turn\":1".into();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let e = Store::load(&path).unwrap_err();
    let LoadError::Corrupt {
        line, seq, path: p, ..
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!(*line, 6);
    assert_eq!(*p, path);
    let msg = e.to_string();
    assert!(
        msg.contains("line 6")
            && msg.contains("session.jsonl")
            && msg.contains(&format!("seq {seq}")),
        "{msg}"
    );
}

#[test]
fn seq_gap_before_turn_end_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _, _) = two_batches(dir.path(), Format::Plain);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.remove(3);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let e = Store::load(&path).unwrap_err();
    assert!(e.is_corruption(), "{e}");
    assert!(e.to_string().contains("is not the next seq"), "{e}");
}

#[test]
fn unknown_required_type_refuses_and_ignorable_loads() {
    let dir = tempfile::tempdir().unwrap();
    let h = serde_json::to_string(&header("session-u")).unwrap();
    let p = dir.path().join("session.jsonl");
    std::fs::write(
        &p,
        format!("{h}\n{{\"type\":\"future/thing\",\"seq\":0,\"time\":1,\"data\":{{}}}}\n"),
    )
    .unwrap();
    let e = Store::load(&p).unwrap_err();
    assert!(
        matches!(&e, LoadError::UnknownEventType { type_name, line: 2, .. } if type_name == "future/thing"),
        "{e}"
    );
    assert!(e.to_string().contains("future/thing"));
    std::fs::write(&p, format!("{h}\n{{\"type\":\"future/thing\",\"seq\":0,\"time\":1,\"data\":{{}},\"ignorable\":true}}\n")).unwrap();
    assert_eq!(Store::load(&p).unwrap().session.len(), 1);
}

#[test]
fn foreign_version_is_its_own_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("session.jsonl");
    std::fs::write(
        &p,
        "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"createdAt\":1}\n",
    )
    .unwrap();
    assert!(matches!(
        Store::load(&p),
        Err(LoadError::Version { found: 3, .. })
    ));
}

#[test]
fn non_json_numbers_and_lone_surrogates_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let h = serde_json::to_string(&header("session-n")).unwrap();
    let p = dir.path().join("session.jsonl");
    let bad = [
        "{\"type\":\"session/title\",\"seq\":0,\"time\":1,\"data\":{\"title\":\"\\ud800\"}}",
        "{\"type\":\"future/x\",\"seq\":0,\"time\":1,\"ignorable\":true,\"data\":{\"v\":NaN}}",
        "{\"type\":\"future/x\",\"seq\":0,\"time\":1,\"ignorable\":true,\"data\":{\"v\":Infinity}}",
    ];
    for line in bad {
        let ended = "{\"type\":\"turn/start\",\"seq\":0,\"time\":1,\"data\":{\"turn\":1}}\n{\"type\":\"turn/end\",\"seq\":1,\"time\":1,\"data\":{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}}";
        std::fs::write(&p, format!("{h}\n{line}\n{ended}\n")).unwrap();
        let e = Store::load(&p).unwrap_err();
        assert!(e.is_corruption(), "{line}: {e}");
        std::fs::write(&p, format!("{h}\n{line}\n")).unwrap();
        let l = Store::load(&p).unwrap();
        assert_eq!(l.session.len(), 0);
        assert!(l.report.torn.is_some());
    }
}

#[test]
fn random_bytes_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _, _) = two_batches(dir.path(), Format::Plain);
    let good = std::fs::read(&path).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    for i in 0..300 {
        let bytes: Vec<u8> = match i % 3 {
            0 => (0..rng.gen_range(0..400)).map(|_| rng.r#gen()).collect(),
            1 => {
                let mut b = good.clone();
                for _ in 0..rng.gen_range(1..6) {
                    let at = rng.gen_range(0..b.len());
                    b[at] = rng.r#gen();
                }
                b
            }
            _ => {
                let mut b = good[..rng.gen_range(0..good.len())].to_vec();
                b.extend((0..rng.gen_range(0..50)).map(|_| rng.r#gen::<u8>()));
                b
            }
        };
        for name in ["session.jsonl", "session.jsonl.zst"] {
            let p = dir.path().join(format!("r{i}")).join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            let data = if name.ends_with("zst") {
                zstd::encode_all(&bytes[..], 1).unwrap()
            } else {
                bytes.clone()
            };
            std::fs::write(&p, &data).unwrap();
            let _ = Store::load(&p);
            std::fs::write(&p, &bytes).unwrap();
            let _ = Store::load(&p);
        }
    }
}

#[test]
fn project_key_list_and_resolve() {
    assert_eq!(
        Store::project_key(Path::new("/home/user/project")),
        "--home-user-project--"
    );
    assert_eq!(
        Store::project_key(Path::new("/a b/c:d.e_f")),
        "--a-b-c-d.e_f--"
    );
    let home = tempfile::tempdir().unwrap();
    let store = Store::new(home.path().to_owned());
    let cwd = Path::new("/home/user/project");
    let mut ids = vec![];
    for (i, format) in [Format::Plain, Format::Zstd].into_iter().enumerate() {
        let mut b = B {
            s: Session::new(SessionHeader::new(
                SessionId(format!("session-ab{i}")),
                1,
                Some(cwd.display().to_string()),
            )),
        };
        b.full_turn(1);
        let w = store
            .create(
                cwd,
                &b.s,
                WriterOptions {
                    format,
                    ..WriterOptions::default()
                },
            )
            .unwrap();
        w.close().unwrap();
        ids.push(b.s.header().id.to_string());
    }
    let dir = store.session_dir(cwd, &ids[0]);
    assert!(dir.join("session.jsonl").is_file(), "{}", dir.display());
    let list = store.list(Some(cwd));
    assert_eq!(list.len(), 2);
    let first = list.iter().find(|s| s.id == ids[0]).unwrap();
    assert_eq!(first.first_prompt.as_deref(), Some("prompt 1"));
    assert_eq!(first.turns, 1);
    assert_eq!(first.problem, None);
    assert!(list.iter().any(|s| s.compressed));
    assert_eq!(store.list(None).len(), 2);
    assert!(store.list(Some(Path::new("/elsewhere"))).is_empty());
    assert_eq!(
        store.resolve("session-ab0", cwd).unwrap(),
        dir.join("session.jsonl")
    );
    assert_eq!(
        store.resolve("session-ab1", Path::new("/x")).unwrap(),
        store.session_dir(cwd, &ids[1]).join("session.jsonl.zst")
    );
    assert!(matches!(
        store.resolve("session-ab", cwd),
        Err(StoreError::Ambiguous { .. })
    ));
    assert!(matches!(
        store.resolve("nope", cwd),
        Err(StoreError::NotFound { .. })
    ));
    assert_eq!(
        store.resolve(dir.to_str().unwrap(), cwd).unwrap(),
        dir.join("session.jsonl")
    );
}

#[test]
fn writer_errors_surface_on_flush_and_stay() {
    let full = Path::new("/dev/full");
    let f = std::fs::OpenOptions::new().append(true).open(full).unwrap();
    let w = SessionWriter::from_file(f, full.to_owned(), WriterOptions::default()).unwrap();
    w.enqueue(&SessionEvent::new(
        Seq(0),
        1,
        EventBody::TurnStart(TurnStart {
            turn: keel_protocol::TurnNo(1),
        }),
    ));
    let e = w.flush().unwrap_err();
    assert!(
        matches!(&e, StoreError::Io { path, .. } if path == full),
        "{e}"
    );
    assert!(e.to_string().contains("/dev/full"));
    // Sticky: a later flush with nothing new still reports it.
    assert!(w.flush().is_err());
    assert!(w.flush_ticket().wait().is_err());
}

#[test]
fn hostile_numbers_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let h = serde_json::to_string(&header("session-h")).unwrap();
    let p = dir.path().join("session.jsonl");
    let rows = [
        format!("{{\"type\":\"text-chunks\",\"seq0\":{},\"time0\":1,\"data\":{{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[1],\"texts\":[\"a\",\"b\"]}}}}", u64::MAX),
        format!("{{\"type\":\"text-chunks\",\"seq0\":0,\"time0\":{},\"data\":{{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[{}],\"texts\":[\"a\",\"b\"]}}}}", i64::MAX, i64::MAX),
        format!("{{\"type\":\"text-chunks\",\"seq0\":0,\"time0\":{},\"data\":{{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[{}],\"texts\":[\"a\",\"b\"]}}}}", i64::MIN, i64::MIN),
        "{\"type\":\"text-chunks\",\"seq0\":0,\"time0\":0,\"data\":{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[],\"texts\":[]}}".to_owned(),
    ];
    for row in rows {
        std::fs::write(&p, format!("{h}\n{row}\n")).unwrap();
        if let Ok(l) = Store::load(&p) {
            let _: Vec<_> = l.session.events().collect();
        }
    }
}

#[test]
fn list_caches_summaries_beside_the_log_and_refreshes_them_when_the_log_changes() {
    let home = tempfile::tempdir().unwrap();
    let store = Store::new(home.path().to_owned());
    let cwd = Path::new("/home/user/project");
    let mut b = B {
        s: Session::new(SessionHeader::new(
            SessionId("session-cache".into()),
            1,
            Some(cwd.display().to_string()),
        )),
    };
    b.full_turn(1);
    let w = store.create(cwd, &b.s, WriterOptions::default()).unwrap();
    let dir = store.session_dir(cwd, "session-cache");
    let cache = dir.join(SUMMARY_FILE);
    assert!(!cache.exists());

    // Logs hold prompts and file contents: owner only.
    let log_mode = std::fs::metadata(dir.join("session.jsonl"))
        .unwrap()
        .permissions();
    let dir_mode = std::fs::metadata(&dir).unwrap().permissions();
    assert_eq!(
        (log_mode.mode() & 0o777, dir_mode.mode() & 0o777),
        (0o600, 0o700)
    );
    // The first listing summarizes the log and leaves the cache, no more readable than the log.
    let first = store.list(Some(cwd));
    assert_eq!((first[0].turns, first[0].problem.clone()), (1, None));
    assert!(cache.is_file());
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&cache) & !mode(&dir.join("session.jsonl")), 0);

    // A later listing believes the cache while the log keeps its size and mtime: a doctored
    // cache shows through (proof that the log was not read again).
    let doctored = std::fs::read_to_string(&cache)
        .unwrap()
        .replace("prompt 1", "from the cache");
    std::fs::write(&cache, doctored).unwrap();
    let cached = store.list(Some(cwd));
    assert_eq!(cached[0].first_prompt.as_deref(), Some("from the cache"));

    // The log grows: the cache is stale, the listing reads the log again and rewrites it.
    let events: Vec<SessionEvent> = {
        let before = b.s.len();
        b.full_turn(2);
        b.s.events()
            .skip(before as usize)
            .map(|e| e.into_owned())
            .collect()
    };
    for ev in events {
        w.enqueue_owned(ev);
    }
    w.flush().unwrap();
    let fresh = store.list(Some(cwd));
    assert_eq!(fresh[0].turns, 2);
    assert_eq!(fresh[0].first_prompt.as_deref(), Some("prompt 1"));

    // A cache that is garbage (or of another version) is ignored and replaced.
    std::fs::write(&cache, b"{not json").unwrap();
    assert_eq!(store.list(Some(cwd))[0].turns, 2);
    assert!(
        std::fs::read_to_string(&cache)
            .unwrap()
            .contains("\"turns\":2")
    );
    w.close().unwrap();
}
