//! Plan mode through the agent: entered before a turn (`Agent::enter_plan_mode`), the plan
//! handed to the user when nobody can approve it (the turn ends after that step, with the plan
//! as its answer), approved in the turn by an approver or between turns
//! (`Agent::approve_plan`), and restored by a cold resume.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use futures::future::BoxFuture;
use keel_agent::{ApprovalPolicy, Approver, HookRegistry, PLAN_APPROVED_PROMPT};
use keel_protocol::{EventBody, PlanModeEvent, ToolCallBlock, TurnEndReason};
use keel_testkit::agent::{AgentOptions, agent_fixture, resume_fixture};
use keel_tools::{ApprovalOutcome, PLAN_AWAITS_APPROVAL, PlanModeSection, SandboxMode};
use pretty_assertions::assert_eq;
use std::sync::Arc;

const PLAN: &str = "1. Add greet() to a.py\n2. Test it";

/// The model tries to write while planning, then hands in [`PLAN`]; a third response is there
/// only to be left unused when the turn ends after the plan.
const PLANNING: &str = r#"
responses:
  - tool_calls:
      - {id: c_write, name: write, arguments: {path: "a.py", content: "x"}}
  - match: {last_tool_result_contains: "plan mode is active"}
    tool_calls:
      - {id: c_plan, name: exit_plan_mode, arguments: {plan: "1. Add greet() to a.py\n2. Test it"}}
  - text: "carried on after the plan"
"#;

fn plan_events(f: &Fixture) -> Vec<PlanModeEvent> {
    events(f)
        .into_iter()
        .filter_map(|e| match e.body {
            EventBody::PlanMode(p) => Some(*p),
            _ => None,
        })
        .collect()
}

fn handed_off_event() -> PlanModeEvent {
    PlanModeEvent {
        active: true,
        plan: Some(PLAN.into()),
        approved: Some(false),
    }
}

fn entered_event() -> PlanModeEvent {
    PlanModeEvent {
        active: true,
        plan: None,
        approved: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_plan_ends_the_turn_with_the_plan_as_its_answer() {
    let f = fixture(PLANNING, HookRegistry::default());
    assert!(f.agent.enter_plan_mode().unwrap());
    assert!(!f.agent.enter_plan_mode().unwrap(), "already active");
    assert!(f.agent.in_plan_mode());
    f.agent.followup("add a greeting").unwrap();
    let outcome = f.agent.run_pending().await.unwrap().unwrap();

    assert!(outcome.handed_off);
    assert!(!outcome.completed());
    assert_eq!(
        outcome.reason,
        TurnEndReason::Blocked {
            reason: Some(PLAN_AWAITS_APPROVAL.into())
        }
    );
    assert_eq!(outcome.final_text, PLAN);
    // Two requests: the third response was never asked for.
    let reqs = f.provider.requests();
    assert_eq!(reqs.len(), 2);
    assert!(
        reqs[0].system.contains(PlanModeSection::TEXT),
        "{}",
        reqs[0].system
    );
    assert!(!f.work.path().join("a.py").exists());
    // Plan mode stays on with the plan awaiting approval; the log says so once each.
    assert!(f.agent.in_plan_mode());
    assert_eq!(f.agent.proposed_plan().as_deref(), Some(PLAN));
    assert_eq!(plan_events(&f), vec![entered_event(), handed_off_event()]);
    // The turn's last step is the one that handed the plan in.
    let t = types(&f);
    let tail: Vec<&str> = t.iter().rev().take(3).rev().map(String::as_str).collect();
    assert_eq!(tail, ["tool/result", "step/end", "turn/end"]);
}

/// `--approval never` asks nobody either: the plan is handed over the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_approval_never_the_plan_is_handed_over_too() {
    let f = fixture_with(
        PLANNING,
        HookRegistry::default(),
        SandboxMode::WorkspaceWrite,
        ApprovalPolicy::Deny,
    );
    f.agent.enter_plan_mode().unwrap();
    f.agent.followup("add a greeting").unwrap();
    let outcome = f.agent.run_pending().await.unwrap().unwrap();
    assert!(outcome.handed_off);
    assert_eq!(outcome.final_text, PLAN);
    assert_eq!(f.provider.requests().len(), 2);
}

/// `--approval auto` approves at once: plan mode ends and the same turn goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_approval_auto_the_turn_goes_on_with_the_plan() {
    let f = fixture_with(
        PLANNING,
        HookRegistry::default(),
        SandboxMode::WorkspaceWrite,
        ApprovalPolicy::Allow,
    );
    f.agent.enter_plan_mode().unwrap();
    f.agent.followup("add a greeting").unwrap();
    let outcome = f.agent.run_pending().await.unwrap().unwrap();
    assert!(outcome.completed());
    assert!(!outcome.handed_off);
    assert_eq!(outcome.final_text, "carried on after the plan");
    assert!(!f.agent.in_plan_mode());
    assert_eq!(f.agent.proposed_plan(), None);
}

/// An interactive front end's approver.
struct Answer(ApprovalOutcome);

impl Approver for Answer {
    fn decide<'a>(
        &'a self,
        call: &'a ToolCallBlock,
        _reason: &'a str,
    ) -> BoxFuture<'a, ApprovalOutcome> {
        assert_eq!(call.name, "exit_plan_mode");
        Box::pin(std::future::ready(self.0.clone()))
    }
}

fn with_approver(answer: ApprovalOutcome) -> Fixture {
    agent_fixture(
        PLANNING,
        AgentOptions {
            approver: Some(Arc::new(Answer(answer))),
            ..AgentOptions::default()
        },
    )
}

/// With an approver (a terminal UI) the person decides in the turn; answering `Unanswered`
/// ("later") hands the plan over like a headless run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_decides_in_the_turn_or_leaves_it_for_later() {
    let f = with_approver(ApprovalOutcome::Approved);
    f.agent.enter_plan_mode().unwrap();
    f.agent.followup("add a greeting").unwrap();
    let outcome = f.agent.run_pending().await.unwrap().unwrap();
    assert!(outcome.completed(), "{:?}", outcome.reason);
    assert_eq!(outcome.final_text, "carried on after the plan");
    assert!(!f.agent.in_plan_mode());
    assert_eq!(
        plan_events(&f).last(),
        Some(&PlanModeEvent {
            active: false,
            plan: Some(PLAN.into()),
            approved: Some(true),
        })
    );

    let f = with_approver(ApprovalOutcome::Unanswered { reason: None });
    f.agent.enter_plan_mode().unwrap();
    f.agent.followup("add a greeting").unwrap();
    let outcome = f.agent.run_pending().await.unwrap().unwrap();
    assert!(outcome.handed_off);
    assert_eq!(outcome.final_text, PLAN);
    assert_eq!(f.provider.requests().len(), 2);
    assert_eq!(f.agent.proposed_plan().as_deref(), Some(PLAN));
}

const CARRY_OUT: &str = r#"
responses:
  - match: {last_user_contains: "I approve the plan"}
    tool_calls:
      - {id: c_do, name: write, arguments: {path: "a.py", content: "def greet(): pass\n"}}
  - text: "Done."
"#;

/// Between turns: a cold resume keeps plan mode and the plan awaiting approval;
/// `approve_plan` ends plan mode, logs the approval and queues the turn that carries it out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_session_keeps_plan_mode_until_the_plan_is_approved() {
    let f = fixture(PLANNING, HookRegistry::default());
    f.agent.enter_plan_mode().unwrap();
    f.agent.followup("add a greeting").unwrap();
    f.agent.run_pending().await.unwrap().unwrap();
    let session = f.session_path.clone();
    let home = f.home.path().to_path_buf();
    let cwd = f.cwd.clone();
    drop(f.agent);

    let (agent, provider) = resume_fixture(&home, &cwd, &session, CARRY_OUT, ApprovalPolicy::Ask);
    assert!(agent.in_plan_mode(), "plan mode is restored from the log");
    assert_eq!(agent.proposed_plan().as_deref(), Some(PLAN));
    assert_eq!(
        agent
            .approve_plan(Some("  keep it short "))
            .unwrap()
            .as_deref(),
        Some(PLAN)
    );
    assert!(!agent.in_plan_mode());
    assert_eq!(agent.proposed_plan(), None);
    assert_eq!(agent.approve_plan(None).unwrap(), None, "nothing left");
    let outcome = agent.run_pending().await.unwrap().unwrap();
    assert!(outcome.completed(), "{:?}", outcome.reason);
    assert_eq!(outcome.final_text, "Done.");
    assert_eq!(
        std::fs::read_to_string(cwd.join("a.py")).unwrap(),
        "def greet(): pass\n"
    );
    let reqs = provider.requests();
    assert!(!reqs[0].system.contains(PlanModeSection::TEXT));
    let last_user = reqs[0]
        .messages
        .iter()
        .rev()
        .find(|m| m.role == keel_protocol::Role::User && m.tool_results().next().is_none())
        .unwrap()
        .text();
    assert!(
        last_user.ends_with(&format!("{PLAN_APPROVED_PROMPT}\n\nkeep it short")),
        "{last_user}"
    );
    let approved: Vec<PlanModeEvent> = agent
        .log()
        .session()
        .events()
        .filter_map(|e| match &e.body {
            EventBody::PlanMode(p) => Some((**p).clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        approved,
        vec![
            entered_event(),
            handed_off_event(),
            PlanModeEvent {
                active: false,
                plan: Some(PLAN.into()),
                approved: Some(true),
            }
        ]
    );
}
