//! The consult provider against the REAL `fake-consult` executable, spawned through keel's real
//! subprocess service: exit-code mapping, envelope versions, argv/env stamping, preflight
//! memoization and its retry window, steer outcomes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use keel_delegate::consult::{
    Clock, ConsultConfig, ConsultError, ConsultProvider, PREFLIGHT_RETRY_AFTER, run_subcommand,
};
use keel_delegate::seam::{
    Caller, DelegateMode, DelegateSpec, DelegationService, ErrorCode, RunStatus, SteerOutcome,
};
use keel_testkit::consult::{FakeConsult, fake_consult_path, invocations, read_record, steers};
use keel_tools::subprocess::{SubprocessConfig, SubprocessService};
use pretty_assertions::assert_eq;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SECRET: &str = "CONSULT_API_TOKEN";

struct Fx {
    dir: tempfile::TempDir,
    scenario: FakeConsult,
    forward: Vec<String>,
    data_dir: Option<PathBuf>,
}

impl Fx {
    fn new(scenario: FakeConsult) -> Self {
        Fx {
            dir: tempfile::tempdir().unwrap(),
            scenario,
            forward: Vec::new(),
            data_dir: None,
        }
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn record(&self) -> PathBuf {
        self.dir.path().join("record.jsonl")
    }

    fn service(&self) -> SubprocessService {
        let mut base_env: Vec<(std::ffi::OsString, std::ffi::OsString)> = self
            .scenario
            .clone()
            .state_dir(self.state())
            .record(self.record())
            .env()
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        // A credential (scrubbed unless forwarded) and an attempt to spoof the host session.
        base_env.push((SECRET.into(), "s3cret".into()));
        base_env.push(("CONSULT_HOST_SESSION_ID".into(), "spoofed".into()));
        base_env.push(("CONSULT_HOST".into(), "spoofed".into()));
        SubprocessService::new(SubprocessConfig {
            base_env,
            forward: self.forward.clone(),
            grace: Duration::from_millis(200),
            spill_dir: self.dir.path().join("spill"),
        })
    }

    fn config(&self) -> ConsultConfig {
        ConsultConfig {
            program: fake_consult_path().unwrap(),
            data_dir: self.data_dir.clone(),
            timeout: Duration::from_secs(30),
            review_timeout: Duration::from_secs(30),
        }
    }

    fn provider(&self) -> ConsultProvider {
        ConsultProvider::new(self.service(), self.config())
    }

    fn caller(&self) -> Caller {
        Caller {
            session_id: "sess-A".into(),
            cwd: self.dir.path().to_path_buf(),
        }
    }

    async fn run(&self, argv: &[&str]) -> Result<String, ConsultError> {
        let argv: Vec<String> = argv.iter().map(|s| (*s).to_owned()).collect();
        run_subcommand(
            &self.service(),
            &self.config(),
            &self.caller(),
            &argv,
            Duration::from_secs(30),
        )
        .await
    }

    fn count(&self, sub: &str) -> u64 {
        invocations(&self.state(), sub)
    }
}

fn spec(prompt: &str) -> DelegateSpec {
    DelegateSpec {
        prompt: prompt.into(),
        ..DelegateSpec::default()
    }
}

#[tokio::test]
async fn exit_codes_map_as_the_spec_says() {
    // (scenario, expected code, expected status invocations)
    let rows: Vec<(FakeConsult, ErrorCode, u64)> = vec![
        (FakeConsult::new().exit("status", 3), ErrorCode::Busy, 2),
        (FakeConsult::new().exit("status", 4), ErrorCode::Timeout, 1),
        (FakeConsult::new().exit("status", 5), ErrorCode::NotFinal, 1),
        (
            FakeConsult::new().exit("status", 6),
            ErrorCode::DelegateFailed,
            1,
        ),
        (
            FakeConsult::new().exit("status", 8),
            ErrorCode::ReviewUnsupported,
            1,
        ),
        (
            FakeConsult::new()
                .exit("status", 2)
                .stderr("status", "unknown job: job-9"),
            ErrorCode::UnknownJob,
            1,
        ),
        (
            FakeConsult::new()
                .exit("status", 2)
                .stderr("status", "consult: job not found: x"),
            ErrorCode::UnknownJob,
            1,
        ),
        (FakeConsult::new().exit("status", 2), ErrorCode::Internal, 1),
        (FakeConsult::new().exit("status", 1), ErrorCode::Internal, 1),
        (
            FakeConsult::new().exit("status", 42),
            ErrorCode::Internal,
            1,
        ),
        (
            FakeConsult::new().exit("status", 143),
            ErrorCode::Internal,
            1,
        ),
    ];
    for (scenario, want, spawns) in rows {
        let label = format!("{scenario:?}");
        let fx = Fx::new(scenario);
        let err = fx.run(&["status", "--json"]).await.unwrap_err();
        assert_eq!(err.code(), want, "{label}: {err}");
        assert_eq!(err.subcommand(), "status", "{label}");
        assert_eq!(fx.count("status"), spawns, "{label}");
    }
    // Exit 2 without an unknown job is an infrastructure (usage) error, typed apart.
    let fx = Fx::new(FakeConsult::new().exit("status", 2));
    assert!(matches!(
        fx.run(&["status", "--json"]).await.unwrap_err(),
        ConsultError::Usage { .. }
    ));
    // A real unknown job id: the fake's own `job not found: <id>`, exit 2.
    let fx = Fx::new(FakeConsult::new());
    let err = fx
        .provider()
        .result(&fx.caller(), "job-404")
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::UnknownJob, "{err}");
    // Busy once, then served: the one retry succeeds.
    let fx = Fx::new(FakeConsult::new().fail_first("status", 1, 3));
    fx.run(&["status", "--json"]).await.unwrap();
    assert_eq!(fx.count("status"), 2);
}

#[tokio::test]
async fn a_signal_is_internal() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("consult");
    std::fs::write(&script, "#!/bin/sh\nkill -9 $$\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let svc = SubprocessService::new(SubprocessConfig {
        base_env: Vec::new(),
        forward: Vec::new(),
        grace: Duration::from_millis(200),
        spill_dir: dir.path().join("spill"),
    });
    let config = ConsultConfig {
        program: script,
        ..ConsultConfig::default()
    };
    let caller = Caller {
        session_id: "s".into(),
        cwd: dir.path().to_path_buf(),
    };
    let err = run_subcommand(
        &svc,
        &config,
        &caller,
        &["status".into()],
        Duration::from_secs(10),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Internal, "{err}");
    assert!(err.to_string().contains("signal 9"), "{err}");
}

#[tokio::test]
async fn only_schema_version_1_envelopes_are_trusted() {
    let fx = Fx::new(FakeConsult::new().schema_version(2));
    let err = fx.run(&["status", "--json"]).await.unwrap(); // the raw run succeeds…
    assert!(err.contains("\"schemaVersion\":2"));
    let e = fx.provider().status(&fx.caller(), None).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Internal);
    assert!(
        e.message.contains("consult status") && e.message.contains("schemaVersion 2"),
        "{e}"
    );

    let fx = Fx::new(FakeConsult::new().bad_json("status"));
    let e = fx.provider().status(&fx.caller(), None).await.unwrap_err();
    assert!(
        e.message.contains("consult status") && e.message.contains("not JSON"),
        "{e}"
    );

    // Unknown statuses are kept raw; unknown fields (hostSessionId, prompt…) are ignored.
    let fx = Fx::new(FakeConsult::new().status("exploded"));
    let p = fx.provider();
    let job = p.delegate(&fx.caller(), spec("x")).await.unwrap();
    let jobs = p.status(&fx.caller(), Some(&job.id)).await.unwrap();
    assert_eq!(jobs[0].status, RunStatus::Unknown);
    assert_eq!(jobs[0].raw_status.as_deref(), Some("exploded"));
}

#[tokio::test]
async fn argv_and_env_are_keel_authored_and_stamped() {
    let mut fx = Fx::new(FakeConsult::new());
    fx.data_dir = Some(fx.dir.path().join("data"));
    let p = fx.provider();
    let mut s = spec("fix the bug");
    s.profile = Some("codex".into());
    s.mode = DelegateMode::Write;
    s.model = Some("m1".into());
    s.effort = Some("high".into());
    s.label = Some("lbl".into());
    s.after = vec!["job-7".into(), "job-8".into()];
    s.extensions
        .insert("isolated".into(), serde_json::json!(true));
    s.extensions
        .insert("sandbox".into(), serde_json::json!("inherit"));
    // The fake refuses unknown --after ids, so only the argv matters here.
    let _ = p.delegate(&fx.caller(), s).await;
    let record = read_record(&fx.record()).unwrap();
    let delegate = record.iter().find(|i| i.argv[0] == "delegate").unwrap();
    assert_eq!(
        delegate.argv.join(" "),
        "delegate --background --json --agent codex --write --isolated --sandbox inherit \
         --model m1 --effort high --label lbl --after job-7 --after job-8 -- fix the bug"
    );
    for inv in &record {
        assert_eq!(
            inv.env.get("CONSULT_HOST").map(String::as_str),
            Some("keel")
        );
        assert_eq!(
            inv.env.get("CONSULT_HOST_SESSION_ID").map(String::as_str),
            Some("sess-A"),
            "{:?}",
            inv.argv
        );
        assert_eq!(
            inv.env.get("CONSULT_DATA_DIR").map(PathBuf::from),
            fx.data_dir.clone()
        );
        assert!(
            !inv.env.contains_key(SECRET),
            "secret leaked to {:?}",
            inv.argv
        );
        assert_eq!(inv.cwd, fx.dir.path());
    }
    // The preflight ran first, with its own argv.
    let argvs: Vec<String> = record.iter().map(|i| i.argv.join(" ")).collect();
    assert_eq!(
        &argvs[..5],
        &[
            "--version",
            "doctor --json --read-only --sandbox confined",
            "agents --json",
            "capabilities --json",
            "status --all --json",
        ]
    );

    // Forwarded: the credential reaches consult; the stamps still win.
    let mut fx = Fx::new(FakeConsult::new());
    fx.forward = vec![SECRET.into()];
    fx.run(&["status", "--json"]).await.unwrap();
    let record = read_record(&fx.record()).unwrap();
    assert_eq!(
        record[0].env.get(SECRET).map(String::as_str),
        Some("s3cret")
    );
    assert_eq!(
        record[0]
            .env
            .get("CONSULT_HOST_SESSION_ID")
            .map(String::as_str),
        Some("sess-A")
    );
    assert!(!record[0].env.contains_key("CONSULT_DATA_DIR"));
}

#[tokio::test]
async fn delegate_status_result_logs_cancel() {
    let fx = Fx::new(
        FakeConsult::new()
            .final_text("the answer")
            .touched_files(["a.rs"]),
    );
    let p = fx.provider();
    let c = fx.caller();
    let job = p.delegate(&c, spec("q")).await.unwrap();
    assert_eq!(job.id, "job-1");
    let r = p.result(&c, &job.id).await.unwrap();
    assert_eq!(r.job.status, RunStatus::Completed);
    assert_eq!(r.final_text.as_deref(), Some("the answer"));
    assert_eq!(r.artifacts.touched_files, vec!["a.rs".to_owned()]);
    assert!(r.artifacts.log_path.is_some());
    assert_eq!(r.job.mode, Some(DelegateMode::ReadOnly));
    let logs = p.logs(&c, &job.id, Some(1)).await.unwrap();
    assert_eq!(logs, "[job-1] log line 3\n");
    let mine = p.status(&c, None).await.unwrap();
    assert_eq!(mine.len(), 1);
    let done = p
        .wait(&c, std::slice::from_ref(&job.id), Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(done[0].status, RunStatus::Completed);

    let fx = Fx::new(FakeConsult::new().run_ms(60_000));
    let p = fx.provider();
    let job = p.delegate(&c_of(&fx), spec("slow")).await.unwrap();
    let e = p.result(&c_of(&fx), &job.id).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFinal);
    let e = p
        .wait(
            &c_of(&fx),
            std::slice::from_ref(&job.id),
            Duration::from_millis(500),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Timeout, "{e}");
    let cancelled = p.cancel(&c_of(&fx), &job.id).await.unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled);

    let fx = Fx::new(FakeConsult::new().status("failed").error_message("boom"));
    let p = fx.provider();
    let job = p.delegate(&c_of(&fx), spec("f")).await.unwrap();
    let e = p.result(&c_of(&fx), &job.id).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::DelegateFailed, "{e}");
}

fn c_of(fx: &Fx) -> Caller {
    fx.caller()
}

#[derive(Debug)]
struct ManualClock(Mutex<Instant>);

impl ManualClock {
    fn advance(&self, by: Duration) {
        let mut t = self.0.lock().unwrap();
        *t += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        *self.0.lock().unwrap()
    }
}

#[tokio::test]
async fn preflight_is_memoized_and_a_failure_is_cached_30s() {
    let fx = Fx::new(FakeConsult::new());
    let p = fx.provider();
    let caps = p.capabilities(&fx.caller()).await;
    assert!(caps.ready, "{caps:?}");
    assert_eq!(caps.version.as_deref(), Some("1.3.0"));
    assert_eq!(caps.default_profile.as_deref(), Some("claude"));
    assert!(caps.can_steer && caps.can_report);
    assert_eq!(
        caps.extensions.keys().cloned().collect::<Vec<_>>(),
        vec!["isolated".to_owned(), "sandbox".to_owned()]
    );
    p.capabilities(&fx.caller()).await;
    p.delegate(&fx.caller(), spec("x")).await.unwrap();
    for sub in ["version", "doctor", "agents", "capabilities"] {
        assert_eq!(fx.count(sub), 1, "{sub}");
    }

    let fx = Fx::new(FakeConsult::new().doctor_fail_first(1));
    let clock = Arc::new(ManualClock(Mutex::new(Instant::now())));
    let p = ConsultProvider::with_clock(fx.service(), fx.config(), clock.clone());
    let caps = p.capabilities(&fx.caller()).await;
    assert!(!caps.ready);
    let diagnosis = caps.diagnosis.unwrap();
    assert!(
        diagnosis.contains("agent is not authenticated"),
        "{diagnosis}"
    );
    let e = p.delegate(&fx.caller(), spec("x")).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotReady);
    clock.advance(PREFLIGHT_RETRY_AFTER - Duration::from_secs(1));
    assert!(!p.capabilities(&fx.caller()).await.ready);
    assert_eq!(fx.count("doctor"), 1, "the failure is cached");
    assert_eq!(fx.count("delegate"), 0);
    clock.advance(Duration::from_secs(2));
    assert!(p.capabilities(&fx.caller()).await.ready);
    assert_eq!(fx.count("doctor"), 2);
    assert_eq!(fx.count("version"), 2);
}

#[tokio::test]
async fn preflight_versions_and_older_builds() {
    for v in ["2.0.0", "0.9.1"] {
        let fx = Fx::new(FakeConsult::new().version(v));
        let caps = fx.provider().capabilities(&fx.caller()).await;
        assert!(!caps.ready, "{v}");
        assert!(caps.diagnosis.unwrap().contains("not supported"), "{v}");
        assert_eq!(fx.count("doctor"), 0);
    }
    let fx = Fx::new(FakeConsult::new().version_exit(1));
    assert!(!fx.provider().capabilities(&fx.caller()).await.ready);

    // 1.1: no `capabilities`; `steer --help` / `events --help` probe the features.
    let fx = Fx::new(FakeConsult::new().version("1.1.0").missing("steer"));
    let caps = fx.provider().capabilities(&fx.caller()).await;
    assert!(caps.ready, "{caps:?}");
    assert!(!caps.can_steer && caps.can_report);
    assert_eq!(fx.count("capabilities"), 0);
    assert_eq!((fx.count("steer"), fx.count("events")), (1, 1));
}

#[tokio::test]
async fn active_jobs_of_earlier_sessions_are_surfaced() {
    let fx = Fx::new(FakeConsult::new().run_ms(60_000));
    let other = Caller {
        session_id: "sess-OLD".into(),
        cwd: fx.dir.path().to_path_buf(),
    };
    let old = ConsultProvider::new(fx.service(), fx.config());
    let job = old.delegate(&other, spec("long")).await.unwrap();
    let caps = fx.provider().capabilities(&fx.caller()).await;
    assert_eq!(caps.active_from_earlier_sessions.len(), 1);
    assert_eq!(caps.active_from_earlier_sessions[0].id, job.id);
}

#[tokio::test]
async fn steer_outcomes_are_never_retried() {
    let fx = Fx::new(FakeConsult::new().run_ms(60_000));
    let p = fx.provider();
    let c = fx.caller();
    let job = p.delegate(&c, spec("s")).await.unwrap();
    assert_eq!(
        p.steer(&c, &job.id, "look at b.rs").await.unwrap(),
        SteerOutcome::Accepted
    );
    assert_eq!(
        steers(&fx.state(), &job.id),
        vec!["look at b.rs".to_owned()]
    );
    let e = p.steer(&c, "job-404", "x").await.unwrap_err();
    assert_eq!(e.code, ErrorCode::UnknownJob);

    let fx = Fx::new(FakeConsult::new());
    let p = fx.provider();
    let job = p.delegate(&fx.caller(), spec("done")).await.unwrap();
    let out = p.steer(&fx.caller(), &job.id, "too late").await.unwrap();
    assert!(matches!(out, SteerOutcome::Refused { .. }), "{out:?}");

    for (code, want_unsupported) in [(1, true), (3, false), (5, false)] {
        let fx = Fx::new(FakeConsult::new().exit("steer", code));
        let out = fx
            .provider()
            .steer(&fx.caller(), "job-1", "g")
            .await
            .unwrap();
        match out {
            SteerOutcome::Unsupported { .. } => assert!(want_unsupported, "{code}"),
            SteerOutcome::Refused { .. } => assert!(!want_unsupported, "{code}"),
            SteerOutcome::Accepted => panic!("exit {code} accepted"),
        }
        assert_eq!(fx.count("steer"), 1, "exit {code} must not be retried");
    }
    let fx = Fx::new(FakeConsult::new().exit("steer", 6));
    let e = fx
        .provider()
        .steer(&fx.caller(), "job-1", "g")
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::DelegateFailed);
}

#[tokio::test]
async fn events_are_read_once() {
    let fx = Fx::new(
        FakeConsult::new()
            .run_ms(60_000)
            .event("blocked", "need a key")
            .event("progress", "half way"),
    );
    let p = fx.provider();
    let job = p.delegate(&fx.caller(), spec("e")).await.unwrap();
    let events = p.events(&fx.caller(), &job.id, None).await.unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].urgency, keel_delegate::seam::Urgency::Wake);
    let later = p.events(&fx.caller(), &job.id, Some(1)).await.unwrap();
    assert_eq!(later.len(), 1);
    assert_eq!(later[0].message, "half way");
}

#[tokio::test]
async fn review_blocks_for_findings_and_maps_exit_8() {
    use keel_delegate::seam::ReviewSpec;
    let fx = Fx::new(FakeConsult::new().review_text("1. [major] off by one"));
    let p = fx.provider();
    let caps = p.capabilities(&fx.caller()).await;
    assert!(caps.can_review);
    let r = p
        .review(
            &fx.caller(),
            ReviewSpec {
                base: Some("main".into()),
                profile: Some("codex".into()),
                ..ReviewSpec::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(r.job.kind.as_deref(), Some("review"));
    assert_eq!(r.final_text.as_deref(), Some("1. [major] off by one"));
    let record = read_record(&fx.record()).unwrap();
    let argv = record.iter().find(|i| i.argv[0] == "review").unwrap();
    assert_eq!(
        argv.argv.join(" "),
        "review --json --agent codex --base main --sandbox confined"
    );

    let fx = Fx::new(FakeConsult::new().exit("review", 8));
    let e = fx
        .provider()
        .review(&fx.caller(), ReviewSpec::default())
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::ReviewUnsupported, "{e}");

    let fx = Fx::new(FakeConsult::new().missing("review"));
    let p = fx.provider();
    assert!(!p.capabilities(&fx.caller()).await.can_review);
    let e = p
        .review(&fx.caller(), ReviewSpec::default())
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::ReviewUnsupported);
    assert_eq!(fx.count("review"), 0);
}

#[tokio::test]
async fn a_failed_result_is_delegate_failed_with_its_error_message() {
    let fx = Fx::new(
        FakeConsult::new()
            .status("failed")
            .error_message("ran out of disk"),
    );
    let p = fx.provider();
    let job = p.delegate(&fx.caller(), spec("f")).await.unwrap();
    let e = p.result(&fx.caller(), &job.id).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::DelegateFailed);
    assert_eq!(e.diagnosis.as_deref(), Some("ran out of disk"));
}

fn collector() -> (
    Arc<Mutex<Vec<keel_delegate::seam::DelegationEvent>>>,
    keel_delegate::seam::EventListener,
) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let sink = got.clone();
    (got, Arc::new(move |e| sink.lock().unwrap().push(e)))
}

async fn settle(what: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !what() {
        assert!(Instant::now() < deadline, "timed out waiting");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn follow_restarts_after_dying_without_duplicates_or_losses() {
    let fx = Fx::new(
        FakeConsult::new()
            .run_ms(1_500)
            .event("blocked", "need a key")
            .event("progress", "half way")
            .event("discovery", "found it")
            .follow_die_after(1)
            .follow_die_times(2),
    );
    let p = fx.provider();
    let job = p.delegate(&fx.caller(), spec("f")).await.unwrap();
    let (got, listener) = collector();
    p.watch(&fx.caller(), &job.id, listener).unwrap();
    settle(|| got.lock().unwrap().len() >= 3).await;
    // The third follow ends by itself once the job is final.
    settle(|| {
        read_record(&fx.record())
            .unwrap()
            .iter()
            .filter(|i| i.argv.iter().any(|a| a == "--follow"))
            .count()
            == 3
    })
    .await;
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let got = got.lock().unwrap();
    let seqs: Vec<Option<u64>> = got.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![Some(1), Some(2), Some(3)]);
    assert_eq!(got[0].urgency, keel_delegate::seam::Urgency::Wake);
    let follows: Vec<String> = read_record(&fx.record())
        .unwrap()
        .iter()
        .filter(|i| i.argv.iter().any(|a| a == "--follow"))
        .map(|i| i.argv.join(" "))
        .collect();
    assert_eq!(
        follows,
        vec![
            "events job-1 --json --follow".to_owned(),
            "events job-1 --json --follow --since 1".to_owned(),
            "events job-1 --json --follow --since 2".to_owned(),
        ]
    );
}

#[tokio::test]
async fn follow_restarts_without_progress_are_capped() {
    let fx = Fx::new(FakeConsult::new().run_ms(60_000).exit("events", 4));
    let p = fx.provider();
    let job = p.delegate(&fx.caller(), spec("f")).await.unwrap();
    let (got, listener) = collector();
    p.watch(&fx.caller(), &job.id, listener).unwrap();
    let want = 1 + u64::from(keel_delegate::consult::MAX_IDLE_RESTARTS);
    settle(|| fx.count("events") >= want).await;
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert_eq!(fx.count("events"), want);
    assert!(got.lock().unwrap().is_empty());
}
