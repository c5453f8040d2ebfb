//! What the page needs from the whole log before it walks the transcript, gathered in one pass
//! over the whole events ([`Facts`]: usage per step and in total, step and call counts; a
//! plugin's events, continuity's boundaries among them, come through the transcript as notes in
//! their presenters' words), and how figures read on the page
//! (token counts with thousands separators, UTC times, the usage line of a step).

use keel_protocol::{EventBody, StepNo, TokenUsage, TurnNo};
use keel_session::Session;
use std::collections::HashMap;
use std::fmt::Write as _;

/// Facts gathered in one pass over the log's whole events.
#[derive(Default)]
pub(crate) struct Facts {
    pub usage: HashMap<(TurnNo, StepNo), TokenUsage>,
    pub total: TokenUsage,
    pub steps: u64,
    pub calls: u64,
}

impl Facts {
    pub fn of(session: &Session) -> Facts {
        let mut f = Facts::default();
        for ev in session.whole_event_iter() {
            match &ev.body {
                EventBody::StepStart(_) => f.steps += 1,
                EventBody::ToolCall(_) => f.calls += 1,
                EventBody::AssistantMessage(a) => {
                    if let Some(u) = &a.usage {
                        let s = f.usage.entry((a.turn, a.step)).or_default();
                        add(s, u);
                        add(&mut f.total, u);
                    }
                }
                _ => {}
            }
        }
        f
    }
}

fn add(sum: &mut TokenUsage, u: &TokenUsage) {
    sum.input_tokens += u.input_tokens;
    sum.output_tokens += u.output_tokens;
    sum.cache_read_tokens += u.cache_read_tokens;
    sum.reasoning_tokens += u.reasoning_tokens;
}

/// `12,345`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The usage line of a step: prompt tokens, cache-hit share, output.
pub(crate) fn usage_span(out: &mut String, u: &TokenUsage) {
    let prompt = u.input_tokens + u.cache_read_tokens;
    let share = (u.cache_read_tokens * 100).checked_div(prompt).unwrap_or(0);
    let _ = write!(
        out,
        "<span class=\"usage\" data-prompt=\"{prompt}\" data-cached=\"{}\" data-output=\"{}\">prompt {} tok · <b>{share}% cache hit</b> · output {}",
        u.cache_read_tokens,
        u.output_tokens,
        thousands(prompt),
        thousands(u.output_tokens)
    );
    if u.reasoning_tokens > 0 {
        let _ = write!(out, " (reasoning {})", thousands(u.reasoning_tokens));
    }
    out.push_str("</span>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn dates_and_counts_read_like_a_person_writes_them() {
        assert_eq!(keel_protocol::utc_time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(
            keel_protocol::utc_time(1_800_000_000_000),
            "2027-01-15 08:00:00 UTC"
        );
        assert_eq!(
            keel_protocol::utc_time(951_782_400_000),
            "2000-02-29 00:00:00 UTC"
        );
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(100), "100");
    }
}
