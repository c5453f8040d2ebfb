//! The `keel` provider: the delegate is another `keel run --json` process in its own session.
//!
//! ```text
//! delegate ─► [write] git stash create / worktree add --detach  (an isolated copy)
//!          └► keel run --json --inbox-stdin --delegated-from SUPERVISOR <model route> -- PROMPT
//!               stdout (session records) ─► Stream: session id, log lines, the answer, acks
//!               stdin  ◄─ {"steer": TEXT}            (delegate_steer)
//!          exit ─► [write] git add -A; git diff --cached BASE ─► changes.patch; worktree removed
//!               ─► job.json (the result, read back after the supervisor resumes)
//! ```
//!
//! Authority: `read-only` runs in the caller's workspace under `--sandbox read-only` (commands
//! run without asking where the kernel confines them — Landlock — and are refused elsewhere); `write` runs only inside an isolated git worktree of the caller's
//! repository (its tracked changes included) under `--sandbox workspace-write --approval allow`,
//! and the caller gets a patch, never a changed workspace. The model route and its credential
//! come from the supervisor ([`ModelLaunch`]) and are passed on the spawn itself; nothing else of
//! the supervisor's secrets reaches the delegate (the subprocess service scrubs them).
//!
//! Every job keeps its files under `$KEEL_HOME/delegations/<supervisor session>/<job id>/`:
//! `log.txt` (one line per tool call, result and answer, bounded), `changes.patch`, `job.json`.

mod stream;
pub(crate) mod workspace;

use crate::seam::{
    Caller, Capabilities, DelegateMode, DelegateSpec, DelegationError, DelegationResult, ErrorCode,
    ReviewSpec, RunStatus, SteerOutcome, check_extensions,
};
use crate::table::{self, Ending, JobLog, Provider, TAIL_LINES, Table};
use async_trait::async_trait;
use keel_agent::plugin::{ModelLaunch, ProjectTrust};
use keel_tools::subprocess::{CommandSpec, OutputSink, RunEnd, SubprocessService};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use stream::Stream;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// The variable a delegate is started with: its delegation depth (the supervisor's + 1).
pub const DEPTH_ENV: &str = "KEEL_DELEGATION_DEPTH";

/// This process's delegation depth, from [`DEPTH_ENV`] (0 when unset or unreadable).
pub fn current_depth() -> u32 {
    std::env::var(DEPTH_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// How long a steer waits for the delegate to show the guidance in its inbox.
const STEER_ACK: Duration = Duration::from_secs(10);

/// Configuration of a [`KeelProvider`].
#[derive(Debug, Clone)]
pub struct KeelConfig {
    /// The keel executable (the running one by default).
    pub program: PathBuf,
    /// How the delegate reaches the supervisor's model; `None` makes the provider not ready.
    pub launch: Option<ModelLaunch>,
    /// `$KEEL_HOME` (job files go under `delegations/`).
    pub home: PathBuf,
    /// Wall-time limit of one delegation.
    pub time_limit: Duration,
    /// Bytes of `log.txt` per job (later lines are counted, not written).
    pub max_log_bytes: u64,
    /// The supervisor's decision about its workspace, handed to the delegate
    /// (`--project-trust`): a delegate in a worktree never decides on its own.
    pub project_trust: ProjectTrust,
}

impl KeelConfig {
    /// The running executable, `launch`, `home`, a one-hour limit, 8 MiB of log.
    pub fn new(launch: Option<ModelLaunch>, home: PathBuf) -> Self {
        KeelConfig {
            program: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("keel")),
            launch,
            home,
            time_limit: Duration::from_secs(3600),
            max_log_bytes: 8 << 20,
            project_trust: ProjectTrust::Untrusted,
        }
    }
}

/// What the keel provider keeps of a delegation beside the table's part.
pub(crate) struct Own {
    /// The delegate's stdin while it runs (steering).
    stdin: Option<mpsc::UnboundedSender<Vec<u8>>>,
    /// Its stdout, read.
    stream: Arc<Stream>,
}

impl JobLog for Own {
    fn tail(&self, n: Option<usize>) -> String {
        self.stream.tail(n)
    }
}

/// The keel provider (see the module docs).
pub struct KeelProvider {
    subprocess: SubprocessService,
    config: KeelConfig,
    depth: u32,
    jobs: Table<Own>,
}

impl std::fmt::Debug for KeelProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeelProvider")
            .field("program", &self.config.program)
            .field("launch", &self.config.launch)
            .finish()
    }
}

fn err(code: ErrorCode, message: impl Into<String>) -> DelegationError {
    DelegationError::new(code, message)
}

impl KeelProvider {
    /// A provider running `config.program` through `subprocess`. Its own delegation depth is
    /// read from [`DEPTH_ENV`] (0 when unset): its delegates run one deeper.
    pub fn new(subprocess: SubprocessService, config: KeelConfig) -> Self {
        let depth = current_depth();
        let jobs = Table::new("keel", config.home.clone());
        KeelProvider {
            subprocess,
            config,
            depth,
            jobs,
        }
    }

    fn not_ready(&self) -> Option<String> {
        if self.config.launch.is_none() {
            return Some(
                "this agent's model lives only in its own process (an embedded provider); a keel \
                 delegate needs a configured endpoint or a --script file"
                    .into(),
            );
        }
        None
    }

    /// Start `spec` as a new job of `kind` (shared by delegate and review).
    async fn launch(
        &self,
        caller: &Caller,
        spec: &DelegateSpec,
        kind: &str,
    ) -> Result<(String, watch::Receiver<bool>), DelegationError> {
        if let Some(why) = self.not_ready() {
            return Err(err(ErrorCode::NotReady, why));
        }
        // The keel provider declares no extension keys: any key is rejected by name.
        check_extensions(&spec.extensions, &Capabilities::default())?;
        if spec.effort.is_some() {
            return Err(err(
                ErrorCode::Unsupported,
                "the keel provider has no reasoning-effort setting (leave `effort` out)",
            ));
        }
        if let Some(p) = &spec.profile
            && p != "default"
            && !profiles(&self.config.home).contains(p)
        {
            return Err(err(
                ErrorCode::Unsupported,
                format!(
                    "no keel profile '{p}' (profiles: {})",
                    profiles(&self.config.home).join(", ")
                ),
            ));
        }
        let after_finals = self.jobs.finals(caller, &spec.after)?;
        let profile = spec.profile.clone().unwrap_or_else(|| "default".into());
        let (id, dir, result) = self
            .jobs
            .open(caller, spec, kind, profile, self.depth + 1)?;
        let (stdin_tx, stdin_rx) = mpsc::unbounded_channel();
        let stream = Arc::new(Stream::new(
            dir.join("log.txt"),
            self.config.max_log_bytes,
            TAIL_LINES,
        ));
        let job = table::Job::new(
            caller,
            result,
            Own {
                stdin: Some(stdin_tx),
                stream: stream.clone(),
            },
        );
        let final_rx = job.final_tx.subscribe();
        let cancel = job.cancel.clone();
        self.jobs.insert(&id, job);
        let run = Run {
            subprocess: self.subprocess.clone(),
            config: self.config.clone(),
            depth: self.depth + 1,
            jobs: self.jobs.clone(),
            id: id.clone(),
            caller: caller.clone(),
            spec: spec.clone(),
            dir,
            stream,
            cancel,
        };
        // Recorded now, so a supervisor that dies before the end leaves a trace its next
        // process reports (see `lookup`).
        run.record();
        tokio::spawn(run.go(after_finals, stdin_rx));
        Ok((id, final_rx))
    }
}

/// Profiles a delegate can run under: `$KEEL_HOME/profiles/*.toml`, plus `default`.
fn profiles(home: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(home.join("profiles"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            name.to_str()?.strip_suffix(".toml").map(str::to_owned)
        })
        .collect();
    names.sort();
    names.insert(0, "default".into());
    names
}

/// One delegation's life, in its own task.
struct Run {
    subprocess: SubprocessService,
    config: KeelConfig,
    depth: u32,
    jobs: Table<Own>,
    id: String,
    caller: Caller,
    spec: DelegateSpec,
    dir: PathBuf,
    stream: Arc<Stream>,
    cancel: CancellationToken,
}

impl Run {
    async fn go(
        self,
        after: Vec<(String, watch::Receiver<bool>)>,
        stdin: mpsc::UnboundedReceiver<Vec<u8>>,
    ) {
        let run = self.run(stdin);
        let ending = self.jobs.run(&self.id, after, &self.cancel, run).await;
        self.finish(ending);
    }

    async fn run(&self, stdin: mpsc::UnboundedReceiver<Vec<u8>>) -> Ending {
        let failed = |e: String| Ending::with(RunStatus::Failed, Some(e));
        let Some(launch) = &self.config.launch else {
            return failed("no model route for the delegate".into());
        };
        let (cwd, isolated) = match workspace::Isolated::for_mode(
            self.spec.mode,
            &self.subprocess,
            &self.caller.cwd,
            &self.dir,
        )
        .await
        {
            Ok(found) => found,
            Err(e) => return failed(e.to_string()),
        };
        let mut argv: Vec<String> = vec![
            self.config.program.display().to_string(),
            "run".into(),
            "--json".into(),
            "--inbox-stdin".into(),
            "--delegated-from".into(),
            self.caller.session_id.clone(),
            "--delegation-depth".into(),
            self.depth.to_string(),
            "--cwd".into(),
            cwd.display().to_string(),
            "--project-trust".into(),
            self.config.project_trust.as_str().into(),
        ];
        argv.extend(
            match self.spec.mode {
                // Commands run without asking only where the kernel confines them to reading.
                DelegateMode::ReadOnly if read_only_is_enforced(&cwd) => {
                    ["--sandbox", "read-only", "--approval", "allow"]
                }
                DelegateMode::ReadOnly => ["--sandbox", "read-only", "--approval", "deny"],
                DelegateMode::Write => ["--sandbox", "workspace-write", "--approval", "allow"],
            }
            .map(str::to_owned),
        );
        argv.extend(route_args(&launch.args, self.spec.model.as_deref()));
        if let Some(p) = self.spec.profile.as_deref().filter(|p| *p != "default") {
            argv.extend(["--profile".into(), p.to_owned()]);
        }
        argv.extend(["--".into(), self.spec.prompt.clone()]);
        let mut cmd = CommandSpec::new(argv)
            .cwd(&cwd)
            .label(format!("delegate-{}", self.id))
            .stdin_stream(stdin)
            .tee_stdout(OutputSink::new({
                let s = self.stream.clone();
                move |b| s.feed(b)
            }))
            .spill(false)
            .cap(4096)
            .timeout(self.config.time_limit)
            .env(DEPTH_ENV, self.depth.to_string());
        for (k, v) in &launch.env {
            cmd = cmd.env(k, v);
        }
        let out = self.subprocess.run(cmd, &self.cancel).await;
        self.stream.flush();
        // The delegate is gone: nothing reads its stdin any more.
        self.jobs.update(&self.id, |j| j.own.stdin = None);
        let mut ending = match out {
            Err(e) => failed(format!("cannot start the keel delegate: {e}")),
            Ok(out) => {
                let turn = self.stream.turn_end();
                match (out.end, out.code) {
                    (RunEnd::Cancelled, _) => Ending::with(RunStatus::Cancelled, None),
                    (RunEnd::TimedOut, _) => failed(format!(
                        "the delegate ran past its time limit of {} s and was stopped",
                        self.config.time_limit.as_secs()
                    )),
                    (RunEnd::Exited, Some(0)) => Ending::with(RunStatus::Completed, None),
                    (RunEnd::Exited, code) => {
                        let why = turn.unwrap_or_else(|| {
                            let tail = out.stderr.text();
                            let tail = tail.trim();
                            match code {
                                Some(c) => format!("keel exited {c}: {tail}"),
                                None => format!("keel was killed by a signal: {tail}"),
                            }
                        });
                        failed(why)
                    }
                }
            }
        };
        if let Some(w) = isolated {
            w.bring_back(&self.subprocess, &self.dir, &mut ending).await;
        }
        ending
    }

    /// Write the job's current result to `job.json` (best effort: memory stays the truth
    /// while this process lives).
    fn record(&self) {
        self.jobs.record(&self.id, &self.dir);
    }

    fn finish(&self, mut ending: Ending) {
        ending.session = self.stream.session_id();
        let answer = self.stream.answer();
        self.jobs
            .conclude(&self.id, &self.dir, ending, answer, |own| own.stdin = None);
    }
}

/// Whether this kernel confines commands of a `read-only` sandbox in `cwd` (Landlock): a
/// read-only delegate then runs commands without asking; elsewhere its commands are refused.
fn read_only_is_enforced(cwd: &Path) -> bool {
    use keel_tools::SandboxMode;
    use keel_tools::subprocess::confine::{ConfineSpec, Confinement};
    let roots = [cwd.to_path_buf()];
    Confinement::prepare(&ConfineSpec {
        mode: SandboxMode::ReadOnly,
        roots: &roots,
        extra_writable: &[],
        temp: &std::env::temp_dir(),
        network: true,
    })
    .enforcement()
    .is_complete()
}

/// The supervisor's route arguments, with `--model` replaced by `model` when given.
pub(crate) fn route_args(args: &[String], model: Option<&str>) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len() + 2);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--model" && model.is_some() {
            it.next();
            continue;
        }
        out.push(a.clone());
    }
    if let Some(m) = model {
        out.extend(["--model".into(), m.into()]);
    }
    out
}

#[async_trait]
impl Provider for KeelProvider {
    type Own = Own;
    const NAME: &'static str = "keel";

    fn jobs(&self) -> &Table<Own> {
        &self.jobs
    }

    async fn own_capabilities(&self, _caller: &Caller) -> Capabilities {
        Capabilities {
            can_review: true,
            ..table::capabilities(self.not_ready(), profiles(&self.config.home))
        }
    }

    async fn start(&self, caller: &Caller, spec: &DelegateSpec) -> Result<String, DelegationError> {
        Ok(self.launch(caller, spec, "delegate").await?.0)
    }

    async fn review_change(
        &self,
        caller: &Caller,
        spec: ReviewSpec,
    ) -> Result<DelegationResult, DelegationError> {
        let change = match (&spec.base, &spec.job_id) {
            (Some(_), Some(_)) => {
                return Err(err(
                    ErrorCode::Unsupported,
                    "a review takes a base or a job, not both",
                ));
            }
            (_, Some(job)) => {
                let r = self.jobs.lookup(caller, job)?;
                let Some(patch) = r.artifacts.patch_path else {
                    return Err(err(
                        ErrorCode::Unsupported,
                        format!(
                            "job {job} left no patch to review (only finished write-mode jobs do)"
                        ),
                    ));
                };
                let text = std::fs::read_to_string(&patch)
                    .map_err(|e| err(ErrorCode::Internal, format!("cannot read {patch}: {e}")))?;
                workspace::Change {
                    what: format!("the patch of delegation {job} ({patch})"),
                    diff: text,
                }
            }
            (base, None) => workspace::pinned_change(
                &self.subprocess,
                &caller.cwd,
                base.as_deref().unwrap_or("HEAD"),
            )
            .await
            .map_err(|e| err(ErrorCode::Unsupported, e.to_string()))?,
        };
        let delegate = DelegateSpec {
            prompt: workspace::review_prompt(&change),
            profile: spec.profile,
            mode: DelegateMode::ReadOnly,
            after: Vec::new(),
            label: spec.label.or_else(|| Some("review".into())),
            model: spec.model,
            effort: spec.effort,
            extensions: spec.extensions,
        };
        let (id, mut done) = self.launch(caller, &delegate, "review").await?;
        let _ = done.wait_for(|f| *f).await;
        let r = self.jobs.lookup(caller, &id)?;
        match r.job.status {
            RunStatus::Completed => Ok(r),
            s => Err(err(
                ErrorCode::DelegateFailed,
                format!(
                    "the review {id} ended {}: {}",
                    s.as_str(),
                    r.error_message.as_deref().unwrap_or("no reason given")
                ),
            )),
        }
    }

    async fn steer_running(
        &self,
        caller: &Caller,
        id: &str,
        guidance: &str,
    ) -> Result<SteerOutcome, DelegationError> {
        let (stdin, stream, mut done) = self.jobs.with_job(caller, id, |j| {
            (
                j.own.stdin.clone(),
                j.own.stream.clone(),
                j.final_tx.subscribe(),
            )
        })?;
        let Some(stdin) = stdin else {
            return Ok(SteerOutcome::Refused {
                detail: format!("job {id} is finishing"),
            });
        };
        let ack = stream.expect_inbox(guidance);
        let line = serde_json::json!({ "steer": guidance }).to_string() + "\n";
        if stdin.send(line.into_bytes()).is_err() {
            return Ok(SteerOutcome::Refused {
                detail: format!("job {id} is finishing"),
            });
        }
        tokio::select! {
            r = ack => match r {
                Ok(()) => Ok(SteerOutcome::Accepted),
                Err(_) => Ok(SteerOutcome::Refused { detail: format!("job {id} ended before it took the guidance") }),
            },
            _ = done.wait_for(|f| *f) => Ok(SteerOutcome::Refused {
                detail: format!("job {id} ended before it took the guidance"),
            }),
            () = tokio::time::sleep(STEER_ACK) => Ok(SteerOutcome::Refused {
                detail: format!("job {id} did not take the guidance within {} s", STEER_ACK.as_secs()),
            }),
        }
    }
}

impl Drop for KeelProvider {
    fn drop(&mut self) {
        // The supervisor is going: its delegates go with it (their trees are killed).
        self.jobs.cancel_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_override_replaces_the_routes_model() {
        let args: Vec<String> = ["--model", "a", "--script", "/s.yaml"]
            .map(String::from)
            .to_vec();
        assert_eq!(route_args(&args, None), args);
        assert_eq!(
            route_args(&args, Some("b")),
            ["--script", "/s.yaml", "--model", "b"].map(String::from)
        );
    }
}
