//! The schedule plugin in a real agent (host factory, real workspace and session file) on a
//! scripted model: the timer fires a due schedule into the idle agent as a follow-up turn,
//! logged before it is delivered, and a resumed session folds it back as fired.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_agent::ApprovalPolicy;
use keel_agent::agent::Agent;
use keel_protocol::{EventBody, SessionEvent};
use keel_testkit::agent::{
    AgentOptions, PluginRow, agent_fixture, events_of, guarded, resume_fixture, until,
};

fn of_type<'a>(events: &'a [SessionEvent], ty: &str) -> Vec<&'a SessionEvent> {
    events
        .iter()
        .filter(|e| matches!(&e.body, EventBody::Other(o) if o.type_name == ty))
        .collect()
}

fn fold(agent: &Agent) -> keel_schedule::Fold {
    keel_schedule::Fold::of(events_of(agent).iter())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_due_schedule_wakes_the_idle_agent_and_stays_fired_after_a_resume() {
    let f = agent_fixture(
        r#"
responses:
  - match: { last_user_contains: "remind me" }
    tool_calls: [{ id: c1, name: schedule_create, arguments: { prompt: "stretch your legs", after_seconds: 1 } }]
  - match: { last_user_contains: "remind me" }
    text: "Set."
  - match: { last_message_contains: "stretch your legs" }
    text: "Stretched."
"#,
        AgentOptions {
            plugins: vec![PluginRow::new("schedule")],
            ..AgentOptions::default()
        },
    );
    f.agent.followup("remind me in a second").unwrap();
    let first = guarded(f.agent.run_until_idle()).await.unwrap().unwrap();
    assert_eq!(first.final_text, "Set.");
    assert_eq!(fold(&f.agent).active.len(), 1);
    // Nobody sends anything: the timer queues the turn.
    until(|| f.agent.has_pending_turn()).await;
    let fired = guarded(f.agent.run_until_idle()).await.unwrap().unwrap();
    assert_eq!(fired.final_text, "Stretched.");

    let events = events_of(&f.agent);
    let fired = of_type(&events, keel_schedule::FIRED_EVENT);
    assert_eq!(fired.len(), 1);
    // The message that started the turn came from keel/schedule, after the fired event.
    let splice = events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::InboxSpliced(s)
                if s.inserted
                    .iter()
                    .any(|m| m.source.plugin_id() == Some("keel/schedule")) =>
            {
                Some((e.seq, s.inserted[0].text()))
            }
            _ => None,
        })
        .unwrap();
    assert!(fired[0].seq < splice.0);
    assert!(
        splice.1.starts_with("[scheduled sched-1, one-shot, due ")
            && splice.1.ends_with("]\nstretch your legs"),
        "{}",
        splice.1
    );
    assert!(fold(&f.agent).active.is_empty());
    assert_eq!(fold(&f.agent).created, 1);

    // A resume folds it back as fired: nothing is missed, nothing fires again. The agent
    // lets go of the session first (one writer per session).
    drop(f.agent);
    let (resumed, _) = resume_fixture(
        f.home.path(),
        &f.cwd,
        &f.session_path,
        "responses: []\n",
        ApprovalPolicy::Ask,
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let events = events_of(&resumed);
    assert!(of_type(&events, keel_schedule::MISSED_EVENT).is_empty());
    assert_eq!(of_type(&events, keel_schedule::FIRED_EVENT).len(), 1);
    assert!(!resumed.has_pending_turn());
}
