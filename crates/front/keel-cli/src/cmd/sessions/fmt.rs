//! Small text helpers of the `sessions` renderers: shortening with the full length noted,
//! the first lines of long text and UTC timestamps. The character-safe primitives
//! ([`one_line`], [`cut`], [`compact_args`]) live in keel-session's [`keel_session::view::text`]
//! (the views use them too) and are re-exported here; everything counts characters, never
//! bytes, so multi-byte text is never cut inside a character.

use keel_protocol::TimeMs;
pub use keel_session::view::text::{compact_args, cut, one_line};

/// Like [`one_line`], noting how long the whole text was when cut.
pub fn abbrev(text: &str, max: usize) -> String {
    let n = text.trim().chars().count();
    if n <= max {
        one_line(text, max)
    } else {
        format!("{} [{n} chars]", one_line(text, max))
    }
}

/// The first `lines` lines of `text`, each cut to `width` characters, with a last line saying
/// how much was left out.
pub fn first_lines(text: &str, lines: usize, width: usize) -> String {
    let total_lines = text.lines().count();
    let mut out = String::new();
    for line in text.lines().take(lines) {
        out.push_str(&cut(line, width));
        out.push('\n');
    }
    if total_lines > lines {
        out.push_str(&format!(
            "… ({total_lines} lines, {} chars in all)\n",
            text.chars().count()
        ));
    } else if total_lines == 0 {
        out.push_str("(empty)\n");
    }
    out
}

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

    #[test]
    fn shortening_counts_characters() {
        assert_eq!(one_line("héllo\nwörld", 7), "héllo⏎w…");
        assert_eq!(abbrev("abcdef", 3), "abc… [6 chars]");
        assert_eq!(
            first_lines("a\nb\nc\n", 2, 10),
            "a\nb\n… (3 lines, 6 chars in all)\n"
        );
        assert_eq!(compact_args("{ \"a\" : 1 }", 50), "{\"a\":1}");
        assert_eq!(compact_args("{oops", 50), "{oops (not JSON)");
    }
}
