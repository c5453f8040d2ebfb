//! The `roleplay` plugin end to end: a real agent (host factory, real workspace, real session
//! file) on a scripted model — the persona section, the greeting as the first assistant
//! message, lore through the runtime context (only when it changed), the anchor reminder every
//! N turns, the three tools, and a cold resume that sees what was logged.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_agent::agent::Agent;
use keel_llm::ChatRequest;
use keel_memory::RoleplayConfig;
use keel_memory::roleplay::plugin::own_form;
use keel_protocol::{EventBody, Message, Role};
use keel_testkit::agent::{
    AgentOptions, PluginRow, agent_fixture, events_of, resume_fixture, tool_results,
};
use serde_json::json;

fn card() -> serde_json::Value {
    json!({
        "spec": "chara_card_v3",
        "spec_version": "3.0",
        "data": {
            "name": "Seraphina",
            "description": "SERA-DESC: a guardian of the forest glade.",
            "personality": "gentle, protective",
            "scenario": "{{user}} wakes up in Seraphina's glade.",
            "first_mes": "*Seraphina kneels beside {{user}}.* You're safe now.",
            "mes_example": "",
            "tags": ["fantasy"],
            "extensions": {"x": 1},
            "character_book": {"name": "glade", "entries": [
                {"id": 1, "keys": ["dragon"], "content": "DRAGON-LORE: the dragon sleeps under the mountain.",
                 "insertion_order": 10, "name": "the dragon", "enabled": true}
            ]}
        }
    })
}

fn world_info() -> serde_json::Value {
    json!({"entries": {"0": {"uid": 0, "key": ["harbor"], "keysecondary": [], "content": "HARBOR-LORE: ships leave at dawn.",
        "comment": "harbor", "order": 5, "constant": false, "selective": true}}})
}

fn script() -> String {
    [
        "responses:",
        "  - match: {last_user_contains: \"[T1]\"}\n    text: \"Hello, traveller.\"",
        "  - match: {last_user_contains: \"[T2]\"}\n    text: \"Let me recall.\"\n    tool_calls:\n      - {id: c_lore, name: lore_search, arguments: {query: \"dragon mountain\", limit: 3}}",
        "  - match: {last_user_contains: \"[T2]\"}\n    text: \"The dragon sleeps.\"",
        "  - match: {last_user_contains: \"[T3]\"}\n    text: \"Looking.\"\n    tool_calls:\n      - {id: c_char, name: character_get, arguments: {}}\n      - {id: c_scene, name: scene_get, arguments: {}}",
        "  - match: {last_user_contains: \"[T3]\"}\n    text: \"I am Seraphina.\"",
        "  - match: {last_user_contains: \"[T4]\"}\n    text: \"To the harbor then.\"",
    ]
    .join("\n")
        + "\n"
}

async fn turn(agent: &Agent, text: &str) {
    agent.followup(text).unwrap();
    agent.run_pending().await.unwrap().unwrap();
}

fn own<'a>(req: &'a ChatRequest, form: &str) -> Vec<&'a Message> {
    req.messages
        .iter()
        .filter(|m| own_form(m).is_some_and(|(f, _)| f == form))
        .collect()
}

fn logged(agent: &Agent, form: &str) -> Vec<(Message, u32)> {
    events_of(agent)
        .into_iter()
        .filter_map(|e| match e.body {
            EventBody::UserMessage(m) => {
                let (f, t) = own_form(&m)?;
                (f == form).then_some((*m, t))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roleplay_plugin_end_to_end() {
    let files = tempfile::tempdir().unwrap();
    let card_path = files.path().join("sera.json");
    std::fs::write(&card_path, serde_json::to_vec(&card()).unwrap()).unwrap();
    let wi_path = files.path().join("harbor.json");
    std::fs::write(&wi_path, serde_json::to_vec(&world_info()).unwrap()).unwrap();
    let config = RoleplayConfig {
        card: Some(card_path.display().to_string()),
        lorebooks: vec![wi_path.display().to_string()],
        anchor_every: 2,
        user_name: "Ash".into(),
        ..RoleplayConfig::default()
    };
    let f = agent_fixture(
        &script(),
        AgentOptions {
            approval: keel_agent::ApprovalPolicy::Allow,
            plugins: vec![PluginRow::with("roleplay", &config)],
            ..AgentOptions::default()
        },
    );
    // The greeting is logged at build, before any turn.
    let greeting = logged(&f.agent, "greeting");
    assert_eq!(greeting.len(), 1);
    assert_eq!(greeting[0].0.role, Role::Assistant);
    assert_eq!(
        greeting[0].0.text(),
        "*Seraphina kneels beside Ash.* You're safe now."
    );

    turn(&f.agent, "[T1] hello there").await;
    turn(&f.agent, "[T2] tell me about the dragon").await;
    turn(&f.agent, "[T3] who are you, and where are we?").await;
    turn(&f.agent, "[T4] we walk to the harbor").await;

    let reqs = f.provider.requests();
    // T1, T2 ×2, T3 ×2, T4.
    assert_eq!(reqs.len(), 6);
    for r in &reqs {
        assert!(r.system.contains("# Role-play: Seraphina"), "{}", r.system);
        assert!(r.system.contains("SERA-DESC"));
        assert!(r.system.contains("Ash wakes up in Seraphina's glade."));
        // The greeting is the first message of every request.
        assert_eq!(r.messages[0].role, Role::Assistant);
        assert!(r.messages[0].text().contains("You're safe now."));
    }
    // T1: nothing matches, no lore; no anchor (anchor every 2 turns).
    assert!(own(&reqs[0], "lore").is_empty());
    assert!(own(&reqs[0], "anchor").is_empty());
    // T2: the dragon entry, framed as data, before the human's words; the anchor at turn 2.
    let lore = own(&reqs[1], "lore");
    assert_eq!(lore.len(), 1);
    assert!(lore[0].text().contains("DRAGON-LORE"));
    assert!(lore[0].text().contains("<lore-data>"));
    let anchors = own(&reqs[1], "anchor");
    assert_eq!(anchors.len(), 1);
    assert!(
        anchors[0]
            .text()
            .starts_with("[Reminder] You are Seraphina")
    );
    // T2's second step: the lore is not delivered again.
    assert_eq!(own(&reqs[2], "lore").len(), 1);
    assert_eq!(own(&reqs[2], "anchor").len(), 1);
    // T3: same lore (the dragon is still in the last two messages): nothing new.
    assert_eq!(own(&reqs[3], "lore").len(), 1);
    // T3's second step: the window (two messages: "[T3] …", "Looking.") no longer holds
    // the dragon; the change is said once.
    let lore = own(&reqs[4], "lore");
    assert_eq!(lore.len(), 2);
    assert!(
        lore[1].text().contains("no lorebook entry is active now"),
        "{}",
        lore[1].text()
    );
    // T4: the harbor entry (from the standalone world-info file); the second anchor.
    let lore = own(&reqs[5], "lore");
    assert_eq!(lore.len(), 3);
    assert!(lore[2].text().contains("HARBOR-LORE"));
    assert!(!lore[2].text().contains("DRAGON-LORE"));
    assert_eq!(own(&reqs[5], "anchor").len(), 2);
    // Append-only: every earlier request's messages are a prefix of the next request's.
    for w in reqs.windows(2) {
        assert_eq!(w[0].messages[..], w[1].messages[..w[0].messages.len()]);
    }
    // The tools: schemas on the wire, results framed as data.
    let names: Vec<&str> = reqs[0].tools.iter().map(|t| t.name.as_str()).collect();
    for t in ["character_get", "lore_search", "scene_get"] {
        assert!(names.contains(&t), "{names:?}");
    }
    let results = tool_results(&events_of(&f.agent));
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(
        results[0].contains("<lore-data>") && results[0].contains("DRAGON-LORE"),
        "{}",
        results[0]
    );
    assert!(
        results[0].contains("[glade#1] the dragon"),
        "{}",
        results[0]
    );
    assert!(
        results[1].contains("<character-data>") && results[1].contains("name: Seraphina"),
        "{}",
        results[1]
    );
    assert!(
        results[2].contains("<scene-data>") && results[2].contains("turn: 3"),
        "{}",
        results[2]
    );
    assert!(
        results[2].contains("active lore entries: 1") && results[2].contains("DRAGON-LORE"),
        "{}",
        results[2]
    );

    // A cold resume sees what was logged: no second greeting, the lore is not re-delivered
    // while it stays the same, and anchors continue by turn number.
    let session = f.session_path.clone();
    drop(f.agent);
    let script = "responses:\n  - match: {last_user_contains: \"[T5]\"}\n    text: \"Dawn.\"\n  - match: {last_user_contains: \"[T6]\"}\n    text: \"Aboard.\"\n";
    let (agent, provider) = resume_fixture(
        f.home.path(),
        &f.cwd,
        &session,
        script,
        keel_agent::ApprovalPolicy::Allow,
    );
    turn(&agent, "[T5] still at the harbor").await;
    turn(&agent, "[T6] we board a ship at the harbor").await;
    assert_eq!(logged(&agent, "greeting").len(), 1);
    assert_eq!(
        logged(&agent, "lore").len(),
        3,
        "unchanged lore is not delivered again"
    );
    let anchors: Vec<u32> = logged(&agent, "anchor").iter().map(|(_, t)| *t).collect();
    assert_eq!(anchors, [2, 4, 6]);
    let reqs = provider.requests();
    assert!(reqs[0].system.contains("# Role-play: Seraphina"));
}

#[test]
fn a_missing_card_is_a_setup_error_naming_the_card() {
    use keel_memory::roleplay::plugin::Roleplay;
    let home = tempfile::tempdir().unwrap();
    let config = RoleplayConfig {
        card: Some("nobody-12345678".into()),
        ..RoleplayConfig::default()
    };
    let e = Roleplay::load(home.path(), config).unwrap_err().to_string();
    assert!(
        e.contains("nobody-12345678") && e.contains("roleplay"),
        "{e}"
    );
    let e = Roleplay::load(home.path(), RoleplayConfig::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("no card"), "{e}");
}
