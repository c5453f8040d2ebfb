//! SHA-256 digests of canonical bytes and the prefixed ids built from them.
//!
//! Data flow: canonical bytes (from [`crate::write_value`] / [`crate::write_payload`], or any
//! bytes) → SHA-256 → lower-case hex, appended to a caller's buffer ([`push_hex`]) or returned
//! ([`sha256_hex`], [`prefixed_id`]). [`is_sha256_hex`] checks text read back from a file.

use crate::HEX;
use sha2::{Digest, Sha256};

/// Append the lower-case hex of `bytes` to `out`.
pub fn push_hex(out: &mut String, bytes: &[u8]) {
    out.reserve(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(64);
    push_hex(&mut s, &Sha256::digest(bytes));
    s
}

/// `prefix` followed by the hex SHA-256 of `bytes` (e.g. `fact_…`).
pub fn prefixed_id(prefix: &str, bytes: &[u8]) -> String {
    let mut id = String::with_capacity(prefix.len() + 64);
    id.push_str(prefix);
    push_hex(&mut id, &Sha256::digest(bytes));
    id
}

/// Whether `s` is 64 lower-case hex digits.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_lower_case_hex_of_sha256() {
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(sha256_hex(b""), empty);
        assert!(is_sha256_hex(empty));
        assert!(!is_sha256_hex(&empty.to_uppercase()));
        assert!(!is_sha256_hex(&empty[1..]));
        assert_eq!(prefixed_id("fact_", b""), format!("fact_{empty}"));
        let mut s = String::from("x");
        push_hex(&mut s, &[0x00, 0xab, 0xff]);
        assert_eq!(s, "x00abff");
    }
}
