//! How the subprocess service starts a child (`subprocess/spawn.rs`: a vfork-style clone that
//! shares keel's memory until exec): the state the child starts in, how its program is found,
//! and that no child is left behind, whether it fails to start or its run is dropped.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Fixture;
use keel_tools::subprocess::{CommandSpec, OutputMode, SubprocessError};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// `/proc/PID/stat`'s fields after the command name: state, ppid, pgrp, …
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// This process's children that are zombies and whose name starts with `comm`.
fn zombies_named(comm: &str) -> Vec<i32> {
    let me = std::process::id().to_string();
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if let Some(f) = stat_fields(pid)
            && f[0] == "Z"
            && f[1] == me
            && name.trim_end().starts_with(comm)
        {
            out.push(pid);
        }
    }
    out
}

/// A field of `/proc/self/status` as the child printed it.
fn status_field<'a>(status: &'a str, name: &str) -> &'a str {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':')))
        .unwrap_or_else(|| panic!("no {name} in {status}"))
        .trim()
}

#[tokio::test]
async fn a_child_starts_with_default_signals_its_own_group_and_only_its_three_descriptors() {
    let f = Fixture::new();
    let svc = f.service(vec![], &[]);
    let out = svc
        .run(
            CommandSpec::new(["cat", "/proc/self/status"]).stdin(b"ignored".to_vec()),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let status = out.stdout.text();
    assert_eq!(
        status_field(&status, "SigBlk"),
        "0000000000000000",
        "no signal blocked"
    );
    let ignored = u64::from_str_radix(status_field(&status, "SigIgn"), 16).unwrap();
    assert_eq!(
        ignored & (1 << (libc::SIGPIPE - 1)),
        0,
        "SIGPIPE is not ignored (keel ignores it; a child must not inherit that)"
    );
    assert_eq!(
        status_field(&status, "PPid"),
        std::process::id().to_string(),
        "keel's own child"
    );
    // Its own process group, led by itself.
    let pid = status_field(&status, "Pid");
    assert_eq!(status_field(&status, "NSpgid"), pid);

    // Only stdin, stdout and stderr cross the exec (`ls` opens the directory it lists as 3),
    // besides what this test process itself leaves inheritable (a jobserver's pipe): not the
    // pidfd, the reaper's pipe or the other ends of the pipes.
    let mut expected = vec![3];
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let fd: i32 = entry.file_name().to_string_lossy().parse().unwrap();
        // SAFETY: F_GETFD on a descriptor number only reads its flags.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        if fd > 2 && flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
            expected.push(fd);
        }
    }
    expected.sort_unstable();
    expected.dedup();
    let expected: String = [0, 1, 2]
        .into_iter()
        .chain(expected)
        .map(|fd| format!("{fd}\n"))
        .collect();
    let out = svc
        .run(
            CommandSpec::new(["ls", "/proc/self/fd"]).output(OutputMode::Merged),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let mut listed: Vec<i32> = out
        .stdout
        .text()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    listed.sort_unstable();
    let listed: String = listed.iter().map(|fd| format!("{fd}\n")).collect();
    assert_eq!(listed, expected);
}

#[tokio::test]
async fn a_program_is_found_in_the_child_s_path_or_relative_to_its_directory() {
    let f = Fixture::new();
    let bin = f.ws.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let script = bin.join("hello-keel");
    std::fs::write(&script, "#!/bin/sh\necho \"hello $1 from $(pwd)\"\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Not executable: skipped in the search, as execvp(3) does.
    let shadow = f.ws.join("first");
    std::fs::create_dir(&shadow).unwrap();
    std::fs::write(shadow.join("hello-keel"), "#!/bin/sh\necho wrong\n").unwrap();
    let svc = f.service(vec![], &[]);
    let path = format!("{}:{}:/usr/bin:/bin", shadow.display(), bin.display());
    let out = svc
        .run(
            CommandSpec::new(["hello-keel", "world"])
                .env("PATH", &path)
                .cwd(&f.ws),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let ws = f.ws.canonicalize().unwrap();
    assert_eq!(
        out.stdout.text(),
        format!("hello world from {}\n", ws.display())
    );
    assert_eq!(out.code, Some(0));

    // A relative PATH entry and a path with a slash are relative to the child's directory.
    for (program, path) in [("hello-keel", "bin"), ("./bin/hello-keel", "/nowhere")] {
        let out = svc
            .run(
                CommandSpec::new([program, "again"])
                    .env("PATH", path)
                    .cwd(&f.ws),
                &CancellationToken::new(),
            )
            .await
            .unwrap();
        assert_eq!(
            out.stdout.text(),
            format!("hello again from {}\n", ws.display()),
            "{program} with PATH={path}"
        );
    }

    let err = svc
        .run(
            CommandSpec::new(["hello-keel"]).env("PATH", "/nowhere"),
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, SubprocessError::Spawn { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("\"hello-keel\"") && message.contains("No such file"),
        "{message}"
    );
}

#[tokio::test]
async fn a_child_that_cannot_start_is_reaped_and_names_the_reason() {
    let f = Fixture::new();
    let svc = f.service(vec![], &[]);
    // The child fails in its own steps (chdir), after the clone: its errno comes back.
    for _ in 0..5 {
        let err = svc
            .run(
                CommandSpec::new(["true"]).cwd(f.ws.join("no-such-dir")),
                &CancellationToken::new(),
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("No such file"), "{err}");
    }
    // A child that never exec'd carries the name of the thread that started it: this test's.
    let thread = std::thread::current();
    let prefix: String = thread.name().unwrap_or("main").chars().take(15).collect();
    assert_eq!(
        zombies_named(&prefix),
        Vec::<i32>::new(),
        "unreaped children"
    );
}

#[tokio::test]
async fn a_dropped_run_kills_its_child_and_the_next_start_reaps_it() {
    let f = Fixture::new();
    let svc = f.service(vec![], &[]);
    let spec = CommandSpec::new(["sh", "-c", "echo $$ > child.pid; exec sleep 30"]).cwd(&f.ws);
    let never = CancellationToken::new();
    let run = svc.run(spec, &never);
    let pid_file = f.ws.join("child.pid");
    let dropped = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::pin!(run);
        loop {
            tokio::select! {
                _ = &mut run => panic!("sleep 30 ended"),
                () = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
            if std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n')) {
                break; // the run future is dropped here, mid-run
            }
        }
    })
    .await;
    assert!(dropped.is_ok(), "the child never wrote its pid");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Killed at once; reaped by the next start at the latest.
    svc.run(CommandSpec::new(["true"]), &CancellationToken::new())
        .await
        .unwrap();
    let mut gone = false;
    for _ in 0..600 {
        if stat_fields(pid).is_none() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        svc.run(CommandSpec::new(["true"]), &CancellationToken::new())
            .await
            .unwrap();
    }
    assert!(gone, "pid {pid} still exists: {:?}", stat_fields(pid));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_children_started_at_once_from_many_threads_each_get_their_own_arguments() {
    let f = Fixture::new();
    let svc = f.service(vec![], &[]);
    let runs: Vec<_> = (0..64)
        .map(|i| {
            let svc = svc.clone();
            tokio::spawn(async move {
                let spec = CommandSpec::new(
                    [
                        "sh",
                        "-c",
                        "read -r l; echo \"$1 $l $N\"",
                        "sh",
                        &format!("arg{i}"),
                    ]
                    .map(String::from),
                )
                .env("N", format!("env{i}"))
                .stdin(format!("in{i}\n").into_bytes());
                (i, svc.run(spec, &CancellationToken::new()).await)
            })
        })
        .collect();
    for run in runs {
        let (i, out) = run.await.unwrap();
        let out = out.unwrap();
        assert_eq!(out.stdout.text(), format!("arg{i} in{i} env{i}\n"));
        assert_eq!(out.code, Some(0));
    }
}
