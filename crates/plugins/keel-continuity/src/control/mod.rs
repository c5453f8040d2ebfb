//! Explicit control mode (opt-in): a durable contract outside the workspace, five tools to
//! keep it, and a `tools/guard` that admits a guarded tool (`write`, `edit`, `bash` by default)
//! only with a one-use authorization bound to the contract's revision and targets, no
//! unreviewed human message, and (for `write`/`edit`) a path inside the declared targets.
//!
//! | piece | where |
//! |---|---|
//! | the contract file, its verification, paths | [`contract`] |
//! | `control_open`, `control_status`, `control_update`, `control_checkpoint`, `control_review_input` | `tools` |
//! | activation, fencing human messages, revoking at a compaction | [`Controller::observe`] (`session/event`) |
//! | admission | [`ControlGuard`] (`tools/guard`) |
//!
//! The five tools are registered when the continuity row says `control = "contract"` (active
//! from the first message) or `control = "on-request"` (not offered to the model, refused if
//! called, and the guard inert until a human message says "use explicit control"); they are
//! offered ([`keel_tools::Tool::offered`]) only while control is active. With
//! `control = "off"` (the default) nothing is registered and requests are byte-for-byte those
//! of passive mode.

mod bench;
pub mod contract;
mod tools;

pub use bench::{AdmissionBench, BenchError};

use crate::anchors::Anchors;
use async_trait::async_trait;
use contract::{Authorization, Contract, ContractError, ContractStore, Lease, covers, normalize};
use keel_agent::AgentError;
use keel_agent::{AgentHandle, AgentSlot};
use keel_protocol::sync::Locked;
use keel_protocol::{EventBody, SessionEvent, SurfaceOp};
use keel_session::store::FlushTicket;
use keel_session::store::StoreError;
use keel_tools::{GuardDecision, GuardHook, HookContext, SettledHook, ToolOutcome};
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

/// Tools whose `path` argument must lie inside the declared targets.
const PATH_TOOLS: [&str; 2] = ["write", "edit"];

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

    /// `session/event` (the top agent's): activation by the human's words, fencing each human
    /// message that arrives once a contract is open, revoking an unused authorization when the
    /// history is replaced (compaction).
    pub(crate) fn observe(&self, ev: &SessionEvent) {
        // Only human messages and replacements matter; anything else (this controller's own
        // records, logged while its lock is held) returns before locking.
        let human = matches!(&ev.body, EventBody::UserMessage(m) if m.source.is_user());
        if !human && !matches!(ev.surface_op, Some(SurfaceOp::Replace { .. })) {
            return;
        }
        let mut events = Pending::new();
        {
            let mut st = self.state();
            if !st.bound {
                return;
            }
            match &ev.body {
                EventBody::UserMessage(m) if m.source.is_user() => {
                    let mut activated_now = false;
                    if !st.active
                        && self.mode == ControlMode::OnRequest
                        && m.text().to_lowercase().contains(ACTIVATION_PHRASE)
                    {
                        st.active = true;
                        activated_now = true;
                    }
                    if st.active && !st.activation_logged {
                        st.activation_logged = true;
                        let reason = if activated_now { "task text" } else { "config" };
                        events.push((
                            CONTROL_EVENT,
                            json!({"active": true, "reason": reason, "inputSeq": ev.seq.0}),
                        ));
                    }
                    if st.active && !activated_now {
                        match self.fence(&mut st, ev.seq.0) {
                            Ok(()) => {}
                            Err(e) => {
                                st.failure.get_or_insert(format!(
                                    "continuity could not fence human message seq {}: {e}",
                                    ev.seq.0
                                ));
                            }
                        }
                    }
                }
                _ if st.active && matches!(ev.surface_op, Some(SurfaceOp::Replace { .. })) => {
                    match self.revoke(
                        &mut st,
                        &format!("the history was replaced at seq {} (compaction)", ev.seq.0),
                    ) {
                        Ok(()) => {}
                        Err(e) => {
                            st.failure.get_or_insert(e.to_string());
                        }
                    }
                }
                _ => {}
            }
        }
        // An observer cannot fail; a log failure shows up on the next append.
        let _ = self.log(events);
    }

    fn fence(&self, st: &mut State, seq: u64) -> Result<(), ControlError> {
        let Some(mut c) = self.load(st)? else {
            return Ok(());
        };
        if seq < c.opened_at_seq || c.fence.pending_input_seqs.contains(&seq) {
            return Ok(());
        }
        c.fence.pending_input_seqs.push(seq);
        c.fence.pending_input_seqs.sort_unstable();
        self.commit(st, &c, "fence", json!({"inputSeq": seq}))
    }

    fn revoke(&self, st: &mut State, reason: &str) -> Result<(), ControlError> {
        let Some(mut c) = self.load(st)? else {
            return Ok(());
        };
        let Some(a) = c
            .authorization
            .as_mut()
            .filter(|a| !a.used && a.revoked.is_none())
        else {
            return Ok(());
        };
        a.revoked = Some(reason.to_owned());
        let id = a.id.clone();
        self.commit(
            st,
            &c,
            "revoke",
            json!({"authorization": id, "reason": reason}),
        )
    }

    /// The guard's decision. Admission consumes the authorization and takes the lease in
    /// one logged change; the call may run once the returned ticket is durable (the file
    /// catches up when the call settles).
    fn admit(
        &self,
        call_id: &str,
        tool: &str,
        args: &Value,
    ) -> Result<Option<FlushTicket>, String> {
        let mut st = self.state();
        if !st.active || !self.guarded.iter().any(|g| g == tool) {
            return Ok(None);
        }
        if let Some(f) = &st.failure {
            return Err(f.clone());
        }
        if !self.refresh(&mut st).map_err(|e| e.to_string())? {
            return Err(format!(
                "explicit control is on and no contract is open: call control_open with objective, acceptance and targets, then control_checkpoint with revision 1 and authorize, before {tool}"
            ));
        }
        let State {
            cached, admitted, ..
        } = &mut *st;
        let Some(c) = cached.as_mut() else {
            return Ok(None); // `refresh` said there is one
        };
        let rev = c.revision;
        // An action a crash left indeterminate comes first: after a restart it is what the
        // model must hear about before anything else (the new message is fenced next).
        if let Some(l) = c.leases.iter().find(|l| !admitted.contains_key(&l.call_id)) {
            return Err(format!(
                "the guarded call {} ({}{}) admitted with {} never settled: keel stopped (crash or kill) while it ran, so its effect is indeterminate. Check the current state first, then call control_checkpoint with revision {rev}, a note saying what you found, and authorize if more work is needed",
                l.call_id,
                l.tool,
                l.path
                    .as_deref()
                    .map(|p| format!(" {p}"))
                    .unwrap_or_default(),
                l.authorization
            ));
        }
        if let Some(seq) = c.fence.pending_input_seqs.first() {
            return Err(format!(
                "the human sent a new message (input_seq {seq}) after contract revision {rev} was written: call control_review_input with revision {rev} and input_seq {seq} first (outcome \"unchanged\" or \"changed\", with a rationale), then control_checkpoint with revision {rev} and authorize"
            ));
        }
        if let Some(seq) = c.fence.awaiting_update.first() {
            return Err(format!(
                "human message input_seq {seq} changed the request: call control_update with revision {rev} to record the change, then control_checkpoint with revision {} and authorize",
                rev + 1
            ));
        }
        let path = if PATH_TOOLS.contains(&tool) {
            // The pipeline hands guards the arguments under their current names.
            let raw = args
                .get("file_path")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let p = normalize(&self.cwd, raw)
                .map_err(|e| format!("{tool} refused by explicit control: {e}"))?;
            if !c.targets.iter().any(|t| covers(t, &p)) {
                return Err(format!(
                    "{p} is outside the declared targets {:?} of contract revision {rev}: write only inside them, or call control_update with revision {rev} adding it to targets (with a rationale), then control_checkpoint with revision {} and authorize",
                    c.targets,
                    rev + 1
                ));
            }
            Some(p)
        } else {
            None
        };
        let digest_now = c.targets_digest.clone();
        let again = format!("call control_checkpoint with revision {rev} and authorize");
        let a: &mut Authorization = match c.authorization.as_mut() {
            None => {
                return Err(format!(
                    "no authorization for {tool}: {again} (intent: what you are about to do) first"
                ));
            }
            Some(a) => a,
        };
        if a.used {
            return Err(format!(
                "authorization {} was already used (each one admits one guarded call): {again} again",
                a.id
            ));
        }
        if let Some(r) = &a.revoked {
            return Err(format!(
                "authorization {} was revoked ({r}): call control_status to re-read the contract, then {again} again",
                a.id
            ));
        }
        if a.revision != rev || a.targets_digest != digest_now {
            return Err(format!(
                "authorization {} was issued for revision {}, but the contract is now at revision {rev}: call control_status to re-read it, then {again}",
                a.id, a.revision
            ));
        }
        if let Some(p) = &path
            && !a.paths.is_empty()
            && !a.paths.iter().any(|t| covers(t, p))
        {
            return Err(format!(
                "{p} is outside the paths {:?} authorization {} covers: {again} for it",
                a.paths, a.id
            ));
        }
        let lease = Lease {
            call_id: call_id.to_owned(),
            tool: tool.to_owned(),
            authorization: a.id.clone(),
            revision: rev,
            path,
        };
        // The log record is the change itself (the contract it applies to is the one logged
        // before it): no copy of the whole contract on the guarded path.
        let data = json!({"action": "consume", "revision": rev, "lease": &lease});
        let ticket = match self.agent.get() {
            None => None,
            Some(agent) => {
                agent.push_ignorable(CONTROL_EVENT, data).map_err(|e| {
                    format!("cannot consume the authorization: cannot log {CONTROL_EVENT}: {e}")
                })?;
                Some(agent.flush_ticket())
            }
        };
        let receipt = json!({"callId": call_id, "tool": tool, "authorization": lease.authorization, "revision": rev, "path": lease.path});
        consume(c, lease);
        admitted.insert(call_id.to_owned(), receipt);
        Ok(ticket)
    }

    /// The admission of `call_id` could not be made durable: refuse it, and every guarded
    /// call after it (its lease stays: indeterminate, the safe side).
    fn admission_failed(&self, call_id: &str, error: String) -> String {
        let mut st = self.state();
        st.admitted.remove(call_id);
        let reason = format!("the admission of {call_id} could not be made durable: {error}");
        st.failure.get_or_insert(reason.clone());
        reason
    }

    /// `tools/settled` of an admitted call: the lease's release and the receipt, one fsync,
    /// then the file brought up to date. The receipt — `continuity/receipt {callId, tool,
    /// authorization, revision, path, isError, digest}`, `digest` the SHA-256 of the canonical
    /// JSON of `{isError, content, error, meta}` — is durable before the result is appended.
    /// Blocks on the fsync: call it off the async workers.
    fn settle(&self, call_id: &str, is_error: bool, digest: String) {
        let mut st = self.state();
        let Some(mut receipt) = st.admitted.remove(call_id) else {
            return;
        };
        // The lease ends with the result (a failure leaves it: indeterminate, the safe side).
        let mut file = None;
        if let Ok(Some(mut c)) = self.load(&mut st) {
            c.leases.retain(|l| l.call_id != call_id);
            if let Ok(bytes) = self.store.bytes_of(&c) {
                let d = keel_jcs::digest::sha256_hex(&bytes);
                if self
                    .record(&mut st, &c, "release", json!({"callId": call_id}), Some(&d))
                    .is_ok()
                {
                    file = Some((c, bytes, d));
                }
            }
        }
        receipt["isError"] = json!(is_error);
        receipt["digest"] = json!(digest);
        let Some(agent) = self.agent.get() else {
            return;
        };
        // A receipt that cannot be logged leaves the consumed authorization as the record.
        if agent.push_ignorable(RECEIPT_EVENT, receipt).is_err()
            || agent.flush_ticket().wait().is_err()
        {
            return;
        }
        if let Some((c, bytes, d)) = file
            && self.store.write(&st.root, &bytes).is_ok()
        {
            self.wrote(&mut st, c, d);
        }
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

/// The digest a receipt carries: SHA-256 of the canonical JSON of `{isError, content, error,
/// meta}`.
fn outcome_digest(outcome: &ToolOutcome) -> String {
    let body = json!({
        "isError": outcome.is_error,
        "content": outcome.content,
        "error": outcome.code(),
        "meta": outcome.meta,
    });
    let bytes = keel_jcs::to_canonical_vec(&body)
        .unwrap_or_else(|_| serde_json::to_vec(&body).unwrap_or_default());
    keel_jcs::digest::sha256_hex(&bytes)
}

/// The `tools/guard` and `tools/settled` hooks of explicit control.
pub struct ControlGuard(pub(crate) Arc<Controller>);

#[async_trait]
impl SettledHook for ControlGuard {
    async fn settled(&self, _ctx: &HookContext<'_>, outcome: &ToolOutcome) {
        if !self.0.state().admitted.contains_key(&outcome.call_id) {
            return;
        }
        let (controller, call_id) = (self.0.clone(), outcome.call_id.clone());
        let (is_error, digest) = (outcome.is_error, outcome_digest(outcome));
        // The fsync runs on a blocking thread, not on an async worker.
        let _ = tokio::task::spawn_blocking(move || controller.settle(&call_id, is_error, digest))
            .await;
    }
}

#[async_trait]
impl GuardHook for ControlGuard {
    async fn check(&self, ctx: &HookContext<'_>, args: &Value) -> GuardDecision {
        let ticket = match self.0.admit(&ctx.call.id, &ctx.call.name, args) {
            Ok(None) => return GuardDecision::Pass,
            Ok(Some(ticket)) => ticket,
            Err(reason) => return GuardDecision::Deny(reason),
        };
        // The admission's one fsync, on the writer thread, which wakes this task.
        match ticket.durable().await.map_err(|e| e.to_string()) {
            Ok(()) => GuardDecision::Pass,
            Err(e) => GuardDecision::Deny(self.0.admission_failed(&ctx.call.id, e)),
        }
    }
}
