//! TypeScript type stripping: the program may carry TypeScript's type syntax, which is blanked
//! out (replaced by spaces, line breaks kept) before the engine sees it, so every line and
//! column of the result is the user's own and error positions point at the user's lines.
//!
//! The subset is the one Node's type stripping accepts (erasable syntax): annotations on
//! variables, parameters, return types and class fields; optional `?` and definite `!` marks;
//! `as` and `satisfies`; the non-null `!`; generic parameters and arguments
//! (`function f<T>(…)`, `new Map<string, number>()`, `f<T>(…)`); `interface` and `type`
//! declarations; `declare` statements; `implements`; index signatures; the modifiers `public`,
//! `private`, `protected`, `readonly`, `declare`, `abstract`, `override`. Syntax that would need
//! code generated (`enum`, `namespace`, parameter properties) is refused with its line.
//!
//! How: a small lexer that understands strings, template literals (with `${…}` nesting),
//! comments, regular expression literals and numbers turns the program into tokens; one pass
//! with a stack of bracket contexts (block, class body, object, parameter list, parenthesised
//! expression) decides which tokens are types. Plain JavaScript comes back byte for byte.

/// A program that uses TypeScript syntax the stripper cannot erase.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (line {line})")]
pub struct StripError {
    /// The program's line (1-based).
    pub line: u32,
    /// What is not supported.
    pub message: String,
}

/// `source` with its TypeScript type syntax replaced by spaces (line breaks kept). Plain
/// JavaScript is returned unchanged.
pub fn strip_types(source: &str) -> Result<String, StripError> {
    let toks = lex(source);
    let matching = match_brackets(source, &toks);
    let mut w = Walker {
        src: source,
        toks: &toks,
        matching: &matching,
        blank: vec![false; toks.len()],
    };
    w.walk()?;
    if !w.blank.iter().any(|b| *b) {
        return Ok(source.to_owned());
    }
    let mut out = source.as_bytes().to_vec();
    for (t, b) in toks.iter().zip(&w.blank) {
        if !*b {
            continue;
        }
        for byte in out.get_mut(t.start..t.end).into_iter().flatten() {
            if *byte != b'\n' && *byte != b'\r' {
                *byte = b' ';
            }
        }
    }
    // Only whole tokens were blanked, and a token never ends inside a character, so what is
    // left is UTF-8; fall back to the source rather than fail if that ever did not hold.
    Ok(String::from_utf8(out).unwrap_or_else(|_| source.to_owned()))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
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
struct Tok {
    kind: Kind,
    start: usize,
    end: usize,
    /// A line break between the previous token and this one.
    nl_before: bool,
}

/// Keywords after which a `/` starts a regular expression (and which never end an expression).
const PREFIX_KEYWORDS: &[&str] = &[
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
fn lex(src: &str) -> Vec<Tok> {
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
fn match_brackets(src: &str, toks: &[Tok]) -> Vec<usize> {
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    Root,
    Block,
    Class,
    Object,
    Params,
    Paren,
    Bracket,
}

struct Ctx {
    frame: Frame,
    /// A `let`/`const`/`var` declaration is open at this level.
    decl: bool,
    /// In a parameter's default value (a `:` there is a conditional's).
    in_default: bool,
    /// The next token at this level starts a class member.
    member_start: bool,
}

impl Ctx {
    fn new(frame: Frame) -> Self {
        Ctx {
            frame,
            decl: false,
            in_default: false,
            member_start: frame == Frame::Class,
        }
    }
}

struct Walker<'a> {
    src: &'a str,
    toks: &'a [Tok],
    matching: &'a [usize],
    blank: Vec<bool>,
}

const TS_MODIFIERS: &[&str] = &[
    "public",
    "private",
    "protected",
    "readonly",
    "declare",
    "abstract",
    "override",
];
const JS_MODIFIERS: &[&str] = &["static", "async", "get", "set", "accessor", "*"];
/// Keywords before `(` that make it an expression's parenthesis.
const PAREN_KEYWORDS: &[&str] = &[
    "if",
    "for",
    "while",
    "switch",
    "with",
    "return",
    "typeof",
    "void",
    "delete",
    "await",
    "yield",
    "in",
    "of",
    "instanceof",
    "new",
    "case",
    "throw",
    "else",
    "do",
    "super",
    "import",
];
/// Keywords that start a statement or declaration, and so never end an expression.
const STATEMENT_KEYWORDS: &[&str] = &[
    "const",
    "let",
    "var",
    "function",
    "class",
    "if",
    "for",
    "while",
    "switch",
    "try",
    "catch",
    "finally",
    "import",
    "export",
    "interface",
    "enum",
    "declare",
    "abstract",
];
/// Tokens that may not appear inside `<…>` type arguments (outside nested brackets).
const NOT_IN_TYPE_ARGS: &[&str] = &[
    ";", "&&", "||", "==", "===", "!=", "!==", "+", "*", "/", "%", "!", "++", "--", "+=", "-=",
    "*=", "/=", "%=", "??", "**", "^",
];

impl<'a> Walker<'a> {
    fn text(&self, i: usize) -> &'a str {
        self.toks
            .get(i)
            .and_then(|t| self.src.get(t.start..t.end))
            .unwrap_or_default()
    }

    fn kind(&self, i: usize) -> Option<Kind> {
        self.toks.get(i).map(|t| t.kind)
    }

    fn is(&self, i: usize, text: &str) -> bool {
        self.toks.get(i).is_some_and(|t| {
            matches!(t.kind, Kind::Punct | Kind::Ident)
                && self.src.get(t.start..t.end) == Some(text)
        })
    }

    fn nl_before(&self, i: usize) -> bool {
        self.toks.get(i).is_some_and(|t| t.nl_before)
    }

    fn adjacent(&self, a: usize, b: usize) -> bool {
        match (self.toks.get(a), self.toks.get(b)) {
            (Some(x), Some(y)) => x.end == y.start,
            _ => false,
        }
    }

    fn line_of(&self, i: usize) -> u32 {
        let at = self.toks.get(i).map_or(0, |t| t.start);
        let lines = self
            .src
            .get(..at)
            .map_or(0, |s| s.bytes().filter(|b| *b == b'\n').count());
        u32::try_from(lines + 1).unwrap_or(u32::MAX)
    }

    fn close_of(&self, i: usize) -> Option<usize> {
        self.matching.get(i).copied().filter(|m| *m != usize::MAX)
    }

    fn blank_range(&mut self, from: usize, to_exclusive: usize) {
        for b in self.blank.iter_mut().take(to_exclusive).skip(from) {
            *b = true;
        }
    }

    /// The last token before `i` that is not blanked.
    fn prev(&self, i: usize) -> Option<usize> {
        (0..i).rev().find(|j| !self.blank[*j])
    }

    fn is_open(&self, i: usize) -> bool {
        self.is(i, "(") || self.is(i, "[") || self.is(i, "{") || self.kind(i) == Some(Kind::TplHead)
    }

    /// Whether token `i` ends an expression (so `as`, `satisfies` and `!` may follow it).
    fn ends_expression(&self, i: usize) -> bool {
        match self.kind(i) {
            Some(Kind::Ident) => {
                !PREFIX_KEYWORDS.contains(&self.text(i))
                    && !STATEMENT_KEYWORDS.contains(&self.text(i))
            }
            Some(Kind::Punct) => matches!(self.text(i), ")" | "]" | "}"),
            Some(Kind::Str | Kind::Num | Kind::Regex | Kind::Template | Kind::TplTail) => true,
            _ => false,
        }
    }

    /// The index after the type that starts at `i`.
    fn skip_type(&self, mut i: usize) -> usize {
        let n = self.toks.len();
        loop {
            while self.is(i, "|") || self.is(i, "&") {
                i += 1;
            }
            while ["keyof", "typeof", "readonly", "unique", "infer", "asserts"]
                .contains(&self.text(i))
                && self.kind(i) == Some(Kind::Ident)
                && matches!(self.kind(i + 1), Some(Kind::Ident | Kind::Punct))
                && !self.is(i + 1, ",")
                && !self.is(i + 1, ")")
                && !self.is(i + 1, "=")
                && !self.is(i + 1, ";")
            {
                i += 1;
            }
            if i >= n {
                return n;
            }
            if self.is(i, "new") && self.is(i + 1, "(") {
                i += 1;
            }
            if self.is(i, "<") {
                let Some(close) = self.skip_angle(i) else {
                    return i;
                };
                i = close + 1;
            }
            if self.is(i, "(") {
                let Some(close) = self.close_of(i) else {
                    return n;
                };
                i = close + 1;
                if self.is(i, "=>") {
                    return self.skip_type(i + 1);
                }
            } else if self.is(i, "{") || self.is(i, "[") || self.kind(i) == Some(Kind::TplHead) {
                let Some(close) = self.close_of(i) else {
                    return n;
                };
                i = close + 1;
            } else if self.is(i, "-") && self.kind(i + 1) == Some(Kind::Num) {
                i += 2;
            } else if matches!(
                self.kind(i),
                Some(Kind::Ident | Kind::Str | Kind::Num | Kind::Template)
            ) {
                i += 1;
                while self.is(i, ".") && self.kind(i + 1) == Some(Kind::Ident) {
                    i += 2;
                }
                if self.is(i, "<")
                    && let Some(close) = self.skip_angle(i)
                {
                    i = close + 1;
                }
                if self.is(i, "is") && !self.nl_before(i) {
                    return self.skip_type(i + 1);
                }
            } else {
                return i;
            }
            while self.is(i, "[") && !self.nl_before(i) {
                let Some(close) = self.close_of(i) else {
                    return n;
                };
                i = close + 1;
            }
            if self.is(i, "|") || self.is(i, "&") {
                i += 1;
                continue;
            }
            if self.is(i, "extends") && !self.nl_before(i) {
                i = self.skip_type(i + 1);
                if self.is(i, "?") {
                    i = self.skip_type(i + 1);
                    if self.is(i, ":") {
                        i = self.skip_type(i + 1);
                    }
                }
            }
            return i;
        }
    }

    /// Blank the annotation whose `:` is at `colon` (the colon and its type); the index after
    /// it, or `None` (nothing blanked) when no type follows the colon.
    fn annotation(&mut self, colon: usize) -> Option<usize> {
        let end = self.skip_type(colon + 1);
        (end > colon + 1).then(|| {
            self.blank_range(colon, end);
            end
        })
    }

    /// The index of the `>` closing the `<` at `i`, when what is between reads as types.
    fn skip_angle(&self, i: usize) -> Option<usize> {
        let mut depth = 0usize;
        let mut j = i;
        let mut steps = 0;
        while j < self.toks.len() && steps < 512 {
            steps += 1;
            if self.is(j, "<") {
                depth += 1;
            } else if self.is(j, ">") {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return (j > i + 1).then_some(j);
                }
            } else if self.is(j, "(") || self.is(j, "[") || self.is(j, "{") {
                j = self.close_of(j)?;
            } else if matches!(
                self.kind(j),
                Some(Kind::Regex | Kind::TplHead | Kind::TplMid | Kind::TplTail)
            ) || (self.kind(j) == Some(Kind::Punct)
                && NOT_IN_TYPE_ARGS.contains(&self.text(j)))
                || self.is(j, ")")
                || self.is(j, "]")
                || self.is(j, "}")
            {
                return None;
            }
            j += 1;
        }
        None
    }

    /// `i` starts a statement (for `interface`, `type`, `declare`, `enum`).
    fn statement_start(&self, i: usize, top: Frame) -> bool {
        matches!(top, Frame::Root | Frame::Block)
            && match self.prev(i) {
                None => true,
                Some(p) => {
                    self.nl_before(i) || self.is(p, ";") || self.is(p, "{") || self.is(p, "}")
                }
            }
    }

    /// The binding that starts at `i` (a name or a pattern): the index after it.
    fn after_binding(&self, i: usize) -> Option<usize> {
        match self.kind(i) {
            Some(Kind::Ident) => Some(i + 1),
            _ if self.is(i, "{") || self.is(i, "[") => self.close_of(i).map(|c| c + 1),
            _ => None,
        }
    }

    /// `let x: T`, `let x!: T`: blanks the annotation after the binding at `i`.
    fn declarator(&mut self, i: usize) {
        let Some(mut k) = self.after_binding(i) else {
            return;
        };
        if self.is(k, "!") && self.is(k + 1, ":") && self.skip_type(k + 2) > k + 2 {
            self.blank[k] = true;
            k += 1;
        }
        if self.is(k, ":") {
            self.annotation(k);
        }
    }

    /// Whether the `(` at `i` opens a parameter list.
    fn opens_params(&self, i: usize) -> bool {
        let Some(close) = self.close_of(i) else {
            return false;
        };
        let prev = self.prev(i);
        if let Some(p) = prev
            && self.kind(p) == Some(Kind::Ident)
        {
            let word = self.text(p);
            if word == "catch" || word == "function" {
                return true;
            }
            if PAREN_KEYWORDS.contains(&word) {
                return false;
            }
        }
        let after = close + 1;
        let named = prev.is_some_and(|p| {
            matches!(self.kind(p), Some(Kind::Ident | Kind::Str | Kind::Num))
                || self.is(p, "]")
                || self.is(p, "*")
        });
        if self.is(after, "=>") && !self.nl_before(after) {
            return true;
        }
        if self.is(after, "{") && !self.nl_before(after) && named {
            return true;
        }
        if self.is(after, ":") {
            let end = self.skip_type(after + 1);
            return self.is(end, "=>") || (named && self.is(end, "{"));
        }
        false
    }

    fn walk(&mut self) -> Result<(), StripError> {
        let mut stack: Vec<Ctx> = vec![Ctx::new(Frame::Root)];
        // The depth at which a `class` header is open (its body is the next `{` there).
        let mut class_pending: Option<usize> = None;
        let n = self.toks.len();
        let mut i = 0;
        while i < n {
            if self.blank[i] {
                i += 1;
                continue;
            }
            let depth = stack.len();
            let top = stack.last().map_or(Frame::Root, |c| c.frame);
            let kind = self.kind(i);
            let text = self.text(i);

            // Closing brackets.
            if matches!(kind, Some(Kind::TplMid | Kind::TplTail))
                || (kind == Some(Kind::Punct) && matches!(text, ")" | "]" | "}"))
            {
                if stack.len() > 1 {
                    let closed = stack.pop().map(|c| c.frame);
                    if closed == Some(Frame::Params) && self.is(i + 1, ":") {
                        self.annotation(i + 1);
                    }
                    if let Some(parent) = stack.last_mut()
                        && parent.frame == Frame::Class
                    {
                        parent.member_start = true;
                    }
                }
                if kind == Some(Kind::TplMid) {
                    stack.push(Ctx::new(Frame::Paren));
                }
                i += 1;
                continue;
            }

            // Class members.
            if top == Frame::Class {
                let start = stack.last().is_some_and(|c| c.member_start)
                    || self.nl_before(i)
                    || self.prev(i).is_some_and(|p| self.is(p, ";"));
                if let Some(c) = stack.last_mut() {
                    c.member_start = false;
                }
                if start
                    && !self.is(i, ";")
                    && let Some(next) = self.member(i)
                {
                    i = next;
                    continue;
                }
            }

            // Statements that are types only, or that cannot be erased.
            if kind == Some(Kind::Ident) && self.statement_start(i, top) {
                let next_ident = self.kind(i + 1) == Some(Kind::Ident) && !self.nl_before(i + 1);
                match text {
                    "interface" if next_ident => {
                        let mut j = i + 2;
                        while j < n && !self.is(j, "{") {
                            j += 1;
                        }
                        let end = self.close_of(j).map_or(n, |c| c + 1);
                        self.blank_range(i, end);
                        i = end;
                        continue;
                    }
                    "type" if next_ident && (self.is(i + 2, "=") || self.is(i + 2, "<")) => {
                        let mut j = i + 2;
                        if self.is(j, "<") {
                            j = self.skip_angle(j).map_or(j, |c| c + 1);
                        }
                        // `type X<…> = T`: without the `=` this is no type alias.
                        let mut end = if self.is(j, "=") {
                            self.skip_type(j + 1)
                        } else {
                            i
                        };
                        if end > i {
                            if self.is(end, ";") {
                                end += 1;
                            }
                            self.blank_range(i, end);
                            i = end;
                            continue;
                        }
                    }
                    "declare" if next_ident => {
                        let end = self.statement_end(i + 1);
                        self.blank_range(i, end);
                        i = end;
                        continue;
                    }
                    "abstract" if self.is(i + 1, "class") => {
                        self.blank[i] = true;
                        i += 1;
                        continue;
                    }
                    "enum" if next_ident => {
                        return Err(StripError {
                            line: self.line_of(i),
                            message: "`enum` is not supported: types are stripped, not \
                                      compiled; use a plain object"
                                .into(),
                        });
                    }
                    "namespace" | "module" if next_ident && self.is(i + 2, "{") => {
                        return Err(StripError {
                            line: self.line_of(i),
                            message: format!(
                                "`{text}` is not supported: types are stripped, not compiled"
                            ),
                        });
                    }
                    _ => {}
                }
            }

            if kind == Some(Kind::Ident) {
                match text {
                    "let" | "const" | "var"
                        if matches!(self.kind(i + 1), Some(Kind::Ident | Kind::Punct))
                            && self.after_binding(i + 1).is_some() =>
                    {
                        self.declarator(i + 1);
                        if let Some(c) = stack.last_mut() {
                            c.decl = true;
                        }
                        i += 1;
                        continue;
                    }
                    "class" => {
                        class_pending = Some(depth);
                        i += 1;
                        continue;
                    }
                    "implements" if class_pending == Some(depth) => {
                        let mut j = i + 1;
                        while j < n && !self.is(j, "{") {
                            j += 1;
                        }
                        self.blank_range(i, j);
                        i = j;
                        continue;
                    }
                    "as" | "satisfies"
                        if !self.nl_before(i)
                            && self.prev(i).is_some_and(|p| self.ends_expression(p))
                            && !self.is(i + 1, "=")
                            && !self.is(i + 1, ")")
                            && !self.is(i + 1, ",")
                            && !self.is(i + 1, ";") =>
                    {
                        let end = self.skip_type(i + 1);
                        if end > i + 1 {
                            self.blank_range(i, end);
                            i = end;
                            continue;
                        }
                    }
                    _ => {}
                }
                if top == Frame::Params
                    && TS_MODIFIERS.contains(&text)
                    && self.kind(i + 1) == Some(Kind::Ident)
                    && !self.nl_before(i + 1)
                {
                    return Err(StripError {
                        line: self.line_of(i),
                        message: format!(
                            "parameter properties (`{text}` on a constructor parameter) are not \
                             supported: types are stripped, not compiled; assign the field in \
                             the constructor"
                        ),
                    });
                }
                // Generic parameters or arguments: `f<T>(`, `new Map<K, V>(`, `class A<T> {`.
                if self.is(i + 1, "<")
                    && self.adjacent(i, i + 1)
                    && let Some(close) = self.skip_angle(i + 1)
                {
                    let class_follows = class_pending == Some(depth)
                        && (self.is(close + 1, "{")
                            || self.is(close + 1, "extends")
                            || self.is(close + 1, "implements"));
                    if self.is(close + 1, "(") || class_follows {
                        self.blank_range(i + 1, close + 1);
                        i = close + 1;
                        continue;
                    }
                }
            }

            if kind == Some(Kind::Punct) {
                match text {
                    "!" if self.prev(i).is_some_and(|p| {
                        self.adjacent(p, i)
                            && (self.is(p, ")")
                                || self.is(p, "]")
                                || (self.kind(p) == Some(Kind::Ident)
                                    && !PREFIX_KEYWORDS.contains(&self.text(p))))
                    }) && !self.is(i + 1, "=") =>
                    {
                        self.blank[i] = true;
                        i += 1;
                        continue;
                    }
                    ":" if top == Frame::Params && !stack.last().is_some_and(|c| c.in_default) => {
                        if let Some(end) = self.annotation(i) {
                            i = end;
                            continue;
                        }
                    }
                    "?" if top == Frame::Params
                        && !stack.last().is_some_and(|c| c.in_default)
                        && (self.is(i + 1, ":")
                            || self.is(i + 1, ",")
                            || self.is(i + 1, ")")
                            || self.is(i + 1, "=")) =>
                    {
                        self.blank[i] = true;
                        i += 1;
                        continue;
                    }
                    "=" if top == Frame::Params => {
                        if let Some(c) = stack.last_mut() {
                            c.in_default = true;
                        }
                    }
                    "," => {
                        if let Some(c) = stack.last_mut() {
                            c.in_default = false;
                        }
                        if stack.last().is_some_and(|c| c.decl) {
                            self.declarator(i + 1);
                        }
                    }
                    ";" => {
                        if let Some(c) = stack.last_mut() {
                            c.decl = false;
                        }
                    }
                    _ => {}
                }
            }

            // Opening brackets.
            if self.is_open(i) {
                let frame = if self.is(i, "(") {
                    if self.opens_params(i) {
                        Frame::Params
                    } else {
                        Frame::Paren
                    }
                } else if self.is(i, "[") {
                    Frame::Bracket
                } else if kind == Some(Kind::TplHead) {
                    Frame::Paren
                } else if class_pending == Some(depth) {
                    class_pending = None;
                    Frame::Class
                } else if top == Frame::Params
                    || top == Frame::Paren
                    || top == Frame::Bracket
                    || self.prev(i).is_some_and(|p| {
                        matches!(
                            self.text(p),
                            "=" | "(" | "," | ":" | "[" | "?" | "return" | "??" | "||" | "&&"
                        )
                    })
                {
                    Frame::Object
                } else {
                    Frame::Block
                };
                stack.push(Ctx::new(frame));
            }
            i += 1;
        }
        Ok(())
    }

    /// The end of a `declare …` statement starting at `i`: past its `;`, its body's `}`, or
    /// its line.
    fn statement_end(&self, i: usize) -> usize {
        let n = self.toks.len();
        let mut j = i;
        while j < n {
            if self.is(j, ";") {
                return j + 1;
            }
            if self.is(j, "{") {
                let close = self.close_of(j).map_or(n, |c| c + 1);
                if self.is(close, ";") {
                    return close + 1;
                }
                j = close;
                continue;
            }
            if self.is_open(j) {
                j = self.close_of(j).map_or(n, |c| c + 1);
                continue;
            }
            if j > i && self.nl_before(j) {
                return j;
            }
            j += 1;
        }
        n
    }

    /// A class member starting at `i`: blanks its TypeScript-only parts (modifiers, index
    /// signature, `?`/`!` marks, field type) and returns where the walk goes on, or `None` when
    /// there is nothing to do.
    fn member(&mut self, i: usize) -> Option<usize> {
        let n = self.toks.len();
        let mut j = i;
        let mut changed = false;
        while j < n {
            let word = self.text(j);
            let modifier = TS_MODIFIERS.contains(&word) || JS_MODIFIERS.contains(&word);
            let is_name = self.is(j + 1, "(")
                || self.is(j + 1, "=")
                || self.is(j + 1, ":")
                || self.is(j + 1, ";")
                || self.is(j + 1, "?")
                || self.is(j + 1, "!")
                || self.is(j + 1, "<")
                || self.is(j + 1, "}")
                || self.nl_before(j + 1);
            if !modifier || (is_name && word != "*") {
                break;
            }
            if TS_MODIFIERS.contains(&word) {
                self.blank[j] = true;
                changed = true;
            }
            j += 1;
        }
        // Index signature: `[key: string]: T;`.
        if self.is(j, "[") && self.kind(j + 1) == Some(Kind::Ident) && self.is(j + 2, ":") {
            let close = self.close_of(j)?;
            let mut end = close + 1;
            if self.is(end, ":") {
                end = self.skip_type(end + 1);
            }
            if self.is(end, ";") {
                end += 1;
            }
            self.blank_range(i, end);
            return Some(end);
        }
        let name_end = if self.is(j, "[") {
            self.close_of(j)? + 1
        } else if matches!(self.kind(j), Some(Kind::Ident | Kind::Str | Kind::Num)) {
            j + 1
        } else {
            return changed.then_some(j);
        };
        let mut k = name_end;
        if (self.is(k, "?") || self.is(k, "!"))
            && (self.is(k + 1, ":")
                || self.is(k + 1, "(")
                || self.is(k + 1, ";")
                || self.is(k + 1, "=")
                || self.nl_before(k + 1))
        {
            self.blank[k] = true;
            changed = true;
            k += 1;
        }
        if self.is(k, ":")
            && let Some(end) = self.annotation(k)
        {
            return Some(end);
        }
        changed.then_some(j)
    }
}
