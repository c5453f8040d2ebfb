//! The terminal UI's costs: a redraw at 200×60 with a 2,000-message session in view (what a
//! key press costs), taking one streamed chunk into the transcript, and a frame of a growing
//! streamed answer. `cargo bench -p keel-tui --bench tui`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use keel_protocol::{EventBody, Seq, SessionEvent};
use keel_tui::cells::Cells;
use keel_tui::input::Input;
use keel_tui::view::{self, LineCache, Screen};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::{Value, json};

fn ev(seq: u64, ty: &str, data: Value) -> SessionEvent {
    SessionEvent::new(
        Seq(seq),
        0,
        EventBody::parse(ty, &data.to_string()).unwrap(),
    )
}

/// A session of `n` messages: prompts, answers with Markdown, tool calls and results.
fn session(n: u64) -> Cells {
    let mut t = Cells::new();
    let mut seq = 0;
    let mut next = || {
        seq += 1;
        seq
    };
    for i in 0..n / 4 {
        t.apply(&ev(next(), "user/message", json!({"role": "user", "content": [{"type": "text", "text": format!("Question {i}: what does module {i} do?")}], "source": {"kind": "user"}, "id": "u"})));
        t.apply(&ev(next(), "tool/call", json!({"turn": 1, "step": 1, "callId": format!("c{i}"), "name": "read", "arguments": json!({"path": format!("src/m{i}.rs")}).to_string()})));
        t.apply(&ev(next(), "tool/result", json!({"turn": 1, "step": 1, "message": {"role": "user", "content": [{"type": "tool-result", "toolCallId": format!("c{i}"), "content": [{"type": "text", "text": "fn a() {}\nfn b() {}\n"}], "isError": false}], "source": {"kind": "tool", "callId": format!("c{i}")}, "id": "r"}})));
        t.apply(&ev(next(), "assistant/message", json!({"turn": 1, "step": 1, "message": {"role": "assistant", "content": [{"type": "text", "text": format!("Module **{i}** parses input:\n\n- reads `src/m{i}.rs`\n- returns a `Result`\n\n```rust\nfn a() {{}}\n```")}], "source": {"kind": "model", "provider": "p", "model": "m"}, "id": "a"}})));
    }
    t
}

/// The screen of `t` with `input` typed, at the bottom, nothing open.
fn screen<'a>(t: &'a Cells, input: &'a Input) -> Screen<'a> {
    Screen {
        cells: t,
        input,
        scroll: 0,
        from: 0,
        modal: None,
        now: 0,
        show_reasoning: false,
        completions: &[],
        completion: 0,
        queued: 0,
        hint: None,
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("tui");
    let t = session(2000);
    let mut input = Input::new();
    input.insert("typing a prompt");
    let mut terminal = Terminal::new(TestBackend::new(200, 60)).unwrap();
    let mut cache = LineCache::default();
    g.bench_function("redraw_200x60_2000_messages", |b| {
        b.iter(|| {
            let screen = screen(&t, &input);
            terminal
                .draw(|f| view::draw(f, &screen, &mut cache))
                .unwrap();
        })
    });

    // One streamed chunk into a growing answer.
    let mut streaming = session(40);
    streaming.apply(&ev(1_000_000, "step/start", json!({"turn": 9, "step": 1})));
    let chunk = ev(
        1_000_001,
        "assistant/chunk",
        json!({"turn": 9, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "word "}}),
    );
    g.bench_function("apply_chunk", |b| b.iter(|| streaming.apply(&chunk)));

    // A frame of a streamed answer of ~2 KB (re-rendered as Markdown each frame).
    let mut answer = session(40);
    answer.apply(&ev(2_000_000, "step/start", json!({"turn": 9, "step": 1})));
    let text = "Some **bold** words and `code`, then a list:\n\n- one\n- two\n\n".repeat(30);
    answer.apply(&ev(
        2_000_001,
        "assistant/chunk",
        json!({"turn": 9, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": text}}),
    ));
    let mut cache = LineCache::default();
    g.bench_function("stream_frame_200x60_2kb_answer", |b| {
        b.iter(|| {
            let screen = screen(&answer, &input);
            terminal
                .draw(|f| view::draw(f, &screen, &mut cache))
                .unwrap();
        })
    });
    // The Markdown of a 4 KB answer (re-rendered on each frame while it streams).
    let doc = "## Result\n\nThe **parser** now returns `Result`:\n\n1. read `src/parse.rs`\n2. fix the loop\n\n| file | lines |\n|---|---|\n| a.rs | 10 |\n\n```rust\nfn main() {\n    let x = 42; // answer\n}\n```\n\n> quoted text with a [link](https://example.com)\n\n".repeat(16);
    g.bench_function("markdown_4kb_answer", |b| {
        b.iter(|| keel_tui::markdown::render(std::hint::black_box(&doc), 100))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
