//! Headless progress: a `session/event` observer that streams the answer and one line per tool
//! call to stderr, or every event as a JSON line to stdout (`--json`). Plugins' events show
//! through their presenters ([`keel_protocol::present`]): their notices, markers and children's
//! progress are lines on stderr, and what the run's end says (files presented, how a goal
//! ended) is kept in the run's [`Shown`] as it happens, not re-read from the log.

use keel_agent::HookRegistry;
use keel_protocol::present::{File, Item, Outcome};
use keel_protocol::sync::Locked;
use keel_protocol::{EventBody, StreamChunk};
use keel_session::view::text::one_line;
use std::collections::{BTreeMap, HashSet};
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

/// What plugins' presenters showed during the run, for its end.
#[derive(Debug, Default)]
pub struct Shown {
    /// Files presented.
    pub files: Vec<File>,
    /// The last outcome (how the goal ended).
    pub outcome: Option<Outcome>,
    /// Status items still set, by key.
    pub status: BTreeMap<String, String>,
}

/// How progress is shown.
#[derive(Debug, Clone)]
pub struct Progress {
    output: Output,
    shown: Arc<Mutex<Shown>>,
}

impl Progress {
    /// Progress for `output`.
    pub fn new(output: Output) -> Self {
        Progress {
            output,
            shown: Arc::default(),
        }
    }

    /// The output mode.
    pub fn output(&self) -> Output {
        self.output
    }

    /// What plugins showed so far; `f` reads it.
    pub fn shown<T>(&self, f: impl FnOnce(&Shown) -> T) -> T {
        f(&self.shown.locked())
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
        // Plugins' events, through their presenters: kept for the run's end, and in text
        // mode said on stderr as they happen.
        let presenters = Mutex::new(keel_host::presenters().make());
        let shown = self.shown.clone();
        let text = self.output == Output::Text;
        hooks.session_event.push(Arc::new(move |ev| {
            let items = presenters.locked().present(ev);
            if items.is_empty() {
                return;
            }
            let mut err = std::io::stderr().lock();
            let mut shown = shown.locked();
            for item in items {
                if text {
                    let _ = say(&mut err, &item);
                }
                match item {
                    Item::Files(files) => shown.files.extend(files),
                    Item::Outcome(o) => shown.outcome = Some(o),
                    Item::Status { key, status } => match status {
                        Some(s) => {
                            shown.status.insert(key, s.text);
                        }
                        None => {
                            shown.status.remove(&key);
                        }
                    },
                    _ => {}
                }
            }
        }));
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

/// One item of a plugin's presenter on stderr: notices, markers and outcomes as `keel:` lines
/// (a notice's detail indented under it), a child's progress indented under its call. Files
/// and status items are said at the run's end.
pub(super) fn say(err: &mut impl Write, item: &Item) -> std::io::Result<()> {
    match item {
        Item::Notice { text, detail, .. } => {
            writeln!(err, "keel: {text}")?;
            detail.iter().try_for_each(|d| writeln!(err, "  {d}"))
        }
        Item::Marker(text) => writeln!(err, "keel: {text}"),
        Item::Outcome(o) => writeln!(err, "keel: {}", o.text),
        Item::Progress { .. } => match item.line() {
            Some(line) => writeln!(err, "  {}", one_line(&line, 160)),
            None => Ok(()),
        },
        Item::Files(_) | Item::Status { .. } => Ok(()),
    }
}
