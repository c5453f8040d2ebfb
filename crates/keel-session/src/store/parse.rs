//! Fast parsing of session-file lines for the loader.
//!
//! Delta chunks (single `assistant/chunk` deltas and packed rows) are parsed into borrowed
//! [`Delta`]s that go straight into the session's compact storage without building events;
//! every other line becomes a [`SessionEvent`] through keel-protocol's payload types.

use crate::record::Delta;
use keel_protocol::{EventBody, PackedKind, RecordError, Seq, SessionEvent, SurfaceOp};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// A borrowed JSON string (owned only when it had escapes).
#[derive(Deserialize)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, rename = "type")]
    ty: Cow<'a, str>,
    seq: Option<u64>,
    time: Option<i64>,
    seq0: Option<u64>,
    time0: Option<i64>,
    #[serde(borrow)]
    data: Option<&'a RawValue>,
    #[serde(default)]
    ignorable: bool,
    #[serde(rename = "surfaceOp")]
    surface_op: Option<SurfaceOp>,
    #[serde(rename = "sourceEventSeqs")]
    source_event_seqs: Option<Vec<Seq>>,
}

#[derive(Deserialize)]
struct PackedData<'a> {
    turn: u32,
    step: u32,
    index: u32,
    #[serde(default)]
    dt: Vec<i64>,
    #[serde(borrow, default)]
    texts: Option<Vec<Text<'a>>>,
    #[serde(borrow, default)]
    args: Option<Vec<Text<'a>>>,
    #[serde(borrow, default)]
    id: Option<Text<'a>>,
    #[serde(borrow, default)]
    name: Option<Text<'a>>,
}

#[derive(Deserialize)]
struct ChunkData<'a> {
    turn: u32,
    step: u32,
    #[serde(borrow)]
    chunk: &'a RawValue,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeltaChunk<'a> {
    #[serde(borrow, rename = "type")]
    ty: Cow<'a, str>,
    index: u32,
    #[serde(borrow, default)]
    text: Option<Text<'a>>,
    #[serde(borrow, default)]
    id: Option<Text<'a>>,
    #[serde(borrow, default)]
    name: Option<Text<'a>>,
    #[serde(borrow, default)]
    arguments_delta: Option<Text<'a>>,
}

/// A packed row, borrowed from the line.
pub(crate) struct Row<'a> {
    kind: PackedKind,
    seq0: u64,
    time0: i64,
    data: PackedData<'a>,
}

impl Row<'_> {
    /// Number of events the row stands for.
    pub(crate) fn len(&self) -> usize {
        self.texts().len()
    }

    fn texts(&self) -> &[Text<'_>] {
        self.data
            .texts
            .as_deref()
            .or(self.data.args.as_deref())
            .unwrap_or(&[])
    }

    /// Member `i` as a delta.
    pub(crate) fn member(&self, i: usize, time: i64) -> Delta<'_> {
        Delta {
            kind: self.kind,
            seq: self.seq0.wrapping_add(i as u64),
            time,
            turn: self.data.turn,
            step: self.data.step,
            index: self.data.index,
            id: if i == 0 {
                self.data.id.as_ref().map(|t| &*t.0)
            } else {
                None
            },
            name: if i == 0 {
                self.data.name.as_ref().map(|t| &*t.0)
            } else {
                None
            },
            text: &self.texts()[i].0,
        }
    }

    /// Time of member `i` given member `i - 1`'s.
    pub(crate) fn time_after(&self, i: usize, prev: i64) -> i64 {
        if i == 0 {
            self.time0
        } else {
            prev.saturating_add(self.data.dt.get(i - 1).copied().unwrap_or(0))
        }
    }
}

/// One parsed line.
pub(crate) enum Line<'a> {
    Event(SessionEvent),
    Delta(Delta<'a>),
    Row(Row<'a>),
}

fn payload(ty: &str, seq: Option<u64>) -> impl FnOnce(serde_json::Error) -> RecordError + '_ {
    move |source| RecordError::Payload {
        type_name: ty.to_owned(),
        seq,
        source,
    }
}

/// Parse one event line (not the header).
pub(crate) fn parse_line(line: &str) -> Result<Line<'_>, RecordError> {
    let env: Envelope<'_> = serde_json::from_str(line).map_err(RecordError::Envelope)?;
    let data = env.data.map(RawValue::get).unwrap_or("null");
    let kind = match env.ty.as_ref() {
        "text-chunks" => Some(PackedKind::Text),
        "reasoning-chunks" => Some(PackedKind::Reasoning),
        "tool-call-chunks" => Some(PackedKind::ToolCall),
        _ => None,
    };
    if let Some(kind) = kind {
        let seq0 = env.seq0.ok_or(RecordError::MissingField("seq0"))?;
        let time0 = env.time0.ok_or(RecordError::MissingField("time0"))?;
        let data: PackedData<'_> =
            serde_json::from_str(data).map_err(payload(&env.ty, Some(seq0)))?;
        return Ok(Line::Row(Row {
            kind,
            seq0,
            time0,
            data,
        }));
    }
    let seq = env.seq.ok_or(RecordError::MissingField("seq"))?;
    let time = env.time.ok_or(RecordError::MissingField("time"))?;
    let plain = !env.ignorable && env.surface_op.is_none() && env.source_event_seqs.is_none();
    if env.ty == "assistant/chunk"
        && plain
        && let Some(d) = parse_delta(data, seq, time)
    {
        return Ok(Line::Delta(d));
    }
    let body = EventBody::parse(&env.ty, data).map_err(payload(&env.ty, Some(seq)))?;
    Ok(Line::Event(SessionEvent {
        seq: Seq(seq),
        time,
        body,
        ignorable: env.ignorable,
        surface_op: env.surface_op,
        source_event_seqs: env.source_event_seqs.unwrap_or_default(),
    }))
}

/// A delta chunk whose strings need no unescaping, borrowed; `None` sends the line down the
/// general path (which also reports any error precisely).
fn parse_delta(data: &str, seq: u64, time: i64) -> Option<Delta<'_>> {
    let d: ChunkData<'_> = serde_json::from_str(data).ok()?;
    let c: DeltaChunk<'_> = serde_json::from_str(d.chunk.get()).ok()?;
    let borrowed = |t: &Option<Text<'_>>| matches!(t, None | Some(Text(Cow::Borrowed(_))));
    if !(borrowed(&c.text) && borrowed(&c.id) && borrowed(&c.name) && borrowed(&c.arguments_delta))
    {
        return None;
    }
    fn s<'a>(t: Option<Text<'a>>) -> Option<&'a str> {
        match t {
            Some(Text(Cow::Borrowed(s))) => Some(s),
            _ => None,
        }
    }
    let (kind, text) = match c.ty.as_ref() {
        "text-delta" => (PackedKind::Text, s(c.text)?),
        "reasoning-delta" => (PackedKind::Reasoning, s(c.text)?),
        "tool-call-delta" => (PackedKind::ToolCall, s(c.arguments_delta).unwrap_or("")),
        _ => return None,
    };
    Some(Delta {
        kind,
        seq,
        time,
        turn: d.turn,
        step: d.step,
        index: c.index,
        id: s(c.id),
        name: s(c.name),
        text,
    })
}
