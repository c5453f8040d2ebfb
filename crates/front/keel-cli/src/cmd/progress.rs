//! Headless progress: a `session/event` observer that streams the answer and one line per tool
//! call to stderr, or every event as a JSON line to stdout (`--json`).

use keel_agent::HookRegistry;
use keel_protocol::sync::Locked;
use keel_protocol::{EventBody, StreamChunk};
use keel_session::view::text::one_line;
use std::collections::HashSet;
use std::io::Write;
use std::sync::{Arc, Mutex};

/// Where a headless run's output goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Progress lines on stderr, the final answer on stdout.
    Text,
    /// Every session event as a JSON line on stdout (`--json`).
    Json,
}

impl Output {
    /// `--json` given or not.
    pub fn from_json_flag(json: bool) -> Self {
        if json { Output::Json } else { Output::Text }
    }
}

/// How progress is shown.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    output: Output,
}

impl Progress {
    /// Progress for `output`.
    pub fn new(output: Output) -> Self {
        Progress { output }
    }

    /// With `--json`, the session header as the first line (the stream then holds the session
    /// file's records in order).
    pub fn header(&self, header: &keel_protocol::SessionHeader) -> std::io::Result<()> {
        if self.output == Output::Json {
            let line = serde_json::to_string(header)?;
            writeln!(std::io::stdout().lock(), "{line}")?;
        }
        Ok(())
    }

    /// Register the observer.
    pub fn install(&self, hooks: &mut HookRegistry) {
        if std::env::var_os("KEEL_REPORT_RUSAGE").is_some() {
            // Start-up to the first model request: measured where the stream is opened (after
            // the durability flush that precedes every request).
            let reported = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            hooks
                .llm_stream
                .push(keel_agent::modes::middleware(move |call, next| {
                    if !reported.swap(true, std::sync::atomic::Ordering::Relaxed)
                        && let Some(start) = crate::STARTED.get()
                    {
                        let ms = start.elapsed().as_secs_f64() * 1000.0;
                        let _ = writeln!(std::io::stderr(), "keel-timing first_request_ms={ms:.3}");
                    }
                    next.run(call)
                }));
        }
        if self.output == Output::Json {
            hooks.session_event.push(Arc::new(|ev| {
                if let Ok(line) = ev.to_json() {
                    let mut out = std::io::stdout().lock();
                    let _ = writeln!(out, "{line}");
                }
            }));
            return;
        }
        // Calls of exit_plan_mode awaiting an answer: a plan nobody could approve is handed
        // to the user, which the turn's end says (not a refused action).
        let plans: Mutex<HashSet<String>> = Mutex::new(HashSet::new());
        hooks.session_event.push(Arc::new(move |ev| {
            let mut err = std::io::stderr().lock();
            let _ = match &ev.body {
                EventBody::AssistantChunk(c) => match &c.chunk {
                    StreamChunk::TextDelta { text, .. } => write!(err, "{text}"),
                    StreamChunk::BlockEnd {
                        block: keel_protocol::ContentBlock::Text { .. },
                        ..
                    } => writeln!(err),
                    _ => Ok(()),
                },
                EventBody::ToolCall(c) => {
                    writeln!(err, "→ {} {}", c.name, one_line(&c.arguments, 120))
                }
                EventBody::ToolResult(r) => {
                    let text = r
                        .message
                        .tool_results()
                        .map(|b| b.text())
                        .collect::<String>();
                    let first = text.lines().next().unwrap_or("");
                    let lines = text.lines().count();
                    let failed = r.message.tool_results().any(|b| b.is_error);
                    if failed {
                        writeln!(err, "  ✗ {}", one_line(first, 160))
                    } else {
                        writeln!(
                            err,
                            "  ✓ {} line{}",
                            lines,
                            if lines == 1 { "" } else { "s" }
                        )
                    }
                }
                EventBody::LlmRetry(r) => {
                    writeln!(
                        err,
                        "keel: model call failed ({}), retry {} in {} ms",
                        r.failure.code, r.attempt, r.delay_ms
                    )
                }
                EventBody::Other(o) if o.type_name == keel_mcp::plugin::SERVER_EVENT => {
                    mcp_notice(&mut err, &o.data)
                }
                EventBody::Other(o) if o.type_name == keel_schedule::FIRED_EVENT => {
                    let field = |k: &str| o.data.get(k).and_then(|v| v.as_str()).unwrap_or("?");
                    writeln!(
                        err,
                        "keel: schedule {} fired (due {})",
                        field("id"),
                        field("dueAt")
                    )
                }
                EventBody::Other(o) if o.type_name == keel_schedule::MISSED_EVENT => {
                    let field = |k: &str| o.data.get(k).and_then(|v| v.as_str()).unwrap_or("?");
                    writeln!(
                        err,
                        "keel: schedule {} came due at {} while keel was not running; not run \
                         (the model is told)",
                        field("id"),
                        field("dueAt")
                    )
                }
                EventBody::Other(o) if o.type_name == keel_skills::WARNING_EVENT => {
                    let field = |k: &str| o.data.get(k).and_then(|v| v.as_str()).unwrap_or("");
                    writeln!(
                        err,
                        "keel: skill file {} skipped: {}",
                        field("file"),
                        one_line(field("error"), 300)
                    )
                }
                EventBody::ApprovalAsked(a) if a.tool == "exit_plan_mode" => {
                    plans.locked().insert(a.call_id.clone());
                    Ok(())
                }
                EventBody::ApprovalDecided(d) => {
                    let plan = plans.locked().remove(&d.call_id);
                    if d.approved || plan {
                        Ok(())
                    } else {
                        writeln!(
                            err,
                            "  ✗ not approved: {}",
                            d.reason.as_deref().unwrap_or("denied")
                        )
                    }
                }
                // The model's questions, and that nobody answered them (headless).
                EventBody::QuestionAsked(q) => q
                    .questions
                    .iter()
                    .try_for_each(|x| writeln!(err, "  ? {}", one_line(&x.question, 160))),
                EventBody::QuestionAnswered(a) if a.answers.is_empty() => writeln!(
                    err,
                    "  ? no answer: {}",
                    a.reason.as_deref().unwrap_or(&a.by)
                ),
                EventBody::PlanMode(p) => match (p.active, p.approved) {
                    (true, None) => writeln!(
                        err,
                        "keel: plan mode on: tools that could change anything are refused until \
                         a plan is approved"
                    ),
                    (false, Some(true)) => writeln!(err, "keel: plan approved; plan mode off"),
                    (false, _) => writeln!(err, "keel: plan mode off"),
                    (true, Some(_)) => Ok(()),
                },
                _ => Ok(()),
            };
        }));
    }
}

/// An MCP server that could not be used, or a tool of it that was skipped, said once.
fn mcp_notice(err: &mut impl Write, data: &serde_json::Value) -> std::io::Result<()> {
    let field = |k: &str| data.get(k).and_then(|v| v.as_str()).unwrap_or("");
    match field("status") {
        "failed" => {
            let how = match field("transport") {
                "" => String::new(),
                t => format!(" ({})", one_line(t, 120)),
            };
            writeln!(
                err,
                "keel: MCP server '{}'{how} is not available: {}",
                field("server"),
                one_line(field("error"), 300)
            )?;
            let tail = field("stderrTail");
            if !tail.is_empty() {
                writeln!(err, "  its stderr ends: {}", one_line(tail, 400))?;
            }
            Ok(())
        }
        "tool-skipped" => writeln!(
            err,
            "keel: MCP server '{}': tool '{}' is not offered: {}",
            field("server"),
            field("tool"),
            one_line(field("error"), 200)
        ),
        _ => Ok(()),
    }
}
