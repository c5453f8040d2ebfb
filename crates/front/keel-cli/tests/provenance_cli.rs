//! End to end: the real `keel` binary with `--provenance` against the loopback mock model;
//! `keel trace` and `keel provenance verify` on the journal it wrote; tamper detection; a
//! SIGKILL mid-tool followed by `keel resume`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use support::{Env, Mock, run, session_id, spawn, tool_results};

const WORKLOAD: &str = r#"
- tool_calls:
    - { id: r_ok, name: read, arguments: { path: notes.txt } }
    - { id: r_fail, name: read, arguments: { path: missing.txt } }
    - { id: w_denied, name: write, arguments: { path: new.txt, content: "x" } }
- text: done
"#;

fn journal(env: &Env, session: &str) -> PathBuf {
    env.home.join("provenance").join(session)
}

fn verify(env: &Env, target: &str) -> support::Output {
    let mut cmd = env.keel("http://127.0.0.1:9");
    run(cmd.args(["provenance", "verify", target]))
}

fn run_workload(env: &Env, provenance: bool) -> support::Output {
    env.write("notes.txt", "one\ntwo\n");
    let mock = Mock::start(WORKLOAD);
    let mut cmd = env.keel(&mock.base_url());
    if provenance {
        cmd.arg("--provenance");
    }
    run(cmd.args(["--sandbox", "read-only", "run", "read the notes"]))
}

#[test]
fn results_identical_on_and_off_trace_and_verify() {
    let (on, off) = (Env::new(), Env::new());
    let out = run_workload(&on, true);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let out = run_workload(&off, false);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(!off.home.join("provenance").exists(), "off by default");
    let results = |env: &Env| {
        let events = support::load_consistent(&env.only_session());
        tool_results(&events)
    };
    let norm = |env: &Env| -> Vec<(String, String, bool)> {
        let ws = env.ws.display().to_string();
        results(env)
            .into_iter()
            .map(|(id, text, err)| (id, text.replace(&ws, "WS"), err))
            .collect()
    };
    let (a, b) = (norm(&on), norm(&off));
    assert_eq!(a, b);
    assert!(a[2].1.starts_with("DENIED"), "{:?}", a[2]);

    let id = session_id(&on.only_session());
    let out = verify(&on, &id);
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.starts_with("valid: "), "{}", out.stdout);

    // trace: text, json (the tool's answer shape), dot; an alias of the tool-result event too.
    let mut cmd = on.keel("http://127.0.0.1:9");
    let out = run(cmd.args(["trace", "result:r_ok", "--session", &id, "--format", "json"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let answer: Value = serde_json::from_str(&out.stdout).unwrap();
    let stages: Vec<&str> = answer["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["stage"].as_str())
        .collect();
    assert_eq!(stages.first(), Some(&"tool/result"));
    assert_eq!(stages.last(), Some(&"assistant/message"));
    assert!(!out.stdout.contains("one\\ntwo"), "no payloads in a trace");
    let mut cmd = on.keel("http://127.0.0.1:9");
    let out = run(cmd.args(["trace", "w_denied", "--session", &id]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("denied"), "{}", out.stdout);
    assert!(!out.stdout.contains("tools/execute"), "{}", out.stdout);
    let mut cmd = on.keel("http://127.0.0.1:9");
    let out = run(cmd.args(["trace", "r_fail", "--format", "dot"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout.starts_with("digraph provenance {"),
        "{}",
        out.stdout
    );
    let mut cmd = on.keel("http://127.0.0.1:9");
    let out = run(cmd.args(["trace", "nope", "--session", &id]));
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("UNKNOWN_TARGET"), "{}", out.stderr);
}

/// Flip one byte of `file` at `offset` (xor 0x01), returning the original bytes.
fn flip(file: &Path, offset: usize) -> Vec<u8> {
    let original = std::fs::read(file).unwrap();
    let mut bytes = original.clone();
    bytes[offset] ^= 0x01;
    std::fs::write(file, bytes).unwrap();
    original
}

#[test]
fn any_single_byte_flip_fails_verification() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    let mock = Mock::start(
        "- tool_calls: [ { id: c1, name: read, arguments: { path: a.txt } } ]\n- text: ok\n",
    );
    let out = run(env
        .keel(&mock.base_url())
        .args(["--provenance", "run", "go"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let id = session_id(&env.only_session());
    let dir = journal(&env, &id);
    let receipts = std::fs::read(dir.join("receipts.jsonl")).unwrap();
    let graph = std::fs::read(dir.join("graph.json")).unwrap();
    // In process (the validator the binary runs): every offset of receipts.jsonl; of graph.json
    // the first and last 2 KiB whole and every 7th byte between (each check recompiles the
    // graph, and the machine is shared; the validator's own tests flip every graph byte of a
    // smaller journal).
    for offset in 0..receipts.len() {
        let mut bytes = receipts.clone();
        bytes[offset] ^= 0x01;
        let r = keel_provenance::verify_bytes(&bytes, Some(&graph));
        assert!(
            r.is_err(),
            "receipts.jsonl: flipping byte {offset} went undetected"
        );
    }
    let edge = 2048.min(graph.len());
    let offsets = (0..graph.len()).filter(|&o| o < edge || o >= graph.len() - edge || o % 7 == 0);
    for offset in offsets {
        let mut bytes = graph.clone();
        bytes[offset] ^= 0x01;
        let r = keel_provenance::verify_bytes(&receipts, Some(&bytes));
        assert!(
            r.is_err(),
            "graph.json: flipping byte {offset} went undetected"
        );
    }
    for name in ["receipts.jsonl", "graph.json"] {
        let file = dir.join(name);
        let len = std::fs::read(&file).unwrap().len();
        // … and a spread of offsets, first and last included, through the real binary.
        let step = (len / 24).max(1);
        for offset in (0..len).step_by(step).chain([len - 1]) {
            let original = flip(&file, offset);
            let out = verify(&env, &id);
            std::fs::write(&file, &original).unwrap();
            assert_eq!(
                out.code,
                Some(1),
                "{name} byte {offset}: {}{}",
                out.stdout,
                out.stderr
            );
            assert!(out.stdout.starts_with("invalid: "), "{}", out.stdout);
        }
    }
    assert_eq!(verify(&env, &id).code, Some(0));
}

#[test]
fn sigkill_mid_tool_leaves_a_prefix_that_resume_closes() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
- tool_calls: [ { id: first, name: read, arguments: { path: a.txt } } ]
- tool_calls: [ { id: slow, name: bash, arguments: { command: "touch started && sleep 60" } } ]
"#,
    );
    env.write("a.txt", "a\n");
    let running =
        spawn(
            env.keel(&mock.base_url())
                .args(["--provenance", "--approval", "auto", "run", "go"]),
        );
    let deadline = std::time::Instant::now() + support::HANG_GUARD;
    while !env.ws.join("started").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "hang guard: the slow tool never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    running.signal(libc::SIGKILL);
    let out = running.wait();
    assert_eq!(out.code, None, "killed by the signal");
    let id = session_id(&env.only_session());
    let out = verify(&env, &id);
    assert_eq!(
        out.code,
        Some(0),
        "a killed run verifies as a prefix: {}",
        out.stdout
    );
    let receipts = std::fs::read_to_string(journal(&env, &id).join("receipts.jsonl")).unwrap();
    assert!(
        receipts.contains("\"native_id\":\"slow\""),
        "the slow call was captured"
    );
    assert!(!receipts.contains("outcome_unobserved"));

    let out = run(env
        .keel(&mock.base_url())
        .args(["--provenance", "resume", &id]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let out = verify(&env, &id);
    assert_eq!(out.code, Some(0), "{}", out.stdout);
    let receipts = std::fs::read_to_string(journal(&env, &id).join("receipts.jsonl")).unwrap();
    let close: Vec<Value> = receipts
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["stage"] == "capture/close")
        .collect();
    assert_eq!(close.len(), 1, "{close:?}");
    assert_eq!(close[0]["native_id"], "slow");
    assert_eq!(close[0]["bindings"][0]["disposition"], "outcome_unobserved");
}

#[test]
fn a_subagent_has_its_own_journal_and_its_chain_joins_the_spawning_call() {
    let env = Env::new();
    env.write("notes.txt", "one\ntwo\n");
    // Parent step 1 spawns child A, which reads a file, traces its own call and answers;
    // parent step 2 spawns child B, which traces A's call (a sibling's: out of its scope);
    // parent step 3 traces its first subagent result with the `trace` tool; step 4 ends.
    let mock = Mock::start(
        r#"
- tool_calls: [ { id: call_sub, name: subagent, arguments: { description: "read notes", prompt: "read notes.txt" } } ]
- tool_calls: [ { id: c_read, name: read, arguments: { path: notes.txt } } ]
- tool_calls: [ { id: c_own, name: trace, arguments: { target_id: "result:c_read", max_depth: 2 } } ]
- text: "CHILD-ANSWER: two lines"
- tool_calls: [ { id: call_sub2, name: subagent, arguments: { description: "peek", prompt: "trace it" } } ]
- tool_calls: [ { id: c_sibling, name: trace, arguments: { target_id: "result:c_read" } } ]
- text: "B done"
- tool_calls: [ { id: q_trace, name: trace, arguments: { target_id: "result:call_sub", max_depth: 64 } } ]
- text: done
"#,
    );
    let out = run(env.keel(&mock.base_url()).args([
        "--provenance",
        "--approval",
        "auto",
        "run",
        "delegate",
    ]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let files = env.session_files();
    assert_eq!(files.len(), 3, "parent and two child sessions: {files:?}");
    let (mut parent, mut children) = (None, Vec::new());
    for f in &files {
        let loaded = keel_session::Store::load(f).unwrap();
        if loaded.session.header().parent_session.is_some() {
            children.push(f);
        } else {
            parent = Some(session_id(f));
        }
    }
    let parent = parent.unwrap();
    let results_of = |f: &std::path::Path| tool_results(&support::load_consistent(f));
    let (a, b): (Vec<&PathBuf>, Vec<&PathBuf>) = children
        .into_iter()
        .partition(|f| results_of(f).iter().any(|r| r.0 == "c_read"));
    let (child, sibling) = (session_id(a[0]), results_of(b[0]));
    // A child's query tools answer over its own session: its own call traces completely; a
    // sibling's call is out of its scope.
    let own = results_of(a[0])
        .into_iter()
        .find(|r| r.0 == "c_own")
        .unwrap();
    assert!(!own.2 && own.1.contains("\"complete\":true"), "{own:?}");
    let peek = sibling.iter().find(|r| r.0 == "c_sibling").unwrap();
    assert!(peek.2 && peek.1.contains("UNKNOWN_TARGET"), "{peek:?}");
    // Each session has its own journal, and they verify.
    for id in [&parent, &child, &session_id(b[0])] {
        let out = verify(&env, id);
        assert_eq!(out.code, Some(0), "{id}: {}{}", out.stdout, out.stderr);
    }
    let child_receipts =
        std::fs::read_to_string(journal(&env, &child).join("receipts.jsonl")).unwrap();
    assert!(
        child_receipts.contains("\"native_id\":\"c_read\""),
        "the child's own call is in the child's journal"
    );
    let parent_receipts =
        std::fs::read_to_string(journal(&env, &parent).join("receipts.jsonl")).unwrap();
    assert!(
        !parent_receipts.contains("c_read"),
        "the child's calls stay out of the parent's journal"
    );
    // The join sits inside the spawning call's formation: enter, join, result.
    let stages: Vec<(String, String)> = parent_receipts
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|r| {
            (
                r["stage"].as_str().unwrap().to_owned(),
                r["native_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let at = |stage: &str| stages.iter().position(|(s, _)| s == stage).unwrap();
    assert!(
        at("tools/execute:enter") < at("subagent/join"),
        "{stages:?}"
    );
    assert!(at("subagent/join") < at("tools/execute"), "{stages:?}");
    assert_eq!(stages[at("subagent/join")].1, child);

    // A backward trace from the parent's subagent result reaches into the child's chain, both
    // through the trace tool (as the model saw it: depth 64 would be over the tool's answer
    // budget, so it answers at the largest depth that fits, as whole JSON) and `keel trace`
    // (depth 6 crosses settled, post, execute and the join into the child's last stages).
    let child_ids: Vec<String> = child_receipts
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["receipt_id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let reaches_child = |answer: &Value| {
        answer["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| n["receipt_id"].as_str())
            .filter(|r| child_ids.iter().any(|c| c == r))
            .count()
    };
    let events = support::load_consistent(files.iter().find(|f| session_id(f) == parent).unwrap());
    let tool_answer = tool_results(&events)
        .into_iter()
        .find(|(id, _, _)| id == "q_trace")
        .unwrap();
    assert!(!tool_answer.2, "{}", tool_answer.1);
    assert!(
        tool_answer.1.len() <= keel_provenance::plugin::TRACE_ANSWER_BUDGET,
        "{}",
        tool_answer.1.len()
    );
    let tool_answer: Value = serde_json::from_str(&tool_answer.1).unwrap();
    assert_eq!(tool_answer["complete"], true, "{tool_answer}");
    assert_eq!(tool_answer["truncated"], true, "cut to fit the budget");
    assert!(reaches_child(&tool_answer) > 0, "{tool_answer}");

    let out = run(env.keel("http://127.0.0.1:9").args([
        "trace",
        "result:call_sub",
        "--session",
        &parent,
        "--max-depth",
        "6",
        "--format",
        "json",
    ]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let cli_answer: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(cli_answer["complete"], true, "{cli_answer}");
    assert!(reaches_child(&cli_answer) > 0, "{cli_answer}");
    let stages_of = |a: &Value| -> Vec<String> {
        a["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| n["stage"].as_str().map(str::to_owned))
            .collect()
    };
    assert!(
        stages_of(&cli_answer).contains(&"subagent/join".to_owned()),
        "{cli_answer}"
    );
}
