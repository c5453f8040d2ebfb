//! A session's background jobs over the API (`bash … run_in_background`, background
//! subagents), as the model sees them with `job_list`, `job_output` and `job_kill` and the
//! terminal UI shows them: `GET …/jobs`, `GET …/jobs/{jobId}` (with the buffered tail of its
//! output) and `POST …/jobs/{jobId}/kill`. Jobs live with the session's agent: a session the
//! server does not host has none.

use crate::api::stored_path;
use crate::{ApiError, App};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use keel_tools::{JobControl, JobError};
use serde_json::{Value, json};
use std::sync::Arc;

/// The job service of hosted session `id` (`None`: not hosted, or jobs are off); 404 for an
/// unknown session.
async fn service(app: &App, id: &str) -> Result<Option<Arc<dyn JobControl>>, ApiError> {
    match app.hub.get(id) {
        Some(live) => Ok(live.agent.jobs()),
        None => stored_path(app, id).await.map(|_| None),
    }
}

fn job_error(id: &str, e: JobError) -> ApiError {
    match e {
        JobError::NoSuchJob(_) => ApiError::not_found(format!("session {id}: {e}")),
        JobError::TooMany { .. } | JobError::Unavailable(_) => ApiError::new(
            StatusCode::CONFLICT,
            "jobs_unavailable",
            format!("session {id}: {e}"),
        ),
    }
}

/// `GET /api/v1/sessions/{id}/jobs`: `{"jobs": [Job…]}`, oldest first.
pub(crate) async fn list(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let jobs = service(&app, &id)
        .await?
        .map(|jobs| jobs.list())
        .unwrap_or_default();
    Ok(Json(json!({ "jobs": jobs })))
}

/// `GET /api/v1/sessions/{id}/jobs/{jobId}`: `{"job": Job, "output"}` (the buffered tail).
pub(crate) async fn show(
    State(app): State<Arc<App>>,
    Path((id, job)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let Some(jobs) = service(&app, &id).await? else {
        return Err(job_error(&id, JobError::NoSuchJob(job)));
    };
    let out = jobs.output(&job).map_err(|e| job_error(&id, e))?;
    Ok(Json(json!({ "job": out.info, "output": out.text })))
}

/// `POST /api/v1/sessions/{id}/jobs/{jobId}/kill`: `{"job": Job}`, killed (or as it settled
/// before).
pub(crate) async fn kill(
    State(app): State<Arc<App>>,
    Path((id, job)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let Some(jobs) = service(&app, &id).await? else {
        return Err(job_error(&id, JobError::NoSuchJob(job)));
    };
    let info = tokio::task::spawn_blocking(move || jobs.kill(&job))
        .await
        .map_err(|e| ApiError::internal(format!("session {id}: killing the job failed: {e}")))?
        .map_err(|e| job_error(&id, e))?;
    Ok(Json(json!({ "job": info })))
}
