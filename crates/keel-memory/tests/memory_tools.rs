//! The memory and variable tools on real agents (real session files, a real `$KEEL_HOME` with
//! the SQLite store, a scripted model): identity from the calling agent, scope isolation
//! between sessions, the conflict code the model sees, turn variables cleared at `turn/end`.
//!
//! The agents are built with the `memory` plugin installed directly (keel-host's catalogue
//! does not list it yet), exactly as the host's factory installs a plugin row.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_agent::plugin::{InstallContext, Plugin};
use keel_agent::{Agent, ToolSetup};
use keel_llm::{ModelCatalogue, Provider, ScriptFormat, ScriptedProvider};
use keel_memory::MemoryPlugin;
use keel_memory::store::tools::{Shared, TOOL_NAMES, tools_with_shared};
use keel_memory::store::{Identity, Scope, Store, default_path};
use keel_protocol::SessionHeader;
use keel_session::{PersistentSession, Session, Store as SessionStore, WriterOptions};
use keel_testkit::agent::{FIXTURE_MODEL, events_of, tool_results};
use keel_tools::subprocess::{SubprocessConfig, SubprocessService};
use keel_tools::{BuiltinConfig, SandboxMode, ToolRegistry, Workspace};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;

/// How the tools get in.
enum Install {
    /// `MemoryPlugin::install` with this row config.
    Plugin(Value),
    /// The tools over a shared state the test keeps.
    Shared(Arc<Shared>),
}

fn script(turns: &[(&str, Vec<(&str, Value)>)]) -> String {
    let mut s = "responses:\n".to_owned();
    for (tag, calls) in turns {
        for (i, (name, args)) in calls.iter().enumerate() {
            s += &format!(
                "  - match: {{last_user_contains: \"{tag}\"}}\n    tool_calls:\n      - {{id: c{}_{i}, name: {name}, arguments: {}}}\n",
                tag.trim_matches(|c| c == '[' || c == ']'),
                serde_json::to_string(args).unwrap()
            );
        }
    }
    for _ in 0..turns.len() * 2 {
        s += "  - text: \"Done.\"\n";
    }
    s
}

fn agent(home: &Path, cwd: &Path, script_yaml: &str, install: Install) -> Agent {
    let sub = SubprocessService::new(SubprocessConfig::from_process_env(home.join("spill")));
    let mut ctx = InstallContext::new(cwd.to_path_buf(), home.to_path_buf(), sub);
    match install {
        Install::Plugin(config) => MemoryPlugin::default().install(&mut ctx, config).unwrap(),
        Install::Shared(shared) => {
            let tools = tools_with_shared(&mut ctx, &shared);
            ctx.tools.extend(tools);
        }
    }
    let mut registry = ToolRegistry::with_builtins(&BuiltinConfig::default());
    for t in std::mem::take(&mut ctx.tools) {
        registry.register(t).unwrap();
    }
    let provider = Arc::new(
        ScriptedProvider::from_str(script_yaml, ScriptFormat::Yaml)
            .unwrap()
            .with_name("scripted"),
    );
    let store = SessionStore::new(home.to_path_buf());
    let header = SessionHeader::new(
        keel_session::new_session_id(),
        keel_session::now_ms(),
        Some(cwd.display().to_string()),
    );
    let log =
        PersistentSession::create(&store, cwd, Session::new(header), WriterOptions::default())
            .unwrap();
    let tools = ToolSetup::new(
        registry,
        Workspace::new(cwd, SandboxMode::WorkspaceWrite).unwrap(),
    );
    let info = ModelCatalogue::default().lookup(FIXTURE_MODEL);
    let mut config =
        keel_agent::AgentConfig::new("scripted", FIXTURE_MODEL, info, cwd.to_path_buf());
    config.retry = keel_llm::RetryPolicy::seeded(7);
    let agent = Agent::builder(config, provider as Arc<dyn Provider>, tools, log)
        .hooks(ctx.hooks)
        .agent_hooks(ctx.agent_hooks)
        .build()
        .unwrap();
    InstallContext::bind(ctx.on_agent, &agent);
    agent
}

async fn turn(agent: &Agent, text: &str) {
    agent.followup(text).unwrap();
    let o = keel_testkit::agent::guarded(agent.run_pending())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(o.reason, keel_protocol::TurnEndReason::Completed, "{o:?}");
}

fn results(agent: &Agent) -> Vec<String> {
    tool_results(&events_of(agent))
}

struct Dirs {
    home: tempfile::TempDir,
    _work: tempfile::TempDir,
    cwd: std::path::PathBuf,
}

fn dirs() -> Dirs {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let cwd = work.path().canonicalize().unwrap();
    Dirs {
        home,
        _work: work,
        cwd,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_comes_from_the_calling_agent_and_sessions_are_isolated() {
    let d = dirs();
    let write = |scope: &str, content: &str, tags: Value| {
        (
            "memory_write",
            json!({"scope": scope, "kind": "semantic", "content": content, "tags": tags, "importance": 0.8}),
        )
    };
    let a_script = script(&[(
        "[T1]",
        vec![
            write(
                "session",
                "The user prefers tabs over spaces.",
                json!(["style"]),
            ),
            write(
                "project",
                "Build with `cargo xtask dist`; tests need --test-threads=2.",
                json!(["build", "tests"]),
            ),
            ("memory_search", json!({"query": "tabs build tests"})),
        ],
    )]);
    let a = agent(d.home.path(), &d.cwd, &a_script, Install::Plugin(json!({})));
    turn(&a, "[T1] remember my preferences").await;
    let ra = results(&a);
    eprintln!("session A search result:\n{}", ra[2]);
    assert!(
        ra[0].contains("wrote mem_") && ra[0].contains("scope session"),
        "{ra:#?}"
    );
    assert!(
        ra[2].starts_with("The following is stored memory data"),
        "{}",
        ra[2]
    );
    assert!(ra[2].contains("2 of 2 result(s)"), "{}", ra[2]);
    assert!(ra[2].trim_end().ends_with("</memory-data>"), "{}", ra[2]);

    // The records, as stored: scope ids from the agent, not from arguments.
    let store = Store::open(&default_path(d.home.path())).unwrap();
    let who_a = Identity::new(a.session_id().as_str(), &d.cwd, "main");
    let q = keel_memory::lexical::Query::new("tabs build");
    let hits = store.search(&who_a, &q, None, 10, i64::MAX / 2).unwrap();
    assert_eq!(hits.len(), 2);
    let session_rec = hits
        .iter()
        .find(|h| h.record.scope == Scope::Session)
        .unwrap()
        .record
        .clone();
    let project_rec = hits
        .iter()
        .find(|h| h.record.scope == Scope::Project)
        .unwrap()
        .record
        .clone();
    assert_eq!(session_rec.scope_id, a.session_id().as_str());
    assert_eq!(session_rec.source, format!("main:{}", a.session_id()));
    assert_eq!(project_rec.scope_id, who_a.project_id);

    // Session B, same workspace and home: sees the project record, not A's session record.
    let b_script = script(&[(
        "[T1]",
        vec![
            (
                "memory_read",
                json!({"id": session_rec.id, "scope": "session"}),
            ),
            ("memory_search", json!({"query": "tabs build tests"})),
            (
                "memory_update",
                json!({"id": project_rec.id, "scope": "project", "expected_revision": "0123456789abcdef", "importance": 1.0}),
            ),
            (
                "memory_update",
                json!({"id": project_rec.id, "scope": "project", "expected_revision": project_rec.revision, "importance": 1.0}),
            ),
            (
                "memory_read",
                json!({"id": session_rec.id, "scope": "session", "session_id": a.session_id().as_str()}),
            ),
            (
                "memory_write",
                json!({"scope": "global", "kind": "semantic", "content": "x"}),
            ),
        ],
    )]);
    let b = agent(d.home.path(), &d.cwd, &b_script, Install::Plugin(json!({})));
    turn(&b, "[T1] what do you know?").await;
    let rb = results(&b);
    eprintln!("session B results: {rb:#?}");
    assert!(
        rb[0].starts_with("INVALID_ARGS: no record") && rb[0].contains("scope session"),
        "{}",
        rb[0]
    );
    assert!(rb[1].contains("1 of 1 result(s)"), "{}", rb[1]);
    assert!(rb[1].contains(&project_rec.id) && !rb[1].contains(&session_rec.id));
    assert!(
        rb[2].starts_with("MEMORY_REVISION_CONFLICT: expected_revision:")
            && rb[2].contains(&format!("is at revision {}", project_rec.revision)),
        "{}",
        rb[2]
    );
    assert!(
        rb[3].contains("updated ") && rb[3].contains(&project_rec.id),
        "{}",
        rb[3]
    );
    assert!(
        rb[4].starts_with("INVALID_ARGS: session_id: not an argument"),
        "{}",
        rb[4]
    );
    assert!(
        rb[5].starts_with("DENIED:") && rb[5].contains("global_writes"),
        "{}",
        rb[5]
    );
    // The conflict's code is in the result's meta too.
    let meta: Vec<Value> = events_of(&b)
        .iter()
        .filter_map(|e| match &e.body {
            keel_protocol::EventBody::ToolResult(r) => r.meta.clone(),
            _ => None,
        })
        .collect();
    assert!(
        meta.iter().any(|m| m["error"] == "MEMORY_REVISION_CONFLICT"
            && m["current_revision"] == project_rec.revision.as_str()),
        "{meta:#?}"
    );
    // The audit log names both writers.
    let log = store.audit_log().unwrap();
    let actors: Vec<&str> = log.iter().map(|r| r.actor.as_str()).collect();
    assert_eq!(
        actors,
        [
            format!("main:{}", a.session_id()),
            format!("main:{}", a.session_id()),
            format!("main:{}", b.session_id())
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turn_variables_are_cleared_at_turn_end() {
    let d = dirs();
    let shared = Arc::new(Shared::new(default_path(d.home.path()), false));
    let s = script(&[
        (
            "[T1]",
            vec![
                (
                    "variable_set",
                    json!({"name": "scratch", "scope": "turn", "value": {"step": 1}}),
                ),
                (
                    "variable_patch",
                    json!({"name": "scratch", "scope": "turn", "changes": [{"op": "set", "path": "/step", "value": 2}]}),
                ),
                ("variable_get", json!({"name": "scratch", "scope": "turn"})),
                (
                    "variable_set",
                    json!({"name": "keep", "scope": "session", "value": [1, 2]}),
                ),
            ],
        ),
        (
            "[T2]",
            vec![
                ("variable_get", json!({"name": "scratch", "scope": "turn"})),
                ("variable_list", json!({"scope": "turn"})),
                ("variable_get", json!({"name": "keep", "scope": "session"})),
            ],
        ),
    ]);
    let a = agent(d.home.path(), &d.cwd, &s, Install::Shared(shared.clone()));
    turn(&a, "[T1] work").await;
    // The `turn/end` observer dropped the session's turn variables.
    assert_eq!(shared.turn_vars().sessions(), 0);
    let r = results(&a);
    assert!(
        r[2].contains("variable scratch in scope turn") && r[2].contains("{\"step\":2}"),
        "{}",
        r[2]
    );
    turn(&a, "[T2] more work").await;
    let r = results(&a);
    eprintln!("{r:#?}");
    assert!(
        r[4].contains("variable scratch is not set in scope turn"),
        "{}",
        r[4]
    );
    assert!(r[5].contains("no variables in scope turn"), "{}", r[5]);
    assert!(
        r[6].contains("variable keep in scope session") && r[6].contains("[1,2]"),
        "{}",
        r[6]
    );
    assert!(
        r.iter()
            .all(|t| t.starts_with("The following is stored variable data"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_store_fails_the_call_not_the_agent() {
    let d = dirs();
    let path = default_path(d.home.path());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, b"garbage garbage garbage garbage garbage garbage garbage garbage garbage garbage garbage garbage").unwrap();
    let s = script(&[(
        "[T1]",
        vec![("memory_search", json!({"query": "anything"}))],
    )]);
    let a = agent(d.home.path(), &d.cwd, &s, Install::Plugin(json!({})));
    turn(&a, "[T1] search").await;
    let r = results(&a);
    assert!(r[0].starts_with("TOOL_FAILED: memory store "), "{}", r[0]);
    assert!(r[0].contains(&path.display().to_string()), "{}", r[0]);
}

#[test]
fn the_ten_tool_schemas_on_the_wire_stay_under_3300_bytes() {
    let d = dirs();
    let sub = SubprocessService::new(SubprocessConfig::from_process_env(d.home.path()));
    let mut ctx = InstallContext::new(d.cwd.clone(), d.home.path().to_path_buf(), sub);
    MemoryPlugin::default()
        .install(&mut ctx, json!({}))
        .unwrap();
    let mut total = 0;
    let mut names = Vec::new();
    for t in &ctx.tools {
        let s = t.schema();
        if TOOL_NAMES.contains(&s.name.as_str()) {
            total += serde_json::to_string(&s).unwrap().len();
            names.push(s.name);
        }
    }
    assert_eq!(names, TOOL_NAMES);
    eprintln!("ten schemas: {total} bytes");
    assert!(total <= 3300, "{total} bytes");
}
