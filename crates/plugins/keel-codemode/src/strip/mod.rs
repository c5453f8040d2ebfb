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
//!
//! The parts: [`lex`] turns the source into tokens and matches brackets, [`walk`] is the pass
//! over them with its stack of contexts, [`types`] reads a type, an annotation, a declaration
//! or a class member from a token on and blanks what is TypeScript's.

mod lex;
mod types;
mod walk;

use lex::{lex, match_brackets};
use walk::Walker;

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
