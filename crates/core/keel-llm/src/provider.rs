//! The one streaming primitive every model backend implements, and the standard way to consume it.
//!
//! A [`Provider`] turns a [`ChatRequest`] into a [`ChunkStream`]: `block-start`, deltas,
//! `block-end`, `usage`, `finish`, or a [`ModelFailure`] that ends the stream. Cancelling the
//! token ends the stream with `ABORTED`. [`assemble`] drives a stream through the
//! [`BlockAssembler`] and, on failure, hands back the blocks streamed so far.

use crate::assembler::{Assembled, BlockAssembler};
use crate::request::ChatRequest;
use futures::StreamExt;
use futures::stream::BoxStream;
use keel_protocol::{ContentBlock, FailureCode, ModelFailure, StreamChunk};
use tokio_util::sync::CancellationToken;

/// A model response as a stream of chunks; an `Err` item is the last item.
pub type ChunkStream = BoxStream<'static, Result<StreamChunk, ModelFailure>>;

/// A model backend.
pub trait Provider: Send + Sync {
    /// The provider's name as written in message sources and logs (e.g. `deepseek`).
    fn name(&self) -> &str;

    /// Starts one model call. The stream yields chunks in the order described in
    /// [`keel_protocol::StreamChunk`]; it ends after `finish`, or with one `Err` item. Cancelling
    /// `cancel` ends it promptly with `ABORTED`.
    fn stream(&self, request: ChatRequest, cancel: CancellationToken) -> ChunkStream;
}

/// A model call that failed part-way, with what had been streamed before the failure.
#[derive(Debug, Clone, PartialEq)]
pub struct Interrupted {
    /// Why the call failed.
    pub failure: ModelFailure,
    /// Blocks streamed before the failure (see [`BlockAssembler::partial`]).
    pub partial: Vec<ContentBlock>,
}

/// Drives `stream` to its end through a [`BlockAssembler`], calling `on_chunk` for every chunk
/// (e.g. to log `assistant/chunk` events). A stream that breaks the chunk invariants fails with
/// `MALFORMED_RESPONSE`; a stream that ends without `finish` fails with `STREAM_CLOSED`.
pub async fn assemble(
    mut stream: ChunkStream,
    mut on_chunk: impl FnMut(&StreamChunk),
) -> Result<Assembled, Interrupted> {
    let mut assembler = BlockAssembler::new();
    while let Some(item) = stream.next().await {
        let chunk = match item {
            Ok(chunk) => chunk,
            Err(failure) => {
                return Err(Interrupted {
                    failure,
                    partial: assembler.partial(),
                });
            }
        };
        if let Err(e) = assembler.push(&chunk) {
            let failure = ModelFailure::new(
                FailureCode::MalformedResponse,
                format!("the provider broke the stream rules: {e}"),
            );
            return Err(Interrupted {
                failure,
                partial: assembler.partial(),
            });
        }
        on_chunk(&chunk);
        if assembler.is_finished() {
            break;
        }
    }
    if !assembler.is_finished() {
        let failure = ModelFailure::new(
            FailureCode::StreamClosed,
            "the provider stream ended without finish",
        );
        return Err(Interrupted {
            failure,
            partial: assembler.partial(),
        });
    }
    Ok(assembler.finish())
}
