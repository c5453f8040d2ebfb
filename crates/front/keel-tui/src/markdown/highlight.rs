//! The small token highlighter of code blocks: the language from a fence's label, keywords of
//! the common languages, strings, comments (block comments carried across lines), numbers, and
//! diff lines.

use super::{ADDED, COMMENT, HUNK, KEYWORD, NUMBER, REMOVED, STRING};

use ratatui::style::Style;
use ratatui::text::Span;

/// The highlighting rules of a code block, from its language label.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Lang {
    Rust,
    Python,
    Js,
    Go,
    Shell,
    Sql,
    C,
    /// `#` comments, strings and numbers (TOML, YAML, Ruby…).
    Hash,
    /// No label or an unknown one: every rule, cautiously.
    Generic,
    Diff,
    /// Text, output: no highlighting.
    Plain,
}

impl Lang {
    pub(super) fn of(label: Option<&str>) -> Self {
        let Some(label) = label else {
            return Self::Generic;
        };
        match label.to_ascii_lowercase().as_str() {
            "rust" | "rs" => Self::Rust,
            "python" | "py" | "python3" | "pycon" => Self::Python,
            "js" | "javascript" | "jsx" | "mjs" | "cjs" | "ts" | "typescript" | "tsx" | "json"
            | "jsonc" => Self::Js,
            "go" | "golang" => Self::Go,
            "sh" | "bash" | "shell" | "zsh" | "fish" | "ksh" => Self::Shell,
            "sql" | "lua" | "haskell" | "hs" => Self::Sql,
            "c" | "h" | "cpp" | "c++" | "cc" | "hpp" | "java" | "kotlin" | "kt" | "cs"
            | "csharp" | "swift" | "zig" | "scala" | "dart" => Self::C,
            "toml" | "yaml" | "yml" | "ini" | "ruby" | "rb" | "perl" | "pl" | "r" | "make"
            | "makefile" | "dockerfile" | "cmake" | "nix" | "elixir" | "ex" => Self::Hash,
            "diff" | "patch" => Self::Diff,
            "text" | "txt" | "plain" | "plaintext" | "console" | "output" | "log" | "md"
            | "markdown" => Self::Plain,
            _ => Self::Generic,
        }
    }

    pub(super) fn slash_comments(self) -> bool {
        matches!(
            self,
            Self::Rust | Self::Js | Self::Go | Self::C | Self::Generic
        )
    }

    pub(super) fn hash_comments(self) -> bool {
        matches!(
            self,
            Self::Python | Self::Shell | Self::Hash | Self::Generic
        )
    }

    pub(super) fn dash_comments(self) -> bool {
        matches!(self, Self::Sql | Self::Generic)
    }

    /// `'…'` is a string (else only a one-character literal like `'x'` or `'\n'`).
    pub(super) fn quote_strings(self) -> bool {
        matches!(
            self,
            Self::Python | Self::Js | Self::Shell | Self::Sql | Self::Hash | Self::Go
        )
    }

    pub(super) fn backtick_strings(self) -> bool {
        matches!(self, Self::Js | Self::Go | Self::Shell)
    }

    pub(super) fn is_keyword(self, word: &str) -> bool {
        match self {
            Self::Rust => rust_keyword(word),
            Self::Python => python_keyword(word),
            Self::Js => js_keyword(word),
            Self::Go => go_keyword(word),
            Self::Shell => shell_keyword(word),
            Self::Sql => sql_keyword(&word.to_ascii_lowercase()),
            Self::C => c_keyword(word),
            Self::Hash => matches!(word, "true" | "false" | "nil" | "null" | "def" | "end"),
            Self::Generic => {
                rust_keyword(word)
                    || python_keyword(word)
                    || js_keyword(word)
                    || go_keyword(word)
                    || shell_keyword(word)
            }
            Self::Diff | Self::Plain => false,
        }
    }
}

pub(super) fn rust_keyword(w: &str) -> bool {
    matches!(
        w,
        "as" | "async"
            | "await"
            | "break"
            | "const"
            | "continue"
            | "crate"
            | "dyn"
            | "else"
            | "enum"
            | "extern"
            | "false"
            | "fn"
            | "for"
            | "if"
            | "impl"
            | "in"
            | "let"
            | "loop"
            | "match"
            | "mod"
            | "move"
            | "mut"
            | "pub"
            | "ref"
            | "return"
            | "self"
            | "Self"
            | "static"
            | "struct"
            | "super"
            | "trait"
            | "true"
            | "type"
            | "unsafe"
            | "use"
            | "where"
            | "while"
    )
}

pub(super) fn python_keyword(w: &str) -> bool {
    matches!(
        w,
        "False"
            | "None"
            | "True"
            | "and"
            | "as"
            | "assert"
            | "async"
            | "await"
            | "break"
            | "class"
            | "continue"
            | "def"
            | "del"
            | "elif"
            | "else"
            | "except"
            | "finally"
            | "for"
            | "from"
            | "global"
            | "if"
            | "import"
            | "in"
            | "is"
            | "lambda"
            | "nonlocal"
            | "not"
            | "or"
            | "pass"
            | "raise"
            | "return"
            | "self"
            | "try"
            | "while"
            | "with"
            | "yield"
    )
}

pub(super) fn js_keyword(w: &str) -> bool {
    matches!(
        w,
        "as" | "async"
            | "await"
            | "break"
            | "case"
            | "catch"
            | "class"
            | "const"
            | "continue"
            | "default"
            | "delete"
            | "do"
            | "else"
            | "enum"
            | "export"
            | "extends"
            | "false"
            | "finally"
            | "for"
            | "from"
            | "function"
            | "if"
            | "implements"
            | "import"
            | "in"
            | "instanceof"
            | "interface"
            | "let"
            | "new"
            | "null"
            | "of"
            | "private"
            | "protected"
            | "public"
            | "readonly"
            | "return"
            | "static"
            | "super"
            | "switch"
            | "this"
            | "throw"
            | "true"
            | "try"
            | "type"
            | "typeof"
            | "undefined"
            | "var"
            | "void"
            | "while"
            | "yield"
    )
}

pub(super) fn go_keyword(w: &str) -> bool {
    matches!(
        w,
        "break"
            | "case"
            | "chan"
            | "const"
            | "continue"
            | "default"
            | "defer"
            | "else"
            | "fallthrough"
            | "false"
            | "for"
            | "func"
            | "go"
            | "goto"
            | "if"
            | "import"
            | "interface"
            | "iota"
            | "map"
            | "nil"
            | "package"
            | "range"
            | "return"
            | "select"
            | "struct"
            | "switch"
            | "true"
            | "type"
            | "var"
    )
}

pub(super) fn shell_keyword(w: &str) -> bool {
    matches!(
        w,
        "case"
            | "do"
            | "done"
            | "elif"
            | "else"
            | "esac"
            | "export"
            | "fi"
            | "for"
            | "function"
            | "if"
            | "in"
            | "local"
            | "readonly"
            | "return"
            | "then"
            | "until"
            | "while"
    )
}

pub(super) fn sql_keyword(w: &str) -> bool {
    matches!(
        w,
        "and"
            | "as"
            | "by"
            | "create"
            | "delete"
            | "desc"
            | "drop"
            | "from"
            | "group"
            | "having"
            | "in"
            | "insert"
            | "into"
            | "is"
            | "join"
            | "left"
            | "limit"
            | "not"
            | "null"
            | "on"
            | "or"
            | "order"
            | "select"
            | "set"
            | "table"
            | "update"
            | "values"
            | "where"
            | "with"
            // Lua
            | "local"
            | "function"
            | "end"
            | "then"
            | "if"
            | "else"
            | "return"
    )
}

pub(super) fn c_keyword(w: &str) -> bool {
    matches!(
        w,
        "auto"
            | "bool"
            | "break"
            | "case"
            | "char"
            | "class"
            | "const"
            | "continue"
            | "default"
            | "do"
            | "double"
            | "else"
            | "enum"
            | "extern"
            | "false"
            | "float"
            | "for"
            | "if"
            | "import"
            | "int"
            | "long"
            | "namespace"
            | "new"
            | "null"
            | "nullptr"
            | "private"
            | "protected"
            | "public"
            | "return"
            | "short"
            | "static"
            | "struct"
            | "switch"
            | "template"
            | "this"
            | "true"
            | "typedef"
            | "unsigned"
            | "var"
            | "void"
            | "while"
    )
}

/// Token-by-token highlighting of a code block's lines; carries `/* … */` across lines.
#[derive(Default)]
pub(super) struct Highlighter {
    in_block_comment: bool,
}

impl Highlighter {
    pub(super) fn line(&mut self, line: &str, lang: Lang) -> Vec<Span<'static>> {
        match lang {
            Lang::Plain => return vec![Span::raw(line.to_owned())],
            Lang::Diff => {
                let style = if line.starts_with("@@") {
                    HUNK
                } else if line.starts_with('+') {
                    ADDED
                } else if line.starts_with('-') {
                    REMOVED
                } else {
                    Style::new()
                };
                return vec![Span::styled(line.to_owned(), style)];
            }
            _ => {}
        }
        // Tokens only start and end at ASCII bytes, which are always character boundaries.
        let bytes = line.as_bytes();
        let n = bytes.len();
        let at = |i: usize| bytes.get(i).copied().unwrap_or(0);
        let mut spans = Vec::new();
        let mut plain = 0;
        let mut i = 0;
        let token = |spans: &mut Vec<Span<'static>>,
                     plain: &mut usize,
                     s: usize,
                     e: usize,
                     style: Style| {
            if *plain < s {
                spans.push(Span::raw(line[*plain..s].to_owned()));
            }
            spans.push(Span::styled(line[s..e].to_owned(), style));
            *plain = e;
        };
        while i < n {
            if self.in_block_comment {
                let end = match line[i..].find("*/") {
                    Some(p) => {
                        self.in_block_comment = false;
                        i + p + 2
                    }
                    None => n,
                };
                token(&mut spans, &mut plain, i, end, COMMENT);
                i = end;
                continue;
            }
            let c = bytes[i];
            let prev = if i == 0 { b' ' } else { bytes[i - 1] };
            let after_space = prev == b' ' || i == 0;
            if lang.slash_comments() && c == b'/' && at(i + 1) == b'/' && prev != b':' {
                token(&mut spans, &mut plain, i, n, COMMENT);
                break;
            }
            if lang.slash_comments() && c == b'/' && at(i + 1) == b'*' {
                if plain < i {
                    spans.push(Span::raw(line[plain..i].to_owned()));
                    plain = i;
                }
                self.in_block_comment = true;
                // The opening `/*` must not close itself (`/*/`).
                let end = match line.get(i + 2..).and_then(|rest| rest.find("*/")) {
                    Some(p) => {
                        self.in_block_comment = false;
                        i + 2 + p + 2
                    }
                    None => n,
                };
                token(&mut spans, &mut plain, i, end, COMMENT);
                i = end;
                continue;
            }
            if lang.hash_comments() && c == b'#' && after_space {
                token(&mut spans, &mut plain, i, n, COMMENT);
                break;
            }
            if lang.dash_comments()
                && c == b'-'
                && at(i + 1) == b'-'
                && after_space
                && matches!(at(i + 2), 0 | b' ')
            {
                token(&mut spans, &mut plain, i, n, COMMENT);
                break;
            }
            let quoted = c == b'"'
                || (c == b'\'' && lang.quote_strings())
                || (c == b'`' && lang.backtick_strings());
            if quoted {
                let end = string_end(bytes, i);
                token(&mut spans, &mut plain, i, end, STRING);
                i = end;
                continue;
            }
            if c == b'\'' {
                if let Some(end) = char_literal_end(line, i) {
                    token(&mut spans, &mut plain, i, end, STRING);
                    i = end;
                } else {
                    i += 1;
                }
                continue;
            }
            if c.is_ascii_digit() && !is_ident_byte(prev) {
                let mut end = i + 1;
                while end < n
                    && (is_ident_byte(bytes[end])
                        || (bytes[end] == b'.' && at(end + 1).is_ascii_digit()))
                {
                    end += 1;
                }
                token(&mut spans, &mut plain, i, end, NUMBER);
                i = end;
                continue;
            }
            if c.is_ascii_alphabetic() || c == b'_' {
                let mut end = i + 1;
                while end < n && is_ident_byte(bytes[end]) {
                    end += 1;
                }
                // An identifier glued to non-ASCII letters is not a keyword.
                let glued = prev >= 0x80 || at(end) >= 0x80;
                if !glued && lang.is_keyword(&line[i..end]) {
                    token(&mut spans, &mut plain, i, end, KEYWORD);
                }
                i = end;
                continue;
            }
            i += 1;
        }
        if plain < n {
            spans.push(Span::raw(line[plain..].to_owned()));
        }
        spans
    }
}

pub(super) fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// End (exclusive) of the string opening at `bytes[start]`: after its unescaped closing quote,
/// or the end of the line.
pub(super) fn string_end(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b if b == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// End of a one-character literal (`'x'`, `'\n'`, `'\u{1F600}'`) opening at `start`, if it is
/// one (else a lifetime or an apostrophe).
pub(super) fn char_literal_end(line: &str, start: usize) -> Option<usize> {
    let rest = line.get(start + 1..)?;
    if let Some(escaped) = rest.strip_prefix('\\') {
        let close = escaped.get(1..)?.find('\'')?;
        return (close <= 9).then_some(start + 4 + close);
    }
    let ch = rest.chars().next()?;
    let after = start + 1 + ch.len_utf8();
    (ch != '\'' && line.as_bytes().get(after) == Some(&b'\'')).then_some(after + 1)
}
