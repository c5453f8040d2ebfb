//! `keel batch TASKS.jsonl` and the hidden `keel batch-job SPEC`: the arguments into a
//! [`keel_batch::Batch`] on its engine (docs/batch.md), and what it reports printed
//! ([`report`]). The scheduler, the engines, scoring and the Ray client are keel-batch's.

mod report;

use super::Ctx;
use crate::cli::{BatchArgs, BatchJobArgs, Common};
use anyhow::{Context, Result};
use keel_batch::{Batch, Engine, LocalEngine, Pricing, RAY_CONCURRENCY, RayEngine, RayOptions};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// `keel batch`.
pub fn run(ctx: &Ctx, args: BatchArgs) -> Result<ExitCode> {
    // Relative paths are relative to the working directory (--cwd), as other commands read.
    let tasks_path = ctx
        .cwd
        .join(&args.tasks)
        .canonicalize()
        .with_context(|| format!("task file {} does not exist", args.tasks.display()))?;
    let out = match &args.out {
        Some(dir) => ctx.cwd.join(dir),
        None => tasks_path.with_extension("batch"),
    };
    let batch = Batch::open(&tasks_path, &out, ctx.store.clone())?;
    let host = ctx.host()?;
    let config = host.config().config.clone();
    let default_model = ctx
        .common
        .model
        .clone()
        .or_else(|| config.model.clone())
        .unwrap_or_else(|| keel_llm::DEFAULT_MODEL.to_owned());
    let concurrency = match (args.concurrency, args.engine.as_str()) {
        (Some(n), _) => n as usize,
        (None, "ray") => RAY_CONCURRENCY,
        (None, _) => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let exe = std::env::current_exe().context("cannot find the keel binary")?;
    let mut engine: Box<dyn Engine> = match args.engine.as_str() {
        "ray" => Box::new(ray_engine(ctx, &args, &config, exe)?),
        _ => Box::new(LocalEngine::new(
            exe,
            forward(&ctx.common),
            Duration::from_secs(args.check_timeout),
        )),
    };
    let pricing = Pricing {
        default_model,
        price: Box::new(move |model| config.price(model)),
    };
    let mut progress = report::Progress::new();
    let outcome = batch.run(engine.as_mut(), concurrency, pricing, &mut progress)?;
    report::summary(&mut std::io::stdout().lock(), &outcome.results)?;
    Ok(if outcome.interrupted {
        ExitCode::from(130)
    } else if outcome.all_passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `keel batch-job SPEC` (on a Ray node).
pub fn job(ctx: &Ctx, args: &BatchJobArgs) -> Result<ExitCode> {
    Ok(if keel_batch::job::run(&ctx.cwd, &args.spec) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The Ray engine for `args`: the batch's flags, the model's key variables and the user's
/// configuration go to every job.
fn ray_engine(
    ctx: &Ctx,
    args: &BatchArgs,
    config: &keel_host::config::Config,
    exe: PathBuf,
) -> Result<RayEngine> {
    let address = args.address.clone().context(
        "--engine ray needs the Ray dashboard's address: --address http://HEAD:8265 (or \
         RAY_API_SERVER_ADDRESS)",
    )?;
    if ctx.common.config_file.is_some() {
        anyhow::bail!(
            "--config FILE is a file on this machine and is not shipped to Ray nodes: put its \
             settings in $KEEL_HOME/config.toml (shipped with every job) or -c KEY=VALUE"
        );
    }
    let mut names: Vec<String> = vec!["DEEPSEEK_API_KEY".into(), "DEEPSEEK_BASE_URL".into()];
    names.extend(ctx.common.api_key_env.clone());
    names.extend(
        config
            .providers
            .values()
            .filter_map(|p| p.api_key_env.clone()),
    );
    names.extend(args.pass_env.iter().cloned());
    let env = names
        .into_iter()
        .filter_map(|n| std::env::var(&n).ok().map(|v| (n, v)))
        .collect();
    let mut home_files = Vec::new();
    let mut ship = |rel: String| {
        if let Ok(data) = std::fs::read(ctx.home.join(&rel)) {
            home_files.push((rel, data));
        }
    };
    ship("config.toml".into());
    if let Some(profile) = &ctx.common.profile {
        ship(format!("profiles/{profile}.toml"));
    }
    Ok(RayEngine::new(RayOptions {
        address,
        retries: args.retries,
        cpus: args.cpus_per_task,
        keel_on_nodes: args.keel_on_nodes.clone(),
        env,
        check_timeout: Duration::from_secs(args.check_timeout),
        common: forward(&ctx.common),
        home_files,
        store: ctx.store.clone(),
        exe,
    })?)
}

/// The batch's global flags, for each task's `keel` (not `--cwd`: each task has its own).
fn forward(c: &Common) -> Vec<String> {
    let mut out = Vec::new();
    let mut opt = |flag: &str, value: &Option<String>| {
        if let Some(v) = value {
            out.push(flag.to_owned());
            out.push(v.clone());
        }
    };
    opt("--model", &c.model);
    opt("--provider", &c.provider);
    opt("--api", &c.api);
    opt("--base-url", &c.base_url);
    opt("--api-key-env", &c.api_key_env);
    opt("--profile", &c.profile);
    opt(
        "--config",
        &c.config_file.as_ref().map(|p| p.display().to_string()),
    );
    opt("--sandbox", &c.sandbox);
    opt("--approval", &c.approval);
    opt("--context-window", &c.context_window.map(|n| n.to_string()));
    opt("--max-output", &c.max_output.map(|n| n.to_string()));
    opt("--control", &c.control);
    opt("--context", &c.context);
    opt("--tools-mode", &c.tools_mode);
    opt("--preset", &c.preset);
    opt("--project-trust", &c.project_trust);
    if let Some(d) = &c.delegate {
        out.push(format!("--delegate={d}"));
    }
    for o in &c.overrides {
        out.push("-c".into());
        out.push(o.clone());
    }
    for (on, flag) in [
        (c.provenance, "--provenance"),
        (c.memory, "--memory"),
        (c.trust_project, "--trust-project"),
    ] {
        if on {
            out.push(flag.into());
        }
    }
    out
}
