//! Rebuilding request bodies from the log alone.
//!
//! A request's non-history part is the latest `request/header` (system prompt, tools, call
//! config); its history is the surface at that point of the log, narrowed by the
//! `context/projection` logged for it (with its `max_tokens`). So every request that carried a
//! projection — every request of a `managed` session — can be rebuilt exactly: replay the log
//! into a fresh session and, at each `context/projection`, take the header in force and the
//! decoded seqs of the surface.

use keel_llm::ChatRequest;
use keel_protocol::{ContextProjection, EventBody, Seq, ToolSchema};
use keel_protocol::{StepNo, TurnNo};
use keel_session::Session;
use serde_json::Value;

/// One rebuilt request.
#[derive(Debug, Clone)]
pub struct RebuiltRequest {
    /// Its turn.
    pub turn: TurnNo,
    /// Its step.
    pub step: StepNo,
    /// The seq of its `context/projection`.
    pub at: Seq,
    /// The request.
    pub request: ChatRequest,
}

/// Why a log cannot be replayed into requests.
#[derive(Debug, thiserror::Error)]
pub enum RebuildError {
    /// An event did not replay (the log is not valid).
    #[error("event seq {seq} does not replay: {reason}")]
    Replay {
        /// The event.
        seq: u64,
        /// Why.
        reason: String,
    },
    /// A projection came before any `request/header`.
    #[error("context/projection seq {seq} has no request/header before it")]
    NoHeader {
        /// The projection.
        seq: u64,
    },
    /// The header does not have the shape keel logs.
    #[error("request/header before seq {seq} is malformed: {reason}")]
    Header {
        /// The projection it was needed for.
        seq: u64,
        /// What is wrong.
        reason: String,
    },
    /// The projection does not fit the surface at its point of the log.
    #[error("context/projection seq {seq} does not fit the surface there: {reason}")]
    Projection {
        /// The projection.
        seq: u64,
        /// What does not fit.
        reason: String,
    },
}

/// Every request of `session` that logged a `context/projection`, in order.
pub fn rebuild_requests(session: &Session) -> Result<Vec<RebuiltRequest>, RebuildError> {
    let mut replica = Session::new(session.header().clone());
    let mut header: Option<Value> = None;
    let mut out = Vec::new();
    for ev in session.events() {
        let ev = ev.into_owned();
        let seq = ev.seq;
        match &ev.body {
            EventBody::RequestHeader(h) => header = Some(h.header.clone()),
            EventBody::ContextProjection(p) => {
                let h = header
                    .as_ref()
                    .ok_or(RebuildError::NoHeader { seq: seq.0 })?;
                out.push(RebuiltRequest {
                    turn: p.turn,
                    step: p.step,
                    at: seq,
                    request: request_at(&mut replica, h, p, seq)?,
                });
            }
            _ => {}
        }
        replica.append(ev).map_err(|e| RebuildError::Replay {
            seq: seq.0,
            reason: e.to_string(),
        })?;
    }
    Ok(out)
}

fn request_at(
    replica: &mut Session,
    header: &Value,
    p: &ContextProjection,
    seq: Seq,
) -> Result<ChatRequest, RebuildError> {
    let bad = |reason: String| RebuildError::Header { seq: seq.0, reason };
    let generation = replica.surface().generation();
    if generation != p.surface_generation {
        return Err(RebuildError::Projection {
            seq: seq.0,
            reason: format!(
                "surface generation {generation}, the projection names {}",
                p.surface_generation
            ),
        });
    }
    let nodes = replica.derive_messages();
    let surface: Vec<Seq> = nodes.iter().map(|d| d.seq).collect();
    let include = p.include.decode(&surface).ok_or(RebuildError::Projection {
        seq: seq.0,
        reason: format!("runs {:?} are not runs of the surface", p.include.0),
    })?;
    let mut wanted = include.iter().peekable();
    let mut messages = Vec::with_capacity(include.len());
    for d in nodes {
        if wanted.peek() == Some(&&d.seq) {
            wanted.next();
            messages.push(d.message.clone());
        }
    }
    let config = header
        .get("config")
        .ok_or_else(|| bad("no config".into()))?;
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    let tools: Vec<ToolSchema> = match header.get("tools") {
        Some(t) => serde_json::from_value(t.clone()).map_err(|e| bad(format!("tools: {e}")))?,
        None => Vec::new(),
    };
    Ok(ChatRequest {
        model: text(config.get("model")).ok_or_else(|| bad("no config.model".into()))?,
        system: text(header.get("system")).unwrap_or_default(),
        messages,
        tools,
        max_tokens: p.max_tokens,
        thinking: config.get("thinking").and_then(Value::as_bool),
        reasoning_effort: text(config.get("reasoningEffort")),
        temperature: config.get("temperature").and_then(Value::as_f64),
        stop: Vec::new(),
    })
}
