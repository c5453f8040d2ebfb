//! What workflow and ralph share: starting a child through the [`Spawner`], running it to an
//! answer, and holding a JSON answer to a schema (told why once, then failing).

use crate::flow::schema::{extract_json, validate};
use keel_agent::AgentHandle;
use keel_agent::subagent::{ChildModel, ChildTask, LiveChild, Spawner};
use keel_llm::ModelCatalogue;
use keel_tools::ToolContext;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// The model a child should run on: `None` for the session's own. An unknown model, or a
/// provider other than the session's, is refused with a message naming it.
pub fn child_model(
    parent: &AgentHandle,
    provider: Option<&str>,
    model: Option<&str>,
) -> Result<Option<ChildModel>, String> {
    let cfg = parent.config();
    if let Some(p) = provider.filter(|p| *p != cfg.provider_name) {
        return Err(format!(
            "provider {p:?} is not available to child agents: they run on this session's \
             provider ({:?}); choose a model of it instead",
            cfg.provider_name
        ));
    }
    let Some(m) = model.filter(|m| *m != cfg.model) else {
        return Ok(None);
    };
    let catalogue = ModelCatalogue::default();
    if !catalogue.knows(m) {
        return Err(format!(
            "unknown model {m:?}: keel's model catalogue does not know it (this session runs \
             {:?})",
            cfg.model
        ));
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

/// How a child ended.
#[derive(Debug)]
pub struct Answer {
    /// Its session id.
    pub child_session: String,
    /// The final text, or the JSON value when a schema was given; `Err`: why there is none.
    pub result: Result<Value, String>,
}

/// Start a child for `task`, run it, and (with `schema`) check its JSON answer: a child that
/// does not comply is told why once, in the same session; a second miss fails. `on_start` is
/// called with the child's session id once it exists.
pub async fn run_child(
    spawner: &Spawner,
    ctx: &ToolContext<'_>,
    task: ChildTask<'_>,
    schema: Option<&Value>,
    cancel: &CancellationToken,
    on_start: impl FnOnce(&str),
) -> Result<Answer, String> {
    let child: LiveChild = spawner.start(task, ctx).await.map_err(|e| e.to_string())?;
    let child_session = child.session_id().to_string();
    on_start(&child_session);
    let mut result = child.run_turn(cancel).await;
    let mut value: Result<Value, String> = match &result {
        Ok(text) => Ok(Value::String(text.clone())),
        Err(e) => Err(e.clone()),
    };
    if let (Some(schema), Ok(text)) = (schema, &result) {
        value = match comply(text, schema) {
            Ok(v) => Ok(v),
            Err(why) if !cancel.is_cancelled() => {
                let told = format!(
                    "Your answer does not match the required JSON Schema: {why}. Answer again \
                     with only the JSON value.\n{schema}"
                );
                match child.send(&told) {
                    Err(e) => Err(e.to_string()),
                    Ok(_) => {
                        result = child.run_turn(cancel).await;
                        match &result {
                            Ok(text) => comply(text, schema).map_err(|why| {
                                format!(
                                    "the agent's answer did not match its schema after it was \
                                     told why once: {why} (child session {child_session})"
                                )
                            }),
                            Err(e) => Err(e.clone()),
                        }
                    }
                }
            }
            Err(why) => Err(why),
        };
    }
    let finished = match &value {
        Ok(_) => result,
        Err(e) => Err(e.clone()),
    };
    child.finish(&finished);
    Ok(Answer {
        child_session,
        result: value,
    })
}

/// The JSON value of `text` if it matches `schema`; otherwise why not.
pub fn comply(text: &str, schema: &Value) -> Result<Value, String> {
    let value = extract_json(text).ok_or_else(|| "it contains no JSON value".to_owned())?;
    validate(&value, schema)?;
    Ok(value)
}
