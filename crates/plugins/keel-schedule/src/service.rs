//! What one agent's schedule tools and its timer share: the schedules folded from the log,
//! the checks of a new schedule, the timer task that fires due ones, and the report of those
//! that came due while keel was not running.
//!
//! Order of a firing: `schedule/fired` is appended first, then the prompt is delivered
//! ([`AgentHandle::deliver`]): a crash between the two loses that firing instead of running it
//! twice, and a resume never fires what the log says has fired.

use crate::ID;
use crate::state::{
    CREATED_EVENT, DELETED_EVENT, FIRED_EVENT, Fold, MISSED_EVENT, Schedule, UPDATED_EVENT, human,
    now_ms, parse_rfc3339, passed_data, rfc3339,
};
use keel_agent::background::TurnActivity;
use keel_agent::{AgentHandle, AgentSlot, InboxMode};
use keel_protocol::sync::Locked;
use keel_protocol::{Message, MessageSource};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Notify;

/// The shortest `every_seconds` (dsh's): a recurring schedule wakes the agent at most this often.
pub const MIN_EVERY_SECONDS: u64 = 300;
/// The shortest `after_seconds`.
pub const MIN_AFTER_SECONDS: u64 = 1;
/// The longest delay or period, and how far ahead `at` may be: 366 days.
pub const MAX_SECONDS: u64 = 366 * 24 * 3600;
/// Active schedules a session may hold.
pub const MAX_ACTIVE: usize = 32;
/// Characters of a schedule's prompt.
pub const MAX_PROMPT_CHARS: usize = 4000;
/// For tests only: the environment variable (the user's environment, never a project file)
/// that lowers [`MIN_EVERY_SECONDS`], so a test need not wait five minutes.
pub const MIN_EVERY_ENV: &str = "KEEL_SCHEDULE_MIN_EVERY_SECS";

/// Why a schedule could not be made or removed: the model-facing message.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ScheduleError(pub String);

/// When a new schedule fires: exactly one of `after_seconds`, `every_seconds`, `at`.
#[derive(Debug, Clone, PartialEq)]
pub enum When {
    /// Once, this many seconds from now.
    After(u64),
    /// Every this many seconds, the first time one period from now.
    Every(u64),
    /// Once, at this RFC 3339 time.
    At(String),
}

/// The schedules of one agent; see the module docs.
#[derive(Debug)]
pub struct Shared {
    slot: AgentSlot,
    fold: Mutex<Fold>,
    /// Signalled when the schedules change (the timer recomputes its next wake-up).
    changed: Arc<Notify>,
    timer: AtomicBool,
    /// The shortest `every_seconds` accepted ([`MIN_EVERY_SECONDS`] unless [`MIN_EVERY_ENV`]).
    min_every: u64,
}

impl Shared {
    /// Nothing scheduled yet; the shortest period from [`MIN_EVERY_ENV`] when set.
    pub fn new() -> Arc<Shared> {
        let min_every = std::env::var(MIN_EVERY_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|n| *n >= 1)
            .unwrap_or(MIN_EVERY_SECONDS);
        Arc::new(Shared {
            slot: AgentSlot::new(),
            fold: Mutex::new(Fold::default()),
            changed: Arc::new(Notify::new()),
            timer: AtomicBool::new(false),
            min_every,
        })
    }

    /// The schedules now.
    pub fn snapshot(&self) -> Fold {
        self.fold.locked().clone()
    }

    /// The shortest `every_seconds` accepted.
    pub fn min_every(&self) -> u64 {
        self.min_every
    }

    fn agent(&self) -> Result<AgentHandle, ScheduleError> {
        self.slot.get().ok_or_else(|| {
            ScheduleError("schedules are not available before the agent starts".into())
        })
    }

    /// Bind the agent: fold its log, report what came due while keel was not running, and
    /// start the timer when a runtime is there.
    pub fn bind(self: &Arc<Self>, agent: &AgentHandle) {
        if !self.slot.bind(agent) {
            return;
        }
        *self.fold.locked() = agent.with_session(|s| Fold::of(s.whole_event_iter()));
        self.report_missed(agent, now_ms());
        self.ensure_timer();
        self.changed.notify_one();
    }

    /// Log every schedule due at `now` as missed (a recurring one moves to its next time) and
    /// tell the model once, at its next turn. A log that cannot be written stops here.
    fn report_missed(&self, agent: &AgentHandle, now: i64) {
        let mut fold = self.fold.locked();
        let due: Vec<Schedule> = fold
            .active
            .iter()
            .filter(|s| s.due_ms <= now)
            .cloned()
            .collect();
        let mut lines = Vec::new();
        for s in due {
            let data = passed_data(&s, now, true);
            if agent.push_ignorable(MISSED_EVENT, data.clone()).is_err() {
                return;
            }
            fold.apply(MISSED_EVENT, &data);
            let count = data["count"].as_u64().unwrap_or(1);
            let mut line = format!("- {} (due {}", s.id, rfc3339(s.due_ms));
            if count > 1 {
                line.push_str(&format!(", {count} times"));
            }
            if let Some(next) = data["nextDueAt"].as_str() {
                line.push_str(&format!("; next at {next}"));
            }
            line.push_str(&format!("): {}", cut(&s.prompt, 200)));
            lines.push(line);
        }
        drop(fold);
        if lines.is_empty() {
            return;
        }
        let text = format!(
            "[keel/schedule] These schedules came due while keel was not running and were not \
             run:\n{}\nDo not run them now unless the user asks.",
            lines.join("\n")
        );
        let _ = agent.enqueue(InboxMode::Inject, plugin_message(text));
    }

    /// Check and log a new schedule; returns it.
    pub fn create(self: &Arc<Self>, prompt: &str, when: When) -> Result<Schedule, ScheduleError> {
        let agent = self.agent()?;
        let prompt = checked_prompt(prompt)?;
        let (due_ms, every_seconds) = self.due(when)?;
        let mut fold = self.fold.locked();
        if fold.active.len() >= MAX_ACTIVE {
            return Err(ScheduleError(format!(
                "this session already has {MAX_ACTIVE} schedules: delete one with schedule_delete \
                 first"
            )));
        }
        let schedule = Schedule {
            id: format!("sched-{}", fold.created + 1),
            prompt: prompt.to_owned(),
            due_ms,
            every_seconds,
        };
        let data = schedule.created_data();
        agent
            .push_ignorable(CREATED_EVENT, data.clone())
            .map_err(|e| ScheduleError(format!("the schedule could not be logged: {e}")))?;
        fold.apply(CREATED_EVENT, &data);
        drop(fold);
        self.ensure_timer();
        self.changed.notify_one();
        Ok(schedule)
    }

    /// Change the active schedule `id`: its prompt, its time, or both (dsh 0.2's
    /// `schedule_update`); what is not given stays.
    pub fn update(
        self: &Arc<Self>,
        id: &str,
        prompt: Option<&str>,
        when: Option<When>,
    ) -> Result<Schedule, ScheduleError> {
        let agent = self.agent()?;
        let prompt = prompt.map(checked_prompt).transpose()?;
        let due = when.map(|w| self.due(w)).transpose()?;
        let mut fold = self.fold.locked();
        let Some(mut schedule) = fold.get(id).cloned() else {
            return Err(unknown_id(&fold, id));
        };
        if let Some(prompt) = prompt {
            prompt.clone_into(&mut schedule.prompt);
        }
        if let Some((due_ms, every_seconds)) = due {
            schedule.due_ms = due_ms;
            schedule.every_seconds = every_seconds;
        }
        let data = schedule.created_data();
        agent
            .push_ignorable(UPDATED_EVENT, data.clone())
            .map_err(|e| ScheduleError(format!("the change could not be logged: {e}")))?;
        fold.apply(UPDATED_EVENT, &data);
        drop(fold);
        self.changed.notify_one();
        Ok(schedule)
    }

    /// When a schedule given `when` is due first, and its period.
    fn due(&self, when: When) -> Result<(i64, Option<u64>), ScheduleError> {
        let now = now_ms();
        Ok(match when {
            When::After(s) => (now + secs_ms(s), None),
            When::Every(s) => {
                if s < self.min_every {
                    return Err(ScheduleError(format!(
                        "every_seconds {s} is too short: the minimum is {}",
                        self.min_every
                    )));
                }
                (now + secs_ms(s), Some(s))
            }
            When::At(at) => {
                let t = parse_rfc3339(&at).map_err(|e| {
                    ScheduleError(format!(
                        "at {at:?} is not an RFC 3339 time such as 2030-01-31T12:00:00Z: {}",
                        e.reason
                    ))
                })?;
                if t <= now {
                    return Err(ScheduleError(format!(
                        "at {at} is in the past (now is {})",
                        rfc3339(now)
                    )));
                }
                if t - now > secs_ms(MAX_SECONDS) {
                    return Err(ScheduleError(format!(
                        "at {at} is more than 366 days ahead"
                    )));
                }
                (t, None)
            }
        })
    }

    /// Remove the active schedule `id`.
    pub fn delete(&self, id: &str) -> Result<Schedule, ScheduleError> {
        let agent = self.agent()?;
        let mut fold = self.fold.locked();
        let Some(schedule) = fold.get(id).cloned() else {
            return Err(unknown_id(&fold, id));
        };
        let data = serde_json::json!({"id": id});
        agent
            .push_ignorable(DELETED_EVENT, data.clone())
            .map_err(|e| ScheduleError(format!("the deletion could not be logged: {e}")))?;
        fold.apply(DELETED_EVENT, &data);
        drop(fold);
        self.changed.notify_one();
        Ok(schedule)
    }

    /// Fire every schedule due at `now`: log `schedule/fired`, then deliver its prompt (a
    /// follow-up turn when the agent is idle, into the running turn otherwise).
    pub fn fire_due(&self, now: i64) {
        let Some(agent) = self.slot.get() else {
            return;
        };
        let mut fold = self.fold.locked();
        let due: Vec<Schedule> = fold
            .active
            .iter()
            .filter(|s| s.due_ms <= now)
            .cloned()
            .collect();
        for s in due {
            let data = passed_data(&s, now, false);
            if agent.push_ignorable(FIRED_EVENT, data.clone()).is_err() {
                return;
            }
            fold.apply(FIRED_EVENT, &data);
            let _ = agent.deliver(fired_message(&s), |activity| match activity {
                TurnActivity::Idle => InboxMode::Followup,
                TurnActivity::Running => InboxMode::Inject,
            });
        }
    }

    /// Start the timer task once, when a tokio runtime is at hand (else at the next create or
    /// logged event: a front end may build its agent before its runtime runs).
    pub fn ensure_timer(self: &Arc<Self>) {
        if self.timer.load(Ordering::Acquire) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.timer.swap(true, Ordering::AcqRel) {
            return;
        }
        runtime.spawn(timer(Arc::downgrade(self), self.changed.clone()));
    }
}

/// Sleep until the next due time (or a change), fire what is due, again; ends when the
/// schedules' owner is gone.
async fn timer(shared: Weak<Shared>, changed: Arc<Notify>) {
    loop {
        let next = {
            let Some(shared) = shared.upgrade() else {
                return;
            };
            if !shared.slot.is_bound() {
                None // until the agent is bound
            } else if shared.slot.get().is_none() {
                return;
            } else {
                shared.fire_due(now_ms());
                shared.snapshot().next_due()
            }
        };
        match next {
            Some(due) => {
                let wait = u64::try_from(due - now_ms()).unwrap_or(0);
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(wait)) => {}
                    () = changed.notified() => {}
                }
            }
            None => changed.notified().await,
        }
    }
}

fn secs_ms(s: u64) -> i64 {
    i64::try_from(s.saturating_mul(1000)).unwrap_or(i64::MAX)
}

/// A prompt given to `schedule_create` or `schedule_update`, trimmed and checked.
fn checked_prompt(prompt: &str) -> Result<&str, ScheduleError> {
    let prompt = prompt.trim();
    if prompt.is_empty() {
        return Err(ScheduleError(
            "prompt is empty: say what to do when the schedule fires".into(),
        ));
    }
    if prompt.chars().count() > MAX_PROMPT_CHARS {
        return Err(ScheduleError(format!(
            "prompt is longer than {MAX_PROMPT_CHARS} characters"
        )));
    }
    Ok(prompt)
}

/// `id` names no active schedule: say which do.
fn unknown_id(fold: &Fold, id: &str) -> ScheduleError {
    let known: Vec<&str> = fold.active.iter().map(|s| s.id.as_str()).collect();
    ScheduleError(format!(
        "id '{id}' is not an active schedule{}",
        if known.is_empty() {
            " (there are none)".to_owned()
        } else {
            format!(" (active: {})", known.join(", "))
        }
    ))
}

/// `text` cut to `max` characters (with `…`), on one line.
pub fn cut(text: &str, max: usize) -> String {
    keel_protocol::text::one_line(text, max)
}

fn plugin_message(text: String) -> Message {
    Message::user_text(
        text,
        MessageSource::plugin(ID.source()),
        uuid::Uuid::new_v4().to_string(),
    )
}

/// The user message a schedule's firing sends: a short prefix, then its prompt.
pub fn fired_message(s: &Schedule) -> Message {
    let how = match s.every_seconds {
        Some(every) => format!("recurring every {}", human(secs_ms(every))),
        None => "one-shot".to_owned(),
    };
    plugin_message(format!(
        "[scheduled {}, {how}, due {}]\n{}",
        s.id,
        rfc3339(s.due_ms),
        s.prompt
    ))
}

/// The arguments' `when`: exactly one of `after_seconds`, `every_seconds`, `at`.
pub fn when_arg(args: &Value) -> Result<When, ScheduleError> {
    let given = |k: &str| args.get(k).is_some_and(|v| !v.is_null());
    let named: Vec<&str> = ["after_seconds", "every_seconds", "at"]
        .into_iter()
        .filter(|k| given(k))
        .collect();
    match named.as_slice() {
        ["after_seconds"] => {
            seconds(&args["after_seconds"], "after_seconds", MIN_AFTER_SECONDS).map(When::After)
        }
        ["every_seconds"] => seconds(&args["every_seconds"], "every_seconds", 1).map(When::Every),
        ["at"] => match args["at"].as_str() {
            Some(at) => Ok(When::At(at.trim().to_owned())),
            None => Err(ScheduleError(format!(
                "at {} is not a string: give an RFC 3339 time such as 2030-01-31T12:00:00Z",
                args["at"]
            ))),
        },
        [] => Err(ScheduleError(
            "give one of after_seconds, every_seconds or at".into(),
        )),
        many => Err(ScheduleError(format!(
            "give only one of after_seconds, every_seconds or at, not {}",
            many.join(" and ")
        ))),
    }
}

/// A whole number of seconds from `min` to [`MAX_SECONDS`] in `v`.
fn seconds(v: &Value, name: &str, min: u64) -> Result<u64, ScheduleError> {
    let n = v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.is_finite() && f.fract() == 0.0 && *f >= 0.0 && *f <= MAX_SECONDS as f64)
            .map(|f| f as u64)
    });
    match n {
        Some(n) if (min..=MAX_SECONDS).contains(&n) => Ok(n),
        _ => Err(ScheduleError(format!(
            "{name} {v} is out of range: a whole number of seconds from {min} to {MAX_SECONDS} \
             (366 days)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn exactly_one_time_is_given() {
        assert_eq!(
            when_arg(&json!({"after_seconds": 2})).unwrap(),
            When::After(2)
        );
        assert_eq!(
            when_arg(&json!({"every_seconds": 600.0})).unwrap(),
            When::Every(600)
        );
        assert_eq!(
            when_arg(&json!({"at": " 2030-01-31T12:00:00Z "})).unwrap(),
            When::At("2030-01-31T12:00:00Z".into())
        );
        let none = when_arg(&json!({})).unwrap_err().0;
        assert!(none.contains("give one of after_seconds"), "{none}");
        let two = when_arg(&json!({"after_seconds": 5, "at": "x"}))
            .unwrap_err()
            .0;
        assert!(
            two.contains("only one") && two.contains("after_seconds and at"),
            "{two}"
        );
        // A null counts as not given.
        assert_eq!(
            when_arg(&json!({"after_seconds": 5, "at": null})).unwrap(),
            When::After(5)
        );
    }

    #[test]
    fn seconds_out_of_range_or_not_whole_are_refused_naming_the_argument() {
        for bad in [json!(0), json!(-5), json!(1.5), json!(1e12), json!("10")] {
            let e = when_arg(&json!({"after_seconds": bad})).unwrap_err().0;
            assert!(
                e.starts_with("after_seconds ") && e.contains("out of range"),
                "{e}"
            );
        }
        let e = when_arg(&json!({"at": 5})).unwrap_err().0;
        assert!(e.starts_with("at 5 is not a string"), "{e}");
    }

    #[test]
    fn a_fired_message_says_it_is_scheduled() {
        let s = Schedule {
            id: "sched-3".into(),
            prompt: "check the build".into(),
            due_ms: 0,
            every_seconds: Some(600),
        };
        let m = fired_message(&s);
        assert_eq!(
            m.text(),
            "[scheduled sched-3, recurring every 10 min, due 1970-01-01T00:00:00Z]\ncheck the build"
        );
        assert_eq!(m.source.plugin_id(), Some("keel/schedule"));
    }
}
