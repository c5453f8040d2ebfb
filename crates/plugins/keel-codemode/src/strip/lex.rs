//! The lexer: the program's tokens (strings, template literals with `${…}` nesting, regular
//! expression literals, numbers, identifiers, punctuators; comments and white space left out),
//! and for each opening bracket the token that closes it.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Ident,
    Punct,
    Str,
    Num,
    Regex,
    /// A whole template literal without substitutions.
    Template,
    /// `` `…${ ``: opens a substitution.
    TplHead,
    /// `` }…${ ``: closes one substitution and opens the next.
    TplMid,
    /// `` }…` ``: closes the last substitution.
    TplTail,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Tok {
    pub(super) kind: Kind,
    pub(super) start: usize,
    pub(super) end: usize,
    /// A line break between the previous token and this one.
    pub(super) nl_before: bool,
}

/// Keywords after which a `/` starts a regular expression (and which never end an expression).
pub(super) const PREFIX_KEYWORDS: &[&str] = &[
    "return",
    "typeof",
    "instanceof",
    "in",
    "of",
    "new",
    "delete",
    "void",
    "throw",
    "case",
    "do",
    "else",
    "yield",
    "await",
    "extends",
];

const PUNCTS: &[&str] = &[
    "...", "?.", "??=", "??", "=>", "===", "!==", "==", "!=", "&&=", "||=", "&&", "||", "**=",
    "**", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=",
];

fn is_ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_' || c == '$' || c == '#' || c == '\\'
}

fn is_ident_part(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$' || c == '\\' || c == '\u{200c}' || c == '\u{200d}'
}

/// The program's tokens (comments and white space left out). Never fails: an unterminated
/// string or comment runs to the end.
pub(super) fn lex(src: &str) -> Vec<Tok> {
    let b = src.as_bytes();
    let mut toks: Vec<Tok> = Vec::new();
    let mut i = 0;
    let mut nl = false;
    // For each open template substitution, the brace depth at which it opened.
    let mut templates: Vec<usize> = Vec::new();
    let mut braces: usize = 0;
    let char_at = |i: usize| src.get(i..).and_then(|s| s.chars().next());
    while i < b.len() {
        let Some(c) = char_at(i) else {
            i += 1;
            continue;
        };
        let start = i;
        if c == '\n' || c == '\r' || c == '\u{2028}' || c == '\u{2029}' {
            nl = true;
            i += c.len_utf8();
            continue;
        }
        if c.is_whitespace() || c == '\u{feff}' {
            i += c.len_utf8();
            continue;
        }
        if c == '/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && b.get(i + 1) == Some(&b'*') {
            let end = src
                .get(i + 2..)
                .and_then(|s| s.find("*/"))
                .map_or(b.len(), |at| i + 2 + at + 2);
            if src.get(i..end).is_some_and(|s| s.contains('\n')) {
                nl = true;
            }
            i = end;
            continue;
        }
        let mut push = |kind: Kind, end: usize, toks: &mut Vec<Tok>| {
            toks.push(Tok {
                kind,
                start,
                end,
                nl_before: nl,
            });
            nl = false;
        };
        if is_ident_start(c) {
            i += c.len_utf8();
            while let Some(c) = char_at(i) {
                if !is_ident_part(c) {
                    break;
                }
                i += c.len_utf8();
            }
            push(Kind::Ident, i, &mut toks);
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            i += 1;
            while i < b.len() {
                let d = b[i];
                let exp_sign = (d == b'+' || d == b'-')
                    && matches!(b.get(i - 1), Some(b'e' | b'E'))
                    && !src.get(start..i).is_some_and(|s| s.starts_with("0x"));
                if d.is_ascii_alphanumeric() || d == b'_' || d == b'.' || exp_sign {
                    i += 1;
                } else {
                    break;
                }
            }
            push(Kind::Num, i, &mut toks);
            continue;
        }
        if c == '"' || c == '\'' {
            i += 1;
            while i < b.len() {
                match b[i] {
                    b'\\' => i += 2,
                    b'\n' => break,
                    q if q == c as u8 => {
                        i += 1;
                        break;
                    }
                    _ => i += 1,
                }
            }
            i = i.min(b.len());
            push(Kind::Str, i, &mut toks);
            continue;
        }
        if c == '`' || (c == '}' && templates.last() == Some(&braces)) {
            let resumed = c == '}';
            if resumed {
                templates.pop();
            }
            i += 1;
            let mut opened = false;
            while i < b.len() {
                match b[i] {
                    b'\\' => i += 2,
                    b'`' => {
                        i += 1;
                        break;
                    }
                    b'$' if b.get(i + 1) == Some(&b'{') => {
                        i += 2;
                        opened = true;
                        break;
                    }
                    _ => i += 1,
                }
            }
            i = i.min(b.len());
            if opened {
                templates.push(braces);
            }
            let kind = match (resumed, opened) {
                (false, false) => Kind::Template,
                (false, true) => Kind::TplHead,
                (true, true) => Kind::TplMid,
                (true, false) => Kind::TplTail,
            };
            push(kind, i, &mut toks);
            continue;
        }
        if c == '/' && regex_allowed(src, toks.last()) {
            i += 1;
            let mut class = false;
            while i < b.len() {
                match b[i] {
                    b'\\' => i += 2,
                    b'\n' => break,
                    b'[' => {
                        class = true;
                        i += 1;
                    }
                    b']' => {
                        class = false;
                        i += 1;
                    }
                    b'/' if !class => {
                        i += 1;
                        break;
                    }
                    _ => i += 1,
                }
            }
            i = i.min(b.len());
            while let Some(c) = char_at(i) {
                if !is_ident_part(c) {
                    break;
                }
                i += c.len_utf8();
            }
            push(Kind::Regex, i, &mut toks);
            continue;
        }
        let rest = src.get(i..).unwrap_or_default();
        let multi = PUNCTS.iter().find(|p| {
            rest.starts_with(**p)
                // `a?.5:b` is a conditional, not optional chaining.
                && !(**p == "?." && b.get(i + 2).is_some_and(u8::is_ascii_digit))
        });
        i += multi.map_or(c.len_utf8(), |p| p.len());
        match c {
            '{' if multi.is_none() => braces += 1,
            '}' => braces = braces.saturating_sub(1),
            _ => {}
        }
        push(Kind::Punct, i, &mut toks);
    }
    toks
}

fn regex_allowed(src: &str, prev: Option<&Tok>) -> bool {
    let Some(p) = prev else { return true };
    let text = src.get(p.start..p.end).unwrap_or_default();
    match p.kind {
        Kind::Ident => PREFIX_KEYWORDS.contains(&text),
        Kind::Punct => !matches!(text, ")" | "]" | "++" | "--"),
        Kind::TplHead | Kind::TplMid => true,
        _ => false,
    }
}

/// For each opening bracket (and template head or middle), the index of the token that closes
/// it; `usize::MAX` elsewhere or when unclosed.
pub(super) fn match_brackets(src: &str, toks: &[Tok]) -> Vec<usize> {
    let mut matching = vec![usize::MAX; toks.len()];
    let mut stack: Vec<usize> = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        let text = src.get(t.start..t.end).unwrap_or_default();
        let punct = t.kind == Kind::Punct;
        let opens = matches!(t.kind, Kind::TplHead | Kind::TplMid)
            || (punct && matches!(text, "(" | "[" | "{"));
        let closes = matches!(t.kind, Kind::TplMid | Kind::TplTail)
            || (punct && matches!(text, ")" | "]" | "}"));
        if closes && let Some(open) = stack.pop() {
            matching[open] = i;
        }
        if opens {
            stack.push(i);
        }
    }
    matching
}
