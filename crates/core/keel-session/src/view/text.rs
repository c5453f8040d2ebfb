//! Character-safe text shortening, the one set of rules every view and front end uses: kept in
//! `keel_protocol::text` (below this crate, so clients that do not read sessions, such as the
//! ACP client, share it) and re-exported here for the views.

pub use keel_protocol::text::{abbrev, compact_args, cut, first_lines, one_line, sorted_keys};
