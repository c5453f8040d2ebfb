//! The block assembler: turns any provider's [`StreamChunk`]s into content blocks.
//!
//! Every provider goes through this one piece, so the stream invariants are checked in one
//! place: a block's deltas come between its `block-start` and `block-end` and match its kind;
//! `usage` comes before `finish`; nothing comes after `finish`. Tool arguments stay raw strings.
//!
//! Blocks are kept in `block-start` order. When a stream ends with `max-tokens`, tool calls that
//! were never closed by `block-end` are dropped (their arguments may be cut off). When a stream is
//! interrupted, [`BlockAssembler::partial`] returns what was streamed so far: text and reasoning
//! as received, incomplete tool calls dropped.

use keel_protocol::{
    BlockType, ContentBlock, FinishReason, StreamChunk, TokenUsage, ToolCallBlock,
};
use std::collections::HashMap;

/// A stream broke one of the chunk invariants. Returned by [`BlockAssembler::push`]; the caller
/// should treat the model call as failed with `MALFORMED_RESPONSE` (it is a provider bug).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssemblyError {
    /// A `block-start` reused an index that is already in use.
    #[error("block {index} started twice")]
    DuplicateStart {
        /// The block index.
        index: u32,
    },
    /// A delta or `block-end` named an index with no open block.
    #[error("chunk for block {index}, which is not open")]
    NotOpen {
        /// The block index.
        index: u32,
    },
    /// A delta or `block-end` does not match the block's kind.
    #[error("chunk of kind {got} for block {index} of kind {expected:?}")]
    KindMismatch {
        /// The block index.
        index: u32,
        /// The block's kind.
        expected: BlockType,
        /// The offending chunk kind.
        got: &'static str,
    },
    /// A chunk arrived after `finish`.
    #[error("{got} after finish")]
    AfterFinish {
        /// The offending chunk kind.
        got: &'static str,
    },
    /// `usage` arrived twice.
    #[error("usage reported twice")]
    DuplicateUsage,
}

/// What a finished stream assembled into.
#[derive(Debug, Clone, PartialEq)]
pub struct Assembled {
    /// Content blocks in `block-start` order.
    pub content: Vec<ContentBlock>,
    /// Usage, when the provider reported it.
    pub usage: Option<TokenUsage>,
    /// Why the stream ended; `None` if it never finished.
    pub finish: Option<FinishReason>,
}

#[derive(Debug, Clone)]
struct Slot {
    kind: BlockType,
    /// Accumulated text, reasoning or raw tool arguments.
    buf: String,
    id: Option<String>,
    name: Option<String>,
    /// Set by `block-end`: the block's final value.
    done: Option<ContentBlock>,
}

/// Assembles one model response from its chunks. See the module docs for the rules.
#[derive(Debug, Default)]
pub struct BlockAssembler {
    slots: Vec<Slot>,
    by_index: HashMap<u32, usize>,
    usage: Option<TokenUsage>,
    finish: Option<FinishReason>,
}

fn chunk_name(chunk: &StreamChunk) -> &'static str {
    match chunk {
        StreamChunk::BlockStart { .. } => "block-start",
        StreamChunk::TextDelta { .. } => "text-delta",
        StreamChunk::ReasoningDelta { .. } => "reasoning-delta",
        StreamChunk::ToolCallDelta { .. } => "tool-call-delta",
        StreamChunk::BlockEnd { .. } => "block-end",
        StreamChunk::Usage { .. } => "usage",
        StreamChunk::Finish { .. } => "finish",
    }
}

fn block_kind(block: &ContentBlock) -> Option<BlockType> {
    match block {
        ContentBlock::Text { .. } => Some(BlockType::Text),
        ContentBlock::Reasoning { .. } => Some(BlockType::Reasoning),
        ContentBlock::ToolCall(_) => Some(BlockType::ToolCall),
        ContentBlock::Image(_) | ContentBlock::ToolResult(_) => None,
    }
}

impl BlockAssembler {
    /// An empty assembler.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one chunk, checking the stream invariants.
    pub fn push(&mut self, chunk: &StreamChunk) -> Result<(), AssemblyError> {
        if self.finish.is_some() {
            return Err(AssemblyError::AfterFinish {
                got: chunk_name(chunk),
            });
        }
        match chunk {
            StreamChunk::BlockStart {
                index,
                block_type,
                id,
                name,
            } => {
                if self.by_index.contains_key(index) {
                    return Err(AssemblyError::DuplicateStart { index: *index });
                }
                self.by_index.insert(*index, self.slots.len());
                self.slots.push(Slot {
                    kind: *block_type,
                    buf: String::new(),
                    id: id.clone(),
                    name: name.clone(),
                    done: None,
                });
            }
            StreamChunk::TextDelta { index, text } => {
                self.open(*index, BlockType::Text, chunk)?
                    .buf
                    .push_str(text);
            }
            StreamChunk::ReasoningDelta { index, text } => {
                self.open(*index, BlockType::Reasoning, chunk)?
                    .buf
                    .push_str(text);
            }
            StreamChunk::ToolCallDelta {
                index,
                id,
                name,
                arguments_delta,
            } => {
                let slot = self.open(*index, BlockType::ToolCall, chunk)?;
                if slot.id.is_none() {
                    slot.id.clone_from(id);
                }
                if slot.name.is_none() {
                    slot.name.clone_from(name);
                }
                slot.buf.push_str(arguments_delta);
            }
            StreamChunk::BlockEnd { index, block } => {
                let got = block_kind(block);
                let slot = self.slot_mut(*index)?;
                if got != Some(slot.kind) {
                    return Err(AssemblyError::KindMismatch {
                        index: *index,
                        expected: slot.kind,
                        got: "block-end",
                    });
                }
                slot.done = Some(block.clone());
                slot.buf = String::new();
            }
            StreamChunk::Usage { usage } => {
                if self.usage.is_some() {
                    return Err(AssemblyError::DuplicateUsage);
                }
                self.usage = Some(*usage);
            }
            StreamChunk::Finish { reason } => self.finish = Some(reason.clone()),
        }
        Ok(())
    }

    fn slot_mut(&mut self, index: u32) -> Result<&mut Slot, AssemblyError> {
        match self
            .by_index
            .get(&index)
            .and_then(|i| self.slots.get_mut(*i))
        {
            Some(slot) if slot.done.is_none() => Ok(slot),
            _ => Err(AssemblyError::NotOpen { index }),
        }
    }

    fn open(
        &mut self,
        index: u32,
        kind: BlockType,
        chunk: &StreamChunk,
    ) -> Result<&mut Slot, AssemblyError> {
        let slot = self.slot_mut(index)?;
        if slot.kind != kind {
            return Err(AssemblyError::KindMismatch {
                index,
                expected: slot.kind,
                got: chunk_name(chunk),
            });
        }
        Ok(slot)
    }

    /// True once a `finish` chunk was accepted.
    pub fn is_finished(&self) -> bool {
        self.finish.is_some()
    }

    /// The blocks streamed so far, for an interrupted stream: closed blocks as closed, open text
    /// and reasoning as received, tool calls that were never closed dropped. Empty text and
    /// reasoning blocks are left out.
    pub fn partial(&self) -> Vec<ContentBlock> {
        self.slots
            .iter()
            .filter_map(|slot| slot.clone().into_block(OpenToolCall::Drop))
            .collect()
    }

    /// The assembled response. Tool calls never closed by `block-end` are kept only when the
    /// stream finished with something other than `max-tokens` (a provider that does not close
    /// its blocks); after `max-tokens`, or with no `finish` at all, they are dropped.
    pub fn finish(self) -> Assembled {
        let open_calls = if matches!(
            self.finish,
            Some(FinishReason::Stop | FinishReason::ToolCalls | FinishReason::Error { .. })
        ) {
            OpenToolCall::Keep
        } else {
            OpenToolCall::Drop
        };
        let content = self
            .slots
            .into_iter()
            .filter_map(|slot| slot.into_block(open_calls))
            .collect();
        Assembled {
            content,
            usage: self.usage,
            finish: self.finish,
        }
    }
}

/// What becomes of a tool call never closed by `block-end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpenToolCall {
    /// Keep it as received (the provider does not close its blocks).
    Keep,
    /// Drop it (the stream was cut or hit its output limit).
    Drop,
}

impl Slot {
    fn into_block(self, open_call: OpenToolCall) -> Option<ContentBlock> {
        if let Some(done) = self.done {
            return Some(done);
        }
        match self.kind {
            BlockType::Text if !self.buf.is_empty() => Some(ContentBlock::Text { text: self.buf }),
            BlockType::Reasoning if !self.buf.is_empty() => Some(ContentBlock::reasoning(self.buf)),
            BlockType::ToolCall if open_call == OpenToolCall::Keep => {
                Some(ContentBlock::ToolCall(ToolCallBlock {
                    id: self.id.unwrap_or_default(),
                    name: self.name.unwrap_or_default(),
                    arguments: self.buf,
                }))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
#[path = "assembler_tests.rs"]
mod tests;
