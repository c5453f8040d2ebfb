//! Compaction selection and pruning over a surface of 100,000 messages, as a running session
//! does them: the [`SurfaceIndex`] is kept up to date step by step while the session grows, then
//! a compaction syncs it (nothing new), chooses the span to summarise, plans the prunes and
//! builds the replacing results. The summary request is not part of it. Target: under 20 ms.
//!
//! Also measured: the one-off cold build of the index (a resumed session's first compaction),
//! the per-step incremental sync while the session grew (printed: median / p99 / max over every
//! step), the first prune plan of an index (it searches each new candidate's text for a
//! pruning marker once), and the sync after the surface was replaced (3,750 prunes, a summary).
//!
//! Run: `cargo bench -p keel-agent --bench compaction`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use criterion::{Criterion, criterion_group, criterion_main};
use keel_agent::compaction::index::SurfaceIndex;
use keel_agent::compaction::plan::{SpanRules, summary_span};
use keel_agent::compaction::prune::{PruneRules, prune_plan, pruned_result};
use keel_protocol::{
    AssistantMessageEvent, ContentBlock, EventBody, Message, MessageSource, Role, SessionHeader,
    SessionId, SurfaceOp, ToolCallBlock, ToolResultBlock, ToolResultEvent,
};
use keel_session::Session;
use std::hint::black_box;
use std::time::{Duration, Instant};

const MESSAGES: usize = 100_000;

/// Turns of: a prompt, three tool calls each answered, a final answer (8 messages). Every tenth
/// result is 20 KB (a pruning target), the others 1.5 KB. `index` is synced before each step
/// (after the prompt and after each result), as the compactor's `agent/pre-step` measure does;
/// the time of each sync is returned.
fn surface(messages: usize, index: &mut SurfaceIndex) -> (Session, Vec<Duration>) {
    let mut s = Session::new(SessionHeader::new(SessionId("bench".into()), 0, None));
    let line = "src/lib.rs:42: fn parse(input: &str) -> Result<Ast, Error> { todo!() }\n";
    let (mut n, mut turn, mut results) = (0usize, 0u32, 0usize);
    let mut steps = Vec::new();
    let mut sync = |s: &Session, index: &mut SurfaceIndex| {
        let t = Instant::now();
        index.sync(s);
        steps.push(t.elapsed());
    };
    let push = |s: &mut Session, body: EventBody, n: &mut usize| {
        s.push_surface(body, SurfaceOp::Append, Vec::new()).unwrap();
        *n += 1;
    };
    while n < messages {
        turn += 1;
        let prompt = Message::user_text(
            format!("turn {turn}: please fix the parser and run the tests"),
            MessageSource::user(),
            format!("u{turn}"),
        );
        push(&mut s, EventBody::UserMessage(Box::new(prompt)), &mut n);
        sync(&s, index);
        for step in 1..=3u32 {
            let id = format!("call_{turn}_{step}");
            let call = Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::reasoning("I should look at the parser first."),
                    ContentBlock::ToolCall(ToolCallBlock {
                        id: id.clone(),
                        name: "grep".into(),
                        arguments: r#"{"pattern":"fn parse","path":"src"}"#.into(),
                    }),
                ],
                source: MessageSource::model("deepseek", "deepseek-v4-flash"),
                id: format!("a{turn}_{step}"),
            };
            let a = AssistantMessageEvent {
                turn: keel_protocol::TurnNo(turn),
                step: keel_protocol::StepNo(step),
                message: call,
                usage: None,
                finish: None,
                interrupted: false,
            };
            push(&mut s, EventBody::AssistantMessage(Box::new(a)), &mut n);
            results += 1;
            let repeat = if results % 10 == 0 { 280 } else { 20 };
            let result = Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult(ToolResultBlock {
                    tool_call_id: id.clone(),
                    content: vec![ContentBlock::text(line.repeat(repeat))],
                    is_error: false,
                })],
                source: MessageSource::tool(id),
                id: format!("r{turn}_{step}"),
            };
            let r = ToolResultEvent {
                turn: keel_protocol::TurnNo(turn),
                step: keel_protocol::StepNo(step),
                message: result,
                meta: None,
            };
            push(&mut s, EventBody::ToolResult(Box::new(r)), &mut n);
            sync(&s, index);
        }
        let answer = Message {
            role: Role::Assistant,
            content: vec![ContentBlock::text("Fixed the parser; tests pass.")],
            source: MessageSource::model("deepseek", "deepseek-v4-flash"),
            id: format!("f{turn}"),
        };
        let a = AssistantMessageEvent {
            turn: keel_protocol::TurnNo(turn),
            step: keel_protocol::StepNo(4),
            message: answer,
            usage: None,
            finish: None,
            interrupted: false,
        };
        push(&mut s, EventBody::AssistantMessage(Box::new(a)), &mut n);
    }
    (s, steps)
}

const RULES: SpanRules = SpanRules {
    tail_budget: 20_000,
    protect_from: usize::MAX,
    min_nodes: 2,
};

const PRUNE: PruneRules = PruneRules {
    over_raw_tokens: 4000,
    head_bytes: 4096,
    tail_bytes: 1024,
};

/// Plan the prunes and build the replacing results.
fn prune_pass(index: &mut SurfaceIndex, session: &Session) -> Vec<ToolResultEvent> {
    let targets = prune_plan(index, session, PRUNE);
    session
        .whole_events(targets.iter().map(|t| t.seq))
        .filter_map(|(_, e)| match &e?.body {
            EventBody::ToolResult(r) => pruned_result(r, PRUNE),
            _ => None,
        })
        .collect()
}

/// The target: sync (nothing new), select, plan the prunes and build the replacements.
#[inline(never)]
fn target_pass(
    index: &mut SurfaceIndex,
    session: &Session,
) -> (
    Option<keel_agent::compaction::plan::SummarySpan>,
    Vec<ToolResultEvent>,
) {
    index.sync(session);
    let span = summary_span(index, RULES);
    (span, prune_pass(index, session))
}

/// The cold build alone.
#[inline(never)]
fn cold_build(session: &Session) -> SurfaceIndex {
    SurfaceIndex::of(session)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

fn median_of(runs: usize, mut f: impl FnMut() -> Duration) -> Duration {
    let mut times: Vec<Duration> = (0..runs).map(|_| f()).collect();
    times.sort();
    percentile(&times, 0.5)
}

fn bench(c: &mut Criterion) {
    let mut index = SurfaceIndex::default();
    let (session, mut steps) = surface(MESSAGES, &mut index);
    if std::env::var_os("COMPACTION_BENCH_ONCE").is_some() {
        // For instruction counts: `valgrind --tool=callgrind --toggle-collect='*target_pass*'`
        // (or `*cold_build*`); the first pass searches the candidates for markers, the second
        // is the steady state.
        black_box(cold_build(&session));
        black_box(target_pass(&mut index, &session));
        black_box(target_pass(&mut index, &session));
        std::process::exit(0);
    }
    steps.sort();
    eprintln!(
        "per-step incremental sync over {} steps: median {:?}, p99 {:?}, max {:?}, total {:?}",
        steps.len(),
        percentile(&steps, 0.5),
        percentile(&steps, 0.99),
        percentile(&steps, 1.0),
        steps.iter().sum::<Duration>()
    );
    {
        let span = summary_span(&index, RULES).unwrap();
        let mut first = index.clone();
        let targets = prune_plan(&mut first, &session, PRUNE);
        eprintln!(
            "surface: {} nodes, {} raw tokens; span: {} nodes; prune targets: {}",
            index.len(),
            index.tokens(),
            span.len,
            targets.len()
        );
        // The first plan of an index searches every candidate's text for a marker (once).
        let first_plan = median_of(5, || {
            let mut fresh = index.clone();
            let t = Instant::now();
            black_box(prune_plan(&mut fresh, &session, PRUNE));
            t.elapsed()
        });
        eprintln!(
            "first prune plan (marker search of {} candidates): median {first_plan:?}",
            targets.len()
        );
    }
    let mut g = c.benchmark_group("compaction_100k");
    g.sample_size(20);
    g.bench_function("index: cold build (one-off)", |b| {
        b.iter(|| black_box(cold_build(&session)))
    });
    g.bench_function("index: sync, nothing new", |b| {
        b.iter(|| index.sync(black_box(&session)))
    });
    g.bench_function("select span", |b| {
        b.iter(|| black_box(summary_span(&index, RULES)))
    });
    g.bench_function("prune plan + replacements", |b| {
        b.iter(|| black_box(prune_pass(&mut index, &session)))
    });
    g.bench_function("target: sync + select + prune plan + replacements", |b| {
        b.iter(|| black_box(target_pass(&mut index, &session)))
    });
    g.finish();

    // After the surface was replaced: the 3,750 prunes, then a summary of the span.
    let mut replaced = session.clone();
    let built: Vec<(u64, ToolResultEvent)> = prune_plan(&mut index, &session, PRUNE)
        .iter()
        .filter_map(|t| match &session.whole_event(t.seq)?.body {
            EventBody::ToolResult(r) => Some((t.seq.0, pruned_result(r, PRUNE)?)),
            _ => None,
        })
        .collect();
    for (seq, new) in built {
        let seq = keel_protocol::Seq(seq);
        let op = SurfaceOp::Replace {
            start: seq,
            end: seq,
        };
        replaced
            .push_surface(EventBody::ToolResult(Box::new(new)), op, vec![seq])
            .unwrap();
    }
    let after_prunes = median_of(10, || {
        let mut i = index.clone();
        let t = Instant::now();
        i.sync(&replaced);
        t.elapsed()
    });
    let mut pruned_index = index.clone();
    pruned_index.sync(&replaced);
    let span = summary_span(&pruned_index, RULES).unwrap();
    let summary = Message::user_text("summary", MessageSource::user(), "s");
    let shadowed = pruned_index.seqs()[..span.len].to_vec();
    let op = SurfaceOp::Replace {
        start: span.start,
        end: span.end,
    };
    replaced
        .push_surface(EventBody::UserMessage(Box::new(summary)), op, shadowed)
        .unwrap();
    let after_summary = median_of(10, || {
        let mut i = pruned_index.clone();
        let t = Instant::now();
        i.sync(&replaced);
        t.elapsed()
    });
    eprintln!(
        "sync after the replaces (merge): 3,750 prunes {after_prunes:?}, then a summary of {} nodes {after_summary:?}",
        span.len
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
