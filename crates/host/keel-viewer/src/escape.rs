//! Escaping untrusted text into HTML and SVG: every byte of session text, tool output, node id
//! and label reaches the page through [`text`] (element content and attribute values alike), so
//! markup inside a tool result (`</script>`, `<img onerror=…>`) renders as the characters it is.
//! Long text is cut by [`capped`] at a character boundary with a note of what was left out.

use std::fmt::Write as _;

/// Append `s` to `out` with `&`, `<`, `>`, `"` and `'` replaced by character references, and
/// every control character other than tab, newline and carriage return dropped (they are not
/// allowed in an HTML document and would make a browser or an XML reader of the SVG stop).
pub fn text(out: &mut String, s: &str) {
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let rep = match b {
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'"' => "&quot;",
            b'\'' => "&#39;",
            b'\t' | b'\n' | b'\r' => continue,
            0..=0x1f | 0x7f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        out.push_str(rep);
        start = i + 1;
    }
    out.push_str(&s[start..]);
}

/// `s` escaped, as a new string.
pub fn escaped(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    text(&mut out, s);
    out
}

/// Append at most `max` bytes of `s` (cut at a character boundary), escaped, and say how many
/// bytes were left out.
pub fn capped(out: &mut String, s: &str, max: usize) {
    if s.len() <= max {
        text(out, s);
        return;
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    text(out, &s[..cut]);
    let _ = write!(
        out,
        "\n… {} more bytes not shown (`keel sessions show ID --json` has the whole text)",
        s.len() - cut
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn markup_and_quotes_become_references_and_controls_go() {
        assert_eq!(
            escaped("</script><img src=x onerror=\"alert('1')\">&amp;\u{1}\u{7f}\tok\n"),
            "&lt;/script&gt;&lt;img src=x onerror=&quot;alert(&#39;1&#39;)&quot;&gt;&amp;amp;\tok\n"
        );
        assert_eq!(escaped("héllo — 你好"), "héllo — 你好");
    }

    #[test]
    fn capping_cuts_at_a_character_boundary_and_says_how_much_is_left() {
        let mut out = String::new();
        capped(&mut out, "aé<b", 2);
        assert_eq!(
            out,
            "a\n… 4 more bytes not shown (`keel sessions show ID --json` has the whole text)"
        );
        let mut out = String::new();
        capped(&mut out, "<b>", 3);
        assert_eq!(out, "&lt;b&gt;");
    }
}
