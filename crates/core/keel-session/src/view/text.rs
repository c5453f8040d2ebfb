//! Character-safe text shortening for views: one-line flattening, cutting with an ellipsis and
//! compact tool-call arguments. Everything here counts characters, never bytes, so multi-byte
//! text is never cut inside a character. Pure functions from `&str` to `String`.

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
    use pretty_assertions::assert_eq;

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
    }

    #[test]
    fn arguments_are_compacted_or_marked() {
        assert_eq!(compact_args("{ \"a\" : 1 }", 50), "{\"a\":1}");
        assert_eq!(compact_args("{oops", 50), "{oops (not JSON)");
        assert_eq!(compact_args("{\"k\": \"vvvvv\"}", 5), "{\"k\":…");
    }
}
