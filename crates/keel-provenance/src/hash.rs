//! SHA-256 digests of canonical bytes and the prefixed ids built from them.

use sha2::{Digest, Sha256};

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `prefix` followed by the hex SHA-256 of `bytes` (e.g. `fact_…`).
pub fn prefixed_id(prefix: &str, bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut id = String::with_capacity(prefix.len() + 64);
    id.push_str(prefix);
    id.push_str(&hex::encode(digest));
    id
}

/// Whether `s` is 64 lower-case hex digits.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
