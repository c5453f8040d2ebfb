//! The `fake-consult` binary, spawned for real: argv, env-driven scenarios, exit codes, the v1
//! envelopes, counters, the JSONL record, following with restarts, transient failures.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_testkit::consult::{self, FakeConsult};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_fake-consult");

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {:?}", self.stdout))
    }
}

/// A scenario rooted in its own temp dir: state in `state/`, record in `record.jsonl`.
struct Fx {
    dir: tempfile::TempDir,
}

impl Fx {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn state(&self) -> std::path::PathBuf {
        self.dir.path().join("state")
    }
    fn record(&self) -> std::path::PathBuf {
        self.dir.path().join("record.jsonl")
    }
    fn scenario(&self) -> FakeConsult {
        FakeConsult::new()
            .state_dir(self.state())
            .record(self.record())
    }
    fn command(&self, sc: &FakeConsult, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .envs(sc.env())
            .current_dir(self.dir.path())
            .stdin(Stdio::null());
        cmd
    }
    fn run_env(&self, sc: &FakeConsult, extra: &[(&str, &str)], args: &[&str]) -> Out {
        let mut cmd = self.command(sc, args);
        cmd.envs(extra.iter().copied());
        let out = cmd.output().unwrap();
        Out {
            code: out.status.code().expect("exited by signal"),
            stdout: String::from_utf8(out.stdout).unwrap(),
            stderr: String::from_utf8(out.stderr).unwrap(),
        }
    }
    fn run(&self, sc: &FakeConsult, args: &[&str]) -> Out {
        self.run_env(sc, &[], args)
    }
    fn delegate(&self, sc: &FakeConsult, prompt: &str) -> Value {
        let out = self.run(
            sc,
            &[
                "delegate",
                "--background",
                "--json",
                "--read-only",
                "--",
                prompt,
            ],
        );
        assert_eq!(out.code, 0, "{}", out.stderr);
        out.json()
    }
}

#[test]
fn path_helper_finds_the_built_binary() {
    let found = consult::fake_consult_path().unwrap();
    assert_eq!(
        found.canonicalize().unwrap(),
        Path::new(BIN).canonicalize().unwrap()
    );
}

#[test]
fn builder_produces_the_documented_variables() {
    let env = FakeConsult::new()
        .version("1.3.0")
        .doctor_fail_first(2)
        .fail_first("delegate", 2, 3)
        .exit("wait", 130)
        .missing("events")
        .missing("steer")
        .event("blocked", "need a decision")
        .env();
    let expected: Vec<(String, String)> = [
        ("FAKE_CONSULT_DOCTOR_FAIL_FIRST", "2"),
        (
            "FAKE_CONSULT_EVENTS",
            r#"[{"message":"need a decision","type":"blocked"}]"#,
        ),
        ("FAKE_CONSULT_EXIT_WAIT", "130"),
        ("FAKE_CONSULT_FAIL_CODE_DELEGATE", "3"),
        ("FAKE_CONSULT_FAIL_FIRST_DELEGATE", "2"),
        ("FAKE_CONSULT_MISSING", "events,steer"),
        ("FAKE_CONSULT_VERSION", "1.3.0"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(env, expected);
}

#[test]
fn version_string_and_version_exit() {
    let fx = Fx::new();
    let out = fx.run(&fx.scenario(), &["--version"]);
    assert_eq!((out.code, out.stdout.as_str()), (0, "consult 1.3.0\n"));
    let out = fx.run(&fx.scenario().version("1.1.4"), &["--version"]);
    assert_eq!(out.stdout, "consult 1.1.4\n");
    let out = fx.run(&fx.scenario().version_exit(1), &["--version"]);
    assert_eq!((out.code, out.stdout.as_str()), (1, ""));
    assert_eq!(consult::invocations(&fx.state(), "version"), 3);
}

#[test]
fn doctor_fails_for_the_first_n_runs_then_passes() {
    let fx = Fx::new();
    let sc = fx.scenario().doctor_fail_first(2);
    let args = ["doctor", "--json", "--write", "--sandbox", "inherit"];
    let runs: Vec<(i32, bool)> = (0..3)
        .map(|_| {
            let out = fx.run(&sc, &args);
            let v = out.json();
            assert_eq!(v["schemaVersion"], 1);
            assert_eq!(v["mode"], "write");
            assert_eq!(v["sandbox"], "inherit");
            (out.code, v["ok"].as_bool().unwrap())
        })
        .collect();
    assert_eq!(runs, vec![(1, false), (1, false), (0, true)]);
    assert_eq!(consult::invocations(&fx.state(), "doctor"), 3);
    let out = fx.run(&sc, &["doctor", "--json", "--sandbox", "nowhere"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
}

#[test]
fn agents_and_capabilities_by_version() {
    let fx = Fx::new();
    let agents = fx.run(&fx.scenario(), &["agents", "--json"]).json();
    assert_eq!(
        agents["agents"][0],
        json!({"name": "claude", "available": true, "default": true})
    );
    assert_eq!(agents["agents"].as_array().unwrap().len(), 4);

    let caps = fx.run(&fx.scenario(), &["capabilities", "--json"]);
    assert_eq!(caps.code, 0);
    let caps = caps.json();
    assert_eq!(caps["version"], "1.3.0");
    assert_eq!(caps["features"]["steer"], true);
    assert_eq!(caps["features"]["events"], true);

    let old = fx.run(&fx.scenario().version("1.1.0"), &["capabilities", "--json"]);
    assert_eq!(old.code, 2);
    assert_eq!(old.stderr.trim(), "unknown subcommand: capabilities");
    assert_eq!(old.stdout, "");

    let sc = fx.scenario().missing("events");
    let caps = fx.run(&sc, &["capabilities", "--json"]).json();
    assert_eq!(caps["features"]["events"], false);
    let probe = fx.run(&sc, &["events", "--help"]);
    assert_eq!(
        (probe.code, probe.stderr.trim()),
        (2, "unknown subcommand: events")
    );
    assert_eq!(fx.run(&sc, &["steer", "--help"]).code, 0);
    let unknown = fx.run(&sc, &["frobnicate"]);
    assert_eq!(
        (unknown.code, unknown.stderr.trim()),
        (2, "unknown subcommand: frobnicate")
    );
}

#[test]
fn delegate_result_envelope_v1_through_its_lifecycle() {
    let fx = Fx::new();
    let first = fx.delegate(&fx.scenario(), "first");
    assert_eq!(first["job"]["id"], "job-1");
    let sc = fx
        .scenario()
        .run_ms(400)
        .final_text("the answer")
        .touched_files(["a.rs", "b.rs"]);
    let out = fx.run(
        &sc,
        &[
            "delegate",
            "--background",
            "--json",
            "--agent",
            "codex",
            "--write",
            "--isolated",
            "--sandbox",
            "inherit",
            "--model",
            "m1",
            "--effort",
            "high",
            "--label",
            "fix it",
            "--after",
            "job-1",
            "--",
            "fix",
            "the bug",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let started = out.json();
    assert_eq!(started["schemaVersion"], 1);
    assert_eq!(started["job"]["id"], "job-2");
    assert_eq!(started["job"]["status"], "running");
    assert_eq!(started["outcome"]["finalText"], Value::Null);

    let not_final = fx.run(&sc, &["result", "job-2", "--json"]);
    assert_eq!((not_final.code, not_final.stdout.as_str()), (5, ""));
    assert!(
        not_final.stderr.contains("not final"),
        "{}",
        not_final.stderr
    );
    let status = fx.run(&sc, &["status", "job-2", "--json"]).json();
    assert_eq!(status["jobs"][0]["status"], "running");

    let waited = fx.run(&sc, &["wait", "job-1", "job-2", "--json", "--keep-running"]);
    assert_eq!(waited.code, 0, "{}", waited.stderr);
    let waited = waited.json();
    assert_eq!(waited["schemaVersion"], 1);
    assert_eq!(waited["jobs"][1]["status"], "completed");

    let out = fx.run(&sc, &["result", "job-2", "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = out.json();
    let job = &r["job"];
    assert_eq!(
        (
            &job["label"],
            &job["kind"],
            &job["profile"],
            &job["prompt"],
            &job["model"],
            &job["effort"],
            &job["afterJobIds"]
        ),
        (
            &json!("fix it"),
            &json!("task"),
            &json!("codex"),
            &json!("fix the bug"),
            &json!("m1"),
            &json!("high"),
            &json!(["job-1"])
        )
    );
    assert_eq!(
        job["authority"],
        json!({"mode": "write", "confinement": "inherit"})
    );
    for key in ["submittedAt", "startedAt", "completedAt"] {
        let at = job[key].as_str().unwrap();
        assert!(
            at.len() == 24 && at.ends_with('Z') && at.as_bytes()[10] == b'T',
            "{at}"
        );
    }
    assert_eq!(r["outcome"]["finalText"], "the answer");
    assert_eq!(r["outcome"]["stopReason"], "end_turn");
    assert_eq!(r["outcome"]["sessionId"], "sess-job-2");
    assert_eq!(r["outcome"]["errorMessage"], Value::Null);
    assert_eq!(r["artifacts"]["touchedFiles"], json!(["a.rs", "b.rs"]));
    let patch = r["artifacts"]["patchPath"].as_str().unwrap();
    assert!(
        std::fs::read_to_string(patch)
            .unwrap()
            .starts_with("--- a/")
    );
    assert!(Path::new(r["artifacts"]["logPath"].as_str().unwrap()).is_file());
    assert_eq!(r["lineage"]["delegationDepth"], 0);
    assert_eq!(r["lineage"]["parentJobId"], Value::Null);
    // A read-only job has no patch.
    assert_eq!(first["artifacts"]["patchPath"], Value::Null);
    assert_eq!(consult::job_ids(&fx.state()), vec!["job-1", "job-2"]);
}

#[test]
fn bad_delegate_arguments_are_usage_errors() {
    let fx = Fx::new();
    let sc = fx.scenario();
    for args in [
        &["delegate", "--background", "--json", "--"][..],
        &["delegate", "--json", "--read-only", "--write", "--", "x"],
        &["delegate", "--json", "--bogus", "--", "x"],
        &["delegate", "--json", "--after", "job-7", "--", "x"],
        &["delegate", "--json", "--agent", "nobody", "--", "x"],
    ] {
        let out = fx.run(&sc, args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
    }
    assert!(consult::job_ids(&fx.state()).is_empty());
}

#[test]
fn unknown_job_is_exit_2_with_job_not_found() {
    let fx = Fx::new();
    let sc = fx.scenario();
    fx.delegate(&sc, "x");
    for args in [
        &["result", "job-9", "--json"][..],
        &["status", "job-9", "--json"],
        &["wait", "job-1", "job-9", "--json", "--keep-running"],
        &["logs", "job-9", "--tail", "5"],
        &["cancel", "job-9"],
        &["steer", "job-9", "--message", "hi"],
        &["events", "job-9", "--json"],
        &["report", "job-9", "--type", "progress", "--message", "m"],
        &["chain", "job-9", "--json"],
    ] {
        let out = fx.run(&sc, args);
        assert_eq!(out.code, 2, "{args:?}");
        assert_eq!(out.stderr.trim(), "job not found: job-9", "{args:?}");
    }
}

#[test]
fn transient_failures_then_success() {
    let fx = Fx::new();
    let sc = fx.scenario().fail_first("delegate", 2, 3);
    let args = [
        "delegate",
        "--background",
        "--json",
        "--read-only",
        "--",
        "x",
    ];
    let first = fx.run(&sc, &args);
    assert_eq!((first.code, first.stdout.as_str()), (3, ""));
    assert!(first.stderr.contains("busy"), "{}", first.stderr);
    assert_eq!(fx.run(&sc, &args).code, 3);
    let third = fx.run(&sc, &args);
    assert_eq!(third.code, 0);
    assert_eq!(third.json()["job"]["id"], "job-1");
    assert_eq!(consult::invocations(&fx.state(), "delegate"), 3);
    assert_eq!(consult::job_ids(&fx.state()), vec!["job-1"]);
}

#[test]
fn forced_exit_codes_per_subcommand() {
    let fx = Fx::new();
    fx.delegate(&fx.scenario().run_ms(60_000), "x");
    let cases: &[(&str, i32, &[&str])] = &[
        ("wait", 4, &["wait", "job-1", "--json", "--keep-running"]),
        ("wait", 130, &["wait", "job-1", "--json", "--keep-running"]),
        ("wait", 143, &["wait", "job-1", "--json", "--keep-running"]),
        ("result", 6, &["result", "job-1", "--json"]),
        (
            "review",
            8,
            &[
                "review",
                "--json",
                "--base",
                "main",
                "--sandbox",
                "confined",
            ],
        ),
        ("steer", 1, &["steer", "job-1", "--message", "m"]),
        ("steer", 3, &["steer", "job-1", "--message", "m"]),
        ("status", 2, &["status", "--all", "--json"]),
    ];
    for (sub, code, args) in cases {
        let out = fx.run(&fx.scenario().exit(sub, *code), args);
        assert_eq!((out.code, out.stdout.as_str()), (*code, ""), "{sub} {code}");
        assert!(
            out.stderr.starts_with(&format!("consult {sub}: ")),
            "{}",
            out.stderr
        );
    }
    let out = fx.run(
        &fx.scenario()
            .exit("status", 2)
            .stderr("status", "unknown job: job-1"),
        &["status", "job-1", "--json"],
    );
    assert_eq!((out.code, out.stderr.trim()), (2, "unknown job: job-1"));
    // A forced exit on one subcommand leaves the others alone, and steer was never applied.
    let sc = fx.scenario().exit("steer", 3);
    assert_eq!(fx.run(&sc, &["status", "--all", "--json"]).code, 0);
    assert!(consult::steers(&fx.state(), "job-1").is_empty());
}

#[test]
fn status_collections_session_filter_and_unknown_status() {
    let fx = Fx::new();
    let sc = fx.scenario().status("paused-by-moon");
    let args = [
        "delegate",
        "--background",
        "--json",
        "--read-only",
        "--",
        "x",
    ];
    assert_eq!(
        fx.run_env(&sc, &[("CONSULT_HOST_SESSION_ID", "A")], &args)
            .code,
        0
    );
    assert_eq!(
        fx.run_env(&sc, &[("CONSULT_HOST_SESSION_ID", "B")], &args)
            .code,
        0
    );
    let all = fx.run_env(
        &sc,
        &[("CONSULT_HOST_SESSION_ID", "A")],
        &["status", "--all", "--json"],
    );
    let all = all.json();
    assert_eq!(all["schemaVersion"], 1);
    assert_eq!(all["jobs"].as_array().unwrap().len(), 2);
    let mine = fx
        .run_env(
            &sc,
            &[("CONSULT_HOST_SESSION_ID", "A")],
            &["status", "--json"],
        )
        .json();
    let ids: Vec<&Value> = mine["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| &j["id"])
        .collect();
    assert_eq!(ids, vec![&json!("job-1")]);
    assert_eq!(mine["jobs"][0]["hostSessionId"], "A");
    assert_eq!(mine["jobs"][0]["status"], "paused-by-moon");
    let r = fx.run(&sc, &["result", "job-2", "--json"]);
    assert_eq!(r.code, 0);
    assert_eq!(r.json()["job"]["status"], "paused-by-moon");
}

#[test]
fn failed_job_result_exits_6_with_its_error() {
    let fx = Fx::new();
    let sc = fx
        .scenario()
        .status("failed")
        .error_message("agent crashed");
    fx.delegate(&sc, "x");
    let out = fx.run(&sc, &["result", "job-1", "--json"]);
    assert_eq!(out.code, 6);
    let r = out.json();
    assert_eq!(r["job"]["status"], "failed");
    assert_eq!(r["outcome"]["errorMessage"], "agent crashed");
    assert_eq!(r["outcome"]["stopReason"], "error");
}

#[test]
fn logs_grow_over_time_and_tail() {
    let fx = Fx::new();
    let sc = fx.scenario().log_lines(4, 500).run_ms(5_000);
    fx.delegate(&sc, "x");
    let lines = |args: &[&str]| -> Vec<String> {
        let out = fx.run(&sc, args);
        assert_eq!(out.code, 0, "{}", out.stderr);
        out.stdout.lines().map(str::to_owned).collect()
    };
    // One line at submission, one more every 500 ms, four in all.
    assert_eq!(lines(&["logs", "job-1"]), vec!["[job-1] log line 1"]);
    std::thread::sleep(Duration::from_millis(600));
    let grown = lines(&["logs", "job-1"]);
    assert!(grown.len() >= 2, "{grown:?}");
    assert_eq!(grown[..2], ["[job-1] log line 1", "[job-1] log line 2"]);
    std::thread::sleep(Duration::from_millis(1_000));
    assert_eq!(lines(&["logs", "job-1"]).len(), 4);
    assert_eq!(
        lines(&["logs", "job-1", "--tail", "1"]),
        vec!["[job-1] log line 4"]
    );
    assert_eq!(
        lines(&["logs", "job-1", "--tail", "2"]),
        vec!["[job-1] log line 3", "[job-1] log line 4"]
    );
    assert_eq!(lines(&["logs", "job-1", "--tail", "10"]).len(), 4);
    assert_eq!(fx.run(&sc, &["logs", "job-1", "--tail", "x"]).code, 2);
}

#[test]
fn cancel_and_steer_outcomes() {
    let fx = Fx::new();
    let sc = fx.scenario().run_ms(60_000);
    fx.delegate(&sc, "long");
    let steer = fx.run(&sc, &["steer", "job-1", "--message", "focus on tests"]);
    assert_eq!(steer.code, 0, "{}", steer.stderr);
    assert_eq!(
        consult::steers(&fx.state(), "job-1"),
        vec!["focus on tests"]
    );
    let events = fx.run(&sc, &["events", "job-1", "--json"]).json();
    assert_eq!(events["events"][0]["type"], "steer");
    assert_eq!(events["events"][0]["message"], "focus on tests");
    assert_eq!(fx.run(&sc, &["steer", "job-1"]).code, 2);

    let cancel = fx.run(&sc, &["cancel", "job-1"]);
    assert_eq!(
        (cancel.code, cancel.stdout.as_str()),
        (0, "cancelled job-1\n")
    );
    let status = fx.run(&sc, &["status", "job-1", "--json"]).json();
    assert_eq!(status["jobs"][0]["status"], "cancelled");
    assert_eq!(
        fx.run(&sc, &["cancel", "job-1"]).stdout,
        "job-1 is already final\n"
    );
    let refused = fx.run(&sc, &["steer", "job-1", "--message", "too late"]);
    assert_eq!(refused.code, 5, "{}", refused.stderr);
    assert_eq!(consult::steers(&fx.state(), "job-1").len(), 1);
    let r = fx.run(&sc, &["result", "job-1", "--json"]);
    assert_eq!(r.code, 0);
    assert_eq!(r.json()["outcome"]["stopReason"], "cancelled");
}

fn scripted(fx: &Fx, n: usize) -> FakeConsult {
    let mut sc = fx.scenario();
    for i in 1..=n {
        sc = sc.event(
            if i == 2 { "blocked" } else { "progress" },
            &format!("step {i}"),
        );
    }
    sc
}

#[test]
fn events_list_since_and_urgency() {
    let fx = Fx::new();
    let sc = scripted(&fx, 3)
        .event_value(json!({"type": "discovery", "message": "found", "data": {"k": 1}}));
    fx.delegate(&sc, "x");
    let all = fx.run(&sc, &["events", "job-1", "--json"]).json();
    assert_eq!(all["schemaVersion"], 1);
    assert_eq!(all["jobId"], "job-1");
    let events = all["events"].as_array().unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, vec![1, 2, 3, 4]);
    assert_eq!(events[0]["urgency"], "info");
    assert_eq!(events[1]["urgency"], "wake");
    assert_eq!(events[3]["data"], json!({"k": 1}));
    let since = fx
        .run(&sc, &["events", "job-1", "--json", "--since", "2"])
        .json();
    let seqs: Vec<u64> = since["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, vec![3, 4]);
}

fn follow_seqs(out: &Out) -> Vec<u64> {
    out.stdout
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["schemaVersion"], 1);
            assert_eq!(v["jobId"], "job-1");
            v["event"]["seq"].as_u64().unwrap()
        })
        .collect()
}

#[test]
fn follow_dies_after_n_events_and_since_resumes_without_duplicates() {
    let fx = Fx::new();
    let sc = scripted(&fx, 5).event_step_ms(20).follow_die_after(2);
    fx.delegate(&sc, "x");
    let mut seen = Vec::new();
    let mut codes = Vec::new();
    let mut since = 0;
    for _ in 0..5 {
        let out = fx.run(
            &sc,
            &[
                "events",
                "job-1",
                "--json",
                "--follow",
                "--since",
                &since.to_string(),
            ],
        );
        codes.push(out.code);
        let seqs = follow_seqs(&out);
        if let Some(last) = seqs.last() {
            since = *last;
        }
        seen.extend(seqs);
        if out.code == 0 {
            break;
        }
        assert_eq!(out.code, 4, "{}", out.stderr);
    }
    assert_eq!(seen, vec![1, 2, 3, 4, 5]);
    // [1,2] dies, [3,4] dies, [5] then the final job ends the stream.
    assert_eq!(codes, vec![4, 4, 0]);
    assert_eq!(consult::invocations(&fx.state(), "events-follow"), 3);

    // Only the first follow dies when FOLLOW_DIE_TIMES is 1.
    let fx = Fx::new();
    let sc = scripted(&fx, 5).follow_die_after(2).follow_die_times(1);
    fx.delegate(&sc, "x");
    let first = fx.run(&sc, &["events", "job-1", "--json", "--follow"]);
    assert_eq!((first.code, follow_seqs(&first)), (4, vec![1, 2]));
    let second = fx.run(
        &sc,
        &["events", "job-1", "--json", "--follow", "--since", "2"],
    );
    assert_eq!((second.code, follow_seqs(&second)), (0, vec![3, 4, 5]));
}

#[test]
fn follow_streams_live_reports_until_the_job_ends() {
    let fx = Fx::new();
    let sc = fx.scenario().run_ms(1_500);
    fx.delegate(&sc, "x");
    let started = Instant::now();
    let mut child = fx
        .command(&sc, &["events", "job-1", "--json", "--follow"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let report = fx.run_env(
        &sc,
        &[("CONSULT_JOB_ID", "job-1")],
        &[
            "report",
            "--type",
            "blocked",
            "--message",
            "which db?",
            "--data",
            r#"{"options":["a","b"]}"#,
        ],
    );
    assert_eq!(report.code, 0, "{}", report.stderr);
    assert_eq!(
        report.json(),
        json!({"schemaVersion": 1, "jobId": "job-1", "seq": 1})
    );
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["event"]["type"], "blocked");
    assert_eq!(v["event"]["urgency"], "wake");
    assert_eq!(v["event"]["data"]["options"][1], "b");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(
        started.elapsed() >= Duration::from_millis(1_400),
        "ended before the job did"
    );
    let bad = fx.run(
        &sc,
        &["report", "job-1", "--type", "gossip", "--message", "m"],
    );
    assert_eq!(bad.code, 2);
}

#[test]
fn lineage_and_chain() {
    let fx = Fx::new();
    let sc = fx.scenario();
    fx.delegate(&sc, "parent");
    let child = fx.run_env(
        &sc,
        &[("CONSULT_JOB_ID", "job-1")],
        &[
            "delegate",
            "--background",
            "--json",
            "--read-only",
            "--",
            "child",
        ],
    );
    let child = child.json();
    assert_eq!(child["lineage"]["parentJobId"], "job-1");
    assert_eq!(child["lineage"]["delegationDepth"], 1);
    fx.delegate(&sc, "unrelated");
    let parent = fx.run(&sc, &["result", "job-1", "--json"]).json();
    assert_eq!(parent["lineage"]["childJobIds"], json!(["job-2"]));
    assert_eq!(parent["lineage"]["chainId"], child["lineage"]["chainId"]);

    let chain = fx.run(&sc, &["chain", "job-2", "--json"]).json();
    assert_eq!(chain["schemaVersion"], 1);
    let chains = chain["chains"].as_array().unwrap();
    assert_eq!(chains.len(), 1);
    let ids: Vec<&Value> = chains[0]["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| &j["id"])
        .collect();
    assert_eq!(ids, vec![&json!("job-1"), &json!("job-2")]);
    let all = fx.run(&sc, &["chain", "--json"]).json();
    assert_eq!(all["chains"].as_array().unwrap().len(), 2);
}

#[test]
fn review_blocks_and_returns_findings() {
    let fx = Fx::new();
    let sc = fx.scenario().run_ms(200);
    let started = Instant::now();
    let out = fx.run(
        &sc,
        &[
            "review",
            "--json",
            "--base",
            "main",
            "--sandbox",
            "confined",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(started.elapsed() >= Duration::from_millis(200));
    let r = out.json();
    assert_eq!(r["job"]["kind"], "review");
    assert_eq!(r["job"]["status"], "completed");
    assert!(
        r["outcome"]["finalText"]
            .as_str()
            .unwrap()
            .contains("changes since main")
    );
    let out = fx.run(
        &sc,
        &[
            "review",
            "--json",
            "--job",
            "job-42",
            "--sandbox",
            "confined",
        ],
    );
    assert_eq!((out.code, out.stderr.trim()), (2, "job not found: job-42"));
    let out = fx.run(
        &sc.review_text("1. [major] bug"),
        &["review", "--json", "--job", "job-1"],
    );
    assert_eq!(out.json()["outcome"]["finalText"], "1. [major] bug");
}

#[test]
fn bad_json_and_schema_versions() {
    let fx = Fx::new();
    fx.delegate(&fx.scenario(), "x");
    let out = fx.run(
        &fx.scenario().bad_json("status"),
        &["status", "--all", "--json"],
    );
    assert_eq!(out.code, 0);
    assert!(
        serde_json::from_str::<Value>(&out.stdout).is_err(),
        "{}",
        out.stdout
    );
    // Only the named subcommand is broken.
    assert_eq!(
        fx.run(
            &fx.scenario().bad_json("status"),
            &["result", "job-1", "--json"]
        )
        .json()["schemaVersion"],
        1
    );
    let sc = fx.scenario().schema_version(2);
    for args in [
        &["result", "job-1", "--json"][..],
        &["status", "--all", "--json"],
        &["agents", "--json"],
    ] {
        assert_eq!(fx.run(&sc, args).json()["schemaVersion"], 2, "{args:?}");
    }
}

#[test]
fn delays_and_wait_limit() {
    let fx = Fx::new();
    let sc = fx.scenario().delay_ms_for("status", 300);
    let t = Instant::now();
    assert_eq!(fx.run(&sc, &["agents", "--json"]).code, 0);
    let fast = t.elapsed();
    let t = Instant::now();
    assert_eq!(fx.run(&sc, &["status", "--all", "--json"]).code, 0);
    assert!(t.elapsed() >= Duration::from_millis(300));
    assert!(fast < Duration::from_millis(300), "{fast:?}");

    let sc = fx.scenario().run_ms(60_000).wait_limit_ms(200);
    fx.delegate(&sc, "forever");
    let out = fx.run(&sc, &["wait", "job-1", "--json", "--keep-running"]);
    assert_eq!((out.code, out.stdout.as_str()), (4, ""));
}

#[test]
fn every_invocation_is_recorded_with_consult_env_and_cwd() {
    let fx = Fx::new();
    let sc = fx.scenario();
    let env = [
        ("CONSULT_HOST", "keel"),
        ("CONSULT_HOST_SESSION_ID", "s-1"),
        ("SECRET_TOKEN", "hunter2"),
    ];
    fx.run_env(&sc, &env, &["--version"]);
    fx.run_env(
        &sc,
        &env,
        &[
            "delegate",
            "--background",
            "--json",
            "--read-only",
            "--",
            "say hi",
        ],
    );
    fx.run_env(&sc, &env, &["nope"]);
    let record = consult::read_record(&fx.record()).unwrap();
    let argvs: Vec<Vec<String>> = record.iter().map(|r| r.argv.clone()).collect();
    assert_eq!(
        argvs,
        vec![
            vec!["--version".to_owned()],
            [
                "delegate",
                "--background",
                "--json",
                "--read-only",
                "--",
                "say hi"
            ]
            .map(str::to_owned)
            .to_vec(),
            vec!["nope".to_owned()],
        ]
    );
    for r in &record {
        let keys: Vec<&str> = r.env.keys().map(String::as_str).collect();
        assert_eq!(keys, vec!["CONSULT_HOST", "CONSULT_HOST_SESSION_ID"]);
        assert_eq!(r.env["CONSULT_HOST"], "keel");
        assert_eq!(
            r.cwd.canonicalize().unwrap(),
            fx.dir.path().canonicalize().unwrap()
        );
    }
    assert_eq!(consult::invocations(&fx.state(), "nope"), 1);
    assert_eq!(consult::invocations(&fx.state(), "delegate"), 1);
    assert_eq!(consult::invocations(&fx.state(), "status"), 0);
}

#[test]
fn concurrent_invocations_count_exactly() {
    let fx = Fx::new();
    let sc = fx.scenario();
    let children: Vec<_> = (0..8)
        .map(|_| {
            fx.command(
                &sc,
                &[
                    "delegate",
                    "--background",
                    "--json",
                    "--read-only",
                    "--",
                    "x",
                ],
            )
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    assert_eq!(consult::invocations(&fx.state(), "delegate"), 8);
    let mut ids = consult::job_ids(&fx.state());
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 8);
}
