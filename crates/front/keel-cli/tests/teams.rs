//! End-to-end: agent teams with the real binary against the loopback mock model. A background
//! subagent stays alive after its answer (a job waiting for a message), is messaged, listed and
//! interrupted; a continuable child's `send_message` reaches the parent's next step; `subagent_fork`
//! (`mode = "both"`) seeds its child with the parent's completed turns; bad ids are refused
//! naming the argument.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;
use support::*;

fn header(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

fn child_events(env: &Env) -> Vec<Vec<Value>> {
    env.session_files()
        .iter()
        .filter(|p| header(p)["origin"] == "subagent")
        .map(|p| load_consistent(p))
        .collect()
}

fn texts_of_notices(events: &[Value]) -> Vec<String> {
    of_type(events, "user/message")
        .iter()
        .filter(|e| e["data"]["source"]["plugin"] == "keel/jobs")
        .map(|e| {
            e["data"]["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect()
}

#[test]
fn a_background_child_stays_alive_is_messaged_twice_listed_and_interrupted() {
    let env = Env::new();
    // Parent: start the child; after its first answer, message it; after the second answer,
    // list, message it a long task, interrupt it, and end. The child answers each message.
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "Build a team" }
    tool_calls: [{ id: p1, name: subagent, arguments: { description: "counter", prompt: "Count to one.", run_in_background: true } }]
  - match: { last_tool_result_contains: "in the background" }
    text: "Started it."
  - match: { last_user_contains: "Count to one." }
    text: "one"
  - match: { last_message_contains: "answered:\none" }
    tool_calls: [{ id: p2, name: send_message, arguments: { subagent_id: "subagent-1", message: "Now count to two." } }]
  - match: { last_tool_result_contains: "starts a turn on it" }
    text: "Asked for two."
  - match: { last_user_contains: "Now count to two." }
    text: "one two"
  - match: { last_message_contains: "answered:\none two" }
    tool_calls: [{ id: p3, name: list_agents, arguments: {} }]
  - match: { last_tool_result_contains: "waiting for a message" }
    tool_calls: [{ id: p4, name: send_message, arguments: { agent_id: "subagent-1", message: "Wait for the gate." } }]
  - match: { last_user_contains: "Wait for the gate." }
    tool_calls: [{ id: c1, name: bash, arguments: { command: "touch gate-reached; sleep 30", description: "wait" } }]
  - match: { last_tool_result_contains: "starts a turn on it" }
    tool_calls: [{ id: p5, name: bash, arguments: { command: "while [ ! -f gate-reached ]; do sleep 0.02; done; echo reached", description: "wait" } }]
  - match: { last_tool_result_contains: "reached" }
    tool_calls: [{ id: p6, name: interrupt_agent, arguments: { agent_id: "subagent-1" } }]
  - match: { last_tool_result_contains: "Interrupted subagent-1" }
    tool_calls: [{ id: k1, name: job_kill, arguments: { job_id: "subagent-1" } }]
  - match: { last_tool_result_contains: "Killed job subagent-1" }
    tool_calls: [{ id: p8, name: send_message, arguments: { agent_id: "subagent-1", message: "still there?" } }]
  - match: { last_tool_result_contains: "has ended" }
    tool_calls: [{ id: p7, name: send_message, arguments: { agent_id: "subagent-9", message: "hello?" } }]
  - match: { last_tool_result_contains: "subagent-9" }
    text: "Team done."
"#,
    );
    let out = run(env
        .keel(&mock.base_url())
        .args(["run", "--approval", "auto", "Build a team."]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(mock.remaining(), 0, "stderr:\n{}", out.stderr);
    let parent = load_consistent(&env.only_session_where(|h| h["origin"].is_null()));

    // Answers arrive as notices; the child stays alive between them.
    let notices = texts_of_notices(&parent);
    assert_eq!(notices.len(), 2, "{notices:#?}");
    assert!(
        notices[0].starts_with("Subagent subagent-1 (counter) answered:\none\n"),
        "{}",
        notices[0]
    );
    assert!(
        notices[1].starts_with("Subagent subagent-1 (counter) answered:\none two\n"),
        "{}",
        notices[1]
    );

    let results = tool_results(&parent);
    let by_id = |id: &str| results.iter().find(|r| r.0 == id).cloned().unwrap();
    let listed = by_id("p3").1;
    assert!(
        listed.starts_with("subagent-1  waiting for a message"),
        "{listed}"
    );
    assert!(listed.contains("counter"), "{listed}");
    assert!(by_id("p4").1.contains("starts a turn on it"));
    assert_eq!(by_id("p6").1, "Interrupted subagent-1's turn.");
    // A message to an agent that has ended, and to one that does not exist, is refused
    // naming the argument.
    let (_, ended, is_error) = by_id("p8");
    assert!(
        is_error && ended.contains("agent_id 'subagent-1': that subagent has ended"),
        "{ended}"
    );
    let (_, unknown, is_error) = by_id("p7");
    assert!(
        is_error && unknown.contains("no agent 'subagent-9'"),
        "{unknown}"
    );

    // The child's own log: three prompts (its task and two messages, from its parent), the
    // third turn interrupted (its sleep never finished), no notice for that one.
    let children = child_events(&env);
    assert_eq!(children.len(), 1);
    let child = &children[0];
    let prompts: Vec<String> = of_type(child, "user/message")
        .iter()
        .filter(|e| e["data"]["source"]["plugin"] == "keel/subagent")
        .map(|e| e["data"]["content"][0]["text"].as_str().unwrap().to_owned())
        .collect();
    // (The two messages arrive through the inbox; the first prompt is a user/message too.)
    let spliced: Vec<String> = of_type(child, "agent/inbox/spliced")
        .iter()
        .flat_map(|e| {
            e["data"]["inserted"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|m| m["content"][0]["text"].as_str().unwrap_or("").to_owned())
        .collect();
    let all: Vec<&String> = prompts.iter().chain(spliced.iter()).collect();
    for want in ["Count to one.", "Now count to two.", "Wait for the gate."] {
        assert!(
            all.iter().any(|t| t.as_str() == want),
            "{want} not in {all:?}"
        );
    }
    let ends = turn_end_reasons(child);
    assert_eq!(ends.len(), 3, "{ends:?}");
    assert_eq!(ends[0]["kind"], "completed");
    assert_eq!(ends[1]["kind"], "completed");
    assert_ne!(ends[2]["kind"], "completed", "{ends:?}");
    // The parent's exit killed the waiting child: nothing of its sleep is left running.
    assert!(env.ws.join("gate-reached").exists());
}

#[test]
fn a_childs_send_message_reaches_the_parents_next_step() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "Start a reporter" }
    tool_calls: [{ id: p1, name: subagent, arguments: { description: "reporter", prompt: "Report halfway.", run_in_background: true } }]
  - match: { last_tool_result_contains: "in the background" }
    tool_calls: [{ id: p2, name: bash, arguments: { command: "while [ ! -f reported ]; do sleep 0.02; done; echo seen-file", description: "wait" } }]
  - match: { last_user_contains: "Report halfway." }
    tool_calls: [{ id: c0, name: send_message, arguments: { agent_id: "subagent-1", message: "wrong id" } }]
  - match: { last_tool_result_contains: "is not your parent" }
    tool_calls: [{ id: c1, name: send_message, arguments: { agent_id: "parent", message: "halfway there" } }]
  - match: { last_tool_result_contains: "Sent." }
    tool_calls: [{ id: c2, name: bash, arguments: { command: "touch reported", description: "signal" } }]
  - match: { last_tool_result_contains: "seen-file" }
    text: "The parent saw the report."
  - match: { last_user_contains: "Report halfway." }
    text: "finished"
  - match: { last_message_contains: "answered:\nfinished" }
    text: "All reported."
"#,
    );
    let out =
        run(env
            .keel(&mock.base_url())
            .args(["run", "--approval", "auto", "Start a reporter."]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    // The parent's request right after its bash step carries the report as a message.
    let requests = mock.requests();
    let after = requests
        .iter()
        .find(|r| r.to_string().contains("seen-file"))
        .expect("the parent's step after its wait");
    let text = after["messages"].to_string();
    assert!(
        text.contains("Message from subagent subagent-1 (reporter):\\nhalfway there"),
        "{text}"
    );
    assert!(!text.contains("wrong id"), "{text}");
    // The child's `send_message` (to its parent) is the parent's only in name: the parent's
    // takes a child's id, the child's says who its parent is; neither has `report` (dsh 0.2).
    for r in &requests {
        let names = tool_names(r);
        assert!(!names.iter().any(|n| n == "report"), "{names:?}");
        assert!(names.iter().any(|n| n == "send_message"), "{names:?}");
        // Children never get the job tools.
        let is_child = !names.iter().any(|n| n == "job_output");
        let to_parent = r["tools"]
            .to_string()
            .contains("the agent that started you");
        assert_eq!(to_parent, is_child, "{names:?}");
    }
}

#[test]
fn subagent_fork_is_seeded_with_the_parents_completed_turns() {
    let env = Env::new();
    std::fs::write(
        env.home.join("config.toml"),
        "[[plugins]]\nid = \"subagent\"\n[plugins.config]\nmode = \"both\"\n",
    )
    .unwrap();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "The secret word is heron." }
    text: "Noted."
  - match: { last_user_contains: "Fork a helper" }
    tool_calls: [{ id: p1, name: subagent_fork, arguments: { description: "recall", prompt: "What was the secret word?" } }]
  - match: { last_message_contains: "What was the secret word?" }
    text: "heron"
  - match: { last_tool_result_contains: "heron" }
    text: "The fork remembered."
"#,
    );
    let first = run(env
        .keel(&mock.base_url())
        .args(["run", "The secret word is heron."]));
    assert_eq!(first.code, Some(0), "stderr:\n{}", first.stderr);
    let out = run(env
        .keel(&mock.base_url())
        .args(["resume", "--last", "Fork a helper."]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let requests = mock.requests();
    // Both tools are offered.
    let names = tool_names(&requests[0]);
    assert!(
        names.contains(&"subagent".to_owned()) && names.contains(&"subagent_fork".to_owned()),
        "{names:?}"
    );
    // The child's request carries the parent's completed turn, then its own prompt.
    let child = requests
        .iter()
        .find(|r| last_user_text(r).contains("What was the secret word?"))
        .expect("the child's request");
    let text = child["messages"].to_string();
    assert!(
        text.contains("The secret word is heron.") && text.contains("Noted."),
        "{text}"
    );
    // It never sees the turn that forked it.
    assert!(!text.contains("Fork a helper"), "{text}");
}

/// dsh 0.2's `subagent {cwd}`: the child starts in that directory (relative to the parent's),
/// its `working_directory` moves do not reach the parent, and a `cwd` that is not a directory
/// is refused naming `cwd`, before any child session is written.
#[test]
fn a_subagent_starts_in_the_cwd_it_is_given() {
    let env = Env::new();
    env.write("sub/notes.txt", "alpha\n");
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "Go" }
    tool_calls: [{ id: p1, name: subagent, arguments: { description: "nowhere", prompt: "lost", cwd: "missing" } }]
  - match: { last_tool_result_contains: "cwd:" }
    tool_calls: [{ id: p2, name: subagent, arguments: { description: "read notes", prompt: "Read the notes.", cwd: "sub" } }]
  - match: { last_message_contains: "Read the notes." }
    tool_calls: [{ id: c1, name: read, arguments: { file_path: notes.txt } }]
  - match: { last_tool_result_contains: "alpha" }
    tool_calls: [{ id: c2, name: working_directory, arguments: { cd: ".." } }]
  - match: { last_tool_result_contains: "ws" }
    text: "The notes say alpha."
  - match: { last_tool_result_contains: "The notes say alpha." }
    tool_calls: [{ id: p3, name: working_directory, arguments: {} }]
  - text: "Done."
"#,
    );
    let out = run(env
        .keel(&mock.base_url())
        .args(["--approval", "auto", "run", "Go"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout, "Done.\n");
    let parent = env
        .session_files()
        .into_iter()
        .find(|p| header(p)["origin"] != "subagent")
        .unwrap();
    let results = tool_results(&load_consistent(&parent));
    assert!(results[0].2, "a missing cwd is an error: {results:?}");
    assert!(results[0].1.contains("cwd: 'missing'"), "{}", results[0].1);
    assert_eq!(results[1].1, "The notes say alpha.");
    // The child's cd .. did not move the parent: it is still at the workspace root.
    assert!(results[2].1.ends_with("/ws"), "{}", results[2].1);
    // One child session only: the refused call wrote none.
    assert_eq!(child_events(&env).len(), 1);
}
