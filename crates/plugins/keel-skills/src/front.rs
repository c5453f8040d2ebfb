//! The front matter of a skill file: the block between a first line `---` and the next `---`
//! (or `...`), read as the small subset of YAML skills use.
//!
//! No YAML crate: the one in the lock file (`serde_yaml`) is deprecated, and a skill's front
//! matter is a flat mapping. Read here:
//!
//! - `key: value` at the start of a line; keys are unique (a repeated key is an error);
//! - values plain (a trailing ` # comment` dropped; following more-indented lines folded in
//!   with spaces), `"double"` (escapes `\" \\ \n \t \r \/ \uXXXX`) or `'single'` (`''` is a
//!   quote) quoted, or block scalars `|` / `>` (with `-` / `+`), whose more-indented lines
//!   follow;
//! - a key with nothing after the colon followed by indented lines or `- ` items (a nested map
//!   or list such as `metadata:` or `allowed-tools:`) is kept as [`Value::Nested`], which the
//!   skill fields never use;
//! - `#` comment lines and blank lines.
//!
//! Anything else at the start of a line is an error naming the line: a skill file with broken
//! front matter is skipped with a warning rather than guessed at.

use std::collections::BTreeMap;

/// A front-matter value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A scalar, unquoted and unescaped.
    Text(String),
    /// A nested mapping or list (not read further).
    Nested,
}

/// What is wrong with a file's front matter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontError {
    /// The file does not start with a `---` line.
    #[error("no front matter (the file must start with a `---` line)")]
    Missing,
    /// No closing `---` line.
    #[error("the front matter is not closed (no second `---` line)")]
    Unclosed,
    /// A line that is not `key: value`.
    #[error("front matter line {line}: {why}")]
    Line {
        /// 1-based line number in the file.
        line: usize,
        /// What is wrong.
        why: LineError,
    },
}

/// What is wrong with a front-matter line ([`FrontError::Line`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// A line indented with a tab.
    #[error("tabs cannot indent YAML")]
    Tab,
    /// An indented line that belongs to no key.
    #[error("unexpected indented line {0:?}")]
    Indented(String),
    /// A line without a colon.
    #[error("expected `key: value`, found {0:?}")]
    NotKeyValue(String),
    /// An empty key, or one with spaces that is not quoted.
    #[error("not a key: {0:?}")]
    NotAKey(String),
    /// `key:value` without the space.
    #[error("expected a space after `{0}:` (a value like `a:b` needs quotes)")]
    NoSpace(String),
    /// A key given twice.
    #[error("the key `{0}` is given twice")]
    Twice(String),
    /// A block scalar header other than `|`/`>` with `-` or `+`.
    #[error("unsupported block scalar header {0:?}")]
    BlockHeader(String),
    /// A plain value with `- ` items after it.
    #[error("a value followed by list items")]
    ValueThenList,
    /// A `\u` escape that is not four hex digits of a character.
    #[error("bad escape \\u{0}")]
    BadUnicode(String),
    /// An escape YAML does not have (the character after the backslash).
    #[error("unknown escape \\{0}")]
    UnknownEscape(char),
    /// A quoted string without its closing quote (`"` or `'`).
    #[error("unterminated {0}-quoted string")]
    Unterminated(&'static str),
    /// Text after the closing quote that is not a comment.
    #[error("text after the closing quote: {0:?}")]
    AfterQuote(String),
}

/// A file split into its front matter (keys in order of appearance are not kept: a map) and
/// the body after the closing line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document<'a> {
    /// The keys.
    pub fields: BTreeMap<String, Value>,
    /// The text after the closing line.
    pub body: &'a str,
}

/// Split `text` into front matter and body, parsing the front matter.
pub fn split(text: &str) -> Result<Document<'_>, FrontError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().ok_or(FrontError::Missing)?;
    if first.trim_end() != "---" {
        return Err(FrontError::Missing);
    }
    let mut offset = first.len();
    let mut head: Vec<&str> = Vec::new();
    let mut closed = None;
    for line in lines {
        let bare = line.trim_end();
        offset += line.len();
        if bare == "---" || bare == "..." {
            closed = Some(offset);
            break;
        }
        head.push(line.trim_end_matches(['\n', '\r']));
    }
    let end = closed.ok_or(FrontError::Unclosed)?;
    Ok(Document {
        fields: parse(&head)?,
        body: &text[end..],
    })
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn is_blank_or_comment(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

/// Parse the lines between the markers (line 2 of the file is `lines[0]`).
fn parse(lines: &[&str]) -> Result<BTreeMap<String, Value>, FrontError> {
    let mut out = BTreeMap::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let at = i + 2;
        let err = |why: LineError| FrontError::Line { line: at, why };
        i += 1;
        if is_blank_or_comment(line) {
            continue;
        }
        if line.starts_with('\t') {
            return Err(err(LineError::Tab));
        }
        if indent(line) > 0 {
            return Err(err(LineError::Indented(line.trim().to_owned())));
        }
        let Some((key, rest)) = line.split_once(':') else {
            return Err(err(LineError::NotKeyValue(line.trim().to_owned())));
        };
        let key = key.trim();
        if key.is_empty() || key.contains(char::is_whitespace) && !quoted(key) {
            return Err(err(LineError::NotAKey(key.to_owned())));
        }
        if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
            return Err(err(LineError::NoSpace(key.to_owned())));
        }
        // The lines that belong to this key: more indented, or blank/comment in between, or
        // `- ` items at column 0 (a list under the key).
        let start = i;
        while i < lines.len() {
            let l = lines[i];
            if l.trim().is_empty() || indent(l) > 0 || l.starts_with("- ") || l == "-" {
                i += 1;
            } else {
                break;
            }
        }
        let mut more = &lines[start..i];
        while let Some((last, rest)) = more.split_last() {
            if last.trim().is_empty() {
                more = rest;
            } else {
                break;
            }
        }
        let value = value(rest.trim(), more).map_err(err)?;
        let key = unquote_key(key);
        if out.insert(key.clone(), value).is_some() {
            return Err(err(LineError::Twice(key)));
        }
    }
    Ok(out)
}

fn quoted(s: &str) -> bool {
    s.len() >= 2
        && ((s.starts_with('"') && s.ends_with('"')) || (s.starts_with('\'') && s.ends_with('\'')))
}

fn unquote_key(key: &str) -> String {
    if quoted(key) {
        key[1..key.len() - 1].to_owned()
    } else {
        key.to_owned()
    }
}

/// The value of a key: `rest` after the colon, `more` the lines that belong to it.
fn value(rest: &str, more: &[&str]) -> Result<Value, LineError> {
    if rest.is_empty() || rest.starts_with('#') {
        return Ok(if more.iter().all(|l| is_blank_or_comment(l)) {
            Value::Text(String::new())
        } else {
            Value::Nested
        });
    }
    if let Some(style) = rest.strip_prefix(['|', '>']) {
        let folded = rest.starts_with('>');
        let chomp = style.split('#').next().unwrap_or("").trim();
        if !matches!(chomp, "" | "-" | "+") {
            return Err(LineError::BlockHeader(rest.to_owned()));
        }
        return Ok(Value::Text(block(more, folded, chomp)));
    }
    if rest.starts_with('[') || rest.starts_with('{') {
        return Ok(Value::Nested);
    }
    if let Some(inner) = rest.strip_prefix('"') {
        let joined = join_continued(inner, more);
        return double_quoted(&joined).map(Value::Text);
    }
    if let Some(inner) = rest.strip_prefix('\'') {
        let joined = join_continued(inner, more);
        return single_quoted(&joined).map(Value::Text);
    }
    if more.iter().any(|l| l.trim_start().starts_with("- ")) && more.iter().all(|l| indent(l) == 0)
    {
        return Err(LineError::ValueThenList);
    }
    let mut text = strip_comment(rest).to_owned();
    for l in more {
        let t = l.trim();
        if t.starts_with('#') {
            continue;
        }
        if t.is_empty() {
            text.push('\n');
        } else {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push(' ');
            }
            text.push_str(strip_comment(t));
        }
    }
    Ok(Value::Text(text))
}

/// A quoted scalar that goes on over the following lines: joined with single spaces.
fn join_continued(first: &str, more: &[&str]) -> String {
    let mut s = first.to_owned();
    for l in more {
        s.push(' ');
        s.push_str(l.trim());
    }
    s
}

fn strip_comment(s: &str) -> &str {
    match s.find(" #") {
        Some(at) => s[..at].trim_end(),
        None => s.trim_end(),
    }
}

/// A block scalar's lines: the indentation of the first non-blank line is removed; `|` keeps
/// line breaks, `>` folds lines into spaces (blank lines stay breaks); chomping `-` drops the
/// final break, `+` keeps trailing blank lines, default keeps one.
fn block(more: &[&str], folded: bool, chomp: &str) -> String {
    let width = more
        .iter()
        .find(|l| !l.trim().is_empty())
        .map(|l| indent(l))
        .unwrap_or(0);
    let mut out = String::new();
    let mut prev_blank = true;
    for l in more {
        let content = l.get(width..).unwrap_or("").trim_end();
        if content.is_empty() {
            // Folded: the first blank line after text is the break itself.
            if !folded || prev_blank {
                out.push('\n');
            }
            prev_blank = true;
            continue;
        }
        if folded && !prev_blank && !content.starts_with(' ') {
            if out.ends_with('\n') {
                out.pop();
            }
            out.push(' ');
        }
        out.push_str(content);
        out.push('\n');
        prev_blank = false;
    }
    match chomp {
        "+" => out,
        "-" => out.trim_end_matches('\n').to_owned(),
        _ => {
            let trimmed = out.trim_end_matches('\n');
            if trimmed.is_empty() {
                String::new()
            } else {
                format!("{trimmed}\n")
            }
        }
    }
}

fn double_quoted(s: &str) -> Result<String, LineError> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return after_close(chars.as_str()).map(|()| out),
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('r') => out.push('\r'),
                Some('0') => out.push('\0'),
                Some(c @ ('"' | '\\' | '/' | ' ')) => out.push(c),
                Some('u') => {
                    let hex: String = chars.by_ref().take(4).collect();
                    let c = u32::from_str_radix(&hex, 16)
                        .ok()
                        .and_then(char::from_u32)
                        .ok_or(LineError::BadUnicode(hex))?;
                    out.push(c);
                }
                other => return Err(LineError::UnknownEscape(other.unwrap_or(' '))),
            },
            c => out.push(c),
        }
    }
    Err(LineError::Unterminated("double"))
}

fn single_quoted(s: &str) -> Result<String, LineError> {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\'' {
            if chars.peek() == Some(&'\'') {
                chars.next();
                out.push('\'');
            } else {
                return after_close(&chars.collect::<String>()).map(|()| out);
            }
        } else {
            out.push(c);
        }
    }
    Err(LineError::Unterminated("single"))
}

/// What may follow a closing quote: nothing, or a comment.
fn after_close(rest: &str) -> Result<(), LineError> {
    let rest = rest.trim();
    if rest.is_empty() || rest.starts_with('#') {
        Ok(())
    } else {
        Err(LineError::AfterQuote(rest.to_owned()))
    }
}

/// A boolean field: `true` or `false` (any case).
pub fn boolean(value: &Value) -> Option<bool> {
    match value {
        Value::Text(t) if t.eq_ignore_ascii_case("true") => Some(true),
        Value::Text(t) if t.eq_ignore_ascii_case("false") => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    fn text(doc: &Document<'_>, key: &str) -> String {
        match &doc.fields[key] {
            Value::Text(t) => t.clone(),
            Value::Nested => panic!("{key} is nested"),
        }
    }

    #[test]
    fn plain_quoted_and_block_values() {
        let src = "---\nname: pdf-tools\ndescription: \"Fill \\\"forms\\\"\\n\" # note\nwhenToUse: 'it''s a PDF'\nlong: >\n  folded\n  lines\n\n  para\nkeep: |-\n  a\n    b\nplain: one\n  two # c\nmetadata:\n  version: 1\nallowed-tools:\n- Read\n- Bash\nflag: TRUE\n---\n# Body\ntext\n";
        let doc = split(src).unwrap();
        assert_eq!(text(&doc, "name"), "pdf-tools");
        assert_eq!(text(&doc, "description"), "Fill \"forms\"\n");
        assert_eq!(text(&doc, "whenToUse"), "it's a PDF");
        assert_eq!(text(&doc, "long"), "folded lines\npara\n");
        assert_eq!(text(&doc, "keep"), "a\n  b");
        assert_eq!(text(&doc, "plain"), "one two");
        assert_eq!(doc.fields["metadata"], Value::Nested);
        assert_eq!(doc.fields["allowed-tools"], Value::Nested);
        assert_eq!(boolean(&doc.fields["flag"]), Some(true));
        assert_eq!(doc.body, "# Body\ntext\n");
    }

    #[test]
    fn crlf_bom_and_dots_close() {
        let doc = split("\u{feff}---\r\nname: x\r\n...\r\nbody").unwrap();
        assert_eq!(text(&doc, "name"), "x");
        assert_eq!(doc.body, "body");
    }

    #[test]
    fn broken_front_matter_is_an_error_naming_the_line() {
        assert_eq!(split("# no front matter\n"), Err(FrontError::Missing));
        assert_eq!(split(""), Err(FrontError::Missing));
        assert_eq!(split("---\nname: x\n"), Err(FrontError::Unclosed));
        let e = split("---\nname: x\nthis is not yaml\n---\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "front matter line 3: expected `key: value`, found \"this is not yaml\""
        );
        let e = split("---\nname: x\nname: y\n---\n").unwrap_err();
        assert!(e.to_string().contains("given twice"), "{e}");
        let e = split("---\ndescription: \"open\n---\n").unwrap_err();
        assert!(e.to_string().contains("unterminated"), "{e}");
        let e = split("---\nname:x\n---\n").unwrap_err();
        assert!(e.to_string().contains("space after"), "{e}");
        let e = split("---\n  name: x\n---\n").unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        let e = split("---\ndescription: \"a\" b\n---\n").unwrap_err();
        assert!(e.to_string().contains("after the closing quote"), "{e}");
    }

    #[test]
    fn a_value_with_a_colon_and_urls_stay_whole() {
        let doc = split("---\ndescription: see https://x.y/z: ok\n---\n").unwrap();
        assert_eq!(text(&doc, "description"), "see https://x.y/z: ok");
    }
}
