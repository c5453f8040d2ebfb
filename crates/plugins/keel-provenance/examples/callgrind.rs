//! Deterministic workloads for instruction counting (stable on a noisy machine):
//!
//! ```text
//! cargo build --profile bench -p keel-provenance --example callgrind
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/callgrind WORKLOAD N
//! ```
//!
//! Run each workload with `N` = 0 and with a larger `N`; the difference divided by `N` is the
//! instruction count of one operation (setup is shared). Workloads: `capture` (every stage of one
//! read-like call, in memory), `journal` (the same, then `Journal::flush`, no fsync), `trace`
//! (one backward and one forward trace on a 3,000-fact graph), `verify` (offline verification of
//! that graph's journal), `canonical` (the snapshot's canonical bytes, what `write_graph` writes),
//! `replay` (re-opening that journal), `pipeline-off` / `pipeline-memory` (one zero-I/O call
//! through the real tool pipeline, as in the `pipeline` criterion bench, without and with
//! in-memory capture).
#![allow(clippy::print_stdout, clippy::print_stderr)]

#[path = "../benches/support/read_call.rs"]
mod read_call;

use keel_provenance::{Direction, Journal, Recorder, trace, verify};
use read_call::{ids, material, one_call};
use std::hint::black_box;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let workload = args.get(1).map_or("capture", String::as_str);
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0);
    let m = material();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    match workload {
        "capture" => {
            let mut rec = Recorder::new("bench");
            for i in 0..n {
                one_call(&mut rec, &m, &ids(i));
                black_box(rec.drain_lines());
            }
        }
        "journal" => {
            let mut j =
                Journal::open(&dir.path().join("j"), "bench").unwrap_or_else(|e| panic!("{e}"));
            for i in 0..n {
                one_call(j.recorder_mut(), &m, &ids(i));
                black_box(j.flush().unwrap_or(0));
            }
        }
        "trace" | "verify" | "canonical" | "replay" => {
            let jdir = dir.path().join("v");
            let mut j = Journal::open(&jdir, "bench").unwrap_or_else(|e| panic!("{e}"));
            let mut i = 0;
            while j.snapshot().fact_count() < 3_000 {
                one_call(j.recorder_mut(), &m, &ids(i));
                i += 1;
            }
            j.flush().unwrap_or_else(|e| panic!("{e}"));
            j.write_graph().unwrap_or_else(|e| panic!("{e}"));
            let s = j.snapshot();
            // Forward from the assistant message outcome of call 137, as in the criterion bench.
            let occurrence = s
                .nodes()
                .iter()
                .find(|n| n.native_id.as_deref() == Some("ev-137"))
                .map(|n| n.id.clone());
            let message = s
                .nodes()
                .iter()
                .find(|n| {
                    n.occurrence_id.is_some()
                        && n.occurrence_id == occurrence
                        && n.fact_id.is_none()
                })
                .map(|n| n.id.to_string())
                .unwrap_or_default();
            for _ in 0..n {
                match workload {
                    "trace" => {
                        black_box(trace(
                            s,
                            black_box("result:call_137"),
                            Direction::Backward,
                            32,
                        ))
                        .ok();
                        black_box(trace(s, black_box(&message), Direction::Forward, 32)).ok();
                    }
                    "verify" => {
                        black_box(verify(&jdir).unwrap_or_else(|e| panic!("{e}")));
                    }
                    "canonical" => {
                        black_box(s.to_canonical());
                    }
                    _ => {
                        black_box(Journal::open(&jdir, "bench").map(|j| j.snapshot().fact_count()))
                            .ok();
                    }
                }
            }
        }
        "pipeline-off" | "pipeline-memory" => pipeline::run(workload == "pipeline-memory", n),
        other => eprintln!("unknown workload {other}"),
    }
}

#[path = "../benches/support/echo_pipeline.rs"]
mod echo_pipeline;

mod pipeline {
    use super::echo_pipeline::{call, capture_hooks, pipeline, runtime};
    use keel_provenance::Provenance;
    use keel_tools::ToolHooks;

    pub fn run(capture: bool, n: usize) {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = tmp.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let hooks = if capture {
            capture_hooks(&dir, &Provenance::in_memory())
        } else {
            ToolHooks::new()
        };
        let p = pipeline(&dir, hooks);
        let rt = runtime();
        for i in 0..n as u64 {
            call(&rt, &p, i);
        }
    }
}
