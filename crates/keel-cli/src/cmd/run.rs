//! `keel run`, `keel demo`, `keel resume`: build an agent from configuration and drive it
//! headless, with progress on stderr and the final answer (or JSON events) on stdout.

use super::Ctx;
use crate::cli::{CompactArgs, DemoArgs, ResumeArgs, RunArgs};
use crate::cmd::progress::Progress;
use anyhow::{Context, Result, anyhow, bail};
use keel_agent::plugin::HostBuilder;
use keel_agent::{Agent, AgentConfig, ApprovalPolicy, TurnOutcome};
use keel_llm::{
    ApiKey, Format as ScriptFormat, ModelCatalogue, ModelInfo, ModelOverride, OpenAiProvider,
    Provider, ProviderConfig, ScriptedProvider,
};
use keel_protocol::SessionHeader;
use keel_session::{Format, PersistentSession, Session, WriterOptions, new_session_id, now_ms};
use keel_tools::spill::SpillConfig;
use keel_tools::subprocess::{SubprocessConfig, SubprocessService};
use keel_tools::{BuiltinConfig, Pipeline, SandboxMode, ToolRegistry, Workspace};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Everything resolved from flags and configuration that an agent needs.
struct Resolved {
    provider: Arc<dyn Provider>,
    provider_name: String,
    model: String,
    info: ModelInfo,
    sandbox: SandboxMode,
    approval: ApprovalPolicy,
    config: crate::config::Loaded,
}

fn resolve(ctx: &Ctx, script: Option<&Path>) -> Result<Resolved> {
    let config = ctx.config()?;
    let c = &config.config;
    let model = ctx
        .common
        .model
        .clone()
        .or_else(|| c.model.clone())
        .unwrap_or_else(|| keel_llm::DEFAULT_MODEL.to_owned());
    let provider_name = ctx
        .common
        .provider
        .clone()
        .or_else(|| c.provider.clone())
        .unwrap_or_else(|| "deepseek".into());
    let sandbox_name = ctx
        .common
        .sandbox
        .clone()
        .or_else(|| c.sandbox.clone())
        .unwrap_or_else(|| "workspace-write".into());
    let sandbox: SandboxMode = sandbox_name
        .parse()
        .map_err(|e| anyhow!("--sandbox: {e}"))?;
    let approval_name = ctx
        .common
        .approval
        .clone()
        .or_else(|| c.approval.clone())
        .unwrap_or_else(|| "ask".into());
    let approval = ApprovalPolicy::parse(&approval_name).ok_or_else(|| {
        anyhow!("--approval: unknown policy {approval_name:?}; expected ask, never or auto")
    })?;

    let mut catalogue = ModelCatalogue::default();
    for (name, o) in &c.models {
        catalogue.apply_override(
            name,
            ModelOverride {
                context_window: o.context_window,
                max_output: o.max_output,
            },
        );
    }
    catalogue.apply_override(
        &model,
        ModelOverride {
            context_window: ctx.common.context_window,
            max_output: ctx.common.max_output,
        },
    );
    let info = catalogue.lookup(&model);

    let provider: Arc<dyn Provider> = match script {
        Some(path) => Arc::new(
            ScriptedProvider::from_path(path)
                .with_context(|| format!("cannot use model script {}", path.display()))?
                .with_name("scripted"),
        ),
        None => {
            let pc = c.providers.get(&provider_name).cloned().unwrap_or_default();
            if !c.providers.contains_key(&provider_name) && provider_name != "deepseek" {
                bail!(
                    "unknown provider {provider_name:?}: add a [providers.{provider_name}] table with base_url and api_key_env to the configuration"
                );
            }
            let base_url = ctx
                .common
                .base_url
                .clone()
                .or(pc.base_url)
                .unwrap_or_else(|| keel_llm::DEFAULT_BASE_URL.to_owned());
            let key_env = pc
                .api_key_env
                .unwrap_or_else(|| keel_llm::API_KEY_ENV.to_owned());
            let key = ApiKey::from_env(&key_env)?;
            let mut pconf = ProviderConfig::new(provider_name.clone(), base_url, key);
            if let Some(secs) = pc.idle_timeout_secs {
                pconf.idle_timeout = Duration::from_secs(secs);
            }
            pconf.catalogue = catalogue.clone();
            Arc::new(OpenAiProvider::new(pconf)?)
        }
    };
    let provider_name = if script.is_some() {
        "scripted".to_owned()
    } else {
        provider_name
    };
    Ok(Resolved {
        provider,
        provider_name,
        model,
        info,
        sandbox,
        approval,
        config,
    })
}

/// Build the agent over `log`.
fn build_agent(
    ctx: &Ctx,
    r: &Resolved,
    log: PersistentSession,
    progress: &Progress,
) -> Result<Agent> {
    let c = &r.config.config;
    let session_id = log.session().header().id.clone();
    let cfg = BuiltinConfig::default();
    let mut bash = keel_tools::builtins::bash::BashConfig::default();
    if let Some(ms) = c.tools.bash_timeout_ms {
        bash.default_timeout = Duration::from_millis(ms);
    }
    let cfg = BuiltinConfig { bash, ..cfg };
    let registry = ToolRegistry::with_builtins(&cfg);
    let spill_dir = ctx.home.join("spill").join(session_id.as_str());
    let mut spill = SpillConfig::new(&spill_dir);
    if let Some(bytes) = c.tools.spill_bytes {
        spill.threshold = bytes;
    }
    let mut sub = SubprocessConfig::from_process_env(&spill_dir);
    sub.forward = c.tools.forward_env.clone().unwrap_or_default();
    let workspace = Workspace::new(&ctx.cwd, r.sandbox)
        .with_context(|| format!("cannot use workspace {}", ctx.cwd.display()))?;
    let subprocess = SubprocessService::new(sub);
    let mut host = HostBuilder::new(ctx.cwd.clone(), ctx.home.clone());
    host.subprocess = Some(subprocess.clone());
    progress.install(&mut host.agent_hooks);
    crate::plugins::install_rows(&r.config, &mut host, &crate::plugins::forced(&ctx.common))?;
    let mut registry = registry;
    for tool in std::mem::take(&mut host.tools) {
        let name = tool.schema().name;
        registry
            .register(tool)
            .map_err(|e| anyhow!("cannot register plugin tool {name}: {e}"))?;
    }
    let registry = Arc::new(registry);
    let hooks = host.hooks;
    let agent_hooks = host.agent_hooks;
    let pipeline = Pipeline::builder(registry, workspace)
        .hooks(keel_tools::PipelineHooks::layered(
            &hooks.tools,
            &agent_hooks.tools,
        ))
        .plan_state(cfg.plan.clone())
        .spill(spill)
        .subprocess(subprocess)
        .build()
        .with_context(|| format!("cannot prepare the spill directory {}", spill_dir.display()))?;
    let mut config = AgentConfig::new(
        r.provider_name.clone(),
        r.model.clone(),
        r.info,
        ctx.cwd.clone(),
    );
    config.keel_home = Some(ctx.home.clone());
    config.approval = r.approval;
    config.thinking = c.agent.thinking;
    config.reasoning_effort = c.agent.reasoning_effort.clone();
    config.temperature = c.agent.temperature;
    if let Some(n) = c.agent.max_steps {
        config.max_steps = n;
    }
    if let Some(b) = c.agent.instructions_budget {
        config.instructions_budget = b;
    }
    if let Some(p) = &c.agent.persona {
        config.persona = p.clone();
    }
    if let Some(n) = c.agent.retry_max {
        config.retry.max_retries = n;
    }
    if let Some(ms) = c.agent.retry_base_ms {
        config.retry.base_delay = Duration::from_millis(ms);
    }
    let agent = Agent::builder(config, r.provider.clone(), pipeline, log)
        .hooks(hooks)
        .agent_hooks(agent_hooks)
        .build()?;
    HostBuilder::bind(host.on_agent, &agent);
    Ok(agent)
}

fn new_log(ctx: &Ctx, zstd: bool) -> Result<PersistentSession> {
    let header = SessionHeader::new(
        new_session_id(),
        now_ms(),
        Some(ctx.cwd.display().to_string()),
    );
    let options = WriterOptions {
        format: if zstd { Format::Zstd } else { Format::Plain },
        ..WriterOptions::default()
    };
    PersistentSession::create(&ctx.store, &ctx.cwd, Session::new(header), options).with_context(
        || {
            format!(
                "cannot create a session under {}",
                ctx.store.home().display()
            )
        },
    )
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Drive queued turns with Ctrl-C handling; returns the last outcome.
fn drive(agent: &Agent) -> Result<Option<TurnOutcome>> {
    let rt = runtime()?;
    rt.block_on(async {
        let watcher = agent.clone();
        let signals = tokio::spawn(async move {
            let mut presses = 0;
            while tokio::signal::ctrl_c().await.is_ok() {
                presses += 1;
                if presses == 1 {
                    let _ = writeln!(
                        std::io::stderr(),
                        "\nkeel: cancelling the turn (Ctrl-C again to exit)"
                    );
                    watcher.cancel_turn();
                } else {
                    std::process::exit(130);
                }
            }
        });
        let out = agent.run_until_idle().await;
        // Jobs still running here outlived the wake budget: stop them with the process.
        agent.kill_jobs();
        signals.abort();
        Ok(out?)
    })
}

fn finish(agent: &Agent, outcome: Option<TurnOutcome>, json: bool) -> Result<ExitCode> {
    let path = agent.log().writer().path().to_path_buf();
    let mut err = std::io::stderr().lock();
    let Some(outcome) = outcome else {
        writeln!(err, "keel: nothing to run (session {})", agent.session_id())?;
        return Ok(ExitCode::SUCCESS);
    };
    if !json {
        let mut out = std::io::stdout().lock();
        if !outcome.final_text.is_empty() {
            writeln!(out, "{}", outcome.final_text)?;
        }
    }
    writeln!(
        err,
        "keel: turn {} ended: {} — session {} ({})",
        outcome.turn,
        describe(&outcome.reason),
        agent.session_id(),
        path.display()
    )?;
    Ok(if outcome.completed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn describe(reason: &keel_protocol::TurnEndReason) -> String {
    use keel_protocol::TurnEndReason::*;
    match reason {
        Completed => "completed".into(),
        Aborted { reason } => format!("aborted ({reason})"),
        Blocked { reason } => format!(
            "blocked ({})",
            reason.as_deref().unwrap_or("no reason given")
        ),
        // A model failure's message already starts with its code; say it once.
        Error { code, message } => {
            let detail = message
                .strip_prefix(code.as_str())
                .and_then(|m| m.strip_prefix(": "))
                .unwrap_or(message);
            format!("error {code}: {detail}")
        }
        MaxTokens => "the model hit its output limit (max-tokens)".into(),
        Interrupted => "interrupted".into(),
    }
}

fn read_prompt(prompt: Option<String>) -> Result<String> {
    let text = match prompt {
        Some(p) => p,
        None => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("cannot read the prompt from stdin")?;
            s
        }
    };
    if text.trim().is_empty() {
        bail!("empty prompt: pass the task as an argument or on stdin");
    }
    Ok(text)
}

/// `keel run`.
pub fn run(ctx: &Ctx, args: RunArgs) -> Result<ExitCode> {
    let prompt = read_prompt(args.prompt)?;
    let r = resolve(ctx, args.script.as_deref())?;
    let progress = Progress::new(args.json);
    let agent = build_agent(ctx, &r, new_log(ctx, args.zstd)?, &progress)?;
    agent.followup(&prompt)?;
    let outcome = drive(&agent)?;
    finish(&agent, outcome, args.json)
}

/// `keel resume`.
pub fn resume(ctx: &Ctx, args: ResumeArgs) -> Result<ExitCode> {
    let path = match &args.session {
        Some(q) => ctx.store.resolve(q, &ctx.cwd)?,
        None => latest_session(ctx)?,
    };
    let (log, load, repair) = PersistentSession::resume(&path, WriterOptions::default())
        .with_context(|| format!("cannot resume {}", path.display()))?;
    let mut err = std::io::stderr().lock();
    if let Some(torn) = &load.torn {
        writeln!(
            err,
            "keel: dropped a torn last record of {} at line {} ({})",
            path.display(),
            torn.line,
            torn.reason
        )?;
    }
    if !repair.is_noop() {
        writeln!(
            err,
            "keel: crash repair closed the interrupted turn: {repair:?}"
        )?;
    }
    drop(err);
    let r = resolve(ctx, args.script.as_deref())?;
    let progress = Progress::new(args.json);
    let agent = build_agent(ctx, &r, log, &progress)?;
    if let Some(prompt) = args.prompt {
        agent.followup(&prompt)?;
    }
    let outcome = drive(&agent)?;
    finish(&agent, outcome, args.json)
}

/// `keel compact`.
pub fn compact(ctx: &Ctx, args: CompactArgs) -> Result<ExitCode> {
    let path = match &args.session {
        Some(q) => ctx.store.resolve(q, &ctx.cwd)?,
        None => latest_session(ctx)?,
    };
    let (log, _, _) = PersistentSession::resume(&path, WriterOptions::default())
        .with_context(|| format!("cannot open {}", path.display()))?;
    let r = resolve(ctx, args.script.as_deref())?;
    let agent = build_agent(ctx, &r, log, &Progress::new(false))?;
    let report = runtime()?.block_on(keel_agent::compaction::compact_now(
        &agent,
        keel_agent::compaction::CompactionReason::Manual,
    ))?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "compacted {}: {:?}; estimated request tokens {} → {}; pruned {} tool result(s){}",
        agent.session_id(),
        report.outcome,
        report.before_tokens,
        report.after_tokens,
        report.pruned.len(),
        match report.summarised {
            Some(span) => format!("; summarised seqs {}..={}", span.start, span.end),
            None => String::new(),
        }
    )?;
    Ok(ExitCode::SUCCESS)
}

fn latest_session(ctx: &Ctx) -> Result<PathBuf> {
    let mut sessions = ctx.store.list(Some(&ctx.cwd));
    sessions.retain(|s| s.problem.is_none());
    sessions.sort_by_key(|s| std::cmp::Reverse((s.last_modified, s.created)));
    sessions.into_iter().next().map(|s| s.path).ok_or_else(|| {
        anyhow!(
            "no session to resume in {} (see `keel sessions list --all`)",
            ctx.cwd.display()
        )
    })
}

/// `keel demo`.
pub fn demo(ctx: &Ctx, args: DemoArgs) -> Result<ExitCode> {
    let dir = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
            d.canonicalize()?
        }
        None => tempfile::Builder::new()
            .prefix("keel-demo-")
            .tempdir()
            .context("cannot create a temp dir")?
            .keep(),
    };
    crate::cmd::demo::write_project(&dir)?;
    let demo_ctx = Ctx {
        common: crate::cli::Common {
            cwd: Some(dir.clone()),
            approval: Some("auto".into()),
            ..ctx.common.clone()
        },
        home: ctx.home.clone(),
        cwd: dir.clone(),
        store: keel_session::Store::new(ctx.home.clone()),
    };
    let provider: Arc<dyn Provider> = Arc::new(
        ScriptedProvider::from_str(crate::cmd::demo::SCRIPT, ScriptFormat::Yaml)?
            .with_name("scripted"),
    );
    let mut r = resolve_scripted(&demo_ctx, provider)?;
    r.approval = ApprovalPolicy::Auto;
    let progress = Progress::new(args.json);
    let agent = build_agent(&demo_ctx, &r, new_log(&demo_ctx, false)?, &progress)?;
    let mut err = std::io::stderr().lock();
    writeln!(
        err,
        "keel demo: a scripted model works on a small project in {}",
        dir.display()
    )?;
    drop(err);
    agent.followup(crate::cmd::demo::PROMPT)?;
    let outcome = drive(&agent)?;
    let code = finish(&agent, outcome, args.json)?;
    let path = agent.log().writer().path().to_path_buf();
    let mut err = std::io::stderr().lock();
    writeln!(
        err,
        "keel demo: see the whole session with:\n  keel sessions show {}",
        path.display()
    )?;
    Ok(code)
}

fn resolve_scripted(ctx: &Ctx, provider: Arc<dyn Provider>) -> Result<Resolved> {
    let config = ctx.config()?;
    let model = keel_llm::DEFAULT_MODEL.to_owned();
    let info = ModelCatalogue::default().lookup(&model);
    Ok(Resolved {
        provider,
        provider_name: "scripted".into(),
        model,
        info,
        sandbox: SandboxMode::WorkspaceWrite,
        approval: ApprovalPolicy::Auto,
        config,
    })
}
