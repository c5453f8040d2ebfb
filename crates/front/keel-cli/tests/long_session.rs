//! A long session through the real binary and the loopback mock model with a small context
//! window (`--context-window 16384`): compaction by pressure replaces old history with a
//! summary, later requests are shorter and keep the recent tail, and `keel sessions show`
//! still shows everything that happened.

#![allow(clippy::unwrap_used)]

mod support;

use serde_json::Value;
use support::*;

const STEPS: usize = 12;

fn script() -> String {
    let mut s = String::from("responses:\n");
    // Summary requests end with the compaction instruction; step requests never do, so these
    // answer only summaries, whatever their position.
    for _ in 0..3 {
        s.push_str(
            "  - match: {last_user_contains: \"Context compaction\"}\n    text: \"SUMMARY-OF-EARLIER-STEPS: the user asked to run the numbered steps; each printed 1..1500.\"\n",
        );
    }
    for i in 1..=STEPS {
        s.push_str(&format!(
            "  - text: \"Step {i}.\"\n    tool_calls:\n      - {{name: bash, arguments: {{command: \"seq 1 1500; echo step-{i}-done\"}}}}\n"
        ));
    }
    s.push_str("  - text: \"All steps done.\"\n");
    s
}

fn messages(request: &Value) -> &Vec<Value> {
    request["messages"].as_array().unwrap()
}

fn contains(request: &Value, needle: &str) -> bool {
    messages(request)
        .iter()
        .any(|m| m.to_string().contains(needle))
}

#[test]
fn pressure_compaction_shortens_requests_keeps_the_tail_and_loses_nothing() {
    let env = Env::new();
    let mock = Mock::start(&script());
    let out = run(env.keel(&mock.base_url()).args([
        "--approval",
        "auto",
        "--context-window",
        "16384",
        "run",
        "run the numbered steps",
    ]));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(
        out.stdout.contains("All steps done."),
        "stdout: {}",
        out.stdout
    );

    let path = env.only_session();
    let events = load_consistent(&path);
    // The log shows the bracketed compaction and the replacing summary message.
    let types: Vec<&str> = events.iter().map(ty).collect();
    let start = types
        .iter()
        .position(|t| *t == "compaction/start")
        .expect("compaction/start");
    let summary = types
        .iter()
        .position(|t| *t == "compaction/summary")
        .expect("compaction/summary");
    let end = types
        .iter()
        .position(|t| *t == "compaction/end")
        .expect("compaction/end");
    assert!(start < summary && summary < end, "{types:?}");
    let replacing: Vec<&Value> = events
        .iter()
        .filter(|e| ty(e) == "user/message" && e["surfaceOp"].is_object())
        .collect();
    assert!(!replacing.is_empty(), "no replacing user/message");
    let shadowed = replacing[0]["sourceEventSeqs"].as_array().unwrap();
    assert!(
        shadowed.len() > 2,
        "the summary replaces a span: {shadowed:?}"
    );
    // Every original tool result is still in the log.
    for i in 1..=STEPS {
        let marker = format!("step-{i}-done");
        assert!(
            events
                .iter()
                .any(|e| ty(e) == "tool/result" && e.to_string().contains(&marker)),
            "{marker} missing from the log"
        );
    }

    // Requests: find the first one that carries the summary; it is shorter than the one before
    // it, and still carries the most recent tool result the previous request had.
    let requests = mock.requests();
    let steps: Vec<&Value> = requests
        .iter()
        .filter(|r| !contains(r, "Context compaction:"))
        .collect();
    let first = steps
        .iter()
        .position(|r| contains(r, "SUMMARY-OF-EARLIER-STEPS"))
        .expect("no request carries the summary");
    assert!(first > 0);
    let (before, after) = (steps[first - 1], steps[first]);
    assert!(
        messages(after).len() < messages(before).len(),
        "{} messages after compaction vs {} before",
        messages(after).len(),
        messages(before).len()
    );
    assert!(after.to_string().len() < before.to_string().len());
    // The recent tail: the newest tool result logged before compaction began is sent verbatim
    // after it.
    let newest = events[..start]
        .iter()
        .rev()
        .find(|e| ty(e) == "tool/result")
        .map(|e| tool_result(e).1)
        .unwrap();
    assert!(
        messages(after)
            .iter()
            .any(|m| m["role"] == "tool" && m["content"].as_str() == Some(newest.as_str())),
        "the recent tail was not kept"
    );
    assert!(
        !contains(after, "step-1-done"),
        "the oldest step should have been summarised away"
    );

    // `keel sessions show` still shows all of it, the compacted part marked.
    let show = run(env
        .keel(&mock.base_url())
        .args(["sessions", "show", path.to_str().unwrap()]));
    assert_eq!(show.code, Some(0), "{}", show.stderr);
    for i in 1..=STEPS {
        assert!(
            show.stdout.contains(&format!("step-{i}-done")),
            "show lacks step {i}:\n{}",
            show.stdout
        );
    }
    assert!(show.stdout.contains("compacted"), "{}", show.stdout);
}
