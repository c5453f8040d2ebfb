//! The agent factory: from a loaded configuration and a front end's flags to a running
//! [`Agent`].
//!
//! ```text
//! Host::load(Sources) ─► layered config (+ the built-in plugins' default rows)
//!   Host::factory(Flags, ModelSource) ─► model route (provider, model, window), sandbox, approval
//!     AgentFactory::build(log, BuildOptions)
//!       ─► built-in tools (bash limits) + subprocess service + spill dir + workspace
//!       ─► plugins install into an InstallContext (seams, tools, on_agent callbacks)
//!       ─► AgentBuilder (registry → pipeline with the agent's tool seams → agent)
//!       ─► on_agent callbacks bind plugin tools and services to the built agent
//! ```
//!
//! Every front end (the CLI, a terminal UI, an ACP server, a delegation provider) and the test
//! fixtures build agents here; child agents (subagents) inherit their parent's assembly
//! through the same [`keel_agent::AgentBuilder`].

use crate::config::{self, Loaded, Sources};
use crate::endpoint::{self, Endpoint, EndpointInputs};
use crate::error::HostError;
use crate::plugins;
use keel_agent::plugin::{InstallContext, ModelLaunch, Plugin};
use keel_agent::{Agent, AgentConfig, ApprovalPolicy, Approver, Asker, HookRegistry, ToolSetup};
use keel_llm::{
    ApiKey, ModelCatalogue, ModelInfo, ModelOverride, OpenAiProvider, Provider, ProviderConfig,
    ScriptedProvider,
};
use keel_protocol::SessionHeader;
use keel_session::{
    Format as LogFormat, PersistentSession, Session, Store, WriterOptions, new_session_id, now_ms,
};
use keel_tools::builtins::bash::BashConfig;
use keel_tools::spill::SpillConfig;
use keel_tools::subprocess::{SubprocessConfig, SubprocessService};
use keel_tools::{BuiltinConfig, Preset, SandboxMode, TextFiles, ToolRegistry, Workspace};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Tokens a context window must keep free for the model's answer beyond keel's fixed prompt
/// (system prompt and tool schemas) for an agent to be built at all.
pub const ANSWER_RESERVE_TOKENS: u64 = 1024;

/// What a front end says about this run, over the configuration (command-line flags). `None`
/// leaves the configured value.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    /// Model name.
    pub model: Option<String>,
    /// Provider name (a `[providers.NAME]` table, or `deepseek`).
    pub provider: Option<String>,
    /// Base URL of a server of the run's own (`--base-url`): no configured key follows it
    /// (see [`crate::endpoint`]).
    pub base_url: Option<String>,
    /// The wire format (`--api`), replacing the provider table's `api`.
    pub api: Option<keel_llm::WireApi>,
    /// The environment variable holding the key for the run's endpoint (`--api-key-env`).
    pub api_key_env: Option<String>,
    /// An API key held by the front end itself (instead of an environment variable); sent to
    /// whatever endpoint the run resolves to.
    pub api_key: Option<ApiKey>,
    /// Sandbox mode.
    pub sandbox: Option<SandboxMode>,
    /// Approval policy.
    pub approval: Option<ApprovalPolicy>,
    /// What set [`Flags::approval`], named when the policy refuses a call (`--approval deny`,
    /// `--permission-mode dontAsk`, `--full-auto`); `None`: "approval WORD given to this run".
    pub approval_from: Option<String>,
    /// The word [`Flags::approval`] was given as, when a person typed it (`--approval never`):
    /// an old word that peers read the other way gets a note ([`AgentFactory::approval_note`]).
    pub approval_word: Option<String>,
    /// Context window of the model, in tokens.
    pub context_window: Option<u64>,
    /// Output budget of the model, in tokens.
    pub max_output: Option<u64>,
    /// Reasoning effort sent to models that take one (a session's choice over
    /// `[agent] reasoning_effort`).
    pub reasoning_effort: Option<String>,
    /// Plugin ids enabled for this run whatever their rows say (`--provenance`).
    pub enable: Vec<&'static str>,
    /// Changes to plugin rows' merged `config` for this run (`--control contract`), applied
    /// after every configuration layer; the plugin is enabled as by [`Flags::enable`].
    pub row_edits: Vec<RowEdit>,
}

/// A front end's change to one plugin's merged row `config` (JSON; `{}` when the row has
/// none). A configuration layer cannot express it: a later layer's `[[plugins]]` row replaces
/// the row's whole `config`, which would drop the user's other keys.
#[derive(Clone)]
pub struct RowEdit {
    /// The plugin (`use` of its rows).
    pub plugin: &'static str,
    /// The change (it may carry the front end's values: the card `keel chat` names).
    pub edit: Arc<dyn Fn(serde_json::Value) -> serde_json::Value + Send + Sync>,
}

impl RowEdit {
    /// The change `edit` to the rows of `plugin`.
    pub fn new(
        plugin: &'static str,
        edit: impl Fn(serde_json::Value) -> serde_json::Value + Send + Sync + 'static,
    ) -> Self {
        RowEdit {
            plugin,
            edit: Arc::new(edit),
        }
    }
}

impl std::fmt::Debug for RowEdit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowEdit")
            .field("plugin", &self.plugin)
            .finish_non_exhaustive()
    }
}

/// Where the model comes from.
#[derive(Clone)]
pub enum ModelSource {
    /// The configured provider (an OpenAI-compatible endpoint).
    Configured,
    /// A model script file replayed by the scripted provider (`--script FILE`).
    Script(PathBuf),
    /// A provider the front end made (the embedded demo script, a test double).
    Provider(Arc<dyn Provider>),
}

impl std::fmt::Debug for ModelSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelSource::Configured => f.write_str("Configured"),
            ModelSource::Script(p) => f.debug_tuple("Script").field(p).finish(),
            ModelSource::Provider(p) => f.debug_tuple("Provider").field(&p.name()).finish(),
        }
    }
}

/// The model a run talks to.
#[derive(Clone)]
pub struct ModelRoute {
    /// The provider.
    pub provider: Arc<dyn Provider>,
    /// Its name in message sources (`deepseek`, `scripted`, a `[providers.NAME]` key).
    pub provider_name: String,
    /// The model name.
    pub model: String,
    /// What keel knows of the model (window, output budget).
    pub info: ModelInfo,
    /// How another keel process reaches the same model (`None` for a front end's own
    /// provider object, which lives only in this process).
    pub launch: Option<ModelLaunch>,
}

/// The variable that carries the route's key to a keel child process ([`ModelLaunch`]).
pub const CHILD_KEY_ENV: &str = "KEEL_CHILD_API_KEY";

impl std::fmt::Debug for ModelRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelRoute")
            .field("provider", &self.provider_name)
            .field("model", &self.model)
            .finish()
    }
}

/// A loaded configuration for one workspace: what every agent of a front end is built from.
pub struct Host {
    home: PathBuf,
    cwd: PathBuf,
    store: Store,
    loaded: Loaded,
    plugins: Vec<Box<dyn Plugin>>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("home", &self.home)
            .field("cwd", &self.cwd)
            .finish()
    }
}

impl Host {
    /// Load the layered configuration of `sources` (home, project, profile, files, `-c`) with
    /// the built-in plugin set.
    pub fn load(sources: &Sources) -> Result<Host, HostError> {
        Host::load_with(sources, plugins::builtin())
    }

    /// [`Host::load`] with another plugin set: an embedder's, with plugins of its own or
    /// a built-in one set up differently (a memory plugin with one more projection policy).
    pub fn load_with(sources: &Sources, plugins: Vec<Box<dyn Plugin>>) -> Result<Host, HostError> {
        let loaded = config::load(sources, &plugins)?;
        Ok(Host {
            home: sources.home.clone(),
            cwd: sources.project.clone(),
            store: Store::new(sources.home.clone()),
            loaded,
            plugins,
        })
    }

    /// The merged configuration with the layer of every key.
    pub fn config(&self) -> &Loaded {
        &self.loaded
    }

    /// The session store under `$KEEL_HOME`.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The workspace root.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// `$KEEL_HOME`.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The subprocess service agents of this configuration get: the process environment,
    /// scrubbed, with `tools.forward_env` forwarded; long output spilled under `spill_dir`.
    pub fn subprocess(&self, spill_dir: &Path) -> SubprocessService {
        let mut sub = SubprocessConfig::from_process_env(spill_dir);
        sub.forward = self
            .loaded
            .config
            .tools
            .forward_env
            .clone()
            .unwrap_or_default();
        SubprocessService::new(sub)
    }

    /// The endpoint `flags` resolve to (provider, URL, and the variable whose key is sent), with
    /// `DEEPSEEK_BASE_URL` read from the environment; see [`crate::endpoint`].
    pub fn endpoint(&self, flags: &Flags) -> Result<Endpoint, HostError> {
        let deepseek_base_url = std::env::var(endpoint::DEEPSEEK_BASE_URL_ENV).ok();
        endpoint::resolve(
            &self.loaded,
            EndpointInputs {
                provider: flags.provider.as_deref(),
                base_url: flags.base_url.as_deref(),
                api_key_env: flags.api_key_env.as_deref(),
                api: flags.api,
                deepseek_base_url: deepseek_base_url.as_deref(),
            },
        )
    }

    /// Resolve `flags` over the configuration into a factory for agents talking to `model`.
    pub fn factory(&self, flags: Flags, model: ModelSource) -> Result<AgentFactory<'_>, HostError> {
        let c = &self.loaded.config;
        let sandbox = flags
            .sandbox
            .or(c.sandbox.mode)
            .unwrap_or(SandboxMode::WorkspaceWrite);
        let approval = crate::approval::resolve(&flags, &self.loaded);
        let configured = matches!(model, ModelSource::Configured);
        let route = self.route(&flags, model)?;
        // What the route came from, for a resumed session's logged route.
        let route_flags = configured.then(|| Flags {
            enable: Vec::new(),
            row_edits: Vec::new(),
            ..flags.clone()
        });
        // Titles by the model: for the configured endpoint only (a script has no answer).
        let titles = configured
            && crate::titles::enabled(
                &self.loaded,
                &route.provider_name,
                &self.endpoint(&flags)?.base_url_origin,
            );
        let reasoning_effort = flags
            .reasoning_effort
            .or_else(|| c.agent.reasoning_effort.clone());
        Ok(AgentFactory {
            host: self,
            route,
            sandbox,
            approval,
            reasoning_effort,
            enable: flags.enable,
            row_edits: flags.row_edits,
            titles,
            route_flags,
        })
    }

    pub(crate) fn route(
        &self,
        flags: &Flags,
        source: ModelSource,
    ) -> Result<ModelRoute, HostError> {
        let c = &self.loaded.config;
        let model = flags
            .model
            .clone()
            .or_else(|| c.model.clone())
            .unwrap_or_else(|| keel_llm::DEFAULT_MODEL.to_owned());
        let mut catalogue = ModelCatalogue::default();
        for (name, o) in &c.models {
            let o = ModelOverride {
                context_window: o.context_window,
                max_output: o.max_output,
                vision: o.vision,
                reasoning: o.reasoning,
                thinking_budget: o.thinking_budget,
            };
            catalogue.apply_override(name, o);
        }
        let flagged = ModelOverride {
            context_window: flags.context_window,
            max_output: flags.max_output,
            ..ModelOverride::default()
        };
        catalogue.apply_override(&model, flagged);
        let info = catalogue.lookup(&model);
        let mut launch_args = vec!["--model".to_owned(), model.clone()];
        if let Some(n) = flags.context_window {
            launch_args.extend(["--context-window".to_owned(), n.to_string()]);
        }
        if let Some(n) = flags.max_output {
            launch_args.extend(["--max-output".to_owned(), n.to_string()]);
        }
        let (provider, provider_name, launch): (Arc<dyn Provider>, String, _) = match source {
            ModelSource::Provider(p) => (p, "scripted".into(), None),
            ModelSource::Script(path) => {
                let p = ScriptedProvider::from_path(&path)
                    .map_err(|source| HostError::Script {
                        path: path.clone(),
                        source,
                    })?
                    .without_recording();
                let abs = std::path::absolute(&path).unwrap_or(path);
                launch_args.extend(["--script".to_owned(), abs.display().to_string()]);
                let launch = ModelLaunch {
                    args: launch_args,
                    ..ModelLaunch::default()
                };
                (
                    Arc::new(p.with_name("scripted")) as Arc<dyn Provider>,
                    "scripted".into(),
                    Some(launch),
                )
            }
            ModelSource::Configured => {
                let Endpoint {
                    provider: name,
                    base_url,
                    key,
                    api,
                    ..
                } = self.endpoint(flags)?;
                let key = match (&flags.api_key, key) {
                    (Some(key), _) => Some(key.clone()),
                    (None, Some(source)) => source.load(&self.home, &base_url)?,
                    (None, None) => None,
                };
                // The child speaks the same wire to the same URL, whatever tables it can see.
                launch_args.extend(["--base-url".to_owned(), base_url.clone()]);
                launch_args.extend(["--api".to_owned(), api.name().to_owned()]);
                let mut launch = ModelLaunch {
                    base_url: Some(base_url.clone()),
                    ..ModelLaunch::default()
                };
                if let Some(key) = &key {
                    launch_args.extend(["--api-key-env".to_owned(), CHILD_KEY_ENV.to_owned()]);
                    launch
                        .env
                        .push((CHILD_KEY_ENV.to_owned(), key.expose().to_owned()));
                }
                launch.args = launch_args;
                let mut pconf = match key {
                    Some(key) => ProviderConfig::new(name.clone(), base_url, key),
                    None => ProviderConfig::without_key(name.clone(), base_url),
                };
                let section = c.providers.get(&name).cloned().unwrap_or_default();
                if let Some(secs) = section.idle_timeout_secs {
                    pconf.idle_timeout = Duration::from_secs(secs);
                }
                pconf.api = api;
                pconf.cache_control = section.cache_control.unwrap_or(false);
                pconf.catalogue = catalogue;
                (Arc::new(OpenAiProvider::new(pconf)?), name, Some(launch))
            }
        };
        Ok(ModelRoute {
            provider,
            provider_name,
            model,
            info,
            launch,
        })
    }
}

/// A change to an agent's settings after the configuration is applied.
pub type ConfigEdit = Box<dyn FnOnce(&mut AgentConfig) + Send>;

/// Per-agent additions of a front end.
#[derive(Default)]
pub struct BuildOptions {
    /// Global hooks, registered before the plugins' (inherited by child agents).
    pub hooks: HookRegistry,
    /// Hooks of this agent only (a progress printer, a UI's event feed).
    pub agent_hooks: HookRegistry,
    /// Answers approvals when the policy is `ask` (an interactive front end).
    pub approver: Option<Arc<dyn Approver>>,
    /// Answers `ask_user_question` (an interactive front end, a script on stdin); without
    /// one, nobody is present.
    pub asker: Option<Arc<dyn Asker>>,
    /// Adjusts the agent's settings last (a test's seeded retry policy, a UI's persona).
    pub edit_config: Option<ConfigEdit>,
    /// The editor's view of text files: `read`, `edit` and `write` go through it (an ACP
    /// client's file-system capability).
    pub text_files: Option<Arc<dyn TextFiles>>,
    /// MCP servers of this agent only, in the `[mcp_servers.NAME]` shape, added to the
    /// configured ones (a server of the same name replaces the configured one): the servers
    /// an ACP client lists in `session/new`.
    pub mcp_servers: serde_json::Map<String, serde_json::Value>,
}

/// Builds agents from a resolved configuration ([`Host::factory`]).
pub struct AgentFactory<'h> {
    host: &'h Host,
    route: ModelRoute,
    sandbox: SandboxMode,
    approval: crate::approval::Resolved,
    reasoning_effort: Option<String>,
    enable: Vec<&'static str>,
    row_edits: Vec<RowEdit>,
    /// Whether new sessions get titles by the model ([`crate::titles`]).
    titles: bool,
    /// The flags of a configured route ([`crate::resume_route`]); `None` for a script's.
    route_flags: Option<Flags>,
}

impl std::fmt::Debug for AgentFactory<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentFactory")
            .field("route", &self.route)
            .field("sandbox", &self.sandbox)
            .field("approval", &self.approval.policy)
            .finish()
    }
}

impl AgentFactory<'_> {
    /// The model route agents get.
    pub fn route(&self) -> &ModelRoute {
        &self.route
    }

    /// The sandbox mode agents get.
    pub fn sandbox(&self) -> SandboxMode {
        self.sandbox
    }

    /// The approval policy agents get.
    pub fn approval(&self) -> ApprovalPolicy {
        self.approval.policy
    }

    /// Where [`AgentFactory::approval`] came from (a flag, a file's key, keel's default).
    pub fn approval_source(&self) -> &str {
        &self.approval.source
    }

    /// A note for a configuration file that says the old `never` ("refuse what would be
    /// asked", which Codex users read as "never ask"), naming the file; a front end says it
    /// once.
    pub fn approval_note(&self) -> Option<&str> {
        self.approval.note.as_deref()
    }

    /// A new, empty session log for the workspace, in `format`.
    pub fn new_session(&self, format: LogFormat) -> Result<PersistentSession, HostError> {
        self.new_session_with(format, |_| {})
    }

    /// [`AgentFactory::new_session`] with its header adjusted by `edit` before it is written
    /// (a delegated run records its parent session, origin and delegation depth).
    pub fn new_session_with(
        &self,
        format: LogFormat,
        edit: impl FnOnce(&mut SessionHeader),
    ) -> Result<PersistentSession, HostError> {
        let cwd = &self.host.cwd;
        let mut header =
            SessionHeader::new(new_session_id(), now_ms(), Some(cwd.display().to_string()));
        edit(&mut header);
        let options = WriterOptions {
            format,
            ..WriterOptions::default()
        };
        PersistentSession::create(&self.host.store, cwd, Session::new(header), options).map_err(
            |source| HostError::Session {
                home: self.host.home.clone(),
                source,
            },
        )
    }

    /// A new agent on a new plain session, with no front-end additions.
    pub fn new_agent(&self) -> Result<Agent, HostError> {
        self.build(self.new_session(LogFormat::Plain)?, BuildOptions::default())
    }

    /// Build an agent over `log` (new or resumed): built-in tools, the enabled plugins, the
    /// front end's `options`; plugin callbacks are bound to the agent before it is returned.
    pub fn build(&self, log: PersistentSession, options: BuildOptions) -> Result<Agent, HostError> {
        let host = self.host;
        let c = &host.loaded.config;
        let session_id = log.session().header().id.clone();
        // A resumed session talks to the endpoint it logged unless the flags name another.
        let (resumed, logged_route) = crate::resume_route::resolve(
            self.host,
            self.route_flags.as_ref(),
            &self.route,
            log.session(),
        )?;
        let route = resumed.as_ref().unwrap_or(&self.route);

        let mut builtins = BuiltinConfig::default();
        let mut bash = BashConfig::default();
        if let Some(ms) = c.tools.bash_timeout_ms {
            bash.default_timeout = Duration::from_millis(ms);
        }
        builtins.bash = bash;
        // The session's preset: the configuration's (a flag) when it names one, else the one
        // the session was started with, else the standard tools.
        let logged = logged_preset(log.session());
        builtins.preset = c.preset.or(logged).unwrap_or_default();
        if route.info.vision {
            builtins.images = Some(keel_tools::Attachments::under_home(&host.home));
        }
        let spill_dir = host.home.join("spill").join(session_id.as_str());
        let mut spill = SpillConfig::new(&spill_dir);
        if let Some(bytes) = c.tools.spill_bytes {
            spill.threshold = bytes;
        }
        let subprocess = host.subprocess(&spill_dir);
        let mut workspace =
            Workspace::new(&host.cwd, self.sandbox).map_err(|source| HostError::Workspace {
                path: host.cwd.clone(),
                source,
            })?;
        workspace.set_network(c.sandbox.network.unwrap_or(true));
        workspace.set_read_before_write(c.tools.read_before_write.unwrap_or(true));
        if let Some(files) = options.text_files {
            workspace.set_text_files(files);
        }
        for root in c.sandbox.writable_roots.iter().flatten() {
            let path = host.cwd.join(root);
            workspace
                .add_writable(&path)
                .map_err(|source| HostError::WritableRoot { path, source })?;
        }
        // A resumed session goes on where its `working_directory` calls left it. A directory
        // since removed, or now outside the sandbox, leaves it at the launch directory; the
        // model's next `working_directory` call says where it is.
        if let Some(dir) = logged_cwd(log.session()) {
            let _ = workspace.enter(&dir);
        }

        let mut ctx = InstallContext::new(host.cwd.clone(), host.home.clone(), subprocess.clone());
        ctx.hooks = options.hooks;
        ctx.agent_hooks = options.agent_hooks;
        ctx.presenters = crate::plugins::presenters();
        ctx.bundles = crate::bundles::enabled(&host.home, &host.cwd);
        ctx.settings = serde_json::to_value(&host.loaded.table).unwrap_or_default();
        // The code preset is Code Mode unless the tools mode is chosen apart.
        if builtins.preset == Preset::Code
            && let serde_json::Value::Object(settings) = &mut ctx.settings
        {
            settings
                .entry("tools_mode")
                .or_insert_with(|| serde_json::Value::from("code"));
        }
        if !options.mcp_servers.is_empty()
            && let serde_json::Value::Object(settings) = &mut ctx.settings
        {
            let servers = settings
                .entry("mcp_servers")
                .or_insert_with(|| serde_json::Value::Object(Default::default()));
            if let serde_json::Value::Object(servers) = servers {
                servers.extend(options.mcp_servers);
            }
        }
        ctx.model_launch = route.launch.clone();
        ctx.project_trust = host.loaded.trust.trust;
        ctx.changed_since_trust = (host.loaded.trust.changed.iter())
            .map(|c| PathBuf::from(c.pinned))
            .collect();
        let mut enable = self.enable.clone();
        enable.extend(self.row_edits.iter().map(|e| e.plugin));
        plugins::install_rows(
            &host.plugins,
            &host.loaded,
            &mut ctx,
            &enable,
            &self.row_edits,
        )?;

        let mut registry = ToolRegistry::with_builtins(&builtins);
        for tool in std::mem::take(&mut ctx.tools) {
            let name = tool.schema().name;
            registry
                .register(tool)
                .map_err(|source| HostError::ToolName { name, source })?;
        }
        for source in std::mem::take(&mut ctx.tool_sources) {
            // A source vets what it offers (an MCP server's tools are checked and skipped with
            // a notice by the plugin); a refusal here is the source's bug, reported like a
            // plugin tool's.
            if let Some(e) = registry.add_source(source).into_iter().next() {
                return Err(HostError::ToolName {
                    name: e.tool().to_owned(),
                    source: e,
                });
            }
        }
        let tools = ToolSetup {
            registry,
            workspace,
            plan_state: Some(builtins.plan.clone()),
            spill: Some(spill),
            subprocess: Some(subprocess),
        };

        let mut config = self.agent_config(route);
        if let Some(edit) = options.edit_config {
            edit(&mut config);
        }
        // Titles: the agent's own hooks, so subagents never inherit them.
        let title_slot = (self.titles && crate::titles::untitled(log.session()))
            .then(|| keel_agent::titles::install(&mut ctx.agent_hooks));
        // keel's own agent commands, after the plugins' (a plugin's `init` keeps its name).
        ctx.commands.push(Arc::new(crate::commands::InitCommand));
        let mut builder = Agent::builder(config, route.provider.clone(), tools, log)
            .hooks(ctx.hooks)
            .agent_hooks(ctx.agent_hooks)
            .commands(std::mem::take(&mut ctx.commands));
        if let Some(approver) = options.approver {
            builder = builder.approver(approver);
        }
        if let Some(asker) = options.asker {
            builder = builder.asker(asker);
        }
        let agent = builder.build()?;
        Self::check_window(&agent)?;
        if logged.unwrap_or_default() != builtins.preset {
            agent.push_ignorable(
                PRESET_EVENT,
                serde_json::json!({"preset": builtins.preset.as_str()}),
            )?;
        }
        if let Some(logged) = logged_route {
            agent.push_ignorable(crate::resume_route::ROUTE_EVENT, logged)?;
        }
        InstallContext::bind(ctx.on_agent, &agent);
        if let Some(slot) = title_slot {
            slot.bind(&agent.handle());
        }
        Ok(agent)
    }

    /// Fails when the model's window cannot hold the agent's fixed prompt plus
    /// [`ANSWER_RESERVE_TOKENS`] (or the whole output budget when that is smaller): every
    /// request would overflow, so say so before sending any.
    fn check_window(agent: &Agent) -> Result<(), HostError> {
        let info = agent.config().model_info;
        let fixed = agent.fixed_prompt_tokens();
        let reserve = ANSWER_RESERVE_TOKENS.min(info.max_output);
        let needed = fixed + reserve;
        if info.context_window < needed {
            return Err(HostError::ContextWindowTooSmall {
                model: agent.config().model.clone(),
                window: info.context_window,
                fixed,
                reserve,
                needed,
            });
        }
        Ok(())
    }

    fn agent_config(&self, r: &ModelRoute) -> AgentConfig {
        let host = self.host;
        let a = &host.loaded.config.agent;
        let mut config = AgentConfig::new(
            r.provider_name.clone(),
            r.model.clone(),
            r.info,
            host.cwd.clone(),
        );
        config.keel_home = Some(host.home.clone());
        config.approval = self.approval.policy;
        config.approval_source = self.approval.source.clone();
        config.thinking = a.thinking;
        config.reasoning_effort = self.reasoning_effort.clone();
        config.temperature = a.temperature;
        if let Some(n) = a.max_steps {
            config.max_steps = n;
        }
        if let Some(n) = a.repeat_failure_limit {
            config.repeat_failure_limit = n;
        }
        if let Some(b) = a.instructions_budget {
            config.instructions_budget = b;
        }
        if let Some(p) = &a.persona {
            config.persona = p.clone();
        }
        if let Some(n) = a.retry_max {
            config.retry.max_retries = n;
        }
        if let Some(ms) = a.retry_base_ms {
            config.retry.base_delay = Duration::from_millis(ms);
        }
        config
    }
}

/// The ignorable event naming a session's preset of built-in tools when it is not the
/// standard one (logged when a session starts with it, or changes to another on a resume).
pub const PRESET_EVENT: &str = "tools/preset";

/// Where `session`'s successful `working_directory` calls last moved it (the `cwd` their
/// results record), if anywhere. Only that tool's results count: another tool's result (an
/// MCP server's) cannot move a resumed session.
fn logged_cwd(session: &keel_session::Session) -> Option<String> {
    use keel_protocol::{ContentBlock, EventBody};
    let mut calls = std::collections::HashSet::new();
    let mut last = None;
    for e in session.whole_event_iter() {
        match &e.body {
            EventBody::AssistantMessage(m) => {
                for block in &m.message.content {
                    if let ContentBlock::ToolCall(call) = block
                        && call.name == "working_directory"
                    {
                        calls.insert(call.id.clone());
                    }
                }
            }
            EventBody::ToolResult(r) => {
                let ok = r.message.content.iter().any(|b| {
                    matches!(b, ContentBlock::ToolResult(t) if !t.is_error && calls.contains(&t.tool_call_id))
                });
                if let Some(dir) = r.meta.as_ref().and_then(|m| m["cwd"].as_str())
                    && ok
                {
                    last = Some(dir.to_owned());
                }
            }
            _ => {}
        }
    }
    last
}

/// The preset `session` last logged, if any.
fn logged_preset(session: &keel_session::Session) -> Option<Preset> {
    session
        .whole_event_iter()
        .filter_map(|e| match &e.body {
            keel_protocol::EventBody::Other(o) if o.type_name == PRESET_EVENT => {
                o.data["preset"].as_str()?.parse().ok()
            }
            _ => None,
        })
        .last()
}
