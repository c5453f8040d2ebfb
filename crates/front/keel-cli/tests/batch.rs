//! `keel batch` end to end: the real binary, its real `keel run` children, workspaces, checks
//! and session files; only the model is the loopback mock (one script for every task, each
//! response matched to its task by the task id in the prompt).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::*;

/// A task file line.
fn task(id: &str, workspace: Value, check: Option<&str>) -> Value {
    let mut t = json!({"id": id, "prompt": format!("Work on {id}."), "workspace": workspace});
    if let Some(c) = check {
        t["check"] = json!(c);
    }
    t
}

/// `steps` bash steps for task `id`, `done`, then the answer ([`step_responses`]).
fn responses(id: &str, steps: usize, sleep: &str) -> Vec<Value> {
    step_responses(id, steps, sleep, 1)
}

fn write_tasks(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

fn ids(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("task-{i:02}")).collect()
}

/// `keel batch` with the mock, auto approval and the given arguments.
fn batch(env: &Env, mock: &Mock, args: &[&str]) -> std::process::Command {
    let mut cmd = env.keel(&mock.base_url());
    cmd.args(["--approval", "auto", "batch"]).args(args);
    cmd
}

/// Processes whose command line mentions `needle` (from /proc).
fn processes_with(needle: &str) -> Vec<i32> {
    processes()
        .into_iter()
        .filter(|(_, cmd)| cmd.contains(needle))
        .map(|(pid, _)| pid)
        .collect()
}

/// Wait until no process mentions `needle` (hang guard).
fn wait_gone(needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !processes_with(needle).is_empty() {
        assert!(
            Instant::now() < deadline,
            "processes mentioning {needle} outlived the batch: {:?}",
            processes_with(needle)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A template directory with one file.
fn template(env: &Env) -> PathBuf {
    let dir = env.outside.join("template");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("README.md"), "template\n").unwrap();
    dir
}

#[test]
fn twenty_tasks_four_at_a_time_are_scored_and_reported() {
    let env = Env::new();
    let tpl = template(&env);
    let ids = ids(20);
    let script: Vec<Value> = ids.iter().flat_map(|id| responses(id, 2, "")).collect();
    let mock = Mock::start(&json!({"responses": script}).to_string());
    let tasks = env.outside.join("tasks.jsonl");
    let lines: Vec<String> = ids
        .iter()
        .map(|id| {
            // task-07's check fails: its file is not there.
            let check = if id == "task-07" {
                "test -f missing.txt"
            } else {
                "grep -q done log.txt && test $(wc -l < log.txt) -eq 3"
            };
            task(id, json!(tpl), Some(check)).to_string()
        })
        .collect();
    write_tasks(&tasks, &lines);
    let out_dir = env.outside.join("out");
    let out = run(&mut batch(
        &env,
        &mock,
        &[
            tasks.to_str().unwrap(),
            "--concurrency",
            "4",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    ));
    assert_eq!(out.code, Some(1), "a failed check fails the batch: {out:?}");
    assert!(
        out.stdout
            .contains("20 tasks: 20 completed, 0 not; checks 19/20 passed"),
        "{}",
        out.stdout
    );
    let results = read_results(&out_dir);
    assert_eq!(results.len(), 20);
    let mut sessions = std::collections::HashSet::new();
    for (r, id) in results.iter().zip(&ids) {
        assert_eq!(r["id"], json!(id), "results in task-file order");
        assert_eq!(r["outcome"], "completed", "{r}");
        let (check, exit) = if id == "task-07" {
            ("failed", json!(1))
        } else {
            ("passed", json!(0))
        };
        assert_eq!(r["check"], check, "{r}");
        assert_eq!(r["check_exit"], exit, "{r}");
        assert_eq!(r["turns"], 1, "{r}");
        assert_eq!(r["requests"], 4, "2 steps, the done step, the answer: {r}");
        assert!(r["tokens"]["prompt"].as_u64().unwrap() > 0, "{r}");
        assert!(r["error"].is_null(), "{r}");
        let session = r["session"].as_str().unwrap().to_owned();
        // The session ran in the task's own workspace copy.
        let ws = PathBuf::from(r["workspace"].as_str().unwrap());
        assert_eq!(ws, out_dir.canonicalize().unwrap().join("work").join(id));
        assert_eq!(
            std::fs::read_to_string(ws.join("log.txt")).unwrap(),
            "step 1\nstep 2\ndone\n"
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("README.md")).unwrap(),
            "template\n"
        );
        let file = env
            .session_files()
            .into_iter()
            .find(|f| f.to_string_lossy().contains(&session))
            .unwrap_or_else(|| panic!("no session file for {session}"));
        let header: Value = serde_json::from_str(
            std::fs::read_to_string(file)
                .unwrap()
                .lines()
                .next()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(header["cwd"], json!(ws));
        assert!(sessions.insert(session));
    }
    assert!(
        !tpl.join("log.txt").exists(),
        "the template is never touched"
    );
    assert_eq!(mock.remaining(), 0);
    // Never more than 4 sessions at once: count overlapping intervals of a slot held, from a
    // session's start to its process's exit and its check.
    let mut edges: Vec<(u64, i32)> = results
        .iter()
        .flat_map(|r| {
            let start = r["started_at_ms"].as_u64().unwrap();
            let held = r["wall_ms"].as_u64().unwrap() + r["check_ms"].as_u64().unwrap();
            [(start, 1), (start + held, -1)]
        })
        .collect();
    edges.sort_by_key(|&(t, d)| (t, d));
    let (mut now, mut most) = (0, 0);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    assert!(most <= 4, "{most} tasks overlapped");
    assert!(most >= 2, "tasks ran concurrently ({most} at most)");
    // A second run finds everything done and runs nothing.
    let before = mock.requests().len();
    let again = run(&mut batch(
        &env,
        &mock,
        &[tasks.to_str().unwrap(), "--out", out_dir.to_str().unwrap()],
    ));
    assert!(
        again.stderr.contains("20 task(s) already done"),
        "{}",
        again.stderr
    );
    assert_eq!(mock.requests().len(), before);
    assert_eq!(
        super_results_sessions(&results),
        super_results_sessions(&read_results(&out_dir))
    );
}

fn super_results_sessions(results: &[Value]) -> Vec<String> {
    results
        .iter()
        .map(|r| r["session"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The status of every task in state.json (empty when there is none yet).
fn statuses(out: &Path) -> Vec<(String, String, Option<String>)> {
    let Ok(text) = std::fs::read_to_string(out.join("state.json")) else {
        return Vec::new();
    };
    let state: Value = serde_json::from_str(&text).unwrap();
    state["tasks"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(id, t)| {
            (
                id.clone(),
                t["status"].as_str().unwrap().to_owned(),
                t["session"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[test]
fn sigkill_mid_run_then_the_same_command_loses_no_task_and_runs_none_twice() {
    let env = Env::new();
    let tpl = template(&env);
    let ids = ids(20);
    let tasks = env.outside.join("tasks.jsonl");
    let check = "test $(sort log.txt | uniq -d | wc -l) -eq 0 && grep -q done log.txt";
    // A spare answer: a run killed after a task's answer was served but before it was recorded
    // done asks for the answer again when it is resumed.
    let mock = step_tasks(&tasks, &tpl, &ids, (4, "sleep 0.2; ", 2), check);
    let out_dir = env.outside.join("out");
    let args = [
        tasks.to_str().unwrap(),
        "--concurrency",
        "4",
        "--out",
        out_dir.to_str().unwrap(),
    ];
    let first = spawn(&mut batch(&env, &mock, &args));
    // Kill it once some tasks are done and others are running with a session.
    let deadline = Instant::now() + HANG_GUARD;
    let before_kill = loop {
        let s = statuses(&out_dir);
        let done = s.iter().filter(|t| t.1 == "done").count();
        let running = s
            .iter()
            .filter(|t| t.1 == "running" && t.2.is_some())
            .count();
        if done >= 4 && running >= 2 {
            break s;
        }
        assert!(Instant::now() < deadline, "hang guard: {s:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    first.signal(libc::SIGKILL);
    let killed = first.wait();
    assert_eq!(killed.code, None);
    // Its sessions die with it (none left writing a session the next run resumes).
    wait_gone(&out_dir.join("work").to_string_lossy());
    let state = statuses(&out_dir);
    let done_before: Vec<_> = state.iter().filter(|t| t.1 == "done").cloned().collect();
    assert!(done_before.len() >= before_kill.iter().filter(|t| t.1 == "done").count());
    let second = run(&mut batch(&env, &mock, &args));
    assert_eq!(second.code, Some(0), "{second:?}");
    assert!(
        second.stderr.contains("resuming session"),
        "{}",
        second.stderr
    );
    let results = read_results(&out_dir);
    assert_eq!(results.len(), 20, "no task lost");
    let requests = mock.requests();
    for (r, id) in results.iter().zip(&ids) {
        assert_eq!(r["outcome"], "completed", "{r}");
        assert_eq!(r["check"], "passed", "no step ran twice: {r}");
        // A task done before the kill kept its session and one turn; a resumed one has its
        // first turn (closed by crash repair) and the continuation.
        if let Some(before) = done_before.iter().find(|t| &t.0 == id) {
            assert_eq!(r["session"].as_str(), before.2.as_deref());
            assert_eq!(r["turns"], 1, "{r}");
        }
        assert!(r["turns"].as_u64().unwrap() <= 2, "{r}");
        let log = std::fs::read_to_string(out_dir.join("work").join(id).join("log.txt")).unwrap();
        let mut lines: Vec<&str> = log.lines().collect();
        let n = lines.len();
        lines.sort_unstable();
        lines.dedup();
        assert_eq!(lines.len(), n, "{id}: a step ran twice: {log}");
        // The model was asked at most once per response of this task (never a fresh re-run,
        // which would need twice as many).
        let asked = requests
            .iter()
            .filter(|q| last_user_text(q).contains(id.as_str()))
            .count();
        assert!(asked <= 6 + 1, "{id}: {asked} requests");
    }
    // The sessions running at the kill were resumed once each (one may have ended just before
    // the kill, unrecorded: it is only scored).
    let resumed = results.iter().filter(|r| r["turns"] == 2).count();
    let running = state.iter().filter(|t| t.1 == "running").count();
    assert!(
        resumed >= 1 && resumed <= running,
        "{resumed} resumed, {running} running"
    );
}

#[test]
fn bad_lines_missing_workspaces_and_hanging_checks_are_reported_per_task() {
    let env = Env::new();
    let tpl = template(&env);
    // A git repository, used through a worktree per task.
    let repo = env.outside.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("tracked.txt"), "v1\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "one"]);
    let mut script = responses("task-good", 1, "");
    script.extend(responses("task-hang", 1, ""));
    script.extend(responses("task-git", 1, ""));
    script.extend(responses("task-clone", 1, ""));
    let mock = Mock::start(&json!({"responses": script}).to_string());
    let tasks = env.outside.join("tasks.jsonl");
    let marker = env.outside.join("upload-pack-ran");
    write_tasks(
        &tasks,
        &[
            task("task-good", json!(tpl), Some("grep -q done log.txt")).to_string(),
            "{\"id\": \"broken\", \"prompt\": ".to_owned(),
            task("task-nows", json!(env.outside.join("nowhere")), None).to_string(),
            task("task-hang", json!(tpl), Some("sleep 987; true")).to_string(),
            task(
                "task-git",
                json!({"git": repo, "ref": "main"}),
                Some("test -f tracked.txt && grep -q done log.txt"),
            )
            .to_string(),
            json!({"id": "task-noprompt", "workspace": tpl}).to_string(),
            // A URL is cloned (file:// needs no network), then the ref checked out.
            task(
                "task-clone",
                json!({"git": format!("file://{}", repo.display()), "ref": "main"}),
                Some("test -f tracked.txt && test -d .git && grep -q done log.txt"),
            )
            .to_string(),
            // A "URL" that is an option to git is not taken as one.
            task(
                "task-option",
                json!({"git": format!("--upload-pack=touch {}; a@b:c", marker.display())}),
                None,
            )
            .to_string(),
        ],
    );
    let out_dir = env.outside.join("out");
    let started = Instant::now();
    let out = run(&mut batch(
        &env,
        &mock,
        &[
            tasks.to_str().unwrap(),
            "--concurrency",
            "2",
            "--check-timeout",
            "1",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    ));
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(out.code, Some(1), "{out:?}");
    let results = read_results(&out_dir);
    let by_line = |n: u64| {
        results
            .iter()
            .find(|r| r["line"] == n)
            .unwrap_or_else(|| panic!("no result for line {n}: {results:?}"))
    };
    assert_eq!(results.len(), 8);
    assert_eq!(by_line(1)["outcome"], "completed");
    assert_eq!(by_line(1)["check"], "passed");
    let broken = by_line(2);
    assert_eq!(broken["outcome"], "invalid");
    assert!(
        broken["error"]
            .as_str()
            .unwrap()
            .starts_with("line 2: not a JSON object"),
        "{broken}"
    );
    let nows = by_line(3);
    assert_eq!(nows["outcome"], "failed");
    assert!(
        nows["error"]
            .as_str()
            .unwrap()
            .contains("nowhere does not exist"),
        "{nows}"
    );
    let hang = by_line(4);
    assert_eq!(hang["outcome"], "completed");
    assert_eq!(hang["check"], "timeout");
    assert!(
        hang["error"]
            .as_str()
            .unwrap()
            .contains("did not end within 1 s"),
        "{hang}"
    );
    let git_task = by_line(5);
    assert_eq!(git_task["check"], "passed", "{git_task}");
    assert!(git(&repo, &["worktree", "list"]).contains("task-git"));
    assert_eq!(
        git(&repo, &["status", "--porcelain"]),
        "",
        "the repository is untouched"
    );
    let noprompt = by_line(6);
    assert_eq!(noprompt["outcome"], "invalid");
    assert_eq!(noprompt["id"], "task-noprompt");
    assert!(
        noprompt["error"].as_str().unwrap().contains("`prompt`"),
        "{noprompt}"
    );
    let clone = by_line(7);
    assert_eq!(clone["check"], "passed", "{clone}");
    let option = by_line(8);
    assert_eq!(option["outcome"], "failed", "{option}");
    // git was handed it as the repository (which git refuses), not as its --upload-pack.
    let error = option["error"].as_str().unwrap();
    assert!(
        error.contains("git clone failed") && error.contains("'--upload-pack=touch"),
        "{option}"
    );
    assert!(
        !marker.exists(),
        "git ran the task's repository as an option"
    );
    // The hanging check's process group was killed.
    assert!(processes_with("sleep 987").is_empty());
    // A re-run tries the task whose workspace was missing again (it never started), and
    // nothing else.
    std::fs::create_dir_all(env.outside.join("nowhere")).unwrap();
    let before = mock.requests().len();
    let again = run(&mut batch(
        &env,
        &mock,
        &[tasks.to_str().unwrap(), "--out", out_dir.to_str().unwrap()],
    ));
    assert!(
        again.stderr.contains("4 task(s) already done"),
        "{}",
        again.stderr
    );
    let nows = read_results(&out_dir)
        .into_iter()
        .find(|r| r["line"] == 3)
        .unwrap();
    // Its session ran (the script has nothing for it: a model error, reported as such).
    assert_eq!(nows["outcome"], "error", "{nows}");
    assert!(mock.requests().len() > before);
}

#[test]
fn ctrl_c_stops_the_sessions_and_the_same_command_resumes_them() {
    let env = Env::new();
    let tpl = template(&env);
    let ids = ids(6);
    let tasks = env.outside.join("tasks.jsonl");
    let check = "test $(sort log.txt | uniq -d | wc -l) -eq 0 && grep -q done log.txt";
    let mock = step_tasks(&tasks, &tpl, &ids, (6, "sleep 0.2; ", 1), check);
    let out_dir = env.outside.join("out");
    let args = [
        tasks.to_str().unwrap(),
        "--concurrency",
        "3",
        "--out",
        out_dir.to_str().unwrap(),
    ];
    let first = spawn(&mut batch(&env, &mock, &args));
    let deadline = Instant::now() + HANG_GUARD;
    while statuses(&out_dir)
        .iter()
        .filter(|t| t.1 == "running" && t.2.is_some())
        .count()
        < 3
    {
        assert!(Instant::now() < deadline, "hang guard");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    first.signal(libc::SIGINT);
    let stopped = first.wait();
    assert_eq!(stopped.code, Some(130), "{stopped:?}");
    assert!(
        stopped.stderr.contains("interrupted: stopping"),
        "{}",
        stopped.stderr
    );
    let state = statuses(&out_dir);
    assert_eq!(state.len(), 3, "no task started after Ctrl-C: {state:?}");
    assert!(state.iter().all(|t| t.1 == "interrupted"), "{state:?}");
    // Each session was committed with its turn ended, not left open.
    for (_, _, session) in &state {
        let file = env
            .session_files()
            .into_iter()
            .find(|f| f.to_string_lossy().contains(session.as_deref().unwrap()))
            .unwrap();
        let events = load_consistent(&file);
        assert_eq!(turn_end_reasons(&events).len(), 1, "{file:?}");
    }
    let second = run(&mut batch(&env, &mock, &args));
    assert_eq!(second.code, Some(0), "{second:?}");
    let results = read_results(&out_dir);
    assert_eq!(results.len(), 6);
    for r in &results {
        assert_eq!(r["outcome"], "completed", "{r}");
        assert_eq!(r["check"], "passed", "{r}");
    }
    assert_eq!(results.iter().filter(|r| r["turns"] == 2).count(), 3);
}
