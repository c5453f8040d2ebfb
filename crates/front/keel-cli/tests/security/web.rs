//! (filled in by the change that closes this hole)
