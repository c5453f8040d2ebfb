//! ACP's costs on keel's side: one streamed chunk turned into a `session/update` and encoded as
//! its JSON-RPC line (the per-update overhead of a live turn), and a 10,000-event session
//! mapped and encoded the way `session/load` replays it. `cargo bench -p keel-acp --bench acp`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agent_client_protocol::v1::schema::{SessionId, SessionNotification};
use criterion::{Criterion, criterion_group, criterion_main};
use keel_acp::map::{Feed, Mapper};
use keel_protocol::{EventBody, Seq, SessionEvent};
use serde_json::{Value, json};

fn ev(seq: u64, ty: &str, data: Value) -> SessionEvent {
    SessionEvent::new(
        Seq(seq),
        0,
        EventBody::parse(ty, &data.to_string()).unwrap(),
    )
}

/// A session of about `n` events: prompts, streamed answers, tool calls and results.
pub fn session(n: u64) -> Vec<SessionEvent> {
    let mut out = Vec::new();
    let mut seq = 0;
    let mut next = || {
        seq += 1;
        seq
    };
    let mut i = 0;
    while (out.len() as u64) < n {
        out.push(ev(next(), "user/message", json!({"role": "user", "content": [{"type": "text", "text": format!("Question {i}: what does module {i} do?")}], "source": {"kind": "user"}, "id": "u"})));
        out.push(ev(next(), "step/start", json!({"turn": i, "step": 1})));
        for w in 0..4 {
            out.push(ev(next(), "assistant/chunk", json!({"turn": i, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": format!("word{w} ")}})));
        }
        out.push(ev(next(), "assistant/message", json!({"turn": i, "step": 1, "message": {"role": "assistant", "content": [{"type": "text", "text": "word0 word1 word2 word3 "}, {"type": "tool-call", "id": format!("c{i}"), "name": "read", "arguments": json!({"path": format!("src/m{i}.rs")}).to_string()}], "source": {"kind": "model", "provider": "p", "model": "m"}, "id": "a"}})));
        out.push(ev(next(), "tool/call", json!({"turn": i, "step": 1, "callId": format!("c{i}"), "name": "read", "arguments": json!({"path": format!("src/m{i}.rs")}).to_string()})));
        out.push(ev(next(), "tool/result", json!({"turn": i, "step": 1, "message": {"role": "user", "content": [{"type": "tool-result", "toolCallId": format!("c{i}"), "content": [{"type": "text", "text": "fn a() {}\nfn b() {}\n"}], "isError": false}], "source": {"kind": "tool", "callId": format!("c{i}")}, "id": "r"}})));
        out.push(ev(next(), "step/end", json!({"turn": i, "step": 1})));
        i += 1;
    }
    out
}

/// Map `events` and encode every update as its JSON-RPC line; returns the bytes written.
pub fn replay(events: &[SessionEvent]) -> usize {
    let mut mapper = Mapper::new("/work/project", Feed::Replay, &Default::default());
    let id = SessionId::new("bench-session");
    let mut bytes = 0;
    for e in events {
        for update in mapper.map(e) {
            let note = SessionNotification::new(id.clone(), update);
            let line = serde_json::to_vec(
                &json!({"jsonrpc": "2.0", "method": "session/update", "params": note}),
            )
            .unwrap();
            bytes += line.len();
        }
    }
    bytes
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("acp");
    let chunk = ev(
        7,
        "assistant/chunk",
        json!({"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "a streamed piece of an answer "}}),
    );
    let id = SessionId::new("bench-session");
    let mut mapper = Mapper::new("/work/project", Feed::Live, &Default::default());
    g.bench_function("streamed_update", |b| {
        b.iter(|| {
            let mut n = 0;
            for update in mapper.map(&chunk) {
                let note = SessionNotification::new(id.clone(), update);
                n += serde_json::to_vec(&note).unwrap().len();
            }
            n
        })
    });
    let events = session(10_000);
    assert!(replay(&events) > 0);
    g.sample_size(20);
    g.bench_function("replay_10k_events", |b| b.iter(|| replay(&events)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
