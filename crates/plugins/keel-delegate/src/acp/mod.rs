//! The `acp` provider: the delegate is any [Agent Client Protocol] agent command (`keel acp`,
//! Zed's `codex-acp` or `claude-code-acp`…), and keel is its client.
//!
//! ```text
//! delegate ─► [write] an isolated git worktree (as the keel provider's)
//!          └► ACP_COMMAND… (through the subprocess service: scrubbed env, process group)
//!               initialize ─► session/new {cwd: workspace | worktree} ─► session/prompt {task}
//!               session/update ─► log lines, the answer, plan reports  (keel-acp-client)
//!               session/request_permission ◄─ the authority grant     (keel-acp-client)
//!          delegate_steer ─► session/cancel + session/prompt {guidance} on the same session
//!          job_kill       ─► session/cancel; the process is ended after a grace
//!          end ─► [write] changes.patch; worktree removed ─► job.json
//! ```
//!
//! Authority: `read-only` answers permission requests for anything but reading, searching,
//! fetching and thinking with reject-once, in the caller's workspace; `write` allows once
//! every request, inside an isolated worktree whose changes come back as a patch. An agent
//! that changes files without asking is not stopped by its answers: when the command is keel
//! itself, it is also started with `--sandbox read-only` or `--sandbox workspace-write`, and
//! with the supervisor's model route and credential ([`ModelLaunch`]), passed on that spawn
//! alone. The client offers no file-system or terminal capability: the agent uses its own.
//!
//! Job files live under `$KEEL_HOME/delegations/<supervisor session>/<job id>/` (`acp-N`):
//! `log.txt`, `changes.patch`, `job.json`; the job table is the keel provider's
//! (`crate::table`, which also answers every seam call but start and steer). The ACP client
//! itself — the process and the conversation, the authority grant as permission answers, the
//! account of updates (answer, log, reports) — is the `keel-acp-client` crate; `run` here is
//! one delegation's life around it.
//!
//! [Agent Client Protocol]: https://agentclientprotocol.com

mod run;

use crate::seam::{
    Caller, Capabilities, DelegateSpec, DelegationError, ErrorCode, EventType, SteerOutcome,
    check_extensions,
};
use crate::table::{self, JobLog, Provider, TAIL_LINES, Table};
use async_trait::async_trait;
use keel_acp_client::{Account, Steer};
use keel_agent::plugin::{ModelLaunch, ProjectTrust};
use keel_tools::subprocess::SubprocessService;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
/// How long a steer waits for the delegate to stop its turn and take the new prompt.
const STEER_WAIT: Duration = Duration::from_secs(30);

/// Configuration of an [`AcpProvider`].
#[derive(Debug, Clone)]
pub struct AcpConfig {
    /// The agent's argv (`["keel", "acp"]`, `["codex-acp"]`); a bare program name is looked
    /// up on `PATH`.
    pub command: Vec<String>,
    /// The supervisor's model route, passed when the command is keel itself.
    pub launch: Option<ModelLaunch>,
    /// `$KEEL_HOME` (job files go under `delegations/`).
    pub home: PathBuf,
    /// Wall-time limit of one delegation.
    pub time_limit: Duration,
    /// Time for `initialize` and `session/new` together.
    pub handshake: Duration,
    /// Time a cancelled turn gets to answer, and the agent to exit once its stdin closed,
    /// before its process group is ended.
    pub grace: Duration,
    /// Variables set on the agent (never scrubbed).
    pub env: Vec<(String, String)>,
    /// Names of keel's own variables passed on although they look secret (the agent's key).
    pub forward_env: Vec<String>,
    /// Bytes of `log.txt` per job.
    pub max_log_bytes: u64,
    /// The supervisor's decision about its workspace, handed to a keel delegate
    /// (`--project-trust`), which never decides on its own.
    pub project_trust: ProjectTrust,
}

impl AcpConfig {
    /// This executable with `acp`, `launch`, `home`, a one-hour limit, 60 s for the
    /// handshake, a 5 s grace, 8 MiB of log.
    pub fn new(launch: Option<ModelLaunch>, home: PathBuf) -> Self {
        let keel = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("keel"));
        AcpConfig {
            command: vec![keel.display().to_string(), "acp".into()],
            launch,
            home,
            time_limit: Duration::from_secs(3600),
            handshake: Duration::from_secs(60),
            grace: Duration::from_secs(5),
            env: Vec::new(),
            forward_env: Vec::new(),
            max_log_bytes: 8 << 20,
            project_trust: ProjectTrust::Untrusted,
        }
    }

    /// Whether the command runs keel (this executable, or a program named `keel`): it then
    /// gets the model route and the sandbox flags.
    fn is_keel(&self) -> bool {
        let Some(program) = self.command.first() else {
            return false;
        };
        let path = Path::new(program);
        if path.file_name().and_then(|n| n.to_str()) == Some("keel") {
            return true;
        }
        let this = std::env::current_exe().and_then(|p| p.canonicalize()).ok();
        this.is_some() && path.canonicalize().ok() == this
    }

    /// The command as a person would type it.
    fn shown(&self) -> String {
        self.command.join(" ")
    }
}

/// What the acp provider keeps of a delegation beside the table's part.
pub(crate) struct Own {
    /// Steering, while the conversation lasts.
    steers: Option<mpsc::UnboundedSender<Steer>>,
    /// What the agent showed.
    account: Arc<Account>,
}

impl JobLog for Own {
    fn tail(&self, n: Option<usize>) -> String {
        self.account.tail(n)
    }
}

/// The ACP provider (see the module docs).
pub struct AcpProvider {
    subprocess: SubprocessService,
    config: AcpConfig,
    depth: u32,
    jobs: Table<Own>,
}

impl std::fmt::Debug for AcpProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpProvider")
            .field("command", &self.config.command)
            .field("launch", &self.config.launch)
            .finish()
    }
}

fn err(code: ErrorCode, message: impl Into<String>) -> DelegationError {
    DelegationError::new(code, message)
}

/// Whether `program` names a file that exists, directly or on `path`.
fn findable(program: &str, path: Option<&std::ffi::OsStr>) -> bool {
    if program.contains('/') {
        return Path::new(program).is_file();
    }
    path.is_some_and(|p| std::env::split_paths(p).any(|d| d.join(program).is_file()))
}

impl AcpProvider {
    /// A provider running `config.command` through `subprocess`; its delegates run one
    /// delegation level deeper than this process ([`crate::keel::DEPTH_ENV`]).
    pub fn new(subprocess: SubprocessService, config: AcpConfig) -> Self {
        let depth = crate::keel::current_depth();
        let jobs = Table::new("acp", config.home.clone());
        AcpProvider {
            subprocess,
            config,
            depth,
            jobs,
        }
    }

    fn not_ready(&self) -> Option<String> {
        let Some(program) = self.config.command.first() else {
            return Some(
                "acp_command is empty: set it to the ACP agent's argv, e.g. [\"keel\", \"acp\"]"
                    .into(),
            );
        };
        let path = self
            .subprocess
            .config()
            .base_env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_os_str());
        if !findable(program, path) {
            return Some(format!(
                "the ACP agent command `{}` cannot be run: {program} is not a file{} (set \
                 acp_command in the delegate plugin row)",
                self.config.shown(),
                if program.contains('/') {
                    ""
                } else {
                    " on PATH"
                }
            ));
        }
        if self.config.is_keel() && self.config.launch.is_none() {
            return Some(
                "this agent's model lives only in its own process (an embedded provider); a keel \
                 delegate needs a configured endpoint or a --script file"
                    .into(),
            );
        }
        None
    }

    fn check(&self, spec: &DelegateSpec) -> Result<(), DelegationError> {
        if let Some(why) = self.not_ready() {
            return Err(err(ErrorCode::NotReady, why));
        }
        check_extensions(&spec.extensions, &Capabilities::default())?;
        if spec.effort.is_some() {
            return Err(err(
                ErrorCode::Unsupported,
                "the acp provider has no reasoning-effort setting (leave `effort` out)",
            ));
        }
        if spec.profile.as_deref().is_some_and(|p| p != "default") {
            return Err(err(
                ErrorCode::Unsupported,
                "the acp provider runs one agent command and has no profiles (profile: default)",
            ));
        }
        if spec.model.is_some() && !self.config.is_keel() {
            return Err(err(
                ErrorCode::Unsupported,
                format!(
                    "the agent `{}` takes no model from keel: choose its model in its own \
                     configuration (leave `model` out)",
                    self.config.shown()
                ),
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl Provider for AcpProvider {
    type Own = Own;
    const NAME: &'static str = "acp";

    fn jobs(&self) -> &Table<Own> {
        &self.jobs
    }

    async fn own_capabilities(&self, _caller: &Caller) -> Capabilities {
        Capabilities {
            can_report: true,
            ..table::capabilities(self.not_ready(), vec!["default".into()])
        }
    }

    /// Start `spec` as a new job; `Ok` once its session is open (or it is queued).
    async fn start(&self, caller: &Caller, spec: &DelegateSpec) -> Result<String, DelegationError> {
        self.check(spec)?;
        let after = self.jobs.finals(caller, &spec.after)?;
        let queued = !after.is_empty();
        let (id, dir, result) =
            self.jobs
                .open(caller, spec, "delegate", "default".into(), self.depth + 1)?;
        let (steer_tx, steers) = mpsc::unbounded_channel();
        let account = Arc::new(Account::new(
            dir.join("log.txt"),
            self.config.max_log_bytes,
            TAIL_LINES,
        ));
        let job = table::Job::new(
            caller,
            result,
            Own {
                steers: Some(steer_tx),
                account: account.clone(),
            },
        );
        let mut final_rx = job.final_tx.subscribe();
        let cancel = job.cancel.clone();
        self.jobs.insert(&id, job);
        let (opened_tx, opened_rx) = oneshot::channel();
        let run = run::Run {
            subprocess: self.subprocess.clone(),
            config: self.config.clone(),
            depth: self.depth + 1,
            jobs: self.jobs.clone(),
            id: id.clone(),
            caller: caller.clone(),
            spec: spec.clone(),
            dir,
            account,
            cancel,
        };
        self.jobs.record(&id, &run.dir);
        tokio::spawn(run.go(after, steers, opened_tx));
        if queued {
            return Ok(id);
        }
        match opened_rx.await {
            Ok(Ok(())) => Ok(id),
            other => {
                // It could not open its session: the job is failing; say why.
                let _ = final_rx.wait_for(|f| *f).await;
                let why = match other {
                    Ok(Err(why)) => why.0,
                    _ => self
                        .jobs
                        .lookup(caller, &id)
                        .ok()
                        .and_then(|r| r.error_message)
                        .unwrap_or_else(|| {
                            format!(
                                "the ACP agent `{}` did not open a session",
                                self.config.shown()
                            )
                        }),
                };
                Err(err(ErrorCode::DelegateFailed, format!("{why} (job {id})")))
            }
        }
    }

    async fn steer_running(
        &self,
        caller: &Caller,
        id: &str,
        guidance: &str,
    ) -> Result<SteerOutcome, DelegationError> {
        let steers = self.jobs.with_job(caller, id, |j| j.own.steers.clone())?;
        let finishing = || SteerOutcome::Refused {
            detail: format!("job {id} ended before it took the guidance"),
        };
        let Some(steers) = steers else {
            return Ok(finishing());
        };
        let (done, answer) = oneshot::channel();
        if steers
            .send(Steer {
                text: guidance.to_owned(),
                done,
            })
            .is_err()
        {
            return Ok(finishing());
        }
        let outcome = match tokio::time::timeout(STEER_WAIT, answer).await {
            Ok(Ok(keel_acp_client::SteerOutcome::Accepted)) => SteerOutcome::Accepted,
            Ok(Ok(keel_acp_client::SteerOutcome::Refused { detail })) => {
                SteerOutcome::Refused { detail }
            }
            Ok(Err(_)) => finishing(),
            Err(_) => SteerOutcome::Refused {
                detail: format!(
                    "job {id} did not take the guidance within {} s",
                    STEER_WAIT.as_secs()
                ),
            },
        };
        if outcome == SteerOutcome::Accepted {
            self.jobs
                .push_event(id, EventType::Steer, guidance.to_owned(), None, None);
        }
        Ok(outcome)
    }
}

impl Drop for AcpProvider {
    fn drop(&mut self) {
        // The supervisor is going: its delegates go with it.
        self.jobs.cancel_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seam::{DelegationService, RunStatus};
    use keel_tools::subprocess::SubprocessConfig;
    use pretty_assertions::assert_eq;

    struct Fixture {
        dir: tempfile::TempDir,
    }

    impl Fixture {
        fn new() -> Self {
            Fixture {
                dir: tempfile::tempdir().unwrap(),
            }
        }

        fn provider(&self, command: &[&str]) -> AcpProvider {
            let sp = SubprocessService::new(SubprocessConfig::from_process_env(self.dir.path()));
            let mut config = AcpConfig::new(None, self.dir.path().join("home"));
            config.command = command.iter().map(|s| (*s).to_owned()).collect();
            config.handshake = Duration::from_secs(2);
            config.grace = Duration::from_millis(300);
            AcpProvider::new(sp, config)
        }

        fn caller(&self) -> Caller {
            Caller {
                session_id: "sup-1".into(),
                cwd: self.dir.path().to_path_buf(),
            }
        }
    }

    fn spec() -> DelegateSpec {
        DelegateSpec {
            prompt: "look around".into(),
            ..DelegateSpec::default()
        }
    }

    #[tokio::test]
    async fn a_missing_command_is_not_ready_and_named() {
        let f = Fixture::new();
        for (argv, says) in [
            (
                vec!["/nonexistent/acp-agent", "--stdio"],
                "the ACP agent command `/nonexistent/acp-agent --stdio` cannot be run: \
                 /nonexistent/acp-agent is not a file (set acp_command in the delegate plugin row)",
            ),
            (
                vec!["no-such-acp-agent-xyz"],
                "the ACP agent command `no-such-acp-agent-xyz` cannot be run: \
                 no-such-acp-agent-xyz is not a file on PATH (set acp_command in the delegate \
                 plugin row)",
            ),
            (
                vec![],
                "acp_command is empty: set it to the ACP agent's argv, e.g. [\"keel\", \"acp\"]",
            ),
        ] {
            let p = f.provider(&argv);
            let caps = p.capabilities(&f.caller()).await;
            assert!(!caps.ready);
            assert_eq!(caps.diagnosis.as_deref(), Some(says));
            let e = p.delegate(&f.caller(), spec()).await.unwrap_err();
            assert_eq!((e.code, e.message.as_str()), (ErrorCode::NotReady, says));
        }
    }

    #[tokio::test]
    async fn an_agent_that_exits_at_once_fails_the_delegate_call_naming_it() {
        let f = Fixture::new();
        let p = f.provider(&["sh", "-c", "echo 'no key configured' >&2; exit 3"]);
        let e = p.delegate(&f.caller(), spec()).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::DelegateFailed);
        assert!(
            e.message.starts_with(
                "the ACP agent `sh -c echo 'no key configured' >&2; exit 3` exited 3 during \
                 initialize; its stderr ends: no key configured"
            ),
            "{e}"
        );
        assert!(e.message.ends_with("(job acp-1)"), "{e}");
        // The job is recorded failed with the same message.
        let r = p.result(&f.caller(), "acp-1").await.unwrap();
        assert_eq!(r.job.status, RunStatus::Failed);
        assert!(
            r.error_message
                .unwrap()
                .contains("exited 3 during initialize"),
            "recorded"
        );
    }

    #[tokio::test]
    async fn garbage_on_stdout_is_named_whether_the_agent_exits_or_hangs() {
        let f = Fixture::new();
        let p = f.provider(&["sh", "-c", "echo 'Hello from my agent!'; echo '{oops'"]);
        let e = p.delegate(&f.caller(), spec()).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::DelegateFailed);
        assert!(e.message.contains("exited 0 during initialize"), "{e}");
        assert!(
            e.message.contains(
                "it wrote to stdout what is not JSON-RPC (ACP needs stdout for the protocol \
                 alone): Hello from my agent!"
            ),
            "{e}"
        );
        let log = p.logs(&f.caller(), "acp-1", None).await.unwrap();
        assert_eq!(
            log,
            "(not JSON-RPC, skipped) Hello from my agent!\n(not JSON-RPC, skipped) {oops"
        );

        // One that stays silent about JSON-RPC and keeps running: the handshake limit ends it.
        let p = f.provider(&["sh", "-c", "echo banner; exec sleep 60"]);
        let started = std::time::Instant::now();
        let e = p.delegate(&f.caller(), spec()).await.unwrap_err();
        assert!(
            e.message
                .contains("during initialize and session/new (no answer within 2 s)"),
            "{e}"
        );
        assert!(e.message.contains("not JSON-RPC"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(30), "hang guard");
    }

    #[tokio::test]
    async fn a_kill_during_the_handshake_cancels_at_once() {
        let f = Fixture::new();
        let mut p = f.provider(&["sh", "-c", "exec sleep 60"]);
        p.config.handshake = Duration::from_secs(60);
        let p = Arc::new(p);
        let caller = f.caller();
        let started = {
            let (p, caller) = (p.clone(), caller.clone());
            tokio::spawn(async move { p.delegate(&caller, spec()).await })
        };
        while p.status(&caller, None).await.unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let t = std::time::Instant::now();
        let job = p.cancel(&caller, "acp-1").await.unwrap();
        assert_eq!(job.status, RunStatus::Cancelled);
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "not the handshake limit"
        );
        let e = started.await.unwrap().unwrap_err();
        assert_eq!(e.code, ErrorCode::DelegateFailed, "{e}");
        assert!(
            e.message.starts_with(
                "cancelled before the ACP agent `sh -c exec sleep 60` opened its session"
            ),
            "{e}"
        );
    }

    #[tokio::test]
    async fn options_keel_does_not_offer_are_refused_before_anything_runs() {
        let f = Fixture::new();
        let p = f.provider(&["sh", "-c", "exit 0"]);
        let mut s = spec();
        s.model = Some("gpt-9".into());
        let e = p.delegate(&f.caller(), s).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::Unsupported, "{e}");
        assert!(e.message.contains("takes no model from keel"), "{e}");
        let mut s = spec();
        s.extensions
            .insert("sandbox".into(), serde_json::json!("x"));
        let e = p.delegate(&f.caller(), s).await.unwrap_err();
        assert!(e.message.contains("unknown extension key 'sandbox'"), "{e}");
        assert_eq!(p.status(&f.caller(), None).await.unwrap(), Vec::new());
    }

    #[test]
    fn keel_is_recognised_and_gets_its_route_and_sandbox() {
        let mut c = AcpConfig::new(None, PathBuf::from("/h"));
        assert!(c.is_keel(), "the default is this executable");
        c.command = vec!["/opt/bin/keel".into(), "acp".into()];
        assert!(c.is_keel());
        c.command = vec!["codex-acp".into()];
        assert!(!c.is_keel());
    }
}
