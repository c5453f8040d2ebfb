//! The five control tools. Schemas are short (they ride on every request while control is
//! configured); `revision` is checked in the body, not by the schema, so that a missing or
//! stale revision gets an error naming the current one.

use super::contract::{
    Authorization, CONTRACT_SCHEMA_VERSION, Contract, Fence, PathError, covers, normalize_all,
    targets_digest,
};
use super::{CHECKPOINT_EVENT, ControlError, Controller, Pending, State};
use async_trait::async_trait;
use keel_protocol::ToolSchema;
use keel_tools::{ExecMode, Tool, ToolContext, ToolEffect, ToolError, ToolOutput};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// Names of the control tools.
pub const TOOL_NAMES: [&str; 5] = [
    "control_open",
    "control_status",
    "control_update",
    "control_checkpoint",
    "control_review_input",
];

/// The five tools over one controller.
pub fn tools(controller: &Arc<Controller>) -> Vec<Arc<dyn Tool>> {
    TOOL_NAMES
        .iter()
        .map(|name| {
            Arc::new(ControlTool {
                name,
                controller: controller.clone(),
            }) as Arc<dyn Tool>
        })
        .collect()
}

struct ControlTool {
    name: &'static str,
    controller: Arc<Controller>,
}

const S: &str = "string";

fn strings() -> Value {
    json!({"type":"array","items":{"type":S}})
}

fn schema(name: &'static str) -> (&'static str, Value) {
    let rev = json!({"type":"integer"});
    match name {
        "control_open" => (
            "Open the task contract (revision 1). targets: workspace paths you may change (a directory covers its files).",
            json!({"type":"object","properties":{"objective":{"type":S},"acceptance":strings(),
                "constraints":strings(),"targets":strings()},"required":["objective","acceptance","targets"]}),
        ),
        "control_status" => (
            "The contract, fenced human messages and the authorization.",
            json!({"type":"object","properties":{}}),
        ),
        "control_update" => (
            "Change the contract; revision: the current one (becomes +1).",
            json!({"type":"object","properties":{"revision":rev,"objective":{"type":S},
                "acceptance":strings(),"constraints":strings(),"targets":strings(),"rationale":{"type":S}},
                "required":["rationale"]}),
        ),
        "control_checkpoint" => (
            "Record a checkpoint. authorize: get a one-use authorization for the next write/edit/bash.",
            json!({"type":"object","properties":{"revision":rev,"note":{"type":S},
                "authorize":{"type":"object","properties":{"intent":{"type":S},"paths":strings()},"required":["intent"]}},
                "required":["note"]}),
        ),
        _ => (
            "Review a new human message against the contract; clears its fence.",
            json!({"type":"object","properties":{"revision":rev,"input_seq":{"type":"integer"},
                "outcome":{"type":S,"enum":["unchanged","changed"]},"rationale":{"type":S}},
                "required":["input_seq","outcome","rationale"]}),
        ),
    }
}

#[derive(Deserialize)]
struct OpenArgs {
    objective: String,
    acceptance: Vec<String>,
    #[serde(default)]
    constraints: Vec<String>,
    targets: Vec<String>,
}

#[derive(Deserialize)]
struct UpdateArgs {
    revision: Option<u64>,
    objective: Option<String>,
    acceptance: Option<Vec<String>>,
    constraints: Option<Vec<String>>,
    targets: Option<Vec<String>>,
    rationale: String,
}

#[derive(Deserialize)]
struct AuthorizeArgs {
    intent: String,
    #[serde(default)]
    paths: Vec<String>,
}

#[derive(Deserialize)]
struct CheckpointArgs {
    revision: Option<u64>,
    note: String,
    authorize: Option<AuthorizeArgs>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Outcome {
    Unchanged,
    Changed,
}

#[derive(Deserialize)]
struct ReviewArgs {
    revision: Option<u64>,
    input_seq: u64,
    outcome: Outcome,
    rationale: String,
}

/// Why a control tool call was refused; its message is the tool's error text for the model.
#[derive(Debug, thiserror::Error)]
enum CallError {
    /// The arguments do not fit the tool's shape (or the contract does not serialise).
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A declared path cannot be a contract path.
    #[error(transparent)]
    Path(#[from] PathError),
    /// The contract could not be read, logged or written.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// The model passed a revision other than the contract's.
    #[error(
        "stale revision {given}: the contract is at revision {current}; call control_status to re-read it, then pass revision {current}"
    )]
    StaleRevision { given: u64, current: u64 },
    /// The model passed no revision.
    #[error("missing revision: the contract is at revision {current}; pass revision {current}")]
    MissingRevision { current: u64 },
    /// No contract is open.
    #[error("no contract is open: call control_open with objective, acceptance and targets first")]
    NoContract,
    /// `control_open` while a contract is open.
    #[error(
        "a contract is already open at revision {revision}: call control_update with revision {revision} to change it"
    )]
    AlreadyOpen { revision: u64 },
    /// No targets were declared.
    #[error("targets is empty: declare the paths you may change")]
    EmptyTargets,
    /// `control_update` that changes nothing.
    #[error(
        "nothing to change: pass objective, acceptance, constraints or targets (revision {revision} stays)"
    )]
    NothingToChange { revision: u64 },
    /// An authorization asked for while a human message is not reviewed.
    #[error(
        "cannot authorize: human message input_seq {seq} is not reviewed; call control_review_input with revision {revision} and input_seq {seq} first"
    )]
    Unreviewed { seq: u64, revision: u64 },
    /// An authorization asked for while a reviewed change is not in the contract yet.
    #[error(
        "cannot authorize: human message input_seq {seq} changed the request and the contract does not say so yet; call control_update with revision {revision} first"
    )]
    AwaitingUpdate { seq: u64, revision: u64 },
    /// An authorization path outside the declared targets.
    #[error(
        "{path} is outside the declared targets {targets:?}: call control_update with revision {revision} to add it first"
    )]
    OutsideTargets {
        path: String,
        targets: Vec<String>,
        revision: u64,
    },
    /// A review of a message that is not fenced.
    #[error("input_seq {input_seq} is not fenced; fenced human messages: {fenced:?}")]
    NotFenced { input_seq: u64, fenced: Vec<u64> },
}

fn parse<T: serde::de::DeserializeOwned>(args: Value) -> Result<T, CallError> {
    Ok(serde_json::from_value(args)?)
}

/// The revision the model passed must be the contract's.
fn check_revision(c: &Contract, given: Option<u64>) -> Result<(), CallError> {
    match given {
        Some(r) if r == c.revision => Ok(()),
        Some(given) => Err(CallError::StaleRevision {
            given,
            current: c.revision,
        }),
        None => Err(CallError::MissingRevision {
            current: c.revision,
        }),
    }
}

impl Controller {
    fn open(&self, st: &mut State, args: Value) -> Result<String, CallError> {
        let a: OpenArgs = parse(args)?;
        if let Some(c) = self.load(st)? {
            return Err(CallError::AlreadyOpen {
                revision: c.revision,
            });
        }
        if a.targets.is_empty() {
            return Err(CallError::EmptyTargets);
        }
        let targets = normalize_all(&self.cwd, &a.targets)?;
        let opened_at_seq = self.agent.get().map_or(0, |agent| agent.next_seq().0);
        let c = Contract {
            schema_version: CONTRACT_SCHEMA_VERSION,
            root_session_id: st.root.clone(),
            revision: 1,
            opened_at_seq,
            objective: a.objective,
            acceptance: a.acceptance,
            constraints: a.constraints,
            targets_digest: targets_digest(&targets),
            targets,
            fence: Fence::default(),
            authorization: None,
            issued: 0,
            leases: Vec::new(),
        };
        self.commit(st, &c, "open", json!({}))?;
        Ok(format!(
            "contract open at revision 1 (targets {:?}). Before a write, edit or bash: control_checkpoint with revision 1 and authorize.",
            c.targets
        ))
    }

    fn status(&self, st: &mut State) -> Result<String, CallError> {
        let Some(c) = self.load(st)? else {
            return Ok(format!("{} (control is active)", CallError::NoContract));
        };
        Ok(serde_json::to_string_pretty(&c)?)
    }

    fn update(&self, st: &mut State, args: Value) -> Result<String, CallError> {
        let mut c = self.load(st)?.ok_or(CallError::NoContract)?;
        let a: UpdateArgs = parse(args)?;
        check_revision(&c, a.revision)?;
        let before = c.clone();
        if let Some(o) = a.objective {
            c.objective = o;
        }
        if let Some(x) = a.acceptance {
            c.acceptance = x;
        }
        if let Some(x) = a.constraints {
            c.constraints = x;
        }
        if let Some(t) = a.targets {
            if t.is_empty() {
                return Err(CallError::EmptyTargets);
            }
            c.targets = normalize_all(&self.cwd, &t)?;
            c.targets_digest = targets_digest(&c.targets);
        }
        if c == before {
            return Err(CallError::NothingToChange {
                revision: c.revision,
            });
        }
        c.revision += 1;
        c.fence.awaiting_update.clear();
        self.commit(st, &c, "update", json!({"rationale": a.rationale}))?;
        Ok(format!(
            "contract at revision {} (targets {:?}); earlier authorizations no longer apply.",
            c.revision, c.targets
        ))
    }

    fn checkpoint(
        &self,
        st: &mut State,
        args: Value,
        events: &mut Pending,
    ) -> Result<String, CallError> {
        let mut c = self.load(st)?.ok_or(CallError::NoContract)?;
        let a: CheckpointArgs = parse(args)?;
        check_revision(&c, a.revision)?;
        let rev = c.revision;
        let mut reply = format!("checkpoint recorded at revision {rev}.");
        // The note accounts for calls a crash left indeterminate.
        let resolved: Vec<String> = c
            .leases
            .iter()
            .filter(|l| !st.admitted.contains_key(&l.call_id))
            .map(|l| l.call_id.clone())
            .collect();
        if !resolved.is_empty() {
            c.leases.retain(|l| st.admitted.contains_key(&l.call_id));
            if a.authorize.is_none() {
                self.commit(st, &c, "resolve", json!({"resolved": resolved}))?;
            }
        }
        let mut issued = None;
        if let Some(auth) = a.authorize {
            if let Some(seq) = c.fence.pending_input_seqs.first() {
                return Err(CallError::Unreviewed {
                    seq: *seq,
                    revision: rev,
                });
            }
            if let Some(seq) = c.fence.awaiting_update.first() {
                return Err(CallError::AwaitingUpdate {
                    seq: *seq,
                    revision: rev,
                });
            }
            let paths = normalize_all(&self.cwd, &auth.paths)?;
            if let Some(p) = paths
                .iter()
                .find(|p| !c.targets.iter().any(|t| covers(t, p)))
            {
                return Err(CallError::OutsideTargets {
                    path: p.clone(),
                    targets: c.targets.clone(),
                    revision: rev,
                });
            }
            c.issued += 1;
            let id = format!("auth-{}", c.issued);
            c.authorization = Some(Authorization {
                id: id.clone(),
                revision: rev,
                targets_digest: c.targets_digest.clone(),
                intent: auth.intent.clone(),
                paths,
                used: false,
                revoked: None,
            });
            self.commit(st, &c, "authorize", json!({"authorization": id}))?;
            reply = format!(
                "checkpoint recorded; authorization {id} issued for revision {rev}: it admits one write, edit or bash."
            );
            issued = Some((id, auth.intent));
        }
        let (id, intent) = issued.unzip();
        events.push((
            CHECKPOINT_EVENT,
            json!({"revision": rev, "note": a.note, "authorization": id, "intent": intent, "resolved": resolved}),
        ));
        Ok(reply)
    }

    fn review(&self, st: &mut State, args: Value) -> Result<String, CallError> {
        let mut c = self.load(st)?.ok_or(CallError::NoContract)?;
        let a: ReviewArgs = parse(args)?;
        check_revision(&c, a.revision)?;
        let rev = c.revision;
        let Some(i) = c
            .fence
            .pending_input_seqs
            .iter()
            .position(|s| *s == a.input_seq)
        else {
            return Err(CallError::NotFenced {
                input_seq: a.input_seq,
                fenced: c.fence.pending_input_seqs.clone(),
            });
        };
        c.fence.pending_input_seqs.remove(i);
        let changed = matches!(a.outcome, Outcome::Changed);
        if changed {
            c.fence.awaiting_update.push(a.input_seq);
        }
        if changed
            && let Some(auth) = c
                .authorization
                .as_mut()
                .filter(|x| !x.used && x.revoked.is_none())
        {
            auth.revoked = Some(format!(
                "the human changed the request at seq {}",
                a.input_seq
            ));
        }
        self.commit(st, &c, "review", json!({"inputSeq": a.input_seq, "outcome": if changed {"changed"} else {"unchanged"}, "rationale": a.rationale}))?;
        let rest = match c.fence.pending_input_seqs.first() {
            Some(s) => format!(" Still fenced: input_seq {s}."),
            None => String::new(),
        };
        Ok(if changed {
            format!(
                "input_seq {} reviewed (changed).{rest} Record the change with control_update with revision {rev}, then control_checkpoint with authorize.",
                a.input_seq
            )
        } else {
            format!(
                "input_seq {} reviewed (unchanged).{rest} Contract stays at revision {rev}.",
                a.input_seq
            )
        })
    }

    fn call(&self, name: &str, args: Value) -> Result<String, ToolError> {
        let mut events = Pending::new();
        let reply = {
            let mut st = self.state();
            if !st.active {
                return Err(ToolError::Denied(
                    "explicit control is not active in this session: it starts when the human's message says \"use explicit control\"".into(),
                ));
            }
            let r = match name {
                "control_open" => self.open(&mut st, args),
                "control_status" => self.status(&mut st),
                "control_update" => self.update(&mut st, args),
                "control_checkpoint" => self.checkpoint(&mut st, args, &mut events),
                _ => self.review(&mut st, args),
            };
            r.map_err(|e| ToolError::InvalidArgs(e.to_string()))?
        };
        self.log(events)
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        Ok(reply)
    }
}

#[async_trait]
impl Tool for ControlTool {
    fn schema(&self) -> ToolSchema {
        let (description, parameters) = schema(self.name);
        ToolSchema {
            name: self.name.into(),
            description: description.into(),
            parameters,
        }
    }
    fn effect(&self) -> ToolEffect {
        // Writes only the contract, outside the workspace.
        ToolEffect::ReadOnly
    }
    fn mode(&self) -> ExecMode {
        ExecMode::Exclusive
    }
    fn offered(&self) -> bool {
        // `on-request`: not on the wire until the human's words turn control on.
        self.controller.is_active()
    }
    async fn execute(&self, args: Value, _ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        // A change waits for the log's fsync and writes the file: off the async workers.
        let (controller, name) = (self.controller.clone(), self.name);
        tokio::task::spawn_blocking(move || controller.call(name, args))
            .await
            .map_err(|e| ToolError::Failed(format!("{name}: {e}")))?
            .map(ToolOutput::text)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The five schemas as they ride on a request, in bytes.
    #[test]
    fn schemas_fit_in_three_kilobytes() {
        let c = Controller::new(
            super::super::ControlMode::Contract,
            super::super::default_guarded_tools(),
            ".".into(),
            std::path::Path::new("/nonexistent"),
        );
        let mut registry = keel_tools::ToolRegistry::new();
        for t in tools(&c) {
            registry.register(t).unwrap();
        }
        let bytes = registry.request_tools_bytes();
        eprintln!("control tool schemas: {bytes} bytes");
        assert!(bytes <= 3072, "{bytes} bytes");
    }
}
