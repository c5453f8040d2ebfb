//! Choosing the span to summarise ([`summary_span`]) over a [`SurfaceIndex`] of the current
//! surface.
//!
//! Everything here is pure and O(n) over the index's arrays (no event is looked up): one pass
//! from the end finds the cuts that split no tool call from its results (the pairing is kept by
//! the index), one pass from the end sizes the tail.

pub use super::index::SurfaceIndex;
use keel_protocol::Seq;

/// The span of surface nodes to summarise: always a prefix of the surface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummarySpan {
    /// Number of nodes in the prefix (positions `0..len`).
    pub len: usize,
    /// Seq of the first shadowed node.
    pub start: Seq,
    /// Seq of the last shadowed node.
    pub end: Seq,
    /// Raw tokens of the prefix.
    pub tokens: u64,
}

/// How to choose the span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanRules {
    /// Raw-token budget of the recent tail to keep (0: keep only the last balanced group).
    pub tail_budget: u64,
    /// Nodes at or after this position are never summarised (the open step's own nodes).
    pub protect_from: usize,
    /// Fewest nodes worth summarising.
    pub min_nodes: usize,
}

/// Choose the oldest balanced prefix to summarise, or `None` when no prefix of at least
/// `min_nodes` nodes can be cut.
///
/// A cut after `k` nodes is *balanced* when no assistant tool call in the prefix has a result
/// in the tail. The chosen cut is the smallest balanced one whose tail fits `tail_budget`;
/// failing that, the largest balanced cut (a bigger tail, never a split group). The tail is
/// never empty and never starts before `protect_from`.
pub fn summary_span(index: &SurfaceIndex, rules: SpanRules) -> Option<SummarySpan> {
    let tokens = index.node_tokens();
    let seqs = index.seqs();
    let n = tokens.len();
    if n < 2 {
        return None;
    }
    let balanced = index.balanced_cuts();
    // Smallest k whose tail nodes[k..] fits the budget.
    let mut tail = 0u64;
    let mut k0 = n;
    while k0 > 0 && tail + tokens[k0 - 1] <= rules.tail_budget {
        tail += tokens[k0 - 1];
        k0 -= 1;
    }
    let k_max = rules.protect_from.min(n - 1);
    let within = (k0.max(1)..=k_max).find(|&k| balanced[k]);
    let k = within.or_else(|| (1..=k_max).rev().find(|&k| balanced[k]))?;
    if k < rules.min_nodes.max(1) {
        return None;
    }
    Some(SummarySpan {
        len: k,
        start: seqs[0],
        end: seqs[k - 1],
        tokens: tokens[..k].iter().sum(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{
        ContentBlock, EventBody, Message, MessageSource, Role, SessionEvent, SurfaceOp,
        ToolCallBlock, ToolResultBlock,
    };

    fn ev(seq: u64, message: Message) -> SessionEvent {
        let body = match message.role {
            Role::Assistant => {
                EventBody::AssistantMessage(Box::new(keel_protocol::AssistantMessageEvent {
                    turn: keel_protocol::TurnNo(1),
                    step: keel_protocol::StepNo(1),
                    message,
                    usage: None,
                    finish: None,
                    interrupted: false,
                }))
            }
            Role::User => EventBody::UserMessage(Box::new(message)),
        };
        let mut e = SessionEvent::new(Seq(seq), 0, body);
        e.surface_op = Some(SurfaceOp::Append);
        e
    }

    fn user(t: &str) -> Message {
        Message::user_text(t, MessageSource::user(), t)
    }

    fn call(id: &str) -> Message {
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolCall(ToolCallBlock {
                id: id.into(),
                name: "read".into(),
                arguments: "{}".into(),
            })],
            source: MessageSource::model("p", "m"),
            id: format!("a-{id}"),
        }
    }

    fn result(id: &str) -> Message {
        Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(ToolResultBlock {
                tool_call_id: id.into(),
                content: vec![ContentBlock::text("x".repeat(40))],
                is_error: false,
            })],
            source: MessageSource::tool(id),
            id: format!("r-{id}"),
        }
    }

    fn view(events: &[SessionEvent]) -> SurfaceIndex {
        SurfaceIndex::of_events(events)
    }

    #[test]
    fn never_splits_a_call_from_its_results() {
        // 0 user, 1 call(a,b) 2 result a, 3 result b, 4 user, 5 call c, 6 result c
        let mut two = call("a");
        two.content.extend(call("b").content);
        let events = vec![
            ev(0, user("first")),
            ev(1, two),
            ev(2, result("a")),
            ev(3, result("b")),
            ev(4, user("second")),
            ev(5, call("c")),
            ev(6, result("c")),
        ];
        let v = view(&events);
        let cuts = v.balanced_cuts();
        assert_eq!(
            cuts,
            vec![true, true, false, false, true, true, false, true]
        );
        // Budget 0: the minimal tail is the last group (5, 6).
        let rules = SpanRules {
            tail_budget: 0,
            protect_from: usize::MAX,
            min_nodes: 2,
        };
        let span = summary_span(&v, rules).unwrap();
        assert_eq!((span.len, span.start, span.end), (5, Seq(0), Seq(4)));
        // A tail budget covering the result of c and part of its call still cuts before 5.
        let tail = v.node_tokens()[6] + 1;
        let span = summary_span(
            &v,
            SpanRules {
                tail_budget: tail,
                ..rules
            },
        )
        .unwrap();
        assert_eq!(span.len, 5);
        // Budget fitting 4..=6: cut at 4.
        let tail: u64 = v.node_tokens()[4..].iter().sum();
        let span = summary_span(
            &v,
            SpanRules {
                tail_budget: tail,
                ..rules
            },
        )
        .unwrap();
        assert_eq!(span.len, 4);
        // Protecting from 2 only allows the cut at 1, below min_nodes.
        assert_eq!(
            summary_span(
                &v,
                SpanRules {
                    protect_from: 2,
                    ..rules
                }
            ),
            None
        );
        let span = summary_span(
            &v,
            SpanRules {
                protect_from: 2,
                min_nodes: 1,
                ..rules
            },
        );
        assert_eq!(span.map(|s| s.len), Some(1));
    }
}
