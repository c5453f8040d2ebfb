//! Planning over the current surface: a [`SurfaceView`] with a precomputed raw token estimate
//! per node, and the choice of the span to summarise ([`summary_span`]).
//!
//! Everything here is pure and O(n) in the number of surface nodes: one pass builds the view,
//! one pass pairs tool calls with their results to find the cuts that split no call from its
//! results, one pass from the end sizes the tail.

use super::meter;
use keel_protocol::{ContentBlock, Message, Role, Seq, SessionEvent, SurfaceOp};
use keel_session::Session;
use std::collections::HashMap;

/// One current surface node.
#[derive(Debug, Clone, Copy)]
pub struct Node<'a> {
    /// Seq of the node's event.
    pub seq: Seq,
    /// The event (absent only if the log could not produce it whole, which keel never does
    /// for surface events).
    pub event: Option<&'a SessionEvent>,
    /// Raw token estimate of the message as sent (0 for an empty assistant message, which is
    /// not sent).
    pub tokens: u64,
}

impl<'a> Node<'a> {
    /// The node's message.
    pub fn message(&self) -> Option<&'a Message> {
        self.event.and_then(|e| e.body.surface_message())
    }

    /// True when the node's event replaced earlier nodes (a summary or a pruned result).
    pub fn is_replacement(&self) -> bool {
        matches!(
            self.event.and_then(|e| e.surface_op),
            Some(SurfaceOp::Replace { .. })
        )
    }
}

/// The current surface, node by node, with raw token estimates.
#[derive(Debug, Clone, Default)]
pub struct SurfaceView<'a> {
    /// Nodes in surface order.
    pub nodes: Vec<Node<'a>>,
}

impl<'a> SurfaceView<'a> {
    /// The view of `session`'s current surface.
    pub fn of(session: &'a Session) -> SurfaceView<'a> {
        let nodes = session
            .surface()
            .nodes()
            .iter()
            .map(|&seq| {
                let event = match session.event(seq) {
                    Some(std::borrow::Cow::Borrowed(e)) => Some(e),
                    _ => None,
                };
                let tokens = event
                    .and_then(|e| e.body.surface_message())
                    .filter(|m| !(m.role == Role::Assistant && m.is_empty()))
                    .map(meter::message_tokens)
                    .unwrap_or(0);
                Node { seq, event, tokens }
            })
            .collect();
        SurfaceView { nodes }
    }

    /// Raw tokens of every node.
    pub fn tokens(&self) -> u64 {
        self.nodes.iter().map(|n| n.tokens).sum()
    }

    /// Position of the first node whose seq is at least `seq` (`len` when none).
    pub fn first_at_or_after(&self, seq: Seq) -> usize {
        self.nodes
            .iter()
            .position(|n| n.seq >= seq)
            .unwrap_or(self.nodes.len())
    }
}

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
pub fn summary_span(view: &SurfaceView<'_>, rules: SpanRules) -> Option<SummarySpan> {
    let nodes = &view.nodes;
    let n = nodes.len();
    if n < 2 {
        return None;
    }
    let balanced = balanced_cuts(nodes);
    // Smallest k whose tail nodes[k..] fits the budget.
    let mut tail = 0u64;
    let mut k0 = n;
    while k0 > 0 && tail + nodes[k0 - 1].tokens <= rules.tail_budget {
        tail += nodes[k0 - 1].tokens;
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
        start: nodes[0].seq,
        end: nodes[k - 1].seq,
        tokens: nodes[..k].iter().map(|n| n.tokens).sum(),
    })
}

/// `balanced[k]` for `k` in `0..=n`: true when cutting after `k` nodes splits no tool call
/// from its results.
fn balanced_cuts(nodes: &[Node<'_>]) -> Vec<bool> {
    let n = nodes.len();
    let mut calls: HashMap<&str, usize> = HashMap::new();
    // diff[k] counts call/result pairs (c, r) with c < k <= r.
    let mut diff = vec![0i64; n + 2];
    for (i, node) in nodes.iter().enumerate() {
        let Some(m) = node.message() else { continue };
        for block in &m.content {
            match block {
                ContentBlock::ToolCall(c) => {
                    calls.insert(c.id.as_str(), i);
                }
                ContentBlock::ToolResult(r) => {
                    if let Some(&c) = calls.get(r.tool_call_id.as_str())
                        && c < i
                    {
                        diff[c + 1] += 1;
                        diff[i + 1] -= 1;
                    }
                }
                _ => {}
            }
        }
    }
    let mut open = 0i64;
    (0..=n)
        .map(|k| {
            open += diff[k];
            open == 0
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{EventBody, MessageSource, ToolCallBlock, ToolResultBlock};

    fn ev(seq: u64, message: Message) -> SessionEvent {
        let body = match message.role {
            Role::Assistant => {
                EventBody::AssistantMessage(Box::new(keel_protocol::AssistantMessageEvent {
                    turn: 1,
                    step: 1,
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

    fn view(events: &[SessionEvent]) -> SurfaceView<'_> {
        SurfaceView {
            nodes: events
                .iter()
                .map(|e| Node {
                    seq: e.seq,
                    event: Some(e),
                    tokens: meter::message_tokens(e.body.surface_message().unwrap()),
                })
                .collect(),
        }
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
        let cuts = balanced_cuts(&v.nodes);
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
        let tail = v.nodes[6].tokens + 1;
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
        let tail: u64 = v.nodes[4..].iter().map(|n| n.tokens).sum();
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
