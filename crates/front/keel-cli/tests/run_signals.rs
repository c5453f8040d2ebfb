//! End-to-end: signals to the real `keel` binary mid-stream and mid-tool, then `keel resume`.
//!
//! SIGINT cancels the turn: the log ends with `turn/end{aborted}`, the streamed part is kept
//! as an interrupted assistant message (or the running tool is answered `ABORTED`), and a
//! resumed session sends a valid request. SIGKILL leaves an open turn that crash repair closes
//! on resume: the started tool is reported `TOOL_OUTCOME_UNKNOWN`, never silently run again.
//! The tests wait for the log (or a file the tool writes) to show the moment they need; they
//! never sleep for a fixed time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::*;

/// A stalled stream that has started: some text delta is in the log.
fn text_streamed(events: &[Value]) -> bool {
    events
        .iter()
        .any(|e| ty(e) == "assistant/chunk" && e["data"]["chunk"]["type"] == "text-delta")
}

/// Resume `id` with `prompt` against a mock that answers once; returns the resumed output and
/// the request the mock received.
fn resume(env: &Env, id: &str, prompt: &str) -> (Output, Value) {
    let mock = Mock::start("responses:\n  - text: \"Resumed and done.\"\n");
    let out = run(env
        .keel(&mock.base_url())
        .args(["--approval", "auto", "resume", id, prompt]));
    let requests = mock.requests();
    assert_eq!(requests.len(), 1, "resume stderr:\n{}", out.stderr);
    (out, requests.into_iter().next().unwrap())
}

/// Wait (bounded, generously) for process group `pgid` to be gone; fail naming `what` if it
/// outlives the wait, after killing it so that no test leaves processes behind.
fn assert_group_ends(pgid: i32, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while group_alive(pgid) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let survived = group_alive(pgid);
    kill_group(pgid);
    assert!(!survived, "{what}'s process group {pgid} outlived keel");
}

#[test]
fn sigkill_of_keel_alone_kills_the_whole_tool_tree() {
    let env = Env::new();
    // The tree: bash → sh → (sleep 1 in the background, sleep 1), then `touch marker` — the
    // side effect nobody would be watching if the tree outlived keel.
    let mock = Mock::start(
        r#"
responses:
  - tool_calls: [{ id: tree, name: bash, arguments: { command: "echo $$ > pgid.txt; sh -c 'sleep 1 & echo up > up.txt; sleep 1; touch marker'; touch marker2" } }]
  - text: "not reached"
"#,
    );
    let keel =
        spawn(
            env.keel(&mock.base_url())
                .args(["--approval", "auto", "run", "start the tree"]),
        );
    let pgid: i32 = env.wait_for_file("pgid.txt").trim().parse().unwrap();
    env.wait_for_file("up.txt");
    assert!(group_alive(pgid), "the tree runs before the kill");
    keel.signal(libc::SIGKILL); // keel alone, not its process group
    let out = keel.wait();
    assert_eq!(out.code, None, "killed by a signal");
    assert_group_ends(pgid, "the tool's tree");
    // Past the moment the tree would have done its side effect had it lived on.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(!env.ws.join("marker").exists(), "the inner sh finished");
    assert!(!env.ws.join("marker2").exists(), "bash finished");
}

#[test]
fn background_children_of_a_tool_live_through_the_turn_and_end_with_keel() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - tool_calls: [{ id: bg, name: bash, arguments: { command: "sleep 30 > /dev/null 2>&1 & echo $$ > pgid.txt" } }]
  - tool_calls: [{ id: check, name: bash, arguments: { command: "kill -0 -$(cat pgid.txt) && echo still-there" } }]
  - text: "done"
"#,
    );
    let out = run(env
        .keel(&mock.base_url())
        .args(["--approval", "auto", "run", "start a server"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let events = load_consistent(&env.only_session());
    let results = tool_results(&events);
    assert!(
        results[1].1.contains("still-there"),
        "the background child outlives its command: {results:?}"
    );
    let pgid: i32 = env.read("pgid.txt").trim().parse().unwrap();
    assert_group_ends(pgid, "the tool's background child");
}

#[test]
fn sigint_mid_stream_keeps_the_partial_answer_and_resume_continues() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - behaviour: stall
    reasoning: "The user wants the file read; I will read it and then report."
    text: "I am going to read a.txt now and then tell you what it says."
    tool_calls: [{ id: never_run, name: bash, arguments: { command: "touch ran.txt" } }]
"#,
    );
    let keel = spawn(
        env.keel(&mock.base_url())
            .args(["--approval", "auto", "run", "read a.txt"]),
    );
    env.wait_for_log("a streamed text delta", text_streamed);
    keel.signal(libc::SIGINT);
    let out = keel.wait();
    assert_eq!(out.code, Some(1), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr.contains("cancelling the turn"),
        "stderr:\n{}",
        out.stderr
    );
    assert!(out.stderr.contains("aborted"), "stderr:\n{}", out.stderr);
    assert!(!env.ws.join("ran.txt").exists());

    let path = env.only_session();
    let events = load_consistent(&path);
    assert_eq!(ty(last(&events)), "turn/end");
    assert_eq!(
        turn_end_reasons(&events),
        vec![json!({"kind": "aborted", "reason": "cancelled by the user"})]
    );
    let messages = of_type(&events, "assistant/message");
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0]["data"]["interrupted"], true);
    let content = messages[0]["data"]["message"]["content"]
        .as_array()
        .unwrap();
    let text: String = content
        .iter()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect();
    assert!(
        !text.is_empty()
            && "I am going to read a.txt now and then tell you what it says.".starts_with(&text),
        "{text:?}"
    );
    // Any complete tool call of the interrupted message is answered without running.
    let calls: Vec<&str> = content
        .iter()
        .filter(|b| b["type"] == "tool-call")
        .filter_map(|b| b["id"].as_str())
        .collect();
    let results = tool_results(&events);
    assert_eq!(
        results.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
        calls
    );
    for (id, text, is_error) in &results {
        assert!(
            *is_error && text.starts_with("ABORTED_BEFORE_DISPATCH"),
            "{id}: {text}"
        );
    }

    let (out, request) = resume(&env, &session_id(&path), "continue");
    assert_eq!(out.code, Some(0), "resume stderr:\n{}", out.stderr);
    assert_eq!(out.stdout, "Resumed and done.\n");
    assert_wire_valid(&request);
    assert_eq!(last_user_text(&request), "continue");
    let sent_partial = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["role"] == "assistant" && m["content"] == text.as_str());
    assert!(
        sent_partial,
        "the interrupted answer stays in the history: {request}"
    );
    let events = load_consistent(&path);
    assert_eq!(
        turn_end_reasons(&events).last(),
        Some(&json!({"kind": "completed"}))
    );
}

#[test]
fn sigint_mid_tool_aborts_the_command_and_resume_continues() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - tool_calls: [{ id: slow, name: bash, arguments: { command: "echo $$ > pid.txt; sleep 300; echo done > finished.txt" } }]
  - text: "not reached"
"#,
    );
    let keel =
        spawn(
            env.keel(&mock.base_url())
                .args(["--approval", "auto", "run", "run the slow thing"]),
        );
    let pgid: i32 = env.wait_for_file("pid.txt").trim().parse().unwrap();
    keel.signal(libc::SIGINT);
    let out = keel.wait();
    assert_eq!(out.code, Some(1), "stderr:\n{}", out.stderr);

    // The command's whole process group is gone (killed, not orphaned).
    assert_group_ends(pgid, "the cancelled command");
    assert!(!env.ws.join("finished.txt").exists());

    let path = env.only_session();
    let events = load_consistent(&path);
    assert_eq!(
        turn_end_reasons(&events),
        vec![json!({"kind": "aborted", "reason": "cancelled by the user"})]
    );
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    let (id, text, is_error) = &results[0];
    assert_eq!(id, "slow");
    assert!(*is_error && text.starts_with("ABORTED"), "{text}");
    assert_eq!(
        mock.requests().len(),
        1,
        "a cancelled turn sends no further request"
    );

    let (out, request) = resume(&env, &session_id(&path), "continue");
    assert_eq!(out.code, Some(0), "resume stderr:\n{}", out.stderr);
    let answered = assert_wire_valid(&request);
    assert_eq!(answered.len(), 1);
    assert!(answered[0].1.starts_with("ABORTED"), "{answered:?}");
    assert_eq!(last_user_text(&request), "continue");
}

#[test]
fn sigkill_during_a_tool_resume_reports_outcome_unknown_and_does_not_rerun_it() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - tool_calls: [{ id: once, name: bash, arguments: { command: "echo $$ >> runs.txt; sleep 300" } }]
  - text: "not reached"
"#,
    );
    let keel = spawn(
        env.keel(&mock.base_url())
            .args(["--approval", "auto", "run", "run it once"]),
    );
    let runs = env.wait_for_file("runs.txt");
    keel.signal(libc::SIGKILL);
    let out = keel.wait();
    assert_eq!(out.code, None, "killed by a signal");
    // keel could not clean up, but its reaper did: the command died with keel.
    assert_group_ends(runs.trim().parse().unwrap(), "the running command");

    let path = env.only_session();
    let before = keel_session::Store::load(&path).unwrap();
    assert!(before.session.check_invariants().is_ok());
    let before = to_values(&before.session);
    // (A workspace checkpoint taken just before the body may follow the call.)
    let loop_events: Vec<Value> = before
        .iter()
        .filter(|e| !ty(e).starts_with("checkpoint/"))
        .cloned()
        .collect();
    assert_eq!(
        ty(last(&loop_events)),
        "tool/call",
        "the call was durable before its body ran"
    );
    assert!(turn_end_reasons(&before).is_empty());

    let (out, request) = resume(&env, &session_id(&path), "next");
    assert_eq!(out.code, Some(0), "resume stderr:\n{}", out.stderr);
    assert!(
        out.stderr.contains(
            "keel: crash repair closed turn 1 as interrupted (it stopped in step 1); the outcome \
             of 1 tool call is unknown (once): it may or may not have taken effect\n"
        ),
        "stderr:\n{}",
        out.stderr
    );
    assert!(!out.stderr.contains("RepairReport"), "{}", out.stderr);
    assert_eq!(env.read("runs.txt"), runs, "the command must not run again");

    let events = load_consistent(&path);
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    let (id, text, is_error) = &results[0];
    assert_eq!(id, "once");
    assert!(
        *is_error && text.starts_with("TOOL_OUTCOME_UNKNOWN"),
        "{text}"
    );
    // Repair appended result, step/end, turn/end{interrupted} right after the committed prefix.
    let repaired: Vec<&str> = events[before.len()..before.len() + 3]
        .iter()
        .map(ty)
        .collect();
    assert_eq!(repaired, ["tool/result", "step/end", "turn/end"]);
    assert_eq!(
        turn_end_reasons(&events),
        vec![json!({"kind": "interrupted"}), json!({"kind": "completed"})]
    );

    let answered = assert_wire_valid(&request);
    assert_eq!(
        answered.iter().map(|a| a.0.as_str()).collect::<Vec<_>>(),
        ["once"]
    );
    assert!(
        answered[0].1.starts_with("TOOL_OUTCOME_UNKNOWN"),
        "{answered:?}"
    );
    assert_eq!(last_user_text(&request), "next");
}

#[test]
fn sigkill_mid_stream_resume_closes_the_turn_and_drops_the_half_answer() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - behaviour: stall
    text: "A long answer that will be cut off by SIGKILL somewhere in the middle."
"#,
    );
    let keel = spawn(
        env.keel(&mock.base_url())
            .args(["--approval", "auto", "run", "answer"]),
    );
    env.wait_for_log("a streamed text delta", text_streamed);
    keel.signal(libc::SIGKILL);
    assert_eq!(keel.wait().code, None);

    let path = env.only_session();
    let (out, request) = resume(&env, &session_id(&path), "next");
    assert_eq!(out.code, Some(0), "resume stderr:\n{}", out.stderr);
    let events = load_consistent(&path);
    assert_eq!(
        turn_end_reasons(&events),
        vec![json!({"kind": "interrupted"}), json!({"kind": "completed"})]
    );
    assert!(tool_results(&events).is_empty());
    assert_wire_valid(&request);
    let roles: Vec<&str> = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    // The interrupted turn's runtime context and prompt, then the new prompt: one user message
    // (never two in a row), the first request's bytes kept as its prefix.
    assert_eq!(roles, ["system", "user"], "{request}");
    let text = last_user_text(&request);
    assert!(
        text.starts_with("Current runtime context.") && text.ends_with("\n\nanswer\n\nnext"),
        "{text}"
    );
}
