//! `history_search` on a real agent: it finds text compaction replaced, text in the parent
//! session of a subagent, returns it framed as data with its seq, and refuses bad arguments.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_agent::compaction::{self, CompactionReason};
use keel_protocol::EventBody;
use keel_testkit::agent::{AgentOptions, PluginRow, agent_fixture, events_of, tool_results};
use serde_json::json;

/// An agent with the memory plugin (and compaction, and `extra` rows) over `script`.
fn fixture(script: &str, extra: &[&'static str]) -> keel_testkit::agent::AgentFixture {
    let mut plugins = vec![
        PluginRow::with("memory", &json!({})),
        PluginRow::new("compaction"),
    ];
    plugins.extend(extra.iter().map(|id| PluginRow::new(id)));
    agent_fixture(
        script,
        AgentOptions {
            approval: keel_agent::ApprovalPolicy::Allow,
            plugins,
            ..AgentOptions::default()
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compacted_text_is_still_found_with_its_seq() {
    let script = r#"
responses:
  - match: {last_message_contains: "Context compaction"}
    text: "SUMMARY: the user talked about animals."
  - match: {last_user_contains: "[t1]"}
    text: "Noted: the capybara is called Ingrid."
  - match: {last_user_contains: "[f1]"}
    text: "ok 1"
  - match: {last_user_contains: "[f2]"}
    text: "ok 2"
  - match: {last_user_contains: "[f3]"}
    text: "ok 3"
  - match: {last_user_contains: "[t2]"}
    tool_calls:
      - {id: h1, name: history_search, arguments: {query: "capybara name"}}
  - match: {last_user_contains: "[t2]"}
    text: "Ingrid."
"#;
    let f = fixture(script, &[]);
    for prompt in [
        "[t1] my capybara is called Ingrid",
        "[f1] a",
        "[f2] b",
        "[f3] c",
    ] {
        f.agent.followup(prompt).unwrap();
        assert!(f.agent.run_pending().await.unwrap().unwrap().completed());
    }
    compaction::compact_now(&f.agent, CompactionReason::Manual)
        .await
        .unwrap();
    let seq_of_t1 = events_of(&f.agent)
        .iter()
        .find(|e| matches!(&e.body, EventBody::UserMessage(m) if m.text().contains("[t1]")))
        .unwrap()
        .seq;
    // The surface no longer has it.
    assert!(
        !f.agent
            .log()
            .derive_messages()
            .iter()
            .any(|d| d.message.text().contains("Ingrid"))
    );
    f.agent
        .followup("[t2] what is the capybara called?")
        .unwrap();
    assert!(f.agent.run_pending().await.unwrap().unwrap().completed());
    let r = tool_results(&events_of(&f.agent));
    let found = r.iter().find(|t| t.contains("history-data")).unwrap();
    assert!(
        found.starts_with("The following is stored history data"),
        "{found}"
    );
    assert!(found.contains("Ingrid"), "{found}");
    assert!(
        found.contains(&format!("seq {} user", seq_of_t1.0)),
        "{found}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_finds_its_parents_words() {
    let script = r#"
responses:
  - match: {last_user_contains: "[parent]"}
    tool_calls:
      - {id: s1, name: subagent, arguments: {description: "look it up", prompt: "[child] what was the parcel code?"}}
  - match: {last_user_contains: "[child]"}
    tool_calls:
      - {id: h1, name: history_search, arguments: {query: "parcel code", limit: 5}}
  - match: {last_user_contains: "[child]"}
    text: "It is QX-77."
  - text: "The child found it."
"#;
    let f = fixture(script, &["subagent"]);
    f.agent
        .followup("[parent] the parcel code is QX-77; ask a helper to find it")
        .unwrap();
    assert!(f.agent.run_pending().await.unwrap().unwrap().completed());
    let (_, child) = keel_testkit::agent::child_session_events(&f);
    let r = tool_results(&child);
    let found = r.iter().find(|t| t.contains("history-data")).unwrap();
    let parent = f.agent.session_id().to_string();
    assert!(found.contains("QX-77"), "{found}");
    assert!(found.contains(&format!("session {parent}")), "{found}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_are_refused_naming_the_field() {
    let script = r#"
responses:
  - match: {last_user_contains: "[t1]"}
    tool_calls:
      - {id: h1, name: history_search, arguments: {querry: "typo"}}
  - text: "ok"
"#;
    let f = fixture(script, &[]);
    f.agent.followup("[t1] go").unwrap();
    assert!(f.agent.run_pending().await.unwrap().unwrap().completed());
    let r = tool_results(&events_of(&f.agent));
    assert!(r.iter().any(|t| t.contains("querry")), "{r:#?}");
}
