//! End-to-end: the `schedule` and `present` plugins (off by default; turned on by the user's
//! `$KEEL_HOME/config.toml`) in the real `keel` binary against the loopback mock model: a
//! recurring schedule fires into an open `keel acp` session as new turns; one due while keel
//! was not running is reported missed on resume, never run; bad arguments are tool errors
//! naming them; presented files are listed at the end of `keel run`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};
use support::*;

/// Turn both plugins on in the user's configuration.
fn enable_plugins(env: &Env) {
    std::fs::write(
        env.home.join("config.toml"),
        "[[plugins]]\nid = \"schedule\"\nenabled = true\n\n[[plugins]]\nid = \"present\"\nenabled = true\n",
    )
    .unwrap();
}

/// `keel acp` spoken to line by line.
struct Acp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
}

impl Acp {
    fn start(env: &Env, base_url: &str) -> Acp {
        let mut cmd = env.keel(base_url);
        cmd.env("KEEL_SCHEDULE_MIN_EVERY_SECS", "1")
            .arg("acp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("keel wrote a line that is not JSON ({e}): {line}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Acp {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, v: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next message satisfying `pred` (others are skipped), within `within`.
    fn wait_for(&mut self, within: Duration, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) if pred(&v) => return v,
                Ok(_) => {}
                Err(e) => panic!("waiting for {what}: {e:?}"),
            }
        }
    }

    /// Wait until the agent's message chunks seen from now on hold `text`.
    fn wait_for_text(&mut self, within: Duration, text: &str) {
        let mut seen = String::new();
        let deadline = Instant::now() + within;
        while !seen.contains(text) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) => seen.push_str(agent_text(&v).unwrap_or_default()),
                Err(e) => panic!("waiting for {text:?} ({e:?}); the agent said: {seen:?}"),
            }
        }
    }

    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.wait_for(HANG_GUARD, method, |v| {
            v["id"] == id && v.get("method").is_none()
        })
    }

    /// SIGKILL: keel gets no chance to tidy up.
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    fn close(mut self) -> Option<i32> {
        drop(self.stdin.take());
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            if started.elapsed() > HANG_GUARD {
                let _ = self.child.kill();
                panic!("keel acp did not exit after stdin closed");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn agent_text(v: &Value) -> Option<&str> {
    let update = &v["params"]["update"];
    (v["method"] == "session/update" && update["sessionUpdate"] == "agent_message_chunk")
        .then(|| update["content"]["text"].as_str())
        .flatten()
}

/// A recurring schedule (every 2 s, allowed by the test-only minimum) fires into an open ACP
/// session while no prompt runs: each firing is a new turn whose prompt reaches the model, its
/// answer reaches the client as updates; the second firing's turn deletes the schedule and
/// nothing fires after that.
#[test]
fn a_recurring_schedule_fires_into_an_open_acp_session_until_deleted() {
    let env = Env::new();
    enable_plugins(&env);
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "keep an eye on the oven" }
    tool_calls: [{ id: c1, name: schedule_create, arguments: { prompt: "check the oven", every_seconds: 2 } }]
  - match: { last_user_contains: "keep an eye on the oven" }
    text: "I will check every 2 seconds."
  - match: { last_user_contains: "check the oven" }
    text: "The oven is fine."
  - match: { last_user_contains: "check the oven" }
    tool_calls: [{ id: d1, name: schedule_delete, arguments: { id: sched-1 } }]
  - match: { last_user_contains: "check the oven" }
    text: "Done checking."
"#,
    );
    let mut acp = Acp::start(&env, &mock.base_url());
    let init = acp.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    let new = acp.request(2, "session/new", json!({"cwd": env.ws, "mcpServers": []}));
    let sid = new["result"]["sessionId"].as_str().unwrap().to_owned();
    let started = Instant::now();
    let answer = acp.request(
        3,
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "keep an eye on the oven"}]}),
    );
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // No prompt runs now: the firings start turns of their own.
    acp.wait_for_text(Duration::from_secs(30), "The oven is fine.");
    assert!(
        started.elapsed() >= Duration::from_millis(1900),
        "fired after {:?}",
        started.elapsed()
    );
    acp.wait_for_text(Duration::from_secs(30), "Done checking.");
    // Deleted: nothing more fires.
    std::thread::sleep(Duration::from_millis(3000));
    assert_eq!(mock.requests().len(), 5, "nothing asked after the deletion");
    assert_eq!(acp.close(), Some(0));

    let requests = mock.requests();
    let fired = last_user_text(&requests[2]);
    assert!(
        fired.starts_with("[scheduled sched-1, recurring every 2 s, due ")
            && fired.ends_with("check the oven"),
        "{fired}"
    );
    let events = load_consistent(&env.only_session());
    assert_eq!(of_type(&events, "schedule/created").len(), 1);
    let fired = of_type(&events, "schedule/fired");
    assert_eq!(fired.len(), 2, "{fired:?}");
    assert!(fired[0]["data"]["nextDueAt"].is_string(), "{:?}", fired[0]);
    assert_eq!(of_type(&events, "schedule/deleted").len(), 1);
    assert_eq!(of_type(&events, "turn/end").len(), 3);
    // The firing is logged before its prompt enters the inbox.
    let seq_of = |e: &Value| e["seq"].as_u64().unwrap();
    let splices: Vec<u64> = of_type(&events, "agent/inbox/spliced")
        .iter()
        .filter(|e| e.to_string().contains("[scheduled sched-1"))
        .map(|e| seq_of(e))
        .collect();
    assert!(
        !splices.is_empty() && seq_of(fired[0]) < splices[0],
        "{splices:?}"
    );
}

/// A one-shot schedule due after `keel run` ended (a headless run does not wait for it) is
/// reported once as missed when the session is resumed: logged, said on stderr and told to
/// the model, never run; a second resume reports nothing more.
#[test]
fn a_schedule_due_while_keel_was_not_running_is_reported_missed_not_run() {
    let env = Env::new();
    enable_plugins(&env);
    let mock = Mock::start(
        r#"
responses:
  - tool_calls: [{ id: c1, name: schedule_create, arguments: { prompt: "water the plants", after_seconds: 2 } }]
  - text: "Reminder set."
  - text: "Noted, I did not water them."
  - text: "Still nothing to do."
"#,
    );
    let first = run(env
        .keel(&mock.base_url())
        .args(["run", "remind me to water the plants"]));
    assert_eq!(first.code, Some(0), "stderr:\n{}", first.stderr);
    assert_eq!(first.stdout, "Reminder set.\n");
    let events = load_consistent(&env.only_session());
    assert_eq!(of_type(&events, "schedule/created").len(), 1);
    assert!(of_type(&events, "schedule/fired").is_empty());

    std::thread::sleep(Duration::from_millis(2500));
    let second = run(env
        .keel(&mock.base_url())
        .args(["resume", "--last", "anything new?"]));
    assert_eq!(second.code, Some(0), "stderr:\n{}", second.stderr);
    assert!(
        second.stderr.contains("Schedule sched-1 came due at ")
            && second
                .stderr
                .contains("while keel was not running; it was not run"),
        "{}",
        second.stderr
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    let seen = requests[2]["messages"].to_string();
    assert!(
        seen.contains("came due while keel was not running")
            && seen.contains("sched-1")
            && seen.contains("water the plants"),
        "{seen}"
    );
    assert!(!seen.contains("[scheduled sched-1"), "not run: {seen}");

    let third = run(env
        .keel(&mock.base_url())
        .args(["resume", "--last", "and now?"]));
    assert_eq!(third.code, Some(0), "stderr:\n{}", third.stderr);
    assert!(!third.stderr.contains("came due"), "{}", third.stderr);
    let events = load_consistent(&env.only_session());
    let missed = of_type(&events, "schedule/missed");
    assert_eq!(missed.len(), 1, "{missed:?}");
    assert_eq!(missed[0]["data"]["id"], "sched-1");
    assert_eq!(missed[0]["data"]["count"], 1);
    assert!(of_type(&events, "schedule/fired").is_empty());
    assert_eq!(mock.requests().len(), 4);
}

/// Bad arguments are tool errors naming the argument; a good schedule is listed and deleted.
#[test]
fn bad_schedule_arguments_are_refused_naming_them() {
    let env = Env::new();
    enable_plugins(&env);
    let mock = Mock::start(
        r#"
responses:
  - tool_calls:
      - { id: past, name: schedule_create, arguments: { prompt: "x", at: "2001-01-01T00:00:00Z" } }
      - { id: short, name: schedule_create, arguments: { prompt: "x", every_seconds: 10 } }
      - { id: two, name: schedule_create, arguments: { prompt: "x", after_seconds: 60, at: "2030-01-01T00:00:00Z" } }
      - { id: none, name: schedule_create, arguments: { prompt: "x" } }
      - { id: notime, name: schedule_create, arguments: { prompt: "x", at: "next tuesday" } }
      - { id: huge, name: schedule_create, arguments: { prompt: "x", after_seconds: 100000000 } }
      - { id: unknown, name: schedule_delete, arguments: { id: sched-9 } }
      - { id: good, name: schedule_create, arguments: { prompt: "look at the logs", after_seconds: 3600 } }
  - tool_calls:
      - { id: upd, name: schedule_update, arguments: { id: sched-1, prompt: "look at the new logs", every_seconds: 600 } }
      - { id: upd_none, name: schedule_update, arguments: { id: sched-1 } }
      - { id: upd_unknown, name: schedule_update, arguments: { id: sched-7, prompt: "x" } }
      - { id: upd_short, name: schedule_update, arguments: { id: sched-1, every_seconds: 10 } }
      - { id: list, name: schedule_list, arguments: {} }
      - { id: del, name: schedule_delete, arguments: { id: sched-1 } }
      - { id: empty, name: schedule_list, arguments: {} }
  - text: "done"
"#,
    );
    let out = run(env.keel(&mock.base_url()).args(["run", "schedule things"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let names = tool_names(&mock.requests()[0]);
    for tool in [
        "schedule_create",
        "schedule_list",
        "schedule_update",
        "schedule_delete",
        "present",
    ] {
        assert!(names.iter().any(|n| n == tool), "{tool} in {names:?}");
    }
    let events = load_consistent(&env.only_session());
    let results = tool_results(&events);
    let by_id = |id: &str| {
        results
            .iter()
            .find(|r| r.0 == id)
            .unwrap_or_else(|| panic!("no result for {id}: {results:?}"))
            .clone()
    };
    let refused = |id: &str, says: &[&str]| {
        let (_, text, is_error) = by_id(id);
        assert!(is_error, "{id} should fail: {text}");
        for s in says {
            assert!(text.contains(s), "{id}: {text:?} lacks {s:?}");
        }
    };
    refused("past", &["at 2001-01-01T00:00:00Z is in the past"]);
    refused("short", &["every_seconds", "300"]);
    refused("two", &["only one of", "after_seconds and at"]);
    refused("none", &["give one of after_seconds, every_seconds or at"]);
    refused("notime", &["at \"next tuesday\" is not an RFC 3339 time"]);
    refused("huge", &["after_seconds 100000000 is out of range"]);
    refused("unknown", &["id 'sched-9' is not an active schedule"]);
    let (_, good, is_error) = by_id("good");
    assert!(
        !is_error && good.starts_with("Scheduled sched-1: once at "),
        "{good}"
    );
    let (_, updated, is_error) = by_id("upd");
    assert!(
        !is_error
            && updated.starts_with("Updated sched-1: next at ")
            && updated.ends_with(", every 600 s."),
        "{updated}"
    );
    refused("upd_none", &["give a new prompt, or one of"]);
    refused(
        "upd_unknown",
        &["id 'sched-7' is not an active schedule (active: sched-1)"],
    );
    refused("upd_short", &["every_seconds", "300"]);
    let (_, list, _) = by_id("list");
    assert!(
        list.starts_with("sched-1 next ") && list.ends_with(", every 600 s: look at the new logs"),
        "{list}"
    );
    assert_eq!(by_id("del").1, "Deleted sched-1.");
    assert_eq!(by_id("empty").1, "No schedules.");
    // Only the good one was logged, and its one good change.
    assert_eq!(of_type(&events, "schedule/created").len(), 1);
    assert_eq!(of_type(&events, "schedule/updated").len(), 1);
    assert_eq!(of_type(&events, "schedule/deleted").len(), 1);
}

const PRESENT_SCRIPT: &str = r#"
responses:
  - tool_calls:
      - { id: ok, name: present, arguments: { files: [ { path: "report.md", description: "the summary" }, { path: "out/data.csv" } ] } }
      - { id: missing, name: present, arguments: { files: [ { path: "nope.txt" } ] } }
      - { id: outside, name: present, arguments: { files: [ { path: "../outside/secret.txt" } ] } }
  - text: "Here is the report."
"#;

/// `present` in `keel run`: the files are listed on stderr after the answer (stdout keeps the
/// answer alone); a missing path and one outside the workspace are tool errors naming them.
#[test]
fn presented_files_are_listed_after_the_answer_and_bad_paths_refused() {
    let env = Env::new();
    enable_plugins(&env);
    env.write("report.md", "# Report\n");
    env.write("out/data.csv", "a,b\n");
    std::fs::write(env.outside.join("secret.txt"), "s").unwrap();
    let mock = Mock::start(PRESENT_SCRIPT);
    let out = run(env.keel(&mock.base_url()).args(["run", "write the report"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout, "Here is the report.\n");
    let listed = "keel: files presented:\n  report.md — the summary\n  out/data.csv\n";
    let at = out
        .stderr
        .find(listed)
        .unwrap_or_else(|| panic!("{}", out.stderr));
    let ended = out.stderr.find("keel: turn 1 ended").unwrap();
    assert!(at < ended, "{}", out.stderr);
    let events = load_consistent(&env.only_session());
    let results = tool_results(&events);
    let get = |id: &str| results.iter().find(|r| r.0 == id).unwrap().clone();
    assert!(!get("ok").2, "{:?}", get("ok"));
    let (_, missing, is_error) = get("missing");
    assert!(
        is_error && missing.contains("files[0].path 'nope.txt' does not exist"),
        "{missing}"
    );
    let (_, outside, is_error) = get("outside");
    assert!(
        is_error && outside.contains("files[0].path '../outside/secret.txt'"),
        "{outside}"
    );
    let presented = of_type(&events, "present/files");
    assert_eq!(presented.len(), 1);
    assert_eq!(
        presented[0]["data"],
        json!({"files": [{"path": "report.md", "description": "the summary"}, {"path": "out/data.csv"}]})
    );
}

/// With `--json` the presented files are their event's line on stdout, before the turn's end.
#[test]
fn presented_files_are_an_event_line_in_json_mode() {
    let env = Env::new();
    enable_plugins(&env);
    env.write("report.md", "# Report\n");
    env.write("out/data.csv", "a,b\n");
    let mock = Mock::start(PRESENT_SCRIPT);
    let out = run(env
        .keel(&mock.base_url())
        .args(["run", "--json", "write the report"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let at = lines
        .iter()
        .position(|v| v["type"] == "present/files")
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert_eq!(lines[at]["data"]["files"][0]["path"], "report.md");
    let end = lines.iter().rposition(|v| v["type"] == "turn/end").unwrap();
    assert!(at < end);
    assert!(!out.stderr.contains("files presented"), "{}", out.stderr);
}

/// Off by default: without the user's rows neither plugin's tools are offered.
#[test]
fn the_plugins_are_off_by_default() {
    let env = Env::new();
    let mock = Mock::start("responses:\n  - text: \"hi\"\n");
    let out = run(env.keel(&mock.base_url()).args(["run", "hello"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let names = tool_names(&mock.requests()[0]);
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("schedule_") || n == "present"),
        "{names:?}"
    );
}

/// Over ACP the presented files follow the answer as an agent message, before the prompt's
/// response.
#[test]
fn presented_files_follow_the_answer_over_acp() {
    let env = Env::new();
    enable_plugins(&env);
    env.write("report.md", "# Report\n");
    env.write("out/data.csv", "a,b\n");
    let mock = Mock::start(PRESENT_SCRIPT);
    let mut acp = Acp::start(&env, &mock.base_url());
    acp.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let new = acp.request(2, "session/new", json!({"cwd": env.ws, "mcpServers": []}));
    let sid = new["result"]["sessionId"].as_str().unwrap().to_owned();
    acp.send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "write the report"}]}}),
    );
    let mut said = String::new();
    loop {
        let v = acp.wait_for(HANG_GUARD, "the prompt's updates", |v| {
            v["id"] == 3 || agent_text(v).is_some()
        });
        if v["id"] == 3 {
            assert_eq!(v["result"]["stopReason"], "end_turn", "{v}");
            break;
        }
        said.push_str(agent_text(&v).unwrap());
    }
    assert!(
        said.ends_with(
            "Here is the report.\n\n**Files presented:**\n- `report.md` — the summary\n- `out/data.csv`\n"
        ),
        "{said:?}"
    );
    assert_eq!(acp.close(), Some(0));
}

/// keel killed (SIGKILL) with one schedule fired and another still pending: the resumed
/// session reports the pending one, now past, as missed, and neither runs again.
#[test]
fn after_a_crash_a_fired_schedule_stays_fired_and_a_pending_one_is_missed() {
    let env = Env::new();
    enable_plugins(&env);
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "two reminders" }
    tool_calls:
      - { id: c1, name: schedule_create, arguments: { prompt: "first reminder", after_seconds: 1 } }
      - { id: c2, name: schedule_create, arguments: { prompt: "second reminder", after_seconds: 4 } }
  - match: { last_user_contains: "two reminders" }
    text: "Both set."
  - match: { last_user_contains: "first reminder" }
    text: "First done."
  - text: "Noted what was missed."
"#,
    );
    let mut acp = Acp::start(&env, &mock.base_url());
    acp.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let new = acp.request(2, "session/new", json!({"cwd": env.ws, "mcpServers": []}));
    let sid = new["result"]["sessionId"].as_str().unwrap().to_owned();
    let started = Instant::now();
    let answer = acp.request(
        3,
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "set two reminders"}]}),
    );
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    acp.wait_for_text(Duration::from_secs(30), "First done.");
    // Let the turn's end reach the log, then crash.
    env.wait_for_log("the fired turn's end", |events| {
        of_type(events, "turn/end").len() == 2
    });
    acp.kill();
    let left = Duration::from_millis(4500).saturating_sub(started.elapsed());
    std::thread::sleep(left);

    let out = run(env
        .keel(&mock.base_url())
        .args(["resume", "--last", "what did I miss?"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr.contains("Schedule sched-2 came due at ") && !out.stderr.contains("sched-1"),
        "{}",
        out.stderr
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    let seen = requests[3]["messages"].to_string();
    assert!(seen.contains("second reminder"), "{seen}");
    assert!(!seen.contains("[scheduled sched-2"), "not run: {seen}");
    assert_eq!(
        seen.matches("[scheduled sched-1").count(),
        1,
        "sched-1 ran once: {seen}"
    );
    let events = load_consistent(&env.only_session());
    let fired = of_type(&events, "schedule/fired");
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0]["data"]["id"], "sched-1");
    let missed = of_type(&events, "schedule/missed");
    assert_eq!(missed.len(), 1);
    assert_eq!(missed[0]["data"]["id"], "sched-2");
}
