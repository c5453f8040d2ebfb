//! The loop end to end: a scripted model, real tools on a real temp workspace, a real session
//! file, checked on disk and in the log.

mod common;

use common::*;
use keel_agent::HookRegistry;
use keel_protocol::{EventBody, TurnEndReason};
use keel_session::Store;

const TASK: &str = r#"
responses:
  - reasoning: "Read it first."
    text: "Reading."
    tool_calls:
      - {id: call_1, name: read, arguments: {path: "calc.py"}}
  - tool_calls:
      - {id: call_2, name: edit, arguments: {path: "calc.py", old_string: "a - b", new_string: "a + b"}}
  - tool_calls:
      - {id: call_3, name: bash, arguments: {command: "python3 -c 'import calc; print(calc.add(2, 3))'"}}
      - {id: call_4, name: todo_write, arguments: {todos: [{content: "fix add", status: completed}]}}
  - text: "Fixed add(); it prints 5."
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_step_task_reads_edits_runs_and_answers() {
    let f = fixture(TASK, HookRegistry::default());
    std::fs::write(
        f.work.path().join("calc.py"),
        "def add(a, b):\n    return a - b\n",
    )
    .unwrap();
    f.agent.followup("Fix add in calc.py and run it.").unwrap();
    let outcome = f.agent.run_pending().await.unwrap().unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    assert_eq!(outcome.final_text, "Fixed add(); it prints 5.");
    // On disk.
    let calc = std::fs::read_to_string(f.work.path().join("calc.py")).unwrap();
    assert!(calc.contains("a + b"), "{calc}");
    // In the log.
    let evs = events(&f);
    let results: Vec<String> = evs
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::ToolResult(r) => Some(r.message.tool_results().next().unwrap().text()),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 4);
    assert!(results[0].contains("a - b"), "{}", results[0]);
    assert!(results[2].contains('5'), "bash output: {}", results[2]);
    assert!(
        evs.iter()
            .any(|e| matches!(&e.body, EventBody::TodoWrite(t) if t.todos.len() == 1))
    );
    let t = types(&f);
    assert_eq!(t.iter().filter(|t| *t == "step/start").count(), 4);
    assert_eq!(t.iter().filter(|t| *t == "tool/call").count(), 4);
    assert_eq!(t.last().map(String::as_str), Some("turn/end"));
    // The file on disk loads to the same log, with valid brackets.
    f.agent
        .flush(keel_agent::seams::FlushPoint::TurnBoundary)
        .await
        .unwrap();
    let loaded = Store::load(&f.session_path).unwrap();
    assert_eq!(loaded.session.len(), f.agent.log().session().len());
    loaded.session.check_invariants().unwrap();
    // Requests grow append-only: each request's messages extend the previous one's.
    let reqs = f.provider.requests();
    assert_eq!(reqs.len(), 4);
    for pair in reqs.windows(2) {
        assert_eq!(
            pair[0].messages[..],
            pair[1].messages[..pair[0].messages.len()]
        );
        assert_eq!(pair[0].system, pair[1].system);
        assert_eq!(pair[0].tools, pair[1].tools);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_arguments_and_unknown_tools_are_answered_and_the_loop_goes_on() {
    let script = r#"
responses:
  - tool_calls:
      - {id: c1, name: read, arguments: "{not json"}
      - {id: c2, name: nope, arguments: {}}
      - {id: c3, name: read, arguments: {offset: 3}}
  - text: "done"
"#;
    let f = fixture(script, HookRegistry::default());
    f.agent.followup("go").unwrap();
    let outcome = f.agent.run_pending().await.unwrap().unwrap();
    assert!(outcome.completed());
    let codes: Vec<String> = events(&f)
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::ToolResult(r) => r.meta.as_ref()?.get("code")?.as_str().map(str::to_owned),
            _ => None,
        })
        .collect();
    assert_eq!(codes, vec!["INVALID_ARGS", "UNKNOWN_TOOL", "INVALID_ARGS"]);
    // The second request carries all three error results after the assistant message.
    let reqs = f.provider.requests();
    let last = reqs.last().unwrap();
    assert_eq!(
        last.messages
            .iter()
            .filter(|m| m.tool_results().next().is_some())
            .count(),
        3
    );
}

/// `max_tokens` leaves room for the prompt as the provider counts it: after a request whose
/// reported prompt tokens exceed keel's estimate, later requests scale the estimate up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_tokens_follows_the_providers_prompt_count() {
    let script = r#"
responses:
  - text: "Reading."
    tool_calls:
      - {id: r1, name: read, arguments: {path: "notes.txt"}}
    usage: {prompt: 100000, completion: 10}
  - text: "Done."
"#;
    let f = fixture_config(
        script,
        keel_agent::HookRegistry::default(),
        keel_tools::SandboxMode::WorkspaceWrite,
        |c| {
            c.model_info.context_window = 16_384;
            c.approval = keel_agent::ApprovalPolicy::Allow;
        },
    );
    std::fs::write(f.work.path().join("notes.txt"), "hello\n").unwrap();
    f.agent.followup("read notes.txt").unwrap();
    f.agent.run_pending().await.unwrap().unwrap();
    let reqs = f.provider.requests();
    assert_eq!(reqs.len(), 2);
    let ceiling = f.agent.config().model_info.max_output;
    let e0 = keel_agent::request::prompt_estimate(&reqs[0]);
    let e1 = keel_agent::request::prompt_estimate(&reqs[1]);
    use keel_agent::request::{calibrated, output_budget, prompt_factor};
    assert_eq!(reqs[0].max_tokens, Some(output_budget(ceiling, 16_384, e0)));
    // 100,000 reported for a few thousand estimated: the factor is clamped at 3.
    assert_eq!(prompt_factor(100_000, e0), Some(3.0));
    assert_eq!(
        reqs[1].max_tokens,
        Some(output_budget(ceiling, 16_384, calibrated(e1, Some(3.0))))
    );
    assert!(reqs[1].max_tokens < Some(output_budget(ceiling, 16_384, e1)));
}
