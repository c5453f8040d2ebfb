//! One ACP delegation's life, in its own task: wait for the jobs it runs after, isolate a
//! write-mode workspace, build the agent's command (for keel: its model route and sandbox),
//! hold the conversation (`keel_acp_client::run`), collect the patch, and write the ending
//! into the job.

use super::{AcpConfig, Own};
use crate::keel::{DEPTH_ENV, route_args, workspace};
use crate::seam::{Caller, DelegateMode, DelegateSpec, EventType, RunStatus};
use crate::table::{Ending, Table};
use keel_acp_client::{self as client, Account, Grant, NotOpened, Report, StopReason};
use keel_tools::subprocess::{CommandSpec, SubprocessService};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

/// One delegation's life, in its own task.
pub(super) struct Run {
    pub(super) subprocess: SubprocessService,
    pub(super) config: AcpConfig,
    pub(super) depth: u32,
    pub(super) jobs: Table<Own>,
    pub(super) id: String,
    pub(super) caller: Caller,
    pub(super) spec: DelegateSpec,
    pub(super) dir: PathBuf,
    pub(super) account: Arc<Account>,
    pub(super) cancel: CancellationToken,
}

impl Run {
    pub(super) async fn go(
        self,
        after: Vec<(String, watch::Receiver<bool>)>,
        steers: mpsc::UnboundedReceiver<client::Steer>,
        opened: oneshot::Sender<Result<(), NotOpened>>,
    ) {
        let run = self.run(steers, opened);
        let ending = self.jobs.run(&self.id, after, &self.cancel, run).await;
        self.finish(ending);
    }

    /// The argv: the configured command, plus for keel its model route and sandbox.
    fn argv(&self) -> Vec<String> {
        let mut argv = self.config.command.clone();
        if self.config.is_keel() {
            if let Some(launch) = &self.config.launch {
                argv.extend(route_args(&launch.args, self.spec.model.as_deref()));
            }
            argv.extend([
                "--delegated-from".into(),
                self.caller.session_id.clone(),
                "--delegation-depth".into(),
                self.depth.to_string(),
                "--project-trust".into(),
                self.config.project_trust.as_str().into(),
            ]);
            if !argv.iter().any(|a| a == "--sandbox") {
                let sandbox = match self.spec.mode {
                    DelegateMode::ReadOnly => "read-only",
                    DelegateMode::Write => "workspace-write",
                };
                argv.extend(["--sandbox".into(), sandbox.into()]);
            }
        }
        argv
    }

    async fn run(
        &self,
        steers: mpsc::UnboundedReceiver<client::Steer>,
        opened: oneshot::Sender<Result<(), NotOpened>>,
    ) -> Ending {
        let isolated = workspace::Isolated::for_mode(
            self.spec.mode,
            &self.subprocess,
            &self.caller.cwd,
            &self.dir,
        )
        .await;
        let (cwd, isolated) = match isolated {
            Ok(found) => found,
            Err(e) => {
                let e = e.to_string();
                let _ = opened.send(Err(NotOpened(e.clone())));
                return Ending::with(RunStatus::Failed, Some(e));
            }
        };
        let mut command = CommandSpec::new(self.argv())
            .cwd(&cwd)
            .label(format!("delegate-{}", self.id))
            .cap(16 * 1024)
            .timeout(self.config.time_limit)
            .env(DEPTH_ENV, self.depth.to_string());
        if self.config.is_keel()
            && let Some(launch) = &self.config.launch
        {
            for (k, v) in &launch.env {
                command = command.env(k, v);
            }
        }
        for name in &self.config.forward_env {
            let value = self
                .subprocess
                .config()
                .base_env
                .iter()
                .find(|(k, _)| k.to_str() == Some(name.as_str()));
            if let Some((k, v)) = value {
                command = command.env(k, v);
            }
        }
        for (k, v) in &self.config.env {
            command = command.env(k, v);
        }
        let report: Arc<dyn Fn(Report) + Send + Sync> = {
            let jobs = self.jobs.clone();
            let id = self.id.clone();
            Arc::new(move |r: Report| {
                jobs.push_event(&id, EventType::Progress, r.message, Some(r.data), None);
            })
        };
        let (ended, session) = client::run(
            &self.subprocess,
            client::Conversation {
                command,
                shown: self.config.shown(),
                cwd,
                prompt: self.spec.prompt.clone(),
                grant: match self.spec.mode {
                    DelegateMode::ReadOnly => Grant::ReadOnly,
                    DelegateMode::Write => Grant::Write,
                },
                handshake: self.config.handshake,
                grace: self.config.grace,
                account: self.account.clone(),
                report,
                cancel: self.cancel.clone(),
                steers,
                opened,
            },
        )
        .await;
        self.jobs.update(&self.id, |j| j.own.steers = None);
        let shown = self.config.shown();
        let (status, error) = match ended {
            client::Ending::Stopped(StopReason::EndTurn) => (RunStatus::Completed, None),
            client::Ending::Stopped(reason) => {
                let reason = serde_json::to_value(reason)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| "unknown".into());
                (
                    RunStatus::Failed,
                    Some(format!("the ACP agent `{shown}` ended its turn: {reason}")),
                )
            }
            client::Ending::Cancelled => (RunStatus::Cancelled, None),
            client::Ending::Failed(why) => (RunStatus::Failed, Some(why)),
        };
        let mut ending = Ending {
            status,
            error,
            artifacts: None,
            session,
        };
        if let Some(w) = isolated {
            w.bring_back(&self.subprocess, &self.dir, &mut ending).await;
        }
        ending
    }

    fn finish(&self, ending: Ending) {
        self.account.flush();
        let answer = self.account.answer();
        self.jobs
            .conclude(&self.id, &self.dir, ending, answer, |own| own.steers = None);
    }
}
