//! `delegate` (always background, tracked as job `delegate-N`) and `delegate_review`.

use super::{Shared, caller, failed, parse};
use crate::render;
use crate::seam::{
    Caller, DelegateMode, DelegateSpec, DelegationService, ErrorCode, ReviewSpec, check_extensions,
};
use async_trait::async_trait;
use keel_protocol::ToolSchema;
use keel_tools::{JobResult, JobSpec, Tool, ToolContext, ToolEffect, ToolError, ToolOutput};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::Duration;

/// The job's output is quoted in the job service's completion notice only up to a tail of
/// about 1,500 bytes; a render longer than this is replaced there by a pointer to
/// `delegate_result`, so no notice ever shows a delegate's words outside their frame.
const NOTICE_SAFE_BYTES: usize = 1_400;

/// How long one provider wait lasts before the job checks again (cancellation is immediate).
const WAIT_SLICE: Duration = Duration::from_secs(60);

/// `delegate`: hand one cold, self-contained prompt to the provider, in the background.
#[derive(Debug)]
pub struct DelegateTool {
    shared: Arc<Shared>,
}

impl DelegateTool {
    /// Over `shared`.
    pub fn new(shared: Arc<Shared>) -> Self {
        DelegateTool { shared }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DelegateArgs {
    prompt: String,
    #[serde(default)]
    mode: DelegateMode,
    profile: Option<String>,
    label: Option<String>,
    #[serde(default)]
    after: Vec<String>,
    model: Option<String>,
    effort: Option<String>,
    #[serde(default)]
    extensions: Map<String, Value>,
}

#[async_trait]
impl Tool for DelegateTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "delegate".into(),
            description: "Hand one self-contained task to an outside agent; it sees nothing of this conversation. Runs in the background as job delegate-N: you are notified when it ends; job_output waits, job_kill stops, delegate_result reads the answer.".into(),
            parameters: json!({"type":"object","properties":{
                "prompt":{"type":"string","description":"The whole task, with all context it needs."},
                "mode":{"type":"string","enum":["read-only","write"],"description":"Default read-only."},
                "profile":{"type":"string","description":"Provider agent/profile."},
                "label":{"type":"string","maxLength":80},
                "after":{"type":"array","items":{"type":"string"},"description":"Job ids to wait for."},
                "model":{"type":"string"},
                "effort":{"type":"string"},
                "extensions":{"type":"object","description":"Provider-specific options."}
            },"required":["prompt"]}),
        }
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::Executes
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: DelegateArgs = parse(args)?;
        if a.prompt.trim().is_empty() {
            return Err(ToolError::InvalidArgs("prompt is empty".into()));
        }
        if let Some(label) = &a.label
            && (label.is_empty() || label.chars().count() > 80)
        {
            return Err(ToolError::InvalidArgs(
                "label must be 1 to 80 characters".into(),
            ));
        }
        let (agent, who) = caller(ctx, "delegate")?;
        let jobs = ctx.caller.jobs().ok_or_else(|| {
            ToolError::Denied(
                "background jobs are not available in this session (the jobs plugin is off, or \
                 this is a subagent); delegate needs them"
                    .into(),
            )
        })?;
        let shared = &self.shared;
        let max = shared.max_bytes;
        let caps = shared.service.capabilities(&who).await;
        if !caps.ready {
            let mut e = crate::seam::DelegationError::new(
                ErrorCode::NotReady,
                format!("the {} provider is not ready", shared.service.name()),
            );
            e.diagnosis = caps.diagnosis.clone();
            return failed(&e, "delegate", max);
        }
        if let Err(e) = check_extensions(&a.extensions, &caps) {
            return failed(&e, "delegate", max);
        }
        let spec = DelegateSpec {
            after: a
                .after
                .iter()
                .map(|id| shared.provider_id(&who, id))
                .collect(),
            prompt: a.prompt,
            profile: a.profile,
            mode: a.mode,
            label: a.label,
            model: a.model,
            effort: a.effort,
            extensions: a.extensions,
        };
        let description = spec.label.clone().unwrap_or_else(|| {
            let p = spec.prompt.split_whitespace().collect::<Vec<_>>().join(" ");
            render::bound_head(&p, 80).text
        });
        let job = match shared.service.delegate(&who, spec).await {
            Ok(job) => job,
            Err(e) => return failed(&e, "delegate", max),
        };
        let (id_tx, id_rx) = tokio::sync::oneshot::channel::<String>();
        let run = job_run(
            shared.service.clone(),
            who.clone(),
            job.id.clone(),
            max,
            id_rx,
        );
        let keel_id = match jobs.spawn(JobSpec {
            kind: "delegate".into(),
            description,
            run,
        }) {
            Ok(id) => id,
            Err(e) => {
                // Best effort: do not leave an untracked delegation running.
                let _ = shared.service.cancel(&who, &job.id).await;
                return Err(ToolError::Failed(format!(
                    "could not track the delegation as a job ({e}); it was cancelled"
                )));
            }
        };
        shared.track(&keel_id, &job.id, &who.session_id);
        let _ = id_tx.send(keel_id.clone());
        if caps.can_report {
            let listener =
                shared
                    .reports
                    .listener(agent.downgrade(), keel_id.clone(), caps.can_steer);
            // A provider that cannot follow this job sends no reports; the job still settles.
            let _ = shared.service.watch(&who, &job.id, listener);
        }
        let mut text = format!(
            "Started delegation {}.",
            render::status_line(&keel_id, &job)
        );
        text.push_str(&format!(
            "\nYou will be notified when it finishes. Wait with job_output {{\"job_id\":\"{keel_id}\",\"wait\":true}}, read the answer with delegate_result {{\"job_id\":\"{keel_id}\"}}, stop it with job_kill"
        ));
        if caps.can_steer {
            text.push_str(", redirect it with delegate_steer");
        }
        text.push('.');
        Ok(ToolOutput::text(text).with_value(json!({
            "jobId": keel_id,
            "providerJobId": job.id,
            "status": job.status.as_str(),
        })))
    }
}

/// The job's work: wait for the provider job to be final (cancel it if the keel job is
/// killed), then put its finished render (or a pointer to it) in the job's output.
fn job_run(
    service: Arc<dyn DelegationService>,
    who: Caller,
    provider_id: String,
    max: usize,
    id_rx: tokio::sync::oneshot::Receiver<String>,
) -> keel_tools::jobs::JobRun {
    Box::new(move |io| {
        Box::pin(async move {
            let Ok(display) = id_rx.await else {
                return JobResult::failed("the delegation was not tracked");
            };
            let ids = [provider_id.clone()];
            loop {
                tokio::select! {
                    () = io.cancel.cancelled() => {
                        let _ = service.cancel(&who, &provider_id).await;
                        return JobResult::failed("cancelled");
                    }
                    r = service.wait(&who, &ids, WAIT_SLICE) => match r {
                        Ok(_) => break,
                        Err(e) if e.code == ErrorCode::Timeout => continue,
                        Err(e) => {
                            io.output.write(render::failure(&e, &display, max).as_bytes());
                            return JobResult::failed(format!("[{}]", e.code));
                        }
                    }
                }
            }
            match service.result(&who, &provider_id).await {
                Ok(r) => {
                    let (text, _) = render::finished(&display, &r, max);
                    let shown = if text.len() <= NOTICE_SAFE_BYTES {
                        text
                    } else {
                        format!(
                            "Delegation {}. Its answer is too long for this notice; read it with delegate_result {{\"job_id\":\"{display}\"}}.",
                            render::status_line(&display, &r.job)
                        )
                    };
                    io.output.write(shown.as_bytes());
                    let status = r.job.status.as_str();
                    if r.job.status == crate::seam::RunStatus::Completed {
                        JobResult::completed(status)
                    } else {
                        JobResult::failed(status)
                    }
                }
                Err(e) => {
                    io.output
                        .write(render::failure(&e, &display, max).as_bytes());
                    JobResult::failed(format!("[{}]", e.code))
                }
            }
        })
    })
}

/// `delegate_review`: a findings-first review of a pinned change or a finished job's patch.
#[derive(Debug)]
pub struct ReviewTool {
    shared: Arc<Shared>,
}

impl ReviewTool {
    /// Over `shared`.
    pub fn new(shared: Arc<Shared>) -> Self {
        ReviewTool { shared }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReviewArgs {
    base: Option<String>,
    job_id: Option<String>,
    profile: Option<String>,
    label: Option<String>,
    #[serde(default)]
    extensions: Map<String, Value>,
}

#[async_trait]
impl Tool for ReviewTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "delegate_review".into(),
            description: "Ask the provider for a findings-first review of the change since git ref base, or of a finished job's patch. Blocks until done.".into(),
            parameters: json!({"type":"object","properties":{
                "base":{"type":"string"},
                "job_id":{"type":"string"},
                "profile":{"type":"string"},
                "label":{"type":"string","maxLength":80},
                "extensions":{"type":"object"}
            }}),
        }
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::Executes
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: ReviewArgs = parse(args)?;
        let (_, who) = caller(ctx, "delegate_review")?;
        let shared = &self.shared;
        let max = shared.max_bytes;
        let caps = shared.service.capabilities(&who).await;
        if !caps.can_review {
            let e = crate::seam::DelegationError::new(
                ErrorCode::ReviewUnsupported,
                format!("the {} provider cannot review", shared.service.name()),
            );
            return failed(&e, "review", max);
        }
        if let Err(e) = check_extensions(&a.extensions, &caps) {
            return failed(&e, "review", max);
        }
        let spec = ReviewSpec {
            base: a.base,
            job_id: a.job_id.map(|id| shared.provider_id(&who, &id)),
            profile: a.profile,
            model: None,
            effort: None,
            label: a.label,
            extensions: a.extensions,
        };
        match shared.service.review(&who, spec).await {
            Ok(r) => {
                let display = shared.display_id(&who, &r.job.id);
                let (text, truncated) = render::finished(&display, &r, max);
                Ok(ToolOutput::text(text).with_value(json!({
                    "jobId": display,
                    "status": r.job.status.as_str(),
                    "finalTextTruncated": truncated,
                })))
            }
            Err(e) => failed(&e, "review", max),
        }
    }
}
