//! The keel delegation provider end to end through the real binary: a supervisor `keel run`
//! delegates to another `keel run --json` process (its own session, lineage in its header),
//! write mode in an isolated git worktree returning a patch, the model route and its key
//! passed explicitly, steering through the delegate's inbox, and `keel review`.
//!
//! One mock model serves both agents; responses are told apart by what each request ends with.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use serde_json::Value;
use std::process::Command;
use support::{Env, Mock, git, load_consistent, of_type, run};

const KEY: &str = "secret-route-key-77";

/// A git workspace with a buggy add.sh committed, and the delegate plugin on.
fn project() -> Env {
    let env = Env::new();
    env.write("add.sh", "#!/bin/sh\necho $(( $1 - $2 ))\n");
    env.write(
        ".keel/config.toml",
        "[[plugins]]\nid = \"delegate\"\nenabled = true\n",
    );
    git(&env.ws, &["init", "-q"]);
    git(&env.ws, &["add", "-A"]);
    git(&env.ws, &["commit", "-qm", "start"]);
    env
}

/// `keel` on the mock with the key in MY_ROUTE_KEY, named by --api-key-env.
fn keel(env: &Env, mock: &Mock) -> Command {
    let mut cmd = env.keel(&mock.base_url());
    cmd.env("MY_ROUTE_KEY", KEY)
        .args(["--api-key-env", "MY_ROUTE_KEY", "--approval", "auto"]);
    cmd
}

/// The session files whose header names `parent` as parent session.
fn children_of(env: &Env, parent: &str) -> Vec<(Value, Vec<Value>)> {
    env.session_files()
        .into_iter()
        .filter_map(|p| {
            let header: Value =
                serde_json::from_str(std::fs::read_to_string(&p).ok()?.lines().next()?).ok()?;
            (header["parentSession"] == parent).then(|| (header, load_consistent(&p)))
        })
        .collect()
}

fn texts(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_write_delegation_runs_in_a_worktree_and_returns_a_patch_and_its_answer() {
    let env = project();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_message_contains: "SUPERVISE" }
    tool_calls:
      - { id: s1, name: delegate, arguments: { prompt: "DELEGATED: make add.sh add", mode: write, label: fix } }
  - match: { last_message_contains: "DELEGATE-ANSWER" }
    text: "SUPERVISOR-DONE"
  - match: { last_tool_result_contains: "Started delegation delegate-1" }
    text: "waiting for the delegate"
  - match: { last_message_contains: "DELEGATED" }
    tool_calls:
      - { id: d0, name: read, arguments: { file_path: add.sh } }
  - match: { last_tool_result_contains: "<path>add.sh</path>" }
    tool_calls:
      - { id: d1, name: edit, arguments: { path: add.sh, old_string: "$1 - $2", new_string: "$1 + $2" } }
  - match: { last_tool_result_contains: "Edited add.sh" }
    tool_calls:
      - { id: d2, name: bash, arguments: { command: "env" } }
  - match: { last_tool_result_contains: "PATH=" }
    text: "DELEGATE-ANSWER: add.sh adds now"
"#,
    );
    let out = run(keel(&env, &mock).args(["run", "SUPERVISE the fix"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("SUPERVISOR-DONE"), "{out:?}");

    // The supervisor's workspace is untouched: the change is a patch.
    assert_eq!(env.read("add.sh"), "#!/bin/sh\necho $(( $1 - $2 ))\n");
    let sup = env.only_session_where(|h| h.get("parentSession").is_none());
    let sup_id = support::session_id(&sup);
    let events = load_consistent(&sup);
    let all = texts(&events);
    assert!(
        all.contains("<untrusted-delegate-output job=\\\"delegate-1\\\">"),
        "{all}"
    );
    assert!(all.contains("DELEGATE-ANSWER: add.sh adds now"), "{all}");
    let patch = env
        .home
        .join("delegations")
        .join(&sup_id)
        .join("keel-1")
        .join("changes.patch");
    assert!(
        all.contains(&patch.display().to_string()),
        "patch path in the result: {all}"
    );
    let diff = std::fs::read_to_string(&patch).unwrap();
    assert!(diff.contains("+echo $(( $1 + $2 ))"), "{diff}");
    assert!(diff.contains("touched") || all.contains("add.sh"), "{all}");
    // The worktree is gone.
    let worktrees = git(&env.ws, &["worktree", "list"]);
    assert_eq!(worktrees.lines().count(), 1, "{worktrees}");

    // The delegate's own session names its parent.
    let children = children_of(&env, &sup_id);
    assert_eq!(children.len(), 1, "one delegate session");
    let (header, child) = &children[0];
    assert_eq!(header["origin"], "delegate");
    assert_eq!(header["delegationDepth"], 1);
    assert!(
        header["cwd"].as_str().unwrap().contains("worktree"),
        "{header}"
    );
    // It reached the same model with the key, passed explicitly; its commands never saw it.
    let auth: Vec<String> = mock
        .request_headers()
        .iter()
        .map(|h| h.get("authorization").unwrap_or("").to_owned())
        .collect();
    assert!(auth.len() >= 5, "{auth:?}");
    assert!(
        auth.iter().all(|a| a == &format!("Bearer {KEY}")),
        "{auth:?}"
    );
    // A delegate does not delegate further (max_depth 1): its requests offer no delegate tools.
    let offered = |events: &[Value]| -> Vec<String> {
        of_type(events, "request/header")[0]["data"]["header"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(offered(&events).contains(&"delegate".to_owned()));
    assert!(
        !offered(child).iter().any(|n| n.starts_with("delegate")),
        "{:?}",
        offered(child)
    );
    let child_text = texts(child);
    assert!(
        child_text.contains("KEEL_DELEGATION_DEPTH=1"),
        "{child_text}"
    );
    assert!(
        !child_text.contains(KEY),
        "the key leaked into the delegate's commands"
    );
    assert!(!child_text.contains("KEEL_CHILD_API_KEY"), "{child_text}");
}

#[test]
fn a_running_delegate_is_steered_through_its_inbox() {
    let env = project();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_message_contains: "SUPERVISE" }
    tool_calls:
      - { id: s1, name: delegate, arguments: { prompt: "DELEGATED: look around" } }
  - match: { last_tool_result_contains: "Started delegation delegate-1" }
    behaviour: stall
    stall_ms: 1500
    tool_calls:
      - { id: s2, name: delegate_steer, arguments: { job_id: delegate-1, guidance: "GUIDANCE-XYZ: check add.sh" } }
  - match: { last_message_contains: "DELEGATE-ANSWER" }
    text: "SUPERVISOR-DONE"
  - match: { last_tool_result_contains: "ccepted" }
    text: "steered; waiting"
  - match: { last_user_contains: "GUIDANCE-XYZ" }
    text: "DELEGATE-ANSWER: steered to add.sh"
  - match: { last_message_contains: "DELEGATED" }
    tool_calls:
      - { id: d1, name: bash, arguments: { command: "sleep 3; echo slept" } }
  - match: { last_tool_result_contains: "slept" }
    text: "DELEGATE-ANSWER: never steered"
"#,
    );
    let out = run(keel(&env, &mock).args(["run", "SUPERVISE a look"]));
    if out.code != Some(0) {
        for f in env.session_files() {
            eprintln!("{}", std::fs::read_to_string(f).unwrap());
        }
    }
    assert_eq!(out.code, Some(0), "{out:?}");
    let sup = env.only_session_where(|h| h.get("parentSession").is_none());
    let all = texts(&load_consistent(&sup));
    assert!(all.contains("DELEGATE-ANSWER: steered to add.sh"), "{all}");
    let (_, child) = children_of(&env, &support::session_id(&sup)).remove(0);
    // It took the guidance mid-turn: after its first tool call started.
    let pos = |pred: &dyn Fn(&Value) -> bool| child.iter().position(pred).unwrap();
    let bash = pos(&|e| e["type"] == "tool/call" && e["data"]["name"] == "bash");
    let steer =
        pos(&|e| e["type"] == "agent/inbox/spliced" && e.to_string().contains("GUIDANCE-XYZ"));
    assert!(bash < steer, "steered while running");
    assert!(
        all.contains("Guidance delivered to delegate-1 (accepted)"),
        "{all}"
    );
    let splices = of_type(&child, "agent/inbox/spliced");
    assert!(
        splices
            .iter()
            .any(|e| e.to_string().contains("GUIDANCE-XYZ")),
        "the guidance entered the delegate's inbox"
    );
}

#[test]
fn keel_review_injects_a_delegates_findings_into_the_session() {
    let env = project();
    env.write("add.sh", "#!/bin/sh\necho $(( $1 * $2 ))\n");
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "NEXT" }
    text: "on it"
  - match: { last_user_contains: "Review the change from HEAD" }
    text: "FINDING-1 high add.sh:2 multiplies instead of adding"
"#,
    );
    let out = run(keel(&env, &mock).arg("review"));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("FINDING-1"), "{out:?}");
    assert!(
        out.stdout
            .contains("<untrusted-delegate-output job=\"keel-1\">"),
        "{out:?}"
    );
    // The reviewer saw the pinned diff and ran read-only.
    let asked = mock.requests()[0].to_string();
    assert!(asked.contains("+echo $(( $1 * $2 ))"), "{asked}");
    let head = git(&env.ws, &["rev-parse", "HEAD"]);
    assert!(asked.contains(head.trim()), "pinned to the commit: {asked}");
    let sup = env.only_session_where(|h| h.get("parentSession").is_none());
    let (header, _) = children_of(&env, &support::session_id(&sup)).remove(0);
    assert_eq!(header["origin"], "delegate");

    // The next turn of that session sees the findings.
    let id = support::session_id(&sup);
    let out = run(keel(&env, &mock).args(["resume", &id, "NEXT fix them"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    let last = mock.requests().last().unwrap().to_string();
    assert!(
        last.contains("FINDING-1") && last.contains("/review"),
        "{last}"
    );
}

#[test]
fn keel_review_says_what_it_cannot_do() {
    let env = project();
    let mock = Mock::start("responses: []");
    // Nothing changed since HEAD.
    let out = run(keel(&env, &mock).arg("review"));
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("nothing to review"), "{out:?}");
    // A provider without the capability.
    env.write("add.sh", "changed\n");
    let out = run(keel(&env, &mock).args(["--delegate=inprocess", "review"]));
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("[review-unsupported]"), "{out:?}");
    assert!(mock.requests().is_empty());
    assert!(
        env.session_files().is_empty(),
        "failed reviews leave no session"
    );
}

#[test]
fn keel_demo_delegate_runs_a_real_delegate_with_no_key_and_no_network() {
    let env = Env::new();
    let dir = env.root().join("demo");
    let out = run(env
        .keel_bare()
        .args(["demo", "--delegate", "--dir"])
        .arg(&dir));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("the delegate found"), "{out:?}");
    assert!(
        std::fs::read_to_string(dir.join("add.sh"))
            .unwrap()
            .contains("$1 + $2")
    );
    let sup = env.only_session_where(|h| h.get("parentSession").is_none());
    let sup_events = load_consistent(&sup);
    assert!(texts(&sup_events).contains("The bug is on line 3 of add.sh"));
    let children = children_of(&env, &support::session_id(&sup));
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].0["origin"], "delegate");
}

#[test]
fn status_logs_kill_result_and_unknown_jobs_over_the_keel_provider() {
    let env = project();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_message_contains: "SUPERVISE" }
    tool_calls:
      - { id: s1, name: delegate, arguments: { prompt: "DELEGATED: a long look", label: long } }
  - match: { last_tool_result_contains: "Started delegation delegate-1" }
    tool_calls:
      - { id: s2, name: delegate_status, arguments: {} }
  - match: { last_tool_result_contains: "delegate-1 [running]" }
    behaviour: stall
    stall_ms: 1500
    tool_calls:
      - { id: s3, name: delegate_logs, arguments: { job_id: delegate-1 } }
  - match: { last_tool_result_contains: "sleep 30" }
    tool_calls:
      - { id: s4, name: job_kill, arguments: { job_id: delegate-1 } }
  - match: { last_tool_result_contains: "Killed job delegate-1" }
    behaviour: stall
    stall_ms: 1000
    tool_calls:
      - { id: s5, name: delegate_result, arguments: { job_id: delegate-1 } }
  - match: { last_tool_result_contains: "[cancelled]" }
    tool_calls:
      - { id: s6, name: delegate_result, arguments: { job_id: keel-99 } }
  - match: { last_tool_result_contains: "[unknown-job]" }
    text: "SUITE-DONE"
  - match: { last_message_contains: "DELEGATED" }
    tool_calls:
      - { id: d1, name: bash, arguments: { command: "sleep 30" } }
"#,
    );
    let out = run(keel(&env, &mock).args(["run", "SUPERVISE it"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("SUITE-DONE"), "{out:?}");
    let sup = env.only_session_where(|h| h.get("parentSession").is_none());
    let results = support::tool_results(&load_consistent(&sup));
    let by = |id: &str| results.iter().find(|r| r.0 == id).unwrap().1.clone();
    assert!(
        by("s2").contains("delegate-1 [running] read-only"),
        "{}",
        by("s2")
    );
    assert!(
        by("s3").contains("<untrusted-delegate-output job=\"delegate-1\" part=\"logs\">"),
        "{}",
        by("s3")
    );
    assert!(by("s3").contains("→ bash"), "{}", by("s3"));
    assert!(by("s5").contains("delegate-1 [cancelled]"), "{}", by("s5"));
    assert!(
        by("s6").contains("[unknown-job] no delegation job 'keel-99'"),
        "{}",
        by("s6")
    );
}

#[test]
fn a_sigkilled_supervisors_delegation_is_reported_from_an_earlier_session() {
    let env = project();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_message_contains: "SUPERVISE" }
    tool_calls:
      - { id: s1, name: delegate, arguments: { prompt: "DELEGATED: a long look" } }
  - match: { last_tool_result_contains: "Started delegation delegate-1" }
    text: "waiting"
  - match: { last_user_contains: "NEXT" }
    tool_calls:
      - { id: n1, name: delegate_status, arguments: { job_id: keel-1 } }
  - match: { last_tool_result_contains: "keel-1" }
    text: "CHECKED"
  - match: { last_message_contains: "DELEGATED" }
    tool_calls:
      - { id: d1, name: bash, arguments: { command: "sleep 60" } }
"#,
    );
    let running = support::spawn(keel(&env, &mock).args(["run", "SUPERVISE it"]));
    // Wait until the delegate runs its command and the supervisor's turn is over (it waits
    // for the job), then kill the supervisor outright.
    let job = env.home.join("delegations");
    let deadline = std::time::Instant::now() + support::HANG_GUARD;
    let child_started = || {
        let files: Vec<String> = env
            .session_files()
            .iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .collect();
        files
            .iter()
            .any(|t| t.contains("sleep 60") && t.contains("parentSession"))
            && files
                .iter()
                .any(|t| !t.contains("parentSession") && t.contains("\"turn/end\""))
    };
    while !child_started() {
        assert!(
            std::time::Instant::now() < deadline,
            "the delegate never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    running.signal(libc::SIGKILL);
    let _ = running.wait();
    let sup = env.only_session_where(|h| h.get("parentSession").is_none());
    let id = support::session_id(&sup);
    let record = std::fs::read_to_string(job.join(&id).join("keel-1").join("job.json")).unwrap();
    assert!(record.contains("\"running\""), "{record}");
    // Its delegate died with it (same process-group teardown keel gives every child).
    let (child_header, _) = children_of(&env, &id).remove(0);
    let child_id = child_header["id"].as_str().unwrap().to_owned();
    let alive = || {
        std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c).contains(&id)
                    && String::from_utf8_lossy(&c).contains("--delegated-from")
            })
        })
    };
    while alive() {
        assert!(
            std::time::Instant::now() < deadline,
            "delegate {child_id} outlived its supervisor"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    let out = run(keel(&env, &mock).args(["resume", &id, "NEXT check"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    let results = support::tool_results(&load_consistent(&sup));
    let status = &results.iter().find(|r| r.0 == "n1").unwrap().1;
    assert!(status.contains("keel-1 [unknown]"), "{status}");
    assert!(status.contains("interrupted"), "{status}");
}
