//! Delegation's own costs, with the in-process provider (no child process): one `delegate`
//! call and one `delegate_status` call over 8 live delegations, each from dispatch to result
//! through the real agent's tool pipeline (argument parsing and schema validation, the policy
//! and approval phase, the checkpoint, the tool body — for `delegate` the capability check, the
//! provider call, the spawn of the keel job `delegate-N` in the `jobs` plugin's service and the
//! report watch — and the settled phase); and the bytes the six schemas add to every request.
//!
//! The agent is a real one (host factory, `jobs` and `delegate` rows, real session log). The
//! pipeline is driven with a host that stands in for the agent's step host: it hands the tools
//! the calling agent and its job control, and approves as `--approval auto` does. Two variants:
//! - `bare`: no session writes, so the figure is the pipeline plus the tool alone;
//! - `logged`: also what the agent's step host does around every call — append `tool/call`,
//!   wait for the log to be on disk before the body (`session/flush` checkpoint), append
//!   `tool/result` — so the figure is what a model-issued call costs inside a turn.
//!
//! The `delegate` job completes at once (the in-process default); its settling (the job's
//! completion notice) is awaited after each timed call, outside the measurement, so each
//! call starts with no job running. The agent is replaced by a fresh one every 1,000
//! delegations (the job service keeps every job; the growth is printed apart).
//! `job_list` over the same 8 live jobs is the baseline of a trivial tool on the same path.
//!
//! `CARGO_TARGET_DIR=… cargo bench -p keel-delegate --bench delegate`
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    missing_docs
)]

use async_trait::async_trait;
use criterion::{Criterion, criterion_group, criterion_main};
use keel_agent::Agent;
use keel_agent::seams::FlushPoint;
use keel_delegate::inprocess::{InProcessProvider, Outcome};
use keel_delegate::reports::Reports;
use keel_delegate::tools::{self, Shared};
use keel_delegate::{DelegateConfig, DelegatePlugin};
use keel_protocol::{
    ApprovalAsked, ApprovalDecided, ContentBlock, EventBody, Message, MessageSource, Role, Seq,
    SurfaceOp, ToolCallBlock, ToolCallEvent, ToolResultBlock, ToolResultEvent,
};
use keel_testkit::agent::{AgentFixture, AgentOptions, PluginRow, agent_fixture};
use keel_tools::{ApprovalOutcome, JobControl, ToolCaller, ToolOutcome};
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

/// Stands in for the agent's step host (see the module docs).
struct BenchHost {
    agent: Agent,
    logged: bool,
    calls: Mutex<HashMap<String, Seq>>,
    approvals: AtomicUsize,
}

impl BenchHost {
    fn new(agent: &Agent, logged: bool) -> Self {
        BenchHost {
            agent: agent.clone(),
            logged,
            calls: Mutex::new(HashMap::new()),
            approvals: AtomicUsize::new(0),
        }
    }
}

#[async_trait]
impl ToolCaller for BenchHost {
    fn caller(&self) -> Option<keel_tools::CallerId> {
        self.agent.caller_id()
    }

    fn jobs(&self) -> Option<Arc<dyn JobControl>> {
        self.agent.jobs()
    }

    async fn call_started(&self, call: &ToolCallBlock) {
        if !self.logged {
            return;
        }
        let seq = self
            .agent
            .push(EventBody::ToolCall(Box::new(ToolCallEvent {
                turn: keel_protocol::TurnNo(1),
                step: keel_protocol::StepNo(1),
                call_id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            })))
            .expect("tool/call appended");
        self.calls.lock().unwrap().insert(call.id.clone(), seq);
    }

    async fn checkpoint(&self) {
        if self.logged {
            self.agent
                .flush(FlushPoint::BeforeToolBody)
                .await
                .expect("flushed");
        }
    }

    async fn ask_approval(&self, call: &ToolCallBlock, reason: &str) -> ApprovalOutcome {
        self.approvals.fetch_add(1, Ordering::Relaxed);
        if self.logged {
            self.agent
                .push(EventBody::ApprovalAsked(Box::new(ApprovalAsked {
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    reason: reason.to_owned(),
                })))
                .expect("approval/asked appended");
            self.agent
                .push(EventBody::ApprovalDecided(Box::new(ApprovalDecided {
                    call_id: call.id.clone(),
                    approved: true,
                    by: "policy".into(),
                    reason: None,
                })))
                .expect("approval/decided appended");
        }
        ApprovalOutcome::Approved
    }

    async fn emit(&self, body: EventBody) {
        if self.logged {
            self.agent.push(body).expect("event appended");
        }
    }

    async fn commit_result(&self, call: &ToolCallBlock, outcome: &ToolOutcome) {
        if !self.logged {
            return;
        }
        let call_seq = self.calls.lock().unwrap().remove(&call.id);
        let message = Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(ToolResultBlock {
                tool_call_id: call.id.clone(),
                content: outcome.content.clone(),
                is_error: outcome.is_error,
            })],
            source: MessageSource::tool(&call.id),
            id: uuid::Uuid::new_v4().to_string(),
        };
        self.agent
            .push_surface(
                EventBody::ToolResult(Box::new(ToolResultEvent {
                    turn: keel_protocol::TurnNo(1),
                    step: keel_protocol::StepNo(1),
                    message,
                    meta: outcome.meta.clone(),
                })),
                SurfaceOp::Append,
                call_seq.into_iter().collect(),
            )
            .expect("tool/result appended");
    }
}

/// A real agent with the `jobs` row and the `delegate` row over an in-process provider.
fn rig(delegate: bool) -> (AgentFixture, Arc<InProcessProvider>) {
    let p = Arc::new(InProcessProvider::new());
    let mut set = keel_host::plugins::builtin();
    set.retain(|pl| pl.id().as_str() != "delegate");
    set.push(Box::new(DelegatePlugin::with_service(p.clone())));
    let mut plugins = vec![PluginRow::new("jobs")];
    if delegate {
        let config = DelegateConfig {
            provider: "inprocess".into(),
            ..DelegateConfig::default()
        };
        plugins.push(PluginRow::with("delegate", &config));
    }
    let f = agent_fixture(
        "responses:\n  - text: \"unused\"\n",
        AgentOptions {
            approval: keel_agent::ApprovalPolicy::Allow,
            plugins,
            plugin_set: Some(set),
            ..AgentOptions::default()
        },
    );
    (f, p)
}

static CALLS: AtomicU64 = AtomicU64::new(0);

fn call(name: &str, args: serde_json::Value) -> [ToolCallBlock; 1] {
    [ToolCallBlock {
        id: format!("bench_{}", CALLS.fetch_add(1, Ordering::Relaxed)),
        name: name.into(),
        arguments: args.to_string(),
    }]
}

async fn run(agent: &Agent, host: &BenchHost, calls: &[ToolCallBlock]) -> ToolOutcome {
    let mut out = agent
        .pipeline()
        .run_batch(calls, host, CancellationToken::new())
        .await;
    let out = out.pop().expect("one outcome");
    assert!(!out.is_error, "{}", out.text());
    out
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// One `delegate` call, timed from dispatch to its result; then its job is awaited, untimed,
/// until it settles.
async fn start_once(agent: &Agent, host: &BenchHost, jobs: &dyn JobControl) -> Duration {
    let c = call(
        "delegate",
        json!({"prompt": "Find the bug in parse() and explain it.", "label": "bench"}),
    );
    let t = Instant::now();
    let out = run(agent, host, &c).await;
    let timed = t.elapsed();
    let id = out.meta.as_ref().expect("meta")["jobId"]
        .as_str()
        .expect("jobId")
        .to_owned();
    let settled = jobs
        .wait(&id, Duration::from_secs(10), &CancellationToken::new())
        .await
        .expect("job");
    assert_ne!(
        settled.info.status,
        keel_tools::jobs::JobStatus::Running,
        "{id} did not settle"
    );
    timed
}

/// A fresh agent for the `delegate` figures, with its host and job control.
struct Starter {
    _f: AgentFixture,
    agent: Agent,
    host: BenchHost,
    jobs: Arc<dyn JobControl>,
    started: usize,
}

impl Starter {
    fn new(logged: bool) -> Self {
        let (f, _p) = rig(true);
        let agent = f.agent.clone();
        let jobs = agent.jobs().expect("job control");
        Starter {
            host: BenchHost::new(&agent, logged),
            _f: f,
            agent,
            jobs,
            started: 0,
        }
    }

    async fn once(&mut self) -> Duration {
        self.started += 1;
        start_once(&self.agent, &self.host, self.jobs.as_ref()).await
    }

    async fn median(&mut self, n: usize) -> Duration {
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            times.push(self.once().await);
        }
        times.sort();
        times[n / 2]
    }
}

/// Delegations one agent starts before the bench replaces it with a fresh one: the job
/// service keeps every settled job and looks jobs up by a linear scan, so an agent that
/// started tens of thousands would measure that scan, not a session's delegation.
const FRESH_EVERY: usize = 1_000;

/// One `delegate` call, from dispatch to its result, on an agent that started at most
/// [`FRESH_EVERY`] delegations before; the job is then left to settle, untimed. The growth
/// with the number of jobs an agent keeps is printed apart.
fn delegate_start(c: &mut Criterion) {
    let rt = runtime();
    let _guard = rt.enter();
    let mut g = c.benchmark_group("delegate");
    g.sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    for logged in [false, true] {
        let name = if logged {
            "delegate start, logged"
        } else {
            "delegate start, bare"
        };
        let mut st = Starter::new(logged);
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let mut timed = Duration::ZERO;
                    for _ in 0..iters {
                        if st.started >= FRESH_EVERY {
                            st = Starter::new(logged);
                        }
                        timed += st.once().await;
                    }
                    timed
                })
            })
        });
        eprintln!(
            "{name}: {} approval prompts answered",
            st.host.approvals.load(Ordering::Relaxed)
        );
    }
    g.finish();
    // Growth: medians of 200 bare calls on a fresh agent, then after 10,000 more.
    let mut st = Starter::new(false);
    let fresh = rt.block_on(st.median(200));
    rt.block_on(async {
        for _ in 0..10_000 {
            st.once().await;
        }
    });
    let kept = st.jobs.list().len();
    let grown = rt.block_on(st.median(200));
    eprintln!(
        "delegate start, bare: median {fresh:?} over the first 200 calls of an agent, {grown:?} once it keeps {kept} jobs"
    );
}

/// `delegate_status` (all, and one id) with 8 live (held) delegations.
fn status_8_live(c: &mut Criterion) {
    let rt = runtime();
    let _guard = rt.enter();
    let (f, p) = rig(true);
    let agent = &f.agent;
    let bare = BenchHost::new(agent, false);
    rt.block_on(async {
        for i in 1..=8 {
            p.script(Outcome::completed(format!("answer {i}")).held());
            run(
                agent,
                &bare,
                &call(
                    "delegate",
                    json!({"prompt": format!("task {i}: read the code and report"), "label": format!("task {i}")}),
                ),
            )
            .await;
        }
        let all = run(agent, &bare, &call("delegate_status", json!({}))).await;
        let text = all.text();
        assert_eq!(text.lines().count(), 8, "{text}");
        assert_eq!(text.matches("[running]").count(), 8, "{text}");
        eprintln!(
            "delegate_status with 8 live: {} bytes of text, {} bytes of meta",
            text.len(),
            all.meta.map_or(0, |m| m.to_string().len())
        );
    });
    let mut g = c.benchmark_group("delegate_status");
    g.sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for logged in [false, true] {
        let host = BenchHost::new(agent, logged);
        let suffix = if logged { "logged" } else { "bare" };
        for (tool, what, args) in [
            ("delegate_status", "all 8 live", json!({})),
            (
                "delegate_status",
                "one of 8 live",
                json!({"job_id": "delegate-5"}),
            ),
            // Baseline: the jobs plugin's own listing of the same 8 jobs.
            ("job_list", "baseline job_list, 8 live", json!({})),
        ] {
            g.bench_function(format!("{what}, {suffix}"), |b| {
                b.iter_custom(|iters| {
                    rt.block_on(async {
                        let mut timed = Duration::ZERO;
                        for _ in 0..iters {
                            let c = call(tool, args.clone());
                            let t = Instant::now();
                            std::hint::black_box(run(agent, &host, &c).await);
                            timed += t.elapsed();
                        }
                        timed
                    })
                })
            });
        }
    }
    g.finish();
    // Let the held delegations end, so the jobs settle before the runtime goes.
    for id in p.job_ids() {
        p.finish(&id);
    }
}

/// The six schemas: serialised on their own (as `tests/seam_only.rs` counts them), and what
/// the `delegate` row adds to the `tools` array of every request.
fn schemas(_c: &mut Criterion) {
    let shared = Shared::new(
        Arc::new(InProcessProvider::new()),
        Arc::new(Reports::new(3, 16_000)),
        16_000,
    );
    let each: Vec<(String, usize)> = tools::all(&shared)
        .iter()
        .map(|t| {
            let s = t.schema();
            (
                s.name.clone(),
                serde_json::to_vec(&s).expect("schema").len(),
            )
        })
        .collect();
    let total: usize = each.iter().map(|(_, n)| n).sum();
    for (name, n) in &each {
        eprintln!("schema {name}: {n} bytes");
    }
    eprintln!("six schemas (compact JSON, name+description+parameters): {total} bytes");
    let rt = runtime();
    let _guard = rt.enter();
    let with = rig(true)
        .0
        .agent
        .pipeline()
        .registry()
        .request_tools_bytes();
    let without = rig(false)
        .0
        .agent
        .pipeline()
        .registry()
        .request_tools_bytes();
    eprintln!(
        "request `tools` array: {with} bytes with the delegate row, {without} without: +{} bytes per request",
        with - without
    );
}

criterion_group!(benches, schemas, delegate_start, status_8_live);
criterion_main!(benches);
