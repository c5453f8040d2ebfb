//! The routes: the token landing page `/`, and under `/api/v1` the OpenAPI document, the
//! sessions (listed, searched, created), their messages (queued or steered, with images),
//! cancellation, closing, event streams ([`crate::events`]), the approvals and questions
//! waiting for an answer ([`crate::requests`]), and forks, rewinds, mode and model switches
//! ([`crate::control`]). [`routes`] is the one table the router is built from and the
//! OpenAPI document is checked against.

use crate::control;
use crate::hub::{self, Live, Pending};
use crate::requests::{ApprovalBody, QuestionBody, Requests};
use crate::{ApiError, App};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use keel_agent::InboxMode;
use keel_host::{SessionRef, SessionSpec, SourceError};
use keel_session::Session;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::UNIX_EPOCH;

/// One route: its method, its path (axum's and OpenAPI's `{param}` syntax) and its handler.
pub struct Route {
    /// `GET` or `POST`.
    pub method: &'static str,
    /// The path.
    pub path: &'static str,
    /// The handler.
    pub(crate) handler: MethodRouter<Arc<App>>,
}

/// Every route the server has (two routes of one path are merged by method).
pub fn routes() -> Vec<Route> {
    let route = |method, path, handler| Route {
        method,
        path,
        handler,
    };
    vec![
        route("GET", "/", get(root)),
        route("GET", "/api/v1/openapi.json", get(openapi)),
        route("GET", "/api/v1/sessions", get(list)),
        route("POST", "/api/v1/sessions", post(create)),
        route("GET", "/api/v1/sessions/{id}", get(crate::state::show)),
        route("POST", "/api/v1/sessions/{id}/messages", post(message)),
        route("POST", "/api/v1/sessions/{id}/cancel", post(cancel)),
        route(
            "POST",
            "/api/v1/sessions/{id}/feedback",
            post(crate::feedback::rate),
        ),
        route("POST", "/api/v1/sessions/{id}/close", post(close)),
        route("POST", "/api/v1/sessions/{id}/fork", post(control::fork)),
        route(
            "POST",
            "/api/v1/sessions/{id}/rewind",
            post(control::rewind),
        ),
        route("POST", "/api/v1/sessions/{id}/mode", post(control::mode)),
        route("POST", "/api/v1/sessions/{id}/model", post(control::model)),
        route(
            "GET",
            "/api/v1/sessions/{id}/events",
            get(crate::events::events),
        ),
        route(
            "GET",
            "/api/v1/sessions/{id}/commands",
            get(crate::commands::list),
        ),
        route(
            "POST",
            "/api/v1/sessions/{id}/commands/{name}",
            post(crate::commands::run),
        ),
        route(
            "GET",
            "/api/v1/sessions/{id}/commands/{name}/choices",
            get(crate::state::choices),
        ),
        route(
            "GET",
            "/api/v1/sessions/{id}/files",
            get(crate::files::list),
        ),
        route(
            "GET",
            "/api/v1/sessions/{id}/files/content",
            get(crate::files::content),
        ),
        route(
            "GET",
            "/api/v1/sessions/{id}/export",
            get(crate::files::export),
        ),
        route(
            "GET",
            "/api/v1/sessions/{id}/provenance",
            get(crate::provenance::graph),
        ),
        route(
            "GET",
            "/api/v1/sessions/{id}/paths",
            get(crate::paths::complete),
        ),
        route("GET", "/api/v1/sessions/{id}/jobs", get(crate::jobs::list)),
        route(
            "GET",
            "/api/v1/sessions/{id}/jobs/{jobId}",
            get(crate::jobs::show),
        ),
        route(
            "POST",
            "/api/v1/sessions/{id}/jobs/{jobId}/kill",
            post(crate::jobs::kill),
        ),
        route("GET", "/api/v1/models", get(crate::models::list)),
        route(
            "GET",
            "/api/v1/attachments/{name}",
            get(crate::images::attachment),
        ),
        route("GET", "/api/v1/schedules", get(crate::schedules::list)),
        route("GET", "/api/v1/plugins", get(crate::extensions::list)),
        route("POST", "/api/v1/plugins", post(crate::extensions::switch)),
        route("GET", "/api/v1/trust", get(crate::trust::show)),
        route("POST", "/api/v1/trust", post(crate::trust::record)),
        route("GET", "/api/v1/sessions/{id}/pending", get(pending)),
        route(
            "POST",
            "/api/v1/sessions/{id}/approvals/{requestId}",
            post(approve),
        ),
        route(
            "POST",
            "/api/v1/sessions/{id}/questions/{requestId}",
            post(answer),
        ),
    ]
}

/// Unknown paths: a JSON 404.
pub(crate) async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!("no route {}", uri.path()))
}

/// `GET /`: the web app for a browser (a request that accepts HTML, [`crate::web`]), else what
/// this server is.
async fn root(headers: axum::http::HeaderMap) -> axum::response::Response {
    use axum::response::IntoResponse;
    if crate::web::wants_html(&headers) {
        return crate::web::index();
    }
    Json(json!({
        "name": "keel serve",
        "api": "/api/v1",
        "openapi": "/api/v1/openapi.json",
        "app": "/",
    }))
    .into_response()
}

/// `GET /api/v1/openapi.json`.
async fn openapi() -> Json<Value> {
    Json(crate::openapi::document())
}

/// The query of `GET /api/v1/sessions`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    /// Only the sessions that mention every word, best first (`keel sessions search --all`).
    q: Option<String>,
}

/// The most sessions a search lists (hits are looked at until that many sessions are found).
const SEARCH_HITS: usize = 200;

/// `GET /api/v1/sessions`: every session of `$KEEL_HOME`, newest first; with `?q=`, the
/// sessions that mention its words, best first, each with its best `snippet`.
async fn list(
    State(app): State<Arc<App>>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    if let Some(q) = query.q {
        return search(&app, q).await;
    }
    let store = app.store.clone();
    let stored = tokio::task::spawn_blocking(move || store.list(None))
        .await
        .map_err(|e| ApiError::internal(format!("listing the sessions failed: {e}")))?;
    let live = app.hub.all();
    let mut rows: Vec<Value> = Vec::with_capacity(stored.len());
    let mut listed = std::collections::HashSet::new();
    for s in &stored {
        let status = app.hub.get(&s.id).map_or("stored", |l| l.status());
        let updated = s
            .last_modified
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as u64);
        listed.insert(s.id.clone());
        rows.push(json!({
            "id": s.id,
            "cwd": s.cwd,
            "title": s.title.as_ref().or(s.first_prompt.as_ref()),
            "updatedAt": updated,
            "status": status,
        }));
    }
    // A live session whose file the listing missed (just created).
    for l in live {
        let id = l.agent.session_id().as_str().to_owned();
        if !listed.contains(&id) {
            rows.insert(
                0,
                json!({
                    "id": id,
                    "cwd": l.cwd,
                    "title": Value::Null,
                    "updatedAt": Value::Null,
                    "status": l.status(),
                }),
            );
        }
    }
    Ok(Json(json!({ "sessions": rows })))
}

/// `?q=`: the sessions of every project that mention every word of `q`, as `keel sessions
/// search --all` finds them (the same index, refreshed first), best first.
async fn search(app: &App, q: String) -> Result<Json<Value>, ApiError> {
    if q.trim().is_empty() {
        return Err(ApiError::bad_request("q: the search needs a word"));
    }
    let store = app.store.clone();
    let hits = tokio::task::spawn_blocking(move || {
        let mut index = keel_search::Index::open(store.home())?;
        index.refresh(&store)?;
        index.search(&q, None, SEARCH_HITS)
    })
    .await
    .map_err(|e| ApiError::internal(format!("searching the sessions failed: {e}")))?
    .map_err(|e| match e {
        keel_search::SearchError::EmptyQuery => ApiError::bad_request(format!("q: {e}")),
        e => ApiError::internal(e.to_string()),
    })?;
    let mut rows: Vec<Value> = Vec::new();
    let mut listed = std::collections::HashSet::new();
    for hit in hits {
        if !listed.insert(hit.session.clone()) {
            continue;
        }
        let status = app.hub.get(&hit.session).map_or("stored", |l| l.status());
        rows.push(json!({
            "id": hit.session,
            "cwd": hit.cwd,
            "status": status,
            "snippet": hit.snippet,
            "seq": hit.seq,
        }));
    }
    Ok(Json(json!({ "sessions": rows })))
}

/// The body of `POST /api/v1/sessions`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    /// The session's workspace: an absolute path to a directory.
    cwd: PathBuf,
    /// A first prompt, run at once.
    prompt: Option<String>,
    /// A model instead of the configured one.
    model: Option<String>,
    /// The session's mode from the start ([`keel_host::modes::MODES`]).
    mode: Option<String>,
}

/// `cwd` as a session's workspace: an absolute path to a directory, canonical; else a 400
/// naming it.
pub(crate) fn workspace(cwd: &std::path::Path) -> Result<PathBuf, ApiError> {
    if !cwd.is_absolute() {
        return Err(ApiError::bad_request(format!(
            "cwd {} is not an absolute path",
            cwd.display()
        )));
    }
    match std::fs::metadata(cwd) {
        Ok(meta) if meta.is_dir() => cwd
            .canonicalize()
            .map_err(|e| ApiError::bad_request(format!("cwd {}: {e}", cwd.display()))),
        Ok(_) => Err(ApiError::bad_request(format!(
            "cwd {} is not a directory",
            cwd.display()
        ))),
        Err(e) => Err(ApiError::bad_request(format!(
            "cwd {} does not exist or cannot be read: {e}",
            cwd.display()
        ))),
    }
}

/// `POST /api/v1/sessions`: a new session in `cwd`, its agent built like `keel run`'s; with a
/// prompt, its first turn starts in the background.
async fn create(
    State(app): State<Arc<App>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body: CreateBody = parse(body)?;
    let cwd = workspace(&body.cwd)?;
    // Its log file exists before it is hosted: streams asked for meanwhile wait.
    let _creating = app.hub.creation();
    if let Some(mode) = body.mode.as_deref()
        && !keel_host::modes::MODES.contains(&mode)
    {
        return Err(ApiError::bad_request(format!(
            "mode: {}",
            keel_host::modes::ModeError::Unknown(mode.to_owned())
        )));
    }
    let (pending, options) = Pending::new(Arc::default());
    let source = app.source.clone();
    let spec = SessionSpec {
        model: body.model,
        ..SessionSpec::in_dir(cwd.clone())
    };
    let mode = body.mode;
    let agent = tokio::task::spawn_blocking(move || {
        let agent = source.create(&spec, options)?;
        if let Some(mode) = mode {
            keel_host::modes::set_mode(&agent, &mode)
                .map_err(|e| keel_host::SourceError::Failed(format!("mode {mode}: {e}")))?;
        }
        Ok(agent)
    })
    .await
    .map_err(|e| ApiError::internal(format!("building the agent failed: {e}")))?
    .map_err(source_error)?;
    let live = pending.finish(agent, cwd);
    let id = live.agent.session_id().as_str().to_owned();
    app.hub.insert(live.clone());
    if let Some(prompt) = body.prompt {
        live.agent
            .followup(&prompt)
            .map_err(|e| ApiError::internal(format!("session {id}: {e}")))?;
        hub::run_turns(live);
    }
    Ok((StatusCode::CREATED, Json(json!({ "id": id }))).into_response())
}

/// How a message is delivered.
#[derive(Debug, Default, Deserialize, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Delivery {
    /// Its own turn, after what is queued.
    #[default]
    Queue,
    /// Into the running turn's next step; its own turn when none runs.
    Steer,
}

/// The body of `POST /api/v1/sessions/{id}/messages`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageBody {
    text: String,
    #[serde(default)]
    delivery: Delivery,
    /// Images sent with the text: `data:` URLs ([`crate::images`]).
    #[serde(default)]
    images: Vec<String>,
}

/// `POST /api/v1/sessions/{id}/messages`: queue or steer a message; a stored session is
/// resumed first. Answers 202 with how it was delivered.
async fn message(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body: MessageBody = parse(body)?;
    let images = crate::images::decode(&body.images)?;
    let mut live = live_or_resumed(&app, &id).await?;
    let message = crate::images::message(&live.agent, &body.text, images)?;
    let deliver = |live: &Live| {
        live.agent.deliver(message.clone(), |activity| {
            match (body.delivery, activity) {
                (Delivery::Steer, keel_agent::background::TurnActivity::Running) => {
                    InboxMode::Steer
                }
                _ => InboxMode::Followup,
            }
        })
    };
    let mode = match deliver(&live) {
        Ok(mode) => mode,
        Err(e) => {
            // The agent let go of its log for a model switch: once the switch is done (it
            // holds `opening`), the message goes to the agent that took its place.
            drop(app.hub.opening.lock().await);
            let now = live_or_resumed(&app, &id).await?;
            if Arc::ptr_eq(&now, &live) {
                return Err(ApiError::internal(format!("session {id}: {e}")));
            }
            live = now;
            deliver(&live).map_err(|e| ApiError::internal(format!("session {id}: {e}")))?
        }
    };
    if mode == InboxMode::Followup {
        hub::run_turns(live);
    }
    let delivery = if mode == InboxMode::Steer {
        "steer"
    } else {
        "queue"
    };
    Ok((StatusCode::ACCEPTED, Json(json!({ "delivery": delivery }))).into_response())
}

/// `POST /api/v1/sessions/{id}/cancel`: cancel the running turn.
async fn cancel(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let cancelled = match app.hub.get(&id) {
        Some(live) => hub::cancel(&live),
        None => {
            stored_path(&app, &id).await?;
            false
        }
    };
    Ok(Json(json!({ "cancelled": cancelled })))
}

/// `POST /api/v1/sessions/{id}/close`: stop hosting the session (its running turn cancelled,
/// its jobs stopped); it stays stored, and a message resumes it.
async fn close(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let closed = app.hub.close(&id, crate::SHUTDOWN_GRACE).await;
    if !closed {
        stored_path(&app, &id).await?;
    }
    Ok(Json(json!({ "closed": closed })))
}

/// `GET /api/v1/sessions/{id}/pending`: the approvals and questions waiting for an answer,
/// in the order they were asked (none for a session this server does not host).
async fn pending(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let requests = match app.hub.get(&id) {
        Some(live) => live.requests.snapshot().0,
        None => {
            stored_path(&app, &id).await?;
            Vec::new()
        }
    };
    Ok(Json(json!({ "requests": requests })))
}

/// The requests of session `id`: the hosted session's, or those of a session hosted before
/// (closed since); else 404 for an unknown session or `request` of `kind`.
async fn requests_of(
    app: &App,
    id: &str,
    request: &str,
    kind: &str,
) -> Result<Arc<Requests>, ApiError> {
    if let Some(requests) = app.hub.get(id).map(|l| l.requests.clone()) {
        return Ok(requests);
    }
    if let Some(requests) = app.hub.retired(id) {
        return Ok(requests);
    }
    stored_path(app, id).await?;
    Err(ApiError::not_found(format!(
        "no {kind} request {request} in session {id}"
    )))
}

/// `POST /api/v1/sessions/{id}/approvals/{requestId}`: answer an approval; the first answer
/// wins (409 `already_answered` after it).
async fn approve(
    State(app): State<Arc<App>>,
    Path((id, request)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let requests = requests_of(&app, &id, &request, "approval").await?;
    let body: ApprovalBody = parse(body)?;
    let resolved = requests.answer_approval(&request, body)?;
    Ok(Json(json!({ "resolved": resolved })))
}

/// `POST /api/v1/sessions/{id}/questions/{requestId}`: answer `ask_user_question`'s
/// questions (or decline them); the first answer wins.
async fn answer(
    State(app): State<Arc<App>>,
    Path((id, request)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let requests = requests_of(&app, &id, &request, "question").await?;
    let body: QuestionBody = parse(body)?;
    let resolved = requests.answer_question(&request, body)?;
    Ok(Json(json!({ "resolved": resolved })))
}

/// Parse a JSON body, answering 400 (or the limit's 413) with what is wrong.
pub(crate) fn parse<T: DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
) -> Result<T, ApiError> {
    let bytes = body.map_err(|e| ApiError::new(e.status(), "bad_body", e.body_text()))?;
    // axum's reading names the field a wrong value is in (`to: invalid type: …`).
    Json::<T>::from_bytes(&bytes)
        .map(|Json(value)| value)
        .map_err(|e| {
            ApiError::bad_request(format!("the request body is not valid: {}", e.body_text()))
        })
}

pub(crate) fn source_error(e: SourceError) -> ApiError {
    match e {
        SourceError::NotFound(m) => ApiError::not_found(m),
        SourceError::Failed(m) => ApiError::internal(m),
        SourceError::Unsupported(m) => ApiError::new(StatusCode::NOT_IMPLEMENTED, "unsupported", m),
        SourceError::Busy(m) => ApiError::session_busy(m),
    }
}

/// Whether `id` can be a session id (letters, digits, `-`, `_`): anything else could name a
/// path.
fn plausible_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The session file of the stored session whose id is exactly `id`, else 404.
pub(crate) async fn stored_path(app: &App, id: &str) -> Result<PathBuf, ApiError> {
    let missing =
        || ApiError::not_found(format!("no session {id} in {}", app.store.home().display()));
    if !plausible_id(id) {
        return Err(missing());
    }
    let store = app.store.clone();
    let cwd = app.source.workspace().to_path_buf();
    let query = id.to_owned();
    let path = tokio::task::spawn_blocking(move || store.resolve(&query, &cwd))
        .await
        .map_err(|e| ApiError::internal(format!("finding session {id} failed: {e}")))?
        .map_err(|_| missing())?;
    let exact = path
        .parent()
        .and_then(|d| d.file_name())
        .is_some_and(|n| n == id);
    if exact { Ok(path) } else { Err(missing()) }
}

/// The stored session `id`'s log, else 404.
pub(crate) async fn load_stored(app: &App, id: &str) -> Result<Session, ApiError> {
    let path = stored_path(app, id).await?;
    load_stored_at(path, id).await
}

/// The stored session `id`'s log from its file `path` ([`stored_path`]).
pub(crate) async fn load_stored_at(path: PathBuf, id: &str) -> Result<Session, ApiError> {
    tokio::task::spawn_blocking(move || keel_session::Store::load(&path))
        .await
        .map_err(|e| ApiError::internal(format!("loading session {id} failed: {e}")))?
        .map(|loaded| loaded.session)
        .map_err(|e| ApiError::internal(format!("session {id} cannot be read: {e}")))
}

/// The live session `id`, resuming the stored one (with crash repair) when it is not hosted.
pub(crate) async fn live_or_resumed(app: &App, id: &str) -> Result<Arc<Live>, ApiError> {
    if let Some(live) = app.hub.get(id) {
        return Ok(live);
    }
    let _opening = app.hub.opening.lock().await;
    if let Some(live) = app.hub.get(id) {
        return Ok(live);
    }
    let path = stored_path(app, id).await?;
    let (pending, options) = Pending::new(app.hub.retired(id).unwrap_or_default());
    let source = app.source.clone();
    let file = path.clone();
    let agent = tokio::task::spawn_blocking(move || {
        source.resume(SessionRef::Path(&file), &SessionSpec::default(), options)
    })
    .await
    .map_err(|e| ApiError::internal(format!("resuming session {id} failed: {e}")))?
    .map_err(source_error)?;
    let cwd = agent
        .log()
        .session()
        .header()
        .cwd
        .clone()
        .map_or_else(|| app.source.workspace().to_path_buf(), PathBuf::from);
    let live = pending.finish(agent, cwd);
    app.hub.insert(live.clone());
    Ok(live)
}
