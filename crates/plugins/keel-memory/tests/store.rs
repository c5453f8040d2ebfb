//! The memory store on real SQLite files in temporary directories: CAS, expiry, soft delete,
//! ranking, scopes, two writer processes, a corrupt file, bad input, variables.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_memory::lexical::Query;
use keel_memory::store::records::{Record, parse_rfc3339};
use keel_memory::store::search::rank_all;
use keel_memory::store::tools::{Shared, call, schema_bytes};
use keel_memory::store::variables::VarOp;
use keel_memory::store::{Changes, Identity, Kind, MemoryStore, NewRecord, Scope, StoreError};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const NOW: i64 = 1_750_000_000_000;
const DAY: i64 = 86_400_000;

fn who(session: &str, work: &Path) -> Identity {
    Identity::new(session, work, "main")
}

fn new(content: &str, importance: f64) -> NewRecord {
    NewRecord {
        kind: Kind::Semantic,
        content: content.into(),
        tags: vec![],
        importance: Some(importance),
        confidence: None,
        expires_at: None,
    }
}

struct Fx {
    dir: tempfile::TempDir,
    store: MemoryStore,
    a: Identity,
}

fn fx() -> Fx {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory").join("memory.sqlite3");
    let store = MemoryStore::open(&path).unwrap();
    let a = who("sess-a", dir.path());
    Fx { dir, store, a }
}

#[test]
fn revisions_are_the_canonical_digest_and_writes_are_compare_and_swap() {
    let f = fx();
    let r = f
        .store
        .write(
            &f.a,
            Scope::Project,
            new("The deploy key is in vault", 0.5),
            NOW,
        )
        .unwrap();
    assert_eq!(r.revision.len(), 16);
    assert_eq!(r.revision, r.compute_revision());
    let mut v = serde_json::to_value(&r).unwrap();
    v.as_object_mut().unwrap().remove("revision");
    let digest = keel_jcs::digest::sha256_hex(&keel_jcs::to_canonical_vec(&v).unwrap());
    assert_eq!(r.revision, digest[..16]);
    assert_eq!(r.confidence, 1.0, "confidence defaults to 1");

    let changes = || Changes {
        content: Some("The deploy key is in the team vault".into()),
        ..Changes::default()
    };
    let r2 = f
        .store
        .update(&f.a, Scope::Project, &r.id, &r.revision, changes(), NOW + 1)
        .unwrap();
    assert_ne!(r2.revision, r.revision);
    // The old revision is stale now.
    match f
        .store
        .update(&f.a, Scope::Project, &r.id, &r.revision, changes(), NOW + 2)
    {
        Err(StoreError::RevisionConflict { current, .. }) => assert_eq!(current, r2.revision),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert!(matches!(
        f.store
            .forget(&f.a, Scope::Project, &r.id, &r.revision, NOW + 3),
        Err(StoreError::RevisionConflict { .. })
    ));
    assert_eq!(
        f.store.read(&f.a, Scope::Project, &r.id, NOW + 3).unwrap(),
        r2
    );
    let gone = f
        .store
        .forget(&f.a, Scope::Project, &r.id, &r2.revision, NOW + 4)
        .unwrap();
    assert!(gone.deleted_at.is_some());
    // Soft-deleted: hidden from read, search and further writes.
    assert!(matches!(
        f.store.read(&f.a, Scope::Project, &r.id, NOW + 5),
        Err(StoreError::NotFound { .. })
    ));
    let hits = f
        .store
        .search(&f.a, &Query::new("deploy key"), None, 10, NOW + 5)
        .unwrap();
    assert!(hits.is_empty(), "{hits:?}");
    assert!(matches!(
        f.store.update(
            &f.a,
            Scope::Project,
            &r.id,
            &gone.revision,
            changes(),
            NOW + 6
        ),
        Err(StoreError::NotFound { .. })
    ));
    // Audit: who/what/when/old→new, failed attempts leave nothing.
    let log = f.store.audit_log().unwrap();
    let ops: Vec<(&str, Option<&str>, Option<&str>)> = log
        .iter()
        .map(|a| {
            (
                a.op.as_str(),
                a.old_revision.as_deref(),
                a.new_revision.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        ops,
        [
            ("write", None, Some(r.revision.as_str())),
            (
                "update",
                Some(r.revision.as_str()),
                Some(r2.revision.as_str())
            ),
            (
                "forget",
                Some(r2.revision.as_str()),
                Some(gone.revision.as_str())
            ),
        ]
    );
    assert!(log.iter().all(|a| a.actor == "main:sess-a"));
    // The row itself is still in the file (soft delete).
    let conn = rusqlite_count(f.store.path(), "SELECT count(*) FROM records");
    assert_eq!(conn, 1);
}

fn rusqlite_count(path: &Path, sql: &str) -> i64 {
    let c = rusqlite::Connection::open(path).unwrap();
    c.query_row(sql, [], |r| r.get(0)).unwrap()
}

#[test]
fn expired_records_are_hidden() {
    let f = fx();
    let mut n = new("temporary build token abc", 0.5);
    n.expires_at = Some("2025-06-15T16:00:00+02:00".into()); // NOW + a bit
    let now = parse_rfc3339("t", "2025-06-15T13:00:00Z").unwrap();
    let r = f.store.write(&f.a, Scope::Session, n, now).unwrap();
    assert_eq!(r.expires_at.as_deref(), Some("2025-06-15T14:00:00.000Z"));
    let q = Query::new("build token");
    assert_eq!(
        f.store.search(&f.a, &q, None, 5, now + 1000).unwrap().len(),
        1
    );
    f.store
        .read(&f.a, Scope::Session, &r.id, now + 1000)
        .unwrap();
    let later = now + 2 * 3_600_000;
    assert!(f.store.search(&f.a, &q, None, 5, later).unwrap().is_empty());
    assert!(matches!(
        f.store.read(&f.a, Scope::Session, &r.id, later),
        Err(StoreError::NotFound { .. })
    ));
    // An expiry in the past is refused, naming the field.
    let mut past = new("x", 0.5);
    past.expires_at = Some("2020-01-01T00:00:00Z".into());
    match f.store.write(&f.a, Scope::Session, past, now) {
        Err(StoreError::Field(e)) => assert_eq!(e.field, "expires_at"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn ranking_is_deterministic_and_matches_the_reference() {
    let f = fx();
    let w = |c: &str, imp: f64, conf: f64, at: i64| {
        let mut n = new(c, imp);
        n.confidence = Some(conf);
        f.store.write(&f.a, Scope::Project, n, at).unwrap()
    };
    let old_full = w("red fox jumps", 0.0, 1.0, NOW - 10 * DAY); // 100 + 0 + 5 + 1/11
    let new_half = w("red hat", 1.0, 1.0, NOW); // 50 + 10 + 5 + 1
    let new_full = w("the quick red fox", 0.0, 1.0, NOW); // 100 + 0 + 5 + 1
    let tie_a = w("fox only", 0.0, 0.0, NOW - DAY); // 50 + 0 + 0 + 0.5
    let tie_b = w("only fox", 0.0, 0.0, NOW - DAY); // same score, same time: by id
    let _none = w("blue whale", 1.0, 1.0, NOW); // no query token: not a candidate
    let q = Query::new("Red FOX");
    let hits = f.store.search(&f.a, &q, None, 20, NOW).unwrap();
    let ids: Vec<&str> = hits.iter().map(|h| h.record.id.as_str()).collect();
    let (first_tie, second_tie) = if tie_a.id < tie_b.id {
        (&tie_a.id, &tie_b.id)
    } else {
        (&tie_b.id, &tie_a.id)
    };
    assert_eq!(
        ids,
        [
            new_full.id.as_str(),
            old_full.id.as_str(),
            new_half.id.as_str(),
            first_tie.as_str(),
            second_tie.as_str()
        ]
    );
    assert!((hits[0].score - 106.0).abs() < 1e-9);
    assert!((hits[1].score - (105.0 + 1.0 / 11.0)).abs() < 1e-9);
    assert!((hits[2].score - 66.0).abs() < 1e-9);
    assert!((hits[3].score - 50.5).abs() < 1e-9);
    // Same order and scores as the brute-force reference over every record.
    let all: Vec<Record> = [&old_full, &new_half, &new_full, &tie_a, &tie_b]
        .into_iter()
        .cloned()
        .collect();
    let reference = rank_all(&q, &all, NOW);
    assert_eq!(
        reference
            .iter()
            .map(|h| h.record.id.as_str())
            .collect::<Vec<_>>(),
        ids
    );
    // Limit keeps the best.
    let top2 = f.store.search(&f.a, &q, None, 2, NOW).unwrap();
    assert_eq!(top2.len(), 2);
    assert_eq!(top2[0].record.id, new_full.id);
    // Tags are searched too; an update re-indexes (the old words stop matching).
    let t = f
        .store
        .update(
            &f.a,
            Scope::Project,
            &new_half.id,
            &new_half.revision,
            Changes {
                content: Some("green cap".into()),
                tags: Some(vec!["Headwear".into()]),
                ..Changes::default()
            },
            NOW,
        )
        .unwrap();
    let hits = f
        .store
        .search(&f.a, &Query::new("headwear"), None, 5, NOW)
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].record.revision, t.revision);
    assert!(
        f.store
            .search(&f.a, &Query::new("hat"), None, 5, NOW)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn scopes_are_isolated_by_identity() {
    let f = fx();
    let b = who("sess-b", f.dir.path());
    let other_project = {
        let d = f.dir.path().join("other");
        std::fs::create_dir_all(&d).unwrap();
        who("sess-a", &d)
    };
    let mine = f
        .store
        .write(&f.a, Scope::Session, new("secret plan alpha", 0.5), NOW)
        .unwrap();
    let shared = f
        .store
        .write(&f.a, Scope::Project, new("project plan beta", 0.5), NOW)
        .unwrap();
    let q = Query::new("plan");
    let seen = |w: &Identity| -> Vec<String> {
        f.store
            .search(w, &q, None, 10, NOW)
            .unwrap()
            .into_iter()
            .map(|h| h.record.id)
            .collect()
    };
    assert_eq!(seen(&f.a).len(), 2);
    assert_eq!(seen(&b), std::slice::from_ref(&shared.id));
    assert!(seen(&other_project).iter().all(|id| *id != shared.id));
    assert!(matches!(
        f.store.read(&b, Scope::Session, &mine.id, NOW),
        Err(StoreError::NotFound { .. })
    ));
    // Another session cannot change it either, even with the right revision.
    assert!(matches!(
        f.store
            .forget(&b, Scope::Session, &mine.id, &mine.revision, NOW),
        Err(StoreError::NotFound { .. })
    ));
    assert!(
        f.store
            .search(&f.a, &q, Some(Scope::Project), 10, NOW)
            .unwrap()
            .iter()
            .all(|h| h.record.scope == Scope::Project)
    );
    // Global writes are off by default.
    assert!(matches!(
        f.store.write(&f.a, Scope::Global, new("g", 0.5), NOW),
        Err(StoreError::Denied(_))
    ));
    let open = MemoryStore::open(f.store.path())
        .unwrap()
        .with_global_writes(true);
    let g = open
        .write(&f.a, Scope::Global, new("global plan gamma", 0.5), NOW)
        .unwrap();
    assert!(seen(&b).contains(&g.id));
}

#[test]
fn bad_input_names_the_field() {
    let f = fx();
    let field = |n: NewRecord| match f.store.write(&f.a, Scope::Project, n, NOW) {
        Err(StoreError::Field(e)) => e.field,
        other => panic!("{other:?}"),
    };
    assert_eq!(field(new(&"x".repeat(64 * 1024 + 1), 0.5)), "content");
    assert_eq!(field(new("ok", 1.5)), "importance");
    assert_eq!(field(new("ok", -0.1)), "importance");
    let mut n = new("ok", 0.5);
    n.confidence = Some(2.0);
    assert_eq!(field(n), "confidence");
    let mut n = new("ok", 0.5);
    n.tags = (0..33).map(|i| format!("t{i}")).collect();
    assert_eq!(field(n), "tags");
    // The limits themselves are fine.
    let mut n = new(&"x".repeat(64 * 1024), 0.5);
    n.tags = (0..32).map(|i| format!("t{i}")).collect();
    let r = f.store.write(&f.a, Scope::Project, n, NOW).unwrap();
    assert_eq!(r.tags.len(), 32);
    assert!(
        r.tags.windows(2).all(|w| w[0] < w[1]),
        "sorted: {:?}",
        r.tags
    );
    assert_eq!(f.store.audit_log().unwrap().len(), 1);
}

#[cfg(unix)]
#[test]
fn directory_is_0700_and_file_0600() {
    use std::os::unix::fs::PermissionsExt;
    let f = fx();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(f.store.path().parent().unwrap()), 0o700);
    assert_eq!(mode(f.store.path()), 0o600);
}

#[test]
fn a_corrupt_file_is_a_clear_error_and_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.sqlite3");
    let junk = b"this is not a database, it is a shopping list\n".repeat(100);
    std::fs::write(&path, &junk).unwrap();
    let e = MemoryStore::open(&path).unwrap_err();
    assert!(matches!(e, StoreError::Corrupt { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains("corrupt"), "{text}");
    assert_eq!(std::fs::read(&path).unwrap(), junk, "nothing written");

    // Through a tool: the error names the file and nothing panics.
    let shared = Shared::new(path.clone(), false);
    let w = who("s", dir.path());
    let e = call(
        &shared,
        "memory_write",
        &json!({"scope": "project", "kind": "semantic", "content": "x"}),
        &w,
        1,
        NOW,
    )
    .unwrap_err();
    assert!(e.model_text().starts_with("TOOL_FAILED:"), "{e}");
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");

    // A damaged page inside a real database: a clear error on use, not a panic.
    let good = dir.path().join("good.sqlite3");
    {
        let s = MemoryStore::open(&good).unwrap();
        for i in 0..300 {
            s.write(
                &w,
                Scope::Project,
                new(&format!("record number {i} about apples"), 0.5),
                NOW,
            )
            .unwrap();
        }
    }
    let _ = std::fs::remove_file(good.with_extension("sqlite3-wal"));
    let mut bytes = std::fs::read(&good).unwrap();
    assert!(bytes.len() > 8192);
    for b in &mut bytes[4096 * 2..] {
        *b = 0xA5;
    }
    std::fs::write(&good, &bytes).unwrap();
    let r = MemoryStore::open(&good).and_then(|s| {
        s.search(&w, &Query::new("apples"), None, 5, NOW)
            .map(|_| ())
    });
    let e = r.unwrap_err();
    assert!(e.to_string().contains(&good.display().to_string()), "{e}");
}

#[test]
fn variables_are_compare_and_swap_and_patched() {
    let f = fx();
    let b = who("sess-b", f.dir.path());
    let v1 = f
        .store
        .var_write(
            &f.a,
            Scope::Session,
            "plan",
            &VarOp::Set(json!({"step": 1})),
            None,
            NOW,
        )
        .unwrap()
        .unwrap();
    assert!(
        f.store
            .var_get(&b, Scope::Session, "plan")
            .unwrap()
            .is_none()
    );
    let patch: Vec<keel_memory::store::variables::Change> = serde_json::from_value(json!([
        {"op": "set", "path": "/step", "value": 2},
        {"op": "set", "path": "/done/-", "value": "a"}
    ]))
    .unwrap();
    // `/done/-` on a missing `done`: the set creates an object, so `-` is a key there.
    let v2 = f
        .store
        .var_write(
            &f.a,
            Scope::Session,
            "plan",
            &VarOp::Patch(patch),
            Some(&v1.revision),
            NOW + 1,
        )
        .unwrap()
        .unwrap();
    assert_eq!(v2.value, json!({"step": 2, "done": {"-": "a"}}));
    match f.store.var_write(
        &f.a,
        Scope::Session,
        "plan",
        &VarOp::Set(json!(0)),
        Some(&v1.revision),
        NOW + 2,
    ) {
        Err(StoreError::VariableConflict { current, .. }) => {
            assert_eq!(current.as_deref(), Some(v2.revision.as_str()))
        }
        other => panic!("{other:?}"),
    }
    let list = f.store.var_list(&f.a, Scope::Session).unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].revision, v2.revision);
    f.store
        .var_write(
            &f.a,
            Scope::Session,
            "plan",
            &VarOp::Delete,
            Some(&v2.revision),
            NOW + 3,
        )
        .unwrap();
    assert!(
        f.store
            .var_get(&f.a, Scope::Session, "plan")
            .unwrap()
            .is_none()
    );
    let ops: Vec<String> = f
        .store
        .audit_log()
        .unwrap()
        .into_iter()
        .map(|a| a.op)
        .collect();
    assert_eq!(ops, ["variable_set", "variable_patch", "variable_delete"]);
}

#[test]
fn tool_bodies_refuse_bad_input_by_field() {
    let dir = tempfile::tempdir().unwrap();
    let shared = Shared::new(dir.path().join("m.sqlite3"), false);
    let w = who("s", dir.path());
    let err = |name: &str, args: Value| -> String {
        call(&shared, name, &args, &w, 1, NOW)
            .unwrap_err()
            .model_text()
    };
    let e = err(
        "memory_write",
        json!({"scope": "project", "kind": "semantic", "content": "x".repeat(65 * 1024)}),
    );
    assert!(e.starts_with("INVALID_ARGS: content:"), "{e}");
    let tags: Vec<String> = (0..33).map(|i| format!("t{i}")).collect();
    let e = err(
        "memory_write",
        json!({"scope": "project", "kind": "semantic", "content": "x", "tags": tags}),
    );
    assert!(e.starts_with("INVALID_ARGS: tags:"), "{e}");
    let e = err(
        "memory_write",
        json!({"scope": "project", "kind": "semantic", "content": "x", "importance": 1.5}),
    );
    assert!(e.starts_with("INVALID_ARGS: importance:"), "{e}");
    let e = err(
        "memory_write",
        json!({"scope": "session", "kind": "semantic", "content": "x", "session_id": "other"}),
    );
    assert!(
        e.starts_with("INVALID_ARGS: session_id: not an argument"),
        "{e}"
    );
    let e = err("memory_search", json!({"query": "x", "limit": 50}));
    assert!(e.starts_with("INVALID_ARGS: limit:"), "{e}");
    let e = err("memory_search", json!({"query": "x", "max_tokens": 5000}));
    assert!(e.starts_with("INVALID_ARGS: max_tokens:"), "{e}");
    let changes: Vec<Value> = (0..33)
        .map(|i| json!({"op": "set", "path": format!("/k{i}"), "value": i}))
        .collect();
    let e = err(
        "variable_patch",
        json!({"name": "v", "scope": "session", "changes": changes}),
    );
    assert!(e.starts_with("INVALID_ARGS: changes:"), "{e}");
    let e = err(
        "memory_write",
        json!({"scope": "global", "kind": "semantic", "content": "x"}),
    );
    assert!(e.starts_with("DENIED:"), "{e}");
    // A stale revision carries its own code and the current revision.
    let out = call(
        &shared,
        "memory_write",
        &json!({"scope": "project", "kind": "episodic", "content": "ran the migration"}),
        &w,
        1,
        NOW,
    )
    .unwrap();
    let v = out.value.unwrap();
    let id = v["id"].as_str().unwrap();
    let rev = v["revision"].as_str().unwrap();
    let e = call(
        &shared,
        "memory_forget",
        &json!({"id": id, "scope": "project", "expected_revision": "0000000000000000"}),
        &w,
        1,
        NOW,
    )
    .unwrap_err();
    assert!(
        e.model_text()
            .starts_with("MEMORY_REVISION_CONFLICT: expected_revision: record"),
        "{e}"
    );
    assert!(e.model_text().contains(rev), "{e}");
    assert_eq!(e.meta().unwrap()["error"], "MEMORY_REVISION_CONFLICT");
    assert_eq!(e.meta().unwrap()["current_revision"], rev);
    let e = call(
        &shared,
        "variable_set",
        &json!({"name": "v", "scope": "turn", "value": 1, "expected_revision": "abc"}),
        &w,
        1,
        NOW,
    )
    .unwrap_err();
    assert!(
        e.model_text().starts_with("VARIABLE_REVISION_CONFLICT:"),
        "{e}"
    );
}

#[test]
fn the_ten_schemas_stay_small() {
    let n = schema_bytes();
    eprintln!("memory + variable tool schemas: {n} bytes of compact JSON");
    assert!(n <= 3300, "{n} bytes");
}

// --- two processes ---------------------------------------------------------------------------

const ROUNDS: usize = 40;

fn counter(store: &MemoryStore, w: &Identity, id: &str) -> (i64, String) {
    let r = store.read(w, Scope::Project, id, NOW).unwrap();
    (r.content.trim().parse().unwrap(), r.revision)
}

/// The child of `two_processes_writing_concurrently_lose_no_update`: increments the counter
/// record ROUNDS times by read → update(expected_revision), retrying on a conflict.
#[test]
#[ignore = "the child process of the two-writer test"]
fn cas_child() {
    let Ok(spec) = std::env::var("KEEL_MEMORY_CHILD") else {
        return;
    };
    let spec: Value = serde_json::from_str(&spec).unwrap();
    let path = PathBuf::from(spec["path"].as_str().unwrap());
    let work = PathBuf::from(spec["work"].as_str().unwrap());
    let id = spec["id"].as_str().unwrap();
    let w = Identity::new(spec["session"].as_str().unwrap(), &work, "main");
    let store = MemoryStore::open(&path).unwrap();
    let mut conflicts = 0;
    for _ in 0..ROUNDS {
        loop {
            let (n, rev) = counter(&store, &w, id);
            let c = Changes {
                content: Some((n + 1).to_string()),
                ..Changes::default()
            };
            match store.update(&w, Scope::Project, id, &rev, c, NOW) {
                Ok(_) => break,
                Err(StoreError::RevisionConflict { .. }) => conflicts += 1,
                Err(e) => panic!("{e}"),
            }
        }
    }
    eprintln!("child done, {conflicts} conflicts");
}

#[test]
fn two_processes_writing_concurrently_lose_no_update() {
    let f = fx();
    let r = f
        .store
        .write(&f.a, Scope::Project, new("0", 0.5), NOW)
        .unwrap();
    let spawn = |session: &str| {
        let spec = json!({
            "path": f.store.path(), "work": f.dir.path(), "id": r.id, "session": session,
        });
        std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "cas_child", "--nocapture"])
            .env("KEEL_MEMORY_CHILD", spec.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let kids = [spawn("child-1"), spawn("child-2")];
    for k in kids {
        let out = k.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let (n, _) = counter(&f.store, &f.a, &r.id);
    assert_eq!(n, 2 * ROUNDS as i64, "lost updates");
    let log = f.store.audit_log().unwrap();
    let updates = log.iter().filter(|a| a.op == "update").count();
    assert_eq!(updates, 2 * ROUNDS);
    // Each update moved from the previous revision: an unbroken chain.
    for pair in log.windows(2) {
        assert_eq!(pair[1].old_revision, pair[0].new_revision);
    }
    let actors: std::collections::HashSet<&str> =
        log.iter().skip(1).map(|a| a.actor.as_str()).collect();
    assert_eq!(actors.len(), 2, "both children wrote");
}
