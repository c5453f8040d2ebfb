//! The streaming HTTP client of every wire format keel speaks ([`WireApi`]): chat completions
//! (`POST {base_url}/chat/completions`, DeepSeek and OpenAI-compatible servers), the Messages API
//! (`POST {base_url}/v1/messages`, DeepSeek's Anthropic endpoint and Anthropic) and OpenAI's
//! Responses API (`POST {base_url}/responses`), all over SSE.
//!
//! Data flow per call: [`WireApi::body`] → HTTP (reqwest) → body bytes → [`SseParser`] →
//! [`Translator`] → chunks. Every wait (response headers, each body read) is bounded by
//! the idle timeout (`TIMEOUT`) and raced against the caller's cancellation token (`ABORTED`).
//! HTTP errors are classified by [`crate::classify`]. The API key, when the provider has one, is
//! sent only in the `Authorization` header (`x-api-key` on the Messages wire; marked sensitive), is redacted from every failure
//! message, and never shows in `Debug` output; a provider without a key sends no
//! `Authorization` header at all (local servers).

use crate::catalogue::{DEFAULT_BASE_URL, ModelCatalogue};
use crate::classify::{http_failure, parse_retry_after};
pub use crate::credentials::{ApiKey, ConfigError};
use crate::messages::{ANTHROPIC_VERSION, MessagesOptions};
use crate::provider::{ChunkStream, Provider};
use crate::request::ChatRequest;
use crate::sse::SseParser;
use crate::translate::Progress;
use crate::wire::{Translator, WireApi, WireOptions};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use keel_protocol::{FailureCode, ModelFailure, StreamChunk};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use std::pin::Pin;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Environment variable holding the DeepSeek API key.
pub const API_KEY_ENV: &str = "DEEPSEEK_API_KEY";
/// Environment variable overriding the DeepSeek base URL.
pub const BASE_URL_ENV: &str = "DEEPSEEK_BASE_URL";
/// Default idle timeout of a stream.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// Largest error body read from a failed response.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// The base URL to use: the configured one, else `DEEPSEEK_BASE_URL`, else DeepSeek's.
pub fn resolve_base_url(configured: Option<&str>) -> String {
    configured
        .map(str::to_owned)
        .or_else(|| {
            std::env::var(BASE_URL_ENV)
                .ok()
                .filter(|s| !s.trim().is_empty())
        })
        .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned())
}

/// Everything an [`OpenAiProvider`] needs.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// Provider name, as written in message sources (e.g. `deepseek`).
    pub name: String,
    /// Base URL; `/chat/completions` is appended.
    pub base_url: String,
    /// The API key sent as `Authorization: Bearer`; `None` sends no `Authorization` header.
    pub api_key: Option<ApiKey>,
    /// A stream idle for this long fails with `TIMEOUT` (also bounds the wait for headers).
    pub idle_timeout: Duration,
    /// TCP/TLS connect timeout (a slow connect fails with `TRANSPORT`).
    pub connect_timeout: Duration,
    /// Model catalogue used to shape request bodies.
    pub catalogue: ModelCatalogue,
    /// The wire format (chat completions unless the provider's table says otherwise).
    pub api: WireApi,
    /// Send the Messages API's request-level `cache_control` (Anthropic's automatic caching).
    pub cache_control: bool,
}

impl ProviderConfig {
    /// A configuration with defaults: 300 s idle timeout, 30 s connect timeout, DeepSeek's
    /// catalogue.
    pub fn new(name: impl Into<String>, base_url: impl Into<String>, api_key: ApiKey) -> Self {
        ProviderConfig {
            api_key: Some(api_key),
            ..ProviderConfig::without_key(name, base_url)
        }
    }

    /// Like [`ProviderConfig::new`] for an endpoint that needs no key (a local server): no
    /// `Authorization` header is sent.
    pub fn without_key(name: impl Into<String>, base_url: impl Into<String>) -> Self {
        ProviderConfig {
            name: name.into(),
            base_url: base_url.into(),
            api_key: None,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            connect_timeout: Duration::from_secs(30),
            catalogue: ModelCatalogue::default(),
            api: WireApi::Chat,
            cache_control: false,
        }
    }

    /// DeepSeek from the environment: the key from `DEEPSEEK_API_KEY`, the base URL from
    /// `DEEPSEEK_BASE_URL` or DeepSeek's default.
    pub fn deepseek_from_env() -> Result<Self, ConfigError> {
        Ok(ProviderConfig::new(
            "deepseek",
            resolve_base_url(None),
            ApiKey::from_env(API_KEY_ENV)?,
        ))
    }
}

/// The streaming HTTP client, for any [`WireApi`].
#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    name: String,
    api: WireApi,
    options: WireOptions,
    endpoint: reqwest::Url,
    auth: Option<HeaderValue>,
    key: Option<ApiKey>,
    idle_timeout: Duration,
    catalogue: ModelCatalogue,
    client: reqwest::Client,
}

fn endpoint_url(base: &str, api: WireApi) -> Result<reqwest::Url, ConfigError> {
    let invalid = |reason: String| ConfigError::InvalidBaseUrl {
        url: base.to_owned(),
        reason,
    };
    let full = api.endpoint(base);
    let url = reqwest::Url::parse(&full).map_err(|e| invalid(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("the scheme must be http or https".into()));
    }
    Ok(url)
}

impl OpenAiProvider {
    /// Builds the client. Fails on an invalid base URL or if the HTTP client cannot be built.
    pub fn new(config: ProviderConfig) -> Result<Self, ConfigError> {
        let endpoint = endpoint_url(&config.base_url, config.api)?;
        let auth = match &config.api_key {
            None => None,
            Some(key) => {
                let value = match config.api {
                    WireApi::Messages => key.expose().to_owned(),
                    WireApi::Chat | WireApi::Responses => format!("Bearer {}", key.expose()),
                };
                let mut auth =
                    HeaderValue::from_str(&value).map_err(|_| ConfigError::MalformedApiKey {
                        var: config.name.clone(),
                        reason: "cannot be sent in an HTTP header",
                    })?;
                auth.set_sensitive(true);
                Some(auth)
            }
        };
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .tcp_nodelay(true)
            .build()
            .map_err(ConfigError::Client)?;
        Ok(OpenAiProvider {
            name: config.name,
            api: config.api,
            options: WireOptions {
                messages: MessagesOptions {
                    cache_control: config.cache_control,
                },
            },
            endpoint,
            auth,
            key: config.api_key,
            idle_timeout: config.idle_timeout,
            catalogue: config.catalogue,
            client,
        })
    }

    /// The full URL requests go to (e.g. `…/chat/completions`).
    pub fn endpoint(&self) -> &str {
        self.endpoint.as_str()
    }

    /// The catalogue shaping this provider's request bodies.
    pub fn catalogue(&self) -> &ModelCatalogue {
        &self.catalogue
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn stream(&self, request: ChatRequest, cancel: CancellationToken) -> ChunkStream {
        let info = self.catalogue.lookup(&request.model);
        let body = self.api.body(&request, &info, self.options);
        tracing::debug!(model = %request.model, bytes = body.len(), "llm request");
        let call = Call {
            provider: self.clone(),
            body: Some(body),
            cancel,
            response: None,
            request_id: None,
            parser: SseParser::new(),
            translator: self.api.translator(),
            scratch: Vec::new(),
            pending: Vec::new().into_iter(),
            deferred: None,
            finished: false,
        };
        futures::stream::unfold(call, |mut call| async move {
            let item = call.next().await?;
            Some((item, call))
        })
        .boxed()
    }
}

type BodyStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// One in-flight call: the state machine behind the chunk stream.
struct Call {
    provider: OpenAiProvider,
    body: Option<Vec<u8>>,
    cancel: CancellationToken,
    response: Option<BodyStream>,
    request_id: Option<String>,
    parser: SseParser,
    translator: Translator,
    scratch: Vec<StreamChunk>,
    pending: std::vec::IntoIter<StreamChunk>,
    deferred: Option<ModelFailure>,
    finished: bool,
}

fn aborted() -> ModelFailure {
    ModelFailure::new(FailureCode::Aborted, "the model call was cancelled")
}

/// `url` in `text` without its user info and query (reqwest names the URL in its errors; a
/// server may echo the path and query back), and what those held, wherever else it shows.
fn redact_url(text: &mut String, url: &reqwest::Url) {
    let mut bare = url.clone();
    bare.set_query(None);
    let _ = bare.set_username("");
    let _ = bare.set_password(None);
    if bare.as_str() != url.as_str() {
        *text = text.replace(url.as_str(), bare.as_str());
    }
    let pieces = [url.query(), url.password(), Some(url.username())];
    for piece in pieces.into_iter().flatten().filter(|p| p.len() >= 4) {
        *text = text.replace(piece, "<redacted>");
    }
}

/// `Display` of an error with its sources, e.g. "error sending request: connection refused".
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

fn header_str(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

impl Call {
    async fn next(&mut self) -> Option<Result<StreamChunk, ModelFailure>> {
        loop {
            if let Some(chunk) = self.pending.next() {
                return Some(Ok(chunk));
            }
            if let Some(failure) = self.deferred.take() {
                self.finished = true;
                return Some(Err(self.finalise(failure)));
            }
            if self.finished {
                return None;
            }
            if let Err(failure) = self.step().await {
                self.deferred = Some(failure);
            }
        }
    }

    /// Attaches the request id and strips the key, and the endpoint's credentials (user info,
    /// query), from a failure: its text goes into the session log.
    fn finalise(&self, mut failure: ModelFailure) -> ModelFailure {
        if failure.request_id.is_none() {
            failure.request_id.clone_from(&self.request_id);
        }
        if let Some(key) = self.provider.key.as_ref().map(ApiKey::expose)
            && key.len() >= 4
            && failure.message.contains(key)
        {
            failure.message = failure.message.replace(key, "<redacted>");
        }
        redact_url(&mut failure.message, &self.provider.endpoint);
        failure
    }

    /// Connects, or reads and translates the next piece of the body into `pending`.
    async fn step(&mut self) -> Result<(), ModelFailure> {
        let Some(response) = self.response.as_mut() else {
            let stream = self.connect().await?;
            self.response = Some(stream);
            return Ok(());
        };
        let idle = self.provider.idle_timeout;
        let read = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return Err(aborted()),
            read = tokio::time::timeout(idle, response.next()) => read,
        };
        match read {
            Err(_) => Err(ModelFailure::new(
                FailureCode::Timeout,
                format!("the stream was idle for {} s", idle.as_secs_f64()),
            )),
            Ok(Some(Err(e))) => Err(ModelFailure::new(
                FailureCode::StreamClosed,
                format!("the connection broke mid-stream: {}", error_chain(&e)),
            )),
            Ok(Some(Ok(bytes))) => {
                self.parser.feed(&bytes);
                let result = self.drain_events(BodyState::Streaming);
                self.pending = std::mem::take(&mut self.scratch).into_iter();
                result
            }
            Ok(None) => {
                let result = self.drain_events(BodyState::Ended);
                self.pending = std::mem::take(&mut self.scratch).into_iter();
                result?;
                if self.translator.is_done() {
                    Ok(())
                } else {
                    Err(self.translator.end_of_stream())
                }
            }
        }
    }

    /// Translates every complete event; at end of body also the unterminated remainder.
    fn drain_events(&mut self, body: BodyState) -> Result<(), ModelFailure> {
        loop {
            let event = match body {
                BodyState::Ended => self.parser.finish(),
                BodyState::Streaming => self.parser.next_event(),
            };
            let Some(event) = event else { return Ok(()) };
            let event = event.map_err(|e| {
                ModelFailure::new(
                    FailureCode::MalformedResponse,
                    format!("unreadable event stream: {e}"),
                )
            })?;
            if self.translator.push(event.data, &mut self.scratch)? == Progress::Done {
                self.finished = true;
                self.response = None; // stop reading; drops the connection
                return Ok(());
            }
        }
    }

    async fn connect(&mut self) -> Result<BodyStream, ModelFailure> {
        if self.cancel.is_cancelled() {
            return Err(aborted());
        }
        let body = self.body.take().unwrap_or_default();
        let mut request = self
            .provider
            .client
            .post(self.provider.endpoint.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream");
        match (&self.provider.auth, self.provider.api) {
            (Some(auth), WireApi::Messages) => request = request.header("x-api-key", auth.clone()),
            (Some(auth), _) => request = request.header(AUTHORIZATION, auth.clone()),
            (None, _) => {}
        }
        if self.provider.api == WireApi::Messages {
            request = request.header("anthropic-version", ANTHROPIC_VERSION);
        }
        let request = request.body(body).send();
        let idle = self.provider.idle_timeout;
        let sent = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return Err(aborted()),
            sent = tokio::time::timeout(idle, request) => sent,
        };
        let response = match sent {
            Err(_) => {
                return Err(ModelFailure::new(
                    FailureCode::Timeout,
                    format!("no response within {} s", idle.as_secs_f64()),
                ));
            }
            Ok(Err(e)) => {
                let kind = if e.is_timeout() {
                    "timed out connecting"
                } else {
                    "could not reach the provider"
                };
                return Err(ModelFailure::new(
                    FailureCode::Transport,
                    format!("{kind}: {}", error_chain(&e)),
                ));
            }
            Ok(Ok(response)) => response,
        };
        let headers = response.headers();
        self.request_id =
            header_str(headers, "x-request-id").or_else(|| header_str(headers, "request-id"));
        let status = response.status();
        if status.is_success() {
            return Ok(Box::pin(response.bytes_stream()));
        }
        let retry_after_ms = header_str(headers, "retry-after-ms")
            .and_then(|v| v.trim().parse().ok())
            .or_else(|| header_str(headers, "retry-after").and_then(|v| parse_retry_after(&v)));
        let body = read_error_body(response, &self.cancel, self.provider.idle_timeout).await?;
        Err(http_failure(
            status.as_u16(),
            &body,
            retry_after_ms,
            self.request_id.clone(),
        ))
    }
}

/// Reads at most [`MAX_ERROR_BODY`] bytes of an error response (idle-bounded, cancellable).
async fn read_error_body(
    response: reqwest::Response,
    cancel: &CancellationToken,
    idle: Duration,
) -> Result<String, ModelFailure> {
    {
        let mut stream = response.bytes_stream();
        let mut body = Vec::new();
        loop {
            let read = tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(aborted()),
                read = tokio::time::timeout(idle, stream.next()) => read,
            };
            match read {
                Ok(Some(Ok(bytes))) => {
                    body.extend_from_slice(&bytes);
                    if body.len() >= MAX_ERROR_BODY {
                        body.truncate(MAX_ERROR_BODY);
                        break;
                    }
                }
                // A broken or slow error body: classify on what arrived.
                Ok(Some(Err(_))) | Ok(None) | Err(_) => break,
            }
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    }
}

/// Whether the response body may still bring bytes (what `Call::drain_events` may parse).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyState {
    /// More bytes may come: only complete events are taken.
    Streaming,
    /// The body ended: an unterminated last event is taken too.
    Ended,
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn keys_are_validated_and_never_shown() {
        let key = ApiKey::new("  sk-abc123\n", "DEEPSEEK_API_KEY").unwrap();
        assert_eq!(key.expose(), "sk-abc123");
        assert_eq!(format!("{key:?} {key}"), "ApiKey(<redacted>) <redacted>");
        let err = ApiKey::new(" ", "MY_KEY").unwrap_err();
        assert_eq!(
            err.to_string(),
            "no API key: set the environment variable MY_KEY"
        );
        let err = ApiKey::new("sk-ab c", "MY_KEY").unwrap_err();
        assert_eq!(
            err.to_string(),
            "the API key in MY_KEY is malformed: it contains whitespace or control characters"
        );
        assert!(!err.to_string().contains("sk-ab"));
        let err = ApiKey::new("sk-ключ", "MY_KEY").unwrap_err();
        assert!(err.to_string().contains("non-ASCII"));
        let err = ApiKey::from_env("KEEL_LLM_TEST_SURELY_UNSET_VARIABLE").unwrap_err();
        assert!(
            err.to_string()
                .contains("KEEL_LLM_TEST_SURELY_UNSET_VARIABLE")
        );
    }

    fn endpoint_url_chat(base: &str) -> Result<reqwest::Url, ConfigError> {
        endpoint_url(base, WireApi::Chat)
    }

    #[test]
    fn endpoints_and_debug() {
        assert_eq!(
            endpoint_url_chat("https://api.deepseek.com")
                .unwrap()
                .as_str(),
            "https://api.deepseek.com/chat/completions"
        );
        assert_eq!(
            endpoint_url_chat("http://127.0.0.1:9/v1/")
                .unwrap()
                .as_str(),
            "http://127.0.0.1:9/v1/chat/completions"
        );
        assert_eq!(
            endpoint_url_chat("http://h/chat/completions")
                .unwrap()
                .as_str(),
            "http://h/chat/completions"
        );
        assert!(endpoint_url_chat("ftp://h").is_err());
        assert!(endpoint_url_chat("not a url").is_err());
        let key = ApiKey::new("sk-secret-value", "K").unwrap();
        let provider =
            OpenAiProvider::new(ProviderConfig::new("deepseek", "http://127.0.0.1:1", key))
                .unwrap();
        let shown = format!("{provider:?}");
        assert!(!shown.contains("sk-secret-value"), "{shown}");
        assert_eq!(provider.name(), "deepseek");
    }
}
