//! Newtypes for identifiers that must not be confused with one another.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Position of an event in its session log: contiguous from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Seq(pub u64);

impl Seq {
    /// The next sequence number.
    pub fn next(self) -> Seq {
        Seq(self.0 + 1)
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Identifier of a session (`session-<uuid>` for sessions keel creates).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionId(pub String);

impl SessionId {
    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for SessionId {
    fn from(s: &str) -> Self {
        SessionId(s.to_owned())
    }
}

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

/// Number of a turn within its session: 1 for the first (the `turn` field of step events).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct TurnNo(pub u32);

impl TurnNo {
    /// The turn after this one.
    pub const fn next(self) -> Self {
        TurnNo(self.0 + 1)
    }
}

impl fmt::Display for TurnNo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Number of a step within its turn: 1 for the first (the `step` field of step events).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct StepNo(pub u32);

impl StepNo {
    /// The step after this one.
    pub const fn next(self) -> Self {
        StepNo(self.0 + 1)
    }
}

impl fmt::Display for StepNo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Identifier of one tool call, as the model gave it (`callId` / `toolCallId` in the log).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CallId(pub String);

impl CallId {
    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for CallId {
    fn from(s: &str) -> Self {
        CallId(s.to_owned())
    }
}

#[cfg(test)]
mod time_tests {
    use super::*;

    #[test]
    fn rfc3339_times_are_utc_with_milliseconds() {
        assert_eq!(utc_rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_rfc3339(1_796_406_380_123), "2026-12-04T17:46:20.123Z");
        assert_eq!(utc_rfc3339(-1), "1969-12-31T23:59:59.999Z");
    }
}
