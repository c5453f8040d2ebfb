//! SHA-256 digests of canonical bytes and the prefixed ids built from them.

use sha2::{Digest, Sha256};

const HEX: &[u8; 16] = b"0123456789abcdef";

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
