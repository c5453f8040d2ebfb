//! Time: the one place keel reads the clock and writes and reads time stamps. Session events
//! carry milliseconds since the Unix epoch ([`TimeMs`]); people and outside formats see UTC,
//! either as `2026-12-04 17:59:40 UTC` ([`utc_time`]) or as RFC 3339 ([`utc_rfc3339`], with
//! milliseconds; [`utc_rfc3339_short`], milliseconds only when there are some), and RFC 3339
//! with any offset is read back by [`parse_rfc3339`].

use std::fmt;

/// Milliseconds since the Unix epoch, as written in `time` fields.
pub type TimeMs = i64;

/// `YYYY-MM-DD HH:MM:SS UTC` for `ms` since the Unix epoch.
pub fn utc_time(ms: TimeMs) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// RFC 3339 / ISO 8601 UTC with milliseconds (`2026-12-04T17:59:40.123Z`) for `ms` since the
/// Unix epoch.
pub fn utc_rfc3339(ms: TimeMs) -> String {
    let secs = ms.div_euclid(1000);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms.rem_euclid(1000)
    )
}

/// Gregorian `(year, month, day)` of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`; proleptic, no leap seconds).
pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z.saturating_add(719_468);
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Milliseconds since the Unix epoch, now (0 if the clock is before 1970).
pub fn now_ms() -> TimeMs {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// RFC 3339 UTC (`2030-01-31T12:00:00Z`), with milliseconds only when there are some
/// (`2030-01-31T12:00:00.250Z`): what schedules and other hand-read times show.
pub fn utc_rfc3339_short(ms: TimeMs) -> String {
    let full = utc_rfc3339(ms);
    match full.strip_suffix(".000Z") {
        Some(whole) => format!("{whole}Z"),
        None => full,
    }
}

/// A time stamp that is not RFC 3339 ([`parse_rfc3339`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeParseError {
    /// The text, as given.
    pub text: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl fmt::Display for TimeParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not an RFC 3339 time (2030-01-31T12:00:00Z): {}",
            self.text, self.reason
        )
    }
}

impl std::error::Error for TimeParseError {}

/// An RFC 3339 time stamp (`2030-01-31T12:00:00Z`, `…T12:00:00.5+01:00`; `T`/`t` or a space
/// between date and time, `Z`/`z` or a `±HH:MM` offset, any number of fraction digits, of which
/// milliseconds are kept) as milliseconds since the Unix epoch. A leap second (`:60`) counts
/// as the last millisecond of its minute.
pub fn parse_rfc3339(text: &str) -> Result<TimeMs, TimeParseError> {
    let err = |reason| TimeParseError {
        text: text.to_owned(),
        reason,
    };
    let b = text.as_bytes();
    let num = |at: usize, len: usize| -> Option<i64> {
        let digits = b.get(at..at + len)?;
        digits.iter().try_fold(0i64, |n, d| {
            d.is_ascii_digit().then(|| n * 10 + i64::from(d - b'0'))
        })
    };
    let (Some(year), Some(month), Some(day)) = (num(0, 4), num(5, 2), num(8, 2)) else {
        return Err(err("expected a date YYYY-MM-DD"));
    };
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return Err(err("expected a date YYYY-MM-DD"));
    }
    if !matches!(b.get(10), Some(b'T' | b't' | b' ')) {
        return Err(err("expected 'T' between the date and the time"));
    }
    let (Some(hour), Some(minute), Some(second)) = (num(11, 2), num(14, 2), num(17, 2)) else {
        return Err(err("expected a time HH:MM:SS"));
    };
    if b.get(13) != Some(&b':') || b.get(16) != Some(&b':') {
        return Err(err("expected a time HH:MM:SS"));
    }
    let mut at = 19;
    let mut millis = 0i64;
    if b.get(at) == Some(&b'.') {
        at += 1;
        let start = at;
        while b.get(at).is_some_and(u8::is_ascii_digit) {
            if at - start < 3 {
                millis = millis * 10 + i64::from(b[at] - b'0');
            }
            at += 1;
        }
        if at == start {
            return Err(err("expected digits after '.'"));
        }
        for _ in (at - start)..3 {
            millis *= 10;
        }
    }
    let offset_minutes = match b.get(at) {
        Some(b'Z' | b'z') if at + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) if at + 6 == b.len() && b[at + 3] == b':' => {
            let (Some(h), Some(m)) = (num(at + 1, 2), num(at + 4, 2)) else {
                return Err(err("expected an offset ±HH:MM"));
            };
            if h > 23 || m > 59 {
                return Err(err("the offset is out of range"));
            }
            let minutes = h * 60 + m;
            if *sign == b'-' { -minutes } else { minutes }
        }
        _ => return Err(err("expected 'Z' or an offset ±HH:MM at the end")),
    };
    let leap = [
        31,
        28 + i64::from(is_leap(year)),
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&month) {
        return Err(err("the month is out of range"));
    }
    if day < 1 || day > leap[usize::try_from(month - 1).unwrap_or(0)] {
        return Err(err("the day is out of range"));
    }
    if hour > 23 || minute > 59 || second > 60 {
        return Err(err("the time of day is out of range"));
    }
    let (second, millis) = if second == 60 {
        (59, 999)
    } else {
        (second, millis)
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Ok(secs * 1000 + millis)
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// Days since 1970-01-01 of a Gregorian date (Howard Hinnant's `days_from_civil`, the inverse
/// of [`civil_from_days`]).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn formats_and_parses_round_trip() {
        let ms = 1_735_787_045_678;
        assert_eq!(utc_rfc3339(ms), "2025-01-02T03:04:05.678Z");
        assert_eq!(parse_rfc3339("2025-01-02T03:04:05.678Z").unwrap(), ms);
        assert_eq!(parse_rfc3339("2025-01-02T04:04:05.678+01:00").unwrap(), ms);
        assert_eq!(parse_rfc3339("2025-01-01t22:04:05.6789-05:00").unwrap(), ms);
        assert_eq!(utc_rfc3339_short(ms - 678), "2025-01-02T03:04:05Z");
        assert_eq!(utc_rfc3339_short(ms), "2025-01-02T03:04:05.678Z");
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z").unwrap(), 0);
        assert_eq!(parse_rfc3339("1969-12-31T23:59:59.999Z").unwrap(), -1);
        assert_eq!(
            parse_rfc3339("2024-02-29T00:00:00Z").unwrap(),
            1_709_164_800_000
        );
        for ms in [0, 951_782_400_000, 4_102_444_799_999, -86_400_000 * 400] {
            assert_eq!(parse_rfc3339(&utc_rfc3339(ms)).unwrap(), ms, "{ms}");
        }
    }

    #[test]
    fn malformed_time_stamps_say_what_is_wrong() {
        for (text, reason) in [
            ("tomorrow", "expected a date YYYY-MM-DD"),
            ("2025-13-01T00:00:00Z", "the month is out of range"),
            ("2023-02-29T00:00:00Z", "the day is out of range"),
            ("2025-01-01T24:00:00Z", "the time of day is out of range"),
            (
                "2025-01-01T00:00:00",
                "expected 'Z' or an offset ±HH:MM at the end",
            ),
            ("2025-01-01T00:00:00.Z", "expected digits after '.'"),
            (
                "2025-01-01T00:00:00+1:00",
                "expected 'Z' or an offset ±HH:MM at the end",
            ),
            ("2025-01-01", "expected 'T' between the date and the time"),
        ] {
            assert_eq!(parse_rfc3339(text).unwrap_err().reason, reason, "{text}");
        }
    }

    #[test]
    fn days_from_civil_inverts_civil_from_days() {
        for days in [-800_000, -1, 0, 1, 59, 365, 11_016, 20_000, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }
}
