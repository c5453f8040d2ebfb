//! RFC 8785 canonicalisation ([`keel_jcs::parse_strict`] → [`keel_jcs::to_canonical_vec`],
//! [`keel_jcs::canonicalize_str`], [`keel_jcs::write_payload`] on raw text) and the digest of
//! the canonical bytes.
//!
//! Checked: nothing panics; the three entry points agree; the canonical text parses strictly
//! and canonicalises to itself (canon(parse(canon(x))) == canon(x)); serde_json's reading of
//! the same text canonicalises without panicking.
#![no_main]

use keel_jcs::{Payload, canonicalize_str, digest, parse_strict, to_canonical_vec, write_payload};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let via_str = canonicalize_str(text);
    let mut via_payload = Vec::new();
    let payload = write_payload(&mut via_payload, &Payload::RawJson(text));
    let value = match parse_strict(text) {
        Ok(v) => v,
        Err(e) => {
            assert_eq!(
                via_str,
                Err(e.clone()),
                "canonicalize_str disagrees with parse_strict"
            );
            assert_eq!(
                payload,
                Err(e),
                "write_payload(RawJson) disagrees with parse_strict"
            );
            return;
        }
    };
    let canon = match to_canonical_vec(&value) {
        Ok(c) => c,
        Err(e) => {
            assert_eq!(via_str, Err(e));
            return;
        }
    };
    let canon_text = std::str::from_utf8(&canon).expect("canonical bytes are UTF-8");
    assert_eq!(via_str.as_deref(), Ok(canon_text));
    assert_eq!(payload, Ok(()));
    assert_eq!(
        via_payload, canon,
        "write_payload(RawJson) differs from to_canonical_vec"
    );

    // Idempotence.
    let again = parse_strict(canon_text).expect("canonical text parses strictly");
    let canon2 = to_canonical_vec(&again).expect("canonical text canonicalises");
    assert_eq!(canon2, canon, "canonicalisation is not idempotent");

    // The same text read by serde_json (as callers holding a `Value` do) also canonicalises
    // without panicking. Not compared byte for byte: serde_json's default float parsing is
    // best-effort, not correctly rounded, and its nesting limit is lower.
    if let Ok(loose) = serde_json::from_str::<serde_json::Value>(text) {
        let _ = to_canonical_vec(&loose);
    }

    let hex = digest::sha256_hex(&canon);
    assert!(digest::is_sha256_hex(&hex));
    let id = digest::prefixed_id("sha256:", &canon);
    assert!(id.ends_with(&hex));
});
