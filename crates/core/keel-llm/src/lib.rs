//! keel's model layer.
//!
//! One streaming primitive, [`Provider::stream`], yields [`keel_protocol::StreamChunk`]s for
//! every backend; one [`BlockAssembler`] turns them into content blocks. Backends:
//! [`OpenAiProvider`] (DeepSeek and any OpenAI-compatible chat-completions endpoint, over SSE)
//! and [`ScriptedProvider`] (deterministic replay of a [`Script`], no network). Around them:
//! the exact request body ([`request_body`]), failure classification, the [`RetryPolicy`] the
//! agent loop consults, and the [`ModelCatalogue`].
//!
//! Data flow of a DeepSeek call: [`ChatRequest`] → [`request_body_bytes`] → HTTP → bytes →
//! [`sse::SseParser`] → [`translate::StreamTranslator`] → chunks → [`BlockAssembler`].
#![deny(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod assembler;
pub mod catalogue;
pub mod classify;
pub mod credentials;
pub mod messages;
pub mod openai;
pub mod provider;
pub mod request;
pub mod responses;
pub mod retry;
pub mod script;
pub mod script_render;
pub mod script_wire;
pub mod scripted;
pub mod sse;
pub mod translate;
pub mod wire;

pub use assembler::{Assembled, AssemblyError, BlockAssembler};
pub use catalogue::{
    DEFAULT_BASE_URL, DEFAULT_MODEL, ModelCatalogue, ModelInfo, ModelOverride, Price, builtin_price,
};
pub use openai::{
    API_KEY_ENV, ApiKey, BASE_URL_ENV, ConfigError, DEFAULT_IDLE_TIMEOUT, OpenAiProvider,
    ProviderConfig, resolve_base_url,
};
pub use provider::{ChunkStream, Interrupted, Provider, assemble};
pub use request::{ChatRequest, SentReasoning, request_body, request_body_bytes, sent_reasoning};
pub use retry::{RetryDecision, RetryPolicy, is_retryable};
pub use script::{Script, ScriptError, ScriptFormat, ScriptedResponse};
pub use scripted::ScriptedProvider;
pub use wire::{UnknownApi, WireApi, WireOptions};
