//! The `consult` delegation provider: the real consult CLI (v1.x), spawned only through keel's
//! subprocess service (`specs/delegation.md`, "Providers" 1).
//!
//! Built so far: [`run_subcommand`] (argv, env stamping, exit-code mapping, one busy retry),
//! v1 envelope parsing, a lazy memoized preflight (a failure cached for
//! [`PREFLIGHT_RETRY_AFTER`]), `capabilities`, `delegate`, `review`, `status`, `wait`,
//! `result`, `logs`, `cancel`, `steer`, one-shot `events`, and [`watch`] (one `events
//! --follow` per watched job, restarted after it dies, no report delivered twice).
//!
//! [`watch`]: DelegationService::watch

mod envelope;
mod follow;
mod run;

pub use envelope::SCHEMA_VERSION;
pub use follow::MAX_IDLE_RESTARTS;
pub use run::{ConsultConfig, ConsultError, run_subcommand};

use crate::seam::{
    Caller, Capabilities, DelegateMode, DelegateSpec, DelegationError, DelegationEvent,
    DelegationJob, DelegationResult, DelegationService, ErrorCode, EventListener, ReviewSpec,
    SteerOutcome, check_extensions,
};
use async_trait::async_trait;
use keel_tools::subprocess::SubprocessService;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a failed preflight is remembered before it is tried again.
pub const PREFLIGHT_RETRY_AFTER: Duration = Duration::from_secs(30);

/// A source of `Instant`s (injectable so tests can move time).
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now.
    fn now(&self) -> Instant;
}

/// The real clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// What a successful preflight learned.
#[derive(Debug, Clone)]
struct Preflight {
    version: String,
    profiles: Vec<String>,
    default_profile: Option<String>,
    can_steer: bool,
    can_report: bool,
    can_review: bool,
    extensions: BTreeMap<String, String>,
    /// Jobs active at preflight time, with the session that started them.
    active: Vec<(Option<String>, DelegationJob)>,
}

#[derive(Debug, Clone)]
enum Cached {
    Ready(Arc<Preflight>),
    Failed { at: Instant, error: DelegationError },
}

/// The consult provider.
#[derive(Debug)]
pub struct ConsultProvider {
    subprocess: SubprocessService,
    config: ConsultConfig,
    clock: Arc<dyn Clock>,
    preflight: tokio::sync::Mutex<Option<Cached>>,
}

fn args<I: IntoIterator<Item = S>, S: Into<String>>(items: I) -> Vec<String> {
    items.into_iter().map(Into::into).collect()
}

fn not_ready(message: impl Into<String>) -> DelegationError {
    DelegationError::new(ErrorCode::NotReady, message)
}

/// `consult 1.3.0` → `(1, 3, 0)`.
fn parse_version(stdout: &str) -> Option<(u64, u64, u64)> {
    let word = stdout.split_whitespace().last()?.trim_start_matches('v');
    let core = word.split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    Some((
        parts.next()??,
        parts.next()??,
        parts.next().unwrap_or(Some(0))?,
    ))
}

fn extension_meaning(value: &Value) -> String {
    if let Some(values) = value.get("values").and_then(Value::as_array) {
        let words: Vec<&str> = values.iter().filter_map(Value::as_str).collect();
        return words.join("|");
    }
    if let Some(t) = value.get("type").and_then(Value::as_str) {
        return t.to_owned();
    }
    value.to_string()
}

/// The extension keys this provider turns into argv (older builds declare none).
fn default_extensions() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("sandbox".to_owned(), "confined|inherit".to_owned()),
        ("isolated".to_owned(), "boolean".to_owned()),
    ])
}

/// The `sandbox` extension (default `confined`).
fn sandbox_of(extensions: &serde_json::Map<String, Value>) -> Result<&str, DelegationError> {
    match extensions.get("sandbox") {
        None => Ok("confined"),
        Some(Value::String(s)) if s == "confined" || s == "inherit" => Ok(s.as_str()),
        Some(other) => Err(DelegationError::new(
            ErrorCode::Unsupported,
            format!("extension 'sandbox' must be \"confined\" or \"inherit\", not {other}"),
        )),
    }
}

impl ConsultProvider {
    /// A provider running `config.program` through `subprocess`.
    pub fn new(subprocess: SubprocessService, config: ConsultConfig) -> Self {
        Self::with_clock(subprocess, config, Arc::new(SystemClock))
    }

    /// The same, with an injected clock (for the preflight retry window).
    pub fn with_clock(
        subprocess: SubprocessService,
        config: ConsultConfig,
        clock: Arc<dyn Clock>,
    ) -> Self {
        ConsultProvider {
            subprocess,
            config,
            clock,
            preflight: tokio::sync::Mutex::new(None),
        }
    }

    async fn run(&self, caller: &Caller, argv: &[String]) -> Result<String, ConsultError> {
        run_subcommand(
            &self.subprocess,
            &self.config,
            caller,
            argv,
            self.config.timeout,
        )
        .await
    }

    /// One spawn of `consult <argv>` with the default time limit, whatever its exit.
    async fn spawn_once(
        &self,
        caller: &Caller,
        argv: &[String],
    ) -> Result<run::RawRun, ConsultError> {
        run::spawn_once(
            &self.subprocess,
            &self.config,
            caller,
            argv,
            self.config.timeout,
        )
        .await
    }

    /// The memoized preflight: run once on first use; a failure is returned from the cache for
    /// [`PREFLIGHT_RETRY_AFTER`], then tried again.
    async fn preflight(&self, caller: &Caller) -> Result<Arc<Preflight>, DelegationError> {
        let mut cached = self.preflight.lock().await;
        match &*cached {
            Some(Cached::Ready(p)) => return Ok(p.clone()),
            Some(Cached::Failed { at, error })
                if self.clock.now().saturating_duration_since(*at) < PREFLIGHT_RETRY_AFTER =>
            {
                return Err(error.clone());
            }
            _ => {}
        }
        match self.run_preflight(caller).await {
            Ok(p) => {
                let p = Arc::new(p);
                *cached = Some(Cached::Ready(p.clone()));
                Ok(p)
            }
            Err(error) => {
                *cached = Some(Cached::Failed {
                    at: self.clock.now(),
                    error: error.clone(),
                });
                Err(error)
            }
        }
    }

    async fn run_preflight(&self, caller: &Caller) -> Result<Preflight, DelegationError> {
        let failed = |e: ConsultError| {
            let err = not_ready(format!("consult preflight failed: {}", e.headline()));
            match e.stderr() {
                Some(d) => err.with_diagnosis(d),
                None => err,
            }
        };
        let out = self
            .run(caller, &args(["--version"]))
            .await
            .map_err(failed)?;
        let version = parse_version(&out)
            .ok_or_else(|| not_ready(format!("consult --version printed {:?}", out.trim())))?;
        if version.0 != 1 {
            return Err(not_ready(format!(
                "consult {}.{}.{} is not supported (need >=1.0.0 <2.0.0)",
                version.0, version.1, version.2
            )));
        }
        let version_text = format!("{}.{}.{}", version.0, version.1, version.2);

        let doctor_argv = args(["doctor", "--json", "--read-only", "--sandbox", "confined"]);
        let doctor_run = self
            .spawn_once(caller, &doctor_argv)
            .await
            .map_err(failed)?;
        let doctor = envelope::parse::<envelope::Doctor>("doctor", &doctor_run.stdout);
        if doctor_run.exit == Some(0)
            && let Err(e) = doctor
        {
            // A doctor that says nothing keel can trust: name the contract violation.
            return Err(failed(e));
        }
        let doctor = doctor.ok();
        if doctor_run.exit != Some(0) || !doctor.as_ref().is_some_and(|d| d.ok) {
            let problems: Vec<String> = doctor
                .map(|d| {
                    d.checks
                        .into_iter()
                        .filter(|c| !c.ok)
                        .map(|c| format!("{}: {}", c.name, c.message))
                        .collect()
                })
                .unwrap_or_default();
            let diagnosis = if problems.is_empty() {
                doctor_run.stderr.clone()
            } else {
                problems.join("; ")
            };
            return Err(
                not_ready(format!("consult doctor is not ok ({})", doctor_run.how))
                    .with_diagnosis(diagnosis),
            );
        }

        let out = self
            .run(caller, &args(["agents", "--json"]))
            .await
            .map_err(failed)?;
        let agents: envelope::Agents = envelope::parse("agents", &out).map_err(failed)?;
        let default_profile = agents
            .agents
            .iter()
            .find(|a| a.default)
            .map(|a| a.name.clone());
        let profiles = agents
            .agents
            .into_iter()
            .filter(|a| a.available != Some(false))
            .map(|a| a.name)
            .collect();

        let (can_steer, can_report, can_review, extensions) = if (version.0, version.1) >= (1, 2) {
            let out = self
                .run(caller, &args(["capabilities", "--json"]))
                .await
                .map_err(failed)?;
            let caps: envelope::CapabilitiesV1 =
                envelope::parse("capabilities", &out).map_err(failed)?;
            let mut ext: BTreeMap<String, String> = caps
                .extensions
                .iter()
                .map(|(k, v)| (k.clone(), extension_meaning(v)))
                .collect();
            // keel only turns these two into argv.
            ext.retain(|k, _| default_extensions().contains_key(k));
            (
                caps.features.steer,
                caps.features.events,
                caps.features.review,
                ext,
            )
        } else {
            (
                self.probe(caller, "steer").await?,
                self.probe(caller, "events").await?,
                self.probe(caller, "review").await?,
                default_extensions(),
            )
        };

        let out = self
            .run(caller, &args(["status", "--all", "--json"]))
            .await
            .map_err(failed)?;
        let jobs: envelope::Jobs = envelope::parse("status", &out).map_err(failed)?;
        let active = jobs
            .jobs
            .into_iter()
            .map(|j| (j.host_session_id.clone(), j.into_job()))
            .filter(|(_, j)| !j.status.is_final())
            .collect();

        Ok(Preflight {
            version: version_text,
            profiles,
            default_profile,
            can_steer,
            can_report,
            can_review,
            extensions,
            active,
        })
    }

    /// `<sub> --help` on builds without `capabilities`: exit 0 = present, 2 = missing.
    async fn probe(&self, caller: &Caller, sub: &str) -> Result<bool, DelegationError> {
        let argv = args([sub, "--help"]);
        let run = self.spawn_once(caller, &argv).await?;
        match run.exit {
            Some(0) => Ok(true),
            Some(2) => Ok(false),
            _ => Err(
                not_ready(format!("consult {sub} --help failed ({})", run.how))
                    .with_diagnosis(run.stderr),
            ),
        }
    }

    async fn job(&self, caller: &Caller, id: &str) -> Result<DelegationJob, DelegationError> {
        let mut jobs = self.status(caller, Some(id)).await?;
        match jobs.pop() {
            Some(j) if jobs.is_empty() => Ok(j),
            _ => Err(DelegationError::unknown_job(id)),
        }
    }
}

/// `--model`, `--effort` and `--label`, each when given (delegate and review take the same).
fn push_overrides(
    argv: &mut Vec<String>,
    model: &Option<String>,
    effort: &Option<String>,
    label: &Option<String>,
) {
    for (flag, value) in [("--model", model), ("--effort", effort), ("--label", label)] {
        if let Some(v) = value {
            argv.extend(args([flag, v.as_str()]));
        }
    }
}

#[async_trait]
impl DelegationService for ConsultProvider {
    fn name(&self) -> &str {
        "consult"
    }

    async fn capabilities(&self, caller: &Caller) -> Capabilities {
        match self.preflight(caller).await {
            Ok(p) => Capabilities {
                ready: true,
                version: Some(p.version.clone()),
                profiles: p.profiles.clone(),
                default_profile: p.default_profile.clone(),
                can_steer: p.can_steer,
                can_report: p.can_report,
                can_review: p.can_review,
                extensions: p.extensions.clone(),
                diagnosis: None,
                active_from_earlier_sessions: p
                    .active
                    .iter()
                    .filter(|(s, _)| s.as_deref() != Some(caller.session_id.as_str()))
                    .map(|(_, j)| j.clone())
                    .collect(),
            },
            Err(e) => Capabilities {
                ready: false,
                diagnosis: Some(match e.diagnosis.filter(|d| !d.is_empty()) {
                    Some(d) => format!("{}: {d}", e.message),
                    None => e.message,
                }),
                ..Capabilities::default()
            },
        }
    }

    async fn delegate(
        &self,
        caller: &Caller,
        spec: DelegateSpec,
    ) -> Result<DelegationJob, DelegationError> {
        let p = self.preflight(caller).await?;
        let caps = Capabilities {
            extensions: p.extensions.clone(),
            ..Capabilities::default()
        };
        check_extensions(&spec.extensions, &caps)?;
        let sandbox = sandbox_of(&spec.extensions)?;
        let isolated = match spec.extensions.get("isolated") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(DelegationError::new(
                    ErrorCode::Unsupported,
                    format!("extension 'isolated' must be a boolean, not {other}"),
                ));
            }
        };
        let mut argv = args(["delegate", "--background", "--json"]);
        if let Some(profile) = &spec.profile {
            argv.extend(args(["--agent", profile.as_str()]));
        }
        argv.push(match spec.mode {
            DelegateMode::ReadOnly => "--read-only".to_owned(),
            DelegateMode::Write => "--write".to_owned(),
        });
        if isolated {
            argv.push("--isolated".to_owned());
        }
        argv.extend(args(["--sandbox", sandbox]));
        push_overrides(&mut argv, &spec.model, &spec.effort, &spec.label);
        for id in &spec.after {
            argv.extend(args(["--after", id.as_str()]));
        }
        argv.push("--".to_owned());
        argv.push(spec.prompt);
        let out = self.run(caller, &argv).await?;
        let env: envelope::JobEnvelope = envelope::parse("delegate", &out)?;
        Ok(env.job.into_job())
    }

    async fn review(
        &self,
        caller: &Caller,
        spec: ReviewSpec,
    ) -> Result<DelegationResult, DelegationError> {
        let p = self.preflight(caller).await?;
        if !p.can_review {
            return Err(DelegationError::new(
                ErrorCode::ReviewUnsupported,
                format!("consult {} has no review", p.version),
            ));
        }
        let caps = Capabilities {
            extensions: p.extensions.clone(),
            ..Capabilities::default()
        };
        check_extensions(&spec.extensions, &caps)?;
        let sandbox = sandbox_of(&spec.extensions)?;
        let mut argv = args(["review", "--json"]);
        if let Some(profile) = &spec.profile {
            argv.extend(args(["--agent", profile.as_str()]));
        }
        match (&spec.base, &spec.job_id) {
            (Some(_), Some(_)) => {
                return Err(DelegationError::new(
                    ErrorCode::Unsupported,
                    "a review is of a base ref or of a job, not both",
                ));
            }
            (Some(base), None) => argv.extend(args(["--base", base.as_str()])),
            (None, Some(job)) => argv.extend(args(["--job", job.as_str()])),
            (None, None) => {}
        }
        argv.extend(args(["--sandbox", sandbox]));
        push_overrides(&mut argv, &spec.model, &spec.effort, &spec.label);
        // consult has no queued review: this blocks until the findings are in.
        let out = run_subcommand(
            &self.subprocess,
            &self.config,
            caller,
            &argv,
            self.config.review_timeout,
        )
        .await?;
        let env: envelope::JobEnvelope = envelope::parse("review", &out)?;
        Ok(env.into_result())
    }

    async fn status(
        &self,
        caller: &Caller,
        id: Option<&str>,
    ) -> Result<Vec<DelegationJob>, DelegationError> {
        let mut argv = args(["status"]);
        argv.extend(id.map(str::to_owned));
        argv.push("--json".to_owned());
        let out = self.run(caller, &argv).await?;
        let jobs: envelope::Jobs = envelope::parse("status", &out)?;
        Ok(jobs
            .jobs
            .into_iter()
            .map(envelope::JobV1::into_job)
            .collect())
    }

    async fn wait(
        &self,
        caller: &Caller,
        ids: &[String],
        timeout: Duration,
    ) -> Result<Vec<DelegationJob>, DelegationError> {
        let mut argv = args(["wait"]);
        argv.extend(ids.iter().cloned());
        argv.extend(args(["--json", "--keep-running"]));
        let out = run_subcommand(&self.subprocess, &self.config, caller, &argv, timeout)
            .await
            .map_err(|e| match e {
                // The time limit is the caller's, so it is a `timeout`, not a broken consult.
                ConsultError::Internal { how, .. } if how.starts_with("timed out") => {
                    DelegationError::new(ErrorCode::Timeout, format!("consult wait {how}"))
                }
                e => e.into(),
            })?;
        let jobs: envelope::Jobs = envelope::parse("wait", &out)?;
        Ok(jobs
            .jobs
            .into_iter()
            .map(envelope::JobV1::into_job)
            .collect())
    }

    async fn result(&self, caller: &Caller, id: &str) -> Result<DelegationResult, DelegationError> {
        let argv = args(["result", id, "--json"]);
        let run = run::run_retrying(
            &self.subprocess,
            &self.config,
            caller,
            &argv,
            self.config.timeout,
        )
        .await?;
        match run.exit {
            Some(0) => {
                let env: envelope::JobEnvelope = envelope::parse("result", &run.stdout)?;
                Ok(env.into_result())
            }
            Some(6) => {
                // `delegate-failed`; the failed job's envelope (when trusted) gives the diagnosis.
                let err: DelegationError = run::map_exit("result", &run).into();
                let message = envelope::parse::<envelope::JobEnvelope>("result", &run.stdout)
                    .ok()
                    .and_then(|e| e.outcome.error_message);
                Err(match message {
                    Some(m) => err.with_diagnosis(m),
                    None => err,
                })
            }
            _ => Err(run::map_exit("result", &run).into()),
        }
    }

    async fn logs(
        &self,
        caller: &Caller,
        id: &str,
        tail: Option<usize>,
    ) -> Result<String, DelegationError> {
        let mut argv = args(["logs", id]);
        if let Some(n) = tail {
            argv.extend(args(["--tail".to_owned(), n.to_string()]));
        }
        Ok(self.run(caller, &argv).await?)
    }

    async fn cancel(&self, caller: &Caller, id: &str) -> Result<DelegationJob, DelegationError> {
        self.run(caller, &args(["cancel", id])).await?;
        self.job(caller, id).await
    }

    async fn steer(
        &self,
        caller: &Caller,
        id: &str,
        guidance: &str,
    ) -> Result<SteerOutcome, DelegationError> {
        let argv = args(["steer", id, "--message", guidance]);
        // Never retried: a steer that reached the delegate must not arrive twice.
        let run = self.spawn_once(caller, &argv).await?;
        let detail = || {
            if run.stderr.is_empty() {
                format!("consult steer {}", run.how)
            } else {
                run.stderr.clone()
            }
        };
        match run.exit {
            Some(0) => Ok(SteerOutcome::Accepted),
            Some(1) => Ok(SteerOutcome::Unsupported { reason: detail() }),
            Some(3 | 5) => Ok(SteerOutcome::Refused { detail: detail() }),
            _ => Err(run::map_exit("steer", &run).into()),
        }
    }

    async fn events(
        &self,
        caller: &Caller,
        id: &str,
        from_seq: Option<u64>,
    ) -> Result<Vec<DelegationEvent>, DelegationError> {
        let mut argv = args(["events", id, "--json"]);
        if let Some(seq) = from_seq {
            argv.extend(args(["--since".to_owned(), seq.to_string()]));
        }
        let out = self.run(caller, &argv).await?;
        let events: envelope::Events = envelope::parse("events", &out)?;
        let job_id = events.job_id;
        Ok(events
            .events
            .into_iter()
            .filter_map(|e| e.into_event(&job_id))
            .collect())
    }

    fn watch(
        &self,
        caller: &Caller,
        id: &str,
        listener: EventListener,
    ) -> Result<(), DelegationError> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| {
            DelegationError::new(ErrorCode::Internal, "watch needs a tokio runtime")
        })?;
        handle.spawn(follow::follow(
            self.subprocess.clone(),
            self.config.clone(),
            caller.clone(),
            id.to_owned(),
            listener,
        ));
        Ok(())
    }
}
