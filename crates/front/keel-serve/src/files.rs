//! The files a session presented to the person (the `present` tool: `present/files` in its
//! log), over the API: `GET …/files` lists them as every front end shows them (through the
//! plugins' presenters), and `GET …/files/content?path=P` answers one's bytes, so a browser
//! can show or download it.
//!
//! Only a path the session presented is served, read as it is now beneath the session's
//! workspace without following a link out of it (`keel_tools::beneath`), a regular file of
//! at most [`CONTENT_LIMIT`]. Nothing served can run in the server's origin: images keep their
//! type, text is `text/plain` (HTML too), anything else is a download, always with `nosniff`
//! and a sandboxing Content-Security-Policy.

use crate::api::{load_stored, stored_path};
use crate::{ApiError, App};
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use keel_protocol::SessionEvent;
use keel_protocol::present::{File, Item};
use keel_tools::beneath::{Beneath, BeneathError};
use serde::Deserialize;
use serde_json::{Value, json};
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

/// The largest presented file served (32 MiB).
pub const CONTENT_LIMIT: u64 = 32 << 20;

/// A presented file and the seq of the event that presented it.
struct Presented {
    file: File,
    seq: u64,
}

/// The files presented in `events`, oldest first: the presenters run over the events that can
/// present files ([`keel_host::presents_files`]) alone, not over the whole log.
fn presented_in<'a>(events: impl Iterator<Item = &'a SessionEvent>) -> Vec<Presented> {
    keel_host::plugins::presenters()
        .present_all(events.filter(|ev| keel_host::presents_files(ev)))
        .into_iter()
        .flat_map(|(seq, item)| match item {
            Item::Files(files) => files
                .into_iter()
                .map(|file| Presented { file, seq: seq.0 })
                .collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// Session `id`'s presented files, oldest first, and its workspace.
async fn presented(app: &App, id: &str) -> Result<(Vec<Presented>, Option<PathBuf>), ApiError> {
    if let Some(live) = app.hub.get(id) {
        let files = presented_in(live.agent.log().session().whole_event_iter());
        return Ok((files, Some(live.cwd.clone())));
    }
    stored_path(app, id).await?;
    let session = load_stored(app, id).await?;
    let cwd = session.header().cwd.as_deref().map(PathBuf::from);
    Ok((presented_in(session.whole_event_iter()), cwd))
}

/// `GET /api/v1/sessions/{id}/files`: `{"files": [{"path", "description", "seq"}…]}`.
pub(crate) async fn list(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (files, _) = presented(&app, &id).await?;
    let rows: Vec<Value> = files
        .iter()
        .map(|p| json!({"path": p.file.path, "description": p.file.description, "seq": p.seq}))
        .collect();
    Ok(Json(json!({ "files": rows })))
}

/// The query of `GET …/files/content`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ContentQuery {
    path: String,
}

/// `GET /api/v1/sessions/{id}/files/content?path=P`: the bytes of a presented file.
pub(crate) async fn content(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    query: Result<Query<ContentQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let (files, cwd) = presented(&app, &id).await?;
    if !files.iter().any(|p| p.file.path == query.path) {
        return Err(ApiError::not_found(format!(
            "session {id} presented no file {:?} (GET …/files lists what it presented)",
            query.path
        )));
    }
    let Some(cwd) = cwd else {
        return Err(ApiError::not_found(format!(
            "session {id} has no workspace to read {} from",
            query.path
        )));
    };
    let rel = match PathBuf::from(&query.path) {
        abs if abs.is_absolute() => match abs.strip_prefix(&cwd) {
            Ok(rel) => rel.to_path_buf(),
            Err(_) => {
                return Err(ApiError::not_found(format!(
                    "{} is outside session {id}'s workspace {}: not served",
                    query.path,
                    cwd.display()
                )));
            }
        },
        rel => rel,
    };
    let shown = query.path.clone();
    let read = tokio::task::spawn_blocking(move || read_beneath(&cwd, &rel))
        .await
        .map_err(|e| ApiError::internal(format!("reading {shown} failed: {e}")))?;
    let bytes = read.map_err(|e| match e {
        ReadError::Gone(m) => ApiError::new(StatusCode::GONE, "file_gone", m),
        ReadError::Refused(m) => ApiError::new(StatusCode::FORBIDDEN, "file_refused", m),
    })?;
    Ok(served(&query.path, bytes))
}

/// Why a presented file cannot be served.
enum ReadError {
    /// It is no longer there (410).
    Gone(String),
    /// It leads out of the workspace, is no regular file or is too large (403).
    Refused(String),
}

/// `rel` read beneath `root`.
fn read_beneath(root: &std::path::Path, rel: &std::path::Path) -> Result<Vec<u8>, ReadError> {
    let dir = Beneath::open(root).map_err(|e| {
        ReadError::Gone(format!(
            "the workspace {} cannot be opened: {e}",
            root.display()
        ))
    })?;
    let (file, len) = dir.open_regular(rel, CONTENT_LIMIT).map_err(|e| match &e {
        BeneathError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            ReadError::Gone(format!("{} is no longer there: {e}", rel.display()))
        }
        _ => ReadError::Refused(format!("{} is not served: {e}", rel.display())),
    })?;
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(CONTENT_LIMIT)
        .read_to_end(&mut bytes)
        .map_err(|e| ReadError::Gone(format!("{} cannot be read: {e}", rel.display())))?;
    Ok(bytes)
}

/// `bytes` of `path` as an answer nothing in it can run from.
fn served(path: &str, bytes: Vec<u8>) -> Response {
    let ext = std::path::Path::new(path)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let image = match ext.as_deref() {
        Some("png") => Some("image/png"),
        Some("jpg" | "jpeg") => Some("image/jpeg"),
        Some("gif") => Some("image/gif"),
        Some("webp") => Some("image/webp"),
        _ => None,
    };
    let (kind, disposition) = match image {
        Some(kind) => (kind, "inline"),
        None if std::str::from_utf8(&bytes).is_ok() => ("text/plain; charset=utf-8", "inline"),
        None => ("application/octet-stream", "attachment"),
    };
    let name: String = std::path::Path::new(path)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("file")
        .chars()
        .filter(|c| c.is_ascii_graphic() && *c != '"' && *c != '\\' && *c != ';')
        .collect();
    let mut response = (StatusCode::OK, bytes).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    if let Ok(v) = HeaderValue::from_str(&format!("{disposition}; filename=\"{name}\"")) {
        headers.insert(header::CONTENT_DISPOSITION, v);
    }
    response
}

/// `GET /api/v1/sessions/{id}/export`: the session's HTML page, as `keel sessions export
/// --format html` writes it (the log on disk, each tool result with its formation graph when
/// the session has a provenance journal). A page of its own (only its inline styles, no script),
/// opened beside the app.
pub(crate) async fn export(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let path = stored_path(&app, &id).await?;
    let home = app.store.home().to_path_buf();
    let session = crate::api::load_stored_at(path, &id).await?;
    let page = tokio::task::spawn_blocking(move || {
        keel_viewer::session_page(
            &home,
            &session,
            keel_viewer::DEFAULT_GRAPH_BUDGET,
            keel_host::presenters(),
        )
    })
    .await
    .map_err(|e| ApiError::internal(format!("exporting session {id} failed: {e}")))?
    .map_err(|e| ApiError::internal(format!("session {id}'s provenance journal: {e}")))?;
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; style-src 'unsafe-inline'; img-src data:; \
                 frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        page.html,
    )
        .into_response())
}
