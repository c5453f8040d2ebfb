//! Shared fixtures: a real temporary workspace, a probe tool, and pipelines wired with
//! keel-testkit's recording hooks. The recording host and hooks themselves are
//! `keel_testkit::recording`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use keel_protocol::{ToolCallBlock, ToolSchema};
use keel_testkit::recording::{Log, RecordingHooks, RecordingHost};
use keel_tools::spill::SpillConfig;
use keel_tools::subprocess::{SubprocessConfig, SubprocessService};
use keel_tools::{
    BuiltinConfig, ExecMode, Pipeline, SandboxMode, Tool, ToolContext, ToolEffect, ToolError,
    ToolHooks, ToolOutcome, ToolOutput, ToolRegistry, Workspace,
};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A temporary workspace (`ws/`) next to an outside directory (`outside/`) and a spill dir.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub ws: PathBuf,
    pub outside: PathBuf,
    pub spill: PathBuf,
}

impl Fixture {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let ws = std::fs::canonicalize(ws).unwrap();
        let outside = std::fs::canonicalize(outside).unwrap();
        let spill = dir.path().join("spill");
        Fixture {
            dir,
            ws,
            outside,
            spill,
        }
    }

    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let p = self.ws.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        p
    }

    /// Set `rel`'s modification time to `minutes` minutes ago.
    pub fn age(&self, rel: &str, minutes: u64) {
        let when = std::time::SystemTime::now() - std::time::Duration::from_secs(60 * minutes);
        let file = std::fs::File::options()
            .write(true)
            .open(self.ws.join(rel))
            .unwrap();
        file.set_modified(when).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.ws.join(rel)).unwrap()
    }

    pub fn service(&self, base_env: Vec<(&str, &str)>, forward: &[&str]) -> SubprocessService {
        let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = base_env
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        if !env.iter().any(|(k, _)| k == "PATH") {
            env.push(("PATH".into(), std::env::var_os("PATH").unwrap_or_default()));
        }
        SubprocessService::new(SubprocessConfig {
            base_env: env,
            forward: forward.iter().map(|s| s.to_string()).collect(),
            grace: Duration::from_millis(300),
            spill_dir: self.spill.clone(),
        })
    }

    pub fn registry(&self, extra: Vec<Arc<dyn Tool>>) -> Arc<ToolRegistry> {
        let mut reg = ToolRegistry::with_builtins(&BuiltinConfig::default());
        for t in extra {
            reg.register(t).unwrap();
        }
        Arc::new(reg)
    }

    pub fn pipeline(&self, sandbox: SandboxMode) -> Pipeline {
        self.pipeline_with(sandbox, self.registry(vec![]), ToolHooks::new())
    }

    pub fn pipeline_with(
        &self,
        sandbox: SandboxMode,
        registry: Arc<ToolRegistry>,
        hooks: ToolHooks,
    ) -> Pipeline {
        self.pipeline_for(Workspace::new(&self.ws, sandbox).unwrap(), registry, hooks)
    }

    /// A pipeline over a workspace the test set up itself (extra roots, temp dir, network).
    pub fn pipeline_for(
        &self,
        workspace: Workspace,
        registry: Arc<ToolRegistry>,
        hooks: ToolHooks,
    ) -> Pipeline {
        Pipeline::builder(registry, workspace)
            .hooks(hooks)
            .spill(SpillConfig::new(&self.spill))
            .subprocess(self.service(vec![], &[]))
            .abort_grace(Duration::from_millis(300))
            .build()
            .unwrap()
    }
}

pub fn call(id: &str, name: &str, args: Value) -> ToolCallBlock {
    ToolCallBlock {
        id: id.into(),
        name: name.into(),
        arguments: args.to_string(),
    }
}

pub fn raw_call(id: &str, name: &str, raw: &str) -> ToolCallBlock {
    ToolCallBlock {
        id: id.into(),
        name: name.into(),
        arguments: raw.into(),
    }
}

/// Run one call with a host that approves nothing and records into a throwaway log.
pub async fn run_one(p: &Pipeline, c: ToolCallBlock) -> ToolOutcome {
    let host = RecordingHost::new(Log::default(), false);
    let mut out = p.run_batch(&[c], &host, Default::default()).await;
    assert_eq!(out.len(), 1);
    out.remove(0)
}

/// Shared counters of probe tools.
#[derive(Default)]
pub struct Probe {
    pub running: AtomicUsize,
    pub max_running: AtomicUsize,
    pub bodies: AtomicUsize,
    pub log: Log,
}

/// A test tool: sleeps `ms` (argument), records concurrency, optionally ignores cancellation.
pub struct ProbeTool {
    pub name: &'static str,
    pub mode: ExecMode,
    pub effect: ToolEffect,
    pub stubborn: bool,
    pub timeout: Option<Duration>,
    pub probe: Arc<Probe>,
}

impl ProbeTool {
    pub fn new(name: &'static str, mode: ExecMode, probe: &Arc<Probe>) -> Self {
        ProbeTool {
            name,
            mode,
            effect: ToolEffect::ReadOnly,
            stubborn: false,
            timeout: None,
            probe: probe.clone(),
        }
    }
}

#[async_trait]
impl Tool for ProbeTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: self.name.into(),
            description: "test probe".into(),
            parameters: json!({"type":"object","properties":{
                "ms":{"type":"integer","minimum":0},
                "text":{"type":"string"},
                "fail":{"type":"boolean"}
            }}),
        }
    }
    fn mode(&self) -> ExecMode {
        self.mode
    }
    fn effect(&self) -> ToolEffect {
        self.effect
    }
    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let p = &self.probe;
        p.bodies.fetch_add(1, Ordering::SeqCst);
        p.log.push(format!("body:start:{}", ctx.call.id));
        let now = p.running.fetch_add(1, Ordering::SeqCst) + 1;
        p.max_running.fetch_max(now, Ordering::SeqCst);
        let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(0);
        let sleep = tokio::time::sleep(Duration::from_millis(ms));
        let cancelled = if self.stubborn {
            sleep.await;
            false
        } else {
            tokio::select! {
                () = sleep => false,
                () = ctx.cancel.cancelled() => true,
            }
        };
        p.running.fetch_sub(1, Ordering::SeqCst);
        p.log.push(format!("body:end:{}", ctx.call.id));
        if cancelled {
            return Err(ToolError::Aborted("probe cancelled".into()));
        }
        if args.get("fail").and_then(Value::as_bool) == Some(true) {
            return Err(ToolError::Failed("probe failed on purpose".into()));
        }
        let text = args
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or("ok")
            .to_owned();
        Ok(ToolOutput::text(text).with_value(json!({"probe": ctx.call.id})))
    }
}

/// A fixture, the log shared by the hooks, the host and the probes, the probe counters and
/// the hooks.
pub struct Setup {
    pub f: Fixture,
    pub log: Log,
    pub probe: Arc<Probe>,
    pub rec: Arc<RecordingHooks>,
}

/// A pipeline with `rec` at every seam and the tools `tools` builds around the shared probe
/// counters (which log into `rec.log`).
pub fn setup(
    rec: RecordingHooks,
    tools: impl FnOnce(&Arc<Probe>) -> Vec<Arc<dyn Tool>>,
) -> (Setup, Pipeline) {
    let f = Fixture::new();
    let log = rec.log().clone();
    let probe = Arc::new(Probe {
        log: log.clone(),
        ..Probe::default()
    });
    let rec = Arc::new(rec);
    let reg = f.registry(tools(&probe));
    let p = f.pipeline_with(SandboxMode::WorkspaceWrite, reg, rec.hooks());
    (Setup { f, log, probe, rec }, p)
}

/// A parallel probe tool (`probe`) and an exclusive one (`solo`).
pub fn par(probe: &Arc<Probe>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ProbeTool::new("probe", ExecMode::Parallel, probe)),
        Arc::new(ProbeTool::new("solo", ExecMode::Exclusive, probe)),
    ]
}

/// The call ids of outcomes, in order.
pub fn ids(out: &[ToolOutcome]) -> Vec<&str> {
    out.iter().map(|o| o.call_id.as_str()).collect()
}
