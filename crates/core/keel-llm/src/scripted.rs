//! The scripted provider: replays a [`Script`] deterministically, with no network.
//!
//! Each call takes the next matching response ([`ScriptCursor`]), plans its delivery with
//! [`crate::script_render::plan`] and runs the resulting payloads through the real client's
//! [`StreamTranslator`], so `keel demo` and the loop's tests see exactly what the HTTP client
//! would produce for the same script served by the mock server: same chunks, same failure codes.
//! A stall longer than the idle timeout fails with `TIMEOUT`; cancellation ends with `ABORTED`.

use crate::catalogue::ModelCatalogue;
use crate::classify::http_failure;
use crate::provider::{ChunkStream, Provider};
use crate::request::{ChatRequest, NO_OUTPUT, request_body_bytes};
use crate::script::{Script, ScriptCursor, ScriptError, ScriptFormat};
use crate::script_render::{Delivery, PromptCacheSim, Stall, plan};
use crate::translate::{Progress, StreamTranslator};
use futures::StreamExt;
use keel_protocol::sync::Locked;
use keel_protocol::{ContentBlock, FailureCode, Message, ModelFailure, Role, StreamChunk};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Replays a script. See the module docs.
#[derive(Debug)]
pub struct ScriptedProvider {
    name: String,
    cursor: Mutex<ScriptCursor>,
    cache: Mutex<PromptCacheSim>,
    requests: Mutex<Vec<ChatRequest>>,
    /// Whether [`ScriptedProvider::requests`] keeps what was received (tests read it; a long
    /// scripted run does not need its whole history kept once per request).
    record: bool,
    catalogue: ModelCatalogue,
    idle_timeout: Duration,
}

/// The text of the request's last user message: the last one a human typed, else the last user
/// message with text.
pub fn last_user_text(messages: &[Message]) -> Option<String> {
    let with_text = |m: &&Message| m.role == Role::User && !m.text().is_empty();
    messages
        .iter()
        .rev()
        .filter(with_text)
        .find(|m| m.source.is_user())
        .or_else(|| messages.iter().rev().find(with_text))
        .map(Message::text)
}

/// The text of the request's last tool result.
pub fn last_tool_result_text(messages: &[Message]) -> Option<String> {
    messages.iter().rev().find_map(|m| {
        m.content.iter().rev().find_map(|b| match b {
            // As the model sees it on the wire (empty results read `(no output)`).
            ContentBlock::ToolResult(r) => Some(
                Some(r.text())
                    .filter(|t| !t.is_empty())
                    .unwrap_or_else(|| NO_OUTPUT.to_owned()),
            ),
            _ => None,
        })
    })
}

impl ScriptedProvider {
    /// A provider named `scripted` replaying `script`.
    pub fn new(script: Script) -> Self {
        ScriptedProvider {
            name: "scripted".to_owned(),
            cursor: Mutex::new(ScriptCursor::new(script)),
            cache: Mutex::new(PromptCacheSim::default()),
            requests: Mutex::new(Vec::new()),
            record: true,
            catalogue: ModelCatalogue::default(),
            idle_timeout: crate::openai::DEFAULT_IDLE_TIMEOUT,
        }
    }

    /// Reads a script file (JSON or YAML).
    pub fn from_path(path: &Path) -> Result<Self, ScriptError> {
        Ok(ScriptedProvider::new(Script::from_path(path)?))
    }

    /// Parses a script.
    pub fn from_str(text: &str, format: ScriptFormat) -> Result<Self, ScriptError> {
        Ok(ScriptedProvider::new(Script::from_str(text, format)?))
    }

    /// Renames the provider (as written in message sources).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// A stall longer than this fails with `TIMEOUT` (default 300 s).
    pub fn with_idle_timeout(mut self, idle: Duration) -> Self {
        self.idle_timeout = idle;
        self
    }

    /// Keep no requests ([`ScriptedProvider::requests`] stays empty): what `keel run --script`
    /// and the demo use, whose memory would otherwise grow with the square of the steps.
    pub fn without_recording(mut self) -> Self {
        self.record = false;
        self
    }

    /// Every request received so far, in order (none after [`Self::without_recording`]).
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests.locked().clone()
    }

    /// Script responses not used yet.
    pub fn remaining(&self) -> usize {
        self.cursor.locked().remaining()
    }

    fn delivery(&self, request: &ChatRequest) -> Result<Delivery, ModelFailure> {
        let last_user = last_user_text(&request.messages);
        let last_tool = last_tool_result_text(&request.messages);
        let last_message = request.messages.last().map(Message::text);
        let taken = self.cursor.locked().take(crate::script::MatchInput {
            last_user: last_user.as_deref(),
            last_tool: last_tool.as_deref(),
            last_message: last_message.as_deref(),
        });
        let (n, response) = taken.map_err(|e| {
            ModelFailure::new(FailureCode::InvalidRequest, format!("model script: {e}"))
        })?;
        let body = request_body_bytes(request, &self.catalogue.lookup(&request.model));
        let prompt = self.cache.locked().observe(&body);
        Ok(plan(&response, n, &request.model, prompt))
    }
}

impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn stream(&self, request: ChatRequest, cancel: CancellationToken) -> ChunkStream {
        let delivery = self.delivery(&request);
        if self.record {
            self.requests.locked().push(request);
        }
        let mut replay = Replay {
            payloads: Vec::new().into_iter(),
            index: 0,
            stall: None,
            translator: StreamTranslator::new(),
            pending: Vec::new().into_iter(),
            failure: None,
            finished: false,
            cancel,
            idle: self.idle_timeout,
        };
        match delivery {
            Err(failure) => replay.failure = Some(failure),
            Ok(Delivery::ConnectionReset) => {
                replay.failure = Some(ModelFailure::new(
                    FailureCode::Transport,
                    "the scripted connection was reset before a response",
                ))
            }
            Ok(Delivery::HttpError {
                status,
                body,
                retry_after,
            }) => {
                let ms = retry_after.map(|s| (s * 1000.0).round() as u64);
                replay.failure = Some(http_failure(status, &body, ms, None));
            }
            Ok(Delivery::Stream(stream_plan)) => {
                replay.payloads = stream_plan.payloads.into_iter();
                replay.stall = stream_plan.stall;
            }
        }
        futures::stream::unfold(replay, |mut r| async move {
            let item = r.next().await?;
            Some((item, r))
        })
        .boxed()
    }
}

struct Replay {
    payloads: std::vec::IntoIter<String>,
    index: usize,
    stall: Option<Stall>,
    translator: StreamTranslator,
    pending: std::vec::IntoIter<StreamChunk>,
    failure: Option<ModelFailure>,
    finished: bool,
    cancel: CancellationToken,
    idle: Duration,
}

impl Replay {
    async fn next(&mut self) -> Option<Result<StreamChunk, ModelFailure>> {
        loop {
            if let Some(chunk) = self.pending.next() {
                return Some(Ok(chunk));
            }
            if self.finished {
                return None;
            }
            if let Some(failure) = self.failure.take() {
                self.finished = true;
                return Some(Err(failure));
            }
            if self.cancel.is_cancelled() {
                self.failure = Some(ModelFailure::new(
                    FailureCode::Aborted,
                    "the model call was cancelled",
                ));
                continue;
            }
            if let Some(stall) = self.stall.filter(|s| s.after == self.index) {
                self.stall = None;
                if let Err(failure) = self.pause(stall.duration).await {
                    self.failure = Some(failure);
                    continue;
                }
            }
            let Some(payload) = self.payloads.next() else {
                if self.translator.is_done() {
                    self.finished = true;
                } else {
                    self.failure = Some(self.translator.end_of_stream());
                }
                continue;
            };
            self.index += 1;
            let mut out = Vec::new();
            match self.translator.push(&payload, &mut out) {
                Ok(Progress::Continue) => {}
                Ok(Progress::Done) => self.finished = true,
                Err(failure) => self.failure = Some(failure),
            }
            self.pending = out.into_iter();
            // Let other tasks (and cancellation) in between payloads, as a network would.
            tokio::task::yield_now().await;
        }
    }

    async fn pause(&self, duration: Option<Duration>) -> Result<(), ModelFailure> {
        let timeout = || {
            ModelFailure::new(
                FailureCode::Timeout,
                format!("the stream was idle for {} s", self.idle.as_secs_f64()),
            )
        };
        let wait = duration.unwrap_or(Duration::MAX).min(self.idle);
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => Err(ModelFailure::new(FailureCode::Aborted, "the model call was cancelled")),
            _ = tokio::time::sleep(wait) => match duration {
                Some(d) if d < self.idle => Ok(()),
                _ => Err(timeout()),
            },
        }
    }
}
