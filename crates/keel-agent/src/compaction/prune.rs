//! The tool-result pruner: oversized surface `tool/result`s are replaced by a copy keeping the
//! head and tail of their text around a marker.
//!
//! [`prune_plan`] picks the results to prune (O(n) over a [`SurfaceView`]); [`pruned_result`]
//! builds the replacing event, identical to the original except for the result's text (same
//! turn, step, message id, role, source, `toolCallId`, `isError`, meta), which is what
//! `keel-session` accepts as a replacing `tool/result`. The engine logs `compaction/prune` and
//! then the replacement with `surfaceOp: {op: replace, start: seq, end: seq}`, as dsh does.
//!
//! Idempotent: a node that is itself a replacement, or whose text already carries a pruning
//! marker (keel's or dsh's), is never pruned again.

use super::plan::SurfaceView;
use keel_protocol::{ContentBlock, EventBody, Seq, ToolResultEvent};

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

/// The surface `tool/result`s to prune, in surface order.
pub fn prune_plan(view: &SurfaceView<'_>, rules: PruneRules) -> Vec<PruneTarget> {
    view.nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.tokens > rules.over_raw_tokens && !n.is_replacement())
        .filter_map(|(position, n)| {
            let EventBody::ToolResult(r) = &n.event?.body else {
                return None;
            };
            prunable(r, rules).then_some(PruneTarget {
                position,
                seq: n.seq,
                tokens: n.tokens,
            })
        })
        .collect()
}

fn prunable(r: &ToolResultEvent, rules: PruneRules) -> bool {
    let mut bytes = 0usize;
    for block in r.message.tool_results().flat_map(|b| &b.content) {
        if let ContentBlock::Text { text } = block {
            if is_pruned(text) {
                return false;
            }
            bytes += text.len();
        }
    }
    bytes > rules.head_bytes + rules.tail_bytes + 64
}

/// True when `text` carries a pruning marker (keel's or dsh's).
pub fn is_pruned(text: &str) -> bool {
    text.contains(MARKER_SUFFIX) || text.contains(DSH_MARKER)
}

/// `text` cut to its head and tail around a marker naming the bytes removed; `None` when
/// cutting would not make it shorter.
pub fn prune_text(text: &str, head_bytes: usize, tail_bytes: usize) -> Option<String> {
    let head_end = floor_boundary(text, head_bytes.min(text.len()));
    let tail_start = ceil_boundary(text, text.len().saturating_sub(tail_bytes).max(head_end));
    let removed = tail_start - head_end;
    let marker = format!("\n[... {removed}{MARKER_SUFFIX}\n");
    if removed <= marker.len() {
        return None;
    }
    let mut out = String::with_capacity(head_end + marker.len() + text.len() - tail_start);
    out.push_str(&text[..head_end]);
    out.push_str(&marker);
    out.push_str(&text[tail_start..]);
    Some(out)
}

/// The replacing event for `original`: its result texts pruned (all text blocks of a result
/// are joined first; other blocks are kept after the text). `None` when nothing would shrink.
pub fn pruned_result(original: &ToolResultEvent, rules: PruneRules) -> Option<ToolResultEvent> {
    let mut out = original.clone();
    let mut changed = false;
    for block in &mut out.message.content {
        let ContentBlock::ToolResult(r) = block else {
            continue;
        };
        let text = r.text();
        let Some(cut) = prune_text(&text, rules.head_bytes, rules.tail_bytes) else {
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

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
