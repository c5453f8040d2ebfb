//! The execution basis folded from the append-only log: what a projection may re-render.
//!
//! One pass over the events stored whole (delta chunks are skipped without being built), up to
//! a boundary seq:
//! - **human authority**: every `user/message` whose source is the human, verbatim;
//! - **approved plan**: the `plan` argument of the latest *successful* `exit_plan_mode` call
//!   (its `tool/result` is not an error and does not say it was refused), or of one handed to
//!   the user unapproved (headless) and approved later by a `plan/mode {approved: true}` event
//!   naming the same plan;
//! - **todo**: the last `todo/write` of the current turn (`turn/start` clears it), with the
//!   `tool/result` of the call that wrote it;
//! - **child results**: the last N successful foreground `subagent` results (a background
//!   call's "started" result is not an outcome), with the digests of the prompt and the result;
//! - **carried state**: what other plugins ask to keep in sight — the status items their
//!   presenters ([`keel_protocol::present`]) give with a [`Carry`] (the goals plugin's open
//!   goal), the last one per key. Continuity knows no plugin's events: the host hands it the
//!   plugins' presenters.

use crate::anchors::{Source, content_digest, text_digest};
use keel_protocol::present::{Carry, Item, PresenterSet};
use keel_protocol::{EventBody, Seq, TodoItem};
use keel_session::Session;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// The tool whose successful call carries the approved plan.
pub const EXIT_PLAN_MODE: &str = "exit_plan_mode";
/// The tool that writes the todo list.
pub const TODO_WRITE: &str = "todo_write";
/// The tool that runs a subagent.
pub const SUBAGENT: &str = "subagent";

/// A human message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Human {
    /// Seq of its `user/message`.
    pub seq: Seq,
    /// Message id.
    pub id: String,
    /// [`content_digest`] of its content.
    pub digest: String,
    /// Its text, verbatim.
    pub text: String,
}

impl Human {
    /// Its anchor entry.
    pub fn source(&self) -> Source {
        Source {
            seq: self.seq.0,
            event_id: self.id.clone(),
            digest: self.digest.clone(),
        }
    }
}

/// The approved plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Seq of the call's `tool/result`.
    pub seq: Seq,
    /// The plan text.
    pub plan: String,
}

/// The current turn's todo list.
#[derive(Debug, Clone, PartialEq)]
pub struct Todo {
    /// Seq of the `todo/write`.
    pub seq: Seq,
    /// Seq of the `tool/result` of the call that wrote it, once there is one.
    pub result: Option<Seq>,
    /// The list.
    pub items: Vec<TodoItem>,
}

/// A foreground subagent's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildResult {
    /// Seq of the parent's `tool/result`.
    pub seq: Seq,
    /// The child session, when the result names it.
    pub child_session: Option<String>,
    /// SHA-256 of the prompt given to the child.
    pub prompt_digest: String,
    /// SHA-256 of the result text.
    pub result_digest: String,
    /// The result text.
    pub text: String,
}

/// A plugin's state continuity carries: the last status item under `key` that had a [`Carry`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Carried {
    /// The status item's key (`goal`): the projection item's kind.
    pub key: String,
    /// What to re-project, and when.
    pub carry: Carry,
}

/// Everything a projection may render, as of `upto`.
#[derive(Debug, Clone, PartialEq)]
pub struct Basis {
    /// Events before this seq were folded.
    pub upto: Seq,
    /// Human messages, in seq order.
    pub humans: Vec<Human>,
    /// The latest approved plan.
    pub plan: Option<Plan>,
    /// The current turn's todo list.
    pub todo: Option<Todo>,
    /// The last successful foreground child results, oldest first.
    pub children: Vec<ChildResult>,
    /// Other plugins' carried state, by key.
    pub carried: Vec<Carried>,
}

struct Call {
    name: String,
    arguments: String,
}

/// Fold `session` up to (not including) `upto`, keeping the last `child_results` child results;
/// `presenters` give the carried state.
pub fn fold(
    session: &Session,
    upto: Seq,
    child_results: usize,
    presenters: &PresenterSet,
) -> Basis {
    let mut basis = Basis {
        upto,
        humans: Vec::new(),
        plan: None,
        todo: None,
        children: Vec::new(),
        carried: Vec::new(),
    };
    let mut present = presenters.make();
    let mut carried: BTreeMap<String, Carry> = BTreeMap::new();
    let mut calls: HashMap<String, Call> = HashMap::new();
    let mut children = VecDeque::new();
    // The last plan handed to the user without approval: approved later, between turns.
    let mut handed_off: Option<Plan> = None;
    for ev in session.whole_event_iter() {
        if ev.seq >= upto {
            break;
        }
        for item in present.present(ev) {
            if let Item::Status { key, status } = item {
                match status.and_then(|s| s.carry) {
                    Some(carry) => carried.insert(key, carry),
                    None => carried.remove(&key),
                };
            }
        }
        match &ev.body {
            EventBody::TurnStart(_) => basis.todo = None,
            EventBody::UserMessage(m) if m.source.is_user() => basis.humans.push(Human {
                seq: ev.seq,
                id: m.id.clone(),
                digest: content_digest(&m.content),
                text: m.text(),
            }),
            EventBody::PlanMode(p) if p.approved == Some(true) => {
                if let Some(h) = handed_off
                    .take()
                    .filter(|h| p.plan.as_ref() == Some(&h.plan))
                {
                    basis.plan = Some(h);
                }
            }
            EventBody::TodoWrite(t) => {
                basis.todo = Some(Todo {
                    seq: ev.seq,
                    result: None,
                    items: t.todos.clone(),
                })
            }
            EventBody::ToolCall(c)
                if [EXIT_PLAN_MODE, TODO_WRITE, SUBAGENT].contains(&c.name.as_str()) =>
            {
                calls.insert(
                    c.call_id.clone(),
                    Call {
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                    },
                );
            }
            EventBody::ToolResult(r) => {
                for block in r.message.tool_results() {
                    let Some(call) = calls.remove(&block.tool_call_id) else {
                        continue;
                    };
                    // A tool's structured value: keel merges an object's fields into the
                    // result's `meta` (any other value sits under `meta.value`).
                    let field = |key: &str| {
                        let meta = r.meta.as_ref()?;
                        meta.get(key)
                            .or_else(|| meta.get("value").and_then(|v| v.get(key)))
                    };
                    match call.name.as_str() {
                        TODO_WRITE => {
                            if let Some(t) = basis.todo.as_mut().filter(|t| t.result.is_none()) {
                                t.result = Some(ev.seq);
                            }
                        }
                        _ if block.is_error => {}
                        EXIT_PLAN_MODE => {
                            // keel's result says whether the human approved (a refusal is not
                            // an error result); a log without it (dsh) counts success.
                            let flag = |key: &str| field(key)?.as_bool();
                            let Some(plan) = argument(&call.arguments, "plan") else {
                                continue;
                            };
                            let plan = Plan { seq: ev.seq, plan };
                            if flag("approved").unwrap_or(true) {
                                basis.plan = Some(plan);
                            } else if flag("handedOff") == Some(true) {
                                handed_off = Some(plan);
                            }
                        }
                        _ => {
                            if field("jobId").is_some() {
                                continue; // a background start, not an outcome
                            }
                            let text = block.text();
                            children.push_back(ChildResult {
                                seq: ev.seq,
                                child_session: field("childSession")
                                    .and_then(|s| s.as_str())
                                    .map(str::to_owned),
                                prompt_digest: text_digest(
                                    &argument(&call.arguments, "prompt").unwrap_or_default(),
                                ),
                                result_digest: text_digest(&text),
                                text,
                            });
                            if children.len() > child_results {
                                children.pop_front();
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    basis.children = children.into();
    basis.carried = carried
        .into_iter()
        .map(|(key, carry)| Carried { key, carry })
        .collect();
    basis
}

/// The string argument `key` of a raw argument string.
fn argument(arguments: &str, key: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(arguments).ok()?;
    v.get(key)?.as_str().map(str::to_owned)
}
