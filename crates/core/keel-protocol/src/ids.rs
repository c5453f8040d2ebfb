//! Newtypes for identifiers that must not be confused with one another.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The time type and formatters, which lived here first ([`crate::time`]).
pub use crate::time::{TimeMs, civil_from_days, utc_rfc3339, utc_time};

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
