//! Compact in-memory storage of a session's events.
//!
//! About 96% of a real session's events are `assistant/chunk` deltas. Boxing each one as a
//! [`SessionEvent`] would cost ~150 bytes plus its text; instead consecutive deltas of one block
//! (same kind, turn, step and block index, contiguous seqs) are kept as one [`ChunkRun`]: the
//! texts concatenated in one `String`, an end offset and a time offset per member (8 bytes per
//! delta plus its text). Every other event is kept whole. [`Records`] maps a seq to its record by
//! binary search and rebuilds `SessionEvent`s on demand.

use crate::store::parse::Row;
use keel_protocol::{
    AssistantChunk, EventBody, PackedKind, Seq, SessionEvent, StreamChunk, TimeMs,
};
use keel_protocol::{StepNo, TurnNo};
use std::borrow::Cow;

/// A run of delta chunks of one block, standing for seqs `seq0 .. seq0 + len`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChunkRun {
    pub(crate) kind: PackedKind,
    pub(crate) seq0: u64,
    pub(crate) time0: TimeMs,
    pub(crate) turn: TurnNo,
    pub(crate) step: StepNo,
    pub(crate) index: u32,
    /// Tool call id carried by the first member (tool-call runs).
    pub(crate) id: Option<Box<str>>,
    /// Tool name carried by the first member (tool-call runs).
    pub(crate) name: Option<Box<str>>,
    /// Member `i`'s time is `time0 + toff[i]`.
    pub(crate) toff: Vec<u32>,
    /// Member `i`'s text is `text[ends[i-1]..ends[i]]` (`ends[-1]` = 0).
    pub(crate) ends: Vec<u32>,
    pub(crate) text: String,
}

/// A delta chunk seen on its own, before it is placed in a run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Delta<'a> {
    pub(crate) kind: PackedKind,
    pub(crate) seq: u64,
    pub(crate) time: TimeMs,
    pub(crate) turn: TurnNo,
    pub(crate) step: StepNo,
    pub(crate) index: u32,
    pub(crate) id: Option<&'a str>,
    pub(crate) name: Option<&'a str>,
    pub(crate) text: &'a str,
}

impl<'a> Delta<'a> {
    /// The delta an event stands for, if it is a delta `assistant/chunk` that a run can hold
    /// (not ignorable, no surface fields).
    pub(crate) fn of_event(ev: &'a SessionEvent) -> Option<Delta<'a>> {
        let EventBody::AssistantChunk(c) = &ev.body else {
            return None;
        };
        if ev.ignorable || ev.surface_op.is_some() || !ev.source_event_seqs.is_empty() {
            return None;
        }
        let (kind, index, id, name, text) = match &c.chunk {
            StreamChunk::TextDelta { index, text } => {
                (PackedKind::Text, *index, None, None, text.as_str())
            }
            StreamChunk::ReasoningDelta { index, text } => {
                (PackedKind::Reasoning, *index, None, None, text.as_str())
            }
            StreamChunk::ToolCallDelta {
                index,
                id,
                name,
                arguments_delta,
            } => (
                PackedKind::ToolCall,
                *index,
                id.as_deref(),
                name.as_deref(),
                arguments_delta.as_str(),
            ),
            _ => return None,
        };
        Some(Delta {
            kind,
            seq: ev.seq.0,
            time: ev.time,
            turn: c.turn,
            step: c.step,
            index,
            id,
            name,
            text,
        })
    }
}

impl ChunkRun {
    /// A run holding `d`, with room for `members` deltas of `text` bytes in all.
    fn start(d: &Delta<'_>, members: usize, text: usize) -> ChunkRun {
        let mut toff = Vec::with_capacity(members);
        toff.push(0);
        let mut ends = Vec::with_capacity(members);
        ends.push(d.text.len() as u32);
        let mut run_text = String::with_capacity(text.max(d.text.len()));
        run_text.push_str(d.text);
        ChunkRun {
            kind: d.kind,
            seq0: d.seq,
            time0: d.time,
            turn: d.turn,
            step: d.step,
            index: d.index,
            id: d.id.map(Into::into),
            name: d.name.map(Into::into),
            toff,
            ends,
            text: run_text,
        }
    }

    /// Number of events in the run.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Append `d` if it continues this run; false when it must start a new one.
    fn try_extend(&mut self, d: &Delta<'_>) -> bool {
        let continues = d.kind == self.kind
            && d.seq == self.seq0 + self.len() as u64
            && d.turn == self.turn
            && d.step == self.step
            && d.index == self.index
            && d.id.is_none()
            && d.name.is_none();
        let toff = d
            .time
            .checked_sub(self.time0)
            .and_then(|t| u32::try_from(t).ok());
        let new_len = self.text.len() + d.text.len();
        match (continues, toff, u32::try_from(new_len)) {
            (true, Some(toff), Ok(end)) => {
                self.text.push_str(d.text);
                self.toff.push(toff);
                self.ends.push(end);
                true
            }
            _ => false,
        }
    }

    /// Member `i` (0-based) as a delta.
    pub(crate) fn member(&self, i: usize) -> Delta<'_> {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        Delta {
            kind: self.kind,
            seq: self.seq0 + i as u64,
            time: self.time0 + i64::from(self.toff[i]),
            turn: self.turn,
            step: self.step,
            index: self.index,
            id: if i == 0 { self.id.as_deref() } else { None },
            name: if i == 0 { self.name.as_deref() } else { None },
            text: &self.text[start..self.ends[i] as usize],
        }
    }
}

impl Delta<'_> {
    /// The `assistant/chunk` event this delta stands for.
    pub(crate) fn as_event(&self) -> SessionEvent {
        let chunk = match self.kind {
            PackedKind::Text => StreamChunk::TextDelta {
                index: self.index,
                text: self.text.to_owned(),
            },
            PackedKind::Reasoning => StreamChunk::ReasoningDelta {
                index: self.index,
                text: self.text.to_owned(),
            },
            PackedKind::ToolCall => StreamChunk::ToolCallDelta {
                index: self.index,
                id: self.id.map(str::to_owned),
                name: self.name.map(str::to_owned),
                arguments_delta: self.text.to_owned(),
            },
        };
        SessionEvent::new(
            Seq(self.seq),
            self.time,
            EventBody::AssistantChunk(Box::new(AssistantChunk {
                turn: self.turn,
                step: self.step,
                chunk,
            })),
        )
    }
}

/// One stored record: a whole event or a run of deltas.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Record {
    Event(Box<SessionEvent>),
    Run(Box<ChunkRun>),
}

impl Record {
    fn first_seq(&self) -> u64 {
        match self {
            Record::Event(e) => e.seq.0,
            Record::Run(r) => r.seq0,
        }
    }
}

/// All events of a session in seq order, stored compactly.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Records {
    recs: Vec<Record>,
    len: u64,
}

impl Records {
    /// Number of events (not records).
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Store the next event (its seq must be `len()`; the caller has checked).
    pub(crate) fn push_event(&mut self, ev: SessionEvent) {
        if let Some(d) = Delta::of_event(&ev) {
            self.push_delta(&d);
        } else {
            self.recs.push(Record::Event(Box::new(ev)));
            self.len += 1;
        }
    }

    /// Store the next event, a delta (its seq must be `len()`).
    pub(crate) fn push_delta(&mut self, d: &Delta<'_>) {
        self.push_delta_sized(d, 1, d.text.len().max(64));
    }

    /// Store a delta, sizing a new run for `members` deltas of `text` bytes.
    fn push_delta_sized(&mut self, d: &Delta<'_>, members: usize, text: usize) {
        if let Some(Record::Run(run)) = self.recs.last_mut()
            && run.try_extend(d)
        {
            self.len += 1;
            return;
        }
        self.recs
            .push(Record::Run(Box::new(ChunkRun::start(d, members, text))));
        self.len += 1;
    }

    /// Store a packed row's members (the first one's seq must be `len()`). Stored exactly as
    /// pushing its members one by one would.
    pub(crate) fn push_row(&mut self, row: &Row<'_>) {
        let n = row.len();
        if n == 0 {
            return;
        }
        let mut time = row.time_after(0, 0);
        self.push_delta_sized(&row.member(0, time), n, row.text.len());
        let mut i = 1;
        if let Some(Record::Run(run)) = self.recs.last_mut() {
            // The run holding member 0 takes the others (same block, next seqs, no id or name)
            // while their times and text ends fit its offsets.
            let base = run.text.len() - row.ends[0];
            run.toff.reserve(n - 1);
            run.ends.reserve(n - 1);
            while i < n {
                let t = row.time_after(i, time);
                let toff = t.checked_sub(run.time0).and_then(|d| u32::try_from(d).ok());
                let (Some(toff), Ok(end)) = (toff, u32::try_from(base + row.ends[i])) else {
                    break;
                };
                run.toff.push(toff);
                run.ends.push(end);
                time = t;
                i += 1;
            }
            run.text.push_str(&row.text[row.ends[0]..row.ends[i - 1]]);
            self.len += i as u64 - 1;
        }
        while i < n {
            time = row.time_after(i, time);
            self.push_delta(&row.member(i, time));
            i += 1;
        }
    }

    fn locate(&self, seq: u64) -> Option<(&Record, usize)> {
        if seq >= self.len {
            return None;
        }
        let i = self
            .recs
            .partition_point(|r| r.first_seq() <= seq)
            .checked_sub(1)?;
        let rec = &self.recs[i];
        Some((rec, (seq - rec.first_seq()) as usize))
    }

    /// The event at `seq`: borrowed when stored whole, rebuilt when part of a run.
    pub(crate) fn get(&self, seq: u64) -> Option<Cow<'_, SessionEvent>> {
        match self.locate(seq)? {
            (Record::Event(e), _) => Some(Cow::Borrowed(e)),
            (Record::Run(r), i) => Some(Cow::Owned(r.member(i).as_event())),
        }
    }

    /// The event at `seq` if it is stored whole (every non-delta event is).
    pub(crate) fn get_whole(&self, seq: u64) -> Option<&SessionEvent> {
        match self.locate(seq)? {
            (Record::Event(e), _) => Some(e),
            _ => None,
        }
    }

    /// The stored records in order.
    pub(crate) fn records(&self) -> &[Record] {
        &self.recs
    }

    /// Every event in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = Cow<'_, SessionEvent>> + '_ {
        self.recs.iter().flat_map(
            |rec| -> Box<dyn Iterator<Item = Cow<'_, SessionEvent>> + '_> {
                match rec {
                    Record::Event(e) => Box::new(std::iter::once(Cow::Borrowed(&**e))),
                    Record::Run(r) => {
                        Box::new((0..r.len()).map(move |i| Cow::Owned(r.member(i).as_event())))
                    }
                }
            },
        )
    }

    /// Approximate heap bytes held (for reports and benches).
    pub(crate) fn runs_and_events(&self) -> (usize, usize) {
        let runs = self
            .recs
            .iter()
            .filter(|r| matches!(r, Record::Run(_)))
            .count();
        (runs, self.recs.len() - runs)
    }
}
