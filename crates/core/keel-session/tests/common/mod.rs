//! Shared test helpers: a small builder for well-formed sessions.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use keel_protocol::*;
use keel_session::Session;
use std::path::PathBuf;

pub fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../testdata/dsh-sessions")
}

pub fn header(id: &str) -> SessionHeader {
    SessionHeader::new(
        SessionId(id.into()),
        1_700_000_000_000,
        Some("/home/user/project".into()),
    )
}

/// Builds sessions event by event with `push`, panicking on refusal (tests only).
pub struct B {
    pub s: Session,
}

impl B {
    pub fn new() -> B {
        B {
            s: Session::new(header("session-test")),
        }
    }
    pub fn ev(&mut self, body: EventBody) -> Seq {
        self.s.push(body).unwrap()
    }
    pub fn turn_start(&mut self, turn: u32) -> Seq {
        self.ev(EventBody::TurnStart(TurnStart {
            turn: keel_protocol::TurnNo(turn),
        }))
    }
    pub fn turn_end(&mut self, turn: u32) -> Seq {
        self.ev(EventBody::TurnEnd(TurnEnd {
            turn: keel_protocol::TurnNo(turn),
            reason: TurnEndReason::Completed,
        }))
    }
    pub fn step_start(&mut self, turn: u32, step: u32) -> Seq {
        self.ev(EventBody::StepStart(StepRef {
            turn: keel_protocol::TurnNo(turn),
            step: keel_protocol::StepNo(step),
        }))
    }
    pub fn step_end(&mut self, turn: u32, step: u32) -> Seq {
        self.ev(EventBody::StepEnd(StepRef {
            turn: keel_protocol::TurnNo(turn),
            step: keel_protocol::StepNo(step),
        }))
    }
    pub fn user(&mut self, text: &str) -> Seq {
        let m = Message::user_text(
            text,
            MessageSource::user(),
            format!("u{}", self.s.next_seq()),
        );
        self.s
            .push_surface(
                EventBody::UserMessage(Box::new(m)),
                SurfaceOp::Append,
                vec![],
            )
            .unwrap()
    }
    pub fn delta(&mut self, turn: u32, step: u32, index: u32, text: &str) -> Seq {
        let chunk = StreamChunk::TextDelta {
            index,
            text: text.into(),
        };
        self.ev(EventBody::AssistantChunk(Box::new(AssistantChunk {
            turn: keel_protocol::TurnNo(turn),
            step: keel_protocol::StepNo(step),
            chunk,
        })))
    }
    pub fn assistant(&mut self, turn: u32, step: u32, text: &str, calls: &[(&str, &str)]) -> Seq {
        let mut content = vec![];
        if !text.is_empty() {
            content.push(ContentBlock::text(text));
        }
        for (id, name) in calls {
            content.push(ContentBlock::ToolCall(ToolCallBlock {
                id: (*id).into(),
                name: (*name).into(),
                arguments: "{}".into(),
            }));
        }
        let message = Message {
            role: Role::Assistant,
            content,
            source: MessageSource::model("p", "m"),
            id: format!("a{}", self.s.next_seq()),
        };
        let body = EventBody::AssistantMessage(Box::new(AssistantMessageEvent {
            turn: keel_protocol::TurnNo(turn),
            step: keel_protocol::StepNo(step),
            message,
            usage: None,
            finish: None,
            interrupted: false,
        }));
        self.s
            .push_surface(body, SurfaceOp::Append, vec![])
            .unwrap()
    }
    pub fn tool_call(&mut self, turn: u32, step: u32, id: &str) -> Seq {
        self.ev(EventBody::ToolCall(Box::new(ToolCallEvent {
            turn: keel_protocol::TurnNo(turn),
            step: keel_protocol::StepNo(step),
            call_id: id.into(),
            name: "bash".into(),
            arguments: "{}".into(),
        })))
    }
    pub fn result_body(turn: u32, step: u32, id: &str, text: &str, msg_id: &str) -> EventBody {
        let message = Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(ToolResultBlock {
                tool_call_id: id.into(),
                content: vec![ContentBlock::text(text)],
                is_error: false,
            })],
            source: MessageSource::tool(id),
            id: msg_id.into(),
        };
        EventBody::ToolResult(Box::new(ToolResultEvent {
            turn: keel_protocol::TurnNo(turn),
            step: keel_protocol::StepNo(step),
            message,
            meta: None,
        }))
    }
    pub fn tool_result(&mut self, turn: u32, step: u32, id: &str, text: &str) -> Seq {
        let body = Self::result_body(turn, step, id, text, &format!("r-{id}"));
        self.s
            .push_surface(body, SurfaceOp::Append, vec![])
            .unwrap()
    }
    /// A complete turn with one tool step and one answer step.
    pub fn full_turn(&mut self, turn: u32) {
        self.turn_start(turn);
        self.step_start(turn, 1);
        self.user(&format!("prompt {turn}"));
        self.delta(turn, 1, 0, "thin");
        self.delta(turn, 1, 0, "king");
        let id = format!("c{turn}");
        self.assistant(turn, 1, "thinking", &[(&id, "bash")]);
        self.tool_call(turn, 1, &id);
        self.tool_result(turn, 1, &id, "ok");
        self.step_end(turn, 1);
        self.step_start(turn, 2);
        self.delta(turn, 2, 0, "done");
        self.assistant(turn, 2, "done", &[]);
        self.step_end(turn, 2);
        self.turn_end(turn);
    }
}
