//! OpenAI's Responses API wire (`POST {base}/responses`). SKELETON: being written (helper-26).

use crate::catalogue::ModelInfo;
use crate::request::ChatRequest;
use crate::translate::Progress;
use keel_protocol::{FailureCode, ModelFailure, StreamChunk};

/// The exact bytes of the Responses request for `request` to a model described by `info`.
pub fn body_bytes(_request: &ChatRequest, _info: &ModelInfo) -> Vec<u8> {
    Vec::new()
}

/// Translates one Responses stream.
#[derive(Debug, Default)]
pub struct ResponsesTranslator {
    done: bool,
}

impl ResponsesTranslator {
    /// A translator for one response.
    pub fn new() -> Self {
        Self::default()
    }

    /// True once the stream's last event was handled.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Translates one event's `data`.
    pub fn push(
        &mut self,
        _data: &str,
        _out: &mut Vec<StreamChunk>,
    ) -> Result<Progress, ModelFailure> {
        Err(ModelFailure::new(FailureCode::MalformedResponse, "not yet"))
    }

    /// The failure for a body that ended before `response.completed`.
    pub fn end_of_stream(&self) -> ModelFailure {
        ModelFailure::new(
            FailureCode::StreamClosed,
            "the Responses stream ended before response.completed",
        )
    }
}
