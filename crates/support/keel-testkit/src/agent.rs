//! Agent fixtures: a real agent built through `keel-host`'s factory over a real temporary
//! workspace, a real `$KEEL_HOME` (its `config.toml` written like a user would) and a real
//! session file, driven by a scripted model; plus helpers to read what happened.
//!
//! ```text
//! AgentOptions ─► $KEEL_HOME/config.toml (plugin rows, extra TOML) ─► Host::load
//!   ─► Host::factory(flags, scripted provider) ─► AgentFactory::build(new session, hooks)
//! ```
//!
//! Only the plugins named in [`AgentOptions::plugins`] are enabled; every other row of the
//! built-in set is written `enabled = false`, so a fixture is the bare loop unless a test asks.
//! Failures panic: this is test support.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_agent::{Agent, AgentConfig, ApprovalPolicy, HookRegistry};
use keel_host::{BuildOptions, Flags, Host, LogFormat, ModelSource, ProjectTrust, Sources};
use keel_llm::{Provider, RetryPolicy, ScriptFormat, ScriptedProvider};
use keel_protocol::{EventBody, Message, SessionEvent};
use keel_session::{Session, Store};
use keel_tools::SandboxMode;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The model name fixtures use.
pub const FIXTURE_MODEL: &str = "deepseek-v4-flash";

/// One enabled plugin row: its id and its `[plugins.config]` table.
#[derive(Debug, Clone)]
pub struct PluginRow {
    /// Plugin id (`jobs`, `subagent`, `compaction`, `hooks`, `provenance`).
    pub id: &'static str,
    /// Its configuration.
    pub config: toml::Table,
}

impl PluginRow {
    /// A row with the plugin's default configuration.
    pub fn new(id: &'static str) -> Self {
        PluginRow {
            id,
            config: toml::Table::new(),
        }
    }

    /// A row whose configuration is `config` serialised (e.g. a plugin's config struct).
    pub fn with(id: &'static str, config: &impl Serialize) -> Self {
        let config = match toml::Value::try_from(config).expect("plugin config as TOML") {
            toml::Value::Table(t) => t,
            other => panic!("plugin config of {id} is not a table: {other}"),
        };
        PluginRow { id, config }
    }
}

/// What to build.
pub struct AgentOptions {
    /// Sandbox mode.
    pub sandbox: SandboxMode,
    /// Approval policy.
    pub approval: ApprovalPolicy,
    /// Global hooks registered before the plugins'.
    pub hooks: HookRegistry,
    /// Enabled plugins; all others are off.
    pub plugins: Vec<PluginRow>,
    /// Extra text for `$KEEL_HOME/config.toml` (e.g. a `[hooks]` section).
    pub config_toml: String,
    /// Files to write in the workspace before the agent is built (`.sh` files executable).
    pub files: Vec<(String, String)>,
    /// A last change to the agent's settings (after the retry policy is seeded).
    pub edit: Option<keel_host::ConfigEdit>,
    /// The plugin set (default: the built-in one).
    pub plugin_set: Option<Vec<Box<dyn keel_agent::plugin::Plugin>>>,
    /// The approver (an interactive front end); `None`: headless.
    pub approver: Option<Arc<dyn keel_agent::Approver>>,
    /// The workspace's trust for this run (default: trusted, as a user's own fixture is; the
    /// trust tests set `Untrusted`).
    pub project_trust: ProjectTrust,
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            sandbox: SandboxMode::WorkspaceWrite,
            approval: ApprovalPolicy::Ask,
            hooks: HookRegistry::default(),
            plugins: Vec::new(),
            config_toml: String::new(),
            files: Vec::new(),
            edit: None,
            plugin_set: None,
            approver: None,
            project_trust: ProjectTrust::Trusted,
        }
    }
}

/// A built agent and what it stands on.
pub struct AgentFixture {
    /// `$KEEL_HOME`.
    pub home: tempfile::TempDir,
    /// The workspace.
    pub work: tempfile::TempDir,
    /// The workspace, canonical.
    pub cwd: PathBuf,
    /// The agent.
    pub agent: Agent,
    /// The scripted model (its recorded requests).
    pub provider: Arc<ScriptedProvider>,
    /// The session file.
    pub session_path: PathBuf,
}

/// Build an agent for `script_yaml` (a scripted model) with `opts`.
pub fn agent_fixture(script_yaml: &str, opts: AgentOptions) -> AgentFixture {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let cwd = work.path().canonicalize().unwrap();
    let (agent, provider, session_path) = agent_in(home.path(), &cwd, script_yaml, opts);
    AgentFixture {
        home,
        work,
        cwd,
        agent,
        provider,
        session_path,
    }
}

/// [`agent_fixture`] in directories the caller owns: `$KEEL_HOME` `home` (its `config.toml`
/// rewritten from `opts`) and workspace `cwd` — two agents in one home share what lives
/// there (memory stores, anchors). Returns the agent, its model and its session file.
pub fn agent_in(
    home: &Path,
    cwd: &Path,
    script_yaml: &str,
    opts: AgentOptions,
) -> (Agent, Arc<ScriptedProvider>, PathBuf) {
    for (rel, text) in &opts.files {
        write_file(cwd, rel, text);
    }
    std::fs::write(
        home.join("config.toml"),
        config_text(&opts.plugins, &opts.config_toml),
    )
    .unwrap();
    let provider = scripted(script_yaml);
    let mut sources = Sources::for_workspace(home.to_path_buf(), cwd.to_path_buf());
    sources.trust = Some(opts.project_trust);
    let host = match opts.plugin_set {
        Some(plugins) => Host::load_with(&sources, plugins),
        None => Host::load(&sources),
    }
    .unwrap();
    let factory = fixture_factory(&host, &provider, opts.sandbox, opts.approval);
    let log = factory.new_session(LogFormat::Plain).unwrap();
    let session_path = log.writer().path().to_path_buf();
    let edit = opts.edit;
    let options = BuildOptions {
        hooks: opts.hooks,
        approver: opts.approver,
        edit_config: Some(Box::new(move |config: &mut AgentConfig| {
            config.retry = RetryPolicy::seeded(7);
            if let Some(edit) = edit {
                edit(config);
            }
        })),
        ..BuildOptions::default()
    };
    let agent = factory.build(log, options).unwrap();
    (agent, provider, session_path)
}

fn scripted(script_yaml: &str) -> Arc<ScriptedProvider> {
    Arc::new(
        ScriptedProvider::from_str(script_yaml, ScriptFormat::Yaml)
            .unwrap()
            .with_name("scripted"),
    )
}

fn fixture_factory<'h>(
    host: &'h Host,
    provider: &Arc<ScriptedProvider>,
    sandbox: SandboxMode,
    approval: ApprovalPolicy,
) -> keel_host::AgentFactory<'h> {
    let flags = Flags {
        model: Some(FIXTURE_MODEL.to_owned()),
        sandbox: Some(sandbox),
        approval: Some(approval),
        ..Flags::default()
    };
    host.factory(
        flags,
        ModelSource::Provider(provider.clone() as Arc<dyn Provider>),
    )
    .unwrap()
}

/// The first subagent child of a fixture's agent (from its `subagent/descriptor`): its
/// session id and events, read from its session file.
pub fn child_session_events(f: &AgentFixture) -> (String, Vec<SessionEvent>) {
    let child = events_of(&f.agent)
        .iter()
        .find_map(|e| match &e.body {
            EventBody::SubagentDescriptor(d) => Some(d.child_session.to_string()),
            _ => None,
        })
        .expect("a subagent/descriptor in the parent's log");
    let store = f
        .session_path
        .parent()
        .and_then(Path::parent)
        .expect("the session's project directory");
    let session = load_session(&store.join(&child));
    (child, session.events().map(|e| e.into_owned()).collect())
}

/// A cold resume: a new agent on the session file at `session` (written by an earlier agent
/// of a fixture whose `$KEEL_HOME` is `home` and workspace `cwd`), with a new scripted model.
pub fn resume_fixture(
    home: &Path,
    cwd: &Path,
    session: &Path,
    script_yaml: &str,
    approval: ApprovalPolicy,
) -> (Agent, Arc<ScriptedProvider>) {
    let provider = scripted(script_yaml);
    let mut sources = Sources::for_workspace(home.to_path_buf(), cwd.to_path_buf());
    sources.trust = Some(ProjectTrust::Trusted);
    let host = Host::load(&sources).unwrap();
    let factory = fixture_factory(&host, &provider, SandboxMode::WorkspaceWrite, approval);
    let (log, _, _) =
        keel_session::PersistentSession::resume(session, keel_session::WriterOptions::default())
            .unwrap();
    let agent = factory.build(log, BuildOptions::default()).unwrap();
    (agent, provider)
}

fn config_text(plugins: &[PluginRow], extra: &str) -> String {
    let mut doc = toml::Table::new();
    let rows: Vec<toml::Value> = keel_host::plugins::builtin()
        .iter()
        .map(|p| {
            let id = p.id().as_str();
            let mut row = toml::Table::new();
            row.insert("id".into(), id.into());
            let wanted = plugins.iter().find(|r| r.id == id);
            row.insert("enabled".into(), wanted.is_some().into());
            if let Some(r) = wanted.filter(|r| !r.config.is_empty()) {
                row.insert("config".into(), toml::Value::Table(r.config.clone()));
            }
            toml::Value::Table(row)
        })
        .collect();
    doc.insert("plugins".into(), toml::Value::Array(rows));
    format!("{extra}\n{}", toml::to_string(&doc).unwrap())
}

/// Write `text` at `rel` under `dir`, creating parents; `.sh` files are made executable.
pub fn write_file(dir: &Path, rel: &str, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    if rel.ends_with(".sh") {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// Every event of `agent`'s log, in order.
pub fn events_of(agent: &Agent) -> Vec<SessionEvent> {
    agent
        .log()
        .session()
        .events()
        .map(|e| e.into_owned())
        .collect()
}

/// The event types of `agent`'s log, without `assistant/chunk`.
pub fn types_of(agent: &Agent) -> Vec<String> {
    events_of(agent)
        .iter()
        .map(|e| e.type_name().to_owned())
        .filter(|t| t != "assistant/chunk")
        .collect()
}

/// The text of every `tool/result`, in order.
pub fn tool_results(events: &[SessionEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::ToolResult(r) => Some(r.message.tool_results().next().unwrap().text()),
            _ => None,
        })
        .collect()
}

/// Every `user/message`, in order.
pub fn user_messages(events: &[SessionEvent]) -> Vec<Message> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::UserMessage(m) => Some((**m).clone()),
            _ => None,
        })
        .collect()
}

/// The session file of session `id` in the fixture's store.
pub fn session_file(f: &AgentFixture, id: &str) -> PathBuf {
    Store::new(f.home.path().to_path_buf())
        .session_dir(&f.cwd, id)
        .join("session.jsonl")
}

/// Load the session at `path`.
pub fn load_session(path: &Path) -> Session {
    Store::load(path).unwrap().session
}

/// Hang guard for anything that waits on processes or jobs.
pub const GUARD: Duration = Duration::from_secs(60);

/// Run `f`, panicking if it takes longer than [`GUARD`] (a hang, not a timing assertion).
pub async fn guarded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(GUARD, f)
        .await
        .expect("hang guard: the operation did not finish")
}

/// Poll `cond` until it holds (hang-guarded; not a timing assertion).
pub async fn until(mut cond: impl FnMut() -> bool) {
    guarded(async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}
