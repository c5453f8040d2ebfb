//! Small text helpers of the `sessions` renderers: UTC timestamps, and the shortening rules
//! every view shares ([`one_line`], [`abbrev`], [`first_lines`], [`compact_args`]),
//! which live in keel-session's [`keel_session::view::text`] and are re-exported here.

use keel_protocol::TimeMs;
pub use keel_session::view::text::{abbrev, compact_args, first_lines, one_line};

/// `YYYY-MM-DD HH:MM:SS UTC` for ms since the Unix epoch.
pub fn format_time(ms: TimeMs) -> String {
    keel_protocol::utc_time(ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn times_are_utc_calendar_dates() {
        assert_eq!(format_time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(format_time(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(format_time(1_796_002_876_989), "2026-11-30 01:41:16 UTC");
        assert_eq!(format_time(-1000), "1969-12-31 23:59:59 UTC");
    }
}
