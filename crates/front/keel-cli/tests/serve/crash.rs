//! A crash campaign against `keel serve`: one session of many tool steps, the server SIGKILLed at
//! seeded random instants of its turns, started again and the session resumed by a message,
//! killed again, and so on. After every kill, as for the command line (`crash_campaign.rs`):
//! what was on disk is still a prefix of the log, no tool call ran twice, no process a tool
//! started outlived the server, and `keel sessions check` says valid or repairable. At the end
//! an undisturbed server finishes the session and the check says valid.
//!
//! `KEEL_SERVE_CRASH_KILLS` and `KEEL_SERVE_CRASH_SEED` set the number of kills and the seed.

use crate::client::{Server, Sse};
use crate::support::crash::{complete_prefix, processes_in, reruns, script_of};
use crate::support::{Env, Mock, run, session_id};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use std::time::{Duration, Instant};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn a_server_killed_anywhere_in_its_turns_loses_nothing_reruns_nothing_orphans_nothing() {
    let kills = env_or("KEEL_SERVE_CRASH_KILLS", 8);
    let seed = env_or("KEEL_SERVE_CRASH_SEED", 0x7365_7276);
    let mut rng = StdRng::seed_from_u64(seed);
    let env = Env::new();
    let mock = Mock::start(&script_of(usize::try_from(kills).unwrap() * 40 + 50));
    let mut previous: Vec<u8> = Vec::new();
    let mut id: Option<String> = None;
    let (mut lost, mut twice, mut corrupt, mut orphans, mut killed) = (0, 0, 0, 0, 0);

    for k in 0..kills {
        let mut server = Server::start_with(&env, &mock, &["--approval", "auto"]);
        match &id {
            None => id = Some(server.create(&env.ws, "work through the steps")),
            Some(id) => {
                // A message resumes the session (crash repair) and runs a turn.
                let sent = server.call(
                    "POST",
                    &format!("/api/v1/sessions/{id}/messages"),
                    Some(&json!({"text": "continue"})),
                );
                assert_eq!(sent.status, 202, "kill {k}: {}", sent.body);
            }
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..300)));
        // SAFETY: kill(2) on the child we spawned and have not reaped.
        let rc = unsafe { libc::kill(server.child.id() as i32, libc::SIGKILL) };
        let status = server.child.wait().unwrap();
        if rc == 0 && status.code().is_none() {
            killed += 1;
        }
        drop(server);

        // No tool process outlives the server (tools run with their working directory in the
        // workspace; the server does not).
        let deadline = Instant::now() + Duration::from_secs(1);
        let alive = loop {
            let alive = processes_in(&env.ws);
            if alive.is_empty() || Instant::now() >= deadline {
                break alive;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        if !alive.is_empty() {
            eprintln!("kill {k}: alive 1 s after: {alive:?}");
            orphans += alive.len();
            for (pid, _) in alive {
                // SAFETY: kill(2) of a leftover test process.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        // The committed log only grows, and stays valid or repairable.
        let path = env.only_session();
        let now = std::fs::read(&path).unwrap();
        if !now.starts_with(complete_prefix(&previous)) {
            lost += 1;
            eprintln!("kill {k}: the log lost committed records");
        }
        previous = now;
        let check = run(env
            .keel(&mock.base_url())
            .args(["sessions", "check", &session_id(&path)]));
        if !matches!(check.code, Some(0 | 1)) {
            corrupt += 1;
            eprintln!("kill {k}: sessions check: {}", check.stdout);
        }
        let ran_twice = reruns(&env.ws);
        if !ran_twice.is_empty() {
            twice += ran_twice.len();
            eprintln!("kill {k}: ran twice: {ran_twice:?}");
        }
    }

    // An undisturbed server finishes the session (a long one may be compacted first: the
    // summary request gets an answer too) and leaves it valid.
    let last = Mock::start(&format!(
        "responses:\n{}",
        "  - text: \"All steps were run; done.\"\n".repeat(5)
    ));
    let server = Server::start_with(&env, &last, &["--approval", "auto"]);
    let id = id.unwrap();
    let events = format!("/api/v1/sessions/{id}/events");
    let stored = Sse::open(&server, &events, None).rest();
    let last_seq = stored.last().map(|(seq, _)| *seq);
    let sent = server.call(
        "POST",
        &format!("/api/v1/sessions/{id}/messages"),
        Some(&json!({"text": "finish"})),
    );
    assert_eq!(sent.status, 202, "{}", sent.body);
    let mut watch = Sse::open(&server, &events, last_seq);
    watch.until_where(|e| e["type"] == "turn/end" && e["data"]["reason"]["kind"] == "completed");
    drop(server);
    let check = run(env.keel(&last.base_url()).args([
        "sessions",
        "check",
        &session_id(&env.only_session()),
    ]));
    eprintln!("serve crash campaign: seed {seed:#x}, {killed} of {kills} killed mid-run");
    assert_eq!(check.code, Some(0), "final check:\n{}", check.stdout);
    assert_eq!(lost, 0, "the log lost committed records");
    assert_eq!(twice, 0, "tool calls ran twice");
    assert_eq!(corrupt, 0, "a check said corrupt");
    assert_eq!(orphans, 0, "tool processes outlived the server");
    assert!(killed >= kills / 2, "most servers were killed mid-run");
    assert!(
        std::fs::read_to_string(env.ws.join("runs.log"))
            .unwrap_or_default()
            .lines()
            .count()
            > 0
    );
}
