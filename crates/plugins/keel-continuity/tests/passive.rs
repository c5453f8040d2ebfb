//! Passive continuity end to end: a real agent (built by the host factory, real workspace,
//! real session file, `$KEEL_HOME` anchors) on a scripted model with a small context window.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_agent::agent::Agent;
use keel_protocol::{
    EventBody, KnownSource, Message, MessageSource, Seq, SessionEvent, TurnEndReason,
};
use keel_testkit::agent::{AgentFixture, AgentOptions, PluginRow, agent_fixture, events_of};
use pretty_assertions::assert_eq;
use std::collections::HashSet;

const T0: &str = "[T0] remember the codeword ZEBRA-7; you will need it later";
const T1: &str = "[T1] plan the audit, then read the files";
const PLAN: &str = "PLAN-ALPHA: 1. count lines with a subagent 2. read f01..f12 3. report";
const CHILD_ANSWER: &str = "CHILD-RESULT: f01.txt has 60 lines";
const READS: usize = 12;

/// T0 answered at once; T1: `exit_plan_mode`, `todo_write`, a foreground subagent, then
/// twelve reads (the window fills: pressure compaction mid-turn), then the answer. Unmatched
/// responses serve summary requests.
fn script() -> String {
    let mut s = String::from("responses:\n");
    // Summary requests end with the compaction instruction; they come first so that no step
    // response answers one.
    for i in 1..=6 {
        s += &format!(
            "  - match: {{last_message_contains: \"Context compaction\"}}\n    text: \"SUMMARY {i}: files were read.\"\n"
        );
    }
    s += "  - match: {last_user_contains: \"[T0]\"}\n    text: \"Noted.\"\n";
    s += &format!(
        "  - match: {{last_user_contains: \"[T1]\"}}\n    text: \"Proposing.\"\n    tool_calls:\n      - {{id: c_plan, name: exit_plan_mode, arguments: {{plan: \"{PLAN}\"}}}}\n"
    );
    s += "  - match: {last_user_contains: \"[T1]\"}\n    text: \"Tracking.\"\n    tool_calls:\n      - {id: c_todo, name: todo_write, arguments: {todos: [{content: \"count lines\", status: completed}, {content: \"read the files\", status: in_progress}, {content: \"report\", status: pending}]}}\n";
    s += "  - match: {last_user_contains: \"[T1]\"}\n    text: \"Delegating.\"\n    tool_calls:\n      - {id: c_child, name: subagent, arguments: {description: \"count lines\", prompt: \"[CHILD] count the lines of f01.txt\"}}\n";
    s += &format!("  - match: {{last_user_contains: \"[CHILD]\"}}\n    text: \"{CHILD_ANSWER}\"\n");
    for n in 1..=READS {
        s += &format!(
            "  - match: {{last_user_contains: \"[T1]\"}}\n    text: \"Reading f{n:02}.\"\n    tool_calls:\n      - {{id: c_read_{n:02}, name: read, arguments: {{path: \"f{n:02}.txt\"}}}}\n"
        );
    }
    s += "  - match: {last_user_contains: \"[T1]\"}\n    text: \"Audit done.\"\n";
    s
}

fn files() -> Vec<(String, String)> {
    (1..=READS)
        .map(|n| {
            let body: String = (0..60)
                .map(|i| {
                    format!(
                        "file {n:02} line {i:04}: the quick brown fox jumps over the lazy dog\n"
                    )
                })
                .collect();
            (format!("f{n:02}.txt"), body)
        })
        .collect()
}

fn fixture(continuity: bool) -> AgentFixture {
    let mut plugins = vec![PluginRow::new("compaction"), PluginRow::new("subagent")];
    if continuity {
        plugins.push(PluginRow::new("continuity"));
    }
    agent_fixture(
        &script(),
        AgentOptions {
            approval: keel_agent::ApprovalPolicy::Allow,
            plugins,
            files: files(),
            edit: Some(Box::new(|c| c.model_info.context_window = 16_384)),
            ..AgentOptions::default()
        },
    )
}

async fn run_both_turns(agent: &Agent) {
    agent.followup(T0).unwrap();
    let o = agent.run_pending().await.unwrap().unwrap();
    assert_eq!(o.reason, TurnEndReason::Completed);
    agent.pipeline().plan_state().set_active(true);
    agent.followup(T1).unwrap();
    let o = agent.run_pending().await.unwrap().unwrap();
    assert_eq!(o.reason, TurnEndReason::Completed);
    assert_eq!(o.final_text, "Audit done.");
}

fn is_projection(m: &Message) -> bool {
    matches!(&m.source, MessageSource::Known(KnownSource::Plugin { plugin, extra })
        if plugin == "keel/continuity" && extra.get("form").is_some_and(|f| f == "projection"))
}

fn wire(r: &keel_llm::ChatRequest) -> String {
    let body = keel_llm::request_body(
        r,
        &keel_llm::ModelCatalogue::default().lookup(r.model.as_str()),
    );
    serde_json::to_string(&body).unwrap()
}

fn projections(evs: &[SessionEvent]) -> Vec<&SessionEvent> {
    evs.iter()
        .filter(|e| e.type_name() == "continuity/projection")
        .collect()
}

fn data(ev: &SessionEvent) -> &serde_json::Value {
    let EventBody::Other(o) = &ev.body else {
        unreachable!()
    };
    &o.data
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_byte_identical_on_and_off_until_the_first_boundary() {
    let on = fixture(true);
    let off = fixture(false);
    run_both_turns(&on.agent).await;
    run_both_turns(&off.agent).await;
    let (a, b) = (on.provider.requests(), off.provider.requests());
    let evs = events_of(&on.agent);
    let first_replace = evs
        .iter()
        .position(|e| matches!(e.surface_op, Some(keel_protocol::SurfaceOp::Replace { .. })))
        .expect("the window forces a compaction");
    assert!(first_replace > 0);
    // Requests before the first projection: the same bytes, except the workspace path the
    // system prompt names (two fixtures, two temporary directories).
    let first_projected = a
        .iter()
        .position(|r| r.messages.iter().any(is_projection))
        .expect("a projection after the compaction");
    // T0, plan, todo, the subagent call; then the child's first request is a boundary.
    assert_eq!(first_projected, 4);
    assert!(
        wire(&a[4]).contains("[CHILD]"),
        "the child's first request is projected"
    );
    let norm = |r: &keel_llm::ChatRequest, cwd: &std::path::Path| {
        wire(r).replace(&cwd.display().to_string(), "<cwd>")
    };
    for i in 0..first_projected {
        assert_eq!(norm(&a[i], &on.cwd), norm(&b[i], &off.cwd), "request {i}");
    }
    // No file in the workspace beyond the fixture's own.
    let listed = |p: &std::path::Path| {
        let mut v: Vec<String> = std::fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(listed(&on.cwd), listed(&off.cwd));
    // The anchors live under $KEEL_HOME, not in the workspace.
    assert!(on.home.path().join("continuity/authority").is_dir());
    assert!(!off.home.path().join("continuity").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pressure_compaction_reprojects_what_left_the_surface_once_per_boundary() {
    let f = fixture(true);
    run_both_turns(&f.agent).await;
    let evs = events_of(&f.agent);
    let replaces: Vec<Seq> = evs
        .iter()
        .filter(|e| matches!(e.surface_op, Some(keel_protocol::SurfaceOp::Replace { .. })))
        .map(|e| e.seq)
        .collect();
    assert!(!replaces.is_empty(), "the small window forces a compaction");
    let projected = projections(&evs);
    assert!(!projected.is_empty());
    // Each projection answers a replacement, one projection per boundary, in order.
    let mut answered = Vec::new();
    for p in &projected {
        let b = Seq(data(p)["boundarySeq"].as_u64().unwrap());
        assert!(replaces.contains(&b), "boundary {b} is a replacement");
        assert!(
            answered.last().is_none_or(|&l| b > l),
            "one projection per boundary"
        );
        // No other replacement between this boundary and its projection was left unanswered.
        answered.push(b);
    }
    for r in &replaces {
        assert!(
            answered.iter().any(|a| a >= r),
            "replacement {r} was answered by a projection"
        );
    }

    // The first projection message, and what was on the surface when it was written.
    let first = projected[0];
    let msg_ev = evs
        .iter()
        .rev()
        .find(|e| {
            e.seq < first.seq && matches!(&e.body, EventBody::UserMessage(m) if is_projection(m))
        })
        .expect("the projection message precedes its event");
    let EventBody::UserMessage(msg) = &msg_ev.body else {
        unreachable!()
    };
    let text = msg.text();
    // T0 left the surface: its exact words are back; T1 (the current prompt) never leaves it
    // and is not repeated.
    assert!(text.contains(T0), "{text}");
    assert!(
        !text.contains(T1),
        "the current prompt is still on the surface: {text}"
    );
    let items: Vec<&str> = data(first)["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    // Which of plan / todo / child were replaced decides whether they are projected.
    let surface_at = surface_at(&evs, msg_ev.seq);
    let result_of = |call: &str| {
        evs.iter()
            .find(|e| matches!(&e.body, EventBody::ToolResult(r) if r.message.tool_results().any(|b| b.tool_call_id == call)))
            .unwrap()
            .seq
    };
    for (kind, call, needle) in [
        ("plan", "c_plan", PLAN),
        ("todo", "c_todo", "[~] read the files"),
        ("child", "c_child", CHILD_ANSWER),
    ] {
        let gone = !surface_at.contains(&result_of(call));
        assert_eq!(
            items.contains(&kind),
            gone,
            "{kind} projected iff replaced: {items:?}"
        );
        assert_eq!(text.contains(needle), gone, "{kind}: {text}");
    }
    assert!(items.contains(&"lineage"));
    // The next request carries it, joined into the step's user message.
    let reqs = f.provider.requests();
    assert!(
        reqs.iter()
            .any(|r| r.messages.iter().any(|m| m.id == msg.id))
    );
}

/// The surface as it was just before `seq` (replaying surface ops).
fn surface_at(evs: &[SessionEvent], seq: Seq) -> HashSet<Seq> {
    let mut nodes: Vec<Seq> = Vec::new();
    for e in evs.iter().take_while(|e| e.seq < seq) {
        match &e.surface_op {
            Some(keel_protocol::SurfaceOp::Append) => nodes.push(e.seq),
            Some(keel_protocol::SurfaceOp::Replace { start, end }) => {
                let from = nodes.iter().position(|s| s == start).unwrap();
                let to = nodes.iter().position(|s| s == end).unwrap();
                nodes.splice(from..=to, [e.seq]);
            }
            None => {}
        }
    }
    nodes.into_iter().collect()
}

/// A plan handed to the user unapproved (headless) is not the approved plan; once approved
/// between turns (`Agent::approve_plan`), it is, with the handing-in call's result as its
/// source; a plan refused for good never becomes one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_approved_after_it_was_handed_over_is_the_approved_plan() {
    let f = agent_fixture(
        "responses:\n  - tool_calls:\n      - {id: c_plan, name: exit_plan_mode, arguments: {plan: \"1. do it\"}}\n  - text: \"Done.\"\n",
        AgentOptions::default(),
    );
    let plan = |agent: &Agent| {
        let log = agent.log();
        let s = log.session();
        keel_continuity::basis::fold(s, s.next_seq(), 0, &Default::default()).plan
    };
    f.agent.enter_plan_mode().unwrap();
    f.agent.followup("plan it").unwrap();
    let o = f.agent.run_pending().await.unwrap().unwrap();
    assert!(o.handed_off);
    assert_eq!(plan(&f.agent), None);
    let result_seq = events_of(&f.agent)
        .iter()
        .rev()
        .find(|e| e.type_name() == "tool/result")
        .unwrap()
        .seq;
    f.agent.approve_plan(None).unwrap().unwrap();
    assert_eq!(
        plan(&f.agent),
        Some(keel_continuity::basis::Plan {
            seq: result_seq,
            plan: "1. do it".into()
        })
    );
}
