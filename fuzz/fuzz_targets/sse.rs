//! SSE parser → chat-completions stream translator → block assembler, the path every DeepSeek
//! response body takes (`keel_llm::openai`'s `Call::drain_events`).
//!
//! Input: byte 0 (low 3 bits) = number `k` of chunk-size bytes that follow; those `k` bytes
//! give the sizes (1..=256, cycled) the rest — the response body — is cut into, as reads from
//! the network would be. Checked: nothing panics; the events (and the translation) do not
//! depend on how the body is cut; the assembler accepts every chunk the translator emits.
#![no_main]

use keel_llm::BlockAssembler;
use keel_llm::sse::SseParser;
use keel_llm::translate::{Progress, StreamTranslator};
use keel_protocol::StreamChunk;
use libfuzzer_sys::fuzz_target;

/// What one pass over the body produced.
#[derive(Debug, PartialEq)]
struct Outcome {
    /// (event, data) of every event, or the SSE error.
    events: Vec<Result<(String, String), String>>,
    chunks: Vec<StreamChunk>,
    /// The translator's verdict: Ok(done) or the failure.
    end: Result<bool, String>,
}

fn run(body: &[u8], sizes: &[usize]) -> Outcome {
    let mut parser = SseParser::new();
    let mut translator = StreamTranslator::new();
    let mut events = Vec::new();
    let mut chunks = Vec::new();
    let mut end: Option<Result<bool, String>> = None;
    let mut rest = body;
    let mut i = 0;
    // One read: feed, then drain every complete event (finish() at end of body).
    let mut drain =
        |parser: &mut SseParser, ended: bool, end: &mut Option<Result<bool, String>>| {
            while end.is_none() {
                let ev = if ended {
                    parser.finish()
                } else {
                    parser.next_event()
                };
                let Some(ev) = ev else { return };
                match ev {
                    Err(e) => {
                        events.push(Err(e.to_string()));
                        *end = Some(Err(format!("sse: {e}")));
                    }
                    Ok(ev) => {
                        events.push(Ok((ev.event.to_owned(), ev.data.to_owned())));
                        match translator.push(ev.data, &mut chunks) {
                            Ok(Progress::Done) => *end = Some(Ok(true)),
                            Ok(Progress::Continue) => {}
                            Err(f) => *end = Some(Err(format!("{:?}: {}", f.code, f.message))),
                        }
                    }
                }
            }
        };
    while !rest.is_empty() && end.is_none() {
        let n = if sizes.is_empty() {
            rest.len()
        } else {
            sizes[i % sizes.len()].min(rest.len())
        };
        i += 1;
        parser.feed(&rest[..n]);
        rest = &rest[n..];
        drain(&mut parser, false, &mut end);
    }
    if end.is_none() {
        drain(&mut parser, true, &mut end);
    }
    let end = end.unwrap_or(Ok(false));
    Outcome {
        events,
        chunks,
        end,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let k = usize::from(first & 7).min(rest.len());
    let sizes: Vec<usize> = rest[..k].iter().map(|&b| usize::from(b) + 1).collect();
    let body = &rest[k..];

    let whole = run(body, &[]);
    let cut = run(body, &sizes);
    assert_eq!(whole, cut, "outcome depends on how the body is cut");

    let mut asm = BlockAssembler::new();
    for c in &whole.chunks {
        if let Err(e) = asm.push(c) {
            panic!("assembler rejected translator output {c:?}: {e}");
        }
    }
    let _ = asm.partial();
    let _ = asm.finish();
});
