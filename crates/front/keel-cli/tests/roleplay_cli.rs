//! End-to-end: `keel cards import|show|list`, `keel chat --card` (new and resumed) and
//! `--profile roleplay`, the real binary against the loopback mock model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{Value, json};
use support::*;

fn card() -> Value {
    json!({
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Seraphina",
            "description": "SERA-DESC: guardian of the glade.",
            "personality": "gentle",
            "scenario": "{{user}} wakes in the glade.",
            "first_mes": "*Seraphina smiles.* You're awake, {{user}}.",
            "mes_example": "",
            "extensions": {"x_custom": {"kept": true}},
            "character_book": {"entries": [
                {"id": 1, "keys": ["dragon"], "content": "DRAGON-LORE: it sleeps.", "insertion_order": 1, "enabled": true}
            ]}
        }
    })
}

fn write_card(env: &Env) -> std::path::PathBuf {
    let path = env.outside.join("sera.json");
    std::fs::write(&path, serde_json::to_vec(&card()).unwrap()).unwrap();
    path
}

#[test]
fn cards_import_show_and_list() {
    let env = Env::new();
    let path = write_card(&env);
    let out = run(env.keel_bare().args(["cards", "import"]).arg(&path));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let id = out.stdout.trim().to_owned();
    assert!(id.starts_with("seraphina-"), "{id}");
    assert!(env.home.join("cards").join(format!("{id}.json")).is_file());

    let out = run(env.keel_bare().args(["cards", "list"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout.trim(), format!("{id}\tSeraphina\tchara_card_v2"));

    let out = run(env.keel_bare().args(["cards", "show", &id]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("name: Seraphina"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("lorebook: \"character_book\", 1 entries"),
        "{}",
        out.stdout
    );

    let out = run(env.keel_bare().args(["cards", "show", &id, "--json"]));
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["data"]["extensions"]["x_custom"]["kept"], json!(true));

    let out = run(env.keel_bare().args(["cards", "show", "nobody-00000000"]));
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains("no card with id"), "{}", out.stderr);
}

#[test]
fn a_malformed_card_is_refused_with_its_file_named() {
    let env = Env::new();
    let path = env.outside.join("bad.json");
    std::fs::write(&path, r#"{"spec":"chara_card_v7","data":{"name":"X"}}"#).unwrap();
    let out = run(env.keel_bare().args(["cards", "import"]).arg(&path));
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains("bad.json") && out.stderr.contains("chara_card_v7"),
        "{}",
        out.stderr
    );
    assert!(
        !env.home.join("cards").exists()
            || std::fs::read_dir(env.home.join("cards")).unwrap().count() == 0
    );
}

#[test]
fn chat_imports_the_card_runs_the_turn_and_resumes() {
    let env = Env::new();
    let path = write_card(&env);
    let mock = Mock::start(
        "responses:\n  - text: \"The glade is quiet.\"\n  - text: \"The dragon? It sleeps.\"\n  - text: \"Still here.\"\n",
    );
    let out = run(env
        .keel(&mock.base_url())
        .args(["chat", "--card"])
        .arg(&path)
        .arg("where am I?"));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "The glade is quiet.");
    assert!(
        out.stderr.contains("imported \"Seraphina\""),
        "{}",
        out.stderr
    );
    let reqs = mock.requests();
    let msgs = reqs[0]["messages"].as_array().unwrap();
    let system = msgs[0]["content"].as_str().unwrap();
    assert!(system.contains("creative writing partner"), "{system}");
    assert!(
        system.contains("# Role-play: Seraphina") && system.contains("SERA-DESC"),
        "{system}"
    );
    assert_eq!(msgs[1]["role"], "assistant");
    assert_eq!(
        msgs[1]["content"],
        "*Seraphina smiles.* You're awake, User."
    );
    let tools: Vec<&str> = reqs[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"lore_search") && tools.contains(&"scene_get"),
        "{tools:?}"
    );

    // Resumed by id: the greeting is not repeated; the dragon's lore arrives.
    let id = std::fs::read_dir(env.home.join("cards"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let out = run(env.keel(&mock.base_url()).args([
        "chat",
        "--card",
        &id,
        "--last",
        "tell me of the dragon",
    ]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "The dragon? It sleeps.");
    let reqs = mock.requests();
    let msgs = reqs[1]["messages"].as_array().unwrap();
    let greetings = msgs
        .iter()
        .filter(|m| {
            m["content"]
                .as_str()
                .is_some_and(|c| c.contains("Seraphina smiles"))
        })
        .count();
    assert_eq!(greetings, 1);
    let last = msgs.last().unwrap()["content"].as_str().unwrap();
    assert!(
        last.contains("DRAGON-LORE") && last.contains("tell me of the dragon"),
        "{last}"
    );
    assert_eq!(env.session_files().len(), 1);

    // A plain `keel resume` of the chat plays the same card (the log names it), with the same
    // system prompt, in the profile's managed context mode.
    let out = run(env
        .keel(&mock.base_url())
        .args(["resume", "--last", "are you still there?"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "Still here.");
    let reqs = mock.requests();
    assert_eq!(
        reqs[2]["messages"][0], reqs[1]["messages"][0],
        "system prompt changed"
    );
    let events = load_consistent(&env.only_session());
    assert_eq!(of_type(&events, "roleplay/card").len(), 1);
    assert_eq!(of_type(&events, "context/mode").len(), 1);
    assert_eq!(of_type(&events, "context/projection").len(), 3);
}

#[test]
fn the_roleplay_profile_without_a_card_says_what_is_missing() {
    let env = Env::new();
    let mock = Mock::start("responses:\n  - text: \"x\"\n");
    let out = run(env
        .keel(&mock.base_url())
        .args(["--profile", "roleplay", "run", "hi"]));
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains("no card"), "{}", out.stderr);
}

#[test]
fn help_documents_chat_and_cards() {
    let env = Env::new();
    let out = run(env.keel_bare().args(["chat", "--help"]));
    assert!(
        out.stdout.contains("--card <FILE_OR_ID>") && out.stdout.contains("--resume"),
        "{}",
        out.stdout
    );
    let out = run(env.keel_bare().args(["cards", "--help"]));
    for c in ["import", "show", "list"] {
        assert!(out.stdout.contains(c), "{}", out.stdout);
    }
    let out = run(env.keel_bare().args(["--help"]));
    assert!(out.stdout.contains("roleplay"), "{}", out.stdout);
}
