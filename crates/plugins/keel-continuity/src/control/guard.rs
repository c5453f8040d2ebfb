//! Admission: the `tools/guard` that admits a guarded call only with a one-use authorization
//! bound to the contract's revision and targets, no unreviewed human message and (for
//! `write`/`edit`) a path inside the targets, consuming the authorization and taking a lease in
//! one logged change; and the `tools/settled` hook that releases the lease and logs the call's
//! receipt.

use super::contract::{Authorization, Lease, PathError, covers, normalize};
use super::{CONTROL_EVENT, ControlError, Controller, RECEIPT_EVENT, State, consume};
use async_trait::async_trait;
use keel_session::store::FlushTicket;
use keel_tools::{GuardDecision, GuardHook, HookContext, SettledHook, ToolOutcome};
use serde_json::{Value, json};
use std::sync::Arc;

/// Why explicit control refuses a guarded call: what the model reads, with the calls that get
/// it going again.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// An earlier admission could not be made durable: every guarded call after it is refused.
    #[error("{0}")]
    Failed(String),
    /// The contract could not be read.
    #[error(transparent)]
    Contract(#[from] ControlError),
    /// Control is on and no contract is open.
    #[error(
        "explicit control is on and no contract is open: call control_open with objective, acceptance and targets, then control_checkpoint with revision 1 and authorize, before {tool}"
    )]
    NoContract {
        /// The tool called.
        tool: String,
    },
    /// A lease a crash left: the effect of its call is unknown.
    #[error(
        "the guarded call {} ({}{}) admitted with {} never settled: keel stopped (crash or kill) while it ran, so its effect is indeterminate. Check the current state first, then call control_checkpoint with revision {rev}, a note saying what you found, and authorize if more work is needed",
        .lease.call_id,
        .lease.tool,
        .lease.path.as_deref().map(|p| format!(" {p}")).unwrap_or_default(),
        .lease.authorization
    )]
    Indeterminate {
        /// The lease never released.
        lease: Lease,
        /// The contract's revision.
        rev: u64,
    },
    /// A human message not reviewed against the contract.
    #[error(
        "the human sent a new message (input_seq {seq}) after contract revision {rev} was written: call control_review_input with revision {rev} and input_seq {seq} first (outcome \"unchanged\" or \"changed\", with a rationale), then control_checkpoint with revision {rev} and authorize"
    )]
    UnreviewedInput {
        /// The message's input seq.
        seq: u64,
        /// The contract's revision.
        rev: u64,
    },
    /// A human message that changed the request, not yet recorded.
    #[error(
        "human message input_seq {seq} changed the request: call control_update with revision {rev} to record the change, then control_checkpoint with revision {} and authorize",
        .rev + 1
    )]
    AwaitingUpdate {
        /// The message's input seq.
        seq: u64,
        /// The contract's revision.
        rev: u64,
    },
    /// The call's path cannot be read as a workspace path.
    #[error("{tool} refused by explicit control: {source}")]
    BadPath {
        /// The tool called.
        tool: String,
        /// Why.
        source: PathError,
    },
    /// The call's path is outside the contract's targets.
    #[error(
        "{path} is outside the declared targets {targets:?} of contract revision {rev}: write only inside them, or call control_update with revision {rev} adding it to targets (with a rationale), then control_checkpoint with revision {} and authorize",
        .rev + 1
    )]
    OutsideTargets {
        /// The path, normalized.
        path: String,
        /// The contract's targets.
        targets: Vec<String>,
        /// The contract's revision.
        rev: u64,
    },
    /// No authorization.
    #[error(
        "no authorization for {tool}: call control_checkpoint with revision {rev} and authorize (intent: what you are about to do) first"
    )]
    NoAuthorization {
        /// The tool called.
        tool: String,
        /// The contract's revision.
        rev: u64,
    },
    /// The authorization admitted a call already.
    #[error(
        "authorization {id} was already used (each one admits one guarded call): call control_checkpoint with revision {rev} and authorize again"
    )]
    Used {
        /// The authorization.
        id: String,
        /// The contract's revision.
        rev: u64,
    },
    /// The authorization was revoked.
    #[error(
        "authorization {id} was revoked ({why}): call control_status to re-read the contract, then call control_checkpoint with revision {rev} and authorize again"
    )]
    Revoked {
        /// The authorization.
        id: String,
        /// Why it was revoked.
        why: String,
        /// The contract's revision.
        rev: u64,
    },
    /// The authorization is of an earlier revision (or other targets).
    #[error(
        "authorization {id} was issued for revision {issued}, but the contract is now at revision {rev}: call control_status to re-read it, then call control_checkpoint with revision {rev} and authorize"
    )]
    Stale {
        /// The authorization.
        id: String,
        /// The revision it was issued for.
        issued: u64,
        /// The contract's revision.
        rev: u64,
    },
    /// The call's path is outside the paths the authorization covers.
    #[error(
        "{path} is outside the paths {paths:?} authorization {id} covers: call control_checkpoint with revision {rev} and authorize for it"
    )]
    OutsidePaths {
        /// The path, normalized.
        path: String,
        /// The paths it covers.
        paths: Vec<String>,
        /// The authorization.
        id: String,
        /// The contract's revision.
        rev: u64,
    },
    /// The authorization's consumption could not be logged.
    #[error("cannot consume the authorization: cannot log {}: {}", CONTROL_EVENT, .0)]
    Unlogged(keel_agent::AgentError),
}

/// Tools whose `path` argument must lie inside the declared targets.
const PATH_TOOLS: [&str; 2] = ["write", "edit"];

impl Controller {
    /// The guard's decision. Admission consumes the authorization and takes the lease in
    /// one logged change; the call may run once the returned ticket is durable (the file
    /// catches up when the call settles).
    pub(super) fn admit(
        &self,
        call_id: &str,
        tool: &str,
        args: &Value,
    ) -> Result<Option<FlushTicket>, Refusal> {
        let mut st = self.state();
        if !st.active || !self.guarded.iter().any(|g| g == tool) {
            return Ok(None);
        }
        if let Some(f) = &st.failure {
            return Err(Refusal::Failed(f.clone()));
        }
        if !self.refresh(&mut st)? {
            return Err(Refusal::NoContract {
                tool: tool.to_owned(),
            });
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
            return Err(Refusal::Indeterminate {
                lease: l.clone(),
                rev,
            });
        }
        if let Some(&seq) = c.fence.pending_input_seqs.first() {
            return Err(Refusal::UnreviewedInput { seq, rev });
        }
        if let Some(&seq) = c.fence.awaiting_update.first() {
            return Err(Refusal::AwaitingUpdate { seq, rev });
        }
        let path = if PATH_TOOLS.contains(&tool) {
            // The pipeline hands guards the arguments under their current names.
            let raw = args
                .get("file_path")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let p = normalize(&self.cwd, raw).map_err(|source| Refusal::BadPath {
                tool: tool.to_owned(),
                source,
            })?;
            if !c.targets.iter().any(|t| covers(t, &p)) {
                return Err(Refusal::OutsideTargets {
                    path: p,
                    targets: c.targets.clone(),
                    rev,
                });
            }
            Some(p)
        } else {
            None
        };
        let digest_now = c.targets_digest.clone();
        let a: &mut Authorization = match c.authorization.as_mut() {
            None => {
                return Err(Refusal::NoAuthorization {
                    tool: tool.to_owned(),
                    rev,
                });
            }
            Some(a) => a,
        };
        if a.used {
            return Err(Refusal::Used {
                id: a.id.clone(),
                rev,
            });
        }
        if let Some(r) = &a.revoked {
            return Err(Refusal::Revoked {
                id: a.id.clone(),
                why: r.clone(),
                rev,
            });
        }
        if a.revision != rev || a.targets_digest != digest_now {
            return Err(Refusal::Stale {
                id: a.id.clone(),
                issued: a.revision,
                rev,
            });
        }
        if let Some(p) = &path
            && !a.paths.is_empty()
            && !a.paths.iter().any(|t| covers(t, p))
        {
            return Err(Refusal::OutsidePaths {
                path: p.clone(),
                paths: a.paths.clone(),
                id: a.id.clone(),
                rev,
            });
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
                agent
                    .push_ignorable(CONTROL_EVENT, data)
                    .map_err(Refusal::Unlogged)?;
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
    pub(super) fn admission_failed(&self, call_id: &str, error: String) -> String {
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
    pub(super) fn settle(&self, call_id: &str, is_error: bool, digest: String) {
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
            Err(refusal) => return GuardDecision::Deny(refusal.to_string()),
        };
        // The admission's one fsync, on the writer thread, which wakes this task.
        match ticket.durable().await.map_err(|e| e.to_string()) {
            Ok(()) => GuardDecision::Pass,
            Err(e) => GuardDecision::Deny(self.0.admission_failed(&ctx.call.id, e)),
        }
    }
}
