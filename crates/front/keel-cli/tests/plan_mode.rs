//! End-to-end: plan mode a person enters headless, with the real binary and the loopback mock
//! model. `keel run --plan` (or `--permission-mode plan`) starts in plan mode: the first
//! request carries the plan-mode section and a `write` is refused; the model's
//! `exit_plan_mode` ends the run with the plan on stdout (exit 0, no further request);
//! `keel resume` goes on planning with feedback, and `--approve-plan` carries the plan out.
//! Claude Code's other permission modes map onto keel's sandbox and approval settings.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::*;

const PLAN: &str = "1. Add greet() to main.py\n2. Call it from main";
const SECTION: &str = "# Plan mode is active";
const AWAITS: &str =
    "the plan awaits the user's approval (plan mode stays on until it is approved)";

/// Reads, tries to write (refused), then hands in [`PLAN`]; the last response is there only to
/// show that nothing asks for it.
fn planning_script() -> String {
    format!(
        r#"responses:
  - match: {{ last_user_contains: "add a greeting" }}
    text: "Looking first."
    tool_calls:
      - {{ id: c_read, name: read, arguments: {{ path: main.py }} }}
      - {{ id: c_write, name: write, arguments: {{ path: new.txt, content: "x" }} }}
  - match: {{ last_tool_result_contains: "plan mode is active" }}
    tool_calls:
      - {{ id: c_plan, name: exit_plan_mode, arguments: {{ plan: {PLAN:?} }} }}
  - text: "never requested"
"#
    )
}

fn system_prompt(request: &Value) -> String {
    request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn plan_modes(events: &[Value]) -> Vec<Value> {
    of_type(events, "plan/mode")
        .into_iter()
        .map(|e| e["data"].clone())
        .collect()
}

fn index_of(events: &[Value], t: &str) -> usize {
    events.iter().position(|e| ty(e) == t).unwrap()
}

/// Run the planning task with `flags` and check everything a headless plan run must show.
/// Returns the run's output and the session's events.
fn plan_run(env: &Env, flags: &[&str]) -> (Output, Vec<Value>) {
    env.write("main.py", "print('hi')\n");
    let mock = Mock::start(&planning_script());
    let out = run(env
        .keel(&mock.base_url())
        .arg("run")
        .args(flags)
        .arg("add a greeting"));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);

    // The first request already carries the plan-mode section; the turn ended after the plan
    // without another request.
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "requests after the plan was handed in");
    assert_eq!(mock.remaining(), 1);
    assert!(
        system_prompt(&requests[0]).contains(SECTION),
        "{}",
        system_prompt(&requests[0])
    );
    assert!(
        !env.ws.join("new.txt").exists(),
        "the write ran in plan mode"
    );

    let session = env.only_session();
    let events = load_consistent(&session);
    let results = tool_results(&events);
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(!results[0].2, "read is allowed: {results:?}");
    assert!(
        results[1].2 && results[1].1.contains("plan mode is active: 'write'"),
        "{results:?}"
    );
    assert!(
        !results[2].2 && results[2].1.contains("handed to the user for review"),
        "{results:?}"
    );
    assert_eq!(
        plan_modes(&events),
        vec![
            json!({"active": true}),
            json!({"active": true, "plan": PLAN, "approved": false}),
        ]
    );
    // Plan mode is on before the turn's first request.
    assert!(index_of(&events, "plan/mode") < index_of(&events, "turn/start"));
    assert_eq!(
        turn_end_reasons(&events),
        vec![json!({"kind": "blocked", "reason": AWAITS})]
    );
    let types: Vec<&str> = events.iter().map(ty).collect();
    assert_eq!(
        types[types.len() - 3..],
        ["tool/result", "step/end", "turn/end"]
    );
    assert!(
        out.stderr.contains("the plan awaits your approval")
            && out.stderr.contains("--approve-plan"),
        "stderr:\n{}",
        out.stderr
    );
    (out, events)
}

#[test]
fn run_plan_refuses_writes_and_ends_with_the_plan() {
    let env = Env::new();
    let (out, _) = plan_run(&env, &["--plan"]);
    assert_eq!(out.stdout.trim_end(), PLAN);
}

#[test]
fn permission_mode_plan_is_the_same() {
    let env = Env::new();
    let (out, _) = plan_run(&env, &["--permission-mode", "plan"]);
    assert_eq!(out.stdout.trim_end(), PLAN);
}

#[test]
fn json_shows_the_same_events() {
    let env = Env::new();
    let (out, events) = plan_run(&env, &["--plan", "--json"]);
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The session header, then every event of the log, in order.
    assert_eq!(lines.len(), events.len() + 1);
    assert_eq!(&lines[1..], &events[..]);
    assert_eq!(plan_modes(&lines).len(), 2);
}

#[test]
fn an_unknown_permission_mode_names_the_accepted_values() {
    let env = Env::new();
    let mock = Mock::start("responses:\n  - text: \"hi\"\n");
    let out = run(env
        .keel(&mock.base_url())
        .args(["run", "--permission-mode", "yolo", "hello"]));
    assert_eq!(out.code, Some(2), "stderr:\n{}", out.stderr);
    assert!(out.stderr.contains("'yolo'"), "stderr:\n{}", out.stderr);
    for mode in [
        "default",
        "acceptEdits",
        "plan",
        "dontAsk",
        "bypassPermissions",
    ] {
        assert!(out.stderr.contains(mode), "{mode} missing:\n{}", out.stderr);
    }
    assert!(mock.requests().is_empty());
    assert!(env.session_files().is_empty());

    // --plan with another mode is a contradiction, refused the same way.
    let out = run(env.keel(&mock.base_url()).args([
        "run",
        "--plan",
        "--permission-mode",
        "acceptEdits",
        "hello",
    ]));
    assert_eq!(out.code, Some(2), "stderr:\n{}", out.stderr);
    assert!(out.stderr.contains("--plan"), "stderr:\n{}", out.stderr);
}

/// Each mode's `sandbox/mode` and `approval/policy` (the session's first events), for `flags`.
fn modes_of(flags: &[&str]) -> (String, String) {
    let env = Env::new();
    let mock = Mock::start("responses:\n  - text: \"hi\"\n");
    let out = run(env
        .keel(&mock.base_url())
        .arg("run")
        .args(flags)
        .arg("hello"));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let events = load_consistent(&env.only_session());
    assert!(
        plan_modes(&events).is_empty(),
        "{flags:?} entered plan mode"
    );
    (
        of_type(&events, "sandbox/mode")[0]["data"]["mode"]
            .as_str()
            .unwrap()
            .to_owned(),
        of_type(&events, "approval/policy")[0]["data"]["policy"]
            .as_str()
            .unwrap()
            .to_owned(),
    )
}

#[test]
fn permission_modes_map_onto_sandbox_and_approval() {
    let pair = |s: &str, a: &str| (s.to_owned(), a.to_owned());
    assert_eq!(
        modes_of(&["--permission-mode", "default"]),
        pair("workspace-write", "ask")
    );
    assert_eq!(
        modes_of(&[
            "--permission-mode",
            "acceptEdits",
            "-c",
            "sandbox=read-only"
        ]),
        pair("workspace-write", "ask")
    );
    assert_eq!(
        modes_of(&["--permission-mode", "dontAsk"]),
        pair("workspace-write", "deny")
    );
    assert_eq!(
        modes_of(&["--permission-mode", "bypassPermissions"]),
        pair("full-access", "allow")
    );
    // An explicit flag wins over the mode.
    assert_eq!(
        modes_of(&[
            "--permission-mode",
            "bypassPermissions",
            "--sandbox",
            "workspace-write"
        ]),
        pair("workspace-write", "allow")
    );
}

/// After a plan run: `keel resume` with a prompt goes on planning (plan mode restored, the
/// prompt is feedback, the revised plan ends the turn again); `--approve-plan` ends plan mode
/// and carries the plan out; a second `--approve-plan` finds nothing to approve.
#[test]
fn resume_goes_on_planning_and_approve_plan_carries_it_out() {
    let env = Env::new();
    let (_, _) = plan_run(&env, &["--plan"]);
    let session = env.only_session();
    let id = session_id(&session);

    // No prompt: nothing runs, and keel says how to go on.
    let idle = Mock::start("responses:\n  - text: \"never requested\"\n");
    let out = run(env.keel(&idle.base_url()).args(["resume", "--last"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr.contains("nothing to run") && out.stderr.contains("--approve-plan"),
        "stderr:\n{}",
        out.stderr
    );
    assert!(idle.requests().is_empty());

    // Feedback: still planning.
    let revised = "1. Add greet() to main.py\n2. Document it in README";
    let feedback = Mock::start(&format!(
        r#"responses:
  - match: {{ last_user_contains: "also document it" }}
    tool_calls:
      - {{ id: c_w2, name: write, arguments: {{ path: new.txt, content: "x" }} }}
      - {{ id: c_p2, name: exit_plan_mode, arguments: {{ plan: {revised:?} }} }}
  - text: "never requested"
"#
    ));
    let out = run(env
        .keel(&feedback.base_url())
        .args(["resume", "--last", "also document it"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout.trim_end(), revised);
    let requests = feedback.requests();
    assert_eq!(requests.len(), 1);
    assert!(system_prompt(&requests[0]).contains(SECTION));
    assert!(!env.ws.join("new.txt").exists());

    // Approval, with a note: plan mode off, the plan carried out.
    let carry_out = Mock::start(
        r#"responses:
  - match: { last_user_contains: "I approve the plan" }
    tool_calls:
      - { id: c_do, name: write, arguments: { path: new.txt, content: "done\n" } }
  - text: "Carried out."
"#,
    );
    let out = run(env.keel(&carry_out.base_url()).args([
        "resume",
        &id,
        "--approve-plan",
        "use f-strings",
    ]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout.trim_end(), "Carried out.");
    assert_eq!(env.read("new.txt"), "done\n");
    let requests = carry_out.requests();
    assert_eq!(requests.len(), 2);
    assert!(!system_prompt(&requests[0]).contains(SECTION));
    assert_eq!(
        last_user_text(&requests[0])
            .rsplit("\n\n")
            .take(2)
            .collect::<Vec<_>>(),
        [
            "use f-strings",
            "I approve the plan. Plan mode is off: carry out the plan now."
        ]
    );

    assert_eq!(env.only_session(), session);
    let events = load_consistent(&session);
    assert_eq!(
        plan_modes(&events),
        vec![
            json!({"active": true}),
            json!({"active": true, "plan": PLAN, "approved": false}),
            json!({"active": true, "plan": revised, "approved": false}),
            json!({"active": false, "plan": revised, "approved": true}),
        ]
    );
    assert_eq!(
        turn_end_reasons(&events),
        vec![
            json!({"kind": "blocked", "reason": AWAITS}),
            json!({"kind": "blocked", "reason": AWAITS}),
            json!({"kind": "completed"}),
        ]
    );

    // Nothing awaits approval now: refused before any request.
    let idle = Mock::start("responses:\n  - text: \"never requested\"\n");
    let out = run(env
        .keel(&idle.base_url())
        .args(["resume", "--last", "--approve-plan"]));
    assert_eq!(out.code, Some(2), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr.contains("not in plan mode"),
        "stderr:\n{}",
        out.stderr
    );
    assert!(idle.requests().is_empty());
}

/// Plan mode without a plan handed in (the model answered in text): `--approve-plan` has
/// nothing to approve and says so, writing nothing and sending nothing.
#[test]
fn approve_plan_needs_a_plan_handed_in() {
    let env = Env::new();
    let mock = Mock::start("responses:\n  - text: \"I need more detail first.\"\n");
    let out = run(env
        .keel(&mock.base_url())
        .args(["run", "--plan", "add a greeting"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout.trim_end(), "I need more detail first.");
    let session = env.only_session();
    let before = std::fs::read_to_string(&session).unwrap();

    let out = run(env
        .keel(&mock.base_url())
        .args(["resume", "--last", "--approve-plan"]));
    assert_eq!(out.code, Some(2), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr.contains("no plan awaits approval"),
        "stderr:\n{}",
        out.stderr
    );
    assert_eq!(std::fs::read_to_string(&session).unwrap(), before);
    assert_eq!(mock.requests().len(), 1);
}
