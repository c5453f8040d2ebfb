//! The pass over the tokens: a stack of bracket contexts (block, class body, object, parameter
//! list, parenthesised expression) decides which tokens are types and marks them blank; the
//! token queries it and [`super::types`] ask are here too.

use super::StripError;
use super::lex::{Kind, PREFIX_KEYWORDS, Tok};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Frame {
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

pub(super) struct Walker<'a> {
    pub(super) src: &'a str,
    pub(super) toks: &'a [Tok],
    pub(super) matching: &'a [usize],
    pub(super) blank: Vec<bool>,
}

pub(super) const TS_MODIFIERS: &[&str] = &[
    "public",
    "private",
    "protected",
    "readonly",
    "declare",
    "abstract",
    "override",
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

impl<'a> Walker<'a> {
    pub(super) fn text(&self, i: usize) -> &'a str {
        self.toks
            .get(i)
            .and_then(|t| self.src.get(t.start..t.end))
            .unwrap_or_default()
    }

    pub(super) fn kind(&self, i: usize) -> Option<Kind> {
        self.toks.get(i).map(|t| t.kind)
    }

    pub(super) fn is(&self, i: usize, text: &str) -> bool {
        self.toks.get(i).is_some_and(|t| {
            matches!(t.kind, Kind::Punct | Kind::Ident)
                && self.src.get(t.start..t.end) == Some(text)
        })
    }

    pub(super) fn nl_before(&self, i: usize) -> bool {
        self.toks.get(i).is_some_and(|t| t.nl_before)
    }

    pub(super) fn adjacent(&self, a: usize, b: usize) -> bool {
        match (self.toks.get(a), self.toks.get(b)) {
            (Some(x), Some(y)) => x.end == y.start,
            _ => false,
        }
    }

    pub(super) fn line_of(&self, i: usize) -> u32 {
        let at = self.toks.get(i).map_or(0, |t| t.start);
        let lines = self
            .src
            .get(..at)
            .map_or(0, |s| s.bytes().filter(|b| *b == b'\n').count());
        u32::try_from(lines + 1).unwrap_or(u32::MAX)
    }

    pub(super) fn close_of(&self, i: usize) -> Option<usize> {
        self.matching.get(i).copied().filter(|m| *m != usize::MAX)
    }

    pub(super) fn blank_range(&mut self, from: usize, to_exclusive: usize) {
        for b in self.blank.iter_mut().take(to_exclusive).skip(from) {
            *b = true;
        }
    }

    /// The last token before `i` that is not blanked.
    pub(super) fn prev(&self, i: usize) -> Option<usize> {
        (0..i).rev().find(|j| !self.blank[*j])
    }

    pub(super) fn is_open(&self, i: usize) -> bool {
        self.is(i, "(") || self.is(i, "[") || self.is(i, "{") || self.kind(i) == Some(Kind::TplHead)
    }

    /// Whether token `i` ends an expression (so `as`, `satisfies` and `!` may follow it).
    pub(super) fn ends_expression(&self, i: usize) -> bool {
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

    pub(super) fn walk(&mut self) -> Result<(), StripError> {
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
}
