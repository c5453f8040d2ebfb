//! `keel sessions search` through the real binary: words from compacted-away history and from
//! tool results are found, `--all` reaches other projects' sessions, and the derived index
//! follows the logs (rebuilt after deletion, updated after another process appends, rows of a
//! removed session dropped); `keel fork` at a turn (or at a search hit) continues with that
//! history and records its lineage.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;
use support::*;

/// `keel` as `Env::keel` runs it, in `dir` instead of the workspace (`base_url`: with the
/// mock model).
fn keel_in(env: &Env, dir: &std::path::Path, base_url: Option<&str>) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_keel"));
    for var in [
        "DEEPSEEK_BASE_URL",
        "DEEPSEEK_API_KEY",
        "KEEL_HOME",
        "RUST_LOG",
        "DSH_TOOLS_MODE",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("KEEL_HOME", &env.home)
        .env("HOME", env.root())
        .env("TMPDIR", env.root().join("tmp"))
        .arg("--cwd")
        .arg(dir)
        .arg("--trust-project")
        .stdin(std::process::Stdio::null());
    if let Some(url) = base_url {
        cmd.env("DEEPSEEK_API_KEY", "sk-test")
            .arg("--base-url")
            .arg(url);
    }
    cmd
}

fn search(env: &Env, cwd: &std::path::Path, args: &[&str]) -> Output {
    run(keel_in(env, cwd, None)
        .args(["sessions", "search"])
        .args(args))
}

fn hits(out: &Output) -> Vec<Value> {
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn words_from_compacted_history_and_tool_results_are_found() {
    let env = Env::new();
    let mut script = String::from("responses:\n");
    for _ in 0..3 {
        script.push_str(
            "  - match: {last_user_contains: \"Context compaction\"}\n    text: \"SUMMARY: the user ran numbered steps.\"\n",
        );
    }
    script.push_str(
        "  - text: \"Step 1.\"\n    tool_calls:\n      - {name: bash, arguments: {command: \"seq 1 1500; echo zebracorn-marker\"}}\n",
    );
    for i in 2..=12 {
        script.push_str(&format!(
            "  - text: \"Step {i}.\"\n    tool_calls:\n      - {{name: bash, arguments: {{command: \"seq 1 1500; echo step-{i}-done\"}}}}\n"
        ));
    }
    script.push_str("  - text: \"All steps done.\"\n");
    let mock = Mock::start(&script);
    let out = run(env.keel(&mock.base_url()).args([
        "--approval",
        "auto",
        "--context-window",
        "16384",
        "run",
        "run the numbered steps",
    ]));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    // The marker left the model's view: the last request no longer carries it.
    let last = mock.requests().last().unwrap().to_string();
    assert!(!last.contains("zebracorn"), "still in the last request");
    let events = load_consistent(&env.only_session());
    assert!(!of_type(&events, "compaction/summary").is_empty());

    let out = search(&env, &env.ws, &["zebracorn", "--json"]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let found = hits(&out);
    let kinds: Vec<&str> = found.iter().map(|h| h["kind"].as_str().unwrap()).collect();
    assert!(
        kinds.contains(&"call") && kinds.contains(&"result"),
        "{found:#?}"
    );
    let id = session_id(&env.only_session());
    for h in &found {
        assert_eq!(h["session"], id.as_str());
        assert_eq!(h["turn"], 1);
        assert!(
            h["snippet"].as_str().unwrap().contains("[zebracorn]"),
            "{h}"
        );
    }
    // The seq names the event: the call's assistant message precedes its result.
    let seq_of = |kind: &str| {
        found.iter().find(|h| h["kind"] == kind).unwrap()["seq"]
            .as_u64()
            .unwrap()
    };
    assert!(seq_of("call") < seq_of("result"));
    let ev = events
        .iter()
        .find(|e| e["seq"].as_u64() == Some(seq_of("result")))
        .unwrap();
    assert_eq!(ev["type"], "tool/result");

    // A word only in a tool result; words are all required.
    let out = search(&env, &env.ws, &["step-7-done"]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(out.stdout.contains("  result  "), "{}", out.stdout);
    let out = search(&env, &env.ws, &["zebracorn", "nowhere-else"]);
    assert_eq!(out.code, Some(1));
    assert!(out.stdout.is_empty());
}

#[test]
fn all_reaches_other_projects_and_the_index_follows_the_logs() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "pelican" }
    text: "Noted the pelican."
  - match: { last_user_contains: "flamingo" }
    text: "Noted the flamingo."
  - match: { last_user_contains: "heron" }
    text: "Noted the heron."
"#,
    );
    // A session in another directory (its own project).
    let out = run(keel_in(&env, &env.outside, Some(&mock.base_url()))
        .args(["run", "tell me about the pelican"]));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    // And one here.
    assert_eq!(
        run(env.keel(&mock.base_url()).args(["run", "and the heron"])).code,
        Some(0)
    );

    // This project's sessions only, unless --all.
    let out = search(&env, &env.ws, &["pelican"]);
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    assert!(out.stderr.contains("--all"), "{}", out.stderr);
    let out = search(&env, &env.ws, &["pelican", "--all"]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(
        out.stdout.contains("  user  tell me about the [pelican]"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains(&format!("in {}", env.outside.display())),
        "{}",
        out.stdout
    );
    let index = env.home.join("index/search.sqlite");
    // It quotes the logs, so it is owner-only like them.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&index).unwrap().permissions().mode() & 0o777,
        0o600
    );

    // Another process appends to the outside session: the next search sees it.
    let out = run(keel_in(&env, &env.outside, Some(&mock.base_url())).args([
        "resume",
        "--last",
        "now the flamingo",
    ]));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let out = search(&env, &env.ws, &["flamingo", "--all", "--json"]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let kinds: Vec<String> = hits(&out)
        .iter()
        .map(|h| h["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds.len(), 2, "{kinds:?}");
    assert!(kinds.contains(&"user".to_owned()) && kinds.contains(&"answer".to_owned()));

    // The index is a cache: deleted (or garbage), it is rebuilt from the logs.
    std::fs::remove_file(&index).unwrap();
    let out = search(&env, &env.ws, &["heron", "--json"]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(hits(&out).len(), 2);
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", index.display()));
    }
    std::fs::write(&index, b"this is not a database").unwrap();
    let out = search(&env, &env.ws, &["flamingo", "--all", "--json"]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(hits(&out).len(), 2);

    // A removed session leaves the index.
    let outside_session = env
        .session_files()
        .into_iter()
        .find(|p| std::fs::read_to_string(p).unwrap().contains("pelican"))
        .unwrap();
    std::fs::remove_dir_all(outside_session.parent().unwrap()).unwrap();
    let out = search(&env, &env.ws, &["pelican", "--all"]);
    assert_eq!(out.code, Some(1), "{}", out.stdout);
}

#[test]
fn fork_at_a_turn_continues_with_that_history_and_records_its_lineage() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "first: alpha" }
    text: "Alpha noted."
  - match: { last_user_contains: "second: bravo" }
    text: "Bravo noted."
  - match: { last_user_contains: "third: charlie" }
    text: "Charlie noted."
  - match: { last_user_contains: "instead: delta" }
    text: "Delta noted."
"#,
    );
    assert_eq!(
        run(env.keel(&mock.base_url()).args(["run", "first: alpha"])).code,
        Some(0)
    );
    for prompt in ["second: bravo", "third: charlie"] {
        let out = run(env
            .keel(&mock.base_url())
            .args(["resume", "--last", prompt]));
        assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    }
    let parent = env.only_session();
    let parent_id = session_id(&parent);

    // Turn 3 out of range, a bad --at: clear errors naming what is wrong.
    let out = run(env.keel_bare().args(["fork", "--at", "7"]));
    assert_eq!(out.code, Some(2));
    assert!(
        out.stderr.contains("--at 7: the session has 3 turn(s)"),
        "{}",
        out.stderr
    );
    let out = run(env.keel_bare().args(["fork", "--at", "seq:x"]));
    assert!(
        out.stderr.contains("--at seq:S needs a number"),
        "{}",
        out.stderr
    );

    // Fork just before turn 3's prompt, found by searching for it.
    let hit = run(env
        .keel_bare()
        .args(["sessions", "search", "charlie", "--json"]));
    let hit: Value = serde_json::from_str(hit.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(hit["turn"], 3);
    let at = format!("seq:{}", hit["seq"]);
    let out = run(env
        .keel_bare()
        .args(["fork", &parent_id, "--at", &at, "--json"]));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let forked: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    // The same boundary as --at 3.
    let out = run(env
        .keel_bare()
        .args(["fork", &parent_id, "--at", "3", "--json"]));
    let again: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(forked["seedLength"], again["seedLength"]);

    let child = std::path::PathBuf::from(forked["path"].as_str().unwrap());
    let text = std::fs::read_to_string(&child).unwrap();
    let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(header["parentSession"], parent_id.as_str());
    assert_eq!(header["origin"], "fork");
    assert_eq!(header["seedLength"], forked["seedLength"]);
    // The original is unchanged.
    assert_eq!(session_id(&parent), parent_id);

    // Continuing the fork: its request holds turns 1 and 2, not turn 3.
    let id = forked["session"].as_str().unwrap();
    let out = run(env
        .keel(&mock.base_url())
        .args(["resume", id, "instead: delta"]));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let last = mock.requests().last().unwrap()["messages"].to_string();
    assert!(
        last.contains("first: alpha") && last.contains("Bravo noted."),
        "{last}"
    );
    assert!(
        !last.contains("charlie") && !last.contains("Charlie"),
        "{last}"
    );
    let events = load_consistent(&child);
    assert_eq!(of_type(&events, "session/end-seed").len(), 1);
    assert_eq!(of_type(&events, "turn/end").len(), 3);
}
