//! RFC 8785 conformance: the official vectors byte for byte, the strict guard, and properties
//! (idempotence; independence from key order and whitespace; number round trip).

use keel_jcs::{self as jcs, JcsError, canonicalize_str, parse_strict, to_canonical_vec};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::Value;
use std::path::PathBuf;

fn vectors_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata");
    assert!(
        dir.join("input").is_dir(),
        "JCS vectors not found at {} (see testdata/README.md)",
        dir.display()
    );
    dir
}

#[test]
fn every_official_vector_matches_byte_for_byte() {
    let dir = vectors_dir();
    let mut cases = 0;
    let mut entries: Vec<_> = std::fs::read_dir(dir.join("input"))
        .map_or_else(|e| panic!("{e}"), |r| r.flatten().collect());
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let input =
            std::fs::read_to_string(entry.path()).unwrap_or_else(|e| panic!("{name:?}: {e}"));
        let expected = std::fs::read(dir.join("output").join(&name))
            .unwrap_or_else(|e| panic!("{name:?}: {e}"));
        let hex_name = PathBuf::from(&name).with_extension("txt");
        let hex_text = std::fs::read_to_string(dir.join("outhex").join(hex_name))
            .unwrap_or_else(|e| panic!("{name:?}: {e}"));
        let from_hex: Vec<u8> = hex_text
            .split_whitespace()
            .map(|h| u8::from_str_radix(h, 16).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        assert_eq!(expected, from_hex, "{name:?}: output and outhex disagree");
        let actual = canonicalize_str(&input).unwrap_or_else(|e| panic!("{name:?}: {e}"));
        assert_eq!(String::from_utf8_lossy(&expected), actual, "{name:?}");
        assert_eq!(expected, actual.as_bytes(), "{name:?}");
        cases += 1;
    }
    assert_eq!(cases, 6, "expected the six upstream vectors");
}

#[test]
fn strict_guard_gives_typed_errors() {
    assert!(matches!(
        canonicalize_str(r#"{"a":"\ud800"}"#),
        Err(JcsError::LoneSurrogate { code: 0xd800, .. })
    ));
    assert!(matches!(
        canonicalize_str(r#"["\udfff\ud800"]"#),
        Err(JcsError::LoneSurrogate { code: 0xdfff, .. })
    ));
    assert!(matches!(
        canonicalize_str("[1e999]"),
        Err(JcsError::NonFinite { .. })
    ));
    assert!(matches!(
        canonicalize_str("NaN"),
        Err(JcsError::Syntax { .. })
    ));
    assert!(matches!(
        canonicalize_str("{\"a\":1,\"a\":1}"),
        Err(JcsError::DuplicateKey { .. })
    ));
    let mut out = Vec::new();
    assert_eq!(
        jcs::write_f64(&mut out, f64::NAN),
        Err(JcsError::NonFinite { offset: 0 })
    );
    assert_eq!(
        jcs::write_f64(&mut out, f64::NEG_INFINITY),
        Err(JcsError::NonFinite { offset: 0 })
    );
    let members = [("x", jcs::Payload::F64(f64::INFINITY))];
    assert!(jcs::write_payload(&mut out, &jcs::Payload::Obj(&members)).is_err());
}

/// A JSON tree whose objects are member lists (order and duplicates under our control).
#[derive(Debug, Clone)]
enum Tree {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Arr(Vec<Tree>),
    Obj(Vec<(String, Tree)>),
}

fn tree() -> impl Strategy<Value = Tree> {
    let leaf = prop_oneof![
        Just(Tree::Null),
        any::<bool>().prop_map(Tree::Bool),
        any::<i64>().prop_map(Tree::Int),
        any::<f64>()
            .prop_filter("finite", |x| x.is_finite())
            .prop_map(Tree::Float),
        prop_oneof![Just(1e21), Just(1e-7), Just(-0.0), Just(5e-324), Just(0.1)]
            .prop_map(Tree::Float),
        "\\PC{0,8}".prop_map(Tree::Str),
        "[\u{0}-\u{1f}\"\\\\a\u{e000}-\u{e010}\u{10000}-\u{10010}]{0,6}".prop_map(Tree::Str),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Tree::Arr),
            prop::collection::btree_map("[a-c\u{e9}\u{fb33}\u{1f602}]{0,3}", inner, 0..6)
                .prop_map(|m| Tree::Obj(m.into_iter().collect())),
        ]
    })
}

/// Serialize with a member order chosen by `rot` and whitespace chosen by `ws`.
fn write_tree(t: &Tree, rot: usize, ws: &str, out: &mut String) {
    match t {
        Tree::Null => out.push_str("null"),
        Tree::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Tree::Int(i) => out.push_str(&i.to_string()),
        Tree::Float(x) => out.push_str(&format!("{x:e}")),
        Tree::Str(s) => {
            out.push('"');
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    c if (c as u32) < 0x20 || (c as u32) > 0xffff => {
                        let mut buf = [0u16; 2];
                        for unit in c.encode_utf16(&mut buf) {
                            out.push_str(&format!("\\u{unit:04X}"));
                        }
                    }
                    c => out.push(c),
                }
            }
            out.push('"');
        }
        Tree::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(ws);
                write_tree(item, rot, ws, out);
            }
            out.push_str(ws);
            out.push(']');
        }
        Tree::Obj(members) => {
            out.push('{');
            let n = members.len();
            for i in 0..n {
                let (k, v) = &members[(i + rot) % n];
                if i > 0 {
                    out.push(',');
                }
                out.push_str(ws);
                write_tree(&Tree::Str(k.clone()), rot, ws, out);
                out.push_str(ws);
                out.push(':');
                out.push_str(ws);
                write_tree(v, rot, ws, out);
            }
            out.push_str(ws);
            out.push('}');
        }
    }
}

proptest! {
    #[test]
    fn canonical_form_is_idempotent_and_order_and_whitespace_independent(
        t in tree(), rot in 0usize..5, ws in prop_oneof![Just(""), Just(" "), Just("\n\t "), Just("\r\n")]
    ) {
        let mut compact = String::new();
        write_tree(&t, 0, "", &mut compact);
        let mut shuffled = String::new();
        write_tree(&t, rot, ws, &mut shuffled);
        let a = canonicalize_str(&compact).map_err(|e| TestCaseError::fail(format!("{e}: {compact}")))?;
        let b = canonicalize_str(&shuffled).map_err(|e| TestCaseError::fail(format!("{e}: {shuffled}")))?;
        prop_assert_eq!(&a, &b);
        let again = canonicalize_str(&a).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&a, &again);
        // The canonical text means the same value (numbers read back to the same doubles).
        let original: Value = parse_strict(&compact).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let reread: Value = parse_strict(&a).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(to_canonical_vec(&original).ok(), to_canonical_vec(&reread).ok());
    }

    #[test]
    fn every_finite_double_round_trips(x in any::<f64>().prop_filter("finite", |x| x.is_finite())) {
        let mut out = Vec::new();
        prop_assert!(jcs::write_f64(&mut out, x).is_ok());
        let text = String::from_utf8(out).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let back: f64 = text.parse().map_err(|_| TestCaseError::fail(text.clone()))?;
        prop_assert_eq!(back, if x == 0.0 { 0.0 } else { x }, "{}", text);
    }
}
