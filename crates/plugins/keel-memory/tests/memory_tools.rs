//! The memory and variable tools on real agents (real session files, a real `$KEEL_HOME` with
//! the SQLite store, a scripted model): identity from the calling agent, scope isolation
//! between sessions, the conflict code the model sees, turn variables cleared at `turn/end`.
//! The agents are built by the host's factory with a `memory` row (`keel_testkit::agent_in`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_agent::Agent;
use keel_agent::plugin::{InstallContext, Plugin, PluginError, PluginId};
use keel_memory::store::tools::{Shared, TOOL_NAMES, tools_with_shared};
use keel_memory::store::{Identity, MemoryStore, Scope, default_path};
use keel_testkit::agent::{AgentOptions, PluginRow, agent_in, events_of, tool_results};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;

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

/// An agent in `home`/`cwd` with the `memory` row configured by `config`, built by the
/// host's factory like any other.
fn agent(home: &Path, cwd: &Path, script_yaml: &str, config: Value) -> Agent {
    let opts = AgentOptions {
        plugins: vec![PluginRow::with("memory", &config)],
        ..AgentOptions::default()
    };
    agent_in(home, cwd, script_yaml, opts).0
}

/// A `memory` plugin whose tools share a state the test holds.
struct SharedMemory(Arc<Shared>);

impl Plugin for SharedMemory {
    fn id(&self) -> PluginId {
        keel_memory::ID
    }
    fn description(&self) -> &'static str {
        "the memory tools over a test's shared state"
    }
    fn enabled_by_default(&self) -> bool {
        false
    }
    fn install(&self, ctx: &mut InstallContext, _config: Value) -> Result<(), PluginError> {
        let tools = tools_with_shared(ctx, &self.0);
        ctx.tools.extend(tools);
        Ok(())
    }
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
    let a = agent(d.home.path(), &d.cwd, &a_script, json!({}));
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
    let store = MemoryStore::open(&default_path(d.home.path())).unwrap();
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
    let b = agent(d.home.path(), &d.cwd, &b_script, json!({}));
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
        rb[4].starts_with("INVALID_ARGS:") && rb[4].contains("/session_id: unknown property"),
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
    // The memory tools over a state the test keeps, installed by a `memory` plugin of the
    // test's plugin set, so it can see the turn variables go.
    let shared = Arc::new(Shared::new(default_path(d.home.path()), false));
    let mut set = keel_host::plugins::builtin();
    set.retain(|p| p.id() != keel_memory::ID);
    set.push(Box::new(SharedMemory(shared.clone())));
    let opts = AgentOptions {
        plugins: vec![PluginRow::new("memory")],
        plugin_set: Some(set),
        ..AgentOptions::default()
    };
    let a = agent_in(d.home.path(), &d.cwd, &s, opts).0;
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
    let a = agent(d.home.path(), &d.cwd, &s, json!({}));
    turn(&a, "[T1] search").await;
    let r = results(&a);
    assert!(r[0].starts_with("TOOL_FAILED: memory store "), "{}", r[0]);
    assert!(r[0].contains(&path.display().to_string()), "{}", r[0]);
}

/// The memory plugin's eleven tools (the ten store tools and `history_search`) as the request
/// carries them: at most 4 KB together. The measured figure is printed.
#[test]
fn the_eleven_tool_schemas_on_the_wire_stay_under_4_kb() {
    let d = dirs();
    let a = agent(d.home.path(), &d.cwd, "responses: []\n", json!({}));
    let tools = a.pipeline().registry().request_tools();
    let ours: Vec<&Value> = tools
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| {
            let name = t["function"]["name"].as_str().unwrap();
            TOOL_NAMES.contains(&name) || name == "history_search"
        })
        .collect();
    assert_eq!(ours.len(), 11);
    let bytes = serde_json::to_vec(&ours).unwrap().len();
    eprintln!("memory tool schemas: {bytes} bytes");
    assert!(bytes <= 4096, "{bytes} bytes");
}
