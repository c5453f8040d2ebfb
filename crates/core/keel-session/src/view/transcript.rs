//! The readable transcript of a session: turns → steps → items, built from every event as it
//! was appended (so history that compaction later replaced is still shown, marked with what
//! replaced it). Front ends render it as text or Markdown, or print it as JSON (its serde shape
//! is the `keel sessions show --json` format).
//!
//! Data flow: [`Transcript::build`] makes two passes over the events: the first collects which
//! seqs a `surfaceOp: replace` shadowed and the tool calls' names and results, the second places
//! each event under the open turn and step. Renderers only read the model. Streamed
//! `assistant/chunk`s are not shown (the `assistant/message` holds them). A plugin's own event
//! shows as a note with what its presenter says of it ([`keel_protocol::present`]), the same
//! words every other front end shows.

use super::summary::event_summary;
use crate::Session;
use keel_protocol::present::PresenterSet;
use keel_protocol::{
    EventBody, KnownSource, MessageSource, Seq, SessionEvent, SurfaceOp, TimeMs, TurnEndReason,
};
use keel_protocol::{StepNo, TurnNo};
use serde::Serialize;
use std::collections::HashMap;

/// A whole session as a transcript.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Transcript {
    /// Session id.
    pub id: String,
    /// Working directory from the header.
    pub cwd: Option<String>,
    /// Creation time, ms since epoch.
    pub created: TimeMs,
    /// Parent session (forks, subagents).
    pub parent: Option<String>,
    /// The last `session/title`.
    pub title: Option<String>,
    /// Number of events.
    pub events: u64,
    /// Turns, and what happened outside turns, in log order.
    pub blocks: Vec<Block>,
}

/// A turn or an item outside any turn.
#[derive(Debug, Serialize)]
#[serde(tag = "block", rename_all = "kebab-case")]
pub enum Block {
    /// A turn.
    Turn(Turn),
    /// Something logged outside a turn.
    Item(Item),
}

/// One turn.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    /// Turn number.
    pub turn: TurnNo,
    /// Seq of `turn/start`.
    pub seq: Seq,
    /// Steps, and what happened between them, in log order.
    pub entries: Vec<Entry>,
    /// How the turn ended; `None` while open.
    pub end: Option<TurnEndItem>,
}

/// A step or an item of a turn outside its steps.
#[derive(Debug, Serialize)]
#[serde(tag = "entry", rename_all = "kebab-case")]
pub enum Entry {
    /// A step.
    Step(Step),
    /// Something logged in the turn between steps.
    Item(Item),
}

/// One step.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// Turn number.
    pub turn: TurnNo,
    /// Step number.
    pub step: StepNo,
    /// Seq of `step/start`.
    pub seq: Seq,
    /// What the step logged.
    pub items: Vec<Item>,
    /// Seq of `step/end`; `None` while open.
    pub ended: Option<Seq>,
}

/// How a turn ended.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnEndItem {
    /// Seq of `turn/end`.
    pub seq: Seq,
    /// `completed`, `aborted`, `blocked`, `error`, `max-tokens`, `interrupted`.
    pub reason: String,
    /// Detail of the reason, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Who wrote a user-role message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// Typed by the human.
    Human,
    /// Written by the host or a plugin (runtime context, hooks…).
    Plugin,
    /// A compaction summary (a user message replacing history).
    Summary,
    /// Any other source.
    Other,
}

/// What became of a surface event: replaced later, and/or replacing earlier ones.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fate {
    /// The event that shadowed this one (compaction summary or prune), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadowed_by: Option<Shadow>,
    /// The seqs this event replaced (it was appended with `surfaceOp: replace`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replaces: Vec<Seq>,
}

/// A later event that shadowed this one.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Shadow {
    /// Seq of the replacing event.
    pub seq: Seq,
    /// `compacted` (replaced by a summary), `pruned` (by a smaller tool result) or `replaced`.
    pub how: &'static str,
}

/// A tool call proposed by an assistant message.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Call {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// The raw argument string.
    pub arguments: String,
    /// Seq of its `tool/call` (it entered the pipeline), if logged.
    pub started: Option<Seq>,
    /// Seq of its first `tool/result`, if logged.
    pub result: Option<Seq>,
}

/// One thing shown in a transcript.
#[derive(Debug, Serialize)]
#[serde(
    tag = "kind",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
pub enum Item {
    /// A `user/message`.
    User {
        /// Seq.
        seq: Seq,
        /// Who wrote it.
        origin: Origin,
        /// Plugin id for plugin-sourced messages.
        #[serde(skip_serializing_if = "Option::is_none")]
        plugin: Option<String>,
        /// Its text blocks.
        text: String,
        /// Replacement marks.
        #[serde(flatten)]
        fate: Fate,
    },
    /// An `assistant/message`.
    Assistant {
        /// Seq.
        seq: Seq,
        /// Reasoning text.
        reasoning: String,
        /// Visible text.
        text: String,
        /// Proposed tool calls.
        calls: Vec<Call>,
        /// The stream was cut short.
        interrupted: bool,
        /// Replacement marks.
        #[serde(flatten)]
        fate: Fate,
    },
    /// A `tool/result`.
    ToolResult {
        /// Seq.
        seq: Seq,
        /// The call answered.
        call_id: String,
        /// The tool's name, when the call is in the log.
        tool: Option<String>,
        /// The call failed.
        is_error: bool,
        /// Error code from the result's `meta.code`, if any.
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<String>,
        /// Result text.
        text: String,
        /// Replacement marks.
        #[serde(flatten)]
        fate: Fate,
    },
    /// A `compaction/*` event.
    Compaction {
        /// Seq.
        seq: Seq,
        /// `start`, `summary`, `prune` or `end`.
        phase: &'static str,
        /// What it says.
        detail: String,
    },
    /// Another event worth a line (todo list, plan mode, approvals, retries, subagents, hooks).
    Note {
        /// Seq.
        seq: Seq,
        /// Event type.
        event: String,
        /// One-line summary.
        text: String,
    },
}

/// Facts about the whole log needed while placing events.
#[derive(Default)]
struct Index {
    shadowed_by: HashMap<Seq, Shadow>,
    call_names: HashMap<String, String>,
    call_started: HashMap<String, Seq>,
    call_result: HashMap<String, Seq>,
}

impl Index {
    fn of(session: &Session) -> Index {
        let mut ix = Index::default();
        for ev in session.events() {
            if let EventBody::SurfaceRewind(r) = &ev.body {
                // What left the model's history: on the surface just before the rewind, not
                // at its target.
                let (kept, _) = session.surface_before(r.to_seq);
                let (before, _) = session.surface_before(ev.seq);
                for s in before.into_iter().filter(|s| !kept.contains(s)) {
                    ix.shadowed_by.insert(
                        s,
                        Shadow {
                            seq: ev.seq,
                            how: "rewound",
                        },
                    );
                }
            }
            if let Some(SurfaceOp::Replace { .. }) = ev.surface_op {
                let how = match ev.body {
                    EventBody::UserMessage(_) => "compacted",
                    EventBody::ToolResult(_) => "pruned",
                    _ => "replaced",
                };
                for &s in &ev.source_event_seqs {
                    ix.shadowed_by.insert(s, Shadow { seq: ev.seq, how });
                }
            }
            match &ev.body {
                EventBody::AssistantMessage(a) => {
                    for c in a.message.tool_calls() {
                        ix.call_names.insert(c.id.clone(), c.name.clone());
                    }
                }
                EventBody::ToolCall(c) => {
                    ix.call_names
                        .entry(c.call_id.clone())
                        .or_insert_with(|| c.name.clone());
                    ix.call_started.entry(c.call_id.clone()).or_insert(ev.seq);
                }
                EventBody::ToolResult(r) => {
                    for b in r.message.tool_results() {
                        ix.call_result
                            .entry(b.tool_call_id.clone())
                            .or_insert(ev.seq);
                    }
                }
                _ => {}
            }
        }
        ix
    }

    fn fate(&self, ev: &SessionEvent) -> Fate {
        let replaces = match ev.surface_op {
            Some(SurfaceOp::Replace { .. }) => ev.source_event_seqs.clone(),
            _ => Vec::new(),
        };
        Fate {
            shadowed_by: self.shadowed_by.get(&ev.seq).copied(),
            replaces,
        }
    }

    /// The tool name of a call id, if the log names it.
    fn call_name(&self, id: &str) -> Option<&str> {
        self.call_names.get(id).map(String::as_str)
    }
}

/// Tool names by call id (from assistant messages and `tool/call` events), for
/// [`super::event_summary`].
pub fn call_names(session: &Session) -> HashMap<String, String> {
    Index::of(session).call_names
}

impl Transcript {
    /// The transcript of `session`, every event as appended; plugins' events show through
    /// `presenters`.
    pub fn build(session: &Session, presenters: &PresenterSet) -> Transcript {
        let ix = Index::of(session);
        let h = session.header();
        let mut t = Transcript {
            id: h.id.to_string(),
            cwd: h.cwd.clone(),
            created: h.created_at,
            parent: h.parent_session.as_ref().map(ToString::to_string),
            title: session.title().map(str::to_owned),
            events: session.len(),
            blocks: Vec::new(),
        };
        let mut present = presenters.make();
        for ev in session.events() {
            let shown: Vec<String> = present
                .present(&ev)
                .iter()
                .filter_map(|i| i.line())
                .collect();
            t.place(&ix, &ev, shown);
        }
        t
    }

    fn open_turn(&mut self) -> Option<&mut Turn> {
        match self.blocks.last_mut() {
            Some(Block::Turn(turn)) if turn.end.is_none() => Some(turn),
            _ => None,
        }
    }

    fn place(&mut self, ix: &Index, ev: &SessionEvent, shown: Vec<String>) {
        match &ev.body {
            EventBody::TurnStart(ts) => {
                self.blocks.push(Block::Turn(Turn {
                    turn: ts.turn,
                    seq: ev.seq,
                    entries: Vec::new(),
                    end: None,
                }));
                return;
            }
            EventBody::TurnEnd(te) => {
                let (reason, detail) = turn_end_reason(&te.reason);
                let end = TurnEndItem {
                    seq: ev.seq,
                    reason,
                    detail,
                };
                match self.open_turn() {
                    Some(turn) => turn.end = Some(end),
                    None => self.blocks.push(Block::Item(Item::Note {
                        seq: ev.seq,
                        event: "turn/end".to_owned(),
                        text: format!("turn {} ended outside an open turn", te.turn),
                    })),
                }
                return;
            }
            EventBody::StepStart(s) => {
                let step = Step {
                    turn: s.turn,
                    step: s.step,
                    seq: ev.seq,
                    items: Vec::new(),
                    ended: None,
                };
                match self.open_turn() {
                    Some(turn) => turn.entries.push(Entry::Step(step)),
                    None => self.blocks.push(Block::Item(Item::Note {
                        seq: ev.seq,
                        event: "step/start".to_owned(),
                        text: format!("step {}.{} outside an open turn", s.turn, s.step),
                    })),
                }
                return;
            }
            EventBody::StepEnd(_) => {
                if let Some(Entry::Step(step)) = self.open_turn().and_then(|t| t.entries.last_mut())
                    && step.ended.is_none()
                {
                    step.ended = Some(ev.seq);
                }
                return;
            }
            _ => {}
        }
        let item = match item_of(ix, ev) {
            Some(item) => item,
            // A plugin's event: what its presenter says.
            None if !shown.is_empty() => Item::Note {
                seq: ev.seq,
                event: ev.type_name().to_owned(),
                text: shown.join("; "),
            },
            None => return,
        };
        match self.open_turn() {
            Some(turn) => match turn.entries.last_mut() {
                Some(Entry::Step(step)) if step.ended.is_none() => step.items.push(item),
                _ => turn.entries.push(Entry::Item(item)),
            },
            None => self.blocks.push(Block::Item(item)),
        }
    }
}

fn turn_end_reason(r: &TurnEndReason) -> (String, Option<String>) {
    let detail = match r {
        TurnEndReason::Aborted { reason } if !reason.is_empty() => Some(reason.clone()),
        TurnEndReason::Blocked { reason } => reason.clone(),
        TurnEndReason::Error { code, message } => {
            // Older logs recorded the message with its code in front: say the code once.
            let message = message
                .strip_prefix(code.as_str())
                .and_then(|m| m.strip_prefix(": "))
                .unwrap_or(message);
            Some(if message.is_empty() {
                code.clone()
            } else {
                format!("{code}: {message}")
            })
        }
        _ => None,
    };
    (r.kind().to_owned(), detail)
}

/// The transcript item for an event, or `None` for events a transcript does not show.
fn item_of(ix: &Index, ev: &SessionEvent) -> Option<Item> {
    let seq = ev.seq;
    let item = match &ev.body {
        EventBody::UserMessage(m) => {
            let replacing = matches!(ev.surface_op, Some(SurfaceOp::Replace { .. }));
            let (origin, plugin) = match &m.source {
                MessageSource::Known(KnownSource::User) => (Origin::Human, None),
                _ if replacing => (Origin::Summary, m.source.plugin_id().map(str::to_owned)),
                MessageSource::Known(KnownSource::Plugin { plugin, .. }) => {
                    (Origin::Plugin, Some(plugin.clone()))
                }
                _ => (Origin::Other, None),
            };
            Item::User {
                seq,
                origin,
                plugin,
                text: m.text(),
                fate: ix.fate(ev),
            }
        }
        EventBody::AssistantMessage(a) => {
            let reasoning = a.message.reasoning();
            let calls = a
                .message
                .tool_calls()
                .map(|c| Call {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                    started: ix.call_started.get(&c.id).copied(),
                    result: ix.call_result.get(&c.id).copied(),
                })
                .collect();
            Item::Assistant {
                seq,
                reasoning,
                text: a.message.text(),
                calls,
                interrupted: a.interrupted,
                fate: ix.fate(ev),
            }
        }
        EventBody::ToolResult(r) => {
            let mut blocks = r.message.tool_results();
            let first = blocks.next();
            let call_id = first.map(|b| b.tool_call_id.clone()).unwrap_or_default();
            let mut text = first.map(|b| b.text()).unwrap_or_default();
            for b in blocks {
                text.push('\n');
                text.push_str(&b.text());
            }
            let code = r
                .meta
                .as_ref()
                .and_then(|m| m.get("code"))
                .and_then(|c| c.as_str())
                .map(str::to_owned);
            Item::ToolResult {
                seq,
                tool: ix.call_name(&call_id).map(str::to_owned),
                call_id,
                is_error: first.is_some_and(|b| b.is_error),
                code,
                text,
                fate: ix.fate(ev),
            }
        }
        EventBody::CompactionStart(c) => Item::Compaction {
            seq,
            phase: "start",
            detail: format!(
                "reason {}, ~{} tokens of a {}-token window",
                nonempty(&c.reason),
                c.estimated_tokens,
                c.context_window
            ),
        },
        EventBody::CompactionSummary(c) | EventBody::CompactionPrune(c) => Item::Compaction {
            seq,
            phase: if matches!(ev.body, EventBody::CompactionSummary(_)) {
                "summary"
            } else {
                "prune"
            },
            detail: format!(
                "shadows #{}..#{} ({} nodes, ~{} tokens)",
                c.shadowed_range.start,
                c.shadowed_range.end,
                c.shadowed_seqs.len(),
                c.shadowed_token_count
            ),
        },
        EventBody::CompactionEnd(c) => Item::Compaction {
            seq,
            phase: "end",
            detail: match &c.error {
                Some(e) => format!("{}: {e}", nonempty(&c.outcome)),
                None => format!(
                    "{}, ~{} → ~{} tokens",
                    nonempty(&c.outcome),
                    c.before_tokens,
                    c.after_tokens
                ),
            },
        },
        EventBody::TodoWrite(_)
        | EventBody::PlanMode(_)
        | EventBody::ApprovalAsked(_)
        | EventBody::ApprovalDecided(_)
        | EventBody::QuestionAsked(_)
        | EventBody::QuestionAnswered(_)
        | EventBody::LlmRetry(_)
        | EventBody::SubagentDescriptor(_)
        | EventBody::HookResult(_)
        | EventBody::SessionEndSeed(_)
        | EventBody::SurfaceRewind(_)
        | EventBody::ContextProjection(_) => Item::Note {
            seq,
            event: ev.type_name().to_owned(),
            text: event_summary(ev, &ix.call_names),
        },
        _ => return None,
    };
    Some(item)
}

fn nonempty(s: &str) -> &str {
    if s.is_empty() { "?" } else { s }
}
