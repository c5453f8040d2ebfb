//! The `subagent` tool end to end: real child sessions on disk with lineage, results in the
//! parent, the depth limit, never-ask children, fork seeding, background children as jobs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use keel_agent::seams::SubagentNotice;
use keel_agent::subagent::{SubagentConfig, SubagentMode};
use keel_agent::{ApprovalPolicy, HookRegistry};
use keel_protocol::{EventBody, SubagentDescriptor, TurnEndReason};
use keel_tools::SandboxMode;
use pretty_assertions::assert_eq;
use std::sync::{Arc, Mutex};
use support::*;

fn descriptors(rig: &Rig) -> Vec<SubagentDescriptor> {
    events_of(&rig.agent)
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::SubagentDescriptor(d) => Some((**d).clone()),
            _ => None,
        })
        .collect()
}

fn tool_names(req: &keel_llm::ChatRequest) -> Vec<String> {
    req.tools.iter().map(|t| t.name.clone()).collect()
}

const PROMPT: &str = "Count the files.\n  Exactly — \"bytes\" ✓\t{kept}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_spawn_child_writes_its_own_session_and_answers_the_parent() {
    let script = r#"
responses:
  - tool_calls:
      - {id: call_sub, name: subagent, arguments: {description: "count files", prompt: "Count the files.\n  Exactly — \"bytes\" ✓\t{kept}"}}
  - text: "There are 2 files."
  - text: "The subagent says 2."
"#;
    let seen: Arc<Mutex<Vec<(&'static str, SubagentNotice)>>> = Arc::default();
    let mut hooks = HookRegistry::default();
    let s = seen.clone();
    hooks
        .subagent_started
        .push(Arc::new(move |n: &SubagentNotice| {
            s.lock().unwrap().push(("started", n.clone()))
        }));
    let s = seen.clone();
    hooks
        .subagent_finished
        .push(Arc::new(move |n: &SubagentNotice| {
            s.lock().unwrap().push(("finished", n.clone()))
        }));
    let config = SubagentConfig {
        max_depth: 1,
        ..SubagentConfig::default()
    };
    let rig = rig(
        script,
        Options {
            subagent: Some(config),
            hooks,
            ..Options::default()
        },
    );

    rig.agent
        .followup("How many files? Ask a subagent.")
        .unwrap();
    let outcome = guarded(rig.agent.run_until_idle()).await.unwrap().unwrap();
    assert_eq!(outcome.final_text, "The subagent says 2.");

    // The child's final answer is the parent's tool result, byte for byte.
    let parent_events = events_of(&rig.agent);
    assert_eq!(
        tool_results(&parent_events),
        vec!["There are 2 files.".to_owned()]
    );
    let d = descriptors(&rig);
    assert_eq!(d.len(), 1);
    let child_id = d[0].child_session.clone();
    assert_eq!(
        d[0],
        SubagentDescriptor {
            child_session: child_id.clone(),
            description: "count files".into(),
            mode: "spawn".into(),
            background: false,
            call_id: Some("call_sub".into()),
            delegation_depth: 1,
            via: None,
        }
    );

    // The child's log on disk: lineage header, the prompt as its first user message after the
    // runtime context, one completed turn, a never-ask policy.
    let child = load(&session_file(&rig, child_id.as_str()));
    let h = child.header();
    assert_eq!(h.parent_session.as_ref(), Some(&rig.agent.session_id()));
    assert_eq!(h.origin.as_deref(), Some("subagent"));
    assert_eq!(h.delegation_depth, 1);
    assert_eq!(h.seed_length, None);
    let child_events: Vec<_> = child.events().map(|e| e.into_owned()).collect();
    let child_messages = user_messages(&child_events);
    assert!(
        child_messages[0]
            .text()
            .starts_with("Current runtime context.")
    );
    let first = &child_messages[1];
    assert_eq!(first.text(), PROMPT);
    assert_eq!(
        first.source.plugin_id(),
        Some(keel_agent::subagent::ID.source())
    );
    assert!(
        child_events
            .iter()
            .any(|e| matches!(&e.body, EventBody::ApprovalPolicy(p) if p.policy == "deny"))
    );
    let ends: Vec<_> = child_events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::TurnEnd(t) => Some(t.reason.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ends, vec![TurnEndReason::Completed]);
    child.check_invariants().unwrap();

    // The child's tools: the parent's minus subagent (depth limit reached), the job tools and
    // exit_plan_mode.
    let reqs = rig.provider.requests();
    assert_eq!(reqs.len(), 3);
    let parent_tools = tool_names(&reqs[0]);
    assert!(
        parent_tools.iter().any(|t| t == "subagent")
            && parent_tools.iter().any(|t| t == "job_output")
    );
    assert_eq!(
        tool_names(&reqs[1]),
        vec![
            "read",
            "write",
            "edit",
            "glob",
            "grep",
            "bash",
            "working_directory",
            "todo_write"
        ]
    );
    assert_eq!(
        reqs[1]
            .messages
            .iter()
            .filter(|m| m.text() == PROMPT)
            .count(),
        1
    );

    // Observers.
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].0, "started");
    assert_eq!(
        (seen[0].1.child.clone(), seen[0].1.result.clone()),
        (child_id.clone(), None)
    );
    assert_eq!(seen[1].0, "finished");
    assert_eq!(seen[1].1.result.as_deref(), Some("There are 2 files."));
    assert_eq!(seen[1].1.parent, rig.agent.session_id());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn depth_limit_refuses_the_call_and_children_at_the_limit_lose_the_tool() {
    // A top-level agent with max_depth 0 may not delegate at all.
    let script = r#"
responses:
  - tool_calls:
      - {id: c1, name: subagent, arguments: {description: "x", prompt: "do x"}}
  - text: "ok, myself then"
"#;
    let config = SubagentConfig {
        max_depth: 0,
        ..SubagentConfig::default()
    };
    let shallow = rig(
        script,
        Options {
            subagent: Some(config),
            ..Options::default()
        },
    );
    shallow.agent.followup("delegate").unwrap();
    guarded(shallow.agent.run_until_idle())
        .await
        .unwrap()
        .unwrap();
    let results = tool_results(&events_of(&shallow.agent));
    assert_eq!(results.len(), 1);
    assert!(
        results[0].starts_with("DENIED: delegation depth limit reached"),
        "{}",
        results[0]
    );
    assert!(descriptors(&shallow).is_empty(), "no child was created");
    assert!(
        std::fs::read_dir(shallow.fixture.home.path().join("sessions"))
            .unwrap()
            .count()
            == 1
    );

    // With max_depth 2, a child (depth 1) keeps a subagent tool; its child (depth 2) does not,
    // and a depth-2 call to it is unknown.
    let script = r#"
responses:
  - tool_calls:
      - {id: p1, name: subagent, arguments: {description: "level one", prompt: "L1"}}
  - tool_calls:
      - {id: k1, name: subagent, arguments: {description: "level two", prompt: "L2"}}
  - tool_calls:
      - {id: g1, name: subagent, arguments: {description: "level three", prompt: "L3"}}
  - text: "grandchild done"
  - text: "child done"
  - text: "parent done"
"#;
    let config = SubagentConfig {
        max_depth: 2,
        ..SubagentConfig::default()
    };
    let deep = rig(
        script,
        Options {
            subagent: Some(config),
            ..Options::default()
        },
    );
    deep.agent.followup("go deep").unwrap();
    let outcome = guarded(deep.agent.run_until_idle()).await.unwrap().unwrap();
    assert_eq!(outcome.final_text, "parent done");
    let reqs = deep.provider.requests();
    assert!(
        tool_names(&reqs[1]).contains(&"subagent".to_owned()),
        "depth 1 may delegate"
    );
    assert!(
        !tool_names(&reqs[2]).contains(&"subagent".to_owned()),
        "depth 2 may not"
    );
    let last_of_grandchild = reqs[3]
        .messages
        .last()
        .unwrap()
        .tool_results()
        .next()
        .unwrap()
        .text();
    assert!(
        last_of_grandchild.starts_with("UNKNOWN_TOOL"),
        "{last_of_grandchild}"
    );
    assert_eq!(
        tool_results(&events_of(&deep.agent)),
        vec!["child done".to_owned()]
    );
    let child = descriptors(&deep)[0].child_session.clone();
    let child_log = load(&session_file(&deep, child.as_str()));
    let grand = child_log
        .events()
        .find_map(|e| match &e.body {
            EventBody::SubagentDescriptor(d) => Some((**d).clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(grand.delegation_depth, 2);
    let grand_log = load(&session_file(&deep, grand.child_session.as_str()));
    assert_eq!(grand_log.header().delegation_depth, 2);
    assert_eq!(grand_log.header().parent_session.as_ref(), Some(&child));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_cannot_ask_for_approval_their_asks_are_denied() {
    let script = r#"
responses:
  - tool_calls:
      - {id: p1, name: subagent, arguments: {description: "run it", prompt: "run echo"}}
  - tool_calls:
      - {id: k1, name: bash, arguments: {command: "echo should-not-run > ran.txt"}}
  - text: "I was not allowed to run it."
  - text: "done"
"#;
    // A read-only sandbox asks before commands; the parent could ask (an approver would be
    // consulted), the child may not.
    let rig = rig(
        script,
        Options {
            sandbox: SandboxMode::ReadOnly,
            approval: ApprovalPolicy::Ask,
            ..Options::default()
        },
    );
    rig.agent.followup("go").unwrap();
    guarded(rig.agent.run_until_idle()).await.unwrap().unwrap();
    assert!(!rig.fixture.work.path().join("ran.txt").exists());
    let child = descriptors(&rig)[0].child_session.clone();
    let child_events: Vec<_> = load(&session_file(&rig, child.as_str()))
        .events()
        .map(|e| e.into_owned())
        .collect();
    let decided: Vec<_> = child_events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::ApprovalDecided(d) => Some((d.approved, d.by.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(decided, vec![(false, "policy".to_owned())]);
    assert!(
        tool_results(&child_events)[0].starts_with("DENIED"),
        "{:?}",
        tool_results(&child_events)
    );
    assert_eq!(
        tool_results(&events_of(&rig.agent)),
        vec!["I was not allowed to run it.".to_owned()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_child_is_seeded_with_the_parent_log_up_to_its_last_completed_turn() {
    let script = r#"
responses:
  - text: "The answer to the first question is 7."
  - tool_calls:
      - {id: p1, name: subagent, arguments: {description: "double it", prompt: "Double the earlier answer."}}
  - text: "14"
  - text: "The fork says 14."
"#;
    let config = SubagentConfig {
        mode: SubagentMode::Fork,
        ..SubagentConfig::default()
    };
    let rig = rig(
        script,
        Options {
            subagent: Some(config),
            ..Options::default()
        },
    );
    rig.agent.followup("First question?").unwrap();
    rig.agent.followup("Now delegate the doubling.").unwrap();
    let outcome = guarded(rig.agent.run_until_idle()).await.unwrap().unwrap();
    assert_eq!(outcome.final_text, "The fork says 14.");
    assert_eq!(tool_results(&events_of(&rig.agent)), vec!["14".to_owned()]);

    let d = &descriptors(&rig)[0];
    assert_eq!(d.mode, "fork");
    let boundary = {
        let log = rig.agent.log();
        log.session().last_turn_end().unwrap()
    };
    let child = load(&session_file(&rig, d.child_session.as_str()));
    let h = child.header();
    assert_eq!(h.origin.as_deref(), Some("subagent"));
    assert_eq!(h.delegation_depth, 1);
    assert_eq!(h.parent_session.as_ref(), Some(&rig.agent.session_id()));
    // Seeded with the parent's first (completed) turn; the second turn's input, pending in the
    // parent's inbox at the boundary, did not leak into the child.
    let first_turn_end = {
        let parent = rig.agent.log();
        parent
            .session()
            .events()
            .find(|e| matches!(e.body, EventBody::TurnEnd(_)))
            .unwrap()
            .seq
            .0
    };
    assert!(boundary.0 > first_turn_end);
    assert_eq!(h.seed_length, Some(first_turn_end + 1));
    let child_events: Vec<_> = child.events().map(|e| e.into_owned()).collect();
    assert!(matches!(
        child_events[first_turn_end as usize + 1].body,
        EventBody::SessionEndSeed(_)
    ));
    assert_eq!(
        child_events
            .iter()
            .filter(|e| matches!(e.body, EventBody::TurnStart(_)))
            .count(),
        2
    );
    child.check_invariants().unwrap();
    // The child's request carries the parent's first exchange, then the prompt.
    let reqs = rig.provider.requests();
    let texts: Vec<String> = reqs[2]
        .messages
        .iter()
        .map(|m| m.text())
        .filter(|t| !t.starts_with("Current runtime"))
        .collect();
    assert_eq!(
        texts,
        vec![
            "First question?".to_owned(),
            "The answer to the first question is 7.".to_owned(),
            "Double the earlier answer.".to_owned()
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_child_runs_as_a_job_answers_in_a_notice_and_stays_alive() {
    // The parent's and the child's requests interleave, so responses are matched: the parent's
    // by the job's tool result, the child's by its prompt (it has no human message, and its
    // prompt is its last user message) and then by its own tool result. The child waits for a file the test creates once the
    // parent's turn is over, so its answer wakes an idle parent.
    let script = r#"
responses:
  - tool_calls:
      - {id: p1, name: subagent, arguments: {description: "research", prompt: "Find the answer.", run_in_background: true}}
  - match: {last_tool_result_contains: "in the background"}
    text: "Waiting for the subagent."
  - match: {last_user_contains: "Find the answer."}
    tool_calls:
      - {id: k1, name: bash, arguments: {command: "while [ ! -f release ]; do sleep 0.02; done; echo released"}}
  - match: {last_tool_result_contains: "released"}
    text: "The answer is 42."
  - match: {last_tool_result_contains: "in the background"}
    text: "The subagent found 42."
"#;
    let rig = rig(script, Options::default());
    rig.agent.followup("Research in the background.").unwrap();
    let first = guarded(rig.agent.run_pending()).await.unwrap().unwrap();
    assert_eq!(first.final_text, "Waiting for the subagent.");
    let jobs = rig.jobs().unwrap();
    assert_eq!(jobs.running(), 1);
    std::fs::write(rig.fixture.work.path().join("release"), "").unwrap();
    let outcome = guarded(rig.agent.run_until_idle()).await.unwrap().unwrap();
    assert_eq!(
        (outcome.turn.0, outcome.final_text.as_str()),
        (2, "The subagent found 42.")
    );

    let events = events_of(&rig.agent);
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    assert!(
        results[0].starts_with("Started subagent subagent-1"),
        "{}",
        results[0]
    );
    let d = &descriptors(&rig)[0];
    assert!(d.background);
    // The answer arrived as a keel/jobs notice that woke the idle parent.
    let notices: Vec<String> = user_messages(&events)
        .iter()
        .filter(|m| m.source.plugin_id() == Some(keel_jobs::ID.source()))
        .map(|m| m.text())
        .collect();
    assert_eq!(notices.len(), 1);
    assert!(
        notices[0].starts_with("Subagent subagent-1 (research) answered:\nThe answer is 42.\n"),
        "{}",
        notices[0]
    );
    // It stays alive, waiting for a message, and does not keep the driver waiting; a kill
    // ends it.
    let jobs = rig.jobs().unwrap();
    let list = jobs.list();
    assert_eq!(list.len(), 1);
    assert_eq!(
        (list[0].status, list[0].waiting),
        (keel_tools::JobStatus::Running, true)
    );
    assert_eq!(jobs.running(), 0);
    assert_eq!(rig.agent.kill_jobs(), ["subagent-1"]);
    assert_eq!(jobs.list()[0].status, keel_tools::JobStatus::Killed);

    let child = load(&session_file(&rig, d.child_session.as_str()));
    assert_eq!(
        child.header().parent_session.as_ref(),
        Some(&rig.agent.session_id())
    );
    assert_eq!(child.header().origin.as_deref(), Some("subagent"));
    // After the runtime context.
    assert_eq!(
        user_messages(&child.events().map(|e| e.into_owned()).collect::<Vec<_>>())[1].text(),
        "Find the answer."
    );
}

#[test]
fn the_added_tools_schemas_stay_small() {
    // They ride on every request: each stays small (the whole default request, all 25 of dsh
    // 0.2's tools, is held under 12 KB by keel-cli's run_prompt_cache test).
    let spawn = rig("responses: []", Options::default());
    let registry = spawn.agent.pipeline().registry();
    let mut sizes = Vec::new();
    for name in ["subagent", "job_output", "job_list", "job_kill"] {
        let s = registry.get(name).unwrap().schema();
        let wire = serde_json::json!({"type": "function", "function": {"name": s.name, "description": s.description, "parameters": s.parameters}});
        sizes.push((name, serde_json::to_vec(&wire).unwrap().len()));
    }
    let fork = rig(
        "responses: []",
        Options {
            subagent: Some(SubagentConfig {
                mode: SubagentMode::Fork,
                ..SubagentConfig::default()
            }),
            ..Options::default()
        },
    );
    let s = fork
        .agent
        .pipeline()
        .registry()
        .get("subagent")
        .unwrap()
        .schema()
        .clone();
    let wire = serde_json::json!({"type": "function", "function": {"name": s.name, "description": s.description, "parameters": s.parameters}});
    sizes.push(("subagent (fork)", serde_json::to_vec(&wire).unwrap().len()));
    // The team tools and a continuable child's `send_message` to its parent.
    let team: [Arc<dyn keel_tools::Tool>; 4] = [
        Arc::new(keel_agent::subagent::SendMessageTool::default()),
        Arc::new(keel_agent::subagent::ListAgentsTool::default()),
        Arc::new(keel_agent::subagent::InterruptAgentTool::default()),
        Arc::new(keel_agent::subagent::ParentMessageTool::new(
            keel_protocol::SessionId::from("session-00000000-0000-0000-0000-000000000000"),
        )),
    ];
    for tool in team {
        let s = tool.schema();
        let wire = serde_json::json!({"type": "function", "function": {"name": s.name, "description": s.description, "parameters": s.parameters}});
        sizes.push(("team", serde_json::to_vec(&wire).unwrap().len()));
    }
    eprintln!("{sizes:?}");
    assert!(sizes.iter().all(|(_, n)| *n <= 450), "{sizes:?}");
}
