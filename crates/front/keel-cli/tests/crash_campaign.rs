//! Crash campaign: the real `keel` binary on a long scripted session, SIGKILLed alone at seeded
//! random instants, resumed (`keel resume --last`), killed again, and so on. After every kill:
//!
//! - what was on disk before is still a prefix of the log (only a torn last record may go);
//! - no tool call ran twice (every command appends its call id to `runs.log`);
//! - no process a tool started outlived keel (every command records its process group, and
//!   leaves a background child behind; none may be left with its working directory in the
//!   workspace);
//! - `keel sessions check` says valid or repairable (never corrupt).
//!
//! At the end a normal resume completes and `sessions check` says valid. The suite runs 20 kills;
//! `bench/crash.sh N [SEED]` runs a long campaign on a release build and prints the figures.
//! `KEEL_CRASH_KILLS` and `KEEL_CRASH_SEED` set the number of kills and the seed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};
use support::crash::{complete_prefix, processes_in, reruns, script_of};
use support::*;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Debug, Default)]
struct Figures {
    kills: u64,
    exited_before_kill: u64,
    alive_after_1s: u64,
    alive_after_5s: u64,
    lost_prefixes: u64,
    reruns: u64,
    corrupt_checks: u64,
    repairable_checks: u64,
    tool_calls_run: usize,
}

#[test]
fn sigkill_campaign_loses_nothing_reruns_nothing_and_orphans_nothing() {
    let kills = env_or("KEEL_CRASH_KILLS", 20);
    let seed = env_or("KEEL_CRASH_SEED", 0x6b65_656c);
    let mut rng = StdRng::seed_from_u64(seed);
    let env = Env::new();
    let mock = Mock::start(&script_of(usize::try_from(kills).unwrap() * 40 + 50));
    let mut fig = Figures::default();
    let mut previous: Vec<u8> = Vec::new();
    let started = Instant::now();

    for k in 0..kills {
        let has_session = !env.session_files().is_empty();
        let mut cmd = env.keel(&mock.base_url());
        cmd.args(["--approval", "auto"]);
        if has_session {
            cmd.args(["resume", "--last", "continue"]);
        } else {
            cmd.args(["run", "work through the steps"]);
        }
        let keel = spawn(&mut cmd);
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..300)));
        // SAFETY: kill(2) on the pid of a child we own; it may have exited (ESRCH is fine).
        let rc = unsafe { libc::kill(keel.pid(), libc::SIGKILL) };
        let out = keel.wait();
        if rc != 0 || out.code.is_some() {
            fig.exited_before_kill += 1;
        } else {
            fig.kills += 1;
        }

        // No tool process outlives keel: none is left with its working directory in the
        // workspace (every tool command and all it starts run there; keel and its reaper do
        // not). Process-group ids are not used here: a finished group's number may have been
        // reused by an unrelated process since it was recorded.
        let alive_at = |t: Duration| {
            let deadline = Instant::now() + t;
            loop {
                let alive = processes_in(&env.ws);
                if alive.is_empty() || Instant::now() >= deadline {
                    return alive;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        let after_1s = alive_at(Duration::from_secs(1));
        fig.alive_after_1s += after_1s.len() as u64;
        if !after_1s.is_empty() {
            eprintln!("kill {k}: alive 1 s after: {after_1s:?}");
            let after_5s = alive_at(Duration::from_secs(4));
            fig.alive_after_5s += after_5s.len() as u64;
            for (pid, _) in after_5s {
                // SAFETY: kill(2) of a leftover test process.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }

        // The committed log only grows.
        if let Some(path) = env.session_files().first() {
            let now = std::fs::read(path).unwrap();
            if !now.starts_with(complete_prefix(&previous)) {
                fig.lost_prefixes += 1;
                eprintln!("kill {k}: the log lost committed records");
            }
            previous = now;
            let check =
                run(env
                    .keel(&mock.base_url())
                    .args(["sessions", "check", &session_id(path)]));
            match check.code {
                Some(0) => {}
                Some(1) => fig.repairable_checks += 1,
                _ => {
                    fig.corrupt_checks += 1;
                    eprintln!("kill {k}: sessions check: {}", check.stdout);
                }
            }
        }
        let twice = reruns(&env.ws);
        if !twice.is_empty() {
            fig.reruns += twice.len() as u64;
            eprintln!("kill {k}: ran twice: {twice:?}");
        }
    }

    fig.tool_calls_run = std::fs::read_to_string(env.ws.join("runs.log"))
        .unwrap_or_default()
        .lines()
        .count();
    eprintln!(
        "crash campaign: seed {seed:#x}, {} s: {fig:?}",
        started.elapsed().as_secs()
    );
    // A last, undisturbed resume ends the session cleanly (the long session may be compacted
    // first: the summary request gets an answer too).
    let last = Mock::start(&format!(
        "responses:\n{}",
        "  - text: \"Steps c0 and on were run; all done.\"\n".repeat(5)
    ));
    let out =
        run(env
            .keel(&last.base_url())
            .args(["--approval", "auto", "resume", "--last", "finish"]));
    assert_eq!(out.code, Some(0), "final resume:\n{}", out.stderr);
    let path = env.only_session();
    let check = run(env
        .keel(&last.base_url())
        .args(["sessions", "check", &session_id(&path)]));
    eprintln!(
        "final resume: exit {:?}; sessions check: exit {:?}",
        out.code, check.code
    );
    assert_eq!(check.code, Some(0), "final check:\n{}", check.stdout);
    assert_eq!(fig.lost_prefixes, 0, "{fig:?}");
    assert_eq!(fig.reruns, 0, "{fig:?}");
    assert_eq!(fig.corrupt_checks, 0, "{fig:?}");
    assert_eq!(
        fig.alive_after_1s, 0,
        "tool processes outlived keel: {fig:?}"
    );
    assert!(fig.kills >= kills / 2, "most segments were killed: {fig:?}");
    assert!(fig.tool_calls_run > 0, "{fig:?}");
}
