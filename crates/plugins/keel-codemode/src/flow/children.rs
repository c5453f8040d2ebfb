//! What workflow and ralph share: starting a child through the [`Spawner`], running it to an
//! answer, and holding a JSON answer to a schema (told why once, then failing).

use crate::flow::schema::{Mismatch, extract_json, validate};
use keel_agent::AgentHandle;
use keel_agent::subagent::{ChildError, ChildModel, ChildTask, LiveChild, Spawner};
use keel_llm::ModelCatalogue;
use keel_tools::{ToolContext, ToolError};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Why a child cannot run on the model asked for ([`child_model`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelRefused {
    /// A provider other than the session's.
    #[error(
        "provider {provider:?} is not available to child agents: they run on this session's \
         provider ({session:?}); choose a model of it instead"
    )]
    OtherProvider {
        /// The provider asked for.
        provider: String,
        /// The session's provider.
        session: String,
    },
    /// A model keel's model catalogue does not know.
    #[error(
        "unknown model {model:?}: keel's model catalogue does not know it (this session runs \
         {session:?})"
    )]
    UnknownModel {
        /// The model asked for.
        model: String,
        /// The session's model.
        session: String,
    },
}

/// The model a child should run on: `None` for the session's own. An unknown model, or a
/// provider other than the session's, is refused with a message naming it.
pub fn child_model(
    parent: &AgentHandle,
    provider: Option<&str>,
    model: Option<&str>,
) -> Result<Option<ChildModel>, ModelRefused> {
    let cfg = parent.config();
    if let Some(p) = provider.filter(|p| *p != cfg.provider_name) {
        return Err(ModelRefused::OtherProvider {
            provider: p.to_owned(),
            session: cfg.provider_name.clone(),
        });
    }
    let Some(m) = model.filter(|m| *m != cfg.model) else {
        return Ok(None);
    };
    let catalogue = ModelCatalogue::default();
    if !catalogue.knows(m) {
        return Err(ModelRefused::UnknownModel {
            model: m.to_owned(),
            session: cfg.model.clone(),
        });
    }
    Ok(Some(ChildModel {
        provider_name: cfg.provider_name.clone(),
        provider: parent.provider().clone(),
        model: m.to_owned(),
        info: catalogue.lookup(m),
    }))
}

/// The instruction appended to a prompt whose answer must match `schema`.
pub fn schema_instruction(schema: &Value) -> String {
    format!(
        "\n\nEnd your answer with a JSON value matching this JSON Schema (the JSON alone, or in \
         a ```json block):\n{schema}"
    )
}

/// Why an answer does not comply with its schema ([`comply`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Noncompliant {
    /// No JSON value could be found in it.
    #[error("it contains no JSON value")]
    NoJson,
    /// Its JSON value does not match the schema.
    #[error(transparent)]
    Mismatch(#[from] Mismatch),
}

/// Why a child gave no answer, or none that matches its schema.
#[derive(Debug, thiserror::Error)]
pub enum ChildFailed {
    /// Its turn ended without an answer (it names the child's session file).
    #[error(transparent)]
    Turn(#[from] ChildError),
    /// It could not be told why its answer did not comply.
    #[error(transparent)]
    Send(ToolError),
    /// Its answer did not comply, and it was cancelled before it could be told why.
    #[error(transparent)]
    Noncompliant(Noncompliant),
    /// Its answer did not comply a second time.
    #[error(
        "the agent's answer did not match its schema after it was told why once: {why} (child \
         session {session})"
    )]
    StillNoncompliant {
        /// Why, the second time.
        why: Noncompliant,
        /// The child's session id.
        session: String,
    },
}

/// How a child ended.
#[derive(Debug)]
pub struct Answer {
    /// Its session id.
    pub child_session: String,
    /// The final text, or the JSON value when a schema was given; `Err`: why there is none.
    pub result: Result<Value, ChildFailed>,
}

/// Start a child for `task`, run it, and (with `schema`) check its JSON answer: a child that
/// does not comply is told why once, in the same session; a second miss fails. `on_start` is
/// called with the child's session id once it exists. `Err`: the child could not be started.
pub async fn run_child(
    spawner: &Spawner,
    ctx: &ToolContext<'_>,
    task: ChildTask<'_>,
    schema: Option<&Value>,
    cancel: &CancellationToken,
    on_start: impl FnOnce(&str),
) -> Result<Answer, ToolError> {
    let child: LiveChild = spawner.start(task, ctx).await?;
    let child_session = child.session_id().to_string();
    on_start(&child_session);
    // The child's last answer, for `subagent/finished` (the JSON value is the caller's).
    let mut last = String::new();
    let result: Result<Value, ChildFailed> = match (child.run_turn(cancel).await, schema) {
        (Err(e), _) => Err(e.into()),
        (Ok(text), None) => {
            last = text;
            Ok(Value::String(last.clone()))
        }
        (Ok(text), Some(schema)) => {
            last = text;
            match comply(&last, schema) {
                Ok(v) => Ok(v),
                Err(why) if !cancel.is_cancelled() => {
                    let told = format!(
                        "Your answer does not match the required JSON Schema: {why}. Answer again \
                         with only the JSON value.\n{schema}"
                    );
                    match child.send(&told) {
                        Err(e) => Err(ChildFailed::Send(e)),
                        Ok(_) => match child.run_turn(cancel).await {
                            Ok(text) => {
                                last = text;
                                comply(&last, schema).map_err(|why| {
                                    ChildFailed::StillNoncompliant {
                                        why,
                                        session: child_session.clone(),
                                    }
                                })
                            }
                            Err(e) => Err(e.into()),
                        },
                    }
                }
                Err(why) => Err(ChildFailed::Noncompliant(why)),
            }
        }
    };
    let finished = match &result {
        Ok(_) => Ok(last),
        Err(e) => Err(e),
    };
    child.finish(&finished);
    Ok(Answer {
        child_session,
        result,
    })
}

/// The JSON value of `text` if it matches `schema`; otherwise why not.
pub fn comply(text: &str, schema: &Value) -> Result<Value, Noncompliant> {
    let value = extract_json(text).ok_or(Noncompliant::NoJson)?;
    validate(&value, schema)?;
    Ok(value)
}
