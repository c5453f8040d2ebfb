//! The `bash` tool and the subprocess service with real child processes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Fixture, call, run_one};
use keel_testkit::recording::{Log, RecordingHost};
use keel_tools::spill::SpillConfig;
use keel_tools::subprocess::{CommandSpec, OutputMode, RunEnd};
use keel_tools::{Pipeline, SandboxMode, Workspace};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// True while `pid` exists and is not a zombie.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits (up to a generous 30 s, polling) for `pid` to be gone; false if it never goes. The
/// bound only keeps a broken kill from hanging the test: the assertion is that it is gone.
async fn wait_dead(pid: i32) -> bool {
    for _ in 0..600 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

fn pid_in(f: &Fixture, name: &str) -> i32 {
    f.read(name).trim().parse().unwrap()
}

/// Waits (up to 30 s, polling) until the script has written a whole line to `path`.
async fn wait_for_line(path: &std::path::Path) {
    for _ in 0..600 {
        if std::fs::read_to_string(path).is_ok_and(|s| s.ends_with('\n')) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{} was never written", path.display());
}

/// Written by a script only if it ran past its long sleep, i.e. nobody stopped it.
const FINISHED: &str = "finished.marker";

#[tokio::test]
async fn output_and_exit_codes() {
    let f = Fixture::new();
    let p = f.pipeline(SandboxMode::WorkspaceWrite);
    let ok = run_one(
        &p,
        call("1", "bash", json!({"command":"echo out; echo err >&2"})),
    )
    .await;
    assert_eq!(ok.text(), "out\nerr\n");
    assert!(!ok.is_error);
    assert_eq!(ok.meta.as_ref().unwrap()["exitCode"], json!(0));

    let fail = run_one(
        &p,
        call("2", "bash", json!({"command":"echo nope; exit 3"})),
    )
    .await;
    assert_eq!(fail.text(), "nope\n[exit code: 3]");
    assert!(
        !fail.is_error,
        "a non-zero exit is a result, not a tool error"
    );

    let quiet = run_one(&p, call("3", "bash", json!({"command":"true"}))).await;
    assert_eq!(quiet.text(), "(no output)");

    f.write("sub/marker", "");
    let wd = run_one(
        &p,
        call("4", "bash", json!({"command":"ls","workdir":"sub"})),
    )
    .await;
    assert_eq!(wd.text(), "marker\n");
    let cwd = run_one(&p, call("5", "bash", json!({"command":"pwd"}))).await;
    assert_eq!(cwd.text().trim_end(), f.ws.display().to_string());
}

#[tokio::test]
async fn environment_is_scrubbed_unless_forwarded() {
    let f = Fixture::new();
    let service = f.service(
        vec![
            ("MY_API_KEY", "k1"),
            ("SOME_TOKEN", "t1"),
            ("DB_PASSWORD", "p1"),
            ("aws_secret_access", "s1"),
            ("GH_TOKEN", "forwarded-value"),
            ("PLAIN_VAR", "visible"),
        ],
        &["GH_TOKEN"],
    );
    let p = Pipeline::builder(
        f.registry(vec![]),
        Workspace::new(&f.ws, SandboxMode::WorkspaceWrite).unwrap(),
    )
    .spill(SpillConfig::new(&f.spill))
    .subprocess(service)
    .build()
    .unwrap();
    let env = run_one(&p, call("1", "bash", json!({"command":"env"})))
        .await
        .text();
    assert!(env.lines().any(|l| l == "PLAIN_VAR=visible"), "{env}");
    assert!(
        env.lines().any(|l| l == "GH_TOKEN=forwarded-value"),
        "{env}"
    );
    for name in [
        "MY_API_KEY",
        "SOME_TOKEN",
        "DB_PASSWORD",
        "aws_secret_access",
    ] {
        assert!(!env.contains(name), "{name} leaked:\n{env}");
    }
    // The values, as whole values (a random temp path may contain "t1").
    for value in ["k1", "t1", "p1", "s1"] {
        assert!(
            !env.lines().any(|l| l.ends_with(&format!("={value}"))),
            "{value} leaked:\n{env}"
        );
    }
}

#[tokio::test]
async fn timeout_kills_the_whole_process_tree() {
    let f = Fixture::new();
    let p = f.pipeline(SandboxMode::WorkspaceWrite);
    let script = "echo started; sleep 300 & echo $! > child.pid; echo $$ > shell.pid; \
                  sleep 30; echo finished > finished.marker";
    let out = run_one(
        &p,
        call("1", "bash", json!({"command": script, "timeout_ms": 500})),
    )
    .await;
    assert!(out.is_error);
    assert_eq!(out.code(), Some("TOOL_TIMEOUT"));
    assert!(
        out.text().contains("ran longer than 500 ms"),
        "{}",
        out.text()
    );
    assert!(
        out.text().contains("started"),
        "tail of output kept: {}",
        out.text()
    );
    let (shell, child) = (pid_in(&f, "shell.pid"), pid_in(&f, "child.pid"));
    assert!(wait_dead(shell).await, "shell {shell} survived");
    assert!(wait_dead(child).await, "grandchild {child} survived");
    assert!(
        !f.ws.join(FINISHED).exists(),
        "the shell ran to its end: the timeout did not stop it"
    );
}

#[tokio::test]
async fn processes_ignoring_sigterm_are_killed_after_the_grace() {
    let f = Fixture::new();
    let p = f.pipeline(SandboxMode::WorkspaceWrite);
    let script = "trap '' TERM; sleep 300 & echo $! > child.pid; echo $$ > shell.pid; sleep 300";
    let out = run_one(
        &p,
        call("1", "bash", json!({"command": script, "timeout_ms": 300})),
    )
    .await;
    assert_eq!(out.code(), Some("TOOL_TIMEOUT"));
    let (shell, child) = (pid_in(&f, "shell.pid"), pid_in(&f, "child.pid"));
    assert!(wait_dead(shell).await, "shell {shell} survived");
    assert!(wait_dead(child).await, "grandchild {child} survived");
}

#[tokio::test]
async fn cancellation_during_bash_kills_the_group() {
    let f = Fixture::new();
    let p = f.pipeline(SandboxMode::WorkspaceWrite);
    let host = RecordingHost::new(Log::default(), false);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    // Cancel once the script is running (it has written both pids).
    let shell_pid = f.ws.join("shell.pid");
    tokio::spawn(async move {
        wait_for_line(&shell_pid).await;
        trigger.cancel();
    });
    let script = "sleep 300 & echo $! > child.pid; echo $$ > shell.pid; \
                  sleep 30; echo finished > finished.marker";
    let out = p
        .run_batch(
            &[call("1", "bash", json!({"command": script}))],
            &host,
            cancel,
        )
        .await;
    assert_eq!(out[0].code(), Some("ABORTED"));
    let (shell, child) = (pid_in(&f, "shell.pid"), pid_in(&f, "child.pid"));
    assert!(wait_dead(shell).await, "shell {shell} survived");
    assert!(wait_dead(child).await, "background child {child} survived");
    assert!(
        !f.ws.join(FINISHED).exists(),
        "the shell ran to its end: cancellation did not stop it"
    );
}

#[tokio::test]
async fn large_output_keeps_the_tail_and_spills_the_whole_stream_privately() {
    let f = Fixture::new();
    let p = f.pipeline(SandboxMode::WorkspaceWrite);
    let out = run_one(&p, call("1", "bash", json!({"command":"seq 1 20000"}))).await;
    let text = out.text();
    let full: String = (1..=20000).map(|i| format!("{i}\n")).collect();
    assert!(
        text.starts_with(
            "[output truncated: showing the last 30000 of 108894 bytes; full output in "
        ),
        "{}",
        &text[..200]
    );
    assert!(text.ends_with("19999\n20000\n"));
    let path = out.meta.as_ref().unwrap()["outputFile"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), full);
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(out.meta.as_ref().unwrap()["outputBytes"], json!(full.len()));
}

#[tokio::test]
async fn background_children_do_not_hold_the_call() {
    let f = Fixture::new();
    let p = f.pipeline(SandboxMode::WorkspaceWrite);
    let out = run_one(
        &p,
        call(
            "1",
            "bash",
            json!({"command":"sleep 30 & echo $! > bg.pid; echo done"}),
        ),
    )
    .await;
    assert_eq!(out.text(), "done\n");
    // The call is back while the background child still runs: had the call waited for it (or
    // for the output pipe it holds), it would be gone by now.
    let bg = pid_in(&f, "bg.pid");
    assert!(
        alive(bg),
        "the background child is gone: the call waited for it, or killed it at a normal exit"
    );
    // SAFETY: plain kill(2) of a process this test started.
    unsafe { libc::kill(bg, libc::SIGKILL) };
}

#[tokio::test]
async fn subprocess_service_runs_argv_with_stdin_and_separate_streams() {
    let f = Fixture::new();
    let svc = f.service(vec![("MY_SECRET", "x")], &[]);
    let spec = CommandSpec::new([
        "sh",
        "-c",
        "cat; echo to-err >&2; echo \"[$MY_SECRET]\"; exit 2",
    ])
    .stdin(b"payload\n".to_vec())
    .cwd(&f.ws);
    let out = svc.run(spec, &CancellationToken::new()).await.unwrap();
    assert_eq!(out.end, RunEnd::Exited);
    assert_eq!(out.code, Some(2));
    assert_eq!(out.stdout.text(), "payload\n[]\n");
    assert_eq!(out.stderr.text(), "to-err\n");

    // argv is never shell-parsed.
    let literal = CommandSpec::new(["echo", "$HOME; rm -rf /"]).output(OutputMode::Merged);
    let out = svc.run(literal, &CancellationToken::new()).await.unwrap();
    assert_eq!(out.stdout.text(), "$HOME; rm -rf /\n");

    let missing = svc
        .run(
            CommandSpec::new(["/no/such/program"]),
            &CancellationToken::new(),
        )
        .await;
    assert!(missing.is_err());
    let empty = svc
        .run(
            CommandSpec::new(Vec::<String>::new()),
            &CancellationToken::new(),
        )
        .await;
    assert!(empty.is_err());
}

#[tokio::test]
async fn subprocess_timeout_reports_timed_out() {
    let f = Fixture::new();
    let svc = f.service(vec![], &[]);
    let spec = CommandSpec::new(["sh", "-c", "sleep 30; echo finished > finished.marker"])
        .cwd(&f.ws)
        .timeout(Duration::from_millis(200));
    let out = svc.run(spec, &CancellationToken::new()).await.unwrap();
    assert_eq!(out.end, RunEnd::TimedOut);
    assert_eq!(out.signal, Some(libc::SIGTERM));
    assert_eq!(out.code, None, "killed, not exited");
    assert!(
        !f.ws.join(FINISHED).exists(),
        "the command ran to its end: the timeout did not stop it"
    );
}

#[tokio::test]
async fn a_long_lived_child_reads_streamed_stdin_and_its_stdout_is_teed_alone() {
    let f = Fixture::new();
    let service = f.service(vec![], &[]);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let sink = {
        let seen = seen.clone();
        keel_tools::subprocess::OutputSink::new(move |b| seen.lock().unwrap().extend_from_slice(b))
    };
    // Echo each stdin line to stdout as it comes, with noise on stderr; stop at "end".
    let script = r#"while read -r l; do echo "err $l" >&2; echo "got $l"; [ "$l" = end ] && exit 0; done; exit 3"#;
    let spec = CommandSpec::new(["sh", "-c", script])
        .stdin_stream(rx)
        .tee_stdout(sink)
        .spill(false)
        .cap(8);
    let run = tokio::spawn({
        let service = service.clone();
        async move { service.run(spec, &CancellationToken::new()).await }
    });
    tx.send(b"one\n".to_vec()).unwrap();
    // The child answers the first line before the second is sent: stdin stays open between.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !String::from_utf8_lossy(&seen.lock().unwrap()).contains("got one") {
        assert!(
            std::time::Instant::now() < deadline,
            "no answer to the first line"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tx.send(b"two\nend\n".to_vec()).unwrap();
    let out = run.await.unwrap().unwrap();
    assert_eq!(out.code, Some(0));
    let teed = String::from_utf8(seen.lock().unwrap().clone()).unwrap();
    assert_eq!(
        teed, "got one\ngot two\ngot end\n",
        "stdout alone, in order"
    );
    // Only the 8-byte tail is kept and nothing spilled.
    assert_eq!(out.stdout.tail, b"got end\n");
    assert!(out.stdout.spill.is_none() && out.stdout.truncated());
    assert!(out.stderr.text().contains("err end"));
}

#[tokio::test]
async fn a_streamed_stdin_closes_when_the_sender_is_dropped() {
    let f = Fixture::new();
    let service = f.service(vec![], &[]);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let spec = CommandSpec::new(["sh", "-c", "cat; echo eof"]).stdin_stream(rx);
    tx.send(b"a\n".to_vec()).unwrap();
    drop(tx);
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        service.run(spec, &CancellationToken::new()),
    )
    .await
    .expect("stdin was never closed")
    .unwrap();
    assert_eq!(out.stdout.text(), "a\neof\n");
}
