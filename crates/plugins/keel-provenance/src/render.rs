//! Renderers of a [`TraceResult`] for `keel trace TARGET --format text|json|dot`. They show only
//! what the answer holds (the allow-listed fields), so they cannot leak payloads either.

use crate::query::{NodeView, TraceResult};
use std::fmt::Write;

/// Output format of `keel trace`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceFormat {
    /// Indented human-readable lines.
    Text,
    /// The answer as pretty JSON (the same shape the `trace` tool returns).
    Json,
    /// Graphviz DOT.
    Dot,
}

/// Render in `format`.
pub fn render(result: &TraceResult, format: TraceFormat) -> String {
    match format {
        TraceFormat::Text => render_text(result),
        TraceFormat::Json => render_json(result),
        TraceFormat::Dot => render_dot(result),
    }
}

/// `kind_0123456789ab`: a node id shortened for display.
pub fn short_id(id: &str) -> &str {
    match id.find('_') {
        Some(p) => id.get(..(p + 13).min(id.len())).unwrap_or(id),
        None => id,
    }
}

/// The third line of a node's label in every picture of a trace (DOT, SVG): its stage,
/// transform, relation role and category, those it has, space-separated.
pub fn describe(n: &NodeView) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for v in [
        n.stage.as_deref(),
        n.transform.as_deref(),
        n.relation_role.as_deref(),
        n.category.as_deref(),
    ]
    .into_iter()
    .flatten()
    {
        parts.push(v);
    }
    parts.join(" ")
}

/// Text: a header line, then one line per node of the formation path, indented by depth.
pub fn render_text(result: &TraceResult) -> String {
    let mut out = String::new();
    let dir = match result.direction {
        crate::query::Direction::Backward => "backward",
        crate::query::Direction::Forward => "forward",
    };
    let _ = writeln!(
        out,
        "trace {} ({dir}, {} nodes, {} edges{}{})",
        result.target,
        result.nodes.len(),
        result.edges.len(),
        if result.truncated {
            ", truncated at max_depth"
        } else {
            ""
        },
        if result.complete {
            ""
        } else {
            ", INCOMPLETE: reached a session outside scope"
        },
    );
    for (step, node) in result.formation_path.iter().zip(&result.nodes) {
        let indent = "  ".repeat(step.depth.min(64) as usize);
        let _ = writeln!(
            out,
            "{indent}[{}] {:<11} {}  {}",
            step.depth,
            node.kind,
            short_id(&node.id),
            describe(node)
        );
    }
    out
}

/// JSON: the answer, pretty-printed.
pub fn render_json(result: &TraceResult) -> String {
    serde_json::to_string_pretty(result).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// DOT: one box per node (kind, short id, stage/transform/category), one arrow per edge.
pub fn render_dot(result: &TraceResult) -> String {
    let mut out = String::from(
        "digraph provenance {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n",
    );
    for n in &result.nodes {
        let shape = match &*n.kind {
            "occurrence" => "box",
            "fact" => "ellipse",
            "disposition" => "octagon",
            "source" => "house",
            _ => "box, style=rounded",
        };
        let label = format!("{}\n{}\n{}", n.kind, short_id(&n.id), describe(n));
        let _ = writeln!(
            out,
            "  \"{}\" [shape={shape}, label=\"{}\"];",
            dot_escape(&n.id),
            dot_escape(&label)
        );
    }
    for e in &result.edges {
        let _ = writeln!(
            out,
            "  \"{}\" -> \"{}\" [label=\"{}\"];",
            dot_escape(&e.from),
            dot_escape(&e.to),
            dot_escape(&e.kind)
        );
    }
    out.push_str("}\n");
    out
}
