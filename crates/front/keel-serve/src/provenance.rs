//! `GET /api/v1/sessions/{id}/provenance?call=ID`: the formation graph of one tool result, as
//! the SVG document `keel trace result:ID --format svg` draws (keel-viewer lays it out; the
//! subagents' journals are in scope). The web app shows it under the tool's card.
//!
//! The document is an image of the server's origin, so it is answered with a Content-Security-
//! Policy that lets nothing in it run or load, and `nosniff`. A session without a journal is
//! `404 no_provenance`; a call the journal has no settled result for is `404 no_graph`.

use crate::api::stored_path;
use crate::{ApiError, App};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use keel_protocol::SessionId;
use keel_viewer::ResultGraph;
use serde::Deserialize;
use std::sync::Arc;

/// The query of `GET …/provenance`.
#[derive(Debug, Deserialize)]
pub(crate) struct GraphQuery {
    /// The tool call whose result is traced.
    call: String,
}

/// Whether session `id` records provenance (its journal exists under the server's home).
pub(crate) fn recorded(app: &App, id: &str) -> bool {
    keel_viewer::records_provenance(app.store.home(), &SessionId::from(id))
}

/// `GET /api/v1/sessions/{id}/provenance?call=ID`.
pub(crate) async fn graph(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    query: Result<Query<GraphQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| {
        ApiError::bad_request(format!("the query must name the tool call (?call=ID): {e}"))
    })?;
    if query.call.is_empty() || query.call.len() > 512 {
        return Err(ApiError::bad_request(
            "?call= must be a tool call id (1 to 512 bytes)",
        ));
    }
    stored_path(&app, &id).await?;
    let home = app.store.home().to_path_buf();
    let (session, call) = (SessionId::from(id.as_str()), query.call.clone());
    let drawn =
        tokio::task::spawn_blocking(move || keel_viewer::result_graph(&home, &session, &call))
            .await
            .map_err(|e| ApiError::internal(format!("tracing in session {id} failed: {e}")))?
            .map_err(|e| ApiError::internal(format!("session {id}'s provenance journal: {e}")))?;
    match drawn {
        ResultGraph::NoJournal => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "no_provenance",
            format!(
                "session {id} records no provenance (start `keel serve --provenance`, or enable \
                 the [[plugins]] row with use = \"provenance\")"
            ),
        )),
        ResultGraph::NoAnswer(why) => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "no_graph",
            format!(
                "no formation graph for the result of call {}: {why}",
                query.call
            ),
        )),
        ResultGraph::Drawn { svg, .. } => Ok((
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, "image/svg+xml"),
                (
                    header::CONTENT_SECURITY_POLICY,
                    "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'self'",
                ),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            svg,
        )
            .into_response()),
    }
}
