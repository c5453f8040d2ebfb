//! Session config options: the `mode` selector (the session modes again, for clients that
//! show config options instead of modes) and the `model` selector (`session/set_config_option`;
//! protocol v1 has no `session/set_model`). A model chosen is logged in the session
//! ([`keel_agent::session_modes::MODEL_EVENT`]) and the session's agent is rebuilt on it; a
//! later `session/load` or `session/resume` keeps it.

use super::{Live, Server, agent_modes, apply_mode, durable, err, mode_list};
use agent_client_protocol::Error;
use agent_client_protocol::v1::schema::{
    ConfigOptionUpdate, ErrorCode, SessionConfigKind, SessionConfigOption,
    SessionConfigOptionCategory, SessionConfigSelect, SessionConfigSelectOption, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse,
};
use keel_agent::Agent;
use keel_agent::session_modes::MODEL_EVENT;
use keel_host::{AgentSource, SessionSpec};
use keel_protocol::sync::Locked;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// The id of the mode selector.
pub(crate) const CONFIG_MODE: &str = "mode";
/// The id of the model selector.
pub(crate) const CONFIG_MODEL: &str = "model";

/// A session's model and the models it can switch to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Models {
    /// The model its agent runs.
    pub(crate) current: String,
    /// What it can switch to (the current one among them).
    pub(crate) offered: Vec<String>,
}

/// The config options of a session in `mode` with `models`.
pub(crate) fn options(mode: &str, models: &Models) -> Vec<SessionConfigOption> {
    let modes = mode_list()
        .into_iter()
        .map(|m| {
            SessionConfigSelectOption::new(m.id.0.to_string(), m.name).description(m.description)
        })
        .collect::<Vec<_>>();
    let offered = models
        .offered
        .iter()
        .map(|m| SessionConfigSelectOption::new(m.clone(), m.clone()))
        .collect::<Vec<_>>();
    vec![
        SessionConfigOption::new(
            CONFIG_MODE,
            "Mode",
            SessionConfigKind::Select(SessionConfigSelect::new(mode.to_owned(), modes)),
        )
        .description(Some(
            "Plan mode, the read-only sandbox or automatic approvals".to_owned(),
        ))
        .category(Some(SessionConfigOptionCategory::Mode)),
        SessionConfigOption::new(
            CONFIG_MODEL,
            "Model",
            SessionConfigKind::Select(SessionConfigSelect::new(models.current.clone(), offered)),
        )
        .description(Some("The model the session's turns run on".to_owned()))
        .category(Some(SessionConfigOptionCategory::Model)),
    ]
}

/// The `config_option_update` after keel changed the session's mode itself.
pub(crate) fn option_update(mode: &str, models: &Models) -> SessionUpdate {
    SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(options(mode, models)))
}

impl<S: AgentSource + 'static> Server<S> {
    /// `agent`'s model and the models it can switch to: the source's, with the agent's own
    /// first when the source does not name it.
    pub(super) fn models_of(&self, agent: &Agent) -> Models {
        let current = agent.config().model.clone();
        let mut offered = self.models.get_or_init(|| self.source.models()).clone();
        if !offered.contains(&current) {
            offered.insert(0, current.clone());
        }
        Models { current, offered }
    }

    /// The config options of an open session.
    pub(super) fn config_options(&self, live: &Live) -> Vec<SessionConfigOption> {
        options(agent_modes(&live.agent).id(), &self.models_of(&live.agent))
    }

    /// `session/set_config_option`: `mode` as `session/set_mode`; `model` rebuilds the
    /// session's agent on the model chosen. The answer holds every option as it now is.
    pub(super) async fn set_config_option(
        &self,
        req: &SetSessionConfigOptionRequest,
    ) -> Result<SetSessionConfigOptionResponse, Error> {
        let live = self.session(&req.session_id)?;
        let Some(value) = req.value.as_value_id().map(|v| v.0.to_string()) else {
            return Err(err(
                ErrorCode::InvalidParams,
                format!(
                    "config option {:?} of session {} takes a value id (a string), not {}",
                    &*req.config_id.0,
                    &*req.session_id.0,
                    serde_json::to_string(&req.value).unwrap_or_default()
                ),
            ));
        };
        let live = match req.config_id.0.as_ref() {
            CONFIG_MODE => {
                apply_mode(&live, &value).await?;
                live
            }
            CONFIG_MODEL => self.switch_model(live, &value).await?,
            other => {
                return Err(err(
                    ErrorCode::InvalidParams,
                    format!(
                        "no config option {other:?}: keel's sessions have {CONFIG_MODE:?} and \
                         {CONFIG_MODEL:?}"
                    ),
                ));
            }
        };
        Ok(SetSessionConfigOptionResponse::new(
            self.config_options(&live),
        ))
    }

    /// Put `live`'s session on `model`: logged (on disk before the answer), then an agent
    /// built over the session on it replaces `live`'s. Refused while a prompt runs.
    async fn switch_model(&self, live: Arc<Live>, model: &str) -> Result<Arc<Live>, Error> {
        let models = self.models_of(&live.agent);
        if !models.offered.iter().any(|m| m == model) {
            return Err(err(
                ErrorCode::InvalidParams,
                format!(
                    "no model {model:?} for session {}: keel offers {}",
                    &*live.id.0,
                    models
                        .offered
                        .iter()
                        .map(|m| format!("{m:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        if models.current == model {
            return Ok(live);
        }
        // Holding `running` keeps prompts out while the agent is replaced.
        if live.running.swap(true, Ordering::AcqRel) {
            return Err(err(
                ErrorCode::InvalidRequest,
                format!(
                    "session {} is running a prompt: change its model when it is done, or \
                     cancel it",
                    &*live.id.0
                ),
            ));
        }
        let switched = self.rebuild_on(&live, model, &models.current).await;
        match &switched {
            // The old agent ends off the async threads (its log writer joins its thread).
            Ok(_) => drop(tokio::task::spawn_blocking(move || drop(live))),
            Err(_) => live.running.store(false, Ordering::Release),
        }
        switched
    }

    /// Log the switch to `model` in `live`'s session, let go of it and open it again on
    /// `model`; on `before` again when that build fails (the error is still answered).
    async fn rebuild_on(
        &self,
        live: &Arc<Live>,
        model: &str,
        before: &str,
    ) -> Result<Arc<Live>, Error> {
        live.agent
            .push_ignorable(MODEL_EVENT, serde_json::json!({ "model": model }))
            .map_err(|e| {
                err(
                    ErrorCode::InternalError,
                    format!("keel: session {}: {e}", &*live.id.0),
                )
            })?;
        // What the old agent's jobs log as they end is in the log before the new agent reads it.
        live.agent.kill_jobs();
        durable(live, "model change").await?;
        // One writer per session: the old agent lets go of the log before the new one opens it.
        let old = live.clone();
        tokio::task::spawn_blocking(move || old.agent.log().release())
            .await
            .map_err(|e| err(ErrorCode::InternalError, format!("keel: {e}")))?
            .map_err(|e| {
                err(
                    ErrorCode::InternalError,
                    format!("keel: session {}: {e}", &*live.id.0),
                )
            })?;
        match self.reopen_on(live, model).await {
            Ok(new) => Ok(new),
            Err(e) => {
                // The session stays open, on the model it had, when it can be.
                let _ = self.reopen_on(live, before).await;
                Err(e)
            }
        }
    }

    /// An agent over `live`'s session (let go of by `live`) on `model`, open in its place.
    async fn reopen_on(&self, live: &Arc<Live>, model: &str) -> Result<Arc<Live>, Error> {
        let feed = Self::feed(live.feed.cx.clone(), &live.cwd, false);
        feed.mapper.locked().set_feed(crate::map::Feed::Live);
        let _ = feed.session.set(live.id.clone());
        let options = self.options(&feed, &live.cwd, &live.servers)?;
        let spec = SessionSpec {
            model: Some(model.to_owned()),
            ..SessionSpec::in_dir(live.cwd.clone())
        };
        let agent = self.build_over(&live.id, spec, options).await?;
        if agent.config().model != model {
            return Err(err(
                ErrorCode::InternalError,
                format!(
                    "keel: session {}: asked for model {model:?}, the agent runs {:?}",
                    &*live.id.0,
                    agent.config().model
                ),
            ));
        }
        feed.on.store(true, Ordering::Release);
        Ok(self.open(agent, feed, live.cwd.clone(), live.servers.clone()))
    }
}
