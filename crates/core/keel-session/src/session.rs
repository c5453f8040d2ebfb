//! The in-memory session: an append-only, validated event log with its surface, derived
//! messages and turn/step tracker kept up to date on every append.
//!
//! Data flow: `append(event)` → [`Session::validate`] (seq, JSON, surface rules) → the event is
//! stored compactly ([`crate::record`]), folded into the [`Surface`] and observed by the
//! [`Tracker`]. `derive_messages()` then maps new surface nodes to messages.

use crate::error::AppendError;
use crate::invariants::{InvariantViolation, Tracker, TurnState};
use crate::record::{Delta, Record, Records};
use crate::store::parse::Row;
use crate::surface::{Derived, DerivedMessage, Surface};
use keel_protocol::{
    ContentBlock, EventBody, Message, Seq, SessionEvent, SessionHeader, SurfaceOp,
};
use std::borrow::Cow;

/// Milliseconds since the Unix epoch, now (the one clock: [`keel_protocol::time`]).
pub use keel_protocol::time::now_ms;

/// A new session id: `session-<uuid v4>`.
pub fn new_session_id() -> keel_protocol::SessionId {
    keel_protocol::SessionId(format!("session-{}", uuid::Uuid::new_v4()))
}

/// A session log in memory.
#[derive(Debug, Clone)]
pub struct Session {
    header: SessionHeader,
    records: Records,
    surface: Surface,
    /// Each `surface/rewind`'s seq and the nodes it returned to, in log order.
    rewinds: Vec<(Seq, Vec<Seq>)>,
    derived: Derived,
    pub(crate) tracker: Tracker,
    /// The last `session/title`.
    title: Option<String>,
    /// The first `user/message` a human typed.
    first_prompt: Option<Seq>,
}

/// What a validated surface event does to the surface.
enum SurfaceEffect {
    None,
    Append,
    Replace {
        from: usize,
        to: usize,
    },
    /// `surface/rewind`: the nodes the surface had at its target.
    Rewind(Vec<Seq>),
}

impl Session {
    /// An empty session with this header.
    pub fn new(header: SessionHeader) -> Session {
        let tracker = Tracker::new(header.seed_length);
        Session {
            header,
            records: Records::default(),
            surface: Surface::default(),
            rewinds: Vec::new(),
            derived: Derived::default(),
            tracker,
            title: None,
            first_prompt: None,
        }
    }

    /// The header (first line of the file).
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// Number of events.
    pub fn len(&self) -> u64 {
        self.records.len()
    }

    /// True when the log holds no event.
    pub fn is_empty(&self) -> bool {
        self.records.len() == 0
    }

    /// The seq the next appended event must carry.
    pub fn next_seq(&self) -> Seq {
        Seq(self.records.len())
    }

    /// The event at `seq`: borrowed when stored whole, rebuilt when it is a delta chunk.
    pub fn event(&self, seq: Seq) -> Option<Cow<'_, SessionEvent>> {
        self.records.get(seq.0)
    }

    /// The event at `seq`, borrowed, when it is stored whole: every event but the delta
    /// `assistant/chunk`s, so every surface event. Unlike [`Session::event`] it never builds an
    /// event.
    pub fn whole_event(&self, seq: Seq) -> Option<&SessionEvent> {
        self.records.get_whole(seq.0)
    }

    /// The message of the surface event at `seq`, borrowed (`None` when `seq` is not a
    /// `user/message`, `assistant/message` or `tool/result`).
    pub fn surface_message(&self, seq: Seq) -> Option<&Message> {
        self.whole_event(seq)?.body.surface_message()
    }

    /// [`Session::whole_event`] for each of `seqs`, in order. Cheapest when the seqs mostly
    /// ascend, as surface nodes do: each lookup searches only the records that can hold the seq
    /// given the previous one (each record holds at least one seq), so a log of whole events is
    /// read in one probe per seq, and a log with delta runs in O(log distance) probes.
    pub fn whole_events<'a, I>(
        &'a self,
        seqs: I,
    ) -> impl Iterator<Item = (Seq, Option<&'a SessionEvent>)> + 'a
    where
        I: IntoIterator<Item = Seq>,
        I::IntoIter: 'a,
    {
        let recs = self.records.records();
        let events = self.records.len();
        let mut at = None;
        seqs.into_iter()
            .map(move |seq| (seq, whole_from(recs, events, &mut at, seq.0)))
    }

    /// Every event stored whole, in seq order: all but the delta `assistant/chunk`s, which it
    /// skips without building them (the cheap way to fold a long log over its other types).
    pub fn whole_event_iter(&self) -> impl Iterator<Item = &SessionEvent> + '_ {
        self.records.records().iter().filter_map(|rec| match rec {
            crate::record::Record::Event(e) => Some(&**e),
            crate::record::Record::Run(_) => None,
        })
    }

    /// Every event in seq order (delta chunks rebuilt on the fly).
    pub fn events(&self) -> impl Iterator<Item = Cow<'_, SessionEvent>> + '_ {
        self.records.iter()
    }

    /// The current surface (node seqs in order + replace generation).
    pub fn surface(&self) -> &Surface {
        &self.surface
    }

    /// Where the session is in its turn/step structure.
    pub fn turn_state(&self) -> TurnState {
        self.tracker.state
    }

    /// Number of `turn/start` events.
    pub fn turn_count(&self) -> u64 {
        self.tracker.turns
    }

    /// The last `session/title`, if any.
    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// Text of the first message a human typed, if any.
    pub fn first_prompt(&self) -> Option<String> {
        let ev = self.records.get_whole(self.first_prompt?.0)?;
        ev.body.surface_message().map(Message::text)
    }

    /// Seq of the last `turn/end`, if any.
    pub fn last_turn_end(&self) -> Option<Seq> {
        self.tracker.last_turn_end
    }

    /// Every turn/step bracket rule the log breaks, in log order. `Ok` for a well-formed log
    /// (an open turn at the end is not a violation: the session may be live, or need repair).
    pub fn check_invariants(&self) -> Result<(), Vec<InvariantViolation>> {
        let v = self.tracker.report(self.len());
        if v.is_empty() { Ok(()) } else { Err(v) }
    }

    /// Model-visible history: the current surface nodes mapped to messages (empty assistant
    /// messages skipped). Incremental: only nodes added since the last call are mapped, unless
    /// a replacement changed the surface generation.
    pub fn derive_messages(&mut self) -> &[DerivedMessage] {
        let records = &self.records;
        self.derived.update(&self.surface, |seq| {
            records
                .get_whole(seq.0)
                .and_then(|e| e.body.surface_message())
        });
        &self.derived.messages
    }

    /// How many messages [`Session::derive_messages`] would return, without building them (no
    /// message is cloned; the cached derived messages are neither used nor updated).
    pub fn derived_message_count(&self) -> usize {
        self.whole_events(self.surface.nodes().iter().copied())
            .filter(|(_, e)| {
                e.and_then(|e| e.body.surface_message())
                    .is_some_and(crate::surface::derives)
            })
            .count()
    }

    /// Append a complete event after validating it (see [`AppendError`] for the rules).
    pub fn append(&mut self, event: SessionEvent) -> Result<(), AppendError> {
        if let Err(source) = serde_json::to_writer(std::io::sink(), &event) {
            return Err(AppendError::NotJson {
                seq: event.seq,
                type_name: event.type_name().to_owned(),
                source,
            });
        }
        self.append_parsed(event)
    }

    /// Append an event that came from JSON text (skips the JSON check: text parsed by
    /// serde_json cannot hold NaN, infinities or lone surrogates).
    pub(crate) fn append_parsed(&mut self, event: SessionEvent) -> Result<(), AppendError> {
        let effect = self.validate(&event)?;
        match effect {
            SurfaceEffect::None => {}
            SurfaceEffect::Append => self.surface.append(event.seq),
            SurfaceEffect::Replace { from, to } => self.surface.replace(from, to, event.seq),
            SurfaceEffect::Rewind(nodes) => {
                self.surface.rewind(nodes.clone());
                self.rewinds.push((event.seq, nodes));
            }
        }
        self.tracker.observe(&event);
        match &event.body {
            EventBody::SessionTitle(t) => self.title = Some(t.title.clone()),
            EventBody::UserMessage(m) if self.first_prompt.is_none() && m.source.is_user() => {
                self.first_prompt = Some(event.seq)
            }
            _ => {}
        }
        self.records.push_event(event);
        Ok(())
    }

    /// Append a delta chunk without building an event (loader fast path).
    pub(crate) fn append_delta(&mut self, d: &Delta<'_>) -> Result<(), AppendError> {
        let expected = self.next_seq();
        if d.seq != expected.0 {
            return Err(AppendError::SeqGap {
                expected,
                got: Seq(d.seq),
            });
        }
        self.tracker.observe_chunk(Seq(d.seq), d.turn, d.step);
        self.records.push_delta(d);
        Ok(())
    }

    /// Append the deltas of a packed row without building events (loader fast path). All or
    /// nothing: refused when its first seq is not the next one.
    pub(crate) fn append_row(&mut self, row: &Row<'_>) -> Result<(), AppendError> {
        if row.len() == 0 {
            return Ok(());
        }
        let expected = self.next_seq();
        if row.seq0 != expected.0 {
            return Err(AppendError::SeqGap {
                expected,
                got: Seq(row.seq0),
            });
        }
        self.tracker
            .observe_chunks(expected, row.len() as u64, row.turn, row.step);
        self.records.push_row(row);
        Ok(())
    }

    /// Append `body` as a plain event with the next seq and the current time.
    pub fn push(&mut self, body: EventBody) -> Result<Seq, AppendError> {
        let ev = self.stamp(body, None);
        let seq = ev.seq;
        self.append(ev)?;
        Ok(seq)
    }

    /// Append a surface event (`user/message`, `assistant/message`, `tool/result`) with the
    /// next seq, the current time, `op` and the events it was formed from.
    pub fn push_surface(
        &mut self,
        body: EventBody,
        op: SurfaceOp,
        sources: Vec<Seq>,
    ) -> Result<Seq, AppendError> {
        let ev = self.stamp(body, Some((op, sources)));
        let seq = ev.seq;
        self.append(ev)?;
        Ok(seq)
    }

    /// Build the event `push`/`push_surface` would append, without appending it.
    pub fn stamp(&self, body: EventBody, surface: Option<(SurfaceOp, Vec<Seq>)>) -> SessionEvent {
        let mut ev = SessionEvent::new(self.next_seq(), now_ms(), body);
        if let Some((op, sources)) = surface {
            ev.surface_op = Some(op);
            ev.source_event_seqs = sources;
        }
        ev
    }

    /// Number of compact chunk runs and whole events stored (for reports and benches).
    pub fn storage_counts(&self) -> (usize, usize) {
        self.records.runs_and_events()
    }

    pub(crate) fn records(&self) -> &Records {
        &self.records
    }

    fn validate(&self, ev: &SessionEvent) -> Result<SurfaceEffect, AppendError> {
        let seq = ev.seq;
        let expected = self.next_seq();
        if seq != expected {
            return Err(AppendError::SeqGap { expected, got: seq });
        }
        if let EventBody::Other(o) = &ev.body
            && !ev.ignorable
            && !o.is_known()
        {
            return Err(AppendError::UnknownRequiredType {
                seq,
                type_name: o.type_name.clone(),
            });
        }
        if let EventBody::SurfaceRewind(r) = &ev.body
            && ev.surface_op.is_none()
        {
            return self
                .validate_rewind(seq, r.to_seq)
                .map(SurfaceEffect::Rewind);
        }
        let surface_type = ev.body.is_surface_eligible();
        match (surface_type, &ev.surface_op) {
            (false, None) => Ok(SurfaceEffect::None),
            (false, Some(_)) => Err(AppendError::SurfaceOpOnNonSurface {
                seq,
                type_name: ev.type_name().to_owned(),
            }),
            (true, None) => Err(AppendError::MissingSurfaceOp {
                seq,
                type_name: ev.type_name().to_owned(),
            }),
            (true, Some(SurfaceOp::Append)) => Ok(SurfaceEffect::Append),
            (true, Some(SurfaceOp::Replace { start, end })) => {
                let (start, end) = (*start, *end);
                let missing = |m| AppendError::SpanNotOnSurface {
                    seq,
                    start,
                    end,
                    missing: m,
                };
                let from = self.surface.position(start).ok_or_else(|| missing(start))?;
                let to = self.surface.position(end).ok_or_else(|| missing(end))?;
                if to < from {
                    return Err(AppendError::SpanOutOfOrder { seq, start, end });
                }
                let shadowed = &self.surface.nodes()[from..=to];
                if let Some(&s) = shadowed.iter().find(|s| !ev.source_event_seqs.contains(s)) {
                    return Err(AppendError::ShadowedSeqNotCited { seq, shadowed: s });
                }
                if let EventBody::ToolResult(new) = &ev.body {
                    let what = self.tool_result_replacement_defect(new, shadowed);
                    if let Some(what) = what {
                        return Err(AppendError::ToolResultReplacement {
                            seq,
                            replaced: start,
                            what,
                        });
                    }
                }
                Ok(SurfaceEffect::Replace { from, to })
            }
        }
    }

    /// The surface nodes a `surface/rewind` at `seq` to `to` returns to, if it may: `to` is an
    /// earlier event, no turn is open now and none was just before `to`.
    fn validate_rewind(&self, seq: Seq, to: Seq) -> Result<Vec<Seq>, AppendError> {
        if to >= seq {
            return Err(AppendError::RewindNotBefore { seq, to });
        }
        if let Some(open) = self.tracker.state.open_turn {
            return Err(AppendError::RewindInsideTurn {
                seq,
                what: format!("turn {} is open", open.0),
            });
        }
        let (nodes, open) = self.surface_before(to);
        match open {
            Some(turn) => Err(AppendError::RewindInsideTurn {
                seq,
                what: format!("seq {to} is inside turn {turn}"),
            }),
            None => Ok(nodes),
        }
    }

    /// The surface nodes just before event `to` (replaying the surface ops of the events
    /// before it; an earlier rewind's nodes come from [`Session::rewinds`]), and the turn open
    /// there, if any.
    pub fn surface_before(&self, to: Seq) -> (Vec<Seq>, Option<u32>) {
        let mut nodes: Vec<Seq> = Vec::new();
        let mut open = None;
        let mut rewinds = self.rewinds.iter().peekable();
        for ev in self.whole_event_iter() {
            if ev.seq >= to {
                break;
            }
            match (&ev.body, &ev.surface_op) {
                (EventBody::TurnStart(t), _) => open = Some(t.turn.0),
                (EventBody::TurnEnd(_), _) => open = None,
                (EventBody::SurfaceRewind(_), None) => {
                    while rewinds.next_if(|(s, _)| *s < ev.seq).is_some() {}
                    if let Some((_, earlier)) = rewinds.next_if(|(s, _)| *s == ev.seq) {
                        nodes.clone_from(earlier);
                    }
                }
                (_, Some(SurfaceOp::Append)) => nodes.push(ev.seq),
                (_, Some(SurfaceOp::Replace { start, end })) => {
                    let from = nodes.iter().rposition(|s| s == start);
                    let upto = nodes.iter().rposition(|s| s == end);
                    if let (Some(from), Some(upto)) = (from, upto)
                        && from <= upto
                    {
                        nodes.splice(from..=upto, std::iter::once(ev.seq));
                    }
                }
                _ => {}
            }
        }
        (nodes, open)
    }

    /// Why a replacing `tool/result` may not replace `shadowed`, if it may not.
    fn tool_result_replacement_defect(
        &self,
        new: &keel_protocol::ToolResultEvent,
        shadowed: &[Seq],
    ) -> Option<&'static str> {
        let [only] = shadowed else {
            return Some("it shadows more than one node");
        };
        let Some(EventBody::ToolResult(old)) = self.records.get_whole(only.0).map(|e| &e.body)
        else {
            return Some("the shadowed node is not a tool/result");
        };
        if (old.turn, old.step) != (new.turn, new.step) {
            return Some("its turn/step differs");
        }
        same_but_content(&old.message, &new.message)
    }
}

fn first_seq(rec: &Record) -> u64 {
    match rec {
        Record::Event(e) => e.seq.0,
        Record::Run(r) => r.seq0,
    }
}

/// The whole event at `seq` in `recs` (holding `events` seqs), after a lookup that ended at
/// record `*at`; leaves `*at` at the record holding `seq`.
fn whole_from<'a>(
    recs: &'a [Record],
    events: u64,
    at: &mut Option<usize>,
    seq: u64,
) -> Option<&'a SessionEvent> {
    if seq >= events || recs.is_empty() {
        return None;
    }
    let (n, s) = (usize::try_from(events).ok()?, usize::try_from(seq).ok()?);
    // Every record holds at least one seq, so the one holding `seq` has at most `seq` records
    // before it and at most `events - 1 - seq` after it.
    let last = recs.len() - 1;
    let mut lo = (last + s + 1).saturating_sub(n);
    let mut hi = s.min(last);
    if let Some(a) = *at
        && let Some(rec) = recs.get(a)
        && first_seq(rec) <= seq
    {
        let ahead = usize::try_from(seq - first_seq(rec)).unwrap_or(usize::MAX);
        lo = lo.max(a);
        hi = hi.min(a.saturating_add(ahead));
    }
    // The answer is the last record in lo..=hi starting at or before `seq`; in a log of whole
    // events it is `hi`.
    let i = if lo >= hi || first_seq(&recs[hi]) <= seq {
        hi
    } else {
        (lo + recs[lo..hi].partition_point(|r| first_seq(r) <= seq)).checked_sub(1)?
    };
    *at = Some(i);
    match &recs[i] {
        Record::Event(e) if e.seq.0 == seq => Some(e),
        _ => None,
    }
}

/// Why two tool-result messages differ in more than their results' content, if they do.
fn same_but_content(old: &Message, new: &Message) -> Option<&'static str> {
    if old.role != new.role {
        return Some("its role differs");
    }
    if old.id != new.id {
        return Some("its message id differs");
    }
    if old.source != new.source {
        return Some("its source differs");
    }
    if old.content.len() != new.content.len() {
        return Some("its number of content blocks differs");
    }
    for (a, b) in old.content.iter().zip(&new.content) {
        match (a, b) {
            (ContentBlock::ToolResult(a), ContentBlock::ToolResult(b)) => {
                if a.tool_call_id != b.tool_call_id {
                    return Some("its toolCallId differs");
                }
                if a.is_error != b.is_error {
                    return Some("its isError differs");
                }
            }
            (a, b) if a == b => {}
            _ => return Some("a non-result content block differs"),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{AssistantChunk, MessageSource, SessionId, StreamChunk};
    use pretty_assertions::assert_eq;

    #[test]
    fn whole_events_matches_whole_event_in_any_order() {
        let mut s = Session::new(SessionHeader::new(SessionId("s".into()), 0, None));
        for i in 0..40u32 {
            let m = Message::user_text(format!("m{i}"), MessageSource::user(), format!("u{i}"));
            s.push_surface(
                EventBody::UserMessage(Box::new(m)),
                SurfaceOp::Append,
                Vec::new(),
            )
            .unwrap();
            // Delta runs of varying length between the surface events.
            for _ in 0..i % 7 {
                let chunk = StreamChunk::TextDelta {
                    index: 0,
                    text: "d".into(),
                };
                let body = AssistantChunk {
                    turn: keel_protocol::TurnNo(1),
                    step: keel_protocol::StepNo(i),
                    chunk,
                };
                s.push(EventBody::AssistantChunk(Box::new(body))).unwrap();
            }
        }
        let n = s.len();
        let mut seqs: Vec<Seq> = (0..n + 3).map(Seq).collect();
        seqs.extend((0..n).rev().map(Seq));
        seqs.extend((0..n).step_by(5).map(Seq));
        seqs.extend([
            Seq(n - 1),
            Seq(0),
            Seq(7),
            Seq(5),
            Seq(n + 10),
            Seq(40),
            Seq(41),
        ]);
        let expected: Vec<(Seq, Option<&SessionEvent>)> =
            seqs.iter().map(|&q| (q, s.whole_event(q))).collect();
        let got: Vec<_> = s.whole_events(seqs.iter().copied()).collect();
        assert_eq!(got, expected);
        let surface: Vec<Seq> = s.surface().nodes().to_vec();
        assert_eq!(surface.len(), 40);
        assert!(
            s.whole_events(surface.iter().copied())
                .all(|(q, e)| e.is_some_and(|e| e.seq == q))
        );
        assert_eq!(
            s.surface_message(Seq(0)).map(Message::text),
            Some("m0".into())
        );
        assert_eq!(s.surface_message(Seq(2)), None);
    }
}
