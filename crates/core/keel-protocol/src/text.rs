//! Character-safe text shortening, the one set of rules every view and front end uses (the
//! terminal UI, ACP titles, `keel sessions show`, the HTML page) and every log line a client
//! writes (the ACP client's account, the delegate providers' logs): one-line flattening, cutting
//! with an ellipsis, shortening with the full length noted, the first lines of long text and
//! compact tool-call arguments. Everything here counts characters, never bytes, so multi-byte
//! text is never cut inside a character. Pure functions from `&str` to `String`.
//!
//! The rules: [`one_line`] trims, shows line breaks as `⏎` and tabs and carriage returns as
//! spaces; [`cut`] keeps `max` characters and adds `…` when anything was cut (so a cut line is
//! `max + 1` characters: a caller fitting a width of `w` columns asks for `w - 1`).

/// `text` on one line (trimmed, newlines shown as `⏎`, tabs and carriage returns as spaces),
/// cut to `max` characters (see [`cut`]).
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = text
        .trim()
        .chars()
        .map(|c| match c {
            '\n' => '⏎',
            '\r' | '\t' => ' ',
            c => c,
        })
        .collect();
    cut(&flat, max)
}

/// The first `max` characters of `s`, followed by `…` when anything was cut.
pub fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

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

/// Tool-call arguments as compact JSON (or the raw string, marked `(not JSON)`, when it is not
/// JSON), on one line and cut to `max` characters.
pub fn compact_args(raw: &str, max: usize) -> String {
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(v) => one_line(&sorted_keys(v).to_string(), max),
        Err(_) => format!("{} (not JSON)", one_line(raw, max)),
    }
}

/// `value` with the keys of every object in sorted order, so that what is shown does not depend
/// on whether serde_json keeps insertion order (its `preserve_order` feature, which a
/// dependency of the workspace turns on for every crate built with it).
pub fn sorted_keys(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<(String, serde_json::Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, sorted_keys(v)))
                    .collect(),
            )
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.into_iter().map(sorted_keys).collect())
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_show_with_sorted_keys_whatever_order_they_came_in() {
        assert_eq!(
            compact_args(r#"{"b":1,"a":{"d":[{"z":0,"y":1}],"c":2}}"#, 100),
            r#"{"a":{"c":2,"d":[{"y":1,"z":0}]},"b":1}"#
        );
    }

    #[test]
    fn shortening_counts_characters_not_bytes() {
        assert_eq!(one_line("héllo\nwörld", 7), "héllo⏎w…");
        assert_eq!(one_line("  a\tb\r\n", 10), "a b");
        assert_eq!(cut("ééé", 2), "éé…");
        assert_eq!(cut("ééé", 3), "ééé");
        assert_eq!(cut("", 0), "");
        assert_eq!(abbrev("abcdef", 3), "abc… [6 chars]");
        assert_eq!(
            first_lines("a\nb\nc\n", 2, 10),
            "a\nb\n… (3 lines, 6 chars in all)\n"
        );
    }

    #[test]
    fn arguments_are_compacted_or_marked() {
        assert_eq!(compact_args("{ \"a\" : 1 }", 50), "{\"a\":1}");
        assert_eq!(compact_args("{oops", 50), "{oops (not JSON)");
        assert_eq!(compact_args("{\"k\": \"vvvvv\"}", 5), "{\"k\":…");
    }
}
