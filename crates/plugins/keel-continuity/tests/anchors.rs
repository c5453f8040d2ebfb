//! Anchors on a real `$KEEL_HOME`: permissions, conflicts, corrupt and foreign files, and a
//! crash between the temp write and the rename.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_continuity::anchors::{AnchorError, Anchors, Delegation, InitialMessage, Source};
use std::os::unix::fs::PermissionsExt;

fn source(seq: u64, id: &str, digest_of: &str) -> Source {
    Source {
        seq,
        event_id: id.to_owned(),
        digest: keel_continuity::anchors::text_digest(digest_of),
    }
}

fn mode(p: &std::path::Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn authority_is_private_ids_and_digests_only_and_refuses_a_conflict() {
    let home = tempfile::tempdir().unwrap();
    let anchors = Anchors::new(home.path());
    let a = source(7, "m-1", "the codeword is ZEBRA-7");
    assert_eq!(
        anchors.anchor("root-1", std::slice::from_ref(&a)).unwrap(),
        1
    );
    // Idempotent: the same source again adds nothing and writes nothing.
    assert_eq!(
        anchors.anchor("root-1", std::slice::from_ref(&a)).unwrap(),
        0
    );
    let path = anchors.authority_path("root-1");
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    assert_eq!(mode(anchors.dir()), 0o700);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        !text.contains("ZEBRA"),
        "no prompt text in an anchor: {text}"
    );
    assert!(
        text.contains("\"schemaVersion\": 1") && text.contains("\"rootSessionId\": \"root-1\"")
    );
    // The file is named by the digest of the root id, not the id.
    assert!(!path.to_string_lossy().contains("root-1"));

    // Same seq and id, other digest: a hard error naming both digests and the file.
    let forged = source(7, "m-1", "the codeword is OKAPI-3");
    let e = anchors
        .anchor("root-1", std::slice::from_ref(&forged))
        .unwrap_err();
    assert!(matches!(e, AnchorError::Conflict { seq: 7, .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains(&a.digest) && msg.contains(&forged.digest),
        "{msg}"
    );
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    // Nothing was changed by the refused write.
    assert_eq!(anchors.authority("root-1").unwrap().sources, vec![a]);
}

#[test]
fn corrupt_foreign_and_future_files_are_refused_by_name() {
    let home = tempfile::tempdir().unwrap();
    let anchors = Anchors::new(home.path());
    anchors.anchor("root-1", &[source(1, "m", "x")]).unwrap();
    let path = anchors.authority_path("root-1");
    let good = std::fs::read_to_string(&path).unwrap();

    std::fs::write(&path, "{\"schemaVersion\": 1, \"rootSess").unwrap();
    let e = anchors.authority("root-1").unwrap_err();
    assert!(matches!(e, AnchorError::Invalid { .. }), "{e}");
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");

    // Another session's authority copied over this one.
    std::fs::write(&path, good.replace("root-1", "root-2")).unwrap();
    let e = anchors.authority("root-1").unwrap_err();
    assert!(e.to_string().contains("names root session root-2"), "{e}");

    std::fs::write(
        &path,
        good.replace("\"schemaVersion\": 1", "\"schemaVersion\": 2"),
    )
    .unwrap();
    let e = anchors.authority("root-1").unwrap_err();
    assert!(e.to_string().contains("schemaVersion 2"), "{e}");

    // A digest that is not a SHA-256.
    std::fs::write(
        &path,
        good.replace(&keel_continuity::anchors::text_digest("x"), "abc"),
    )
    .unwrap();
    assert!(anchors.authority("root-1").is_err());

    // Edits that add unknown keys are refused too (no silently trusted value).
    std::fs::write(&path, good.replacen('{', "{\"trusted\": true,", 1)).unwrap();
    assert!(anchors.authority("root-1").is_err());
}

#[test]
fn a_crash_between_temp_write_and_rename_leaves_the_old_anchor() {
    let home = tempfile::tempdir().unwrap();
    let anchors = Anchors::new(home.path());
    let a = source(3, "m-3", "first words");
    anchors.anchor("root-1", std::slice::from_ref(&a)).unwrap();
    let path = anchors.authority_path("root-1");
    // What a SIGKILL after the temp write and before the rename leaves: a half-written temp
    // file beside the anchor.
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let tmp = path.with_file_name(format!(".{name}.tmp-999999"));
    std::fs::write(&tmp, "{\"schemaVersion\": 1, \"rootSessionId\": \"root-1\", \"sources\": [{\"seq\": 3, \"eventId\": \"m-3\", \"dig").unwrap();
    assert_eq!(
        anchors.authority("root-1").unwrap().sources,
        vec![a.clone()]
    );
    // The next write replaces the anchor atomically and the new source is kept.
    let b = source(9, "m-9", "more words");
    anchors.anchor("root-1", std::slice::from_ref(&b)).unwrap();
    assert_eq!(anchors.authority("root-1").unwrap().sources, vec![a, b]);
}

#[test]
fn a_delegation_is_written_once() {
    let home = tempfile::tempdir().unwrap();
    let anchors = Anchors::new(home.path());
    let d = Delegation {
        schema_version: 1,
        child_session_id: "child".into(),
        parent_session_id: "parent".into(),
        root_session_id: "root".into(),
        initial_message: InitialMessage {
            id: "m-1".into(),
            digest: keel_continuity::anchors::text_digest("do the thing"),
        },
    };
    assert_eq!(anchors.delegation("child").unwrap(), None);
    anchors.record_delegation(&d).unwrap();
    anchors.record_delegation(&d).unwrap();
    assert_eq!(anchors.delegation("child").unwrap(), Some(d.clone()));
    let mut other = d.clone();
    other.initial_message.digest = keel_continuity::anchors::text_digest("another thing");
    assert!(matches!(
        anchors.record_delegation(&other),
        Err(AnchorError::Conflict { .. })
    ));
    assert_eq!(mode(&anchors.delegation_path("child")), 0o600);
    // A delegation file naming another child is refused.
    std::fs::copy(
        anchors.delegation_path("child"),
        anchors.delegation_path("other"),
    )
    .unwrap();
    let e = anchors.delegation("other").unwrap_err();
    assert!(e.to_string().contains("names child session child"), "{e}");
}
