//! Fast parsing of session-file lines for the loader.
//!
//! Delta chunks (single `assistant/chunk` deltas and packed rows) are parsed into borrowed
//! [`Delta`]s that go straight into the session's compact storage without building events;
//! every other line becomes a [`SessionEvent`] through keel-protocol's payload types.
//! [`parse_line`] tries the fast reader (`fast.rs`) and falls back to [`parse_general`];
//! [`parse_record`] is the same reading of one line, owned, for callers outside the loader.

use crate::record::Delta;
use keel_protocol::{
    EventBody, LogRecord, PackedChunks, PackedKind, RecordEnvelope, RecordError, Seq, SessionEvent,
    SessionHeader,
};
use keel_protocol::{StepNo, TurnNo};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// A borrowed JSON string (owned only when it had escapes).
#[derive(Deserialize)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

#[derive(Deserialize)]
struct PackedData<'a> {
    turn: TurnNo,
    step: StepNo,
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
    turn: TurnNo,
    step: StepNo,
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

/// Buffers a line's strings are unescaped into, reused from line to line.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// A row's texts, concatenated (or one delta's unescaped text).
    pub(crate) text: String,
    /// End of each row member's text in `text`.
    pub(crate) ends: Vec<usize>,
    /// A row's time deltas.
    pub(crate) dt: Vec<i64>,
    /// Ids and names.
    pub(crate) aux: String,
}

impl Scratch {
    pub(crate) fn clear(&mut self) {
        self.text.clear();
        self.ends.clear();
        self.dt.clear();
        self.aux.clear();
    }
}

/// A packed row, its texts concatenated in the scratch buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Row<'a> {
    pub(crate) kind: PackedKind,
    pub(crate) seq0: u64,
    pub(crate) time0: i64,
    pub(crate) turn: TurnNo,
    pub(crate) step: StepNo,
    pub(crate) index: u32,
    /// Carried by the first member.
    pub(crate) id: Option<&'a str>,
    /// Carried by the first member.
    pub(crate) name: Option<&'a str>,
    /// Time deltas between members (missing ones count as 0).
    pub(crate) dt: &'a [i64],
    /// The members' texts, concatenated.
    pub(crate) text: &'a str,
    /// End of member `i`'s text in `text`.
    pub(crate) ends: &'a [usize],
}

impl Row<'_> {
    /// Number of events the row stands for.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Text of member `i`.
    pub(crate) fn text(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.text[start..self.ends[i]]
    }

    /// Time of member `i` given member `i - 1`'s.
    pub(crate) fn time_after(&self, i: usize, prev: i64) -> i64 {
        if i == 0 {
            self.time0
        } else {
            prev.saturating_add(self.dt.get(i - 1).copied().unwrap_or(0))
        }
    }

    /// The row as an owned [`PackedChunks`].
    pub(crate) fn to_packed(self) -> PackedChunks {
        PackedChunks {
            kind: self.kind,
            seq0: Seq(self.seq0),
            time0: self.time0,
            turn: self.turn,
            step: self.step,
            index: self.index,
            dt: self.dt.to_vec(),
            texts: (0..self.len()).map(|i| self.text(i).to_owned()).collect(),
            id: self.id.map(str::to_owned),
            name: self.name.map(str::to_owned),
        }
    }

    /// Member `i` as a delta, given its time.
    pub(crate) fn member(&self, i: usize, time: i64) -> Delta<'_> {
        Delta {
            kind: self.kind,
            seq: self.seq0.wrapping_add(i as u64),
            time,
            turn: self.turn,
            step: self.step,
            index: self.index,
            id: if i == 0 { self.id } else { None },
            name: if i == 0 { self.name } else { None },
            text: self.text(i),
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

/// Read one line of a session file into an owned [`LogRecord`] with the loader's own parser:
/// a line of type `session` is the header; any other goes through [`parse_line`] (the fast
/// reader, else the general one), a delta becoming its `assistant/chunk` event and a packed row
/// its [`PackedChunks`]. For callers that look at single lines (tests, tools); the loader itself
/// never builds owned records.
pub fn parse_record(line: &str) -> Result<LogRecord, RecordError> {
    let env: RecordEnvelope<'_> = serde_json::from_str(line).map_err(RecordError::Envelope)?;
    if env.ty == "session" {
        return serde_json::from_str::<SessionHeader>(line)
            .map(LogRecord::Header)
            .map_err(payload(&env.ty, env.seq.or(env.seq0)));
    }
    let mut scratch = Scratch::default();
    Ok(match parse_line(line, &mut scratch)? {
        Line::Event(e) => LogRecord::Event(e),
        Line::Delta(d) => LogRecord::Event(d.as_event()),
        Line::Row(r) => LogRecord::Packed(r.to_packed()),
    })
}

/// Parse one event line (not the header), the fast way when the line allows it.
pub(crate) fn parse_line<'a>(
    line: &'a str,
    scratch: &'a mut Scratch,
) -> Result<Line<'a>, RecordError> {
    match super::fast::parse(line, scratch) {
        Some(fast) => Ok(fast.resolve(scratch)),
        None => parse_general(line, scratch),
    }
}

/// Parse one event line (not the header) the general way.
pub(crate) fn parse_general<'a>(
    line: &'a str,
    scratch: &'a mut Scratch,
) -> Result<Line<'a>, RecordError> {
    let env: RecordEnvelope<'_> = serde_json::from_str(line).map_err(RecordError::Envelope)?;
    let data = env.data.map(RawValue::get).unwrap_or("null");
    let kind = PackedKind::from_type_name(&env.ty);
    if let Some(kind) = kind {
        let seq0 = env.seq0.ok_or(RecordError::MissingField("seq0"))?;
        let time0 = env.time0.ok_or(RecordError::MissingField("time0"))?;
        let data: PackedData<'_> =
            serde_json::from_str(data).map_err(payload(&env.ty, Some(seq0)))?;
        scratch.clear();
        let texts = data
            .texts
            .as_deref()
            .or(data.args.as_deref())
            .unwrap_or(&[]);
        for t in texts {
            scratch.text.push_str(&t.0);
            scratch.ends.push(scratch.text.len());
        }
        scratch.dt = data.dt;
        let mut aux = |t: Option<Text<'_>>| {
            t.map(|t| {
                let start = scratch.aux.len();
                scratch.aux.push_str(&t.0);
                (start, scratch.aux.len())
            })
        };
        let (id, name) = (aux(data.id), aux(data.name));
        let scratch: &'a Scratch = scratch;
        return Ok(Line::Row(Row {
            kind,
            seq0,
            time0,
            turn: data.turn,
            step: data.step,
            index: data.index,
            id: id.map(|(a, b)| &scratch.aux[a..b]),
            name: name.map(|(a, b)| &scratch.aux[a..b]),
            dt: &scratch.dt,
            text: &scratch.text,
            ends: &scratch.ends,
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
