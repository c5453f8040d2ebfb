//! `keel` (and `keel "PROMPT"`, `keel resume` without a prompt) in a terminal: the interactive
//! UI of `keel-tui`, with agents built here from the configuration and flags like every
//! other command's.

use super::Ctx;
use anyhow::{Result, anyhow};
use keel_agent::Agent;
use keel_host::{BuildOptions, LogFormat, ModelSource, ProjectTrust};
use keel_protocol::sync::Locked;
use keel_session::{PersistentSession, WriterOptions};
use keel_tui::{AgentSource, SessionEntry, Target, WorkspaceTrust};
use std::borrow::Cow;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Whether both ends are a terminal (a person is there).
pub fn is_interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// Agents for the UI, built like `keel run`'s and `keel resume`'s.
struct Source<'c> {
    ctx: &'c Ctx,
    script: Option<PathBuf>,
    /// `--permission-mode`: its sandbox and approval apply to every agent of the UI.
    mode: crate::cli::ModeArgs,
    /// `/review` of the latest agent (filled when its delegation plugin is on).
    review: std::sync::Mutex<Option<keel_delegate::review::ReviewCommand>>,
    /// The run's own trust decision (`--trust-project`), until the person records one in the
    /// UI (the trust question, `/trust`): from then on the recorded decision holds.
    trust_flag: std::sync::Mutex<Option<ProjectTrust>>,
}

impl Source<'_> {
    fn model(&self) -> ModelSource {
        match &self.script {
            Some(p) => ModelSource::Script(p.clone()),
            None => ModelSource::Configured,
        }
    }

    /// The context agents are built in: the command line's, with the run's trust flag as it
    /// stands now.
    fn ctx(&self) -> Cow<'_, Ctx> {
        let flag = *self.trust_flag.locked();
        if flag == self.ctx.project_trust() {
            return Cow::Borrowed(self.ctx);
        }
        let mut ctx = self.ctx.clone();
        ctx.common.trust_project = false;
        ctx.common.project_trust = flag.map(|t| t.as_str().to_owned());
        Cow::Owned(ctx)
    }

    fn workspace_trust(&self) -> Result<WorkspaceTrust> {
        let ctx = self.ctx();
        let host = ctx.host()?;
        let decision = host.config().trust.clone();
        // What the decision governs: what an untrusted load leaves out.
        let files = if decision.is_trusted() {
            super::trust::governed(ctx.into_owned())?
        } else {
            host.config().ignored.clone()
        };
        Ok(WorkspaceTrust { decision, files })
    }

    fn build_agent(&self, target: &Target, options: BuildOptions) -> Result<Agent> {
        let ctx = self.ctx();
        let mut flags = ctx.flags()?;
        super::run::apply_permission_mode(&mut flags, &self.mode);
        if let Some(model) = &target.model {
            flags.model = Some(model.clone());
        }
        // A resumed session keeps its modes (they change the flags the factory is made with).
        let resumed = match &target.resume {
            Some(path) => {
                let (log, _, _) = PersistentSession::resume(path, WriterOptions::default())
                    .map_err(|e| anyhow!("cannot resume {}: {e}", path.display()))?;
                super::run::keep_session_modes(&mut flags, &log);
                Some(log)
            }
            None => None,
        };
        // The delegation plugin with a `/review` command (it works when delegation is on).
        let (plugin, review) = keel_delegate::DelegatePlugin::with_review_command();
        let mut catalogue = keel_host::catalogue::builtin();
        catalogue.retain(|p| p.id() != keel_delegate::ID);
        catalogue.push(Box::new(plugin));
        let host = ctx.host_with(catalogue)?;
        let factory = host.factory(flags, self.model())?;
        let log = match resumed {
            Some(log) => log,
            None => factory.new_session(LogFormat::Plain)?,
        };
        let agent = factory.build(log, options)?;
        *self.review.locked() = Some(review);
        Ok(agent)
    }
}

impl AgentSource for Source<'_> {
    fn build(&self, target: &Target, options: BuildOptions) -> Result<Agent, String> {
        self.build_agent(target, options)
            .map_err(|e| format!("{e:#}"))
    }

    fn resolve(&self, query: Option<&str>) -> Result<PathBuf, String> {
        match query {
            None => super::run::latest_session(self.ctx).map_err(|e| e.to_string()),
            Some(q) => self
                .ctx
                .store
                .resolve(q, &self.ctx.cwd)
                .map_err(|e| e.to_string()),
        }
    }

    fn trust(&self) -> Result<WorkspaceTrust, String> {
        self.workspace_trust().map_err(|e| format!("{e:#}"))
    }

    fn record_trust(&self, level: ProjectTrust) -> Result<(), String> {
        let file = self.ctx.home.join("config.toml");
        keel_host::trust::record(&file, &self.ctx.cwd, level).map_err(|e| e.to_string())?;
        *self.trust_flag.locked() = None;
        Ok(())
    }

    fn price(&self, model: &str) -> Option<keel_llm::Price> {
        let host = self.ctx.host().ok()?;
        host.config().config.price(model)
    }

    fn review(&self, agent: &Agent, base: Option<String>) -> keel_tui::ReviewFuture {
        let command = self.review.locked().clone();
        let caller = keel_delegate::seam::Caller {
            session_id: agent.session_id().as_str().to_owned(),
            cwd: agent.config().cwd.clone(),
        };
        Box::pin(async move {
            let command = command.ok_or("no agent to review for")?;
            let spec = keel_delegate::seam::ReviewSpec {
                base,
                ..Default::default()
            };
            let findings = command.run(&caller, spec).await?;
            Ok(keel_tui::Review {
                notice: keel_delegate::review::ReviewCommand::notice(&findings),
                findings,
            })
        })
    }

    fn sessions(&self) -> Vec<SessionEntry> {
        let mut list = self.ctx.store.list(Some(&self.ctx.cwd));
        list.retain(|s| s.problem.is_none());
        list.sort_by_key(|s| std::cmp::Reverse((s.last_modified, s.created)));
        list.into_iter()
            .map(|s| SessionEntry {
                bytes: std::fs::metadata(&s.path).map_or(0, |m| m.len()),
                modified: s
                    .last_modified
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(s.created, |d| d.as_millis() as i64),
                title: s.title.or(s.first_prompt).unwrap_or_default(),
                id: s.id,
                path: s.path,
            })
            .collect()
    }
}

/// How the UI starts.
#[derive(Debug, Default)]
pub struct Start<'a> {
    /// Sent at once.
    pub prompt: Option<String>,
    /// Continue this session.
    pub resume: Option<&'a Path>,
    /// Ask which session first.
    pub pick: bool,
    /// Plan mode or a permission mode from the start.
    pub mode: crate::cli::ModeArgs,
    /// The alternate screen instead of the terminal's scrollback.
    pub alt_screen: bool,
    /// A model script instead of the configured model.
    pub script: Option<PathBuf>,
}

/// Open the UI: a new session (with `prompt` sent at once), `resume`, or the picker.
pub fn interactive(ctx: &Ctx, start: Start<'_>) -> Result<ExitCode> {
    let Start {
        prompt,
        resume,
        pick,
        mode,
        alt_screen,
        script,
    } = start;
    let plan = mode.plan_mode();
    let source = Source {
        ctx,
        script,
        mode,
        review: Default::default(),
        trust_flag: std::sync::Mutex::new(ctx.project_trust()),
    };
    keel_tui::run(
        &source,
        keel_tui::Options {
            prompt,
            resume: resume.map(Path::to_path_buf),
            plan,
            pick,
            alternate_screen: alt_screen,
        },
    )
    .map_err(|e| anyhow!(e))?;
    Ok(ExitCode::SUCCESS)
}
