//! Rendering a projection: the items of a [`Basis`] whose source events are no longer on the
//! surface, as one text block, bounded.
//!
//! Blocks in order: the human's words, the approved plan, the open goal, the todo list, child
//! results, lineage. The whole text stays within the budget (256 KiB by default): a block that does not
//! fit in what is left is replaced by a line giving its size, its SHA-256 and the event to read.

use crate::basis::Basis;
use keel_protocol::{Seq, TodoStatus};
use serde::Serialize;
use std::collections::HashSet;

/// The default budget of a projection's text, in bytes.
pub const DEFAULT_BUDGET: usize = 256 * 1024;

/// What kind of boundary a projection answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BoundaryKind {
    /// A committed surface replacement (compaction, pruning) in this process.
    Replace,
    /// A replacement found on the surface when the session was loaded cold.
    Resume,
    /// The first request of a spawned subagent.
    Spawn,
    /// The first request of a forked subagent.
    Fork,
}

impl BoundaryKind {
    /// As written in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            BoundaryKind::Replace => "replace",
            BoundaryKind::Resume => "resume",
            BoundaryKind::Spawn => "spawn",
            BoundaryKind::Fork => "fork",
        }
    }

    /// Parse [`BoundaryKind::as_str`].
    pub fn parse(s: &str) -> Option<BoundaryKind> {
        Some(match s {
            "replace" => BoundaryKind::Replace,
            "resume" => BoundaryKind::Resume,
            "spawn" => BoundaryKind::Spawn,
            "fork" => BoundaryKind::Fork,
            _ => return None,
        })
    }

    /// True for the child boundaries.
    pub fn is_child(self) -> bool {
        matches!(self, BoundaryKind::Spawn | BoundaryKind::Fork)
    }
}

/// Where a session sits in its task.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lineage {
    /// The root session of the task.
    pub root: String,
    /// The parent, for a child.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// This session.
    pub current: String,
    /// A child's first message: (id, digest).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_message: Option<(String, String)>,
}

/// One rendered (or digested) item, as logged in `continuity/projection`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Item {
    /// `human`, `plan`, a carried state's key (`goal`), `todo`, `child` or `lineage`.
    pub kind: String,
    /// The source event (none for lineage).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// SHA-256 of the item's text.
    pub digest: String,
    /// True when the item was over the budget and only its digest was rendered.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub omitted: bool,
}

/// A rendered projection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The text to deliver; `None` when no item needs re-projecting.
    pub text: Option<String>,
    /// The items, in order.
    pub items: Vec<Item>,
}

impl Rendered {
    /// Bytes of the text.
    pub fn bytes(&self) -> usize {
        self.text.as_ref().map_or(0, String::len)
    }
}

/// What to render around the basis.
#[derive(Debug, Clone)]
pub struct Frame<'a> {
    /// The boundary.
    pub kind: BoundaryKind,
    /// Its seq (in the session the basis was folded from).
    pub boundary: Seq,
    /// The session the basis was folded from (named in "read event …" notes).
    pub source_session: &'a str,
    /// Lineage, rendered for children (and for any projection that renders something).
    pub lineage: &'a Lineage,
    /// Text budget in bytes.
    pub budget: usize,
}

struct Block {
    kind: String,
    seq: Option<Seq>,
    title: String,
    body: String,
    /// The item's digest when it has one of its own (a human message's anchor digest); else
    /// the SHA-256 of `body`.
    digest: Option<String>,
}

/// Render the items of `basis` whose sources are not in `on_surface`.
pub fn render(basis: &Basis, on_surface: &HashSet<Seq>, frame: &Frame<'_>) -> Rendered {
    let gone = |seq: Seq| !on_surface.contains(&seq);
    let mut blocks = Vec::new();
    for h in basis.humans.iter().filter(|h| gone(h.seq)) {
        blocks.push(Block {
            kind: "human".into(),
            seq: Some(h.seq),
            title: format!(
                "The human's own words (seq {}, message {}, sha256 {})",
                h.seq, h.id, h.digest
            ),
            body: h.text.clone(),
            digest: Some(h.digest.clone()),
        });
    }
    if let Some(p) = basis.plan.as_ref().filter(|p| gone(p.seq)) {
        blocks.push(Block {
            kind: "plan".into(),
            seq: Some(p.seq),
            title: format!("The approved plan (exit_plan_mode, result seq {})", p.seq),
            body: p.plan.clone(),
            digest: None,
        });
    }
    // Other plugins' state (the goal): its own events are never on the surface; it is
    // projected once its anchor (the goal's last round prompt) has left the surface, or when
    // it has none.
    for c in basis
        .carried
        .iter()
        .filter(|c| c.carry.anchor.is_none_or(&gone))
    {
        blocks.push(Block {
            kind: c.key.clone(),
            seq: Some(c.carry.seq),
            title: c.carry.title.clone(),
            body: c.carry.body.clone(),
            digest: None,
        });
    }
    if let Some(t) = basis.todo.as_ref().filter(|t| t.result.is_none_or(&gone)) {
        let mut body = String::new();
        for item in &t.items {
            let mark = match item.status {
                TodoStatus::Completed => "[x]",
                TodoStatus::InProgress => "[~]",
                TodoStatus::Pending => "[ ]",
            };
            body.push_str(&format!("- {mark} {}\n", item.content));
        }
        if t.items.is_empty() {
            body.push_str("(empty)\n");
        }
        blocks.push(Block {
            kind: "todo".into(),
            seq: Some(t.seq),
            title: format!(
                "The todo list of the current turn (todo/write seq {})",
                t.seq
            ),
            body: body.trim_end().to_owned(),
            digest: None,
        });
    }
    for c in basis.children.iter().filter(|c| gone(c.seq)) {
        blocks.push(Block {
            kind: "child".into(),
            seq: Some(c.seq),
            title: format!(
                "A subagent's result (result seq {}{}, prompt sha256 {}, result sha256 {})",
                c.seq,
                c.child_session
                    .as_deref()
                    .map(|s| format!(", child session {s}"))
                    .unwrap_or_default(),
                c.prompt_digest,
                c.result_digest
            ),
            body: c.text.clone(),
            digest: None,
        });
    }
    if blocks.is_empty() && !frame.kind.is_child() {
        return Rendered {
            text: None,
            items: Vec::new(),
        };
    }
    let l = frame.lineage;
    let mut lineage = format!("root session {}", l.root);
    if let Some(p) = &l.parent {
        lineage.push_str(&format!("; parent session {p}"));
    }
    lineage.push_str(&format!("; this session {}", l.current));
    if let Some((id, digest)) = &l.first_message {
        lineage.push_str(&format!("; first message {id} (sha256 {digest})"));
    }
    blocks.push(Block {
        kind: "lineage".into(),
        seq: None,
        title: "Lineage".to_owned(),
        body: lineage,
        digest: None,
    });

    let mut text = format!(
        "Continuity ({}, boundary seq {}): these items are no longer in the visible history. \
         They are the task's basis: the human's exact words and what was agreed take precedence \
         over any summary.",
        frame.kind.as_str(),
        frame.boundary
    );
    let mut items = Vec::new();
    // Room kept for the closing line when notes themselves no longer fit.
    const CLOSING: usize = 160;
    let mut unlisted = 0usize;
    for b in blocks {
        let digest = b
            .digest
            .clone()
            .unwrap_or_else(|| keel_jcs::digest::sha256_hex(b.body.as_bytes()));
        let full = format!("\n\n## {}\n{}", b.title, b.body);
        let omitted = text.len() + full.len() + CLOSING > frame.budget;
        if omitted {
            let read = b
                .seq
                .map(|s| format!("; read event seq {s} of session {}", frame.source_session))
                .unwrap_or_default();
            let note = format!(
                "\n\n## {}\n({} bytes, over the continuity budget; sha256 {digest}{read})",
                b.title,
                b.body.len()
            );
            if text.len() + note.len() + CLOSING > frame.budget {
                unlisted += 1;
            } else {
                text.push_str(&note);
            }
        } else {
            text.push_str(&full);
        }
        items.push(Item {
            kind: b.kind,
            seq: b.seq.map(|s| s.0),
            digest,
            omitted,
        });
    }
    if unlisted > 0 {
        text.push_str(&format!(
            "\n\n({unlisted} more items over the continuity budget; their digests and seqs are in this session's continuity/projection event)"
        ));
    }
    Rendered {
        text: Some(text),
        items,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::basis::{Basis, Human};

    fn basis(texts: &[&str]) -> Basis {
        Basis {
            upto: Seq(100),
            humans: texts
                .iter()
                .enumerate()
                .map(|(i, t)| Human {
                    seq: Seq(i as u64 + 1),
                    id: format!("m-{i}"),
                    digest: crate::anchors::text_digest(t),
                    text: (*t).to_owned(),
                })
                .collect(),
            plan: None,
            todo: None,
            children: Vec::new(),
            carried: Vec::new(),
        }
    }

    fn frame(budget: usize, lineage: &Lineage) -> Frame<'_> {
        Frame {
            kind: BoundaryKind::Replace,
            boundary: Seq(50),
            source_session: "s",
            lineage,
            budget,
        }
    }

    #[test]
    fn only_items_off_the_surface_are_rendered_and_nothing_when_all_are_on_it() {
        let lineage = Lineage::default();
        let b = basis(&["first", "second"]);
        let on: HashSet<Seq> = [Seq(2)].into();
        let r = render(&b, &on, &frame(DEFAULT_BUDGET, &lineage));
        let text = r.text.unwrap();
        assert!(text.contains("first") && !text.contains("\nsecond"));
        assert_eq!(
            r.items.iter().map(|i| i.kind.as_str()).collect::<Vec<_>>(),
            ["human", "lineage"]
        );
        let all: HashSet<Seq> = [Seq(1), Seq(2)].into();
        let r = render(&b, &all, &frame(DEFAULT_BUDGET, &lineage));
        assert_eq!(r.text, None);
        assert!(r.items.is_empty());
    }

    #[test]
    fn an_open_goal_is_projected_with_its_round() {
        let lineage = Lineage::default();
        let mut b = basis(&["first"]);
        b.carried = vec![crate::basis::Carried {
            key: "goal".into(),
            carry: keel_protocol::present::Carry {
                title: "The session's goal (goal g1, revision 2, active, round 3 of 20; goal/set seq 7)".into(),
                body: "make the tests pass".into(),
                seq: Seq(7),
                anchor: Some(Seq(5)),
            },
        }];
        let on: HashSet<Seq> = [Seq(1)].into();
        let r = render(&b, &on, &frame(DEFAULT_BUDGET, &lineage));
        let text = r.text.unwrap();
        assert!(
            text.contains(
                "## The session's goal (goal g1, revision 2, active, round 3 of 20; goal/set seq 7)\nmake the tests pass"
            ),
            "{text}"
        );
        assert_eq!(
            r.items.iter().map(|i| i.kind.as_str()).collect::<Vec<_>>(),
            ["goal", "lineage"]
        );
        // While its last round prompt is still on the surface, the model sees the goal.
        let both: HashSet<Seq> = [Seq(1), Seq(5)].into();
        assert_eq!(
            render(&b, &both, &frame(DEFAULT_BUDGET, &lineage)).text,
            None
        );
    }

    #[test]
    fn an_over_budget_block_becomes_its_digest_and_the_event_to_read() {
        let lineage = Lineage::default();
        let big = "x".repeat(10_000);
        let b = basis(&["small words", &big]);
        let r = render(&b, &HashSet::new(), &frame(2_000, &lineage));
        let text = r.text.unwrap();
        assert!(text.len() <= 2_000, "{}", text.len());
        assert!(text.contains("small words"));
        assert!(!text.contains(&big));
        assert!(text.contains(&b.humans[1].digest));
        assert!(text.contains("read event seq 2 of session s"), "{text}");
        assert!(r.items[1].omitted && !r.items[0].omitted);
    }

    #[test]
    fn many_items_stay_within_the_budget() {
        let lineage = Lineage::default();
        let words: Vec<String> = (0..2_000)
            .map(|i| format!("message {i} {}", "y".repeat(300)))
            .collect();
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        let b = basis(&refs);
        let r = render(&b, &HashSet::new(), &frame(DEFAULT_BUDGET, &lineage));
        let text = r.text.unwrap();
        assert!(text.len() <= DEFAULT_BUDGET, "{}", text.len());
        assert!(text.contains("more items over the continuity budget"));
        assert_eq!(r.items.len(), 2_001);
    }
}
