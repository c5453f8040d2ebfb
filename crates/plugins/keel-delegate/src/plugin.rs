//! The `delegate` plugin row (off by default; a `[[plugins]]` row turns it on):
//!
//! ```toml
//! [[plugins]]
//! id = "delegate"
//! [plugins.config]
//! provider = "keel"          # the default: another `keel run` process in its own session;
//!                            # "acp" (any ACP agent command), "consult" (the consult CLI) or
//!                            # "inprocess" (the test provider)
//! # keel_path = "…"          # the keel executable for delegates (default: this one)
//! keel_time_limit_sec = 3600 # wall-time limit of one keel delegate
//! # acp_command = ["keel", "acp"] # the ACP agent's argv (default: this keel with `acp`)
//! acp_time_limit_sec = 3600  # wall-time limit of one ACP delegate
//! acp_handshake_sec = 60     # time for its initialize + session/new
//! acp_grace_sec = 5          # a cancelled turn's time to answer, the agent's to exit
//! # acp_env = { NAME = "value" }          # variables set on the agent
//! # acp_forward_env = ["ANTHROPIC_API_KEY"] # keel's secret-looking variables passed on
//! consult_path = "consult"   # the consult executable (a bare name is looked up on PATH)
//! consult_time_limit_sec = 60 # time limit of one non-blocking consult call
//! # consult_data_dir = "…"   # CONSULT_DATA_DIR for every consult spawn (unset: consult's own)
//! wake_budget = 3            # report wake-ups in a row before a human message is needed
//! max_depth = 1              # delegation depth at which the tools are no longer offered
//! max_output_bytes = 16000   # bound of every delegate-authored text the model sees
//! ```
//!
//! It registers the six tools (unconditionally while enabled) and withholds them from child
//! agents, which own no background jobs. `delegate` needs the `jobs` plugin.

use crate::acp::{AcpConfig, AcpProvider};
use crate::consult::{ConsultConfig, ConsultProvider};
use crate::inprocess::InProcessProvider;
use crate::keel::{KeelConfig, KeelProvider};
use crate::reports::Reports;
use crate::review::{ReviewCommand, ReviewSource};
use crate::seam::DelegationService;
use crate::tools::{self, Shared, TOOL_NAMES};
use keel_agent::AgentSlot;
use keel_agent::plugin::{InstallContext, Plugin, PluginError, PluginId, plugin_config};
use keel_agent::seams::{ChildBuild, ChildSetup};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

/// The plugin id (its notices' source is `keel/delegate`).
pub const ID: PluginId = keel_agent::plugin_id!("delegate");

/// Providers that can be selected now.
pub const PROVIDERS: [&str; 4] = ["keel", "acp", "consult", "inprocess"];

/// The row's `config`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DelegateConfig {
    /// Which provider runs delegations: `keel` (the default) runs another `keel run` process;
    /// `acp` runs any Agent Client Protocol agent command as keel's client; `consult` runs the
    /// consult CLI; `inprocess` is the in-process test provider (scripted outcomes, no real
    /// agent).
    pub provider: String,
    /// The keel executable delegates run (`provider = "keel"`); this executable when unset.
    pub keel_path: Option<String>,
    /// Wall-time limit of one keel delegate, in seconds.
    pub keel_time_limit_sec: u64,
    /// The ACP agent's argv (`provider = "acp"`), e.g. `["codex-acp"]`; this executable with
    /// `acp` when unset. A bare program name is looked up on `PATH`.
    pub acp_command: Option<Vec<String>>,
    /// Wall-time limit of one ACP delegate, in seconds.
    pub acp_time_limit_sec: u64,
    /// Seconds an ACP agent has to answer `initialize` and `session/new`.
    pub acp_handshake_sec: u64,
    /// Seconds a cancelled ACP turn has to answer, and the agent to exit once its stdin
    /// closed, before its process group is ended.
    pub acp_grace_sec: u64,
    /// Variables set on the ACP agent (not secrets: those go in `acp_forward_env`).
    pub acp_env: std::collections::BTreeMap<String, String>,
    /// Names of keel's own environment variables passed to the ACP agent although they look
    /// secret (the agent's own key); every other secret-looking variable is scrubbed.
    pub acp_forward_env: Vec<String>,
    /// The consult executable (`provider = "consult"`); a bare name is looked up on `PATH`.
    pub consult_path: String,
    /// `CONSULT_DATA_DIR` stamped on every consult spawn, when set.
    pub consult_data_dir: Option<String>,
    /// Time limit of one non-blocking consult call (status, result, logs…), in seconds.
    pub consult_time_limit_sec: u64,
    /// Wake-ups of an idle owner by `wake`-urgency reports in a row, before a human message
    /// refills the budget; later reports are injected without waking.
    pub wake_budget: u32,
    /// Bytes of any delegate-authored text (answer, error, logs, report) the model sees.
    pub max_output_bytes: usize,
    /// A process running at this delegation depth or deeper (a keel delegate is started with
    /// its depth in `KEEL_DELEGATION_DEPTH`) gets no delegation tools: with the default 1, a
    /// delegate does not delegate further.
    pub max_depth: u32,
}

impl Default for DelegateConfig {
    fn default() -> Self {
        DelegateConfig {
            provider: "keel".into(),
            keel_path: None,
            keel_time_limit_sec: 3600,
            acp_command: None,
            acp_time_limit_sec: 3600,
            acp_handshake_sec: 60,
            acp_grace_sec: 5,
            acp_env: Default::default(),
            acp_forward_env: Vec::new(),
            consult_path: "consult".into(),
            consult_data_dir: None,
            consult_time_limit_sec: 60,
            wake_budget: 3,
            max_output_bytes: crate::render::DEFAULT_MAX_OUTPUT_BYTES,
            max_depth: 1,
        }
    }
}

/// The `delegate` plugin. [`DelegatePlugin::default`] builds its provider from the row's
/// config; [`DelegatePlugin::with_service`] plugs in a provider instance (tests, embedders).
#[derive(Clone, Default)]
pub struct DelegatePlugin {
    service: Option<Arc<dyn DelegationService>>,
}

impl std::fmt::Debug for DelegatePlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegatePlugin")
            .field(
                "service",
                &self.service.as_ref().map(|s| s.name().to_owned()),
            )
            .finish()
    }
}

impl DelegatePlugin {
    /// A plugin whose delegations go to `service` (the row's `provider` must name it).
    pub fn with_service(service: Arc<dyn DelegationService>) -> Self {
        DelegatePlugin {
            service: Some(service),
        }
    }
}

/// A row `config` with `provider` set to `name` (the other keys kept).
fn with_provider(mut config: Value, name: &str) -> Value {
    if !config.is_object() {
        config = Value::Object(Default::default());
    }
    if let Some(m) = config.as_object_mut() {
        m.insert("provider".into(), Value::String(name.into()));
    }
    config
}

/// `--delegate`: the row's config with `provider = "keel"`.
pub fn provider_keel(config: Value) -> Value {
    with_provider(config, "keel")
}

/// `--delegate=acp`.
pub fn provider_acp(config: Value) -> Value {
    with_provider(config, "acp")
}

/// `--delegate=consult`.
pub fn provider_consult(config: Value) -> Value {
    with_provider(config, "consult")
}

/// `--delegate=inprocess`.
pub fn provider_inprocess(config: Value) -> Value {
    with_provider(config, "inprocess")
}

fn setup(what: String) -> PluginError {
    PluginError::Setup {
        plugin: ID.as_str(),
        what,
        source: None,
    }
}

/// The provider the config selects.
fn provider(
    config: &DelegateConfig,
    ctx: &InstallContext,
) -> Result<Arc<dyn DelegationService>, PluginError> {
    match config.provider.as_str() {
        "keel" => {
            let mut k = KeelConfig::new(ctx.model_launch.clone(), ctx.keel_home.clone());
            k.project_trust = ctx.child_project_trust();
            if let Some(p) = &config.keel_path {
                k.program = p.into();
            }
            k.time_limit = std::time::Duration::from_secs(config.keel_time_limit_sec.max(1));
            Ok(Arc::new(KeelProvider::new(ctx.subprocess.clone(), k)))
        }
        "acp" => {
            let mut a = AcpConfig::new(ctx.model_launch.clone(), ctx.keel_home.clone());
            a.project_trust = ctx.child_project_trust();
            if let Some(argv) = &config.acp_command {
                if argv.is_empty() {
                    return Err(setup(
                        "acp_command is empty: give the ACP agent's argv, e.g. [\"keel\", \"acp\"]"
                            .into(),
                    ));
                }
                a.command = argv.clone();
            }
            a.time_limit = std::time::Duration::from_secs(config.acp_time_limit_sec.max(1));
            a.handshake = std::time::Duration::from_secs(config.acp_handshake_sec.max(1));
            a.grace = std::time::Duration::from_secs(config.acp_grace_sec);
            a.env = config
                .acp_env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            a.forward_env = config.acp_forward_env.clone();
            Ok(Arc::new(AcpProvider::new(ctx.subprocess.clone(), a)))
        }
        "inprocess" => Ok(Arc::new(InProcessProvider::new())),
        "consult" => Ok(Arc::new(ConsultProvider::new(
            ctx.subprocess.clone(),
            ConsultConfig {
                program: config.consult_path.clone().into(),
                data_dir: config.consult_data_dir.clone().map(Into::into),
                timeout: std::time::Duration::from_secs(config.consult_time_limit_sec.max(1)),
                ..ConsultConfig::default()
            },
        ))),
        p => Err(setup(format!(
            "unknown delegation provider '{p}' (\"keel\", \"acp\", \"consult\" or \"inprocess\")"
        ))),
    }
}

impl Plugin for DelegatePlugin {
    fn id(&self) -> PluginId {
        ID
    }

    fn description(&self) -> &'static str {
        "delegation: hand one self-contained task to an outside agent as a background job, steer it, read its bounded answer as untrusted data"
    }

    fn enabled_by_default(&self) -> bool {
        false
    }

    fn install(&self, ctx: &mut InstallContext, config: Value) -> Result<(), PluginError> {
        let config: DelegateConfig = plugin_config(ID, config)?;
        if config.max_output_bytes < 256 {
            return Err(setup(format!(
                "max_output_bytes {} is below the minimum of 256",
                config.max_output_bytes
            )));
        }
        let depth = crate::keel::current_depth();
        if depth >= config.max_depth {
            // A delegate this deep does its task itself.
            return Ok(());
        }
        let service = match &self.service {
            Some(s) if s.name() == config.provider => s.clone(),
            Some(s) => {
                return Err(setup(format!(
                    "provider '{}' is configured but this build plugs in '{}'",
                    config.provider,
                    s.name()
                )));
            }
            None => provider(&config, ctx)?,
        };
        // `/review` (crate::review): this install's provider, for the agent it is built into.
        let review = ReviewCommand::default();
        review.fill(service.clone(), config.max_output_bytes);
        let slot = Arc::new(AgentSlot::new());
        let bind = slot.clone();
        ctx.on_agent.push(Box::new(move |agent| {
            bind.bind(agent);
        }));
        ctx.commands.push(Arc::new(ReviewSource {
            command: review,
            agent: slot,
        }));
        let reports = Arc::new(Reports::new(config.wake_budget, config.max_output_bytes));
        let shared = Shared::new(service, reports, config.max_output_bytes);
        ctx.tools.extend(tools::all(&shared));
        ctx.hooks
            .subagent_build
            .push(Arc::new(|_: &ChildBuild, setup: &mut ChildSetup| {
                setup
                    .withheld
                    .extend(TOOL_NAMES.iter().map(|n| (*n).to_owned()));
            }));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_tools::subprocess::SubprocessService;

    #[test]
    fn every_built_provider_can_be_selected() {
        let sp = SubprocessService::new(
            keel_tools::subprocess::SubprocessConfig::from_process_env(std::env::temp_dir()),
        );
        let ctx = InstallContext::new(std::env::temp_dir(), std::env::temp_dir(), sp);
        let mut c = DelegateConfig::default();
        assert_eq!(provider(&c, &ctx).unwrap().name(), "keel");
        for p in PROVIDERS {
            c.provider = p.into();
            assert_eq!(provider(&c, &ctx).unwrap().name(), p);
        }
        c.provider = "acp".into();
        c.acp_command = Some(Vec::new());
        let e = provider(&c, &ctx).err().unwrap().to_string();
        assert!(e.contains("acp_command is empty"), "{e}");
        c.provider = "zzz".into();
        let e = provider(&c, &ctx).err().unwrap().to_string();
        assert!(e.contains("unknown delegation provider 'zzz'"), "{e}");
    }

    #[test]
    fn defaults_and_unknown_keys() {
        let c: DelegateConfig = plugin_config(ID, serde_json::json!({})).unwrap();
        assert_eq!(c, DelegateConfig::default());
        assert_eq!((c.wake_budget, c.max_output_bytes), (3, 16_000));
        let e = plugin_config::<DelegateConfig>(ID, serde_json::json!({"wake": 1}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("wake"), "{e}");
    }
}
