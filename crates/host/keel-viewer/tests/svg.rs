//! The SVG of a trace answer against its DOT rendering: the same node ids and the same
//! (from, to, kind) edges, read back from both texts; labels escaped; a stable picture.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_provenance::query::TraceResult;
use keel_provenance::render::render_dot;
use keel_viewer::{trace_svg, trace_svg_document};
use pretty_assertions::assert_eq;
use std::collections::BTreeSet;

fn fixture() -> TraceResult {
    serde_json::from_str(include_str!("fixtures/trace.json")).unwrap()
}

/// Undo the five references the viewer's escaping writes.
fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The value of attribute `name` in the start tag `tag`.
fn attr(tag: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let start = tag.find(&key)? + key.len();
    let end = tag[start..].find('"')? + start;
    Some(unescape(&tag[start..end]))
}

type Graph = (BTreeSet<String>, BTreeSet<(String, String, String)>);

/// Nodes and edges of an SVG from the viewer, by their `data-*` attributes.
fn svg_graph(svg: &str) -> Graph {
    let (mut nodes, mut edges) = (BTreeSet::new(), BTreeSet::new());
    for part in svg.split("<g ").skip(1) {
        let tag = &part[..part.find('>').unwrap()];
        let tag = format!(" {tag}");
        if tag.contains("class=\"node") {
            nodes.insert(attr(&tag, "data-id").unwrap());
        } else if tag.contains("class=\"edge\"") {
            edges.insert((
                attr(&tag, "data-from").unwrap(),
                attr(&tag, "data-to").unwrap(),
                attr(&tag, "data-kind").unwrap(),
            ));
        }
    }
    (nodes, edges)
}

/// Nodes and edges of the DOT keel-provenance prints, from its `"id" [` and `"a" -> "b"` lines.
fn dot_graph(dot: &str) -> Graph {
    let (mut nodes, mut edges) = (BTreeSet::new(), BTreeSet::new());
    let quoted = |s: &str| -> Vec<String> {
        let mut out = Vec::new();
        let mut cur: Option<String> = None;
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            match (&mut cur, c) {
                (None, '"') => cur = Some(String::new()),
                (Some(v), '"') => {
                    out.push(std::mem::take(v));
                    cur = None;
                }
                (Some(v), '\\') => v.push(chars.next().unwrap()),
                (Some(v), c) => v.push(c),
                (None, _) => {}
            }
        }
        out
    };
    for line in dot.lines().map(str::trim) {
        if !line.starts_with('"') {
            continue;
        }
        let q = quoted(line);
        if line.contains("\" -> \"") {
            edges.insert((q[0].clone(), q[1].clone(), q[2].clone()));
        } else {
            nodes.insert(q[0].clone());
        }
    }
    (nodes, edges)
}

#[test]
fn svg_and_dot_draw_the_same_nodes_and_edges() {
    let t = fixture();
    let svg = svg_graph(&trace_svg(&t));
    let dot = dot_graph(&render_dot(&t));
    assert_eq!(svg, dot);
    assert_eq!(svg.0.len(), t.nodes.len());
    assert_eq!(svg.1.len(), t.edges.len());
    // The answer's own lists, too.
    let ids: BTreeSet<String> = t.nodes.iter().map(|n| n.id.to_string()).collect();
    assert_eq!(svg.0, ids);
}

#[test]
fn every_node_is_drawn_in_its_dot_shape_with_its_dot_label() {
    let svg = trace_svg(&fixture());
    for (kind, shape) in [
        ("occurrence", "<rect"),
        ("fact", "<ellipse"),
        ("disposition", "<polygon"),
        ("source", "<polygon"),
        ("outcome", "<rect"),
    ] {
        let at = svg.find(&format!("data-kind=\"{kind}\"")).unwrap();
        let rest = &svg[at..];
        let next = rest.find('<').unwrap();
        assert!(
            rest[next..].trim_start_matches("<title>").contains(shape),
            "{kind}"
        );
    }
    // The label lines DOT prints: kind, short id, describe().
    assert!(svg.contains(">tools/execute dispatch</text>"), "{svg}");
    assert!(svg.contains(">final result</text>"), "{svg}");
    assert!(svg.contains(">denied</text>"), "{svg}");
    assert!(svg.contains("class=\"node target\" data-id=\"outcome_c3\""));
}

#[test]
fn formation_flows_down_the_picture() {
    let svg = trace_svg(&fixture());
    let y_of = |id: &str| -> f64 {
        let at = svg.find(&format!("data-id=\"{id}\" data-kind")).unwrap();
        let rest = &svg[at..];
        let key = if rest.contains("<ellipse") && rest.find("<ellipse") < rest.find("<rect") {
            " cy=\""
        } else {
            " y=\""
        };
        let s = rest.find(key).unwrap() + key.len();
        rest[s..s + rest[s..].find('"').unwrap()].parse().unwrap()
    };
    // source → execute occurrence → its fact → outcome → origin → result occurrence → target.
    let order = [
        "source_a0",
        "occurrence_b2",
        "outcome_b2",
        "origin_b2",
        "occurrence_c3",
        "outcome_c3",
    ];
    for w in order.windows(2) {
        assert!(y_of(w[0]) < y_of(w[1]), "{} above {}", w[0], w[1]);
    }
}

#[test]
fn hostile_ids_and_labels_stay_text_and_the_file_is_xml() {
    let mut t = fixture();
    t.nodes[2].stage = Some("</text><script>alert(1)</script>".into());
    t.edges[0].kind = "a\"b<c>".into();
    let doc = trace_svg_document(&t);
    assert!(!doc.contains("<script"));
    assert!(doc.contains("&lt;/text&gt;&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(doc.contains("data-kind=\"a&quot;b&lt;c&gt;\""));
    assert!(doc.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns="));
    // Element balance: every <g> closes.
    assert_eq!(doc.matches("<g ").count(), doc.matches("</g>").count());
}

#[test]
fn the_picture_is_stable() {
    insta::assert_snapshot!("trace_svg", trace_svg_document(&fixture()));
}
