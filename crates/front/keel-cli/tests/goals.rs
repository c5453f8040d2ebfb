//! End-to-end: `keel run --goal` (the real binary) against the loopback mock model: the driver
//! starts `<goal_round>` turns until `update_goal` completes or blocks the goal or its rounds
//! run out; each outcome has its exit code; the goal and its rounds are in the log.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;
use support::*;

fn goal_run(env: &Env, script: &str, extra: &[&str]) -> (Output, Mock, Vec<Value>) {
    let mock = Mock::start(script);
    let out = run(env
        .keel(&mock.base_url())
        .args(["run", "--goal", "make the tests pass"])
        .args(extra));
    let events = load_consistent(&env.only_session());
    (out, mock, events)
}

fn statuses(events: &[Value]) -> Vec<String> {
    of_type(events, "goal/set")
        .iter()
        .map(|e| e["data"]["status"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_goal_runs_rounds_until_the_model_completes_it() {
    let env = Env::new();
    let (out, mock, events) = goal_run(
        &env,
        r#"
responses:
  - text: "round one done"
  - text: "round two done"
  - tool_calls: [{ id: u1, name: update_goal, arguments: { goal_id: g1, revision: 1, action: complete } }]
  - text: "all done"
"#,
        &[],
    );
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr.contains("goal g1 complete after 3 rounds"),
        "{}",
        out.stderr
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    for (i, request) in requests.iter().take(3).enumerate() {
        let text = last_user_text(request);
        assert!(
            text.contains(&format!("<goal_round round=\"{}\" max=\"256\"", i + 1))
                && text.contains("make the tests pass"),
            "{text}"
        );
    }
    // get_goal and update_goal are offered once there is a goal.
    let names = requests[0]["tools"].to_string();
    assert!(
        names.contains("\"update_goal\"") && names.contains("\"create_goal\""),
        "{names}"
    );
    assert_eq!(statuses(&events), ["active", "complete"]);
    assert_eq!(of_type(&events, "goal/round").len(), 3);
    assert_eq!(of_type(&events, "turn/end").len(), 3);
}

#[test]
fn blocked_is_refused_before_round_three_and_ends_the_goal_after() {
    let env = Env::new();
    let (out, _mock, events) = goal_run(
        &env,
        r#"
responses:
  - tool_calls: [{ id: b1, name: update_goal, arguments: { goal_id: g1, revision: 1, action: blocked, blocked_reason: "no network" } }]
  - text: "trying anyway"
  - tool_calls: [{ id: s1, name: update_goal, arguments: { goal_id: g1, revision: 7, action: complete } }]
  - text: "round two"
  - tool_calls: [{ id: b2, name: update_goal, arguments: { goal_id: g1, revision: 1, action: blocked, blocked_reason: "the registry is unreachable" } }]
  - text: "stopping"
"#,
        &[],
    );
    assert_eq!(out.code, Some(3), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr
            .contains("goal g1 blocked after 3 rounds: the registry is unreachable"),
        "{}",
        out.stderr
    );
    let results = tool_results(&events);
    assert!(
        results[0].2 && results[0].1.contains("blocked is accepted from round 3"),
        "{results:?}"
    );
    assert!(
        results[1].2
            && results[1]
                .1
                .contains("revision 7 is stale: goal g1 is at revision 1"),
        "{results:?}"
    );
    assert!(!results[2].2, "{results:?}");
    assert_eq!(statuses(&events), ["active", "blocked"]);
}

#[test]
fn a_goal_out_of_rounds_exits_four() {
    let env = Env::new();
    let (out, _mock, events) = goal_run(
        &env,
        "responses:\n  - text: \"one\"\n  - text: \"two\"\n",
        &["--max-rounds", "2"],
    );
    assert_eq!(out.code, Some(4), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr.contains("its 2 rounds are spent"),
        "{}",
        out.stderr
    );
    assert_eq!(statuses(&events), ["active", "budget-spent"]);
    assert_eq!(of_type(&events, "goal/round").len(), 2);
}

/// A run that fails in round 2 leaves the goal open; resumed with a person's prompt, that turn
/// runs first and the driver goes on from round 3 (the count is the log's, not reset by the
/// resume) until the budget is spent.
#[test]
fn a_resumed_goal_keeps_its_round_count_and_a_person_s_turn_goes_first() {
    let env = Env::new();
    let (out, _mock, _) = goal_run(
        &env,
        "responses:\n  - text: \"one\"\n  - { behaviour: auth_error }\n",
        &["--max-rounds", "3"],
    );
    assert_eq!(out.code, Some(1), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr
            .contains("goal g1 round 2/3: the goal is not complete"),
        "{}",
        out.stderr
    );

    let mock = Mock::start(
        "responses:\n  - text: \"answered the person\"\n  - text: \"round three done\"\n",
    );
    let out = run(env
        .keel(&mock.base_url())
        .args(["resume", "--last", "how is it going?"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert!(last_user_text(&requests[0]).contains("how is it going?"));
    assert!(
        last_user_text(&requests[1]).contains("<goal_round round=\"3\""),
        "{}",
        last_user_text(&requests[1])
    );
    let events = load_consistent(&env.only_session());
    assert_eq!(of_type(&events, "goal/round").len(), 3);
    assert_eq!(statuses(&events), ["active", "budget-spent"]);
}

/// `/goal` over ACP (a raw JSON-RPC client on `keel acp`): set with a budget, paused by the
/// model, shown, edited and resumed by the person (the edit reaches the next round), spent;
/// `/goal clear` of a finished goal is an error naming why.
#[test]
fn a_person_sets_shows_edits_and_resumes_a_goal_over_acp() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - tool_calls: [{ id: p1, name: update_goal, arguments: { goal_id: g1, revision: 1, action: pause } }]
  - text: "paused it"
  - text: "round two"
  - text: "round three"
"#,
    );
    let mut child = env
        .keel(&mock.base_url())
        .arg("acp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut said = Vec::new();
    let mut call = |id: u64, method: &str, params: Value| -> Value {
        let msg =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{msg}").unwrap();
        loop {
            let v: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
            if v["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
                said.push(
                    v["params"]["update"]["content"]["text"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                );
            }
            if v["id"] == id && v.get("method").is_none() {
                return v;
            }
        }
    };
    call(1, "initialize", serde_json::json!({"protocolVersion": 1}));
    let new = call(
        2,
        "session/new",
        serde_json::json!({"cwd": env.ws, "mcpServers": []}),
    );
    let sid = new["result"]["sessionId"].as_str().unwrap().to_owned();
    let mut prompt = |id: u64, text: &str| {
        call(
            id,
            "session/prompt",
            serde_json::json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}),
        )
    };
    let done = prompt(3, "/goal --max-rounds 3 tidy the code");
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let shown = prompt(4, "/goal");
    assert_eq!(shown["result"]["stopReason"], "end_turn", "{shown}");
    let edited = prompt(5, "/goal edit tidy the docs");
    assert!(edited.get("error").is_none(), "{edited}");
    let resumed = prompt(6, "/goal resume");
    assert_eq!(resumed["result"]["stopReason"], "end_turn", "{resumed}");
    let cleared = prompt(7, "/goal clear");
    let message = cleared["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    drop(stdin);
    assert!(child.wait().unwrap().success());
    assert!(message.contains("there is no open goal"), "{cleared}");
    let said = said.join("\n");
    assert!(
        said.contains("Goal g1 (paused, revision 2, round 1 of 3): tidy the code"),
        "{said}"
    );
    assert!(
        said.contains("Goal g1 now reads: tidy the docs (revision 3"),
        "{said}"
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 4, "{requests:?}");
    let round_two = last_user_text(&requests[2]);
    assert!(
        round_two.contains("round=\"2\"") && round_two.contains("tidy the docs"),
        "{round_two}"
    );
    let events = load_consistent(&env.only_session());
    assert_eq!(
        statuses(&events),
        ["active", "paused", "paused", "active", "budget-spent"]
    );
}

/// `keel` SIGKILLed in the middle of round 2: the resumed session repairs the round, a
/// person's prompt goes first, and the rounds go on from 3 to the budget (4), never again from 1.
#[test]
fn a_goal_survives_a_sigkill_and_resumes_with_its_round_count() {
    use std::time::{Duration, Instant};
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - text: "round one"
  - tool_calls: [{ id: b1, name: bash, arguments: { command: "echo r2 > started.txt; sleep 30" } }]
  - text: "never reached"
"#,
    );
    let mut cmd = env.keel(&mock.base_url());
    cmd.args([
        "--approval",
        "auto",
        "run",
        "--goal",
        "tidy up",
        "--max-rounds",
        "4",
    ]);
    let running = spawn(&mut cmd);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !env.ws.join("started.txt").exists() {
        assert!(
            Instant::now() < deadline,
            "round 2 never started its command"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    running.signal(libc::SIGKILL);
    let _ = running.wait();

    let mock = Mock::start(
        "responses:\n  - text: \"back\"\n  - text: \"round three\"\n  - text: \"round four\"\n",
    );
    let out = run(env.keel(&mock.base_url()).args([
        "--approval",
        "auto",
        "resume",
        "--last",
        "keel restarted; go on",
    ]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert!(last_user_text(&requests[0]).contains("keel restarted"));
    assert!(last_user_text(&requests[1]).contains("round=\"3\""));
    assert!(last_user_text(&requests[2]).contains("round=\"4\""));
    let events = load_consistent(&env.only_session());
    assert_eq!(of_type(&events, "goal/round").len(), 4);
    assert_eq!(statuses(&events), ["active", "budget-spent"]);
}
