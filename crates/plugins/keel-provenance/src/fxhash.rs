//! Fast non-cryptographic maps for the in-memory indexes. Keys are node ids (already SHA-256
//! hex) or small integers, so SipHash's flooding resistance buys nothing here and costs a third
//! of capture time. `rustc-hash` 2 (rustc's `FxHasher` with a finishing rotation, so the low
//! bits hashbrown buckets by are well mixed).

/// `HashMap` with the Fx hasher.
pub(crate) type FxMap<K, V> = rustc_hash::FxHashMap<K, V>;
/// `HashSet` with the Fx hasher.
pub(crate) type FxSet<K> = rustc_hash::FxHashSet<K>;
