//! keel-jcs: canonical JSON (RFC 8785, "JCS"), the strict guard that runs before anything is
//! hashed, and SHA-256 digests of canonical bytes ([`digest`]). A leaf crate: any plugin crate may
//! use it without depending on another plugin.
//!
//! Data flow: a value (a `serde_json::Value`, a typed [`Payload`] tree built from borrowed pieces,
//! or raw JSON text parsed by [`parse_strict`]) is written by [`write_value`] / [`write_payload`]
//! into a byte buffer: object members sorted by UTF-16 code units, numbers in ECMAScript's
//! `Number.prototype.toString` form (shortest round trip, `1e+30`, `-0` → `0`), strings with the
//! minimal escapes, UTF-8 output, no whitespace. The bytes are what [`digest`] hashes.
//!
//! The guard: values that JCS cannot represent are refused with a typed [`JcsError`] instead of
//! being approximated: NaN and ±∞ (only reachable through `f64` inputs or number literals that
//! overflow), lone UTF-16 surrogates (only reachable through raw text such as `"\ud800"`, since a
//! Rust `String` cannot hold one), duplicate member names, invalid JSON text, and nesting deeper
//! than [`MAX_DEPTH`] (refused rather than risking the stack).
//!
//! Integers outside ±2^53 are canonicalized the way ECMAScript reads them: as the nearest IEEE
//! double (`12345678901234567890` → `12345678901234567000`).
#![deny(missing_docs)]

pub mod digest;
mod number;
mod parse;

pub use number::write_f64;
pub use parse::parse_strict;

use serde_json::Value;
use std::cmp::Ordering;

/// Deepest nesting of arrays/objects accepted by the canonicalizer and the parser.
pub const MAX_DEPTH: usize = 256;

/// Why a value could not be canonicalized.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JcsError {
    /// A number is NaN or infinite (an `f64` input, or a literal such as `1e400`). (keel's
    /// provenance recorder treats this as a capture failure; the tool result is unaffected.)
    #[error("number is not finite (NaN or infinity) at byte {offset}")]
    NonFinite {
        /// Byte offset in the input text (0 for non-text inputs).
        offset: usize,
    },
    /// A `\uD800`–`\uDFFF` escape without its partner. Refused: JCS has no spelling for it.
    #[error("lone UTF-16 surrogate \\u{code:04x} at byte {offset}")]
    LoneSurrogate {
        /// The surrogate code unit.
        code: u16,
        /// Byte offset of the escape in the input text.
        offset: usize,
    },
    /// An object names the same member twice (I-JSON forbids it; which one wins is ambiguous).
    #[error("duplicate member name {key:?} at byte {offset}")]
    DuplicateKey {
        /// The repeated name.
        key: String,
        /// Byte offset of the second occurrence.
        offset: usize,
    },
    /// Nesting deeper than [`MAX_DEPTH`].
    #[error("nesting deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// The text is not JSON.
    #[error("not JSON at byte {offset}: {what}")]
    Syntax {
        /// Byte offset of the problem.
        offset: usize,
        /// What was expected or found.
        what: &'static str,
    },
}

/// A value to canonicalize, built without copying the caller's data (e.g. the provenance
/// recorder assembles stage payloads from borrowed pieces).
#[derive(Debug, Clone, Copy)]
pub enum Payload<'a> {
    /// JSON `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// A string.
    Str(&'a str),
    /// An unsigned integer.
    U64(u64),
    /// A float; NaN and ±∞ are refused.
    F64(f64),
    /// A borrowed `serde_json::Value`.
    Value(&'a Value),
    /// Raw JSON text, parsed strictly (lone surrogates, duplicate keys, overflow refused).
    RawJson(&'a str),
    /// An object; member order is irrelevant (sorted on output), names must be distinct.
    Obj(&'a [(&'a str, Payload<'a>)]),
    /// An array of payloads.
    Arr(&'a [Payload<'a>]),
}

/// Canonical bytes of a `serde_json::Value`.
pub fn to_canonical_vec(value: &Value) -> Result<Vec<u8>, JcsError> {
    let mut out = Vec::with_capacity(128);
    write_value(&mut out, value)?;
    Ok(out)
}

/// Canonical text of raw JSON text (the strict guard runs first).
pub fn canonicalize_str(text: &str) -> Result<String, JcsError> {
    let value = parse_strict(text)?;
    let bytes = to_canonical_vec(&value)?;
    // The writer only emits UTF-8 taken from `str`s and ASCII.
    String::from_utf8(bytes).map_err(|_| JcsError::Syntax {
        offset: 0,
        what: "invalid UTF-8",
    })
}

/// Append the canonical bytes of `value` to `out`. On error `out` may hold a partial write.
pub fn write_value(out: &mut Vec<u8>, value: &Value) -> Result<(), JcsError> {
    write_value_at(out, value, 0)
}

fn write_value_at(out: &mut Vec<u8>, value: &Value, depth: usize) -> Result<(), JcsError> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => number::write_number(out, n)?,
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            if depth >= MAX_DEPTH {
                return Err(JcsError::TooDeep);
            }
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value_at(out, item, depth + 1)?;
            }
            out.push(b']');
        }
        Value::Object(map) => {
            if depth >= MAX_DEPTH {
                return Err(JcsError::TooDeep);
            }
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| cmp_utf16(a.0, b.0));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, k);
                out.push(b':');
                write_value_at(out, v, depth + 1)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

/// Append the canonical bytes of a [`Payload`] to `out`.
pub fn write_payload(out: &mut Vec<u8>, payload: &Payload<'_>) -> Result<(), JcsError> {
    write_payload_at(out, payload, 0)
}

fn write_payload_at(
    out: &mut Vec<u8>,
    payload: &Payload<'_>,
    depth: usize,
) -> Result<(), JcsError> {
    match *payload {
        Payload::Null => out.extend_from_slice(b"null"),
        Payload::Bool(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
        Payload::Str(s) => write_str(out, s),
        Payload::U64(n) => number::write_u64(out, n),
        Payload::F64(x) => write_f64(out, x)?,
        Payload::Value(v) => write_value_at(out, v, depth)?,
        Payload::RawJson(text) => {
            let v = parse_strict(text)?;
            write_value_at(out, &v, depth)?;
        }
        Payload::Arr(items) => {
            if depth >= MAX_DEPTH {
                return Err(JcsError::TooDeep);
            }
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_payload_at(out, item, depth + 1)?;
            }
            out.push(b']');
        }
        Payload::Obj(members) => {
            if depth >= MAX_DEPTH {
                return Err(JcsError::TooDeep);
            }
            let mut sorted: Vec<&(&str, Payload<'_>)> = members.iter().collect();
            sorted.sort_by(|a, b| cmp_utf16(a.0, b.0));
            for pair in sorted.windows(2) {
                if pair[0].0 == pair[1].0 {
                    return Err(JcsError::DuplicateKey {
                        key: pair[0].0.to_owned(),
                        offset: 0,
                    });
                }
            }
            out.push(b'{');
            for (i, (k, v)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, k);
                out.push(b':');
                write_payload_at(out, v, depth + 1)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

/// Order two member names by their UTF-16 code units, as RFC 8785 §3.2.3 requires.
pub fn cmp_utf16(a: &str, b: &str) -> Ordering {
    if a.is_ascii() && b.is_ascii() {
        return a.as_bytes().cmp(b.as_bytes());
    }
    a.encode_utf16().cmp(b.encode_utf16())
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Bytes that JCS escapes: control characters, `"` and `\\`.
const NEEDS_ESCAPE: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// Whether any byte of `w` is below 0x20, `"` or `\\` (SWAR: a zero byte after XOR / a borrow
/// after subtraction sets that byte's high bit; bytes ≥ 0x80 are masked out).
#[inline]
fn needs_escape_word(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let below_space = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    (below_space | has_zero(w ^ (ONES * u64::from(b'"'))) | has_zero(w ^ (ONES * u64::from(b'\\'))))
        != 0
}

/// Append a JSON string literal with JCS's minimal escapes.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    // Fast path: most strings (ids, hex digests, names) need no escape; check 8 bytes at a time.
    let mut clean = 0;
    while clean + 8 <= bytes.len() {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[clean..clean + 8]);
        if needs_escape_word(u64::from_le_bytes(w)) {
            break;
        }
        clean += 8;
    }
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate().skip(clean) {
        if !NEEDS_ESCAPE[usize::from(b)] {
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            _ => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xf)]);
            }
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn canon(text: &str) -> String {
        match canonicalize_str(text) {
            Ok(s) => s,
            Err(e) => panic!("{text}: {e}"),
        }
    }

    #[test]
    fn escapes_are_minimal() {
        assert_eq!(
            canon(r#""\u0001\u001f\b\f\n\r\t\"\\\/\u007f\u2028""#),
            "\"\\u0001\\u001f\\b\\f\\n\\r\\t\\\"\\\\/\u{7f}\u{2028}\""
        );
    }

    #[test]
    fn word_fast_path_matches_per_byte_escaping() {
        // serde_json's string escaping is JCS's minimal set; compare at every position.
        for special in [
            '"',
            '\\',
            '\n',
            '\u{1}',
            '\u{1f}',
            '\u{7f}',
            'é',
            '\u{1f602}',
            ' ',
            '~',
        ] {
            for len in 0..24 {
                for pos in 0..=len {
                    let mut text: String = "abcdefghijklmnopqrstuvwxyz".chars().take(len).collect();
                    text.insert(pos.min(text.len()), special);
                    let mut out = Vec::new();
                    write_str(&mut out, &text);
                    let want = serde_json::to_string(&text).unwrap_or_default();
                    assert_eq!(String::from_utf8_lossy(&out), want, "{text:?}");
                }
            }
        }
    }

    #[test]
    fn keys_sort_by_utf16_not_utf8() {
        // U+FB33 (one unit 0xFB33) sorts after U+1F602 (surrogates 0xD83D…) in UTF-16 only.
        assert_eq!(
            canon("{\"\u{fb33}\":1,\"\u{1f602}\":2}"),
            "{\"\u{1f602}\":2,\"\u{fb33}\":1}"
        );
    }

    #[test]
    fn payload_objects_sort_and_refuse_duplicates() {
        let v = serde_json::json!({"z": [1, 2.5]});
        let members = [
            ("b", Payload::Value(&v)),
            ("a", Payload::F64(-0.0)),
            ("c", Payload::RawJson("[1E30]")),
        ];
        let mut out = Vec::new();
        assert_eq!(write_payload(&mut out, &Payload::Obj(&members)), Ok(()));
        assert_eq!(
            String::from_utf8_lossy(&out),
            r#"{"a":0,"b":{"z":[1,2.5]},"c":[1e+30]}"#
        );
        let dup = [("a", Payload::Null), ("a", Payload::Bool(true))];
        assert!(matches!(
            write_payload(&mut Vec::new(), &Payload::Obj(&dup)),
            Err(JcsError::DuplicateKey { .. })
        ));
    }

    #[test]
    fn deep_values_are_refused_not_overflowed() {
        let mut v = Value::Null;
        for _ in 0..(MAX_DEPTH + 5) {
            v = Value::Array(vec![v]);
        }
        assert_eq!(to_canonical_vec(&v), Err(JcsError::TooDeep));
        let text = "[".repeat(100_000);
        assert_eq!(canonicalize_str(&text), Err(JcsError::TooDeep));
    }
}
