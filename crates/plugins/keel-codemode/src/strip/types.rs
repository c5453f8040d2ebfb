//! Reading TypeScript from a token on: a type (unions, generics, function and conditional
//! types), an annotation, `<…>` type arguments, a declarator, whether a `(` opens parameters,
//! the end of a `declare` statement, and a class member's TypeScript-only parts.

use super::lex::Kind;
use super::walk::{Frame, TS_MODIFIERS, Walker};

/// Modifiers JavaScript keeps on a class member (left in place).
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
/// Tokens that may not appear inside `<…>` type arguments (outside nested brackets).
const NOT_IN_TYPE_ARGS: &[&str] = &[
    ";", "&&", "||", "==", "===", "!=", "!==", "+", "*", "/", "%", "!", "++", "--", "+=", "-=",
    "*=", "/=", "%=", "??", "**", "^",
];

impl Walker<'_> {
    /// The index after the type that starts at `i`.
    pub(super) fn skip_type(&self, mut i: usize) -> usize {
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
    pub(super) fn annotation(&mut self, colon: usize) -> Option<usize> {
        let end = self.skip_type(colon + 1);
        (end > colon + 1).then(|| {
            self.blank_range(colon, end);
            end
        })
    }

    /// The index of the `>` closing the `<` at `i`, when what is between reads as types.
    pub(super) fn skip_angle(&self, i: usize) -> Option<usize> {
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
    pub(super) fn statement_start(&self, i: usize, top: Frame) -> bool {
        matches!(top, Frame::Root | Frame::Block)
            && match self.prev(i) {
                None => true,
                Some(p) => {
                    self.nl_before(i) || self.is(p, ";") || self.is(p, "{") || self.is(p, "}")
                }
            }
    }

    /// The binding that starts at `i` (a name or a pattern): the index after it.
    pub(super) fn after_binding(&self, i: usize) -> Option<usize> {
        match self.kind(i) {
            Some(Kind::Ident) => Some(i + 1),
            _ if self.is(i, "{") || self.is(i, "[") => self.close_of(i).map(|c| c + 1),
            _ => None,
        }
    }

    /// `let x: T`, `let x!: T`: blanks the annotation after the binding at `i`.
    pub(super) fn declarator(&mut self, i: usize) {
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
    pub(super) fn opens_params(&self, i: usize) -> bool {
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

    /// The end of a `declare …` statement starting at `i`: past its `;`, its body's `}`, or
    /// its line.
    pub(super) fn statement_end(&self, i: usize) -> usize {
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
    pub(super) fn member(&mut self, i: usize) -> Option<usize> {
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
