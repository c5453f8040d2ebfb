//! The HTML page of a hand-built session: what a person must find on it (every turn, step,
//! message, tool call with arguments and result, marker, todo list, plan state and usage), that
//! hostile text in any of them stays text, and that the page asks for nothing outside itself.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_protocol::*;
use keel_session::Session;
use keel_viewer::{HtmlOptions, render_html};

const XSS: &str = "</script><script>alert(1)</script><img src=x onerror=alert(2)>\"'&";

struct B {
    s: Session,
}

impl B {
    fn ev(&mut self, body: EventBody) -> Seq {
        self.s.push(body).unwrap()
    }
    fn surface(&mut self, body: EventBody, sources: Vec<Seq>) -> Seq {
        self.s
            .push_surface(body, SurfaceOp::Append, sources)
            .unwrap()
    }
    fn user(&mut self, text: &str) -> Seq {
        let m = Message::user_text(text, MessageSource::user(), format!("u{}", self.s.len()));
        self.surface(EventBody::UserMessage(Box::new(m)), vec![])
    }
    fn assistant(
        &mut self,
        (turn, step): (u32, u32),
        reasoning: &str,
        text: &str,
        calls: &[(&str, &str, &str)],
        usage: TokenUsage,
    ) -> Seq {
        let mut content = vec![];
        if !reasoning.is_empty() {
            content.push(ContentBlock::reasoning(reasoning));
        }
        if !text.is_empty() {
            content.push(ContentBlock::text(text));
        }
        for (id, name, args) in calls {
            content.push(ContentBlock::ToolCall(ToolCallBlock {
                id: (*id).into(),
                name: (*name).into(),
                arguments: (*args).into(),
            }));
        }
        let message = Message {
            role: Role::Assistant,
            content,
            source: MessageSource::model("deepseek", "deepseek-chat"),
            id: format!("a{}", self.s.len()),
        };
        let ev = AssistantMessageEvent {
            turn: keel_protocol::TurnNo(turn),
            step: keel_protocol::StepNo(step),
            message,
            usage: Some(usage),
            finish: None,
            interrupted: false,
        };
        self.surface(EventBody::AssistantMessage(Box::new(ev)), vec![])
    }
    fn call_and_result(
        &mut self,
        (turn, step): (u32, u32),
        (id, name, args): (&str, &str, &str),
        result: &str,
        is_error: bool,
    ) -> Seq {
        let call = self.ev(EventBody::ToolCall(Box::new(ToolCallEvent {
            turn: keel_protocol::TurnNo(turn),
            step: keel_protocol::StepNo(step),
            call_id: id.into(),
            name: name.into(),
            arguments: args.into(),
        })));
        let message = Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(ToolResultBlock {
                tool_call_id: id.into(),
                content: vec![ContentBlock::text(result)],
                is_error,
            })],
            source: MessageSource::tool(id),
            id: format!("r{}", self.s.len()),
        };
        let meta = is_error.then(|| serde_json::json!({"code": "TOOL_OUTCOME_UNKNOWN"}));
        self.surface(
            EventBody::ToolResult(Box::new(ToolResultEvent {
                turn: keel_protocol::TurnNo(turn),
                step: keel_protocol::StepNo(step),
                message,
                meta,
            })),
            vec![call],
        )
    }
}

fn usage(input: u64, cached: u64, output: u64) -> TokenUsage {
    TokenUsage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: cached,
        ..TokenUsage::default()
    }
}

/// Two turns: the first reads a file whose text is hostile markup, writes a todo list and a
/// plan, and is compacted; the second is interrupted mid-tool and repaired.
fn session() -> Session {
    let header = SessionHeader::new(
        SessionId("session-viewer".into()),
        1_800_000_000_000,
        Some("/home/user/<project>".into()),
    );
    let mut b = B {
        s: Session::new(header),
    };
    b.ev(EventBody::TurnStart(TurnStart {
        turn: keel_protocol::TurnNo(1),
    }));
    b.ev(EventBody::StepStart(StepRef {
        turn: keel_protocol::TurnNo(1),
        step: keel_protocol::StepNo(1),
    }));
    let first_user = b.user(&format!("read notes.txt {XSS}"));
    let first_answer = b.assistant(
        (1, 1),
        &format!("I should read it. {XSS}"),
        "Reading the notes.",
        &[(
            "call_read",
            "read",
            r#"{"path":"notes.txt","note":"<b>bold</b>"}"#,
        )],
        usage(1000, 3000, 40),
    );
    b.call_and_result(
        (1, 1),
        (
            "call_read",
            "read",
            r#"{"path":"notes.txt","note":"<b>bold</b>"}"#,
        ),
        &format!("1\tone\n2\t{XSS}"),
        false,
    );
    b.ev(EventBody::TodoWrite(Box::new(TodoWrite {
        todos: vec![
            TodoItem {
                content: "read the notes".into(),
                status: TodoStatus::Completed,
                active_form: None,
            },
            TodoItem {
                content: "fix the parser".into(),
                status: TodoStatus::InProgress,
                active_form: Some("fixing the <parser>".into()),
            },
            TodoItem {
                content: format!("report {XSS}"),
                status: TodoStatus::Pending,
                active_form: None,
            },
        ],
    })));
    b.ev(EventBody::PlanMode(Box::new(PlanModeEvent {
        active: false,
        plan: Some(format!("1. fix\n2. {XSS}")),
        approved: Some(true),
    })));
    b.ev(EventBody::StepEnd(StepRef {
        turn: keel_protocol::TurnNo(1),
        step: keel_protocol::StepNo(1),
    }));
    b.ev(EventBody::StepStart(StepRef {
        turn: keel_protocol::TurnNo(1),
        step: keel_protocol::StepNo(2),
    }));
    b.assistant(
        (1, 2),
        "",
        "The notes have two lines.",
        &[],
        usage(50, 4000, 12),
    );
    b.ev(EventBody::StepEnd(StepRef {
        turn: keel_protocol::TurnNo(1),
        step: keel_protocol::StepNo(2),
    }));
    b.ev(EventBody::TurnEnd(TurnEnd {
        turn: keel_protocol::TurnNo(1),
        reason: TurnEndReason::Completed,
    }));
    // Compaction replaces the first user message and the first answer by a summary.
    b.ev(EventBody::CompactionStart(Box::new(CompactionStart {
        reason: "manual".into(),
        estimated_tokens: 4000,
        context_window: 8000,
    })));
    let summary = Message::user_text(
        format!("SUMMARY: the user asked to read notes. {XSS}"),
        MessageSource::plugin("keel/compaction"),
        "sum",
    );
    b.s.push_surface(
        EventBody::UserMessage(Box::new(summary)),
        SurfaceOp::Replace {
            start: first_user,
            end: first_answer,
        },
        vec![first_user, first_answer],
    )
    .unwrap();
    b.ev(EventBody::CompactionEnd(Box::new(CompactionEnd {
        outcome: "summarised".into(),
        before_tokens: 4000,
        after_tokens: 300,
        error: None,
    })));
    // Turn 2: a bash call that never answered (keel was killed), repaired at resume.
    b.ev(EventBody::TurnStart(TurnStart {
        turn: keel_protocol::TurnNo(2),
    }));
    b.ev(EventBody::StepStart(StepRef {
        turn: keel_protocol::TurnNo(2),
        step: keel_protocol::StepNo(1),
    }));
    b.user("now run the tests");
    b.assistant(
        (2, 1),
        "",
        "",
        &[("call_bash", "bash", r#"{"command":"sleep 60"}"#)],
        usage(200, 0, 9),
    );
    b.call_and_result(
        (2, 1),
        ("call_bash", "bash", r#"{"command":"sleep 60"}"#),
        "TOOL_OUTCOME_UNKNOWN: the tool was running when keel stopped",
        true,
    );
    b.ev(EventBody::StepEnd(StepRef {
        turn: keel_protocol::TurnNo(2),
        step: keel_protocol::StepNo(1),
    }));
    b.ev(EventBody::TurnEnd(TurnEnd {
        turn: keel_protocol::TurnNo(2),
        reason: TurnEndReason::Interrupted,
    }));
    b.s
}

fn page() -> String {
    render_html(&session(), &HtmlOptions::default())
}

#[test]
fn hostile_text_anywhere_is_shown_as_text() {
    let html = page();
    // The page has no script element at all, and no image: only the escaped forms appear.
    assert!(!html.contains("<script"), "a script element leaked");
    assert!(!html.contains("<img"), "an img element leaked");
    assert!(!html.contains("<b>bold"), "markup in arguments leaked");
    assert!(!html.contains("<project>"), "markup in the header leaked");
    assert!(!html.contains("<parser>"), "markup in a todo leaked");
    let escaped = "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;&quot;&#39;&amp;";
    // User message, reasoning, tool result, todo, plan, summary: six times at least.
    let n = html.matches(escaped).count();
    assert!(n >= 6, "escaped payload shown {n} times:\n{html}");
    assert!(html.contains("&lt;b&gt;bold&lt;/b&gt;"));
}

#[test]
fn the_page_is_self_contained() {
    let html = page();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("Content-Security-Policy\" content=\"default-src 'none'"));
    for external in [
        "src=\"http",
        "href=\"http",
        "@import",
        "url(",
        "<link",
        "<script",
    ] {
        assert!(!html.contains(external), "{external} in the page");
    }
    assert!(html.trim_end().ends_with("</html>"));
}

#[test]
fn every_turn_step_call_and_marker_is_on_the_page() {
    let html = page();
    for needle in [
        "data-turn=\"1\"",
        "data-turn=\"2\"",
        "data-step=\"1.1\"",
        "data-step=\"1.2\"",
        "data-step=\"2.1\"",
        "data-call-id=\"call_read\"",
        "data-call-id=\"call_bash\"",
        "data-marker=\"compaction\" data-phase=\"start\"",
        "data-marker=\"compaction\" data-phase=\"end\"",
        "data-marker=\"compaction-summary\"",
        "data-marker=\"interrupted\"",
        "data-marker=\"todo\"",
        "data-marker=\"plan\"",
        "data-marker=\"turn-end\"",
        // Compacted text stays, marked with what replaced it.
        "compacted → #",
        "Reading the notes.",
        "SUMMARY: the user asked to read notes.",
        // Reasoning is collapsed; tool calls are expandable, with arguments and results.
        "<details class=\"reasoning shadowed\"",
        "<details class=\"tool ok\" id=\"call-call_read\"",
        "<details class=\"tool error\" id=\"call-call_bash\"",
        "error TOOL_OUTCOME_UNKNOWN",
        "&quot;path&quot;: &quot;notes.txt&quot;",
        "1\tone\n2\t",
        // Todo states and the approved plan.
        "Todo list: 1 of 3 done",
        "<li class=\"in-progress\" data-status=\"in-progress\"><span class=\"mark\">▶</span> fixing the &lt;parser&gt;</li>",
        "plan approved: plan mode off",
        // Usage per step with its cache-hit share: 3000 of 4000 prompt tokens cached.
        "data-prompt=\"4000\" data-cached=\"3000\" data-output=\"40\">prompt 4,000 tok · <b>75% cache hit</b>",
        "data-prompt=\"4050\" data-cached=\"4000\"",
        "<b>98% cache hit</b>",
        // The session's totals.
        "2 turns, 3 steps, 2 tool calls",
        "2027-01-15 08:00:00 UTC",
    ] {
        assert!(html.contains(needle), "missing {needle:?} in\n{html}");
    }
    // The result of a call is shown inside it, once.
    assert_eq!(html.matches("class=\"result\"").count(), 2, "{html}");
    assert!(!html.contains("result-only"));
}

#[test]
fn the_page_is_stable() {
    // From <body> on: the stylesheet is not what this pins.
    let html = page();
    let body = &html[html.find("<body>").unwrap()..];
    insta::assert_snapshot!("page", body);
}
