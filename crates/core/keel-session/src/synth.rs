//! Realistic synthetic session logs, for benchmarks and load tests.
//!
//! The generator plays turns of a coding agent: each turn opens with the human prompt, then runs
//! several steps of streamed reasoning, text and a tool call (deltas of a few characters, as a
//! model streams tokens), the assembled assistant message, the tool call and its result; the last
//! step answers in text. About 96% of the events are `assistant/chunk`, like real sessions.
//! Deterministic for a given seed.

use crate::error::AppendError;
use crate::session::Session;
use crate::store::{Store, StoreError, WriterOptions};
use keel_protocol::{
    AssistantChunk, AssistantMessageEvent, BlockType, ContentBlock, EventBody, FinishReason,
    InboxSpliced, InboxTarget, Message, MessageSource, RequestContext, Role, Seq, SessionEvent,
    SessionHeader, SessionId, StepNo, StepRef, StreamChunk, SurfaceOp, TokenUsage, ToolCallBlock,
    ToolCallEvent, ToolResultBlock, ToolResultEvent, TurnEnd, TurnEndReason, TurnNo, TurnStart,
};
use std::path::Path;

/// What to generate.
#[derive(Debug, Clone)]
pub struct SynthOptions {
    /// Stop after the first turn that reaches this many events.
    pub events: u64,
    /// PRNG seed.
    pub seed: u64,
    /// Steps per turn (the last one answers without a tool call).
    pub steps_per_turn: u32,
    /// Reasoning deltas per step (text and tool-argument deltas are proportional).
    pub reasoning_deltas: u32,
}

impl Default for SynthOptions {
    fn default() -> Self {
        SynthOptions {
            events: 10_000,
            seed: 7,
            steps_per_turn: 6,
            reasoning_deltas: 90,
        }
    }
}

const WORDS: &[&str] = &[
    "the", "file", "function", "returns", "error", "value", "test", "I", "will", "read", "check",
    "fix", "config", "because", "parser", "line", "then", "it", "should", "handle", "empty",
    "input", "module", "path", "and",
];

/// Where a generated step stands in its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StepPlace {
    /// More steps follow: the step calls a tool.
    Inner,
    /// The turn's last step: the model answers without a tool call.
    Last,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn token(&mut self) -> String {
        let w = WORDS[self.below(WORDS.len() as u64) as usize];
        if self.below(8) == 0 {
            format!("{w}.")
        } else {
            format!(" {w}")
        }
    }
}

/// Generates events into a sink.
struct Gen<'a, E> {
    rng: Rng,
    seq: u64,
    time: i64,
    reasoning: u32,
    sink: &'a mut dyn FnMut(SessionEvent) -> Result<(), E>,
}

impl<E> Gen<'_, E> {
    fn emit(&mut self, body: EventBody, surface: Option<(SurfaceOp, Vec<Seq>)>) -> Result<Seq, E> {
        self.time += self.rng.below(3) as i64;
        let mut ev = SessionEvent::new(Seq(self.seq), self.time, body);
        if let Some((op, src)) = surface {
            ev.surface_op = Some(op);
            ev.source_event_seqs = src;
        }
        self.seq += 1;
        (self.sink)(ev)?;
        Ok(Seq(self.seq - 1))
    }

    fn chunk(&mut self, s: StepRef, chunk: StreamChunk) -> Result<Seq, E> {
        self.emit(
            EventBody::AssistantChunk(Box::new(AssistantChunk {
                turn: s.turn,
                step: s.step,
                chunk,
            })),
            None,
        )
    }

    /// One streamed block: start, `n` deltas, end. Returns the assembled block.
    fn block(
        &mut self,
        s: StepRef,
        index: u32,
        kind: BlockType,
        n: u32,
        call: Option<(&str, &str)>,
    ) -> Result<ContentBlock, E> {
        self.chunk(
            s,
            StreamChunk::BlockStart {
                index,
                block_type: kind,
                id: None,
                name: None,
            },
        )?;
        let mut text = String::new();
        for i in 0..n {
            let t = match kind {
                BlockType::ToolCall if i == 0 => "{\"command\": \"".to_owned(),
                BlockType::ToolCall if i + 1 == n => "\"}".to_owned(),
                _ => self.rng.token(),
            };
            text.push_str(&t);
            let chunk = match kind {
                BlockType::Text => StreamChunk::TextDelta { index, text: t },
                BlockType::Reasoning => StreamChunk::ReasoningDelta { index, text: t },
                BlockType::ToolCall => StreamChunk::ToolCallDelta {
                    index,
                    id: (i == 0).then(|| call.map(|c| c.0.to_owned())).flatten(),
                    name: (i == 0).then(|| call.map(|c| c.1.to_owned())).flatten(),
                    arguments_delta: t,
                },
            };
            self.chunk(s, chunk)?;
        }
        let block = match (kind, call) {
            (BlockType::ToolCall, Some((id, name))) => ContentBlock::ToolCall(ToolCallBlock {
                id: id.to_owned(),
                name: name.to_owned(),
                arguments: text,
            }),
            (BlockType::Reasoning, _) => ContentBlock::reasoning(text),
            _ => ContentBlock::Text { text },
        };
        Ok(block)
    }

    fn step(&mut self, s: StepRef, place: StepPlace, prompt: Option<&str>) -> Result<(), E> {
        self.emit(EventBody::StepStart(s), None)?;
        if let Some(p) = prompt {
            let m = Message::user_text(p, MessageSource::user(), format!("u-{}", self.seq));
            self.emit(
                EventBody::UserMessage(Box::new(m)),
                Some((SurfaceOp::Append, Vec::new())),
            )?;
            let ctx = RequestContext {
                provider: "deepseek".into(),
                model: "deepseek-chat".into(),
                context_window: 128_000,
                max_output: None,
            };
            self.emit(EventBody::RequestContext(Box::new(ctx)), None)?;
        }
        let n = |base: u32, rng: &mut Rng| base / 2 + rng.below(u64::from(base)) as u32;
        let reasoning_n = n(self.reasoning, &mut self.rng);
        let mut content = vec![self.block(s, 0, BlockType::Reasoning, reasoning_n, None)?];
        let text_n = n(20, &mut self.rng);
        content.push(self.block(s, 1, BlockType::Text, text_n, None)?);
        let call_id = format!("call_{}_{}", s.turn, s.step);
        if place == StepPlace::Inner {
            let args_n = n(30, &mut self.rng);
            content.push(self.block(
                s,
                2,
                BlockType::ToolCall,
                args_n.max(2),
                Some((&call_id, "bash")),
            )?);
        }
        let usage = TokenUsage {
            input_tokens: 900,
            output_tokens: 150,
            cache_read_tokens: 8000,
            ..TokenUsage::default()
        };
        self.chunk(s, StreamChunk::Usage { usage })?;
        let finish = if place == StepPlace::Last {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        };
        self.chunk(
            s,
            StreamChunk::Finish {
                reason: finish.clone(),
            },
        )?;
        let message = Message {
            role: Role::Assistant,
            content,
            source: MessageSource::model("deepseek", "deepseek-chat"),
            id: format!("a-{}", self.seq),
        };
        let args = message.tool_calls().next().map(|c| c.arguments.clone());
        let am = AssistantMessageEvent {
            turn: s.turn,
            step: s.step,
            message,
            usage: Some(usage),
            finish: Some(finish),
            interrupted: false,
        };
        self.emit(
            EventBody::AssistantMessage(Box::new(am)),
            Some((SurfaceOp::Append, Vec::new())),
        )?;
        if let Some(arguments) = args {
            let call = ToolCallEvent {
                turn: s.turn,
                step: s.step,
                call_id: call_id.clone(),
                name: "bash".into(),
                arguments,
            };
            let call_seq = self.emit(EventBody::ToolCall(Box::new(call)), None)?;
            let mut out = String::new();
            for _ in 0..(20 + self.rng.below(40)) {
                out.push_str(&self.rng.token());
                if self.rng.below(6) == 0 {
                    out.push('\n');
                }
            }
            let result = Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult(ToolResultBlock {
                    tool_call_id: call_id.clone(),
                    content: vec![ContentBlock::text(out)],
                    is_error: false,
                })],
                source: MessageSource::tool(call_id),
                id: format!("r-{}", self.seq),
            };
            let ev = ToolResultEvent {
                turn: s.turn,
                step: s.step,
                message: result,
                meta: None,
            };
            self.emit(
                EventBody::ToolResult(Box::new(ev)),
                Some((SurfaceOp::Append, vec![call_seq])),
            )?;
        }
        self.emit(EventBody::StepEnd(s), None)?;
        Ok(())
    }
}

/// A header for a synthetic session.
pub fn header() -> SessionHeader {
    SessionHeader::new(
        SessionId("session-synthetic".into()),
        1_800_000_000_000,
        Some("/home/user/project".into()),
    )
}

/// Generate events into `sink` until `options.events` is reached at a turn boundary.
pub fn generate_into<E>(
    options: &SynthOptions,
    sink: &mut dyn FnMut(SessionEvent) -> Result<(), E>,
) -> Result<u64, E> {
    let mut g = Gen {
        rng: Rng(options.seed | 1),
        seq: 0,
        time: 1_800_000_000_000,
        reasoning: options.reasoning_deltas,
        sink,
    };
    let mut turn = 0;
    while g.seq < options.events {
        turn += 1;
        let prompt =
            format!("Task {turn}: fix the failing test in module {turn} and explain the cause.");
        let m = Message::user_text(prompt.clone(), MessageSource::user(), format!("p-{turn}"));
        g.emit(
            EventBody::InboxSpliced(Box::new(InboxSpliced {
                target: InboxTarget::NextTurn,
                start: 0,
                removed_count: 0,
                inserted: vec![m],
            })),
            None,
        )?;
        g.emit(EventBody::TurnStart(TurnStart { turn: TurnNo(turn) }), None)?;
        g.emit(
            EventBody::InboxSpliced(Box::new(InboxSpliced {
                target: InboxTarget::NextTurn,
                start: 0,
                removed_count: 1,
                inserted: vec![],
            })),
            None,
        )?;
        for step in 1..=options.steps_per_turn.max(1) {
            let place = if step == options.steps_per_turn.max(1) {
                StepPlace::Last
            } else {
                StepPlace::Inner
            };
            g.step(
                StepRef {
                    turn: TurnNo(turn),
                    step: StepNo(step),
                },
                place,
                (step == 1).then_some(prompt.as_str()),
            )?;
        }
        g.emit(
            EventBody::TurnEnd(TurnEnd {
                turn: TurnNo(turn),
                reason: TurnEndReason::Completed,
            }),
            None,
        )?;
    }
    Ok(g.seq)
}

/// Generate a synthetic session in memory.
pub fn generate(options: &SynthOptions) -> Result<Session, AppendError> {
    let mut s = Session::new(header());
    generate_into(options, &mut |ev| s.append(ev))?;
    Ok(s)
}

/// Write a synthetic session file at `path` (`.zst` for zstd) through a [`crate::SessionWriter`],
/// flushing every `flush_every` events; returns the number of events written.
pub fn write_file(
    path: &Path,
    options: &SynthOptions,
    flush_every: u64,
) -> Result<u64, StoreError> {
    let format = crate::store::Format::of_path(path);
    let session = Session::new(header());
    let writer = Store::create_at(
        path,
        &session,
        WriterOptions {
            format,
            ..WriterOptions::default()
        },
    )?;
    let mut n = 0u64;
    let r: Result<u64, StoreError> = generate_into(options, &mut |ev| {
        writer.enqueue_owned(ev);
        n += 1;
        if n.is_multiple_of(flush_every.max(1)) {
            writer.flush()
        } else {
            Ok(())
        }
    });
    let total = r?;
    writer.close()?;
    Ok(total)
}
