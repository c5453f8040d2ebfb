//! Lorebook rules, one test each: keys, secondary keys with the four selective logics,
//! constant, order and budget, probability (deterministic), scan depth, case sensitivity,
//! whole words, regex keys (and a hostile one), the standalone world-info format.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_memory::roleplay::lore::{Activation, Lorebook, roll};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A world-info book of `entries` (uid → fields; defaults filled in).
fn book(entries: Value) -> Lorebook {
    let mut map = serde_json::Map::new();
    for (uid, e) in entries.as_object().unwrap() {
        let mut full = json!({"uid": uid.parse::<u64>().unwrap(), "key": [], "keysecondary": [],
            "content": format!("content {uid}"), "order": 100, "selective": true});
        for (k, v) in e.as_object().unwrap() {
            full[k] = v.clone();
        }
        map.insert(uid.clone(), full);
    }
    Lorebook::from_world_info("test.json", "test", &json!({"entries": map})).unwrap()
}

fn active(b: &Lorebook, messages: &[&str]) -> Vec<String> {
    active_with(b, messages, 2, 10_000, "s1", 1)
}

fn active_with(
    b: &Lorebook,
    messages: &[&str],
    depth: usize,
    budget: u64,
    session: &str,
    turn: u64,
) -> Vec<String> {
    let messages: Vec<String> = messages.iter().map(|s| (*s).to_owned()).collect();
    b.activate(&Activation {
        session,
        turn,
        messages: &messages,
        scan_depth: depth,
        budget_tokens: budget,
    })
    .into_iter()
    .map(|a| a.uid)
    .collect()
}

#[test]
fn a_primary_key_activates_its_entry() {
    let b = book(json!({"1": {"key": ["dragon"]}, "2": {"key": ["castle"]}}));
    assert_eq!(active(&b, &["A DRAGON flies over."]), ["1"]);
    assert!(active(&b, &["Nothing here."]).is_empty());
}

#[test]
fn selective_logic_and_any() {
    let b = book(
        json!({"1": {"key": ["sword"], "keysecondary": ["fire", "ice"], "selectiveLogic": 0}}),
    );
    assert_eq!(active(&b, &["the sword of fire"]), ["1"]);
    assert!(active(&b, &["the sword of stone"]).is_empty());
}

#[test]
fn selective_logic_not_all() {
    let b = book(
        json!({"1": {"key": ["sword"], "keysecondary": ["fire", "ice"], "selectiveLogic": 1}}),
    );
    assert_eq!(active(&b, &["the sword of fire"]), ["1"]);
    assert_eq!(active(&b, &["the sword of stone"]), ["1"]);
    assert!(active(&b, &["the sword of fire and ice"]).is_empty());
}

#[test]
fn selective_logic_not_any() {
    let b = book(
        json!({"1": {"key": ["sword"], "keysecondary": ["fire", "ice"], "selectiveLogic": 2}}),
    );
    assert_eq!(active(&b, &["the sword of stone"]), ["1"]);
    assert!(active(&b, &["the sword of ice"]).is_empty());
}

#[test]
fn selective_logic_and_all() {
    let b = book(
        json!({"1": {"key": ["sword"], "keysecondary": ["fire", "ice"], "selectiveLogic": 3}}),
    );
    assert_eq!(active(&b, &["the sword of fire and ice"]), ["1"]);
    assert!(active(&b, &["the sword of fire"]).is_empty());
}

#[test]
fn a_bad_selective_logic_is_an_import_error() {
    let v = json!({"entries": {"1": {"uid": 1, "key": ["a"], "selectiveLogic": 7}}});
    let e = Lorebook::from_world_info("bad.json", "bad", &v)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("bad.json") && e.contains("selectiveLogic 7"),
        "{e}"
    );
}

#[test]
fn secondary_keys_are_ignored_when_not_selective() {
    let b = book(
        json!({"1": {"key": ["sword"], "keysecondary": ["fire"], "selective": false, "selectiveLogic": 3}}),
    );
    assert_eq!(active(&b, &["the sword"]), ["1"]);
}

#[test]
fn constant_entries_activate_without_keys_and_disabled_ones_never() {
    let b = book(json!({"1": {"constant": true}, "2": {"key": ["x"], "disable": true}}));
    assert_eq!(active(&b, &["x marks the spot"]), ["1"]);
}

#[test]
fn order_and_budget_keep_the_highest_order_first_and_cut_at_the_budget() {
    // Each content is 40 bytes = 10 estimated tokens.
    let c = |s: &str| format!("{s:<40}");
    let b = book(json!({
        "1": {"constant": true, "order": 5, "content": c("low")},
        "2": {"constant": true, "order": 50, "content": c("high")},
        "3": {"constant": true, "order": 20, "content": c("mid")},
    }));
    // Everything fits: delivered lowest order first.
    assert_eq!(active_with(&b, &[], 2, 30, "s", 1), ["1", "3", "2"]);
    // Budget 25: the two highest orders fit, the lowest is cut.
    assert_eq!(active_with(&b, &[], 2, 25, "s", 1), ["3", "2"]);
    assert_eq!(active_with(&b, &[], 2, 9, "s", 1), Vec::<String>::new());
}

#[test]
fn probability_is_deterministic_per_session_turn_and_uid() {
    let b = book(json!({"1": {"constant": true, "probability": 50, "useProbability": true}}));
    let mut hits = 0;
    for turn in 0..200 {
        let first = active_with(&b, &[], 2, 100, "sess", turn);
        // The same inputs give the same answer, every time.
        assert_eq!(first, active_with(&b, &[], 2, 100, "sess", turn));
        assert_eq!(first.is_empty(), roll("sess", turn, "test", "1") >= 50);
        hits += first.len();
    }
    assert!((60..=140).contains(&hits), "{hits} of 200 at 50%");
    let never = book(json!({"1": {"constant": true, "probability": 0}}));
    assert!((0..50).all(|t| active_with(&never, &[], 2, 100, "s", t).is_empty()));
    let off = book(json!({"1": {"constant": true, "probability": 0, "useProbability": false}}));
    assert_eq!(active(&off, &[]), ["1"]);
}

#[test]
fn scan_depth_limits_the_messages_scanned() {
    let b =
        book(json!({"1": {"key": ["lighthouse"]}, "2": {"key": ["lighthouse"], "scanDepth": 5}}));
    let msgs = ["the lighthouse", "a", "b", "c"];
    // Default depth 2: the mention is four messages back, only entry 2 (depth 5) sees it.
    assert_eq!(active_with(&b, &msgs, 2, 1000, "s", 1), ["2"]);
    assert_eq!(active_with(&b, &msgs, 4, 1000, "s", 1), ["1", "2"]);
}

#[test]
fn case_sensitive_keys_match_only_their_case() {
    let b = book(json!({"1": {"key": ["Rose"], "caseSensitive": true}, "2": {"key": ["Rose"]}}));
    assert_eq!(active(&b, &["a rose blooms"]), ["2"]);
    assert_eq!(active(&b, &["Rose arrives"]), ["1", "2"]);
}

#[test]
fn whole_words_do_not_match_inside_other_words() {
    let b = book(json!({"1": {"key": ["cat"], "matchWholeWords": true}, "2": {"key": ["cat"]}}));
    assert_eq!(active(&b, &["a concatenation"]), ["2"]);
    assert_eq!(active(&b, &["the cat, asleep"]), ["1", "2"]);
    let multi = book(json!({"1": {"key": ["red fox"], "matchWholeWords": true}}));
    assert_eq!(active(&multi, &["a red fox."]), ["1"]);
    assert!(active(&multi, &["a red foxes"]).is_empty());
}

#[test]
fn regex_keys_with_flags() {
    let b = book(json!({"1": {"key": ["/dra(g|k)on/i"]}, "2": {"key": ["/^Hello$/m"]}}));
    assert_eq!(active(&b, &["A DRAKON!"]), ["1"]);
    assert_eq!(active(&b, &["x\nHello\ny"]), ["2"]);
    assert!(active(&b, &["say Hello there"]).is_empty());
}

#[test]
fn a_hostile_regex_is_rejected_or_runs_in_linear_time() {
    let huge = json!({"entries": {"1": {"uid": 1, "key": ["/((a{100}){100}){100}/"]}}});
    let e = Lorebook::from_world_info("evil.json", "evil", &huge)
        .unwrap_err()
        .to_string();
    assert!(e.contains("evil.json") && e.contains("rejected"), "{e}");
    let flag = json!({"entries": {"1": {"uid": 1, "key": ["/a/q"]}}});
    let e = Lorebook::from_world_info("flag.json", "flag", &flag)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown flag"), "{e}");
    // Catastrophic backtracking in other engines: linear here.
    let b = book(json!({"1": {"key": ["/(a+)+$/"]}}));
    let text = format!("{}!", "a".repeat(50_000));
    let t = Instant::now();
    let _ = active(&b, &[&text]);
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

#[test]
fn embedded_character_book_reads_sillytavern_extensions() {
    let cb = json!({"name": "glade", "scan_depth": 3, "token_budget": 200, "entries": [
        {"id": 7, "keys": ["herb"], "secondary_keys": ["moon"], "selective": true, "content": "Moon herbs heal.",
         "insertion_order": 3, "enabled": true,
         "extensions": {"selectiveLogic": 3, "probability": 100, "useProbability": true,
                        "scan_depth": 9, "match_whole_words": true, "case_sensitive": false}}
    ]});
    let b = Lorebook::from_character_book("card.json", &cb).unwrap();
    assert_eq!((b.scan_depth, b.token_budget), (Some(3), Some(200)));
    let e = &b.entries[0];
    assert_eq!(
        (e.uid.as_str(), e.order, e.scan_depth, e.whole_words),
        ("7", 3, Some(9), Some(true))
    );
    assert_eq!(active(&b, &["a herb under the moon"]), ["7"]);
    assert!(active(&b, &["a herb"]).is_empty());
}
