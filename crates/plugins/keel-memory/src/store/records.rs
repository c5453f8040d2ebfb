//! Memory records: the shape of one record, its revision, the limits on its fields, and the
//! time stamps (RFC 3339 UTC with milliseconds).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// Largest `content`, in bytes.
pub const MAX_CONTENT_BYTES: usize = 64 * 1024;
/// Most tags on one record.
pub const MAX_TAGS: usize = 32;
/// Longest tag, in bytes.
pub const MAX_TAG_BYTES: usize = 64;

/// Who a record (or variable) belongs to. The scope id is never taken from the model: it is
/// derived from the calling agent ([`super::Identity`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The calling agent's session (scope id: its session id).
    Session,
    /// The workspace (scope id: a digest of the canonical workspace root).
    Project,
    /// The agent's role (scope id: `main` for a top-level session, `subagent` for a delegated
    /// one), shared across sessions and projects.
    Agent,
    /// Everything (scope id: `global`); writes only with `global_writes = true`.
    Global,
}

impl Scope {
    /// The four record scopes, in search order.
    pub const ALL: [Scope; 4] = [Scope::Session, Scope::Project, Scope::Agent, Scope::Global];

    /// Its spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Session => "session",
            Scope::Project => "project",
            Scope::Agent => "agent",
            Scope::Global => "global",
        }
    }

    /// Parse a spelling.
    pub fn parse(s: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|x| x.as_str() == s)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a record remembers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A fact, preference or rule that holds over time.
    Semantic,
    /// Something that happened (an event, an outcome).
    Episodic,
}

impl Kind {
    /// Its spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Semantic => "semantic",
            Kind::Episodic => "episodic",
        }
    }

    /// Parse a spelling.
    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "semantic" => Some(Kind::Semantic),
            "episodic" => Some(Kind::Episodic),
            _ => None,
        }
    }
}

/// One memory record, as stored (the JSON of the `records.json` column) and as `memory_read`
/// shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// `mem_` and 16 hex digits.
    pub id: String,
    /// Its scope.
    pub scope: Scope,
    /// Its scope id (see [`Scope`]).
    pub scope_id: String,
    /// Semantic or episodic.
    pub kind: Kind,
    /// The text (≤ 64 KiB).
    pub content: String,
    /// Tags: sorted, deduplicated, ≤ 32.
    pub tags: Vec<String>,
    /// 0..=1.
    pub importance: f64,
    /// 0..=1 (default 1).
    pub confidence: f64,
    /// Who wrote it: `<agent role>:<session id>`.
    pub source: String,
    /// RFC 3339 UTC.
    pub created_at: String,
    /// RFC 3339 UTC.
    pub updated_at: String,
    /// When it stops being visible (RFC 3339 UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// When it was forgotten (soft delete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_at: Option<String>,
    /// First 16 hex digits of the SHA-256 of the canonical JSON of the record without
    /// `revision`.
    pub revision: String,
}

impl Record {
    /// The revision of the record's current fields (ignoring its `revision`).
    pub fn compute_revision(&self) -> String {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            m.remove("revision");
        }
        revision_of(&v)
    }

    /// Set `revision` from the other fields.
    pub fn seal(&mut self) {
        self.revision = self.compute_revision();
    }

    /// The text search matches: the content and the tags.
    pub fn search_text(&self) -> String {
        let mut s = self.content.clone();
        for t in &self.tags {
            s.push(' ');
            s.push_str(t);
        }
        s
    }
}

/// First 16 hex digits of the SHA-256 of `value`'s RFC 8785 canonical JSON.
pub fn revision_of(value: &Value) -> String {
    let bytes = keel_jcs::to_canonical_vec(value).unwrap_or_default();
    let mut hex = keel_jcs::digest::sha256_hex(&bytes);
    hex.truncate(16);
    hex
}

/// A field the model passed is out of bounds: names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// The argument's name.
    pub field: &'static str,
    /// What is wrong and what is allowed.
    pub message: String,
}

/// A [`FieldError`].
pub fn field_err(field: &'static str, message: impl Into<String>) -> FieldError {
    FieldError {
        field,
        message: message.into(),
    }
}

/// Check `content` (non-empty, ≤ 64 KiB).
pub fn check_content(content: &str) -> Result<(), FieldError> {
    if content.trim().is_empty() {
        return Err(field_err("content", "is empty"));
    }
    if content.len() > MAX_CONTENT_BYTES {
        return Err(field_err(
            "content",
            format!(
                "is {} bytes; the limit is {MAX_CONTENT_BYTES} (64 KiB)",
                content.len()
            ),
        ));
    }
    Ok(())
}

/// Tags sorted and deduplicated (trimmed, empty ones dropped); ≤ 32 of ≤ 64 bytes each.
pub fn normalize_tags(tags: &[String]) -> Result<Vec<String>, FieldError> {
    let mut out: Vec<String> = tags
        .iter()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .collect();
    out.sort();
    out.dedup();
    if out.len() > MAX_TAGS {
        return Err(field_err(
            "tags",
            format!("{} distinct tags; the limit is {MAX_TAGS}", out.len()),
        ));
    }
    if let Some(t) = out.iter().find(|t| t.len() > MAX_TAG_BYTES) {
        return Err(field_err(
            "tags",
            format!("tag {t:?} is over {MAX_TAG_BYTES} bytes"),
        ));
    }
    Ok(out)
}

/// Check a 0..=1 weight (`importance`, `confidence`).
pub fn check_unit(field: &'static str, v: f64) -> Result<f64, FieldError> {
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(field_err(field, format!("{v} is outside 0..1")))
    }
}

pub use keel_protocol::time::now_ms;
/// `ms` as RFC 3339 UTC with milliseconds (`2025-01-02T03:04:05.678Z`).
pub use keel_protocol::time::utc_rfc3339 as rfc3339;

/// Parse an RFC 3339 time stamp (any offset) to ms since the epoch; the error names `field`.
pub fn parse_rfc3339(field: &'static str, s: &str) -> Result<i64, FieldError> {
    keel_protocol::time::parse_rfc3339(s).map_err(|e| field_err(field, e.to_string()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn time_stamps_round_trip() {
        let ms = 1_735_787_045_678;
        let s = rfc3339(ms);
        assert_eq!(s, "2025-01-02T03:04:05.678Z");
        assert_eq!(parse_rfc3339("x", &s).unwrap(), ms);
        assert_eq!(
            parse_rfc3339("x", "2025-01-02T04:04:05.678+01:00").unwrap(),
            ms
        );
        assert_eq!(
            parse_rfc3339("expires_at", "tomorrow").unwrap_err().field,
            "expires_at"
        );
    }

    #[test]
    fn tags_are_sorted_deduped_and_bounded() {
        let t = normalize_tags(&["b".into(), " a ".into(), "b".into(), "".into()]).unwrap();
        assert_eq!(t, ["a", "b"]);
        let many: Vec<String> = (0..33).map(|i| format!("t{i}")).collect();
        assert_eq!(normalize_tags(&many).unwrap_err().field, "tags");
        let mut same: Vec<String> = (0..32).map(|i| format!("t{i}")).collect();
        same.push("t0".into());
        assert_eq!(normalize_tags(&same).unwrap().len(), 32);
    }
}
