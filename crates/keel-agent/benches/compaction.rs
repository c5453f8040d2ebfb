//! Compaction planning over a surface of 100,000 messages: building the per-node estimates,
//! choosing the span to summarise, and planning + building the pruned replacements. The summary
//! request is not part of it. Target: under 20 ms for the whole pass.
//!
//! Run: `cargo bench -p keel-agent --bench compaction`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use criterion::{Criterion, criterion_group, criterion_main};
use keel_agent::compaction::plan::{SpanRules, SurfaceView, summary_span};
use keel_agent::compaction::prune::{PruneRules, prune_plan, pruned_result};
use keel_protocol::{
    AssistantMessageEvent, ContentBlock, EventBody, Message, MessageSource, Role, SessionHeader,
    SessionId, SurfaceOp, ToolCallBlock, ToolResultBlock, ToolResultEvent,
};
use keel_session::Session;
use std::hint::black_box;

const MESSAGES: usize = 100_000;

/// Turns of: a prompt, three tool calls each answered, a final answer (8 messages). Every tenth
/// result is 20 KB (a pruning target), the others 1.5 KB.
fn surface(messages: usize) -> Session {
    let mut s = Session::new(SessionHeader::new(SessionId("bench".into()), 0, None));
    let line = "src/lib.rs:42: fn parse(input: &str) -> Result<Ast, Error> { todo!() }\n";
    let (mut n, mut turn, mut results) = (0usize, 0u32, 0usize);
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
        for step in 1..=3u32 {
            let id = format!("call_{turn}_{step}");
            let call = Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::Reasoning {
                        text: "I should look at the parser first.".into(),
                    },
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
                turn,
                step,
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
                turn,
                step,
                message: result,
                meta: None,
            };
            push(&mut s, EventBody::ToolResult(Box::new(r)), &mut n);
        }
        let answer = Message {
            role: Role::Assistant,
            content: vec![ContentBlock::text("Fixed the parser; tests pass.")],
            source: MessageSource::model("deepseek", "deepseek-v4-flash"),
            id: format!("f{turn}"),
        };
        let a = AssistantMessageEvent {
            turn,
            step: 4,
            message: answer,
            usage: None,
            finish: None,
            interrupted: false,
        };
        push(&mut s, EventBody::AssistantMessage(Box::new(a)), &mut n);
    }
    s
}

fn bench(c: &mut Criterion) {
    let session = surface(MESSAGES);
    let rules = SpanRules {
        tail_budget: 20_000,
        protect_from: usize::MAX,
        min_nodes: 2,
    };
    let prune = PruneRules {
        over_raw_tokens: 4000,
        head_bytes: 4096,
        tail_bytes: 1024,
    };
    {
        let view = SurfaceView::of(&session);
        let span = summary_span(&view, rules).unwrap();
        let targets = prune_plan(&view, prune);
        eprintln!(
            "surface: {} nodes, {} raw tokens; span: {} nodes; prune targets: {}",
            view.nodes.len(),
            view.tokens(),
            span.len,
            targets.len()
        );
    }
    let mut g = c.benchmark_group("compaction_100k");
    g.sample_size(20);
    g.bench_function("view (per-node estimates)", |b| {
        b.iter(|| black_box(SurfaceView::of(&session)))
    });
    let view = SurfaceView::of(&session);
    g.bench_function("select span", |b| {
        b.iter(|| black_box(summary_span(&view, rules)))
    });
    g.bench_function("prune plan + replacements", |b| {
        b.iter(|| {
            let targets = prune_plan(&view, prune);
            let built: Vec<ToolResultEvent> = targets
                .iter()
                .filter_map(|t| match &view.nodes[t.position].event?.body {
                    EventBody::ToolResult(r) => pruned_result(r, prune),
                    _ => None,
                })
                .collect();
            black_box(built)
        })
    });
    g.bench_function("all (view + select + prune)", |b| {
        b.iter(|| {
            let view = SurfaceView::of(&session);
            let span = summary_span(&view, rules);
            let targets = prune_plan(&view, prune);
            let built: Vec<ToolResultEvent> = targets
                .iter()
                .filter_map(|t| match &view.nodes[t.position].event?.body {
                    EventBody::ToolResult(r) => pruned_result(r, prune),
                    _ => None,
                })
                .collect();
            black_box((span, built))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
