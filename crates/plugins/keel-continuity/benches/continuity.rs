//! Continuity's costs: the per-request check before any boundary (the runtime-context hook on
//! a real agent, against the same agent without the plugin), and the work at a boundary over
//! a 100,000-event session (fold + render, then the anchor check of its human messages).
//!
//! `cargo bench -p keel-continuity --bench continuity`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use criterion::{Criterion, criterion_group, criterion_main};
use keel_agent::seams::RuntimeContext;
use keel_continuity::anchors::Anchors;
use keel_continuity::basis::fold;
use keel_continuity::control::AdmissionBench;
use keel_continuity::render::{BoundaryKind, DEFAULT_BUDGET, Frame, Lineage, render};
use keel_protocol::{Seq, StepNo, TurnNo};
use keel_session::synth::{SynthOptions, generate};
use keel_testkit::agent::{AgentOptions, PluginRow, agent_fixture};
use std::collections::HashSet;
use std::hint::black_box;

fn per_request(c: &mut Criterion) {
    let mut g = c.benchmark_group("passive/per-request");
    for (name, plugins) in [
        ("off", vec![]),
        ("on, no boundary", vec![PluginRow::new("continuity")]),
    ] {
        let f = agent_fixture(
            "responses:\n  - text: \"unused\"\n",
            AgentOptions {
                plugins,
                ..AgentOptions::default()
            },
        );
        let ctx = RuntimeContext {
            agent: f.agent.handle(),
            turn: TurnNo(1),
            step: StepNo(1),
            attempt: 0,
        };
        let hooks = f.agent.hooks().runtime_context.clone();
        g.bench_function(name, |b| {
            b.iter(|| {
                for h in &hooks {
                    black_box(h(black_box(&ctx)).unwrap());
                }
            })
        });
    }
    g.finish();
}

fn at_boundary(c: &mut Criterion) {
    let session = generate(&SynthOptions {
        events: 100_000,
        ..SynthOptions::default()
    })
    .unwrap();
    let surface: HashSet<Seq> = session.surface().nodes().iter().copied().collect();
    let basis = fold(&session, session.next_seq(), 3, &keel_host::presenters());
    eprintln!(
        "session: {} events, {} surface nodes, {} human messages",
        session.len(),
        surface.len(),
        basis.humans.len()
    );
    let lineage = Lineage {
        root: "root".into(),
        parent: None,
        current: "root".into(),
        first_message: None,
    };
    let mut g = c.benchmark_group("boundary/100k-events");
    g.bench_function("fold+render", |b| {
        b.iter(|| {
            let on: HashSet<Seq> = session.surface().nodes().iter().copied().collect();
            let basis = fold(&session, session.next_seq(), 3, &keel_host::presenters());
            let frame = Frame {
                kind: BoundaryKind::Replace,
                boundary: Seq(1),
                source_session: "root",
                lineage: &lineage,
                budget: DEFAULT_BUDGET,
            };
            black_box(render(&basis, &on, &frame))
        })
    });
    let home = tempfile::tempdir().unwrap();
    let anchors = Anchors::new(home.path());
    let sources: Vec<_> = basis.humans.iter().map(|h| h.source()).collect();
    anchors.anchor("root", &sources).unwrap();
    g.bench_function("anchor check", |b| {
        b.iter(|| anchors.verify("root", black_box(&sources)).unwrap())
    });
    g.finish();
}

/// Guard admission of one guarded call under explicit control, on a real agent's session
/// log: issuing an authorization is the model's `control_checkpoint`, outside the measurement
/// (`iter_batched` setup). The admission checks the contract (its file's stamp), consumes the
/// authorization, takes the lease and logs the change (the file catches up when the call
/// settles). "cpu" does not wait for the record's fsync (the session writer does it on its own
/// thread); "with its fsync" waits, on the disk under `$TMPDIR`.
fn admission(c: &mut Criterion) {
    let mut g = c.benchmark_group("control/admission");
    let f = agent_fixture(
        "responses:\n  - text: \"unused\"\n",
        AgentOptions::default(),
    );
    let bench = std::cell::RefCell::new(
        AdmissionBench::new(&f.agent.handle(), f.home.path(), &f.cwd).unwrap(),
    );
    g.bench_function("cpu", |b| {
        b.iter_batched(
            || bench.borrow_mut().authorize().unwrap(),
            |()| bench.borrow_mut().admit().unwrap(),
            criterion::BatchSize::PerIteration,
        )
    });
    g.bench_function("with its fsync", |b| {
        b.iter_batched(
            || bench.borrow_mut().authorize().unwrap(),
            |()| bench.borrow_mut().admit_durable().unwrap(),
            criterion::BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, per_request, at_boundary, admission);
criterion_main!(benches);
