//! The session log: header, event envelope, and every core event payload.
//!
//! A log line is one of three records ([`LogRecord`]): the header (first line), an event, or a
//! packed run of stream chunks (`text-chunks`, `reasoning-chunks`, `tool-call-chunks`) standing
//! for consecutive `assistant/chunk` events, as DeepSeek Harness writes them. Event types this
//! crate does not know are kept verbatim in [`EventBody::Other`] together with their envelope's
//! `ignorable` flag; deciding whether to accept them is the loader's job.

use crate::ids::{Seq, SessionId, TimeMs};
use crate::message::Message;
use crate::stream::{FinishReason, ModelFailure, StreamChunk, TokenUsage};
use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// Session log format version keel reads and writes.
pub const LOG_VERSION: u32 = 0;

/// First line of a session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionHeader {
    /// Always `"session"`.
    #[serde(rename = "type")]
    pub record_type: String,
    /// Log format version (0).
    pub version: u32,
    /// Session id.
    pub id: SessionId,
    /// Creation time, ms since epoch.
    pub created_at: TimeMs,
    /// Working directory the session ran in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Parent session for forks and subagents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<SessionId>,
    /// Number of events inherited from the parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_length: Option<u64>,
    /// Why this session exists (`"subagent"`, `"fork"`…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// How many delegations deep this session is (0 for a top-level session).
    #[serde(default)]
    pub delegation_depth: u32,
}

impl SessionHeader {
    /// A header for a fresh top-level session.
    pub fn new(id: SessionId, created_at: TimeMs, cwd: Option<String>) -> Self {
        SessionHeader {
            record_type: "session".to_owned(),
            version: LOG_VERSION,
            id,
            created_at,
            cwd,
            parent_session: None,
            seed_length: None,
            origin: None,
            delegation_depth: 0,
        }
    }
}

/// How a surface-eligible event affects the surface (the model-visible history).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SurfaceOp {
    /// Appended at the end of the surface.
    Append,
    /// Replaces the inclusive span of current surface nodes whose first node has seq `start`
    /// and last node has seq `end` (DeepSeek Harness writes seqs here).
    Replace {
        /// Seq of the first shadowed surface node.
        start: Seq,
        /// Seq of the last shadowed surface node.
        end: Seq,
    },
}

impl Serialize for SurfaceOp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SurfaceOp::Append => s.serialize_str("append"),
            SurfaceOp::Replace { start, end } => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("op", "replace")?;
                m.serialize_entry("start", start)?;
                m.serialize_entry("end", end)?;
                m.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for SurfaceOp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw<'a> {
            Str(#[serde(borrow)] Cow<'a, str>),
            Obj { op: String, start: Seq, end: Seq },
        }
        match Raw::deserialize(d)? {
            Raw::Str(s) if s == "append" => Ok(SurfaceOp::Append),
            Raw::Str(s) => Err(D::Error::custom(format!("unknown surfaceOp {s:?}"))),
            Raw::Obj { op, start, end } if op == "replace" => Ok(SurfaceOp::Replace { start, end }),
            Raw::Obj { op, .. } => Err(D::Error::custom(format!("unknown surfaceOp op {op:?}"))),
        }
    }
}

/// One event of a session log.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEvent {
    /// Position in the log.
    pub seq: Seq,
    /// Wall-clock time, ms since epoch.
    pub time: TimeMs,
    /// Typed payload (its variant gives the `type`).
    pub body: EventBody,
    /// Readers that do not know this type may skip it.
    pub ignorable: bool,
    /// Surface effect (only on `user/message`, `assistant/message`, `tool/result`).
    pub surface_op: Option<SurfaceOp>,
    /// Events this one was formed from (chunks of a message, the call of a result, the nodes a
    /// replacement shadows).
    pub source_event_seqs: Vec<Seq>,
}

impl SessionEvent {
    /// A plain (non-surface) event.
    pub fn new(seq: Seq, time: TimeMs, body: EventBody) -> Self {
        SessionEvent {
            seq,
            time,
            body,
            ignorable: false,
            surface_op: None,
            source_event_seqs: Vec::new(),
        }
    }

    /// The event's `type` string.
    pub fn type_name(&self) -> &str {
        self.body.type_name()
    }

    /// Serialise as one JSON line (without the trailing newline).
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }
}

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

            fn serialize_data<M: SerializeMap>(&self, m: &mut M) -> Result<(), M::Error> {
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

impl Serialize for SessionEvent {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("type", self.body.type_name())?;
        m.serialize_entry("seq", &self.seq)?;
        m.serialize_entry("time", &self.time)?;
        self.body.serialize_data(&mut m)?;
        if self.ignorable {
            m.serialize_entry("ignorable", &true)?;
        }
        if !self.source_event_seqs.is_empty() {
            m.serialize_entry("sourceEventSeqs", &self.source_event_seqs)?;
        }
        if let Some(op) = &self.surface_op {
            m.serialize_entry("surfaceOp", op)?;
        }
        m.end()
    }
}

/// Kind of a packed chunk row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PackedKind {
    /// `text-chunks`: runs of `text-delta`.
    Text,
    /// `reasoning-chunks`: runs of `reasoning-delta`.
    Reasoning,
    /// `tool-call-chunks`: runs of `tool-call-delta`.
    ToolCall,
}

impl PackedKind {
    /// The row's `type` string.
    pub fn type_name(self) -> &'static str {
        match self {
            PackedKind::Text => "text-chunks",
            PackedKind::Reasoning => "reasoning-chunks",
            PackedKind::ToolCall => "tool-call-chunks",
        }
    }

    /// The kind of a row whose `type` is `ty` (`None`: not a packed row). On the loader's
    /// per-line path.
    #[inline]
    pub fn from_type_name(ty: &str) -> Option<PackedKind> {
        match ty {
            "text-chunks" => Some(PackedKind::Text),
            "reasoning-chunks" => Some(PackedKind::Reasoning),
            "tool-call-chunks" => Some(PackedKind::ToolCall),
            _ => None,
        }
    }
}

/// A packed row: `k` consecutive `assistant/chunk` delta events of one block, seqs
/// `seq0 .. seq0+k-1`, times `time0` then `+dt[i]` cumulatively.
#[derive(Debug, Clone, PartialEq)]
pub struct PackedChunks {
    /// Which delta kind.
    pub kind: PackedKind,
    /// Seq of the first member.
    pub seq0: Seq,
    /// Time of the first member.
    pub time0: TimeMs,
    /// Turn of the members.
    pub turn: u32,
    /// Step of the members.
    pub step: u32,
    /// Block index of the members.
    pub index: u32,
    /// Time deltas between consecutive members (`k - 1` entries).
    pub dt: Vec<i64>,
    /// The deltas' texts (argument fragments for tool calls); `k` entries.
    pub texts: Vec<String>,
    /// Tool call id (tool-call rows; carried by the first member).
    pub id: Option<String>,
    /// Tool name (tool-call rows; carried by the first member).
    pub name: Option<String>,
}

impl PackedChunks {
    /// Number of events this row stands for.
    pub fn len(&self) -> usize {
        self.texts.len()
    }

    /// True when the row stands for no event.
    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }

    /// Expand into the `assistant/chunk` events it stands for.
    pub fn expand(&self) -> impl Iterator<Item = SessionEvent> + '_ {
        let mut time = self.time0;
        self.texts.iter().enumerate().map(move |(i, text)| {
            if i > 0 {
                time += self.dt.get(i - 1).copied().unwrap_or(0);
            }
            let chunk = match self.kind {
                PackedKind::Text => StreamChunk::TextDelta {
                    index: self.index,
                    text: text.clone(),
                },
                PackedKind::Reasoning => StreamChunk::ReasoningDelta {
                    index: self.index,
                    text: text.clone(),
                },
                PackedKind::ToolCall => StreamChunk::ToolCallDelta {
                    index: self.index,
                    id: if i == 0 { self.id.clone() } else { None },
                    name: if i == 0 { self.name.clone() } else { None },
                    arguments_delta: text.clone(),
                },
            };
            SessionEvent::new(
                Seq(self.seq0.0 + i as u64),
                time,
                EventBody::AssistantChunk(Box::new(AssistantChunk {
                    turn: self.turn,
                    step: self.step,
                    chunk,
                })),
            )
        })
    }
}

impl Serialize for PackedChunks {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Data<'a> {
            turn: u32,
            step: u32,
            index: u32,
            dt: &'a [i64],
            #[serde(skip_serializing_if = "Option::is_none")]
            id: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            name: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            texts: Option<&'a [String]>,
            #[serde(skip_serializing_if = "Option::is_none")]
            args: Option<&'a [String]>,
        }
        let tool = self.kind == PackedKind::ToolCall;
        let data = Data {
            turn: self.turn,
            step: self.step,
            index: self.index,
            dt: &self.dt,
            id: self.id.as_deref(),
            name: self.name.as_deref(),
            texts: (!tool).then_some(self.texts.as_slice()),
            args: tool.then_some(self.texts.as_slice()),
        };
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("type", self.kind.type_name())?;
        m.serialize_entry("seq0", &self.seq0)?;
        m.serialize_entry("time0", &self.time0)?;
        m.serialize_entry("data", &data)?;
        m.end()
    }
}

/// One line of a session file.
#[derive(Debug, Clone, PartialEq)]
pub enum LogRecord {
    /// The header (first line).
    Header(SessionHeader),
    /// One event.
    Event(SessionEvent),
    /// A packed run of chunk events.
    Packed(PackedChunks),
}

/// Why a log line could not be parsed.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The line is not JSON or lacks envelope fields.
    #[error("not a session log record: {0}")]
    Envelope(serde_json::Error),
    /// The line is an event whose `data` does not match its type.
    #[error("bad data for {type_name} event (seq {seq:?}): {source}")]
    Payload {
        /// The event type.
        type_name: String,
        /// The seq, when readable.
        seq: Option<u64>,
        /// The parse error.
        source: serde_json::Error,
    },
    /// An event line without `seq` or `time`.
    #[error("event record lacks the `{0}` field")]
    MissingField(&'static str),
}

/// The fields every record line may carry around its `data`, borrowed from the line: what a
/// reader looks at before it knows the record's shape.
#[derive(Debug, Deserialize)]
pub struct RecordEnvelope<'a> {
    /// `type`.
    #[serde(borrow, rename = "type")]
    pub ty: Cow<'a, str>,
    /// `seq` (events).
    pub seq: Option<u64>,
    /// `time` (events).
    pub time: Option<i64>,
    /// `seq0` (packed rows).
    pub seq0: Option<u64>,
    /// `time0` (packed rows).
    pub time0: Option<i64>,
    /// `data`, unparsed.
    #[serde(borrow)]
    pub data: Option<&'a RawValue>,
    /// `ignorable`.
    #[serde(default)]
    pub ignorable: bool,
    /// `surfaceOp`.
    #[serde(rename = "surfaceOp")]
    pub surface_op: Option<SurfaceOp>,
    /// `sourceEventSeqs`.
    #[serde(rename = "sourceEventSeqs")]
    pub source_event_seqs: Option<Vec<Seq>>,
}

impl LogRecord {
    /// Parse one line (without its newline).
    pub fn parse(line: &str) -> Result<LogRecord, RecordError> {
        let env: RecordEnvelope<'_> = serde_json::from_str(line).map_err(RecordError::Envelope)?;
        let data = env.data.map(RawValue::get).unwrap_or("null");
        let payload_err = |source| RecordError::Payload {
            type_name: env.ty.to_string(),
            seq: env.seq.or(env.seq0),
            source,
        };
        let packed = PackedKind::from_type_name(&env.ty);
        match (env.ty.as_ref(), packed) {
            ("session", _) => serde_json::from_str(line)
                .map(LogRecord::Header)
                .map_err(payload_err),
            (_, Some(kind)) => {
                #[derive(Deserialize)]
                struct Data {
                    turn: u32,
                    step: u32,
                    index: u32,
                    #[serde(default)]
                    dt: Vec<i64>,
                    texts: Option<Vec<String>>,
                    args: Option<Vec<String>>,
                    id: Option<String>,
                    name: Option<String>,
                }
                let d: Data = serde_json::from_str(data).map_err(payload_err)?;
                Ok(LogRecord::Packed(PackedChunks {
                    kind,
                    seq0: Seq(env.seq0.ok_or(RecordError::MissingField("seq0"))?),
                    time0: env.time0.ok_or(RecordError::MissingField("time0"))?,
                    turn: d.turn,
                    step: d.step,
                    index: d.index,
                    dt: d.dt,
                    texts: d.texts.or(d.args).unwrap_or_default(),
                    id: d.id,
                    name: d.name,
                }))
            }
            (ty, None) => {
                let seq = env.seq.ok_or(RecordError::MissingField("seq"))?;
                let time = env.time.ok_or(RecordError::MissingField("time"))?;
                let body = EventBody::parse(ty, data).map_err(payload_err)?;
                Ok(LogRecord::Event(SessionEvent {
                    seq: Seq(seq),
                    time,
                    body,
                    ignorable: env.ignorable,
                    surface_op: env.surface_op,
                    source_event_seqs: env.source_event_seqs.unwrap_or_default(),
                }))
            }
        }
    }
}

// ---- payloads ----

/// `turn/start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnStart {
    /// Turn number, from 1.
    pub turn: u32,
}

/// `turn/end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnEnd {
    /// Turn number.
    pub turn: u32,
    /// Why the turn ended.
    pub reason: TurnEndReason,
}

/// Why a turn ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TurnEndReason {
    /// Nothing more was owed.
    Completed,
    /// Cancelled (Ctrl-C, caller abort).
    Aborted {
        /// Who or what aborted.
        #[serde(default)]
        reason: String,
    },
    /// A hook or policy stopped the turn.
    Blocked {
        /// Why.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A model failure that was not retried (or retries ran out).
    Error {
        /// Failure code.
        code: String,
        /// Detail.
        #[serde(default)]
        message: String,
    },
    /// The model hit its output limit (sticky: the turn cannot continue normally).
    MaxTokens,
    /// Closed by crash repair.
    Interrupted,
}

impl TurnEndReason {
    /// The `kind` string.
    pub fn kind(&self) -> &'static str {
        match self {
            TurnEndReason::Completed => "completed",
            TurnEndReason::Aborted { .. } => "aborted",
            TurnEndReason::Blocked { .. } => "blocked",
            TurnEndReason::Error { .. } => "error",
            TurnEndReason::MaxTokens => "max-tokens",
            TurnEndReason::Interrupted => "interrupted",
        }
    }
}

/// `step/start` and `step/end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRef {
    /// Turn number.
    pub turn: u32,
    /// Step number within the turn, from 1.
    pub step: u32,
}

/// `assistant/chunk`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantChunk {
    /// Turn number.
    pub turn: u32,
    /// Step number.
    pub step: u32,
    /// The chunk.
    pub chunk: StreamChunk,
}

/// `assistant/message`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantMessageEvent {
    /// Turn number.
    pub turn: u32,
    /// Step number.
    pub step: u32,
    /// The message.
    pub message: Message,
    /// Usage of the request that produced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    /// How the stream finished (keel writes it; dsh does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish: Option<FinishReason>,
    /// The stream was cut short (cancel); the message holds what had streamed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

/// `tool/call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallEvent {
    /// Turn number.
    pub turn: u32,
    /// Step number.
    pub step: u32,
    /// Provider call id.
    pub call_id: String,
    /// Tool name.
    pub name: String,
    /// Raw argument string.
    pub arguments: String,
}

/// `tool/result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResultEvent {
    /// Turn number.
    pub turn: u32,
    /// Step number.
    pub step: u32,
    /// The user-role message holding the `tool-result` block.
    pub message: Message,
    /// Structured details not sent to the model (error code, exit status, paths…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

/// Status of a todo item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

/// One todo item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TodoItem {
    /// What to do.
    pub content: String,
    /// Status.
    pub status: TodoStatus,
    /// Present-continuous form shown while in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_form: Option<String>,
}

/// `todo/write`: the whole list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TodoWrite {
    /// The list.
    pub todos: Vec<TodoItem>,
}

/// `plan/mode`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanModeEvent {
    /// Whether plan mode is active after this event.
    pub active: bool,
    /// The plan proposed with `exit_plan_mode`, when exiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// Whether the plan was approved, when exiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved: Option<bool>,
}

/// `request/header`: the non-history part of requests (system prompt, tools, call config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestHeader {
    /// The header object (shape owned by the writer; dsh's and keel's differ).
    pub header: Value,
    /// Other fields (dsh writes `reason`), kept as written.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

/// `request/context`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestContext {
    /// Provider name.
    pub provider: String,
    /// Model name.
    pub model: String,
    /// Context window in tokens.
    pub context_window: u64,
    /// Output token limit, when keel set one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output: Option<u64>,
}

/// `session/end-seed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionEndSeed {
    /// The session the seed came from.
    pub parent_session: SessionId,
    /// Number of inherited events.
    pub seed_length: u64,
}

/// Which inbox queue changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InboxTarget {
    /// Messages waiting for their own turn (`followup`).
    NextTurn,
    /// Messages joining the next step (`steer`, `inject`).
    NextStep,
}

/// `agent/inbox/spliced`: `removedCount` items removed at `start`, `inserted` put there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboxSpliced {
    /// Which queue.
    pub target: InboxTarget,
    /// Index of the change.
    pub start: u32,
    /// Items removed.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub removed_count: u32,
    /// Items inserted.
    #[serde(default)]
    pub inserted: Vec<Message>,
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

/// `llm/retry`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmRetry {
    /// Turn number.
    pub turn: u32,
    /// Step number.
    pub step: u32,
    /// Retry attempt, from 1.
    pub attempt: u32,
    /// Delay before the retry.
    pub delay_ms: u64,
    /// The failure being retried.
    pub failure: ModelFailure,
}

/// An inclusive seq span.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqSpan {
    /// First seq.
    pub start: Seq,
    /// Last seq.
    pub end: Seq,
}

/// `compaction/start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionStart {
    /// `pressure`, `overflow` or `manual`.
    #[serde(default)]
    pub reason: String,
    /// Estimated request tokens that triggered it.
    #[serde(default)]
    pub estimated_tokens: u64,
    /// The model's context window.
    #[serde(default)]
    pub context_window: u64,
}

/// `compaction/summary` and `compaction/prune`: which surface nodes the next event replaces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionSpan {
    /// The span replaced.
    pub shadowed_range: SeqSpan,
    /// Every shadowed seq.
    #[serde(default)]
    pub shadowed_seqs: Vec<Seq>,
    /// Estimated tokens of the shadowed nodes.
    #[serde(default)]
    pub shadowed_token_count: u64,
}

/// `compaction/end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionEnd {
    /// `compacted`, `skipped` or `failed`.
    #[serde(default)]
    pub outcome: String,
    /// Estimated tokens before.
    #[serde(default)]
    pub before_tokens: u64,
    /// Estimated tokens after.
    #[serde(default)]
    pub after_tokens: u64,
    /// Failure detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `approval/asked`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalAsked {
    /// The call.
    pub call_id: String,
    /// Tool name.
    pub tool: String,
    /// Why approval is needed.
    #[serde(default)]
    pub reason: String,
}

/// `approval/decided`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalDecided {
    /// The call.
    pub call_id: String,
    /// Approved?
    pub approved: bool,
    /// Who decided: `user`, `policy`, `headless`.
    pub by: String,
    /// Detail shown to the model on denial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `subagent/descriptor`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentDescriptor {
    /// Child session id.
    pub child_session: SessionId,
    /// Short description.
    pub description: String,
    /// `spawn` or `fork`.
    pub mode: String,
    /// Runs as a background job.
    #[serde(default)]
    pub background: bool,
    /// The parent call that spawned it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// Child's delegation depth.
    #[serde(default)]
    pub delegation_depth: u32,
}

/// `hook/invoked`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookInvoked {
    /// Hook event name (`PreToolUse`…).
    pub hook_event: String,
    /// The command line.
    pub command: String,
    /// Tool name, for tool events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
}

/// `hook/result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookResult {
    /// Hook event name.
    pub hook_event: String,
    /// The command line.
    pub command: String,
    /// Exit code (absent on timeout or spawn failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// `allow`, `block`, `none`…
    #[serde(default)]
    pub decision: String,
    /// Message shown to the model or the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Wall time.
    #[serde(default)]
    pub duration_ms: u64,
}

/// `context/projection`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextProjection {
    /// Turn number.
    pub turn: u32,
    /// Step number.
    pub step: u32,
    /// Policy name.
    pub policy: String,
    /// Surface seqs included, in order.
    pub included_seqs: Vec<Seq>,
    /// Surface nodes left out.
    pub omitted_count: u64,
}

/// `sandbox/mode`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SandboxModeEvent {
    /// Mode name.
    pub mode: String,
}

/// `approval/policy`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalPolicyEvent {
    /// Policy name.
    pub policy: String,
}

/// `permission/preset` (dsh).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionPresetEvent {
    /// Preset name.
    pub preset: String,
}

/// `session/title`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionTitle {
    /// The title.
    pub title: String,
    /// Messages it was made from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub message_seqs: Vec<Seq>,
    /// How it was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Value>,
}
