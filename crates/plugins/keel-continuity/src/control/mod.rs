//! Explicit control mode (opt-in): a durable contract outside the workspace, five tools to
//! keep it, and a `tools/guard` that admits a guarded tool (`write`, `edit`, `bash` by default)
//! only with a one-use authorization bound to the contract's revision and targets, no
//! unreviewed human message, and (for `write`/`edit`) a path inside the declared targets.
//!
//! | piece | where |
//! |---|---|
//! | the contract file, its verification, paths | [`contract`] |
//! | `control_open`, `control_status`, `control_update`, `control_checkpoint`, `control_review_input` | `tools` |
//! | the controller's state, the contract's write-ahead changes, recovery at bind | here |
//! | activation, fencing human messages, revoking at a compaction | `observe`: [`Controller::observe`] (`session/event`) |
//! | admission and the receipt | `guard`: [`ControlGuard`] (`tools/guard`, `tools/settled`) |
//!
//! The five tools are registered when the continuity row says `control = "contract"` (active
//! from the first message) or `control = "on-request"` (not offered to the model, refused if
//! called, and the guard inert until a human message says "use explicit control"); they are
//! offered ([`keel_tools::Tool::offered`]) only while control is active. With
//! `control = "off"` (the default) nothing is registered and requests are byte-for-byte those
//! of passive mode.

mod bench;
pub mod contract;
mod guard;
mod observe;
mod tools;

pub use bench::{AdmissionBench, BenchError};
pub use guard::{ControlGuard, Refusal};

use crate::anchors::Anchors;
use contract::{Authorization, Contract, ContractError, ContractStore, Lease};
use keel_agent::AgentError;
use keel_agent::{AgentHandle, AgentSlot};
use keel_protocol::EventBody;
use keel_protocol::sync::Locked;
use keel_session::store::FlushTicket;
use keel_session::store::StoreError;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

pub use tools::{TOOL_NAMES, tools};

/// Activation and every change of the contract's state are logged as ignorable events.
pub const CONTROL_EVENT: &str = "continuity/control";
/// A `control_checkpoint`.
pub const CHECKPOINT_EVENT: &str = "continuity/checkpoint";
/// The receipt of an admitted guarded call.
pub const RECEIPT_EVENT: &str = "continuity/receipt";
/// The text that turns `on-request` control on (case-insensitive).
pub const ACTIVATION_PHRASE: &str = "use explicit control";

/// The `control` key of the continuity row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ControlMode {
    /// No tools, no guard (the default).
    #[default]
    Off,
    /// Active from the session's first message (`--control contract`).
    Contract,
    /// Tools registered; active from the first human message saying "use explicit control".
    OnRequest,
}

/// What `--control contract` does to the continuity row's merged `config` (JSON, `null` when
/// the row has none): the same table with `control = "contract"`. A configuration layer cannot
/// do it alone: a later layer's `[[plugins]]` row replaces the row's whole `config`, which
/// would drop the user's other keys.
pub fn with_contract(row_config: Value) -> Value {
    let mut map = match row_config {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    map.insert("control".into(), json!("contract"));
    Value::Object(map)
}

/// Whether explicit control was active in `session` (its log holds a `continuity/control`
/// activation): a front end resuming it keeps the mode on even without the flag, so a
/// resumed task is never silently unguarded.
pub fn was_active(session: &keel_session::Session) -> bool {
    session.whole_event_iter().any(|ev| {
        matches!(&ev.body, EventBody::Other(o)
            if o.type_name == CONTROL_EVENT && o.data.get("active") == Some(&Value::Bool(true)))
    })
}

/// The tools guarded by default.
pub fn default_guarded_tools() -> Vec<String> {
    ["write", "edit", "bash"].map(String::from).to_vec()
}

/// One task's control state, shared by the tools, the guard and the observer.
pub struct Controller {
    mode: ControlMode,
    guarded: Vec<String>,
    cwd: PathBuf,
    store: ContractStore,
    anchors: Anchors,
    agent: AgentSlot,
    state: Mutex<State>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("mode", &self.mode)
            .finish()
    }
}

#[derive(Default)]
struct State {
    bound: bool,
    active: bool,
    activation_logged: bool,
    root: String,
    /// SHA-256 of the bytes keel last wrote to the contract file (or that the log says it
    /// wrote): a file with other bytes was edited outside keel.
    file_digest: Option<String>,
    /// The file's identity and times when keel last wrote or verified it: while they are
    /// unchanged the file need not be read again.
    file_stamp: Option<FileStamp>,
    /// The current contract. Ahead of the file while a guarded call runs: its admission is
    /// durable in the log only, and the file catches up when the call settles.
    cached: Option<Contract>,
    /// A fence that could not be written: guarded tools are refused from then on.
    failure: Option<String>,
    /// Calls admitted and not settled yet: call id → the receipt's fields.
    admitted: std::collections::HashMap<String, Value>,
}

/// What identifies one version of the contract file without reading it: device, inode,
/// size, modification and change times (the change time cannot be set back by hand).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp([i64; 7]);

impl FileStamp {
    fn of(path: &std::path::Path) -> std::io::Result<FileStamp> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path)?;
        Ok(FileStamp([
            m.dev() as i64,
            m.ino() as i64,
            m.size() as i64,
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
        ]))
    }
}

/// An event to log once the lock is released.
type Pending = Vec<(&'static str, Value)>;

/// Why the controller could not read, log or write the contract.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The contract file cannot be read, trusted or written.
    #[error(transparent)]
    Contract(#[from] ContractError),
    /// The contract file's metadata cannot be read.
    #[error("continuity contract {}: {error}", path.display())]
    Stat {
        /// The contract file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// The contract file holds bytes keel did not write.
    #[error(
        "continuity contract {} was changed outside keel (its sha256 is {digest}, keel last wrote {written}) and is not trusted (restore it, or remove it and call control_open again)",
        path.display()
    )]
    ChangedOutside {
        /// The contract file.
        path: PathBuf,
        /// The SHA-256 of its bytes now.
        digest: String,
        /// The SHA-256 of the bytes keel last wrote.
        written: String,
    },
    /// An event could not be appended to the session log.
    #[error("cannot log {kind}: {error}")]
    Log {
        /// The event type.
        kind: &'static str,
        /// What the agent said.
        error: AgentError,
    },
    /// The logged change could not be made durable.
    #[error("cannot make {} durable: {error}", CONTROL_EVENT)]
    Durable {
        /// What the store said.
        error: StoreError,
    },
}

impl Controller {
    /// A controller for one install.
    pub(crate) fn new(
        mode: ControlMode,
        guarded: Vec<String>,
        cwd: PathBuf,
        keel_home: &std::path::Path,
    ) -> Arc<Controller> {
        Arc::new(Controller {
            mode,
            guarded,
            cwd,
            store: ContractStore::new(keel_home),
            anchors: Anchors::new(keel_home),
            agent: AgentSlot::new(),
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.locked()
    }

    /// The agent is built: learn the root session and what the log says (activation, the
    /// digest of the contract keel last wrote).
    pub(crate) fn bind(&self, agent: &AgentHandle) {
        if !self.agent.bind(agent) {
            return;
        }
        // What the log holds, read under its lock: the session's place and every control record.
        let (id, depth, records) = agent.with_session(|session| {
            let header = session.header();
            let records: Vec<Value> = session
                .whole_event_iter()
                .filter_map(|ev| match &ev.body {
                    EventBody::Other(o) if o.type_name == CONTROL_EVENT => Some(o.data.clone()),
                    _ => None,
                })
                .collect();
            (header.id.to_string(), header.delegation_depth, records)
        });
        let root = self.anchors.root_of(&id, depth);
        let mut st = self.state();
        st.bound = true;
        st.root = root;
        st.active = self.mode == ControlMode::Contract;
        // Digests of every contract keel wrote to the file, and the latest contract logged.
        let mut written = std::collections::HashSet::new();
        let mut latest = None;
        let mut consumed = Vec::new(); // `consume` records after `latest`
        for data in &records {
            if data.get("active") == Some(&Value::Bool(true)) {
                st.active = true;
                st.activation_logged = true;
            }
            if let Some(d) = data.get("contractDigest").and_then(Value::as_str) {
                written.insert(d.to_owned());
            }
            if let Some(c) = data.get("contract") {
                latest = Some(c);
                consumed.clear();
            } else if let Some(l) = data.get("lease") {
                consumed.push(l);
            }
        }
        let latest = latest.map(|c| {
            let mut c: Contract = serde_json::from_value(c.clone())
                .map_err(|e| format!("the logged contract does not parse: {e}"))?;
            for l in consumed {
                let lease = serde_json::from_value(l.clone())
                    .map_err(|e| format!("a logged consume does not parse: {e}"))?;
                consume(&mut c, lease);
            }
            Ok::<_, String>(c)
        });
        let latest = match latest.transpose() {
            Ok(c) => c,
            Err(e) => {
                st.failure.get_or_insert(e);
                return;
            }
        };
        if let Err(e) = self.roll_forward(&mut st, &written, latest) {
            st.failure.get_or_insert(e.to_string());
        }
    }

    /// The log is ahead of the file after a crash between a logged change and the file
    /// write, or while a guarded call ran (its admission is logged, the file catches up when
    /// it settles): a file holding a contract keel wrote earlier is brought up to the latest
    /// logged one. A file with bytes keel never wrote is left for [`Controller::load`] to
    /// refuse; a removed file means start over.
    fn roll_forward(
        &self,
        st: &mut State,
        written: &std::collections::HashSet<String>,
        latest: Option<Contract>,
    ) -> Result<(), ControlError> {
        let Some(c) = latest else {
            return Ok(());
        };
        let bytes = self.store.bytes_of(&c)?;
        let digest = keel_jcs::digest::sha256_hex(&bytes);
        let Some(file) = self.store.bytes(&st.root)? else {
            return Ok(()); // removed on purpose: start over
        };
        let on_file = keel_jcs::digest::sha256_hex(&file);
        if on_file == digest {
            self.wrote(st, c, digest);
            return Ok(());
        }
        if !written.contains(&on_file) {
            st.file_digest = Some(digest); // not keel's bytes: `load` refuses them
            return Ok(());
        }
        self.store.write(&st.root, &bytes)?;
        self.wrote(st, c, digest);
        Ok(())
    }

    /// The file now holds `c`, whose bytes have `digest`.
    fn wrote(&self, st: &mut State, c: Contract, digest: String) {
        st.file_digest = Some(digest);
        st.file_stamp = FileStamp::of(&self.store.path(&st.root)).ok();
        st.cached = Some(c);
    }

    /// Whether control is active now.
    pub fn is_active(&self) -> bool {
        self.state().active
    }

    /// The contract file of this task (once bound).
    pub fn contract_path(&self) -> PathBuf {
        self.store.path(&self.state().root)
    }

    /// The current contract, verified: the file must hold bytes keel wrote (it is not read
    /// again while its stamp is unchanged); the contract may be ahead of the file while a
    /// guarded call runs.
    fn load(&self, st: &mut State) -> Result<Option<Contract>, ControlError> {
        Ok(if self.refresh(st)? {
            st.cached.clone()
        } else {
            None
        })
    }

    /// [`Controller::load`] without the copy: whether there is a contract, now in
    /// `st.cached`.
    fn refresh(&self, st: &mut State) -> Result<bool, ControlError> {
        let path = self.store.path(&st.root);
        let stamp = match FileStamp::of(&path) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                st.cached = None; // removed on purpose: start over
                st.file_stamp = None;
                return Ok(false);
            }
            Err(error) => return Err(ControlError::Stat { path, error }),
        };
        if st.file_stamp == Some(stamp) && st.cached.is_some() {
            return Ok(true);
        }
        let Some(bytes) = self.store.bytes(&st.root)? else {
            st.cached = None;
            st.file_stamp = None;
            return Ok(false);
        };
        let digest = keel_jcs::digest::sha256_hex(&bytes);
        if let Some(w) = &st.file_digest {
            if *w != digest {
                return Err(ControlError::ChangedOutside {
                    path,
                    digest,
                    written: w.clone(),
                });
            }
            if st.cached.is_some() {
                st.file_stamp = Some(stamp); // touched, same bytes
                return Ok(true);
            }
        }
        let c = self.store.parse(&st.root, &bytes)?;
        st.file_digest = Some(digest);
        st.file_stamp = Some(stamp);
        st.cached = Some(c);
        Ok(true)
    }

    /// Log a change of the contract as `continuity/control {action, revision, contract,
    /// contractDigest?, …extra}`; `contractDigest` (of the file bytes) only when the file will
    /// be written with it. Returns the write-ahead ticket (none without an agent).
    fn record(
        &self,
        st: &mut State,
        c: &Contract,
        action: &str,
        extra: Value,
        file_digest: Option<&str>,
    ) -> Result<Option<FlushTicket>, ControlError> {
        st.cached = Some(c.clone());
        let Some(agent) = self.agent.get() else {
            return Ok(None);
        };
        let mut data = json!({
            "action": action,
            "revision": c.revision,
            "contract": c,
        });
        if let Some(d) = data.as_object_mut() {
            if let Some(digest) = file_digest {
                d.insert("contractDigest".into(), json!(digest));
            }
            if let Value::Object(extra) = extra {
                d.extend(extra);
            }
        }
        agent
            .push_ignorable(CONTROL_EVENT, data)
            .map_err(|error| ControlError::Log {
                kind: CONTROL_EVENT,
                error,
            })?;
        Ok(Some(agent.flush_ticket()))
    }

    /// Write-ahead: log the change with the whole new contract and its digest, wait until
    /// the log is durable, then write the file. A crash in between leaves the file behind the
    /// log, which the next run rolls forward ([`Controller::bind`]). Blocks on the fsync:
    /// call it off the async workers.
    fn commit(
        &self,
        st: &mut State,
        c: &Contract,
        action: &str,
        extra: Value,
    ) -> Result<(), ControlError> {
        let bytes = self.store.bytes_of(c)?;
        let digest = keel_jcs::digest::sha256_hex(&bytes);
        if let Some(ticket) = self.record(st, c, action, extra, Some(&digest))? {
            ticket
                .wait()
                .map_err(|error| ControlError::Durable { error })?;
        }
        self.store.write(&st.root, &bytes)?;
        self.wrote(st, c.clone(), digest);
        Ok(())
    }

    /// Log `events` (after the lock is released). Errors name the event.
    fn log(&self, events: Pending) -> Result<(), ControlError> {
        let Some(agent) = self.agent.get() else {
            return Ok(());
        };
        for (kind, data) in events {
            agent
                .push_ignorable(kind, data)
                .map_err(|error| ControlError::Log { kind, error })?;
        }
        Ok(())
    }
}

/// An admission's change of the contract (at the guard, and replayed from its log record):
/// the authorization is used, the call holds a lease.
fn consume(c: &mut Contract, lease: Lease) {
    if let Some(a) = c
        .authorization
        .as_mut()
        .filter(|a| a.id == lease.authorization)
    {
        a.used = true;
    }
    c.leases.push(lease);
}
