//! The tool-result pruner: oversized surface `tool/result`s are replaced by a copy keeping the
//! head and tail of their text around a marker.
//!
//! [`prune_plan`] picks the results to prune (O(n) over a [`SurfaceIndex`]'s arrays; a result's
//! text is searched for a marker only once it is a candidate, and only once per index);
//! [`pruned_result`] builds the replacing event, identical to the original except for the
//! result's text (same turn, step, message id, role, source, `toolCallId`, `isError`, meta),
//! which is what `keel-session` accepts as a replacing `tool/result`. It copies only the kept
//! head and tail of the text, never the whole result. The engine logs `compaction/prune` and
//! then the replacement with `surfaceOp: {op: replace, start: seq, end: seq}`, as dsh does.
//!
//! Idempotent: a node that is itself a replacement, or whose text already carries a pruning
//! marker (keel's or dsh's), is never pruned again.

use super::index::SurfaceIndex;
use keel_protocol::{ContentBlock, Message, Seq, ToolResultBlock, ToolResultEvent};
use keel_session::Session;
use std::borrow::Cow;

/// The marker keel writes, without the byte count: `[... N bytes pruned by compaction ...]`.
pub const MARKER_SUFFIX: &str = " bytes pruned by compaction ...]";
/// The marker dsh writes.
pub const DSH_MARKER: &str = "[... tool result middle pruned ...]";

/// What to keep of a pruned result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PruneRules {
    /// Prune results whose raw estimate exceeds this.
    pub over_raw_tokens: u64,
    /// Bytes kept from the start (cut back to a character boundary).
    pub head_bytes: usize,
    /// Bytes kept from the end (cut forward to a character boundary).
    pub tail_bytes: usize,
}

/// One result to prune.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PruneTarget {
    /// Position on the surface.
    pub position: usize,
    /// Seq of the result.
    pub seq: Seq,
    /// Its raw token estimate.
    pub tokens: u64,
}

/// The surface `tool/result`s to prune, in surface order. `session` is the log `index` was
/// last synced with (read only for the marker search of new candidates).
pub fn prune_plan(
    index: &mut SurfaceIndex,
    session: &Session,
    rules: PruneRules,
) -> Vec<PruneTarget> {
    let min_bytes = rules
        .head_bytes
        .saturating_add(rules.tail_bytes)
        .saturating_add(64) as u64;
    let candidates = index.prune_candidates(rules.over_raw_tokens, min_bytes);
    let mut targets = Vec::with_capacity(candidates.len());
    for position in candidates {
        if !index.carries_marker(position, session) {
            targets.push(PruneTarget {
                position,
                seq: index.seqs()[position],
                tokens: index.node_tokens()[position],
            });
        }
    }
    targets
}

/// True when `text` carries a pruning marker (keel's or dsh's).
pub fn is_pruned(text: &str) -> bool {
    // Both markers end with `...]`, rare in other text and found by the standard library's
    // vectorised search (the 35-byte dsh marker is not): one fast pass over most texts.
    text.contains(MARKERS_END) && (text.contains(MARKER_SUFFIX) || text.contains(DSH_MARKER))
}

/// What precedes the byte count in keel's marker line.
const MARKER_START: &str = "\n[... ";

/// How both markers end.
const MARKERS_END: &str = "...]";

/// `text` cut to its head and tail around a marker naming the bytes removed; `None` when
/// cutting would not make it shorter.
pub fn prune_text(text: &str, head_bytes: usize, tail_bytes: usize) -> Option<String> {
    let head_end = text.floor_char_boundary(head_bytes);
    let tail_start = text.ceil_char_boundary(text.len().saturating_sub(tail_bytes).max(head_end));
    let removed = tail_start - head_end;
    let count = removed.to_string();
    let marker_len = MARKER_START.len() + count.len() + MARKER_SUFFIX.len() + 1;
    if removed <= marker_len {
        return None;
    }
    let mut out = String::with_capacity(head_end + marker_len + text.len() - tail_start);
    out.push_str(&text[..head_end]);
    out.push_str(MARKER_START);
    out.push_str(&count);
    out.push_str(MARKER_SUFFIX);
    out.push('\n');
    out.push_str(&text[tail_start..]);
    Some(out)
}

/// The replacing event for `original`: its result texts pruned (all text blocks of a result
/// are joined first; other blocks are kept after the text). `None` when nothing would shrink.
pub fn pruned_result(original: &ToolResultEvent, rules: PruneRules) -> Option<ToolResultEvent> {
    let cuts: Vec<Option<ToolResultBlock>> = original
        .message
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::ToolResult(r) => pruned_block(r, rules),
            _ => None,
        })
        .collect();
    if cuts.iter().all(Option::is_none) {
        return None;
    }
    let content = original
        .message
        .content
        .iter()
        .zip(cuts)
        .map(|(block, cut)| cut.map_or_else(|| block.clone(), ContentBlock::ToolResult))
        .collect();
    let m = &original.message;
    Some(ToolResultEvent {
        turn: original.turn,
        step: original.step,
        message: Message {
            role: m.role,
            content,
            source: m.source.clone(),
            id: m.id.clone(),
        },
        meta: original.meta.clone(),
    })
}

/// `r` with its text pruned, or `None` when that would not shrink it.
fn pruned_block(r: &ToolResultBlock, rules: PruneRules) -> Option<ToolResultBlock> {
    let mut texts = r.content.iter().filter_map(|b| match b {
        ContentBlock::Text { text } => Some(text.as_str()),
        _ => None,
    });
    let text = match (texts.next(), texts.next()) {
        (Some(only), None) => Cow::Borrowed(only),
        _ => Cow::Owned(r.text()),
    };
    let cut = prune_text(&text, rules.head_bytes, rules.tail_bytes)?;
    let mut content = vec![ContentBlock::text(cut)];
    content.extend(
        r.content
            .iter()
            .filter(|b| !matches!(b, ContentBlock::Text { .. }))
            .cloned(),
    );
    Some(ToolResultBlock {
        tool_call_id: r.tool_call_id.clone(),
        content,
        is_error: r.is_error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{ImageRef, MessageSource, Role};
    use pretty_assertions::assert_eq;

    /// The replacement as a clone of the whole event with its texts cut.
    fn cloned_and_cut(original: &ToolResultEvent, rules: PruneRules) -> Option<ToolResultEvent> {
        let mut out = original.clone();
        let mut changed = false;
        for block in &mut out.message.content {
            let ContentBlock::ToolResult(r) = block else {
                continue;
            };
            let Some(cut) = prune_text(&r.text(), rules.head_bytes, rules.tail_bytes) else {
                continue;
            };
            let mut content = vec![ContentBlock::text(cut)];
            content.extend(
                r.content
                    .drain(..)
                    .filter(|b| !matches!(b, ContentBlock::Text { .. })),
            );
            r.content = content;
            changed = true;
        }
        changed.then_some(out)
    }

    #[test]
    fn the_replacement_is_the_original_with_its_texts_cut() {
        let image = ContentBlock::Image(ImageRef {
            uri: "a.png".into(),
            media_type: None,
        });
        let block = |id: &str, content: Vec<ContentBlock>| {
            ContentBlock::ToolResult(ToolResultBlock {
                tool_call_id: id.into(),
                content,
                is_error: id == "b",
            })
        };
        let original = ToolResultEvent {
            turn: keel_protocol::TurnNo(3),
            step: keel_protocol::StepNo(2),
            message: Message {
                role: Role::User,
                content: vec![
                    block("a", vec![ContentBlock::text("é".repeat(300))]),
                    block(
                        "b",
                        vec![
                            ContentBlock::text("x".repeat(200)),
                            image,
                            ContentBlock::text("y".repeat(200)),
                        ],
                    ),
                    block("c", vec![ContentBlock::text("short")]),
                    ContentBlock::text("after"),
                ],
                source: MessageSource::tool("a"),
                id: "r".into(),
            },
            meta: Some(serde_json::json!({"exit": 0})),
        };
        let rules = PruneRules {
            over_raw_tokens: 0,
            head_bytes: 51,
            tail_bytes: 49,
        };
        let new = pruned_result(&original, rules);
        assert!(new.is_some());
        assert_eq!(new, cloned_and_cut(&original, rules));
        let small = PruneRules {
            head_bytes: 4096,
            ..rules
        };
        assert_eq!(pruned_result(&original, small), None);
    }

    #[test]
    fn keeps_head_and_tail_on_char_boundaries() {
        let text = format!("{}{}{}", "h".repeat(10), "é".repeat(100), "t".repeat(10));
        let cut = prune_text(&text, 11, 11).unwrap();
        assert!(cut.starts_with("hhhhhhhhhh\n[... "), "{cut}");
        // Byte 209 is inside an `é`: the tail starts at the next boundary.
        assert!(
            cut.ends_with(" bytes pruned by compaction ...]\ntttttttttt"),
            "{cut}"
        );
        assert!(is_pruned(&cut));
        assert_eq!(prune_text("short", 4, 4), None);
        assert!(is_pruned("a\n\n[... tool result middle pruned ...]\n\nb"));
        assert!(MARKER_SUFFIX.ends_with(MARKERS_END) && DSH_MARKER.ends_with(MARKERS_END));
        assert!(!is_pruned("[... 12 bytes pruned by compaction"));
    }
}
