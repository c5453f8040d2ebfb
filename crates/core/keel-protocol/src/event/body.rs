//! [`EventBody`]: the typed payload of an event, chosen by its `type` string, and
//! [`OtherEvent`] for types keel does not model (kept verbatim).
//!
//! Data flow: one macro table maps each `type` string to its payload struct (`payloads.rs`);
//! from it come [`EventBody::type_name`], [`EventBody::parse`] (whole `data` text),
//! [`EventBody::parse_prefix`] (`data` read in place inside a line) and the writer of `data`
//! that [`super::SessionEvent`]'s serialization calls.

use super::payloads::*;
use crate::message::Message;
use serde::Deserialize;
use serde::ser::SerializeMap;
use serde_json::Value;

/// Payload of an event type keel does not model, kept verbatim.
#[derive(Debug, Clone, PartialEq)]
pub struct OtherEvent {
    /// The `type` string.
    pub type_name: String,
    /// The `data` value (`null` when absent).
    pub data: Value,
}

/// DeepSeek Harness event types keel recognises without modelling them: they load like any
/// known type and are shown opaquely.
pub const DSH_OPAQUE_TYPES: &[&str] = &["session/title-llm-request"];

impl OtherEvent {
    /// True when keel knows this type (a dsh type it keeps opaque).
    pub fn is_known(&self) -> bool {
        DSH_OPAQUE_TYPES.contains(&self.type_name.as_str())
    }
}

/// The JSON value at the start of `text` and the offset just after it.
fn leading<'a, T: Deserialize<'a>>(text: &'a str) -> Result<(T, usize), serde_json::Error> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<T>();
    match values.next() {
        Some(Ok(v)) => Ok((v, values.byte_offset())),
        Some(Err(e)) => Err(e),
        // Nothing but blanks: the same error `from_str` gives.
        None => serde_json::from_str::<T>(text).map(|v| (v, text.len())),
    }
}

macro_rules! event_bodies {
    ($( $(#[$doc:meta])* $name:literal => $variant:ident($ty:ty), )*) => {
        /// Typed payload of an event; the variant determines the `type` string.
        #[derive(Debug, Clone, PartialEq)]
        pub enum EventBody {
            $( $(#[$doc])* $variant($ty), )*
            /// A type keel does not model (kept verbatim).
            Other(Box<OtherEvent>),
        }

        /// Every event type keel models, in declaration order.
        pub const KNOWN_EVENT_TYPES: &[&str] = &[$($name,)*];

        impl EventBody {
            /// The `type` string of this payload.
            pub fn type_name(&self) -> &str {
                match self {
                    $( EventBody::$variant(_) => $name, )*
                    EventBody::Other(o) => &o.type_name,
                }
            }

            /// Parse the `data` of an event of type `ty`.
            pub fn parse(ty: &str, data: &str) -> Result<EventBody, serde_json::Error> {
                match ty {
                    $( $name => serde_json::from_str::<$ty>(data).map(EventBody::$variant), )*
                    other => Ok(EventBody::Other(Box::new(OtherEvent {
                        type_name: other.to_owned(),
                        data: serde_json::from_str(data)?,
                    }))),
                }
            }

            /// Parse the `data` of an event of type `ty` from the start of `text` (blanks before
            /// it skipped) and return it with the byte offset just after it; what follows is not
            /// looked at. Accepts and rejects exactly what [`EventBody::parse`] does on the
            /// value's own text, so a reader can parse `data` in place inside a whole line.
            pub fn parse_prefix(
                ty: &str,
                text: &str,
            ) -> Result<(EventBody, usize), serde_json::Error> {
                match ty {
                    $( $name => leading::<$ty>(text).map(|(v, n)| (EventBody::$variant(v), n)), )*
                    other => leading::<Value>(text).map(|(data, n)| {
                        let o = OtherEvent { type_name: other.to_owned(), data };
                        (EventBody::Other(Box::new(o)), n)
                    }),
                }
            }

            pub(super) fn serialize_data<M: SerializeMap>(&self, m: &mut M) -> Result<(), M::Error> {
                match self {
                    $( EventBody::$variant(v) => m.serialize_entry("data", v), )*
                    EventBody::Other(o) => m.serialize_entry("data", &o.data),
                }
            }
        }
    };
}

event_bodies! {
    /// A turn opens.
    "turn/start" => TurnStart(TurnStart),
    /// A turn closes.
    "turn/end" => TurnEnd(TurnEnd),
    /// A step (one model request + its tool calls) opens.
    "step/start" => StepStart(StepRef),
    /// A step closes.
    "step/end" => StepEnd(StepRef),
    /// A user-role message joins the surface (human input, runtime context, summaries).
    "user/message" => UserMessage(Box<Message>),
    /// One streamed chunk of the model's answer.
    "assistant/chunk" => AssistantChunk(Box<AssistantChunk>),
    /// The model's complete answer for a step.
    "assistant/message" => AssistantMessage(Box<AssistantMessageEvent>),
    /// A tool call enters the pipeline (recorded as started).
    "tool/call" => ToolCall(Box<ToolCallEvent>),
    /// The result of a tool call joins the surface.
    "tool/result" => ToolResult(Box<ToolResultEvent>),
    /// The todo list, whole.
    "todo/write" => TodoWrite(Box<TodoWrite>),
    /// Plan mode entered, exited or approved.
    "plan/mode" => PlanMode(Box<PlanModeEvent>),
    /// The non-history part of requests changed (system prompt, tools, call config).
    "request/header" => RequestHeader(Box<RequestHeader>),
    /// Provider/model/context window in force.
    "request/context" => RequestContext(Box<RequestContext>),
    /// End of the events a seeded session inherited from its parent.
    "session/end-seed" => SessionEndSeed(Box<SessionEndSeed>),
    /// A change to the agent's inbox.
    "agent/inbox/spliced" => InboxSpliced(Box<InboxSpliced>),
    /// A failed model request is retried within the same step.
    "llm/retry" => LlmRetry(Box<LlmRetry>),
    /// Compaction begins.
    "compaction/start" => CompactionStart(Box<CompactionStart>),
    /// Compaction summarised a span (the replacing `user/message` follows).
    "compaction/summary" => CompactionSummary(Box<CompactionSpan>),
    /// Compaction pruned an oversized tool result (the replacing `tool/result` follows).
    "compaction/prune" => CompactionPrune(Box<CompactionSpan>),
    /// Compaction ends.
    "compaction/end" => CompactionEnd(Box<CompactionEnd>),
    /// A tool call asks for approval.
    "approval/asked" => ApprovalAsked(Box<ApprovalAsked>),
    /// An approval was decided.
    "approval/decided" => ApprovalDecided(Box<ApprovalDecided>),
    /// `ask_user_question` asks the user.
    "question/asked" => QuestionAsked(Box<QuestionAsked>),
    /// The user's answers (or why there are none).
    "question/answered" => QuestionAnswered(Box<QuestionAnswered>),
    /// A subagent session was created.
    "subagent/descriptor" => SubagentDescriptor(Box<SubagentDescriptor>),
    /// A command hook was started.
    "hook/invoked" => HookInvoked(Box<HookInvoked>),
    /// A command hook finished.
    "hook/result" => HookResult(Box<HookResult>),
    /// A request used a non-default history projection.
    "context/projection" => ContextProjection(Box<ContextProjection>),
    /// File sandbox mode in force.
    "sandbox/mode" => SandboxMode(Box<SandboxModeEvent>),
    /// Approval policy in force.
    "approval/policy" => ApprovalPolicy(Box<ApprovalPolicyEvent>),
    /// dsh's permission preset (read for compatibility).
    "permission/preset" => PermissionPreset(Box<PermissionPresetEvent>),
    /// Session title.
    "session/title" => SessionTitle(Box<SessionTitle>),
    /// The model-visible history returns to an earlier point (keel's conversation rewind).
    "surface/rewind" => SurfaceRewind(Box<SurfaceRewind>),
}

impl EventBody {
    /// True for the three surface-eligible types.
    pub fn is_surface_eligible(&self) -> bool {
        matches!(
            self,
            EventBody::UserMessage(_) | EventBody::AssistantMessage(_) | EventBody::ToolResult(_)
        )
    }

    /// The message carried by a surface-eligible event.
    pub fn surface_message(&self) -> Option<&Message> {
        match self {
            EventBody::UserMessage(m) => Some(m),
            EventBody::AssistantMessage(a) => Some(&a.message),
            EventBody::ToolResult(r) => Some(&r.message),
            _ => None,
        }
    }
}
