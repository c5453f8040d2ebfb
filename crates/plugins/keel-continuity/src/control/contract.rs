//! The durable contract of explicit control mode:
//! `$KEEL_HOME/continuity/control/<sha256(root session id)>.json` (0600, directory 0700,
//! written atomically like the anchors: temp file + fsync + rename + directory fsync).
//!
//! ```json
//! {"schemaVersion": 1, "rootSessionId": "…", "revision": 3, "openedAtSeq": 12,
//!  "objective": "…", "acceptance": ["…"], "constraints": ["…"],
//!  "targets": ["src", "README.md"], "targetsDigest": "<sha256 of the canonical JSON of targets>",
//!  "fence": {"pendingInputSeqs": [41], "awaitingUpdate": []},
//!  "authorization": {"id": "auth-3", "revision": 3, "targetsDigest": "…", "intent": "…",
//!                    "paths": [], "used": false, "revoked": null} | null,
//!  "issued": 3,
//!  "leases": [{"callId": "…", "tool": "bash", "authorization": "auth-2", "revision": 2,
//!              "path": null}]}
//! ```
//!
//! A file that does not parse, carries an unknown key, another `schemaVersion`, another root
//! session, a `targetsDigest` that is not the digest of its `targets`, or an authorization
//! newer than the contract is refused with an error naming the file; so is a file whose bytes
//! are not the ones keel last wrote (see `Controller`). It is never trusted. Every change is
//! logged (with the whole contract; an admission with only its lease) and made durable before
//! the file is written, so a file behind the log is rolled forward at the next start.

use crate::anchors::{self, AnchorError, text_digest};
use serde::{Deserialize, Serialize};
use std::path::{Component, Path, PathBuf};

/// The contract schema version this keel reads and writes.
pub const CONTRACT_SCHEMA_VERSION: u32 = 1;

/// Human messages that arrived after the contract was written and were not reviewed yet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fence {
    /// Seqs of the fenced `user/message` events, ascending.
    pub pending_input_seqs: Vec<u64>,
    /// Seqs reviewed as `changed` whose change no `control_update` has recorded yet.
    #[serde(default)]
    pub awaiting_update: Vec<u64>,
}

/// A one-use pre-action authorization, bound to a revision and the targets' digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Authorization {
    /// `auth-<n>`.
    pub id: String,
    /// The contract revision it was issued for.
    pub revision: u64,
    /// The targets digest it was issued for.
    pub targets_digest: String,
    /// What the model said it would do.
    pub intent: String,
    /// Narrower paths (inside the targets) it covers; empty: all targets.
    #[serde(default)]
    pub paths: Vec<String>,
    /// Consumed by an admitted guarded call.
    pub used: bool,
    /// Why it can no longer be used although unused (a compaction, a changed human request).
    #[serde(default)]
    pub revoked: Option<String>,
}

/// The contract file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Contract {
    /// [`CONTRACT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The task's root session.
    pub root_session_id: String,
    /// 1 at `control_open`, +1 at each `control_update`.
    pub revision: u64,
    /// The log length when the contract was opened (human messages from here on are fenced).
    pub opened_at_seq: u64,
    /// What the task is for.
    pub objective: String,
    /// How the human will judge it done.
    pub acceptance: Vec<String>,
    /// What must not happen.
    #[serde(default)]
    pub constraints: Vec<String>,
    /// Declared target paths, relative to the workspace, normalised, sorted; a directory
    /// covers the files under it; `.` is the whole workspace.
    pub targets: Vec<String>,
    /// [`targets_digest`] of `targets`.
    pub targets_digest: String,
    /// Unreviewed human messages.
    pub fence: Fence,
    /// The latest authorization (used or not), if any was issued.
    pub authorization: Option<Authorization>,
    /// How many authorizations were issued (ids are `auth-<n>`).
    #[serde(default)]
    pub issued: u64,
    /// Guarded calls admitted and not settled yet. One left over from another process was
    /// stopped by a crash: its effect is indeterminate until a checkpoint accounts for it.
    #[serde(default)]
    pub leases: Vec<Lease>,
}

/// A guarded call between admission and its settled result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Lease {
    /// The tool call id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The authorization it consumed.
    pub authorization: String,
    /// The contract revision.
    pub revision: u64,
    /// The `write`/`edit` path, if any.
    #[serde(default)]
    pub path: Option<String>,
}

/// SHA-256 of the RFC 8785 canonical JSON of the (normalised, sorted) targets.
pub fn targets_digest(targets: &[String]) -> String {
    let value = serde_json::Value::from(targets.to_vec());
    let bytes = keel_jcs::to_canonical_vec(&value)
        .unwrap_or_else(|_| serde_json::to_vec(&value).unwrap_or_default());
    keel_jcs::digest::sha256_hex(&bytes)
}

/// Why a path cannot be a contract path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The path is blank.
    #[error("an empty path")]
    Empty,
    /// An absolute path outside the workspace.
    #[error("{0} is outside the workspace")]
    Outside(String),
    /// A relative path whose `..` climbs above the workspace.
    #[error("{0} climbs out of the workspace")]
    ClimbsOut(String),
    /// A path with a root or prefix after the workspace part.
    #[error("{0} is not a workspace path")]
    NotWorkspacePath(String),
}

/// A path as the contract spells it: relative to the workspace, `/`-separated, without `.`
/// or `..` components; `.` for the workspace itself. An absolute path must lie inside
/// `workspace`; a path that climbs out of it is refused.
pub fn normalize(workspace: &Path, raw: &str) -> Result<String, PathError> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(PathError::Empty);
    }
    let path = Path::new(raw);
    let rel: PathBuf = if path.is_absolute() {
        let canonical = workspace
            .canonicalize()
            .unwrap_or_else(|_| workspace.into());
        match path
            .strip_prefix(workspace)
            .or_else(|_| path.strip_prefix(&canonical))
        {
            Ok(r) => r.to_path_buf(),
            Err(_) => return Err(PathError::Outside(raw.to_owned())),
        }
    } else {
        path.to_path_buf()
    };
    let mut parts: Vec<String> = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                if parts.pop().is_none() {
                    return Err(PathError::ClimbsOut(raw.to_owned()));
                }
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(PathError::NotWorkspacePath(raw.to_owned()));
            }
        }
    }
    Ok(if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    })
}

/// Normalise, sort and deduplicate declared targets.
pub fn normalize_all(workspace: &Path, raw: &[String]) -> Result<Vec<String>, PathError> {
    let mut out = raw
        .iter()
        .map(|r| normalize(workspace, r))
        .collect::<Result<Vec<_>, _>>()?;
    out.sort();
    out.dedup();
    Ok(out)
}

/// Whether `target` (normalised) covers `path` (normalised): the same path, or a file under
/// the directory `target`.
pub fn covers(target: &str, path: &str) -> bool {
    target == "."
        || target == path
        || path
            .strip_prefix(target)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Where contracts live, and reading them back verified.
#[derive(Debug, Clone)]
pub struct ContractStore {
    dir: PathBuf,
}

/// A contract that cannot be trusted or written.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ContractError(pub String);

impl ContractStore {
    /// Contracts under `keel_home/continuity/control`.
    pub fn new(keel_home: &Path) -> ContractStore {
        ContractStore {
            dir: keel_home.join("continuity").join("control"),
        }
    }

    /// The contract file of `root_session`.
    pub fn path(&self, root_session: &str) -> PathBuf {
        self.dir.join(format!("{}.json", text_digest(root_session)))
    }

    /// The raw bytes of the contract file, if there is one.
    pub fn bytes(&self, root_session: &str) -> Result<Option<Vec<u8>>, ContractError> {
        let path = self.path(root_session);
        match std::fs::read(&path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ContractError(format!(
                "continuity contract {}: {e}",
                path.display()
            ))),
        }
    }

    /// Parse and verify `bytes` as the contract of `root_session`.
    pub fn parse(&self, root_session: &str, bytes: &[u8]) -> Result<Contract, ContractError> {
        let path = self.path(root_session);
        let invalid = |reason: String| {
            ContractError(format!(
                "continuity contract {} is not valid and is not trusted: {reason} (restore it, or remove it and call control_open again)",
                path.display()
            ))
        };
        let c: Contract = serde_json::from_slice(bytes).map_err(|e| invalid(e.to_string()))?;
        if c.schema_version != CONTRACT_SCHEMA_VERSION {
            return Err(invalid(format!(
                "schemaVersion {}, this keel reads {CONTRACT_SCHEMA_VERSION}",
                c.schema_version
            )));
        }
        if c.root_session_id != root_session {
            return Err(invalid(format!(
                "it names root session {}, not {root_session}",
                c.root_session_id
            )));
        }
        if c.revision == 0 {
            return Err(invalid("revision 0 (revisions start at 1)".into()));
        }
        let digest = targets_digest(&c.targets);
        if c.targets_digest != digest {
            return Err(invalid(format!(
                "targetsDigest {} is not the digest of its targets ({digest})",
                c.targets_digest
            )));
        }
        if let Some(a) = &c.authorization
            && a.revision > c.revision
        {
            return Err(invalid(format!(
                "authorization {} names revision {}, after the contract's {}",
                a.id, a.revision, c.revision
            )));
        }
        Ok(c)
    }

    /// The bytes a contract is written as (pretty JSON and a newline).
    pub fn bytes_of(&self, contract: &Contract) -> Result<Vec<u8>, ContractError> {
        anchors::pretty_bytes(contract)
            .map_err(|e: AnchorError| ContractError(format!("continuity contract: {e}")))
    }

    /// Write `bytes` as the contract of `root_session`, atomically.
    pub fn write(&self, root_session: &str, bytes: &[u8]) -> Result<(), ContractError> {
        anchors::write_bytes_atomic(&self.path(root_session), bytes)
            .map_err(|e| ContractError(format!("continuity contract: {e}")))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn paths_normalise_and_cover() {
        let ws = Path::new("/w");
        assert_eq!(normalize(ws, "./src/../src/a.rs").unwrap(), "src/a.rs");
        assert_eq!(normalize(ws, "/w/src").unwrap(), "src");
        assert_eq!(normalize(ws, ".").unwrap(), ".");
        assert!(normalize(ws, "../x").is_err());
        assert!(normalize(ws, "/etc/passwd").is_err());
        assert!(covers("src", "src/a.rs"));
        assert!(covers("src", "src"));
        assert!(!covers("src", "srcx/a.rs"));
        assert!(covers(".", "anything"));
    }
}
