//! The front matter of a subagent definition (`agents/*.md`, Claude Code's format): the block
//! between a first line `---` and the next `---` (or `...`), read as the flat subset of YAML
//! those files use. No YAML crate (the one in the lock file is deprecated).
//!
//! Read here: `key: value` lines; values plain (a trailing ` # comment` dropped; more-indented
//! lines after it folded in with spaces), `"double"` (escapes `\" \\ \n \t \r`) or `'single'`
//! (`''` is a quote) quoted, block scalars `|` / `>` (with `-` / `+`) whose indented lines
//! follow, lists as `- item` lines or `[a, b]`. Comment and blank lines are skipped, and so is
//! anything else this reader does not understand: only `name` decides whether a file is used.

use std::collections::BTreeMap;

/// One front-matter value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    /// A scalar, unquoted and unescaped.
    Text(String),
    /// A list (`- a` lines or `[a, b]`).
    List(Vec<String>),
}

impl Value {
    /// The scalar, or the items joined with `, `.
    pub(crate) fn text(&self) -> String {
        match self {
            Value::Text(t) => t.clone(),
            Value::List(items) => items.join(", "),
        }
    }

    /// The items: a list's, or a scalar's comma-separated parts; empty parts dropped.
    pub(crate) fn items(&self) -> Vec<String> {
        let parts: Vec<String> = match self {
            Value::List(items) => items.clone(),
            Value::Text(t) => {
                let t = t.trim();
                match t.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
                    Some(inner) => inner.split(',').map(unquote).collect(),
                    None => t.split(',').map(unquote).collect(),
                }
            }
        };
        parts
            .into_iter()
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty())
            .collect()
    }
}

/// A file split into its front matter and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Parsed {
    /// The keys read (a repeated key: the last wins).
    pub(crate) fields: BTreeMap<String, Value>,
    /// The rest of the file, trimmed.
    pub(crate) body: String,
}

/// Split `text` into front matter and body. A file that does not start with `---` has no
/// front matter (all of it is the body); an unclosed block is an error.
pub(crate) fn parse(text: &str) -> Result<Parsed, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    if lines.next().map(str::trim_end) != Some("---") {
        return Ok(Parsed {
            fields: BTreeMap::new(),
            body: text.trim().to_owned(),
        });
    }
    let mut block: Vec<&str> = Vec::new();
    let mut closed = false;
    for line in lines.by_ref() {
        if matches!(line.trim_end(), "---" | "...") {
            closed = true;
            break;
        }
        block.push(line);
    }
    if !closed {
        return Err("its front matter is not closed (no second `---` line)".into());
    }
    let body = lines.collect::<Vec<_>>().join("\n").trim().to_owned();
    Ok(Parsed {
        fields: fields(&block),
        body,
    })
}

/// The `key: value` entries of a front-matter block.
fn fields(block: &[&str]) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let mut i = 0;
    while i < block.len() {
        let line = block[i];
        i += 1;
        let top = !line.starts_with([' ', '\t']) && !line.starts_with("- ");
        if !top || line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let key = unquote(key);
        if key.is_empty() || key.contains(' ') {
            continue;
        }
        // The lines that belong to this key: indented ones and `- ` items.
        let start = i;
        while i < block.len()
            && (block[i].starts_with([' ', '\t'])
                || block[i].starts_with("- ")
                || block[i] == "-"
                || block[i].trim().is_empty())
        {
            i += 1;
        }
        let mut more: &[&str] = &block[start..i];
        while let [rest @ .., last] = more
            && last.trim().is_empty()
        {
            more = rest;
        }
        out.insert(key, value(rest.trim(), more));
    }
    out
}

fn value(first: &str, more: &[&str]) -> Value {
    let items: Vec<&str> = more
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    if first.is_empty() && !items.is_empty() && items.iter().all(|l| l.starts_with('-')) {
        return Value::List(
            items
                .iter()
                .map(|l| unquote(l.trim_start_matches('-')))
                .collect(),
        );
    }
    if let Some(style) = first.chars().next().filter(|c| matches!(c, '|' | '>'))
        && first[1..].chars().all(|c| matches!(c, '-' | '+'))
    {
        return Value::Text(block_scalar(style, more));
    }
    if first.starts_with('"') || first.starts_with('\'') {
        // A quoted scalar may run over several lines; they fold with spaces.
        let mut whole = first.to_owned();
        for l in more {
            whole.push(' ');
            whole.push_str(l.trim());
        }
        return Value::Text(unquote(&whole));
    }
    if first.starts_with('[') {
        return Value::List(Value::Text(first.to_owned()).items());
    }
    let mut text = strip_comment(first).to_owned();
    for l in items {
        text.push(' ');
        text.push_str(strip_comment(l));
    }
    Value::Text(text.trim().to_owned())
}

/// A `|` (lines kept) or `>` (lines folded) block: its lines less their common indent.
fn block_scalar(style: char, lines: &[&str]) -> String {
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let lines: Vec<&str> = lines
        .iter()
        .map(|l| l.get(indent..).unwrap_or("").trim_end())
        .collect();
    let sep = if style == '|' { "\n" } else { " " };
    lines.join(sep).trim().to_owned()
}

fn strip_comment(s: &str) -> &str {
    match s.find(" #") {
        Some(at) => s[..at].trim_end(),
        None => s,
    }
}

/// A scalar without its quotes (double quotes unescaped; `''` in single quotes is a quote).
fn unquote(s: &str) -> String {
    let s = s.trim();
    if s.len() >= 2 && s.starts_with('\'') && s.ends_with('\'') {
        return s[1..s.len() - 1].replace("''", "'");
    }
    if s.len() >= 2 && s.starts_with('"') && s.ends_with('"') {
        let mut out = String::new();
        let mut chars = s[1..s.len() - 1].chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('r') => out.push('\r'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        }
        return out;
    }
    strip_comment(s).to_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    fn text(p: &Parsed, key: &str) -> String {
        p.fields[key].text()
    }

    #[test]
    fn reads_claude_code_definitions() {
        let p = parse(
            "---\nname: code-reviewer\ndescription: \"Use after edits.\\n\\n<example>x</example>\"\n\
             tools: Read, Grep, Glob  # the read-only ones\nmodel: inherit\ncolor: red\n---\n\n\
             You review code.\n\nBe terse.\n",
        )
        .unwrap();
        assert_eq!(text(&p, "name"), "code-reviewer");
        assert_eq!(
            text(&p, "description"),
            "Use after edits.\n\n<example>x</example>"
        );
        assert_eq!(p.fields["tools"].items(), ["Read", "Grep", "Glob"]);
        assert_eq!(text(&p, "model"), "inherit");
        assert_eq!(p.body, "You review code.\n\nBe terse.");
    }

    #[test]
    fn lists_blocks_and_no_front_matter() {
        let p = parse(
            "---\r\ntools:\r\n  - read\r\n  - 'bash'\r\ndescription: >-\r\n  Two\r\n  lines\r\n\
             other: [a, \"b\"]\r\nplain: first\r\n  second\r\n---\r\nBody",
        )
        .unwrap();
        assert_eq!(
            p.fields["tools"],
            Value::List(vec!["read".into(), "bash".into()])
        );
        assert_eq!(text(&p, "description"), "Two lines");
        assert_eq!(p.fields["other"].items(), ["a", "b"]);
        assert_eq!(text(&p, "plain"), "first second");
        assert_eq!(p.body, "Body");
        let none = parse("Just a prompt.\n").unwrap();
        assert!(none.fields.is_empty());
        assert_eq!(none.body, "Just a prompt.");
        assert!(parse("---\nname: x\n").is_err());
    }
}
