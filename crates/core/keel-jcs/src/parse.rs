//! Strict JSON text parser: the guard for raw text. Unlike `serde_json` it reports lone
//! surrogates, duplicate member names and overflowing numbers as typed [`JcsError`]s, parses
//! numbers with correct rounding (`str::parse::<f64>`), and bounds nesting depth.

use crate::{JcsError, MAX_DEPTH};
use serde_json::{Map, Number, Value};

/// Parse JSON text strictly into a `serde_json::Value` (RFC 8259 grammar, I-JSON restrictions).
pub fn parse_strict(text: &str) -> Result<Value, JcsError> {
    let mut p = Parser {
        s: text.as_bytes(),
        text,
        i: 0,
    };
    p.ws();
    let v = p.value(0)?;
    p.ws();
    if p.i != p.s.len() {
        return Err(p.err("trailing characters after the value"));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    text: &'a str,
    i: usize,
}

impl Parser<'_> {
    fn err(&self, what: &'static str) -> JcsError {
        JcsError::Syntax {
            offset: self.i,
            what,
        }
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.i) {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn literal(&mut self, word: &'static [u8], v: Value) -> Result<Value, JcsError> {
        if self.s.get(self.i..self.i + word.len()) == Some(word) {
            self.i += word.len();
            Ok(v)
        } else {
            Err(self.err("invalid literal"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, JcsError> {
        match self.peek() {
            None => Err(self.err("unexpected end of input")),
            Some(b'n') => self.literal(b"null", Value::Null),
            Some(b't') => self.literal(b"true", Value::Bool(true)),
            Some(b'f') => self.literal(b"false", Value::Bool(false)),
            Some(b'"') => Ok(Value::String(self.string()?)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b'[') => {
                if depth >= MAX_DEPTH {
                    return Err(JcsError::TooDeep);
                }
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(Value::Array(items));
                }
                loop {
                    self.ws();
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Value::Array(items));
                        }
                        _ => return Err(self.err("expected ',' or ']'")),
                    }
                }
            }
            Some(b'{') => {
                if depth >= MAX_DEPTH {
                    return Err(JcsError::TooDeep);
                }
                self.i += 1;
                let mut map = Map::new();
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Ok(Value::Object(map));
                }
                loop {
                    self.ws();
                    if self.peek() != Some(b'"') {
                        return Err(self.err("expected a member name"));
                    }
                    let at = self.i;
                    let key = self.string()?;
                    self.ws();
                    if self.peek() != Some(b':') {
                        return Err(self.err("expected ':'"));
                    }
                    self.i += 1;
                    self.ws();
                    let v = self.value(depth + 1)?;
                    if map.contains_key(&key) {
                        return Err(JcsError::DuplicateKey { key, offset: at });
                    }
                    map.insert(key, v);
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Value::Object(map));
                        }
                        _ => return Err(self.err("expected ',' or '}'")),
                    }
                }
            }
            Some(_) => Err(self.err("unexpected character")),
        }
    }

    fn hex4(&mut self) -> Result<u16, JcsError> {
        let digits = self
            .s
            .get(self.i..self.i + 4)
            .ok_or_else(|| self.err("short \\u escape"))?;
        let mut v: u16 = 0;
        for &d in digits {
            let n = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return Err(self.err("invalid \\u escape")),
            };
            v = (v << 4) | u16::from(n);
        }
        self.i += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, JcsError> {
        self.i += 1; // opening quote
        let mut out = String::new();
        let mut run = self.i;
        loop {
            let Some(b) = self.peek() else {
                return Err(self.err("unterminated string"));
            };
            match b {
                b'"' => {
                    out.push_str(self.slice(run, self.i));
                    self.i += 1;
                    return Ok(out);
                }
                0x00..=0x1f => return Err(self.err("control character in string")),
                b'\\' => {
                    out.push_str(self.slice(run, self.i));
                    let esc_at = self.i;
                    self.i += 1;
                    let e = self.peek().ok_or_else(|| self.err("unterminated escape"))?;
                    self.i += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let c = match hi {
                                0xD800..=0xDBFF => {
                                    let lo = if self.s.get(self.i..self.i + 2) == Some(b"\\u") {
                                        self.i += 2;
                                        self.hex4()?
                                    } else {
                                        0
                                    };
                                    if !(0xDC00..=0xDFFF).contains(&lo) {
                                        return Err(JcsError::LoneSurrogate {
                                            code: hi,
                                            offset: esc_at,
                                        });
                                    }
                                    let cp = 0x10000
                                        + ((u32::from(hi) - 0xD800) << 10)
                                        + (u32::from(lo) - 0xDC00);
                                    char::from_u32(cp)
                                }
                                0xDC00..=0xDFFF => {
                                    return Err(JcsError::LoneSurrogate {
                                        code: hi,
                                        offset: esc_at,
                                    });
                                }
                                _ => char::from_u32(u32::from(hi)),
                            };
                            out.push(c.ok_or_else(|| self.err("invalid code point"))?);
                        }
                        _ => return Err(self.err("invalid escape")),
                    }
                    run = self.i;
                }
                _ => self.i += 1,
            }
        }
    }

    /// `text[from..to]`; both ends sit on ASCII bytes, hence on char boundaries.
    fn slice(&self, from: usize, to: usize) -> &str {
        self.text.get(from..to).unwrap_or("")
    }

    fn number(&mut self) -> Result<Value, JcsError> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.err("invalid number")),
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            integer = false;
            self.i += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.err("digit expected after '.'"));
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            integer = false;
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.err("digit expected in exponent"));
            }
            self.digits();
        }
        let lit = self.slice(start, self.i);
        if integer {
            if let Ok(u) = lit.parse::<u64>() {
                return Ok(Value::Number(u.into()));
            }
            if let Ok(i) = lit.parse::<i64>() {
                return Ok(Value::Number(i.into()));
            }
        }
        let x: f64 = lit.parse().map_err(|_| JcsError::Syntax {
            offset: start,
            what: "invalid number",
        })?;
        Number::from_f64(x)
            .map(Value::Number)
            .ok_or(JcsError::NonFinite { offset: start })
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn guard_refuses_what_jcs_cannot_spell() {
        assert_eq!(
            parse_strict(r#""\ud800""#),
            Err(JcsError::LoneSurrogate {
                code: 0xd800,
                offset: 1
            })
        );
        assert_eq!(
            parse_strict(r#"["\ud800x"]"#),
            Err(JcsError::LoneSurrogate {
                code: 0xd800,
                offset: 2
            })
        );
        assert_eq!(
            parse_strict(r#""\ud800\u0041""#),
            Err(JcsError::LoneSurrogate {
                code: 0xd800,
                offset: 1
            })
        );
        assert_eq!(
            parse_strict(r#""\udc00""#),
            Err(JcsError::LoneSurrogate {
                code: 0xdc00,
                offset: 1
            })
        );
        assert_eq!(
            parse_strict("1e400"),
            Err(JcsError::NonFinite { offset: 0 })
        );
        assert_eq!(
            parse_strict("[-1e400]"),
            Err(JcsError::NonFinite { offset: 1 })
        );
        assert!(matches!(parse_strict("NaN"), Err(JcsError::Syntax { .. })));
        assert!(matches!(
            parse_strict("Infinity"),
            Err(JcsError::Syntax { .. })
        ));
        assert!(matches!(
            parse_strict(r#"{"a":1,"a":2}"#),
            Err(JcsError::DuplicateKey { .. })
        ));
        assert!(matches!(
            parse_strict("\"a\u{1}\""),
            Err(JcsError::Syntax { .. })
        ));
        assert!(matches!(parse_strict("01"), Err(JcsError::Syntax { .. })));
        assert!(matches!(parse_strict("[1,]"), Err(JcsError::Syntax { .. })));
        assert!(matches!(parse_strict(""), Err(JcsError::Syntax { .. })));
        assert!(matches!(parse_strict("1 2"), Err(JcsError::Syntax { .. })));
    }

    #[test]
    fn pairs_and_numbers_parse() {
        assert_eq!(
            parse_strict(r#""\ud83d\ude02""#),
            Ok(Value::String("\u{1f602}".into()))
        );
        assert_eq!(parse_strict("-0"), Ok(Value::Number(0i64.into())));
        assert_eq!(
            parse_strict("18446744073709551615"),
            Ok(Value::Number(u64::MAX.into()))
        );
        assert_eq!(
            parse_strict("-9223372036854775808"),
            Ok(Value::Number(i64::MIN.into()))
        );
        assert_eq!(
            parse_strict("99999999999999999999")
                .ok()
                .and_then(|v| v.as_f64()),
            Some(1e20)
        );
    }
}
