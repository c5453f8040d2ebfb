//! `keel rewind` through the real binary: checkpoints taken before each step that may change
//! files put the workspace back exactly as it was before any turn (what `write`, `edit`,
//! `bash` and a process `bash` left running wrote), `--undo` returns, a hand edit made after the
//! agent's last turn is reported and kept unless `--force`, and a session killed with SIGKILL
//! rewinds after its cold resume.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use support::*;

/// Every file of the workspace (but `.git`) and its bytes.
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if e.file_name() == ".git" {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn rewind(env: &Env, args: &[&str]) -> Output {
    run(env.keel_bare().arg("rewind").args(args))
}

const SCRIPT: &str = r#"
responses:
  - match: { last_user_contains: "first" }
    tool_calls:
      - { id: r1, name: read, arguments: { file_path: "existing.txt" } }
      - { id: w1, name: write, arguments: { file_path: "new.txt", content: "n1\n" } }
  - match: { last_tool_result_contains: "new.txt" }
    tool_calls:
      - { id: e1, name: edit, arguments: { file_path: "existing.txt", old_string: "v0", new_string: "v1" } }
  - match: { last_tool_result_contains: "Edited existing.txt" }
    text: "First done."
  - match: { last_user_contains: "second" }
    tool_calls:
      - { id: b1, name: bash, arguments: { command: "echo made > made.txt; echo v2 >> existing.txt; rm new.txt; mkdir -p out; (sleep 0.3; echo late > out/late.txt) > /dev/null 2>&1 &", description: "change files" } }
  - match: { last_user_contains: "second" }
    tool_calls:
      - { id: b2, name: bash, arguments: { command: "sleep 0.8; ls out", description: "wait" } }
  - match: { last_tool_result_contains: "late.txt" }
    text: "Second done."
  - match: { last_user_contains: "third" }
    tool_calls:
      - { id: w3, name: write, arguments: { file_path: "third.txt", content: "3\n" } }
  - match: { last_tool_result_contains: "third.txt" }
    text: "Third done."
  - match: { last_user_contains: "again" }
    text: "Again done."
  - match: { last_user_contains: "fourth" }
    text: "Fourth done."
"#;

/// The byte offset where the message holding `prompt` starts in a request body.
fn message_start(body: &[u8], prompt: &str) -> usize {
    let text = std::str::from_utf8(body).unwrap();
    let at = text
        .rfind(prompt)
        .unwrap_or_else(|| panic!("{prompt} not in {text}"));
    text[..at].rfind(r#"{"role":"user""#).unwrap()
}

#[test]
fn a_conversation_rewind_makes_the_next_request_a_prefix_of_the_earlier_one_and_undo_returns() {
    let env = Env::new();
    env.write("existing.txt", "v0\n");
    let mock = Mock::start_tapped(SCRIPT);
    for (i, prompt) in ["first", "second", "third"].iter().enumerate() {
        let mut cmd = env.keel(&mock.base_url());
        cmd.args(["--approval", "auto"]);
        if i == 0 {
            cmd.args(["run", prompt]);
        } else {
            cmd.args(["resume", "--last", prompt]);
        }
        let out = run(&mut cmd);
        assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    }
    let files = tree(&env.ws);
    let out = rewind(&env, &["--to", "2", "--conversation"]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(
        out.stdout
            .contains("Rewound the conversation to just before turn 2"),
        "{}",
        out.stdout
    );
    assert_eq!(
        tree(&env.ws),
        files,
        "--conversation leaves the files alone"
    );
    // Nothing was deleted: the log keeps turns 2 and 3, and `sessions show` marks them.
    let events = load_consistent(&env.only_session());
    assert_eq!(of_type(&events, "turn/end").len(), 3);
    let rewinds = of_type(&events, "surface/rewind");
    assert_eq!(rewinds.len(), 1);
    assert_eq!(rewinds[0]["data"]["turn"], 2);
    assert!(rewinds[0].get("ignorable").is_none(), "{}", rewinds[0]);
    let file = env.only_session();
    let shown = run(env
        .keel_bare()
        .args(["sessions", "show", file.to_str().unwrap()]));
    assert!(shown.stdout.contains("second"), "{shown:?}");
    assert!(shown.stdout.contains("rewound →"), "{}", shown.stdout);

    let out =
        run(env
            .keel(&mock.base_url())
            .args(["--approval", "auto", "resume", "--last", "again"]));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let bodies = mock.raw_requests();
    let second = bodies
        .iter()
        .find(|b| last_user_text(&serde_json::from_slice(b).unwrap()) == "second")
        .unwrap();
    let again = bodies.last().unwrap();
    // The request after the rewind is the request of turn 2 up to its prompt, byte for byte,
    // then the new prompt: the provider's prefix cache still hits.
    let prefix = &second[..message_start(second, "second")];
    assert!(
        again.starts_with(prefix),
        "not a prefix:\n{}\n---\n{}",
        String::from_utf8_lossy(prefix),
        String::from_utf8_lossy(again)
    );
    assert_eq!(message_start(again, "again"), prefix.len());
    let text = String::from_utf8_lossy(again);
    assert!(
        !text.contains("third") && !text.contains("Second done"),
        "{text}"
    );

    // Undo: the history the model had before the rewind (turns 1-3), without turn 4.
    let out = rewind(&env, &["--undo"]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(
        out.stdout.contains("Undid the last conversation rewind"),
        "{}",
        out.stdout
    );
    assert_eq!(
        tree(&env.ws),
        files,
        "the last rewind was the conversation's only"
    );
    let out =
        run(env
            .keel(&mock.base_url())
            .args(["--approval", "auto", "resume", "--last", "fourth"]));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let fourth: Value = serde_json::from_slice(mock.raw_requests().last().unwrap()).unwrap();
    let users: Vec<String> = fourth["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect();
    let joined = users.join("\n");
    for want in ["first", "second", "third", "fourth"] {
        assert!(joined.contains(want), "{want} missing: {joined}");
    }
    assert!(!joined.contains("again"), "{joined}");
}

#[test]
fn rewind_returns_the_files_to_each_turn_and_undo_returns() {
    let env = Env::new();
    env.write("existing.txt", "v0\n");
    env.write("keep.txt", "untouched\n");
    let mock = Mock::start(SCRIPT);
    let mut states = vec![tree(&env.ws)];
    for (i, prompt) in ["first", "second", "third"].iter().enumerate() {
        let mut cmd = env.keel(&mock.base_url());
        cmd.args(["--approval", "auto"]);
        if i == 0 {
            cmd.args(["run", prompt]);
        } else {
            cmd.args(["resume", "--last", prompt]);
        }
        let out = run(&mut cmd);
        assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
        states.push(tree(&env.ws));
    }
    // The turns did what the script says, the late write included.
    assert_eq!(
        states[2].get("out/late.txt").map(Vec::as_slice),
        Some(&b"late\n"[..])
    );
    assert!(!states[2].contains_key("new.txt"));
    let events = load_consistent(&env.only_session());
    let created = of_type(&events, "checkpoint/created");
    assert!(created.len() >= 6, "{created:#?}");
    // The checkpoints are in keel's shadow repository, not the workspace.
    assert!(!env.ws.join(".git").exists());
    assert!(env.home.join("checkpoints").is_dir());

    // Before each turn, newest first, then forward again.
    for turn in [3usize, 2, 1] {
        let out = rewind(&env, &["--to", &turn.to_string()]);
        assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
        assert_eq!(
            tree(&env.ws),
            states[turn - 1],
            "before turn {turn}: {}",
            out.stdout
        );
    }
    let out = rewind(&env, &["--undo"]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(
        tree(&env.ws),
        states[1],
        "undo returns to before the last rewind"
    );

    // A hand edit since: reported and kept; --force overwrites it.
    env.write("existing.txt", "by hand\n");
    let out = rewind(&env, &["--to", "1", "--json"]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let report: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(
        report["kept"],
        serde_json::json!(["existing.txt"]),
        "{report}"
    );
    assert_eq!(env.read("existing.txt"), "by hand\n");
    assert!(!env.ws.join("new.txt").exists());
    let out = rewind(&env, &["--to", "1", "--force"]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(tree(&env.ws), states[0]);

    // Every rewind is in the log; nothing else of it changed.
    let events = load_consistent(&env.only_session());
    assert_eq!(of_type(&events, "checkpoint/restored").len(), 6);
    assert_eq!(of_type(&events, "turn/end").len(), 3);

    // A fork just before turn 3 with its files: the tree as it was then, the rewind logged
    // in the new session (whose undo returns), the parent untouched.
    let parent = env.only_session();
    let out = run(env
        .keel_bare()
        .args(["fork", "--at", "3", "--files", "--json"]));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let forked: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert!(forked["files"]["written"].is_array(), "{forked}");
    assert_eq!(tree(&env.ws), states[2]);
    let child = forked["session"].as_str().unwrap();
    let events = load_consistent(Path::new(forked["path"].as_str().unwrap()));
    assert_eq!(of_type(&events, "checkpoint/restored").len(), 1);
    assert_eq!(
        of_type(&load_consistent(&parent), "checkpoint/restored").len(),
        6
    );
    let out = rewind(&env, &[child, "--undo"]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(tree(&env.ws), states[0]);

    // Bad targets name themselves.
    let out = rewind(&env, &[parent.to_str().unwrap(), "--to", "9"]);
    assert_eq!(out.code, Some(2));
    assert!(
        out.stderr
            .contains("--to 9: the session has 3 turn(s), not turn 9"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_killed_session_rewinds_after_its_cold_resume() {
    let env = Env::new();
    env.write("a.txt", "before\n");
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "change" }
    tool_calls:
      - { id: w1, name: write, arguments: { file_path: "a.txt", content: "after\n" } }
  - match: { last_tool_result_contains: "a.txt" }
    tool_calls:
      - { id: b1, name: bash, arguments: { command: "echo partial > b.txt; echo go > started; sleep 5", description: "long" } }
  - match: { last_user_contains: "go on" }
    text: "Resumed."
"#,
    );
    let mut cmd = env.keel(&mock.base_url());
    cmd.args(["--approval", "auto", "run", "change things"]);
    let child = spawn(&mut cmd);
    env.wait_for_file("started");
    child.signal(libc_sigkill());
    let _ = child.wait();
    let out =
        run(env
            .keel(&mock.base_url())
            .args(["--approval", "auto", "resume", "--last", "go on"]));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let out = rewind(&env, &["--to", "1"]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(env.read("a.txt"), "before\n");
    assert!(!env.ws.join("b.txt").exists());
    assert!(!env.ws.join("started").exists());

    // The rewind follows the checkpoints row of the user's configuration.
    std::fs::write(
        env.home.join("config.toml"),
        "[[plugins]]\nid = \"checkpoints\"\n[plugins.config]\nmax_files = 1\n",
    )
    .unwrap();
    let out = rewind(&env, &["--undo"]);
    assert_eq!(out.code, Some(2), "{}", out.stdout);
    assert!(
        out.stderr.contains("more than 1 files") && out.stderr.contains("max_files"),
        "{}",
        out.stderr
    );
    assert_eq!(env.read("a.txt"), "before\n", "nothing changed");
}

fn libc_sigkill() -> i32 {
    9
}
