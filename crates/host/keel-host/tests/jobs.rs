//! Background jobs end to end: `bash` with `run_in_background`, the job tools, notices that
//! wake an idle agent or join a running turn, the wake budget, kills. Real processes; the
//! model is scripted. Jobs wait for files the test creates, so nothing depends on timing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use keel_agent::seams::{StopDecision, TurnStopping};
use keel_agent::{Agent, HookRegistry};
use keel_jobs::JobsConfig;
use keel_protocol::{EventBody, InboxTarget, SessionEvent};
use keel_tools::JobStatus;
use pretty_assertions::assert_eq;
use std::sync::Arc;
use support::*;

/// `(target, text)` of every job notice put into the inbox.
fn notices(events: &[SessionEvent]) -> Vec<(InboxTarget, String)> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::InboxSpliced(s) => Some(s),
            _ => None,
        })
        .flat_map(|s| {
            s.inserted
                .iter()
                .filter(|m| m.source.plugin_id() == Some(keel_jobs::ID.source()))
                .map(|m| (s.target, m.text()))
                .collect::<Vec<_>>()
        })
        .collect()
}

fn running(agent: &impl Jobs) -> usize {
    agent.job_control().unwrap().running()
}

/// Job control of an agent or of a hook's handle.
trait Jobs {
    fn job_control(&self) -> Option<std::sync::Arc<dyn keel_tools::JobControl>>;
}

impl Jobs for Agent {
    fn job_control(&self) -> Option<std::sync::Arc<dyn keel_tools::JobControl>> {
        self.jobs()
    }
}

impl Jobs for keel_agent::AgentHandle {
    fn job_control(&self) -> Option<std::sync::Arc<dyn keel_tools::JobControl>> {
        self.jobs()
    }
}

fn wait_for(file: &str) -> String {
    format!("while [ ! -f {file} ]; do sleep 0.02; done; echo {file}-done")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_background_bash_job_wakes_the_idle_agent() {
    let script = format!(
        r#"
responses:
  - tool_calls:
      - {{id: c1, name: bash, arguments: {{command: "{}", description: "wait for go", run_in_background: true}}}}
  - text: "Started it."
  - tool_calls:
      - {{id: c2, name: job_output, arguments: {{job_id: bash-1}}}}
      - {{id: c3, name: job_list, arguments: {{}}}}
  - text: "It printed go-done."
"#,
        wait_for("go")
    );
    let rig = rig(&script, Options::default());
    rig.agent.followup("Run it in the background.").unwrap();
    let first = guarded(rig.agent.run_pending()).await.unwrap().unwrap();
    assert_eq!(first.final_text, "Started it.");
    let results = tool_results(&events_of(&rig.agent));
    assert!(
        results[0].starts_with("Started background job bash-1."),
        "{}",
        results[0]
    );
    assert_eq!(running(&rig.agent), 1, "the job waits for its file");
    assert!(!rig.agent.has_pending_turn());

    std::fs::write(rig.fixture.work.path().join("go"), "").unwrap();
    let woke = guarded(rig.agent.run_until_idle()).await.unwrap().unwrap();
    assert_eq!(
        (woke.turn.0, woke.final_text.as_str()),
        (2, "It printed go-done.")
    );
    assert_eq!(running(&rig.agent), 0);

    let events = events_of(&rig.agent);
    let n = notices(&events);
    assert_eq!(n.len(), 1);
    assert_eq!(
        n[0].0,
        InboxTarget::NextTurn,
        "an idle owner is woken with a follow-up turn"
    );
    assert_eq!(
        n[0].1,
        "Background job bash-1 (bash: wait for go) finished: completed (exit code 0).\nOutput:\ngo-done\n"
    );
    let results = tool_results(&events);
    assert!(
        results[1].starts_with("bash-1 [completed] wait for go (exit code 0)"),
        "{}",
        results[1]
    );
    assert!(results[1].ends_with("---\ngo-done\n"), "{}", results[1]);
    assert!(
        results[2].starts_with("bash-1 [completed] wait for go"),
        "{}",
        results[2]
    );
    // The wake-up turn's request carries the notice as a user message.
    let reqs = rig.provider.requests();
    assert!(
        reqs[2]
            .messages
            .iter()
            .any(|m| m.text().starts_with("Background job bash-1"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wake_ups_stop_after_three_in_a_row_until_a_human_message() {
    let bg = |id: &str, file: &str| {
        format!(
            "      - {{id: {id}, name: bash, arguments: {{command: \"{}\", run_in_background: true}}}}\n",
            wait_for(file)
        )
    };
    let script = format!(
        "responses:\n  - tool_calls:\n{}{}{}{}  - text: started four\n  - text: wake one\n  - text: wake two\n  - text: wake three\n  - tool_calls:\n{}  - text: started five\n  - text: wake again\n",
        bg("a1", "g1"),
        bg("a2", "g2"),
        bg("a3", "g3"),
        bg("a4", "g4"),
        bg("a5", "g5"),
    );
    let rig = rig(
        &script,
        Options {
            jobs: Some(JobsConfig {
                max_wakeups: 3,
                ..JobsConfig::default()
            }),
            ..Options::default()
        },
    );
    let agent = &rig.agent;
    let touch = |f: &str| std::fs::write(rig.fixture.work.path().join(f), "").unwrap();
    agent.followup("Start four jobs.").unwrap();
    guarded(agent.run_pending()).await.unwrap().unwrap();
    assert_eq!(running(agent), 4);

    // Three wake-ups in a row, each a follow-up turn.
    for (i, file) in ["g1", "g2", "g3"].into_iter().enumerate() {
        touch(file);
        until(|| agent.has_pending_turn()).await;
        let o = guarded(agent.run_pending()).await.unwrap().unwrap();
        assert_eq!(o.final_text, ["wake one", "wake two", "wake three"][i]);
    }
    // The fourth finishes while idle but the budget is spent: the notice waits in the inbox.
    touch("g4");
    until(|| running(agent) == 0).await;
    assert!(!agent.has_pending_turn());
    assert!(
        guarded(agent.run_until_idle()).await.unwrap().is_none(),
        "nothing to run, nothing to wait for"
    );
    let targets: Vec<InboxTarget> = notices(&events_of(agent))
        .into_iter()
        .map(|(t, _)| t)
        .collect();
    assert_eq!(
        targets,
        vec![
            InboxTarget::NextTurn,
            InboxTarget::NextTurn,
            InboxTarget::NextTurn,
            InboxTarget::NextStep
        ]
    );

    // A human message resets the budget; the held notice joins that turn.
    agent.followup("Start one more.").unwrap();
    let o = guarded(agent.run_pending()).await.unwrap().unwrap();
    assert_eq!(o.final_text, "started five");
    let reqs = rig.provider.requests();
    let human_turn = &reqs[reqs.len() - 2];
    assert!(
        human_turn
            .messages
            .iter()
            .any(|m| m.text().starts_with("Background job bash-4"))
    );
    touch("g5");
    let o = guarded(agent.run_until_idle()).await.unwrap().unwrap();
    assert_eq!(o.final_text, "wake again");
    assert_eq!(
        notices(&events_of(agent)).last().unwrap().0,
        InboxTarget::NextTurn
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_finishing_during_a_turn_is_injected_into_it() {
    // The turn-stopping hook releases the job and waits until it has settled, so the notice
    // arrives while the turn is still running.
    let mut hooks = HookRegistry::default();
    hooks.turn_stopping.push(Arc::new(|t: &TurnStopping| {
        let agent = t.agent.clone();
        Box::pin(async move {
            if running(&agent) > 0 {
                std::fs::write(agent.config().cwd.join("go"), "").unwrap();
                until(|| running(&agent) == 0).await;
            }
            StopDecision::Stop
        })
    }));
    let script = format!(
        r#"
responses:
  - tool_calls:
      - {{id: c1, name: bash, arguments: {{command: "{}", run_in_background: true}}}}
  - text: "Started."
  - text: "And it is already done."
"#,
        wait_for("go")
    );
    let rig = rig(
        &script,
        Options {
            hooks,
            ..Options::default()
        },
    );
    rig.agent.followup("go").unwrap();
    let o = guarded(rig.agent.run_until_idle()).await.unwrap().unwrap();
    assert_eq!(
        (o.turn.0, o.final_text.as_str()),
        (1, "And it is already done.")
    );
    let n = notices(&events_of(&rig.agent));
    assert_eq!(n.len(), 1);
    assert_eq!(
        n[0].0,
        InboxTarget::NextStep,
        "a busy owner gets the notice in its running turn"
    );
    assert_eq!(rig.provider.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_kill_stops_the_process_group_and_the_kill_is_the_settlement() {
    let script = r#"
responses:
  - tool_calls:
      - {id: c1, name: bash, arguments: {command: "echo started; echo $$ > pid; sleep 30; echo never", run_in_background: true}}
      - {id: c2, name: bash, arguments: {command: "while [ ! -s pid ]; do sleep 0.02; done"}}
      - {id: c3, name: job_kill, arguments: {job_id: bash-1}}
      - {id: c4, name: job_kill, arguments: {job_id: bash-9}}
  - text: "Killed it."
"#;
    let rig = rig(script, Options::default());
    rig.agent.followup("go").unwrap();
    guarded(rig.agent.run_until_idle()).await.unwrap().unwrap();
    let results = tool_results(&events_of(&rig.agent));
    assert_eq!(results[2], "Killed job bash-1.");
    assert_eq!(
        results[3],
        "INVALID_ARGS: no job with id 'bash-9' (see job_list)"
    );
    let pid = std::fs::read_to_string(rig.fixture.work.path().join("pid")).unwrap();
    let proc_dir = format!("/proc/{}", pid.trim());
    until(|| !std::path::Path::new(&proc_dir).exists()).await;
    let jobs = rig.jobs().unwrap().list();
    assert_eq!(
        (jobs[0].status, jobs[0].summary.as_deref()),
        (JobStatus::Killed, Some("killed"))
    );
    // What it printed before the kill is kept (the pipe is drained after the group dies).
    let output = || rig.jobs().unwrap().output("bash-1").unwrap().text;
    until(|| output() == "started\n").await;
    assert!(
        notices(&events_of(&rig.agent)).is_empty(),
        "a kill is not announced"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_job_service_background_requests_are_refused() {
    let script = r#"
responses:
  - tool_calls:
      - {id: c1, name: bash, arguments: {command: "touch made", run_in_background: true}}
      - {id: c2, name: subagent, arguments: {description: "x", prompt: "y", run_in_background: true}}
  - text: "ok"
"#;
    let rig = rig(
        script,
        Options {
            jobs: None,
            ..Options::default()
        },
    );
    rig.agent.followup("go").unwrap();
    guarded(rig.agent.run_until_idle()).await.unwrap().unwrap();
    let results = tool_results(&events_of(&rig.agent));
    assert!(
        results[0].starts_with("DENIED: background jobs are not available"),
        "{}",
        results[0]
    );
    assert!(
        results[1].starts_with("DENIED: background subagents are not available"),
        "{}",
        results[1]
    );
    assert!(!rig.fixture.work.path().join("made").exists());
}
