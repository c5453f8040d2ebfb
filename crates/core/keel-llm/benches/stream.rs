//! SSE parse + chat-completions translate + block assembly, on a realistic stream rendered from
//! a script (reasoning, text, two tool calls with many fragments, usage).
//!
//! Reports throughput in bytes (MB/s of SSE) and, in a second group, in elements (chunks/s,
//! whose inverse is the cost per streamed chunk).
//! Run: `cargo bench -p keel-llm --bench stream`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use keel_llm::BlockAssembler;
use keel_llm::script::{Script, ScriptFormat};
use keel_llm::script_render::{Delivery, plan};
use keel_llm::sse::SseParser;
use keel_llm::translate::StreamTranslator;
use std::hint::black_box;

/// A stream of 199,061 bytes and 1,058 events: a long answer in 16-char deltas plus tool calls in 8-char fragments.
fn sse_stream() -> (Vec<u8>, usize) {
    let text = "The quick brown fox jumps over the lazy dog, naïve café 🌍. ".repeat(200);
    let args = serde_json::json!({"file_path": "src/main.rs", "content": "fn main() { println!(\"hi\"); }\n".repeat(40)}).to_string();
    let yaml = serde_yaml::to_string(&serde_json::json!([{
        "reasoning": "Let me think step by step about the request. ".repeat(50),
        "text": text,
        "tool_calls": [{"name": "write", "arguments": args}, {"name": "bash", "arguments": {"command": "cargo test"}}],
    }]))
    .unwrap();
    let script = Script::from_str(&yaml, ScriptFormat::Yaml).unwrap();
    let Delivery::Stream(stream) = plan(&script.responses[0], 1, "deepseek-v4-flash", (1000, 512))
    else {
        panic!("not a stream")
    };
    let mut bytes = Vec::new();
    for p in &stream.payloads {
        bytes.extend_from_slice(b"data: ");
        bytes.extend_from_slice(p.as_bytes());
        bytes.extend_from_slice(b"\n\n");
    }
    (bytes, stream.payloads.len())
}

/// The client's per-response work, fed in 16 KiB network reads.
fn pipeline(bytes: &[u8]) -> usize {
    let mut parser = SseParser::new();
    let mut translator = StreamTranslator::new();
    let mut assembler = BlockAssembler::new();
    let mut chunks = Vec::new();
    for read in bytes.chunks(16 * 1024) {
        parser.feed(read);
        while let Some(event) = parser.next_event() {
            translator.push(event.unwrap().data, &mut chunks).unwrap();
        }
        for c in chunks.drain(..) {
            assembler.push(&c).unwrap();
        }
    }
    assembler.finish().content.len()
}

fn parse_only(bytes: &[u8]) -> usize {
    let mut parser = SseParser::new();
    let mut n = 0;
    for read in bytes.chunks(16 * 1024) {
        parser.feed(read);
        while let Some(event) = parser.next_event() {
            n += event.unwrap().data.len();
        }
    }
    n
}

fn bench(c: &mut Criterion) {
    let (bytes, events) = sse_stream();
    assert_eq!(pipeline(&bytes), 4);
    let mut g = c.benchmark_group("sse_bytes");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("parse", |b| b.iter(|| parse_only(black_box(&bytes))));
    g.bench_function("parse+translate+assemble", |b| {
        b.iter(|| pipeline(black_box(&bytes)))
    });
    g.finish();
    let mut g = c.benchmark_group("sse_chunks");
    g.throughput(Throughput::Elements(events as u64));
    g.bench_function("parse+translate+assemble", |b| {
        b.iter(|| pipeline(black_box(&bytes)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
