//! Command implementations and what they share ([`Ctx`]).

mod acp;
mod answers;
mod attach;
mod batch;
mod cards;
mod config_cmd;
mod config_file;
mod continuity;
mod demo;
mod images;
mod login;
mod mcp;
mod mcp_server;
mod plugin;
#[cfg(test)]
mod present_tests;
mod progress;
mod provenance;
mod run;
mod serve;
mod serve_client;
mod sessions;
mod source;
mod trust;
mod tui;
mod web;

use crate::cli::{Cli, Command, Common};
use anyhow::{Context, Result};
use keel_session::Store;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// What every command may need: flags, `$KEEL_HOME`, the working directory and the store.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// Global flags.
    pub common: Common,
    /// `$KEEL_HOME` (default `~/.keel`).
    pub home: PathBuf,
    /// Working directory (canonical).
    pub cwd: PathBuf,
    /// The session store under `home`.
    pub store: Store,
}

impl Ctx {
    fn new(common: Common) -> Result<Ctx> {
        let home = keel_home();
        let cwd = match &common.cwd {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        let cwd = cwd
            .canonicalize()
            .with_context(|| format!("working directory {} does not exist", cwd.display()))?;
        let store = Store::new(home.clone());
        Ok(Ctx {
            common,
            home,
            cwd,
            store,
        })
    }

    /// Load the layered configuration of this workspace (flags `--profile`, `--config`, `-c`).
    pub fn host(&self) -> Result<keel_host::Host> {
        self.host_with(keel_host::plugins::builtin())
    }

    /// [`Ctx::host`] with another plugin set (a front end's own plugin instances).
    pub fn host_with(
        &self,
        plugins: Vec<Box<dyn keel_agent::plugin::Plugin>>,
    ) -> Result<keel_host::Host> {
        let (profile, mut overrides) = cards::profile_sources(self);
        if let Some(mode) = &self.common.tools_mode {
            overrides.push(format!("tools_mode={mode}"));
        }
        if let Some(preset) = &self.common.preset {
            overrides.push(format!("preset={preset}"));
        }
        Ok(keel_host::Host::load_with(
            &keel_host::Sources {
                home: self.home.clone(),
                project: self.cwd.clone(),
                profile,
                config_file: self.common.config_file.clone(),
                overrides,
                trust: self.project_trust(),
            },
            plugins,
        )?)
    }

    /// The run's own trust decision: `--trust-project`, or the supervisor's (`--project-trust`).
    pub fn project_trust(&self) -> Option<keel_host::ProjectTrust> {
        if self.common.trust_project {
            return Some(keel_host::ProjectTrust::Trusted);
        }
        self.common
            .project_trust
            .as_deref()
            .and_then(keel_host::ProjectTrust::parse)
    }

    /// Say on stderr what an untrusted workspace holds that keel left alone, and how to trust
    /// it (headless front ends, once per agent built; the UI and ACP show it in the session).
    pub fn warn_untrusted(&self, host: &keel_host::Host) {
        let loaded = host.config();
        if let Some(line) = keel_host::trust::notice(&loaded.trust, &loaded.ignored) {
            let _ = writeln!(std::io::stderr(), "keel: {line}");
        }
    }

    /// Say on stderr, once, that the approval word in force is the old `never` (from
    /// `--approval` or from the file `factory` names), which keel reads as `deny`.
    pub fn note_approval(&self, factory: &keel_host::AgentFactory<'_>) {
        if let Some(note) = factory.approval_note() {
            let _ = writeln!(std::io::stderr(), "keel: note: {note}");
        }
    }

    /// The newest readable session file of this directory that has a turn (what `keel resume`
    /// picks: one opened and left without a prompt holds nothing to continue).
    pub fn latest_session(&self) -> Option<PathBuf> {
        let mut sessions = self.store.list(Some(&self.cwd));
        sessions.retain(|s| s.problem.is_none() && s.turns > 0);
        sessions.sort_by_key(|s| std::cmp::Reverse((s.last_modified, s.created)));
        sessions.into_iter().next().map(|s| s.path)
    }

    /// The command-line flags that override the configuration, typed (`--sandbox`,
    /// `--approval` are parsed here so a misspelling names the flag).
    pub fn flags(&self) -> Result<keel_host::Flags> {
        let c = &self.common;
        let sandbox = c
            .sandbox
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(|e| anyhow::anyhow!("--sandbox: {e}"))?;
        let approval = c
            .approval
            .as_deref()
            .map(|name| {
                keel_agent::ApprovalPolicy::parse(name).ok_or_else(|| {
                    anyhow::anyhow!(
                        "--approval: unknown policy {name:?}; expected {}",
                        keel_agent::ApprovalPolicy::EXPECTED
                    )
                })
            })
            .transpose()?;
        let approval_from = c.approval.as_deref().map(|name| {
            c.approval_from
                .clone()
                .unwrap_or_else(|| format!("--approval {name}"))
        });
        // The word as typed (not one `--full-auto` stands for).
        let approval_word = c.approval.clone().filter(|_| c.approval_from.is_none());
        Ok(keel_host::Flags {
            model: c.model.clone(),
            provider: c.provider.clone(),
            base_url: c.base_url.clone(),
            api: c.api.as_deref().map(str::parse).transpose()?,
            api_key_env: c.api_key_env.clone(),
            api_key: None,
            sandbox,
            approval,
            approval_from,
            approval_word,
            context_window: c.context_window,
            max_output: c.max_output,
            reasoning_effort: None,
            enable: [
                c.provenance.then_some(keel_provenance::ID.as_str()),
                (c.memory || c.context.is_some()).then_some(keel_memory::ID.as_str()),
            ]
            .into_iter()
            .flatten()
            .collect(),
            row_edits: match c.control.as_deref() {
                Some("contract") => control_contract(),
                _ => Vec::new(),
            }
            .into_iter()
            .chain(context_edit(c.context.as_deref()))
            .chain(delegate_edit(c.delegate.as_deref()))
            .chain(cards::roleplay_edits(self))
            .collect(),
        })
    }
}

/// `--delegate[=PROVIDER]`: the delegate row's config with `provider` set.
fn delegate_edit(provider: Option<&str>) -> Option<keel_host::RowEdit> {
    let edit: fn(serde_json::Value) -> serde_json::Value = match provider? {
        "acp" => keel_delegate::plugin::provider_acp,
        "consult" => keel_delegate::plugin::provider_consult,
        "inprocess" => keel_delegate::plugin::provider_inprocess,
        _ => keel_delegate::plugin::provider_keel,
    };
    Some(keel_host::RowEdit::new(keel_delegate::ID.as_str(), edit))
}

/// `--context MODE`: the memory row's config with `context_mode` (and `policy`) set.
fn context_edit(mode: Option<&str>) -> Option<keel_host::RowEdit> {
    let edit: fn(serde_json::Value) -> serde_json::Value = match mode? {
        "native" => keel_memory::plugin::context_native,
        "managed:recent" => keel_memory::plugin::context_recent,
        "managed:relevant" => keel_memory::plugin::context_relevant,
        _ => keel_memory::plugin::context_managed,
    };
    Some(keel_host::RowEdit::new(keel_memory::ID.as_str(), edit))
}

/// `--control contract`: the continuity row's config with `control = "contract"`.
pub(crate) fn control_contract() -> Vec<keel_host::RowEdit> {
    vec![keel_host::RowEdit::new(
        keel_continuity::ID.as_str(),
        keel_continuity::control::with_contract,
    )]
}

/// `$KEEL_HOME`, or `~/.keel`.
pub fn keel_home() -> PathBuf {
    match std::env::var_os("KEEL_HOME") {
        Some(h) if !h.is_empty() => PathBuf::from(h),
        _ => std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."))
            .join(".keel"),
    }
}

/// `keel` or `keel "PROMPT"`: the UI in a terminal; headless otherwise.
fn interactive_or_headless(
    ctx: &Ctx,
    prompt: Option<String>,
    mode: crate::cli::ModeArgs,
    alt_screen: bool,
) -> Result<ExitCode> {
    if tui::is_interactive() {
        return tui::interactive(
            ctx,
            tui::Start {
                prompt,
                mode,
                alt_screen,
                ..Default::default()
            },
        );
    }
    let mut err = std::io::stderr().lock();
    match prompt {
        Some(prompt) => {
            writeln!(
                err,
                "keel: not a terminal: running the prompt headless (as `keel run`)"
            )?;
            drop(err);
            run::run(
                ctx,
                crate::cli::RunArgs {
                    prompt: Some(prompt),
                    mode,
                    ..Default::default()
                },
            )
        }
        None => {
            writeln!(
                err,
                "keel: not a terminal: the interactive UI needs one. Run a task headless with \
                 `keel run \"PROMPT\"`, or see `keel --help`."
            )?;
            Ok(ExitCode::from(2))
        }
    }
}

/// Run the parsed command line.
pub fn dispatch(cli: Cli) -> Result<ExitCode> {
    let ctx = Ctx::new(cli.common)?;
    let command = match (cli.command, cli.continue_latest) {
        (Some(_), true) => anyhow::bail!(
            "--continue is `keel resume --last [PROMPT]` and takes no command: use \
             `keel --continue \"PROMPT\"` or `keel resume --last \"PROMPT\"`"
        ),
        (Some(command), false) => command,
        // `keel --continue [PROMPT]`: `keel resume --last [PROMPT]`.
        (None, true) => Command::Resume(crate::cli::ResumeArgs {
            session: None,
            prompt: cli.prompt,
            last: true,
            json: false,
            script: None,
            approve_plan: false,
            mode: cli.mode,
        }),
        (None, false) => {
            return interactive_or_headless(&ctx, cli.prompt, cli.mode, cli.alt_screen);
        }
    };
    match command {
        Command::Run(args) => run::run(&ctx, args),
        Command::Demo(args) => run::demo(&ctx, args),
        // `keel resume` without a prompt, in a terminal: the picker (or the named session,
        // or with --last the latest) in the UI. `keel resume --last PROMPT` stays headless.
        Command::Resume(args)
            if args.prompt.is_none()
                && (!args.last || args.session.is_none())
                && !args.json
                && !args.approve_plan
                && args.mode.permission_mode.is_none()
                && tui::is_interactive() =>
        {
            let path = match (&args.session, args.last) {
                (Some(q), _) => Some(ctx.store.resolve(q, &ctx.cwd)?),
                (None, true) => Some(run::latest_session(&ctx)?),
                (None, false) => None,
            };
            tui::interactive(
                &ctx,
                tui::Start {
                    pick: path.is_none(),
                    mode: args.mode.clone(),
                    alt_screen: cli.alt_screen,
                    resume: path.as_deref(),
                    script: args.script,
                    ..Default::default()
                },
            )
        }
        Command::Resume(args) => run::resume(&ctx, args),
        Command::Compact(args) => run::compact(&ctx, args),
        Command::Fork(args) => sessions::fork(&ctx, &args),
        Command::Rewind(args) => sessions::rewind(&ctx, &args),
        Command::Review(args) => run::review(&ctx, args),
        Command::Sessions(cmd) => sessions::run(&ctx, cmd),
        Command::Config(cmd) => config_cmd::run(&ctx, cmd),
        Command::Trace(args) => provenance::trace_cmd(&ctx, args),
        Command::Provenance(cmd) => provenance::run(&ctx, cmd),
        Command::Continuity(cmd) => continuity::run(&ctx, cmd),
        Command::Cards(cmd) => cards::run(&ctx, cmd),
        Command::Chat(args) => cards::chat(ctx, args),
        Command::McpServer(args) => mcp_server::run(&ctx, args),
        Command::Acp(args) => acp::run(&ctx, args),
        Command::Serve(args) => serve::run(&ctx, args),
        Command::Attach(args) => attach::run(&ctx, args, cli.alt_screen),
        Command::Web(args) => web::run(&ctx, &args),
        Command::Mcp(cmd) => mcp::run(&ctx, cmd),
        Command::Plugin(cmd) => plugin::run(&ctx, cmd),
        Command::Trust(args) => trust::run(&ctx, args),
        Command::Login(args) => login::login(&ctx, &args),
        Command::Logout(args) => login::logout(&ctx, &args),
        Command::Batch(args) => batch::run(&ctx, args),
        Command::BatchJob(args) => batch::job(&ctx, &args),
    }
}
