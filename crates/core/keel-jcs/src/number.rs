//! ECMAScript number formatting (`Number.prototype.toString`, ECMA-262 §6.1.6.1.20) as RFC 8785
//! requires: the shortest digit string that round-trips (taken from Rust's shortest `{:e}`
//! formatting), then laid out in plain or exponent form by the ECMAScript rules.

use crate::JcsError;
use serde_json::Number;
use std::io::Write;

/// 2^53: integers up to this magnitude are exact doubles and print as plain integers.
const MAX_SAFE: u64 = 1 << 53;

/// Append a `serde_json::Number` in canonical form.
pub(super) fn write_number(out: &mut Vec<u8>, n: &Number) -> Result<(), JcsError> {
    if let Some(u) = n.as_u64() {
        if u <= MAX_SAFE {
            write_u64(out, u);
            return Ok(());
        }
    } else if let Some(i) = n.as_i64()
        && i.unsigned_abs() <= MAX_SAFE
    {
        if i < 0 {
            out.push(b'-');
        }
        write_u64(out, i.unsigned_abs());
        return Ok(());
    }
    match n.as_f64() {
        Some(x) => write_f64(out, x),
        None => Err(JcsError::NonFinite { offset: 0 }),
    }
}

/// Append an unsigned integer; past 2^53 it is read as the nearest double, like ECMAScript.
pub(super) fn write_u64(out: &mut Vec<u8>, n: u64) {
    if n <= MAX_SAFE {
        // Writing to a Vec cannot fail.
        let _ = write!(out, "{n}");
    } else {
        // Finite by construction.
        let _ = write_f64(out, n as f64);
    }
}

/// Append an `f64` in ECMAScript's canonical form; NaN and ±∞ are refused.
pub fn write_f64(out: &mut Vec<u8>, x: f64) -> Result<(), JcsError> {
    if !x.is_finite() {
        return Err(JcsError::NonFinite { offset: 0 });
    }
    if x == 0.0 {
        out.push(b'0');
        return Ok(());
    }
    if x.fract() == 0.0 && x.abs() < MAX_SAFE as f64 {
        // Exact integer: ECMAScript prints its decimal digits.
        let _ = write!(out, "{}", x as i64);
        return Ok(());
    }
    let mut buf = [0u8; 40];
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    let _ = write!(cursor, "{x:e}");
    let len = usize::try_from(cursor.position()).unwrap_or(0);
    let text = &buf[..len];
    // `text` is `[-]d[.ddd]e[-]x`.
    let (negative, body) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let e_pos = body.iter().position(|&c| c == b'e').unwrap_or(body.len());
    let (mantissa, exp_part) = body.split_at(e_pos);
    let exp: i32 = std::str::from_utf8(exp_part.get(1..).unwrap_or(b"0"))
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut digits = [0u8; 24];
    let mut k = 0usize;
    for &c in mantissa {
        if c.is_ascii_digit() && k < digits.len() {
            digits[k] = c;
            k += 1;
        }
    }
    let digits = &digits[..k];
    let k = k as i32;
    let n = exp + 1;
    if negative {
        out.push(b'-');
    }
    if k <= n && n <= 21 {
        out.extend_from_slice(digits);
        out.extend(std::iter::repeat_n(b'0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        let (int, frac) = digits.split_at(n as usize);
        out.extend_from_slice(int);
        out.push(b'.');
        out.extend_from_slice(frac);
    } else if -6 < n && n <= 0 {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', (-n) as usize));
        out.extend_from_slice(digits);
    } else {
        if let Some((first, rest)) = digits.split_first() {
            out.push(*first);
            if !rest.is_empty() {
                out.push(b'.');
                out.extend_from_slice(rest);
            }
        }
        let _ = write!(
            out,
            "e{}{}",
            if n - 1 < 0 { '-' } else { '+' },
            (n - 1).abs()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn f(x: f64) -> String {
        let mut out = Vec::new();
        match write_f64(&mut out, x) {
            Ok(()) => String::from_utf8_lossy(&out).into_owned(),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    #[allow(clippy::excessive_precision)] // the literal is the vector's input, on purpose
    fn ecmascript_forms() {
        // Expected strings are what `String(x)` prints in ECMAScript.
        let cases: &[(f64, &str)] = &[
            (1e30, "1e+30"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (123456789012345680000.0, "123456789012345680000"),
            (-0.0, "0"),
            (0.1, "0.1"),
            (1e-6, "0.000001"),
            (1e-7, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (-2.5e-9, "-2.5e-9"),
            (333333333.33333329, "333333333.3333333"),
            (4.5, "4.5"),
            (9007199254740992.0, "9007199254740992"),
            (9007199254740994.0, "9007199254740994"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (-1.0, "-1"),
            (123.456, "123.456"),
        ];
        for &(x, want) in cases {
            assert_eq!(f(x), want, "formatting {x:e}");
        }
    }

    #[test]
    fn non_finite_is_refused() {
        assert!(f(f64::NAN).starts_with("error"));
        assert!(f(f64::INFINITY).starts_with("error"));
        assert!(f(f64::NEG_INFINITY).starts_with("error"));
    }

    #[test]
    fn big_integers_read_as_doubles() {
        let mut out = Vec::new();
        write_u64(&mut out, 12345678901234567890);
        assert_eq!(String::from_utf8_lossy(&out), "12345678901234567000");
    }
}
