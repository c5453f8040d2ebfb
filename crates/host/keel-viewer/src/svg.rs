//! A `keel trace` answer drawn as SVG: the same nodes and edges as its DOT rendering
//! ([`keel_provenance::render::render_dot`]), with the same three label lines (kind, short id,
//! stage/transform/role/category) and the same shape per kind, laid out by [`crate::layout`]
//! top to bottom (formation flows down: the assistant message above, the tool result below).
//!
//! Every node is a `<g class="node" data-id="…" data-kind="…">` and every edge a
//! `<g class="edge" data-id="…" data-kind="…" data-from="…" data-to="…">`, so a reader of the
//! page (or a test) can match the picture against `keel trace --format json`. Styling is by
//! presentation attributes, so the standalone file looks the same outside the HTML page.

use crate::escape::{escaped, text};
use crate::layout::{MARGIN, Placed, layered};
use keel_provenance::query::{NodeView, TraceResult};
use keel_provenance::render::{describe, short_id};
use std::collections::HashMap;
use std::fmt::Write as _;

/// Approximate advance of one monospace character at [`FONT_SIZE`].
const CHAR_WIDTH: f64 = 6.7;
/// Label font size (px).
const FONT_SIZE: f64 = 11.0;
/// Line height of a label (px).
const LINE: f64 = 14.0;
/// Approximate advance of one character of an edge label (9 px).
const LABEL_CHAR_WIDTH: f64 = 5.5;
/// Horizontal padding inside a node.
const PAD: f64 = 14.0;

/// Fill colour of a node kind.
fn fill(kind: &str) -> &'static str {
    match kind {
        "occurrence" => "#dbeafe",
        "fact" => "#fef3c7",
        "outcome" => "#dcfce7",
        "origin" => "#f3e8ff",
        "disposition" => "#fee2e2",
        "source" => "#e5e7eb",
        _ => "#f8fafc",
    }
}

fn label_lines(n: &NodeView) -> [String; 3] {
    [n.kind.to_string(), short_id(&n.id).to_owned(), describe(n)]
}

fn size(lines: &[String; 3], kind: &str) -> (f64, f64) {
    let chars = lines.iter().map(|l| l.chars().count()).max().unwrap_or(0) as f64;
    let mut w = (chars * CHAR_WIDTH + 2.0 * PAD).max(96.0);
    let mut h = 3.0 * LINE + 12.0;
    match kind {
        // An ellipse needs room around the text's corners; an octagon a little.
        "fact" => {
            w *= 1.25;
            h += 12.0;
        }
        "disposition" | "source" => {
            w += 24.0;
            h += 8.0;
        }
        _ => {}
    }
    (w.round(), h)
}

/// The outline of a node of `kind` in box `p`, the DOT shape's counterpart.
fn shape(out: &mut String, kind: &str, p: &Placed, stroke: (&str, f64)) {
    let (color, sw) = stroke;
    let paint = format!(
        "fill=\"{}\" stroke=\"{color}\" stroke-width=\"{sw}\"",
        fill(kind)
    );
    let (x, y, w, h) = (p.x, p.y, p.w, p.h);
    let _ = match kind {
        "occurrence" => writeln!(
            out,
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" {paint}/>"
        ),
        "fact" => writeln!(
            out,
            "<ellipse cx=\"{:.1}\" cy=\"{:.1}\" rx=\"{:.1}\" ry=\"{:.1}\" {paint}/>",
            x + w / 2.0,
            y + h / 2.0,
            w / 2.0,
            h / 2.0
        ),
        "disposition" => {
            let c = 10.0_f64.min(h / 3.0);
            writeln!(
                out,
                "<polygon points=\"{:.1},{y:.1} {:.1},{y:.1} {:.1},{:.1} {:.1},{:.1} {:.1},{:.1} {:.1},{:.1} {x:.1},{:.1} {x:.1},{:.1}\" {paint}/>",
                x + c,
                x + w - c,
                x + w,
                y + c,
                x + w,
                y + h - c,
                x + w - c,
                y + h,
                x + c,
                y + h,
                y + h - c,
                y + c
            )
        }
        "source" => {
            let roof = 12.0;
            writeln!(
                out,
                "<polygon points=\"{:.1},{y:.1} {:.1},{:.1} {:.1},{:.1} {x:.1},{:.1} {x:.1},{:.1}\" {paint}/>",
                x + w / 2.0,
                x + w,
                y + roof,
                x + w,
                y + h,
                y + h,
                y + roof
            )
        }
        _ => writeln!(
            out,
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" rx=\"9\" {paint}/>"
        ),
    };
}

fn arrow_head(out: &mut String, from: (f64, f64), to: (f64, f64)) {
    let (dx, dy) = (to.0 - from.0, to.1 - from.1);
    let len = (dx * dx + dy * dy).sqrt();
    if len < 1e-6 {
        return;
    }
    let (ux, uy) = (dx / len, dy / len);
    let (bx, by) = (to.0 - 8.0 * ux, to.1 - 8.0 * uy);
    let (px, py) = (-uy * 4.0, ux * 4.0);
    let _ = writeln!(
        out,
        "<polygon points=\"{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}\" fill=\"#475569\"/>",
        to.0,
        to.1,
        bx + px,
        by + py,
        bx - px,
        by - py
    );
}

/// The `<svg>` element of a trace answer (no XML prolog: it can be inlined into HTML as is).
pub fn trace_svg(result: &TraceResult) -> String {
    let index: HashMap<&str, usize> = result
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (&*n.id, i))
        .collect();
    let labels: Vec<[String; 3]> = result.nodes.iter().map(label_lines).collect();
    let sizes: Vec<(f64, f64)> = labels
        .iter()
        .zip(&result.nodes)
        .map(|(l, n)| size(l, &n.kind))
        .collect();
    // An edge to a node outside the answer (none in a well-formed one) is still listed, drawn
    // as nothing, so the element count matches the DOT output's.
    let ends: Vec<Option<(usize, usize)>> = result
        .edges
        .iter()
        .map(|e| Some((*index.get(&*e.from)?, *index.get(&*e.to)?)))
        .collect();
    let drawn: Vec<(usize, usize)> = ends.iter().flatten().copied().collect();
    let layout = layered(&sizes, &drawn);
    // Each drawn edge's label sits beside the middle of its polyline; the canvas grows to hold
    // the labels of edges routed along its right border.
    let label_at: Vec<Option<(f64, f64)>> = layout
        .edges
        .iter()
        .map(|pts| {
            (pts.len() >= 2).then(|| {
                let mid = pts.len() / 2;
                let (a, b) = (pts[mid - 1], pts[mid]);
                ((a.0 + b.0) / 2.0 + 4.0, (a.1 + b.1) / 2.0 + 3.0)
            })
        })
        .collect();
    let mut width = layout.width;
    let mut labels_iter = label_at.iter();
    for (e, end) in result.edges.iter().zip(&ends) {
        if end.is_some()
            && let Some(Some((x, _))) = labels_iter.next()
        {
            width = width.max(x + e.kind.chars().count() as f64 * LABEL_CHAR_WIDTH + MARGIN);
        }
    }
    let mut out = String::with_capacity(512 + 600 * result.nodes.len());
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"trace\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" font-family=\"ui-monospace, SFMono-Regular, Menlo, Consolas, monospace\" font-size=\"{FONT_SIZE}\" data-target=\"{}\" data-nodes=\"{}\" data-edges=\"{}\" role=\"img\">",
        escaped(&result.target),
        result.nodes.len(),
        result.edges.len(),
        w = width.ceil(),
        h = layout.height,
    );
    out.push_str("<title>");
    let _ = write!(
        out,
        "provenance of {} ({} nodes, {} edges{})",
        escaped(&result.target),
        result.nodes.len(),
        result.edges.len(),
        if result.complete { "" } else { ", incomplete" }
    );
    out.push_str("</title>\n");
    let mut drawn_edges = layout.edges.iter().zip(&label_at);
    for (e, end) in result.edges.iter().zip(&ends) {
        let _ = write!(out, "<g class=\"edge\" data-id=\"");
        text(&mut out, &e.id);
        out.push_str("\" data-kind=\"");
        text(&mut out, &e.kind);
        out.push_str("\" data-from=\"");
        text(&mut out, &e.from);
        out.push_str("\" data-to=\"");
        text(&mut out, &e.to);
        out.push_str("\"><title>");
        text(&mut out, &e.kind);
        out.push_str("</title>\n");
        let (pts, label) = match end {
            Some(_) => drawn_edges
                .next()
                .map_or((&[][..], None), |(p, l)| (p.as_slice(), *l)),
            None => (&[][..], None),
        };
        if pts.len() >= 2 {
            out.push_str(
                "<polyline fill=\"none\" stroke=\"#475569\" stroke-width=\"1.2\" points=\"",
            );
            for (i, (x, y)) in pts.iter().enumerate() {
                let _ = write!(out, "{}{x:.1},{y:.1}", if i == 0 { "" } else { " " });
            }
            out.push_str("\"/>\n");
            arrow_head(&mut out, pts[pts.len() - 2], pts[pts.len() - 1]);
        }
        if let Some((x, y)) = label {
            let _ = write!(
                out,
                "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"9\" fill=\"#64748b\">"
            );
            text(&mut out, &e.kind);
            out.push_str("</text>\n");
        }
        out.push_str("</g>\n");
    }
    for (i, n) in result.nodes.iter().enumerate() {
        let p = &layout.nodes[i];
        let target = n.id == result.target;
        let _ = write!(
            out,
            "<g class=\"node{}\" data-id=\"",
            if target { " target" } else { "" }
        );
        text(&mut out, &n.id);
        out.push_str("\" data-kind=\"");
        text(&mut out, &n.kind);
        out.push_str("\"><title>");
        text(&mut out, &n.id);
        out.push_str("</title>\n");
        let stroke = if target {
            ("#b91c1c", 2.5)
        } else {
            ("#334155", 1.0)
        };
        shape(&mut out, &n.kind, p, stroke);
        let top = p.y + p.h / 2.0 - LINE + 4.0;
        for (k, line) in labels[i].iter().enumerate() {
            let weight = if k == 0 { " font-weight=\"bold\"" } else { "" };
            let _ = write!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\"{weight}>",
                p.cx(),
                top + k as f64 * LINE
            );
            text(&mut out, line);
            out.push_str("</text>\n");
        }
        out.push_str("</g>\n");
    }
    out.push_str("</svg>\n");
    out
}

/// A standalone SVG file of a trace answer (`keel trace TARGET --format svg`).
pub fn trace_svg_document(result: &TraceResult) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&trace_svg(result));
    out
}
