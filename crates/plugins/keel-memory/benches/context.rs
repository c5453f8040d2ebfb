//! Per-request cost of a projection policy over a 10,000-node surface (index from the per-seq
//! cache, the policy, the host's check), and `history_search` over the 1.3M-event synthetic
//! session (cold: index and search; indexed: search).
//!
//! `cargo bench -p keel-memory --bench context`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use criterion::{Criterion, criterion_group, criterion_main};
use keel_memory::context::{
    NodeIndex, Policy, PolicyInput, Recent, Relevant, current_query, pinned,
};
use keel_memory::history::HistoryIndex;
use keel_memory::lexical::Query;
use keel_protocol::{
    ContentBlock, Message, MessageSource, Role, Seq, ToolCallBlock, ToolResultBlock,
};
use keel_session::DerivedMessage;
use keel_session::synth::{SynthOptions, generate};
use std::hint::black_box;

const WORDS: &[&str] = &[
    "parser", "error", "config", "module", "test", "path", "value", "handle", "empty", "input",
    "lexer", "token", "stream", "buffer", "socket", "retry", "cache", "index", "schema", "query",
];

fn text(i: usize, n: usize) -> String {
    (0..n)
        .map(|k| WORDS[(i * 7 + k * 13) % WORDS.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

/// A surface of `n` nodes: human, assistant with a tool call, its result, assistant answer.
fn surface(n: usize) -> Vec<DerivedMessage> {
    (0..n)
        .map(|i| {
            let message = match i % 4 {
                0 => Message::user_text(text(i, 30), MessageSource::user(), format!("u{i}")),
                1 => Message {
                    role: Role::Assistant,
                    content: vec![ContentBlock::ToolCall(ToolCallBlock {
                        id: format!("c{i}"),
                        name: "read".into(),
                        arguments: format!("{{\"path\":\"src/{}.rs\"}}", WORDS[i % WORDS.len()]),
                    })],
                    source: MessageSource::model("p", "m"),
                    id: format!("a{i}"),
                },
                2 => Message {
                    role: Role::User,
                    content: vec![ContentBlock::ToolResult(ToolResultBlock {
                        tool_call_id: format!("c{}", i - 1),
                        content: vec![ContentBlock::Text { text: text(i, 120) }],
                        is_error: false,
                    })],
                    source: MessageSource::tool(format!("c{}", i - 1)),
                    id: format!("r{i}"),
                },
                _ => Message {
                    role: Role::Assistant,
                    content: vec![ContentBlock::Text { text: text(i, 40) }],
                    source: MessageSource::model("p", "m"),
                    id: format!("t{i}"),
                },
            };
            DerivedMessage {
                seq: Seq(i as u64 * 3),
                message,
            }
        })
        .collect()
}

fn policy(c: &mut Criterion) {
    let mut g = c.benchmark_group("policy/10k-node surface");
    let nodes = surface(10_000);
    let required: Vec<Seq> = nodes[nodes.len() - 4..].iter().map(|d| d.seq).collect();
    // A budget that leaves out about half of the surface.
    let budget = 600_000;
    for p in [
        Box::new(Recent) as Box<dyn Policy>,
        Box::new(Relevant::default()),
    ] {
        // The previous requests' work: the index is kept up to date across requests.
        let mut index = NodeIndex::of(&nodes, 0);
        g.bench_function(format!("{} (per request)", p.name()), |b| {
            b.iter(|| {
                index.update(black_box(&nodes), 0);
                if p.needs_terms() {
                    index.index_terms(&nodes);
                }
                let req: Vec<usize> = (index.len() - 4..index.len()).collect();
                let pins = pinned(&nodes);
                let query = current_query(&nodes);
                let input = PolicyInput {
                    index: &index,
                    required: &req,
                    pinned: &pins,
                    budget_tokens: budget,
                    query: &query,
                };
                let include = p.project(&input);
                keel_agent::request::check_projection(&nodes, &required, &include).unwrap()
            })
        });
    }
    for (name, terms) in [("recent", false), ("relevant", true)] {
        g.bench_function(format!("{name} (first request: index built)"), |b| {
            b.iter(|| {
                let mut index = NodeIndex::default();
                index.update(black_box(&nodes), 0);
                if terms {
                    index.index_terms(&nodes);
                }
                index.len()
            })
        });
    }
    g.finish();
}

fn history(c: &mut Criterion) {
    let events: u64 = std::env::var("KEEL_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_300_000);
    let session = generate(&SynthOptions {
        events,
        ..SynthOptions::default()
    })
    .unwrap();
    let mut g = c.benchmark_group(format!("history_search/{events} events"));
    g.sample_size(10);
    let query = Query::new("parser error in the config module");
    g.bench_function("cold (index + search)", |b| {
        b.iter(|| {
            let mut index = HistoryIndex::default();
            index.extend(&session);
            index.search(&session, &query, 5, None)
        })
    });
    let mut index = HistoryIndex::default();
    index.extend(&session);
    eprintln!("history_search: {} messages indexed", index.len());
    g.sample_size(50);
    g.bench_function("indexed (search)", |b| {
        b.iter(|| index.search(&session, black_box(&query), 5, None))
    });
    g.finish();
}

criterion_group!(benches, policy, history);
criterion_main!(benches);
