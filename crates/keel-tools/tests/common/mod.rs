//! Shared fixtures: a real temporary workspace, a recording host, a probe tool.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod recorder;

use async_trait::async_trait;
use keel_protocol::{EventBody, ToolCallBlock, ToolSchema};
use keel_tools::spill::SpillConfig;
use keel_tools::subprocess::{SubprocessConfig, SubprocessService};
use keel_tools::{
    ApprovalOutcome, BuiltinConfig, ExecMode, Pipeline, PipelineHooks, PipelineHost, SandboxMode,
    Tool, ToolContext, ToolEffect, ToolError, ToolOutcome, ToolOutput, ToolRegistry, Workspace,
};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A shared, ordered log of what happened.
#[derive(Clone, Default)]
pub struct Log(pub Arc<Mutex<Vec<String>>>);

impl Log {
    pub fn push(&self, s: impl Into<String>) {
        self.0.lock().unwrap().push(s.into());
    }
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
    pub fn snapshot(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// A host that records every call and answers approvals with a fixed decision.
pub struct RecordingHost {
    pub log: Log,
    pub approve: bool,
    pub emitted: Mutex<Vec<EventBody>>,
    pub asked: Mutex<Vec<(String, String)>>,
}

impl RecordingHost {
    pub fn new(log: Log, approve: bool) -> Self {
        RecordingHost {
            log,
            approve,
            emitted: Mutex::new(Vec::new()),
            asked: Mutex::new(Vec::new()),
        }
    }
    pub fn emitted(&self) -> Vec<EventBody> {
        self.emitted.lock().unwrap().clone()
    }
}

#[async_trait]
impl PipelineHost for RecordingHost {
    async fn call_started(&self, call: &ToolCallBlock) {
        self.log.push(format!("host:call_started:{}", call.id));
    }
    async fn checkpoint(&self) {
        self.log.push("host:checkpoint");
    }
    async fn ask_approval(&self, call: &ToolCallBlock, reason: &str) -> ApprovalOutcome {
        self.log.push(format!("host:ask:{}", call.id));
        self.asked
            .lock()
            .unwrap()
            .push((call.id.clone(), reason.to_owned()));
        if self.approve {
            ApprovalOutcome::Approved
        } else {
            ApprovalOutcome::Denied {
                reason: Some("not now".into()),
            }
        }
    }
    async fn emit(&self, body: EventBody) {
        self.log.push(format!("host:emit:{}", body.type_name()));
        self.emitted.lock().unwrap().push(body);
    }
    async fn settled(&self, call: &ToolCallBlock, outcome: &ToolOutcome) {
        assert_eq!(call.id, outcome.call_id);
        self.log.push(format!("host:settled:{}", call.id));
    }
}

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
        self.pipeline_with(sandbox, self.registry(vec![]), PipelineHooks::new())
    }

    pub fn pipeline_with(
        &self,
        sandbox: SandboxMode,
        registry: Arc<ToolRegistry>,
        hooks: PipelineHooks,
    ) -> Pipeline {
        Pipeline::builder(registry, Workspace::new(&self.ws, sandbox).unwrap())
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
