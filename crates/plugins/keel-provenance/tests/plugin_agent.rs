//! The provenance plugin through the real agent loop and tool pipeline (scripted model only):
//! real files, a real session log, a real journal under a temp `$KEEL_HOME`. The Recorder's own
//! classification and queries are unit-tested in `capture.rs`; these tests prove that the seams
//! feed it the right facts, in a deterministic order, without changing any tool result.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use keel_agent::ToolSetup;
use keel_agent::plugin::InstallContext;
use keel_agent::{Agent, AgentConfig};
use keel_llm::{ModelCatalogue, Provider, ScriptFormat, ScriptedProvider};
use keel_protocol::{ContentBlock, SessionHeader, SessionId, ToolSchema};
use keel_provenance::{Direction, Provenance, load_snapshot, trace};
use keel_session::{PersistentSession, Session, Store, WriterOptions};
use keel_tools::{
    BatchOptions, BuiltinConfig, ExecMode, ExecuteMiddleware, ExecuteNext, GuardDecision,
    GuardHook, HookContext, NullCaller, PostDecision, PostExecuteHook, PreDecision, PreExecuteHook,
    ResultDraft, SandboxMode, Tool, ToolContext, ToolEffect, ToolError, ToolHooks, ToolOutput,
    ToolRegistry, Workspace,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

// ---------------------------------------------------------------- test hooks and tools

fn path_arg(args: &Value) -> &str {
    args["file_path"].as_str().unwrap_or("")
}

/// Denies reads of `deny.txt` at `tools/pre-execute`.
struct DenyPre;
#[async_trait]
impl PreExecuteHook for DenyPre {
    async fn pre_execute(&self, _: &HookContext<'_>, args: &Value) -> PreDecision {
        if path_arg(args) == "deny.txt" {
            PreDecision::Deny("deny.txt is off limits".into())
        } else {
            PreDecision::Allow
        }
    }
}

/// Denies reads of `guarded.txt` at `tools/guard`.
struct Guard;
#[async_trait]
impl GuardHook for Guard {
    async fn check(&self, _: &HookContext<'_>, args: &Value) -> GuardDecision {
        if path_arg(args) == "guarded.txt" {
            GuardDecision::Deny("guarded by policy".into())
        } else {
            GuardDecision::Pass
        }
    }
}

/// Fails `blocked.txt` inside `tools/execute` without running the body.
struct ShortCircuit;
#[async_trait]
impl ExecuteMiddleware for ShortCircuit {
    async fn around(
        &self,
        _: &HookContext<'_>,
        args: Value,
        next: ExecuteNext<'_>,
    ) -> Result<ToolOutput, ToolError> {
        if path_arg(&args) == "blocked.txt" {
            return Err(ToolError::Failed(
                "middleware refused before dispatch".into(),
            ));
        }
        next.run(args).await
    }
}

/// Redacts results containing the secret (content and value).
struct Redact;
#[async_trait]
impl PostExecuteHook for Redact {
    async fn post_execute(&self, _: &HookContext<'_>, r: &ResultDraft) -> PostDecision {
        let text: String = r
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        if text.contains(SECRET) {
            PostDecision::ReplaceContent(vec![ContentBlock::text("[redacted]")])
        } else {
            PostDecision::Accept
        }
    }
}

const SECRET: &str = "SECRET-TOKEN-4242";

/// Cancels the running turn from inside its body, then stops (`ABORTED`).
struct CancelTurn(Arc<OnceLock<Agent>>);
#[async_trait]
impl Tool for CancelTurn {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "cancel_turn".into(),
            description: "test: cancel the turn".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }
    async fn execute(&self, _: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        self.0.get().unwrap().cancel_turn();
        ctx.cancel.cancelled().await;
        Err(ToolError::Aborted("stopped on cancel".into()))
    }
}

/// Runs one nested `read` of `ok.txt` through the agent's pipeline, as a child dispatch.
struct Nested(Arc<OnceLock<Agent>>);
#[async_trait]
impl Tool for Nested {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "nested".into(),
            description: "test: run a nested read".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }
    fn mode(&self) -> ExecMode {
        ExecMode::Exclusive
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, _: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let agent = self.0.get().unwrap().clone();
        let call = keel_protocol::ToolCallBlock {
            id: "inner_1".into(),
            name: "read".into(),
            arguments: r#"{"path":"ok.txt"}"#.into(),
        };
        let opts = BatchOptions {
            cancel: ctx.cancel.clone(),
            parent: Some(ctx.token),
        };
        let out = agent
            .pipeline()
            .run_batch_with(&[call], &NullCaller, opts)
            .await;
        Ok(ToolOutput::text(format!("nested: {}", out[0].text().len())))
    }
}

// ---------------------------------------------------------------- fixture

#[derive(Clone, Copy, PartialEq)]
enum Capture {
    Off,
    Journal,
}

struct Ran {
    agent: Agent,
    home: PathBuf,
    session: String,
}

impl Ran {
    fn journal(&self) -> PathBuf {
        self.home.join("provenance").join(&self.session)
    }
    fn receipts(&self) -> Vec<Value> {
        std::fs::read_to_string(self.journal().join("receipts.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
    fn snapshot(&self) -> keel_provenance::Snapshot {
        load_snapshot(&self.journal()).unwrap().0
    }
    /// `tool/result` data by call id (message id dropped: it is random).
    fn results(&self) -> Vec<(String, Value)> {
        let log = self.agent.log();
        let mut out = Vec::new();
        for e in log.session().events() {
            if e.type_name() != "tool/result" {
                continue;
            }
            let mut v: Value = serde_json::from_str(&e.to_json().unwrap()).unwrap();
            let data = v["data"].as_object_mut().unwrap();
            data["message"].as_object_mut().unwrap().remove("id");
            let id = data["message"]["content"][0]["toolCallId"]
                .as_str()
                .unwrap()
                .to_owned();
            out.push((id, Value::Object(data.clone())));
        }
        out
    }
    fn result_text(&self, call: &str) -> String {
        let (_, data) = self
            .results()
            .into_iter()
            .find(|(id, _)| id == call)
            .unwrap();
        data["message"]["content"][0]["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect()
    }
}

fn hooks() -> ToolHooks {
    ToolHooks::new()
        .pre_execute(Arc::new(DenyPre))
        .guard(Arc::new(Guard))
        .execute(Arc::new(ShortCircuit))
        .post_execute(Arc::new(Redact))
}

fn write_files(work: &Path) {
    std::fs::write(work.join("ok.txt"), "alpha\nbeta\n").unwrap();
    std::fs::write(work.join("deny.txt"), "x\n").unwrap();
    std::fs::write(work.join("guarded.txt"), "x\n").unwrap();
    std::fs::write(work.join("blocked.txt"), "x\n").unwrap();
    std::fs::write(work.join("secret.txt"), format!("key={SECRET}\n")).unwrap();
}

async fn run(script: &str, capture: Capture, work: &Path, home: &Path, session: &str) -> Ran {
    let provider: Arc<dyn Provider> = Arc::new(
        ScriptedProvider::from_str(script, ScriptFormat::Yaml)
            .unwrap()
            .with_name("scripted"),
    );
    let store = Store::new(home.to_path_buf());
    let header = SessionHeader::new(SessionId(session.into()), 0, None);
    let log =
        PersistentSession::create(&store, work, Session::new(header), WriterOptions::default())
            .unwrap();
    let subprocess = keel_tools::subprocess::SubprocessService::new(
        keel_tools::subprocess::SubprocessConfig::from_process_env(home.join("spill")),
    );
    let mut host = InstallContext::new(work.to_path_buf(), home.to_path_buf(), subprocess);
    host.hooks.tools = hooks();
    if capture == Capture::Journal {
        Provenance::journal(home.to_path_buf()).install(&mut host);
    }
    let cell = Arc::new(OnceLock::new());
    let cfg = BuiltinConfig::default();
    let mut registry = ToolRegistry::with_builtins(&cfg);
    registry
        .register(Arc::new(CancelTurn(cell.clone())))
        .unwrap();
    registry.register(Arc::new(Nested(cell.clone()))).unwrap();
    for t in std::mem::take(&mut host.tools) {
        registry.register(t).unwrap();
    }
    let tools = ToolSetup::new(
        registry,
        Workspace::new(work, SandboxMode::WorkspaceWrite).unwrap(),
    );
    let model = "deepseek-v4-flash";
    let config = AgentConfig::new(
        "scripted",
        model,
        ModelCatalogue::default().lookup(model),
        work.to_path_buf(),
    );
    let agent = Agent::builder(config, provider, tools, log)
        .hooks(host.hooks)
        .agent_hooks(host.agent_hooks)
        .build()
        .unwrap();
    InstallContext::bind(host.on_agent, &agent);
    let _ = cell.set(agent.clone());
    agent.followup("go").unwrap();
    agent.run_pending().await.unwrap();
    Ran {
        agent,
        home: home.to_path_buf(),
        session: session.into(),
    }
}

fn dirs() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let base = root.path().canonicalize().unwrap();
    let (work, home) = (base.join("ws"), base.join("home"));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    write_files(&work);
    (root, work, home)
}

const MIXED: &str = r#"
- tool_calls:
    - { id: r_ok, name: read, arguments: { path: ok.txt } }
    - { id: r_fail, name: read, arguments: { path: missing.txt } }
    - { id: r_deny, name: read, arguments: { path: deny.txt } }
    - { id: r_guard, name: read, arguments: { path: guarded.txt } }
    - { id: r_short, name: read, arguments: { path: blocked.txt } }
    - { id: r_secret, name: read, arguments: { path: secret.txt } }
    - { id: r_unknown, name: no_such_tool, arguments: {} }
- tool_calls:
    - { id: q_trace, name: trace, arguments: { target_id: "result:r_secret" } }
    - { id: q_node, name: get_node, arguments: { id: "result:r_secret" } }
- text: done
"#;

const CANCEL: &str = r#"
- tool_calls:
    - { id: c_cancel, name: cancel_turn, arguments: {} }
    - { id: c_after, name: read, arguments: { path: ok.txt } }
"#;

fn occurrence_stages(snap: &keel_provenance::Snapshot, target: &str) -> Vec<String> {
    let t = trace(snap, target, Direction::Backward, 32).unwrap();
    t.nodes
        .iter()
        .filter_map(|n| n.stage.as_deref().map(str::to_owned))
        .collect()
}

fn category(snap: &keel_provenance::Snapshot, target: &str) -> Option<String> {
    let t = trace(snap, target, Direction::Backward, 32).unwrap();
    t.nodes
        .iter()
        .find_map(|n| n.category.as_deref().map(str::to_owned))
}

/// Receipt stages recorded for one call (by native id: the call id or its dispatch label).
fn stages_of(receipts: &[Value], call: &str) -> Vec<String> {
    let dispatch = format!("dispatch:{call}");
    receipts
        .iter()
        .filter(|r| r["native_id"] == call || r["native_id"] == dispatch.as_str())
        .map(|r| r["stage"].as_str().unwrap().to_owned())
        .collect()
}

// ---------------------------------------------------------------- tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_results_are_byte_identical_with_provenance_on_and_off() {
    let (_root, work, home_on) = dirs();
    let home_off = home_on.with_file_name("home_off");
    for script in [MIXED, CANCEL] {
        let on = run(script, Capture::Journal, &work, &home_on, "s-on").await;
        let off = run(script, Capture::Off, &work, &home_off, "s-off").await;
        // The query tools exist only with provenance on (so they are also listed in the
        // UNKNOWN_TOOL text); everything else must match exactly.
        let strip = |r: Vec<(String, Value)>| -> Vec<(String, Value)> {
            r.into_iter()
                .filter(|(id, _)| !id.starts_with("q_") && id != "r_unknown")
                .collect()
        };
        assert_eq!(strip(on.results()), strip(off.results()));
        std::fs::remove_dir_all(&home_on).unwrap();
        std::fs::create_dir_all(&home_on).unwrap();
        std::fs::remove_dir_all(&home_off).ok();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_gets_its_stage_chain_and_disposition() {
    let (_root, work, home) = dirs();
    let ran = run(MIXED, Capture::Journal, &work, &home, "s-mixed").await;
    let snap = ran.snapshot();
    let receipts = ran.receipts();
    // The full chain of an ordinary read, traced back from its result.
    let mut read = occurrence_stages(&snap, "result:r_ok");
    read.reverse();
    assert_eq!(
        read,
        [
            "assistant/message",
            "assistant/tool-call",
            "tool/call",
            "tools/pre-execute:enter",
            "tools/pre-execute",
            "tools/execute:enter",
            "tools/execute",
            "tools/post-execute",
            "tools/settled",
            "tool/result",
        ]
    );
    assert_eq!(category(&snap, "result:r_ok"), None);
    // A pre-execute denial: no execute receipts, category denied.
    let deny = stages_of(&receipts, "r_deny");
    assert!(
        !deny.iter().any(|s| s.starts_with("tools/execute")),
        "{deny:?}"
    );
    assert_eq!(category(&snap, "result:r_deny").as_deref(), Some("denied"));
    // A guard denial is recorded as such and classified denied.
    let guard = stages_of(&receipts, "r_guard");
    assert!(guard.contains(&"tools/guard".to_owned()), "{guard:?}");
    assert!(!guard.iter().any(|s| s.starts_with("tools/execute")));
    assert_eq!(category(&snap, "result:r_guard").as_deref(), Some("denied"));
    // A middleware failure before the body: no observed dispatch, classified conservatively.
    assert!(
        !stages_of(&receipts, "r_short")
            .iter()
            .any(|s| s.starts_with("tools/execute"))
    );
    assert_eq!(
        category(&snap, "result:r_short").as_deref(),
        Some("policy_or_pre_dispatch_unobserved")
    );
    // A body that ran and failed.
    assert_eq!(
        category(&snap, "result:r_fail").as_deref(),
        Some("execution_failed")
    );
    // An unknown tool never reaches the pipeline's phases.
    assert_eq!(
        category(&snap, "result:r_unknown").as_deref(),
        Some("not_executed")
    );
    // Query tool calls are not captured at all.
    assert!(receipts.iter().all(|r| {
        let id = r["native_id"].as_str().unwrap();
        !id.contains("q_trace") && !id.contains("q_node")
    }));
    // The journal verifies.
    let report = keel_provenance::verify(&ran.journal()).unwrap();
    assert_eq!(report.receipts, receipts.len());
    assert_eq!(report.graph_receipts, Some(receipts.len()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redaction_never_leaks_through_the_query_tools_but_the_journal_keeps_it() {
    let (_root, work, home) = dirs();
    let ran = run(MIXED, Capture::Journal, &work, &home, "s-redact").await;
    assert_eq!(ran.result_text("r_secret"), "[redacted]");
    let traced = ran.result_text("q_trace");
    let node = ran.result_text("q_node");
    assert!(traced.contains("\"formation_path\""), "{traced}");
    assert!(node.contains("\"kind\":\"outcome\""), "{node}");
    for answer in [&traced, &node] {
        assert!(!answer.contains(SECRET), "{answer}");
        assert!(!answer.contains("key="), "{answer}");
        assert!(!answer.contains("secret.txt"), "{answer}");
    }
    let journal = std::fs::read_to_string(ran.journal().join("receipts.jsonl")).unwrap();
    assert!(
        journal.contains(SECRET),
        "the journal keeps the original result"
    );
    let post: Vec<Value> = ran
        .receipts()
        .into_iter()
        .filter(|r| r["native_id"] == "r_secret" && r["stage"] == "tools/post-execute")
        .collect();
    assert_eq!(post.len(), 1);
    assert_eq!(post[0]["transform"], "replace_content");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_keep_independent_chains() {
    let (_root, work, home) = dirs();
    let ran = run(MIXED, Capture::Journal, &work, &home, "s-conc").await;
    let snap = ran.snapshot();
    let receipts = ran.receipts();
    let native: HashMap<String, String> = receipts
        .iter()
        .map(|r| {
            (
                r["receipt_id"].as_str().unwrap().to_owned(),
                r["native_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let message = receipts
        .iter()
        .find(|r| r["stage"] == "assistant/message")
        .map(|r| r["native_id"].as_str().unwrap().to_owned())
        .unwrap();
    for call in ["r_ok", "r_fail", "r_secret"] {
        let t = trace(&snap, &format!("result:{call}"), Direction::Backward, 32).unwrap();
        let mut seen: Vec<&str> = t
            .evidence_refs
            .iter()
            .map(|e| native[&*e.receipt_id].as_str())
            .collect();
        seen.sort_unstable();
        seen.dedup();
        let dispatch = format!("dispatch:{call}");
        let mut expected = vec![call, dispatch.as_str(), message.as_str()];
        expected.sort_unstable();
        assert_eq!(
            seen, expected,
            "the chain of {call} reaches only its own receipts"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_calls_are_classified_cancelled() {
    let (_root, work, home) = dirs();
    let ran = run(CANCEL, Capture::Journal, &work, &home, "s-cancel").await;
    let snap = ran.snapshot();
    assert_eq!(
        category(&snap, "result:c_cancel").as_deref(),
        Some("cancelled")
    );
    assert_eq!(
        category(&snap, "result:c_after").as_deref(),
        Some("cancelled")
    );
    let after = stages_of(&ran.receipts(), "c_after");
    assert!(
        !after
            .iter()
            .any(|s| s.starts_with("tools/") && s != "tools/settled"),
        "{after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_call_ids_answer_ambiguous_target() {
    let script = r#"
- tool_calls: [ { id: dup, name: read, arguments: { path: ok.txt } } ]
- tool_calls: [ { id: dup, name: read, arguments: { path: ok.txt } } ]
- tool_calls: [ { id: q, name: trace, arguments: { target_id: "result:dup" } } ]
- text: done
"#;
    let (_root, work, home) = dirs();
    let ran = run(script, Capture::Journal, &work, &home, "s-dup").await;
    let text = ran.result_text("q");
    assert!(text.contains("AMBIGUOUS_TARGET"), "{text}");
    let err = trace(&ran.snapshot(), "dup", Direction::Backward, 32).unwrap_err();
    assert_eq!(err.code(), "AMBIGUOUS_TARGET");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_workload_gives_byte_identical_journal_and_graph() {
    let (_root, work, home_a) = dirs();
    let home_b = home_a.with_file_name("home_b");
    let a = run(MIXED, Capture::Journal, &work, &home_a, "s-same").await;
    let b = run(MIXED, Capture::Journal, &work, &home_b, "s-same").await;
    for f in ["receipts.jsonl", "graph.json"] {
        let (x, y) = (
            std::fs::read(a.journal().join(f)).unwrap(),
            std::fs::read(b.journal().join(f)).unwrap(),
        );
        assert!(x == y, "{f} differs between identical runs");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_dispatch_binds_to_the_parent_token() {
    let script = r#"
- tool_calls: [ { id: outer, name: nested, arguments: {} } ]
- text: done
"#;
    let (_root, work, home) = dirs();
    let ran = run(script, Capture::Journal, &work, &home, "s-nested").await;
    let receipts = ran.receipts();
    let inner = receipts
        .iter()
        .find(|r| r["stage"] == "tools/execute:enter" && r["native_id"] == "dispatch:inner_1")
        .unwrap();
    assert_eq!(inner["payload"]["parent_token"], "dispatch:outer");
    let roles: Vec<&str> = inner["bindings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["relation_role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["dispatches", "nested_in"]);
    // Backward from the inner dispatch's result reaches the outer call's tool call.
    let snap = ran.snapshot();
    let inner_outcome = snap.alias("inner_1").to_vec();
    assert!(
        inner_outcome.is_empty(),
        "the nested call has no tool/result event (NullCaller)"
    );
    let t = trace(&snap, "result:outer", Direction::Backward, 64).unwrap();
    assert!(t.complete);
    keel_provenance::verify(&ran.journal()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_that_cannot_open_marks_capture_incomplete_and_changes_nothing() {
    let (_root, work, home) = dirs();
    // A file where the journal directory should be: opening fails.
    std::fs::create_dir_all(home.join("provenance")).unwrap();
    std::fs::write(home.join("provenance").join("s-broken"), "not a directory").unwrap();
    let broken = run(MIXED, Capture::Journal, &work, &home, "s-broken").await;
    let (_root2, work2, home2) = dirs();
    let off = run(MIXED, Capture::Off, &work2, &home2, "s-broken").await;
    let keep = |r: Vec<(String, Value)>| -> Vec<(String, Value)> {
        r.into_iter()
            .filter(|(id, _)| !id.starts_with("q_") && id != "r_unknown")
            .collect()
    };
    let norm = |r: Vec<(String, Value)>, w: &Path| -> String {
        serde_json::to_string(&keep(r))
            .unwrap()
            .replace(&w.display().to_string(), "WS")
    };
    assert_eq!(norm(broken.results(), &work), norm(off.results(), &work2));
    let text = broken.result_text("q_trace");
    assert!(text.contains("CAPTURE_INCOMPLETE"), "{text}");
}
