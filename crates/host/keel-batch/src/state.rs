//! `state.json` in the out dir: each task's status, session and result, written atomically
//! (a temp file renamed over it) whenever a task starts a session or ends, so a batch killed
//! at any point is picked up by the next run of the same command.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Why `state.json` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// It is there but is not a state file.
    #[error("{} is not a batch state file ({error}); move it away to start over", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        error: serde_json::Error,
    },
    /// It could not be read.
    #[error("cannot read {}: {error}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
}

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Not started (or started without a session: it starts afresh).
    #[default]
    Pending,
    /// Its session is running (after a crash: to resume).
    Running,
    /// Stopped before it ended (Ctrl-C): resumed on the next run.
    Interrupted,
    /// Could not start (its workspace, its process): tried again on the next run.
    Failed,
    /// Ended and scored: skipped on the next run.
    Done,
}

/// One task's record.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TaskState {
    /// Where it stands.
    pub status: Status,
    /// Its session id, once its `keel run` printed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Processes started for it (`keel run`, then `keel resume`s; with Ray, its jobs).
    #[serde(default)]
    pub attempts: u32,
    /// The engine's record of its last run: a Ray job's submission id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// Its line of results.jsonl, once it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
}

/// The whole file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct State {
    /// Format version (1).
    pub version: u32,
    /// Task id → record.
    pub tasks: BTreeMap<String, TaskState>,
}

impl State {
    /// `state.json` of `out`, or an empty state when there is none.
    pub fn load(out: &Path) -> Result<State, StateError> {
        let path = out.join("state.json");
        match std::fs::read(&path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes).map_err(|error| StateError::Invalid { path, error })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State {
                version: 1,
                ..State::default()
            }),
            Err(error) => Err(StateError::Read { path, error }),
        }
    }

    /// Write `state.json` atomically.
    pub fn save(&self, out: &Path) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        write_atomic(&out.join("state.json"), &bytes)
    }

    /// The record of `id` (created pending).
    pub fn task(&mut self, id: &str) -> &mut TaskState {
        self.tasks.entry(id.to_owned()).or_default()
    }
}

/// Write `path` through a temp file beside it, synced, then renamed over it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_through_temp(path, bytes, true)
}

/// Write `path` through a temp file renamed over it (`sync`: the data reaches the disk
/// before the rename; results.jsonl skips it: it is rebuilt from state.json on every run).
pub fn write_through_temp(path: &Path, bytes: &[u8], sync: bool) -> std::io::Result<()> {
    let mut tmp = PathBuf::from(path);
    tmp.as_mut_os_string().push(".tmp");
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(bytes)?;
    if sync {
        file.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}
