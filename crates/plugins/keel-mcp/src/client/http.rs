//! Streamable HTTP servers: rmcp's transport-agnostic streamable HTTP client
//! ([`StreamableHttpClientTransport`]) over keel's own `reqwest` 0.12 client.
//!
//! rmcp's ready-made reqwest backend needs reqwest 0.13; [`HttpClient`] is a port of it
//! (`transport/common/reqwest/streamable_http_client.rs` in rmcp 3.11) with the same response
//! limits (16 MiB per SSE event and per JSON body, 64 KiB of an error body kept for its
//! message), the same handling of authorization challenges, rate limits and server errors, and
//! the same redirect policy (same-origin 307/308 only).
//!
//! The bearer token is read from its variable at connect time and kept only here, as a
//! sensitive header value: it is not handed to rmcp's transport configuration (whose `Debug`
//! shows it), no error or message carries it, and `Debug` of the client hides it.

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt, TryStreamExt};
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ErrorData, ServerJsonRpcMessage};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_LAST_EVENT_ID, HEADER_MCP_PROTOCOL_VERSION, HEADER_SESSION_ID,
    JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, SseError, StreamableHttpClient,
    StreamableHttpClientTransportConfig, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::{Sse, SseStream};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

mod body;
mod error;
mod status;

use body::*;
pub(crate) use error::{HttpError, TransportError};
use status::*;

/// Largest SSE event accepted (rmcp's default).
const MAX_SSE_EVENT: usize = 16 * 1024 * 1024;
/// Longest `Retry-After` value kept (rmcp's limit).
const MAX_RETRY_AFTER_BYTES: usize = 128;
/// Redirects followed for one request.
const MAX_REDIRECTS: usize = 10;
/// Bytes of an unparseable JSON body kept in a message.
const BODY_PREVIEW: usize = 256;
/// Headers the transport sets itself (a configured one would conflict).
const RESERVED_HEADERS: &[&str] = &["accept", HEADER_SESSION_ID, HEADER_LAST_EVENT_ID];
/// Reconnections of a broken SSE stream before it is given up (rmcp's default never gives
/// up, which would leave a call to a vanished server waiting for its tool timeout).
const SSE_RECONNECTS: usize = 3;

type Error = StreamableHttpError<HttpError>;

fn client_error(e: reqwest::Error) -> Error {
    StreamableHttpError::Client(HttpError::from(e))
}

/// keel's `reqwest` client for one server, with its bearer token (see the module docs).
#[derive(Clone)]
pub(crate) struct HttpClient {
    client: reqwest::Client,
    /// `Bearer <token>`, marked sensitive.
    authorization: Option<HeaderValue>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient")
            .field(
                "bearer_token",
                &self.authorization.as_ref().map(|_| "<redacted>"),
            )
            .finish_non_exhaustive()
    }
}

/// The transport to a streamable HTTP server: `url`, the configured `headers`, and the bearer
/// token from the variable `bearer_token_env_var` (read now, through `var`). A problem is a
/// message fit for a start failure: it names the header or the variable, never a value.
pub(crate) fn transport(
    url: &str,
    headers: &BTreeMap<String, String>,
    bearer_token_env_var: Option<&str>,
    var: &dyn Fn(&str) -> Result<String, std::env::VarError>,
) -> Result<StreamableHttpClientTransport<HttpClient>, TransportError> {
    let parsed = reqwest::Url::parse(url).map_err(TransportError::NotAUrl)?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(TransportError::Scheme(parsed.scheme().to_owned()));
    }
    let mut custom = HashMap::new();
    for (name, value) in headers {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| TransportError::HeaderName(name.clone()))?;
        if RESERVED_HEADERS
            .iter()
            .any(|r| header.as_str().eq_ignore_ascii_case(r))
        {
            return Err(TransportError::Reserved(name.clone()));
        }
        let mut value =
            HeaderValue::from_str(value).map_err(|_| TransportError::HeaderValue(name.clone()))?;
        value.set_sensitive(true);
        custom.insert(header, value);
    }
    let authorization = match bearer_token_env_var {
        None => None,
        Some(var_name) => {
            if custom.contains_key(&AUTHORIZATION) {
                return Err(TransportError::TwoAuthorizations(var_name.to_owned()));
            }
            let token = match var(var_name) {
                Ok(t) if !t.trim().is_empty() => t,
                Ok(_) => return Err(TransportError::TokenEmpty(var_name.to_owned())),
                Err(std::env::VarError::NotPresent) => {
                    return Err(TransportError::TokenUnset(var_name.to_owned()));
                }
                Err(std::env::VarError::NotUnicode(_)) => {
                    return Err(TransportError::TokenNotUnicode(var_name.to_owned()));
                }
            };
            let mut value = HeaderValue::from_str(&format!("Bearer {}", token.trim()))
                .map_err(|_| TransportError::TokenUnsendable(var_name.to_owned()))?;
            value.set_sensitive(true);
            Some(value)
        }
    };
    let client = reqwest::Client::builder()
        // rmcp's choice: no idle pooling (a half-read body stalls the next request).
        .pool_max_idle_per_host(0)
        .redirect(same_origin_redirect_policy())
        .build()
        .map_err(|e| TransportError::Client(HttpError::from(e)))?;
    let mut retry = ExponentialBackoff::default();
    retry.max_times = Some(SSE_RECONNECTS);
    retry.base_duration = Duration::from_millis(250);
    retry.max_delay = Some(Duration::from_secs(2));
    let mut config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
    config.retry_config = Arc::new(retry);
    Ok(StreamableHttpClientTransport::with_client(
        HttpClient {
            client,
            authorization,
        },
        config,
    ))
}

/// `url` fit for a message: no user name, password or query.
pub(crate) fn redacted_url(url: &str) -> String {
    let had_query = reqwest::Url::parse(url).is_ok_and(|u| u.query().is_some());
    let mut shown = crate::config::redact_url(url);
    if had_query {
        shown.push_str("?…");
    }
    shown
}

/// An rmcp error as a message: rmcp names the transport by its Rust type
/// (`Transport [rmcp::transport::worker::WorkerTransport<…>] error: …`), which says nothing
/// to a user; that part is dropped.
pub(crate) fn explain(e: &dyn std::fmt::Display) -> String {
    let mut text = e.to_string();
    while let Some(start) = text.find("Transport [") {
        let Some(len) = text[start..].find("] error: ") else {
            break;
        };
        text.replace_range(start..start + len + "] error: ".len(), "");
    }
    text
}

/// A failed `initialize` as a message: where it failed, then why.
pub(crate) fn explain_init(e: &rmcp::service::ClientInitializeError) -> String {
    use rmcp::service::ClientInitializeError as E;
    match e {
        E::TransportError { error, context } => format!("{context}: {}", error.error),
        E::LegacyFallbackFailed { discover, fallback } => format!(
            "server/discover failed ({}), and so did initialize ({})",
            explain_init(discover),
            explain_init(fallback)
        ),
        E::ExpectedInitResult(Some(got)) => format!(
            "its answer is not the result asked for: it sent {}",
            shorten(&serde_json::to_string(got).unwrap_or_else(|_| format!("{got:?}")))
        ),
        E::ExpectedInitResponse(Some(got)) => format!(
            "it sent something other than the answer: {}",
            shorten(&serde_json::to_string(got).unwrap_or_else(|_| format!("{got:?}")))
        ),
        E::JsonRpcError(data) => format!(
            "it answered with JSON-RPC error {}: {}",
            data.code.0,
            shorten(&data.message)
        ),
        other => explain(other),
    }
}

/// `text` cut to 300 characters (what a message quotes of what a server sent).
pub(crate) fn shorten(text: &str) -> String {
    match text.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

/// Only same-origin 307 and 308 redirects (they keep the method and the body) are followed,
/// at most [`MAX_REDIRECTS`]; any other redirect is returned to the transport, which reports
/// it. A cross-origin one would replay the session id and the headers to another host.
fn same_origin_redirect_policy() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let preserves_body = matches!(
            attempt.status(),
            StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT
        );
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|original| original.origin() == attempt.url().origin());
        if !preserves_body || !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("exceeded {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    })
}

impl HttpClient {
    fn authorize(
        &self,
        builder: reqwest::RequestBuilder,
        auth_token: Option<String>,
    ) -> reqwest::RequestBuilder {
        // keel never gives rmcp a token; one given anyway is used as rmcp would.
        match (auth_token, &self.authorization) {
            (Some(token), _) => builder.bearer_auth(token),
            (None, Some(value)) => builder.header(AUTHORIZATION, value.clone()),
            (None, None) => builder,
        }
    }
}

/// Configured headers on a request; the transport's own ones are refused.
fn apply_custom_headers(
    mut builder: reqwest::RequestBuilder,
    custom_headers: HashMap<HeaderName, HeaderValue>,
) -> Result<reqwest::RequestBuilder, Error> {
    for (name, value) in custom_headers {
        let reserved = RESERVED_HEADERS
            .iter()
            .any(|r| name.as_str().eq_ignore_ascii_case(r));
        // The worker adds MCP-Protocol-Version itself after initialize.
        if reserved
            && !name
                .as_str()
                .eq_ignore_ascii_case(HEADER_MCP_PROTOCOL_VERSION)
        {
            return Err(StreamableHttpError::ReservedHeaderConflict(
                name.to_string(),
            ));
        }
        builder = builder.header(name, value);
    }
    Ok(builder)
}

/// A sessionless `server/discover` rejected by a 4xx, as a JSON-RPC error answering it, so
/// that rmcp's lifecycle falls back to `initialize` (rmcp's `legacy_discover_response`).
fn legacy_discover_response(
    message: &ClientJsonRpcMessage,
    session_was_attached: bool,
    status: StatusCode,
    body: &str,
) -> Option<StreamableHttpPostResponse> {
    if session_was_attached
        || !status.is_client_error()
        || matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
    {
        return None;
    }
    let ClientJsonRpcMessage::Request(request) = message else {
        return None;
    };
    if !matches!(request.request, ClientRequest::DiscoverRequest(_)) {
        return None;
    }
    let error = match serde_json::from_str::<ServerJsonRpcMessage>(body) {
        Ok(ServerJsonRpcMessage::Error(error)) => error.error,
        _ => ErrorData::invalid_request(
            format!("server/discover rejected with HTTP {status}: {body}"),
            None,
        ),
    };
    Some(StreamableHttpPostResponse::Json(
        ServerJsonRpcMessage::error(error, Some(request.id.clone())),
        None,
    ))
}

fn accept_both() -> String {
    [EVENT_STREAM_MIME_TYPE, JSON_MIME_TYPE].join(", ")
}

impl StreamableHttpClient for HttpClient {
    type Error = HttpError;

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_token,
            custom_headers,
            MAX_SSE_EVENT,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        let mut request = self.client.get(uri.as_ref()).header(ACCEPT, accept_both());
        if let Some(session_id) = session_id {
            request = request.header(HEADER_SESSION_ID, session_id.as_ref());
        }
        if let Some(last_event_id) = last_event_id {
            request = request.header(HEADER_LAST_EVENT_ID, last_event_id);
        }
        request = self.authorize(request, auth_token);
        request = apply_custom_headers(request, custom_headers)?;
        let response = request.send().await.map_err(client_error)?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if let Some(error) = auth_challenge(&response) {
            return Err(error);
        }
        if let Some(error) = http_status_error(response.status(), response.headers()) {
            return Err(error.into());
        }
        let response = response.error_for_status().map_err(client_error)?;
        match response.headers().get(CONTENT_TYPE) {
            Some(ct) => {
                if !media_type_is(ct.as_bytes(), EVENT_STREAM_MIME_TYPE)
                    && !media_type_is(ct.as_bytes(), JSON_MIME_TYPE)
                {
                    return Err(StreamableHttpError::UnexpectedContentType(Some(
                        String::from_utf8_lossy(ct.as_bytes()).to_string(),
                    )));
                }
            }
            None => return Err(StreamableHttpError::UnexpectedContentType(None)),
        }
        Ok(bounded_sse_stream(
            response.bytes_stream(),
            max_sse_event_size,
        ))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session: Arc<str>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        let mut request = self.client.delete(uri.as_ref());
        request = self.authorize(request, auth_token);
        request = request.header(HEADER_SESSION_ID, session.as_ref());
        request = apply_custom_headers(request, custom_headers)?;
        let response = request.send().await.map_err(client_error)?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            // The server does not support ending sessions.
            return Ok(());
        }
        response.error_for_status().map_err(client_error)?;
        Ok(())
    }

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_token,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_token,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let mut request = self.client.post(uri.as_ref()).header(ACCEPT, accept_both());
        request = self.authorize(request, auth_token);
        request = apply_custom_headers(request, custom_headers)?;
        let session_was_attached = session_id.is_some();
        if let Some(session_id) = session_id {
            request = request.header(HEADER_SESSION_ID, session_id.as_ref());
        }
        let body = serde_json::to_vec(&message)?;
        let response = request
            .header(CONTENT_TYPE, JSON_MIME_TYPE)
            .body(body)
            .send()
            .await
            .map_err(client_error)?;
        if let Some(error) = auth_challenge(&response) {
            return Err(error);
        }
        let status = response.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_was_attached {
            return Err(StreamableHttpError::SessionExpired);
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .map(|ct| String::from_utf8_lossy(ct.as_bytes()).to_string());
        let is_json_response = content_type
            .as_deref()
            .is_some_and(|ct| media_type_is(ct.as_bytes(), JSON_MIME_TYPE));
        // Rate limits and non-JSON failures return without reading the body; JSON server
        // failures are read (bounded) to keep their JSON-RPC error.
        let status_error = match (
            http_status_error(status, response.headers()),
            is_json_response,
        ) {
            (Some(error), is_json) if !is_json || status == StatusCode::TOO_MANY_REQUESTS => {
                return Err(error.into());
            }
            (error, _) => error,
        };
        let content_length = response.content_length();
        let session_id = response
            .headers()
            .get(HEADER_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(|s| s.to_string());
        // Notifications, responses and errors leave no request waiting for an answer.
        let awaits_no_response = matches!(
            message,
            ClientJsonRpcMessage::Notification(_)
                | ClientJsonRpcMessage::Response(_)
                | ClientJsonRpcMessage::Error(_)
        );
        // Some servers answer these with an empty 200 rather than 202.
        if status.is_success() && content_length == Some(0) && awaits_no_response {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if !status.is_success() {
            let content_type_header = response.headers().get(CONTENT_TYPE).cloned();
            // A 401/403 without a challenge keeps its status (not a JSON-RPC error).
            let is_auth_failure =
                matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN);
            let body = if is_json_response && !is_auth_failure {
                match read_bounded_body(
                    response.bytes_stream(),
                    content_length,
                    limits.max_json_response_size,
                )
                .await
                {
                    Ok(raw_body) => {
                        let prefix_bytes = (raw_body.len() > limits.max_error_response_size)
                            .then(|| raw_body[..limits.max_error_response_size].to_vec());
                        let full_body = decode_error_body(
                            raw_body,
                            content_type_header.clone(),
                            limits.max_error_response_size,
                        )
                        .await;
                        if let Some(error_message) = parse_json_rpc_error(&full_body) {
                            if let Some(response) = legacy_discover_response(
                                &message,
                                session_was_attached,
                                status,
                                &full_body,
                            ) {
                                return Ok(response);
                            }
                            return Ok(StreamableHttpPostResponse::Json(error_message, session_id));
                        }
                        match prefix_bytes {
                            Some(prefix) => {
                                decode_error_body(
                                    prefix,
                                    content_type_header,
                                    limits.max_error_response_size,
                                )
                                .await
                            }
                            None => full_body,
                        }
                    }
                    Err(error @ StreamableHttpError::ResponseBodyTooLarge { .. }) => {
                        return Err(status_error.map(StreamableHttpError::from).unwrap_or(error));
                    }
                    Err(StreamableHttpError::Client(_)) => {
                        truncated_read_failure(limits.max_error_response_size)
                    }
                    Err(error) => return Err(error),
                }
            } else {
                match read_truncated_body(response.bytes_stream(), limits.max_error_response_size)
                    .await
                {
                    Ok(prefix) => {
                        decode_error_body(
                            prefix,
                            content_type_header,
                            limits.max_error_response_size,
                        )
                        .await
                    }
                    Err(StreamableHttpError::Client(_)) => {
                        truncated_read_failure(limits.max_error_response_size)
                    }
                    Err(error) => return Err(error),
                }
            };
            if let Some(response) =
                legacy_discover_response(&message, session_was_attached, status, &body)
            {
                return Ok(response);
            }
            if let Some(error) = status_error {
                return Err(error.into());
            }
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("HTTP {status}: {body}"),
            )));
        }
        match content_type.as_deref() {
            Some(ct) if media_type_is(ct.as_bytes(), EVENT_STREAM_MIME_TYPE) => {
                let events = bounded_sse_stream(response.bytes_stream(), limits.max_sse_event_size);
                Ok(StreamableHttpPostResponse::Sse(events, session_id))
            }
            Some(ct) if media_type_is(ct.as_bytes(), JSON_MIME_TYPE) => {
                let body = read_bounded_body(
                    response.bytes_stream(),
                    content_length,
                    limits.max_json_response_size,
                )
                .await?;
                match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                    Ok(parsed) => Ok(StreamableHttpPostResponse::Json(parsed, session_id)),
                    // Nothing waits for an answer: an unusable body is as good as accepted.
                    Err(_) if awaits_no_response => Ok(StreamableHttpPostResponse::Accepted),
                    Err(e) => Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                        format!(
                            "could not parse JSON response as ServerJsonRpcMessage: {e}: {}",
                            body_preview(&body)
                        ),
                    ))),
                }
            }
            // Neither JSON nor SSE: fine when nothing waits for an answer.
            _ if awaits_no_response => Ok(StreamableHttpPostResponse::Accepted),
            _ => Err(StreamableHttpError::UnexpectedContentType(content_type)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_vars(_: &str) -> Result<String, std::env::VarError> {
        Err(std::env::VarError::NotPresent)
    }

    fn error_of(r: Result<StreamableHttpClientTransport<HttpClient>, TransportError>) -> String {
        match r {
            Ok(_) => panic!("expected an error"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn an_unset_token_variable_is_named() {
        let e = error_of(transport(
            "http://127.0.0.1:1/mcp",
            &BTreeMap::new(),
            Some("KEEL_NO_SUCH_TOKEN"),
            &no_vars,
        ));
        assert_eq!(
            e,
            "bearer_token_env_var: the variable KEEL_NO_SUCH_TOKEN is not set"
        );
    }

    #[test]
    fn a_bad_token_is_refused_without_its_value() {
        let secret = "s3cr3t\nvalue";
        let e = error_of(transport(
            "http://127.0.0.1:1/mcp",
            &BTreeMap::new(),
            Some("T"),
            &|_| Ok(secret.to_owned()),
        ));
        assert!(e.contains("cannot be sent in a header"), "{e}");
        assert!(!e.contains("s3cr3t"), "{e}");
    }

    #[test]
    fn the_client_debug_hides_the_token() {
        let client = HttpClient {
            client: reqwest::Client::new(),
            authorization: Some(HeaderValue::from_static("Bearer s3cr3t")),
        };
        let shown = format!("{client:?}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }

    #[test]
    fn headers_are_checked() {
        let mut h = BTreeMap::new();
        h.insert("Mcp-Session-Id".to_owned(), "x".to_owned());
        let e = error_of(transport("http://127.0.0.1:1/mcp", &h, None, &no_vars));
        assert!(e.contains("set by the transport"), "{e}");
        let mut h = BTreeMap::new();
        h.insert("Authorization".to_owned(), "Bearer a".to_owned());
        let e = error_of(transport("http://127.0.0.1:1/mcp", &h, Some("T"), &|_| {
            Ok("b".to_owned())
        }));
        assert!(e.contains("give one"), "{e}");
        let mut h = BTreeMap::new();
        h.insert("X-Key".to_owned(), "bad\nvalue".to_owned());
        let e = error_of(transport("http://127.0.0.1:1/mcp", &h, None, &no_vars));
        assert!(e.contains("X-Key") && !e.contains("bad"), "{e}");
        let e = error_of(transport("ftp://x/mcp", &BTreeMap::new(), None, &no_vars));
        assert!(e.contains("http://"), "{e}");
    }

    #[test]
    fn urls_are_redacted() {
        assert_eq!(
            redacted_url("https://u:p@example.com/mcp?key=abc"),
            "https://example.com/mcp?…"
        );
        assert_eq!(
            redacted_url("http://127.0.0.1:9/mcp"),
            "http://127.0.0.1:9/mcp"
        );
    }

    #[test]
    fn media_types_and_scopes() {
        assert!(media_type_is(
            b"Application/JSON; charset=utf-8",
            JSON_MIME_TYPE
        ));
        assert!(!media_type_is(b"application/jsonl", JSON_MIME_TYPE));
        assert_eq!(
            extract_scope_from_header(r#"Bearer error="insufficient_scope", scope="a b""#),
            Some("a b".to_owned())
        );
        assert_eq!(
            extract_scope_from_header("Bearer scope=read:data, x=1"),
            Some("read:data".to_owned())
        );
        assert_eq!(extract_scope_from_header("Bearer"), None);
    }

    #[tokio::test]
    async fn an_oversized_sse_event_ends_the_stream() {
        let source = futures::stream::iter([Ok::<_, reqwest::Error>(Bytes::from(
            "data: this event is too large\n",
        ))]);
        let mut events = bounded_sse_stream(source, 16);
        let first = events.next().await;
        assert!(
            matches!(&first, Some(Err(e)) if e.to_string().contains("maximum size of 16 bytes")),
            "{first:?}"
        );
        let source = futures::stream::iter([Ok::<_, reqwest::Error>(Bytes::from("data: ok\n\n"))]);
        let mut events = bounded_sse_stream(source, 16);
        let first = events.next().await;
        assert!(
            matches!(&first, Some(Ok(sse)) if sse.data.as_deref() == Some("ok")),
            "{first:?}"
        );
    }
}
