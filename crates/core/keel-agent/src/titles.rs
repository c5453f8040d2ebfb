//! Session titles written by the model: when the first human prompt of a session enters its
//! log, one small request — no tools, thinking off, a few dozen output tokens, the provider's
//! cheapest model — names the session, and its answer, sanitized, is appended as
//! `session/title` (what `keel sessions list`, the UI, ACP `session/list` and `keel serve`'s
//! list show).
//!
//! The request runs beside the first turn, as DeepSeek Harness's does (its system prompt and
//! user framing are dsh's): it costs the turn no time, and the title is usually in the log
//! before the turn's first answer. It goes through the session's own [`keel_llm::Provider`]
//! as [side work](crate::side): it never blocks or fails a turn, and a failed request is
//! logged at debug level and forgotten. The host decides whether a session gets one
//! (`titles` in keel's configuration) and installs [`install`] on the agent's own hooks, so
//! child agents (subagents) never inherit it.

use crate::handle::AgentSlot;
use crate::seams::HookRegistry;
use keel_llm::{ChatRequest, Provider};
use keel_protocol::{
    ContentBlock, EventBody, Message, MessageSource, Seq, SessionEvent, SessionTitle,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The title request's system prompt (DeepSeek Harness's).
pub const TITLE_SYSTEM: &str = "Create a concise title for an AI coding-assistant session from the supplied human messages.\nReturn only the title on one line, **in plain text of natural language**, with no quotes, prefix, explanation, Markdown, XML, or terminal control codes. No code is allowed.\nUse the language of the messages.\nAim for about 5 words in non-CJK languages or 10 CJK characters.\nIf the messages give little to name, still return a short best-effort title, such as Greeting, instead of explaining.";

/// What the title request's user message starts with; the JSON array of human messages
/// follows.
pub const TITLE_USER_PREFIX: &str =
    "Generate the session title from this JSON array of human messages:\n";

/// Characters of human text sent at most (the request stays a few hundred bytes to ~2 KB).
pub const TITLE_INPUT_CHARS: usize = 2000;

/// The title request's output budget.
pub const TITLE_MAX_TOKENS: u64 = 64;

/// Characters of a title kept at most.
pub const TITLE_MAX_CHARS: usize = 80;

/// How long a title request may take before it is given up.
pub const TITLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The cheapest DeepSeek model, which titles every DeepSeek session.
pub const CHEAPEST_DEEPSEEK_MODEL: &str = "deepseek-v4-flash";

/// The title producer named in the `source` of the `session/title` events it writes.
pub const TITLE_PROVIDER: &str = "keel-first-prompt-llm";

/// The model a session on `model` is titled with: the provider's cheapest — for DeepSeek's
/// models `deepseek-v4-flash`; keel knows no cheaper sibling of any other model, which
/// titles its own session.
pub fn title_model(model: &str) -> String {
    if model.starts_with("deepseek-") {
        CHEAPEST_DEEPSEEK_MODEL.to_owned()
    } else {
        model.to_owned()
    }
}

/// The title request for the human messages `prompts` (`(seq, text)`), on `model`: dsh's
/// system prompt, one user message holding the messages as a JSON array (texts cut so that
/// together they stay within [`TITLE_INPUT_CHARS`]), no tools, thinking off.
pub fn title_request(model: &str, prompts: &[(Seq, &str)]) -> ChatRequest {
    let mut left = TITLE_INPUT_CHARS;
    let items: Vec<serde_json::Value> = prompts
        .iter()
        .map(|(seq, text)| {
            let text: String = text.trim().chars().take(left).collect();
            left -= text.chars().count();
            serde_json::json!({"seq": seq.0, "text": text})
        })
        .collect();
    let array = serde_json::Value::Array(items).to_string();
    ChatRequest {
        model: model.to_owned(),
        system: TITLE_SYSTEM.to_owned(),
        messages: vec![Message::user_text(
            format!("{TITLE_USER_PREFIX}{array}"),
            MessageSource::user(),
            uuid::Uuid::new_v4().to_string(),
        )],
        max_tokens: Some(TITLE_MAX_TOKENS),
        thinking: Some(false),
        ..ChatRequest::default()
    }
}

/// A model's answer made a title: its first non-blank line without terminal control codes,
/// Markdown marks, a `Title:` prefix or surrounding quotes, whitespace collapsed, at most
/// [`TITLE_MAX_CHARS`] characters. `None` when nothing is left.
pub fn sanitize(answer: &str) -> Option<String> {
    let clean = strip_controls(answer);
    let line = clean.lines().map(str::trim).find(|l| !l.is_empty())?;
    let mut t: String = strip_tags(line)
        .chars()
        .filter(|c| !matches!(c, '*' | '`'))
        .collect();
    t = t
        .trim_start_matches(|c: char| matches!(c, '#' | '-' | '+' | '=' | '|') || c.is_whitespace())
        .to_owned();
    for prefix in ["session title:", "title:"] {
        if t.len() >= prefix.len()
            && t.is_char_boundary(prefix.len())
            && t[..prefix.len()].eq_ignore_ascii_case(prefix)
        {
            t = t[prefix.len()..].to_owned();
        }
    }
    let quotes = |c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '"' | '\'' | '_' | '“' | '”' | '‘' | '’' | '«' | '»' | '「' | '」' | '『' | '』'
            )
    };
    let words: Vec<&str> = t.trim_matches(quotes).split_whitespace().collect();
    let joined = words.join(" ");
    let mut title: String = joined.chars().take(TITLE_MAX_CHARS).collect();
    if title.chars().count() < joined.chars().count() {
        title = title.trim_end().to_owned();
    }
    (!title.is_empty()).then_some(title)
}

/// `line` without XML/HTML tags (`<title>`, `</b>`): a `<` up to the next `>`.
fn strip_tags(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        match rest[open..].find('>') {
            Some(close) => rest = &rest[open + close + 1..],
            None => {
                rest = &rest[open + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// `text` without terminal escape sequences (CSI `ESC [ … final`, OSC `ESC ] … BEL/ST`, other
/// `ESC x`) and other control characters (newlines kept; tabs become spaces).
fn strip_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                Some('[') => {
                    for d in chars.by_ref() {
                        if ('\u{40}'..='\u{7e}').contains(&d) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    while let Some(d) = chars.next() {
                        if d == '\u{7}' || (d == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                            break;
                        }
                    }
                }
                _ => {}
            },
            '\n' => out.push('\n'),
            '\t' => out.push(' '),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Ask `provider` for a title with `request`: the sanitized text of its answer, or why not.
pub async fn request_title(
    provider: &dyn Provider,
    request: ChatRequest,
    cancel: CancellationToken,
) -> Result<String, String> {
    let assembled = keel_llm::assemble(provider.stream(request, cancel), |_| {})
        .await
        .map_err(|i| i.failure.to_string())?;
    let text: String = assembled
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    sanitize(&text).ok_or_else(|| format!("the answer holds no title: {text:?}"))
}

/// Register the title observer on `hooks` (an agent's own hooks, which children do not
/// inherit). Returns the slot to bind to the agent once it is built; until then, and for a
/// session that already has a title or is a delegated child, nothing happens. The first
/// `user/message` a human typed starts the one title request of this agent.
pub fn install(hooks: &mut HookRegistry) -> Arc<AgentSlot> {
    let slot = Arc::new(AgentSlot::new());
    let started = AtomicBool::new(false);
    let bound = slot.clone();
    hooks.session_event.push(Arc::new(move |ev: &SessionEvent| {
        let EventBody::UserMessage(m) = &ev.body else {
            return;
        };
        if !m.source.is_user() || started.load(Ordering::Relaxed) {
            return;
        }
        let text = m.text();
        if text.trim().is_empty() {
            return;
        }
        let Some(agent) = bound.get() else {
            return;
        };
        started.store(true, Ordering::Relaxed);
        if agent.delegation_depth() > 0 || agent.with_session(|s| s.title().is_some()) {
            return;
        }
        let provider = agent.provider().clone();
        let provider_name = agent.config().provider_name.clone();
        let model = title_model(&agent.config().model);
        let request = title_request(&model, &[(ev.seq, &text)]);
        let seq = ev.seq;
        let weak = agent.downgrade();
        agent.spawn_side_work(async move {
            let asked = request_title(&*provider, request, CancellationToken::new());
            let title = match tokio::time::timeout(TITLE_TIMEOUT, asked).await {
                Ok(Ok(title)) => title,
                Ok(Err(why)) => {
                    tracing::debug!("session title request failed: {why}");
                    return;
                }
                Err(_) => {
                    tracing::debug!("session title request timed out");
                    return;
                }
            };
            let Some(agent) = weak.upgrade() else {
                return;
            };
            // A title set meanwhile (by the person) wins.
            if agent.with_session(|s| s.title().is_some()) {
                return;
            }
            let source = serde_json::json!({
                "kind": "provider",
                "provider": TITLE_PROVIDER,
                "model": {"provider": provider_name, "model": model},
            });
            let event = EventBody::SessionTitle(Box::new(SessionTitle {
                title,
                message_seqs: vec![seq],
                source: Some(source),
            }));
            if let Err(e) = agent.push(event) {
                tracing::debug!("session title not logged: {e}");
            }
        });
    }));
    slot
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_keeps_a_plain_title() {
        assert_eq!(
            sanitize("Fix the parser").as_deref(),
            Some("Fix the parser")
        );
        assert_eq!(
            sanitize("  修复解析器错误  \n").as_deref(),
            Some("修复解析器错误")
        );
    }

    #[test]
    fn sanitize_takes_the_first_line_without_quotes_markdown_or_prefix() {
        assert_eq!(
            sanitize("\n\n\"Echo a greeting\"\nThis title says what the user asked.").as_deref(),
            Some("Echo a greeting")
        );
        assert_eq!(
            sanitize("# **Run `echo hi`**").as_deref(),
            Some("Run echo hi")
        );
        assert_eq!(
            sanitize("Title: 'Add a flag'").as_deref(),
            Some("Add a flag")
        );
        assert_eq!(sanitize("- “Greeting”").as_deref(), Some("Greeting"));
        assert_eq!(
            sanitize("<title>Greeting</title>").as_deref(),
            Some("Greeting")
        );
    }

    #[test]
    fn sanitize_drops_control_codes_and_collapses_space() {
        assert_eq!(
            sanitize("\u{1b}[31mRed\u{1b}[0m  alert\u{7}\tnow").as_deref(),
            Some("Red alert now")
        );
        assert_eq!(
            sanitize("\u{1b}]0;evil\u{7}Set up CI").as_deref(),
            Some("Set up CI")
        );
    }

    #[test]
    fn sanitize_caps_the_length_and_refuses_nothing() {
        let long = "word ".repeat(40);
        let t = sanitize(&long).unwrap();
        assert!(t.chars().count() <= TITLE_MAX_CHARS, "{t}");
        assert!(!t.ends_with(' '));
        assert_eq!(sanitize(""), None);
        assert_eq!(sanitize(" \n\t\n"), None);
        assert_eq!(sanitize("\"\""), None);
        assert_eq!(sanitize("**``**"), None);
    }

    #[test]
    fn the_request_has_no_tools_thinking_off_and_capped_input() {
        let long = "x".repeat(10_000);
        let r = title_request("deepseek-v4-flash", &[(Seq(8), long.as_str())]);
        assert!(r.tools.is_empty());
        assert_eq!(r.thinking, Some(false));
        assert_eq!(r.max_tokens, Some(TITLE_MAX_TOKENS));
        assert_eq!(r.system, TITLE_SYSTEM);
        let text = r.messages[0].text();
        assert!(text.starts_with(TITLE_USER_PREFIX));
        assert!(text.len() < TITLE_INPUT_CHARS + 200, "{}", text.len());
        let r = title_request("m", &[(Seq(8), "run echo hi")]);
        assert_eq!(
            r.messages[0].text(),
            format!("{TITLE_USER_PREFIX}[{{\"seq\":8,\"text\":\"run echo hi\"}}]")
        );
    }

    #[test]
    fn deepseek_sessions_are_titled_by_the_cheapest_model() {
        assert_eq!(title_model("deepseek-v4-pro"), "deepseek-v4-flash");
        assert_eq!(title_model("deepseek-v4-flash"), "deepseek-v4-flash");
        assert_eq!(title_model("qwen3-coder"), "qwen3-coder");
    }
}
