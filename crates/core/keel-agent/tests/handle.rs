//! The plugin handle: what it reads of the session (the log's lock stays inside each call),
//! and that neither a weak handle nor an agent's tool-caller registration keeps the agent
//! alive. (A tool finding its calling agent through `calling_agent` is exercised by the
//! plugins' own tests: `keel-memory`'s identity test, `keel-codemode`, `keel-delegate`.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use keel_agent::{AgentSlot, HookRegistry};

const SCRIPT: &str = r#"
responses:
  - text: "done"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handle_reads_the_session_without_holding_its_lock() {
    let f = fixture(SCRIPT, HookRegistry::default());
    let handle = f.agent.handle();
    assert!(handle.is(&f.agent.handle()));
    f.agent.followup("hello").unwrap();
    f.agent.run_pending().await.unwrap().unwrap();
    assert_eq!(handle.session_id(), f.agent.session_id());
    assert_eq!(handle.current_turn(), keel_protocol::TurnNo(1));
    assert!(!handle.has_pending_turn());
    assert_eq!(handle.delegation_depth(), 0);
    assert_eq!(handle.parent_session(), None);
    assert_eq!(handle.next_seq().0, events(&f).len() as u64);
    assert_eq!(handle.with_session(|s| s.len()), events(&f).len() as u64);
    assert_eq!(handle.transcript_path(), f.session_path);
    // Nothing is held between calls: the owner appends while the handle is alive.
    handle
        .push_ignorable("test/mark", serde_json::json!({}))
        .unwrap();
    assert_eq!(handle.next_seq().0, events(&f).len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_weak_handle_and_a_slot_let_the_agent_go() {
    let f = fixture(SCRIPT, HookRegistry::default());
    assert!(f.agent.caller_id().is_some(), "registered as a tool caller");
    let slot = AgentSlot::new();
    assert!(slot.bind(&f.agent.handle()));
    assert!(!slot.bind(&f.agent.handle()), "the first binding wins");
    assert!(slot.holds(&f.agent.handle()));
    let weak = f.agent.handle().downgrade();
    assert!(weak.upgrade().is_some());
    drop(f);
    assert!(
        weak.upgrade().is_none(),
        "the handle did not keep the agent"
    );
    assert!(slot.is_bound() && slot.get().is_none());
}
