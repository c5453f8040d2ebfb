//! [`SurfaceIndex`]: what compaction needs to know about each current surface node, kept as
//! plain arrays beside a session so that measuring, span selection and prune planning never
//! look an event up.
//!
//! Per node, in surface order: its seq, its raw token estimate ([`meter::message_tokens`], 0 for
//! an empty assistant message, which is not sent), a few flags (a replacement? a `tool/result`?
//! an `assistant/message` with reported usage?), the text bytes of its tool results, and its
//! tool-call links (call and result ids, interned) from which the pairing that keeps span cuts
//! balanced is derived.
//!
//! [`SurfaceIndex::sync`] brings the index up to date with a session:
//! - surface only appended to since the last sync (same replace generation): the new nodes are
//!   indexed, O(new nodes);
//! - a replace happened (generation changed): the nodes still on the surface keep their entries
//!   (they are found by one merge pass over the seqs, since a replace never reorders the nodes it
//!   keeps and every node it adds has a seq the index has not seen), only the new nodes are
//!   looked up, and the pairing is recomputed over the arrays; O(n) without touching an event;
//! - anything else (another log under the same id): rebuilt from scratch.
//!
//! The [`super::Compactor`] keeps one index per session; [`SurfaceIndex::of`] builds a cold one.

use super::meter;
use super::prune::is_pruned;
use keel_protocol::{ContentBlock, EventBody, Role, Seq, SessionEvent, SurfaceOp};
use keel_session::Session;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// No position (a node without a paired earlier call; an id without a call yet).
const NONE: usize = usize::MAX;

/// The node's event replaced earlier nodes (a summary or a pruned result).
const REPLACEMENT: u8 = 1;
/// The node is a `tool/result`.
const TOOL_RESULT: u8 = 1 << 1;
/// The node is an `assistant/message` whose usage reports prompt tokens.
const USAGE: u8 = 1 << 2;
/// The node's result texts were searched for a pruning marker…
const MARKER_CHECKED: u8 = 1 << 3;
/// …and one was found.
const MARKED: u8 = 1 << 4;

/// The current surface of one session, node by node, as arrays (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct SurfaceIndex {
    /// Length of the log at the last sync: surface seqs below it were indexed then.
    synced_len: u64,
    /// Surface generation at the last sync.
    generation: u64,
    seqs: Vec<Seq>,
    tokens: Vec<u64>,
    flags: Vec<u8>,
    /// Bytes of the text blocks inside the node's tool results (0 for other nodes).
    result_bytes: Vec<u64>,
    /// Node `i`'s links are `links[link_end[i - 1]..link_end[i]]` (`link_end[-1]` = 0).
    link_end: Vec<usize>,
    /// Tool calls and results in block order: `id << 1` for a call, `id << 1 | 1` for a result.
    links: Vec<usize>,
    /// Smallest position of an earlier call one of the node's results answers (`NONE`).
    open_from: Vec<usize>,
    /// Per interned id, the position of the last call with it so far (`NONE`).
    last_call: Vec<usize>,
    ids: HashMap<Box<str>, usize, BuildHasherDefault<IdHasher>>,
    /// Sum of `tokens`.
    total: u64,
}

impl SurfaceIndex {
    /// The index of `session`'s current surface, built cold.
    pub fn of(session: &Session) -> SurfaceIndex {
        let mut index = SurfaceIndex::default();
        index.sync(session);
        index
    }

    /// An index of `events`, taken as the surface in this order (fixtures).
    #[cfg(test)]
    pub(crate) fn of_events<'a>(
        events: impl IntoIterator<Item = &'a SessionEvent>,
    ) -> SurfaceIndex {
        let mut index = SurfaceIndex::default();
        for e in events {
            index.push(e.seq, Some(e));
            index.synced_len = index.synced_len.max(e.seq.0 + 1);
        }
        index
    }

    /// Bring the index up to date with `session`'s surface (see the module doc for the cost).
    pub fn sync(&mut self, session: &Session) {
        let surface = session.surface();
        let nodes = surface.nodes();
        let have = self.seqs.len();
        let appended = surface.generation() == self.generation
            && session.len() >= self.synced_len
            && nodes.len() >= have
            && (have == 0 || nodes[have - 1] == self.seqs[have - 1]);
        if appended {
            self.reserve(nodes.len() - have);
            for (seq, event) in session.whole_events(nodes[have..].iter().copied()) {
                self.push(seq, event);
            }
        } else if !self.merge(session) {
            *self = SurfaceIndex::default();
            self.reserve(nodes.len());
            for (seq, event) in session.whole_events(nodes.iter().copied()) {
                self.push(seq, event);
            }
        }
        self.synced_len = session.len();
        self.generation = surface.generation();
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.seqs.len()
    }

    /// True when the surface is empty.
    pub fn is_empty(&self) -> bool {
        self.seqs.is_empty()
    }

    /// Seqs of the nodes, in surface order.
    pub fn seqs(&self) -> &[Seq] {
        &self.seqs
    }

    /// Raw token estimates of the nodes, in surface order.
    pub fn node_tokens(&self) -> &[u64] {
        &self.tokens
    }

    /// Raw tokens of every node.
    pub fn tokens(&self) -> u64 {
        self.total
    }

    /// Position of the first node whose seq is at least `seq` (`len` when none).
    pub fn first_at_or_after(&self, seq: Seq) -> usize {
        self.seqs
            .iter()
            .position(|&s| s >= seq)
            .unwrap_or(self.seqs.len())
    }

    /// Position of the last `assistant/message` whose usage reports prompt tokens.
    pub fn last_with_usage(&self) -> Option<usize> {
        self.flags.iter().rposition(|f| f & USAGE != 0)
    }

    /// True when node `position`'s event replaced earlier nodes.
    pub fn is_replacement(&self, position: usize) -> bool {
        self.flags
            .get(position)
            .is_some_and(|f| f & REPLACEMENT != 0)
    }

    /// True when node `position` is a `tool/result`.
    pub fn is_tool_result(&self, position: usize) -> bool {
        self.flags
            .get(position)
            .is_some_and(|f| f & TOOL_RESULT != 0)
    }

    /// Bytes of the text blocks inside node `position`'s tool results.
    pub fn result_bytes(&self, position: usize) -> u64 {
        self.result_bytes.get(position).copied().unwrap_or(0)
    }

    /// Positions of the `tool/result`s that are not replacements, estimated above
    /// `over_tokens` and with more than `over_bytes` of result text (before the marker check).
    pub fn prune_candidates(&self, over_tokens: u64, over_bytes: u64) -> Vec<usize> {
        let nodes = self.tokens.iter().zip(&self.flags).zip(&self.result_bytes);
        nodes
            .enumerate()
            .filter(|&(_, ((&tokens, &flags), &bytes))| {
                tokens > over_tokens
                    && flags & (TOOL_RESULT | REPLACEMENT) == TOOL_RESULT
                    && bytes > over_bytes
            })
            .map(|(position, _)| position)
            .collect()
    }

    /// Whether node `position`'s result texts carry a pruning marker, searched once (through
    /// `session`, which must be the log the index was synced with) and remembered.
    pub fn carries_marker(&mut self, position: usize, session: &Session) -> bool {
        let Some(&flags) = self.flags.get(position) else {
            return false;
        };
        if flags & MARKER_CHECKED != 0 {
            return flags & MARKED != 0;
        }
        let marked = match session.whole_event(self.seqs[position]).map(|e| &e.body) {
            Some(EventBody::ToolResult(r)) => r
                .message
                .tool_results()
                .flat_map(|b| &b.content)
                .any(|b| matches!(b, ContentBlock::Text { text } if is_pruned(text))),
            _ => false,
        };
        self.flags[position] |= MARKER_CHECKED | if marked { MARKED } else { 0 };
        marked
    }

    /// `balanced[k]` for `k` in `0..=len`: true when cutting after `k` nodes splits no tool call
    /// from its results.
    pub fn balanced_cuts(&self) -> Vec<bool> {
        let n = self.seqs.len();
        let mut balanced = vec![true; n + 1];
        // Cut k is unbalanced when some node j >= k answers a call at a position below k.
        let mut lowest = NONE;
        for k in (0..n).rev() {
            lowest = lowest.min(self.open_from[k]);
            balanced[k] = lowest >= k;
        }
        balanced
    }

    fn reserve(&mut self, nodes: usize) {
        self.seqs.reserve(nodes);
        self.tokens.reserve(nodes);
        self.flags.reserve(nodes);
        self.result_bytes.reserve(nodes);
        self.link_end.reserve(nodes);
        self.open_from.reserve(nodes);
    }

    /// Index one more node at the end.
    fn push(&mut self, seq: Seq, event: Option<&SessionEvent>) {
        let message = event.and_then(|e| e.body.surface_message());
        let tokens = message
            .filter(|m| !(m.role == Role::Assistant && m.is_empty()))
            .map(meter::message_tokens)
            .unwrap_or(0);
        let mut flags = 0u8;
        let mut result_bytes = 0u64;
        if let Some(e) = event {
            if matches!(e.surface_op, Some(SurfaceOp::Replace { .. })) {
                flags |= REPLACEMENT;
            }
            match &e.body {
                EventBody::ToolResult(r) => {
                    flags |= TOOL_RESULT;
                    for block in r.message.tool_results().flat_map(|b| &b.content) {
                        if let ContentBlock::Text { text } = block {
                            result_bytes += text.len() as u64;
                        }
                    }
                }
                EventBody::AssistantMessage(a)
                    if a.usage.is_some_and(|u| u.prompt_tokens() > 0) =>
                {
                    flags |= USAGE;
                }
                _ => {}
            }
        }
        let position = self.seqs.len();
        let mut open_from = NONE;
        for block in message.map(|m| m.content.as_slice()).unwrap_or_default() {
            let link = match block {
                ContentBlock::ToolCall(c) => self.intern(&c.id) << 1,
                ContentBlock::ToolResult(r) => (self.intern(&r.tool_call_id) << 1) | 1,
                _ => continue,
            };
            self.links.push(link);
            open_from = open_from.min(self.link(position, link));
        }
        self.seqs.push(seq);
        self.tokens.push(tokens);
        self.flags.push(flags);
        self.result_bytes.push(result_bytes);
        self.link_end.push(self.links.len());
        self.open_from.push(open_from);
        self.total += tokens;
    }

    /// Apply one link of the node at `position` to the pairing state; the position of the
    /// earlier call a result answers (`NONE` for a call or an unanswered result).
    fn link(&mut self, position: usize, link: usize) -> usize {
        let last = &mut self.last_call[link >> 1];
        if link & 1 == 0 {
            *last = position;
            NONE
        } else if *last < position {
            *last
        } else {
            NONE
        }
    }

    fn intern(&mut self, id: &str) -> usize {
        if let Some(&n) = self.ids.get(id) {
            return n;
        }
        let n = self.last_call.len();
        self.ids.insert(id.into(), n);
        self.last_call.push(NONE);
        n
    }

    /// Re-sync after a replace, keeping the entries of the nodes still on the surface. False
    /// when the surface is not this index's surface plus new nodes (then rebuild).
    fn merge(&mut self, session: &Session) -> bool {
        let nodes = session.surface().nodes();
        if session.len() < self.synced_len {
            return false;
        }
        let old = std::mem::take(self);
        self.reserve(nodes.len());
        self.links.reserve(old.links.len());
        self.ids = old.ids;
        self.last_call = old.last_call;
        self.last_call.fill(NONE);
        let fresh = nodes.iter().copied().filter(|s| s.0 >= old.synced_len);
        let mut fresh = session.whole_events(fresh);
        let mut j = 0usize;
        for &seq in nodes {
            if seq.0 >= old.synced_len {
                let Some((_, event)) = fresh.next() else {
                    return false;
                };
                self.push(seq, event);
                continue;
            }
            while j < old.seqs.len() && old.seqs[j] != seq {
                j += 1;
            }
            if j == old.seqs.len() {
                return false;
            }
            let position = self.seqs.len();
            let from = if j == 0 { 0 } else { old.link_end[j - 1] };
            let mut open_from = NONE;
            for &link in &old.links[from..old.link_end[j]] {
                self.links.push(link);
                open_from = open_from.min(self.link(position, link));
            }
            self.seqs.push(seq);
            self.tokens.push(old.tokens[j]);
            self.flags.push(old.flags[j]);
            self.result_bytes.push(old.result_bytes[j]);
            self.link_end.push(self.links.len());
            self.open_from.push(open_from);
            self.total += old.tokens[j];
            j += 1;
        }
        true
    }
}

/// FxHash (rustc's): tool-call ids are short and many, and SipHash dominated a cold build.
/// Not collision-resistant; the ids come from the provider and keel, not from an adversary.
#[derive(Debug, Default, Clone, Copy)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0xf135_7aea_2e62_a9c5;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K);
        }
        let mut w = [0u8; 8];
        let rest = chunks.remainder();
        w[..rest.len()].copy_from_slice(rest);
        self.0 =
            (self.0.rotate_left(5) ^ u64::from_le_bytes(w) ^ rest.len() as u64).wrapping_mul(K);
    }

    fn write_u8(&mut self, i: u8) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(i)).wrapping_mul(0xf135_7aea_2e62_a9c5);
    }

    fn finish(&self) -> u64 {
        // The multiply leaves the low bits weak; hashbrown uses the top 7 bits and low bits.
        self.0.rotate_left(26)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::prune::{PruneRules, pruned_result};
    use keel_protocol::{
        AssistantChunk, AssistantMessageEvent, Message, MessageSource, SessionHeader, SessionId,
        StreamChunk, TokenUsage, ToolCallBlock, ToolResultBlock, ToolResultEvent,
    };
    use pretty_assertions::assert_eq;

    /// What the index says, node by node, plus the cuts.
    #[derive(Debug, PartialEq)]
    struct Seen {
        seqs: Vec<Seq>,
        tokens: Vec<u64>,
        flags: Vec<(bool, bool, u64)>,
        usage: Option<usize>,
        total: u64,
        balanced: Vec<bool>,
    }

    fn seen(index: &SurfaceIndex) -> Seen {
        Seen {
            seqs: index.seqs().to_vec(),
            tokens: index.node_tokens().to_vec(),
            flags: (0..index.len())
                .map(|p| {
                    let replacement = index.is_replacement(p);
                    (replacement, index.is_tool_result(p), index.result_bytes(p))
                })
                .collect(),
            usage: index.last_with_usage(),
            total: index.tokens(),
            balanced: index.balanced_cuts(),
        }
    }

    /// The cuts as the per-message pairing computes them (call id → last call position).
    fn reference_cuts(session: &Session) -> Vec<bool> {
        let nodes = session.surface().nodes();
        let n = nodes.len();
        let mut calls: HashMap<String, usize> = HashMap::new();
        let mut open = vec![0i64; n + 2];
        for (i, &seq) in nodes.iter().enumerate() {
            let Some(m) = session.surface_message(seq) else {
                continue;
            };
            for block in &m.content {
                match block {
                    ContentBlock::ToolCall(c) => {
                        calls.insert(c.id.clone(), i);
                    }
                    ContentBlock::ToolResult(r) => {
                        if let Some(&c) = calls.get(&r.tool_call_id)
                            && c < i
                        {
                            open[c + 1] += 1;
                            open[i + 1] -= 1;
                        }
                    }
                    _ => {}
                }
            }
        }
        let mut sum = 0;
        (0..=n)
            .map(|k| {
                sum += open[k];
                sum == 0
            })
            .collect()
    }

    fn assistant(turn: u32, content: Vec<ContentBlock>, usage: bool) -> EventBody {
        EventBody::AssistantMessage(Box::new(AssistantMessageEvent {
            turn: keel_protocol::TurnNo(turn),
            step: keel_protocol::StepNo(1),
            message: Message {
                role: Role::Assistant,
                content,
                source: MessageSource::model("p", "m"),
                id: format!("a{turn}"),
            },
            usage: usage.then_some(TokenUsage {
                input_tokens: 100,
                ..TokenUsage::default()
            }),
            finish: None,
            interrupted: false,
        }))
    }

    fn call(id: &str) -> ContentBlock {
        ContentBlock::ToolCall(ToolCallBlock {
            id: id.into(),
            name: "read".into(),
            arguments: "{}".into(),
        })
    }

    fn result(turn: u32, id: &str, bytes: usize) -> EventBody {
        EventBody::ToolResult(Box::new(ToolResultEvent {
            turn: keel_protocol::TurnNo(turn),
            step: keel_protocol::StepNo(1),
            message: Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult(ToolResultBlock {
                    tool_call_id: id.into(),
                    content: vec![ContentBlock::text("y".repeat(bytes))],
                    is_error: false,
                })],
                source: MessageSource::tool(id),
                id: format!("r-{id}"),
            },
            meta: None,
        }))
    }

    fn chunk(turn: u32) -> EventBody {
        EventBody::AssistantChunk(Box::new(AssistantChunk {
            turn: keel_protocol::TurnNo(turn),
            step: keel_protocol::StepNo(1),
            chunk: StreamChunk::TextDelta {
                index: 0,
                text: "delta".into(),
            },
        }))
    }

    /// A turn: prompt, streamed call (chunks) with two results, a reused call id, an answer.
    fn turn(s: &mut Session, index: &mut SurfaceIndex, t: u32) {
        let append = |s: &mut Session, body| {
            s.push_surface(body, SurfaceOp::Append, Vec::new()).unwrap();
        };
        let prompt = Message::user_text(format!("turn {t}"), MessageSource::user(), "u");
        append(s, EventBody::UserMessage(Box::new(prompt)));
        index.sync(s);
        for _ in 0..3 {
            s.push(chunk(t)).unwrap();
        }
        let (a, b) = (format!("c{t}a"), format!("c{t}b"));
        append(
            s,
            assistant(
                t,
                vec![call(&a), call(&b), call("same")],
                t.is_multiple_of(3),
            ),
        );
        append(
            s,
            result(t, &a, if t.is_multiple_of(2) { 9000 } else { 100 }),
        );
        append(s, result(t, &b, 50));
        append(s, result(t, "same", 10));
        index.sync(s);
        append(s, assistant(t, vec![ContentBlock::text("")], false));
        append(s, assistant(t, vec![ContentBlock::text("done")], false));
    }

    #[test]
    fn incremental_and_merged_syncs_match_a_cold_build_and_the_message_pairing() {
        let mut s = Session::new(SessionHeader::new(SessionId("t".into()), 0, None));
        let mut index = SurfaceIndex::default();
        for t in 1..=12 {
            turn(&mut s, &mut index, t);
        }
        index.sync(&s);
        assert_eq!(seen(&index), seen(&SurfaceIndex::of(&s)));
        assert_eq!(index.balanced_cuts(), reference_cuts(&s));
        assert_eq!(
            index.last_with_usage().map(|p| index.seqs()[p]),
            Some(Seq(114))
        );

        // Prune the big results (replaces scattered over the surface), then go on.
        let rules = PruneRules {
            over_raw_tokens: 1000,
            head_bytes: 100,
            tail_bytes: 100,
        };
        let targets: Vec<Seq> = (0..index.len())
            .filter(|&p| index.result_bytes(p) > 1000)
            .map(|p| index.seqs()[p])
            .collect();
        assert_eq!(targets.len(), 6);
        for seq in targets {
            let Some(EventBody::ToolResult(r)) = s.whole_event(seq).map(|e| &e.body) else {
                panic!("{seq:?}")
            };
            let new = pruned_result(r, rules).unwrap();
            let op = SurfaceOp::Replace {
                start: seq,
                end: seq,
            };
            s.push_surface(EventBody::ToolResult(Box::new(new)), op, vec![seq])
                .unwrap();
        }
        turn(&mut s, &mut index, 13);
        index.sync(&s);
        assert_eq!(seen(&index), seen(&SurfaceIndex::of(&s)));
        assert_eq!(index.balanced_cuts(), reference_cuts(&s));
        assert!((0..index.len()).any(|p| index.is_replacement(p)));

        // A summary replacing a prefix, a replaced call (its results lose their pairing), more.
        let nodes = s.surface().nodes().to_vec();
        let summary = Message::user_text("summary", MessageSource::user(), "s");
        let op = SurfaceOp::Replace {
            start: nodes[0],
            end: nodes[20],
        };
        s.push_surface(
            EventBody::UserMessage(Box::new(summary)),
            op,
            nodes[..=20].to_vec(),
        )
        .unwrap();
        let call_seq = s.surface().nodes()[5];
        let op = SurfaceOp::Replace {
            start: call_seq,
            end: call_seq,
        };
        s.push_surface(
            assistant(99, vec![call("other")], false),
            op,
            vec![call_seq],
        )
        .unwrap();
        index.sync(&s);
        turn(&mut s, &mut index, 14);
        index.sync(&s);
        assert_eq!(seen(&index), seen(&SurfaceIndex::of(&s)));
        assert_eq!(index.balanced_cuts(), reference_cuts(&s));
        assert!(index.balanced_cuts().contains(&false));

        // Another log under the same id: rebuilt, not merged.
        let mut other = Session::new(SessionHeader::new(SessionId("t".into()), 0, None));
        turn(&mut other, &mut SurfaceIndex::default(), 1);
        index.sync(&other);
        assert_eq!(seen(&index), seen(&SurfaceIndex::of(&other)));
    }

    #[test]
    fn the_marker_search_is_remembered() {
        let mut s = Session::new(SessionHeader::new(SessionId("t".into()), 0, None));
        let marked = format!("{}{}", "z".repeat(50), crate::compaction::prune::DSH_MARKER);
        let mut body = result(1, "c", 0);
        if let EventBody::ToolResult(r) = &mut body {
            r.message.content = vec![ContentBlock::ToolResult(ToolResultBlock {
                tool_call_id: "c".into(),
                content: vec![ContentBlock::text("a"), ContentBlock::text(marked)],
                is_error: false,
            })];
        }
        s.push_surface(body, SurfaceOp::Append, Vec::new()).unwrap();
        s.push_surface(result(1, "d", 10), SurfaceOp::Append, Vec::new())
            .unwrap();
        let mut index = SurfaceIndex::of(&s);
        assert!(index.carries_marker(0, &s));
        assert!(!index.carries_marker(1, &s));
        // Remembered: asked against an empty log, the answers stay.
        let empty = Session::new(SessionHeader::new(SessionId("t".into()), 0, None));
        assert!(index.carries_marker(0, &empty));
        assert!(!index.carries_marker(1, &empty));
    }
}
