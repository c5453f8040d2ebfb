//! keel-viewer: a session as one self-contained HTML page, and `keel trace` answers as SVG.
//!
//! [`render_html`] turns a session log into a single HTML document a browser opens from disk:
//! inline stylesheet, no script, no fonts, images or requests (a Content-Security-Policy of
//! `default-src 'none'` says so to the browser too). It shows the transcript as the person saw
//! it, from keel-session's transcript view (every event as appended: compacted history stays
//! visible, marked), with reasoning collapsed, tool calls expandable with their arguments and
//! results, compaction, interrupted-turn and continuity markers, todo lists and plan mode, and
//! the usage of every step with its cache-hit share. Given the session's provenance journal
//! ([`HtmlOptions::provenance`]), each tool result carries its formation graph as inline SVG.
//!
//! [`trace_svg`] draws one `trace` answer: the nodes and edges `keel trace --format dot` prints,
//! laid out in Rust by a layered (Sugiyama-style) layout ([`layout`]), so no Graphviz is needed.
//!
//! All session text is untrusted: it reaches the page only through [`escape`].
#![deny(missing_docs)]

pub mod escape;
mod facts;
mod html;
pub mod layout;
mod page;
mod svg;

pub use html::{DEFAULT_GRAPH_BUDGET, GRAPH_DEPTH, HtmlOptions, render_html};
pub use page::{
    ResultGraph, SessionPage, child_snapshots, records_provenance, result_graph, session_page,
};
pub use svg::{trace_svg, trace_svg_document};
