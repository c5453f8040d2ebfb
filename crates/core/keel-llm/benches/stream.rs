//! SSE parse + translate + block assembly, on a realistic stream rendered from a script
//! (reasoning, text, two tool calls with many fragments, usage), in each wire format: the
//! chat-completions rendering, and the same content as Messages API and Responses API events
//! (re-expressed by `keel_llm::script_wire`, as the mock server streams them).
//!
//! `sse_bytes` reports throughput in bytes (MB/s of chat SSE); `events/<wire>` in elements
//! (events/s, whose inverse is the cost per streamed event, network reads of 16 KiB included).
//! Run: `cargo bench -p keel-llm --bench stream`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use keel_llm::script::{Script, ScriptFormat};
use keel_llm::script_render::{Delivery, StreamPlan, plan};
use keel_llm::sse::SseParser;
use keel_llm::{BlockAssembler, WireApi, script_wire};
use std::hint::black_box;

/// The chat-completions plan: 1,058 events, a long answer in 16-char deltas plus tool calls in
/// 8-char fragments.
fn chat_plan() -> StreamPlan {
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
    stream
}

/// The bytes of `api`'s stream (with `event:` lines where the API sends them) and its event
/// count.
fn sse_stream(api: WireApi) -> (Vec<u8>, usize) {
    let stream = script_wire::convert(chat_plan(), api, 1, "deepseek-v4-flash");
    let mut bytes = Vec::new();
    for p in &stream.payloads {
        if api != WireApi::Chat
            && let Some(name) = script_wire::event_name(p)
        {
            bytes.extend_from_slice(format!("event: {name}\n").as_bytes());
        }
        bytes.extend_from_slice(b"data: ");
        bytes.extend_from_slice(p.as_bytes());
        bytes.extend_from_slice(b"\n\n");
    }
    (bytes, stream.payloads.len())
}

/// The client's per-response work, fed in 16 KiB network reads.
fn pipeline(api: WireApi, bytes: &[u8]) -> usize {
    let mut parser = SseParser::new();
    let mut translator = api.translator();
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
    let (bytes, _) = sse_stream(WireApi::Chat);
    let mut g = c.benchmark_group("sse_bytes");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("parse", |b| b.iter(|| parse_only(black_box(&bytes))));
    g.bench_function("parse+translate+assemble", |b| {
        b.iter(|| pipeline(WireApi::Chat, black_box(&bytes)))
    });
    g.finish();
    let mut g = c.benchmark_group("events");
    for api in [WireApi::Chat, WireApi::Messages, WireApi::Responses] {
        let (bytes, events) = sse_stream(api);
        assert_eq!(pipeline(api, &bytes), 4, "{api}");
        g.throughput(Throughput::Elements(events as u64));
        g.bench_function(api.name(), |b| b.iter(|| pipeline(api, black_box(&bytes))));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
