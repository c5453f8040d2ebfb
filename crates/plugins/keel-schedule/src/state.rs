//! A session's schedules, folded from its log: the event names and shapes, times as RFC 3339
//! UTC, and the rules for the next time of a recurring schedule.

use keel_protocol::{EventBody, SessionEvent};
use serde_json::{Map, Value, json};

/// `schedule/created {id, prompt, dueAt, everySeconds?}`.
pub const CREATED_EVENT: &str = "schedule/created";
/// `schedule/deleted {id}`.
pub const DELETED_EVENT: &str = "schedule/deleted";
/// `schedule/updated {id, prompt, dueAt, everySeconds?}`: the schedule as changed.
pub const UPDATED_EVENT: &str = "schedule/updated";
/// `schedule/fired {id, dueAt, firedAt, nextDueAt?}`: logged before the prompt is delivered.
pub const FIRED_EVENT: &str = "schedule/fired";
/// `schedule/missed {id, dueAt, count, nextDueAt?}`: due while keel was not running.
pub const MISSED_EVENT: &str = "schedule/missed";

/// One active schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// `sched-N`.
    pub id: String,
    /// What is sent to the model when it fires.
    pub prompt: String,
    /// When it fires next, ms since the Unix epoch.
    pub due_ms: i64,
    /// Recurring: seconds between firings.
    pub every_seconds: Option<u64>,
}

impl Schedule {
    /// The `schedule/created` data of this schedule.
    pub fn created_data(&self) -> Value {
        let mut v = json!({"id": self.id, "prompt": self.prompt, "dueAt": rfc3339(self.due_ms)});
        if let Some(every) = self.every_seconds {
            v["everySeconds"] = json!(every);
        }
        v
    }

    /// The first due time after `now_ms` of a recurring schedule (`None` for a one-shot), and
    /// how many due times passed up to `now_ms` (at least one when it is due).
    pub fn advance(&self, now_ms: i64) -> (Option<i64>, u64) {
        let passed = |every_ms: i64| {
            if now_ms < self.due_ms {
                0
            } else {
                (now_ms - self.due_ms) / every_ms + 1
            }
        };
        match self.every_seconds {
            None => (None, u64::from(now_ms >= self.due_ms)),
            Some(every) => {
                let every_ms = i64::try_from(every.saturating_mul(1000)).unwrap_or(i64::MAX);
                let n = passed(every_ms.max(1));
                let next = self
                    .due_ms
                    .saturating_add(n.saturating_mul(every_ms))
                    .max(self.due_ms);
                (Some(next), u64::try_from(n).unwrap_or(0))
            }
        }
    }
}

/// The schedules of a session as its log leaves them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fold {
    /// Active schedules, in creation order.
    pub active: Vec<Schedule>,
    /// Schedules ever created (the next id is `sched-{created + 1}`).
    pub created: u32,
}

impl Fold {
    /// Fold `events` (a session's, in order).
    pub fn of<'a>(events: impl Iterator<Item = &'a SessionEvent>) -> Fold {
        let mut fold = Fold::default();
        for event in events {
            if let EventBody::Other(o) = &event.body {
                fold.apply(&o.type_name, &o.data);
            }
        }
        fold
    }

    /// Take one event of this plugin (others are ignored).
    pub fn apply(&mut self, type_name: &str, data: &Value) {
        let field = |k: &str| data.get(k).and_then(Value::as_str);
        let id = field("id").unwrap_or_default().to_owned();
        match type_name {
            CREATED_EVENT | UPDATED_EVENT => {
                if type_name == CREATED_EVENT {
                    self.created += 1;
                }
                let Some(due_ms) = field("dueAt").and_then(|t| parse_rfc3339(t).ok()) else {
                    return;
                };
                self.active.retain(|s| s.id != id);
                self.active.push(Schedule {
                    id,
                    prompt: field("prompt").unwrap_or_default().to_owned(),
                    due_ms,
                    every_seconds: data.get("everySeconds").and_then(Value::as_u64),
                });
            }
            DELETED_EVENT => self.active.retain(|s| s.id != id),
            FIRED_EVENT | MISSED_EVENT => {
                match field("nextDueAt").and_then(|t| parse_rfc3339(t).ok()) {
                    Some(next) => {
                        if let Some(s) = self.active.iter_mut().find(|s| s.id == id) {
                            s.due_ms = next;
                        }
                    }
                    None => self.active.retain(|s| s.id != id),
                }
            }
            _ => {}
        }
    }

    /// The active schedule `id`.
    pub fn get(&self, id: &str) -> Option<&Schedule> {
        self.active.iter().find(|s| s.id == id)
    }

    /// The earliest due time of the active schedules.
    pub fn next_due(&self) -> Option<i64> {
        self.active.iter().map(|s| s.due_ms).min()
    }
}

/// The `schedule/fired` or `schedule/missed` data of `schedule` at `now_ms` (`count` only for
/// a missed one).
pub fn passed_data(schedule: &Schedule, now_ms: i64, missed: bool) -> Value {
    let (next, count) = schedule.advance(now_ms);
    let mut v = Map::new();
    v.insert("id".into(), json!(schedule.id));
    v.insert("dueAt".into(), json!(rfc3339(schedule.due_ms)));
    if missed {
        v.insert("count".into(), json!(count.max(1)));
    } else {
        v.insert("firedAt".into(), json!(rfc3339(now_ms)));
    }
    if let Some(next) = next {
        v.insert("nextDueAt".into(), json!(rfc3339(next)));
    }
    Value::Object(v)
}

pub use keel_protocol::time::now_ms;
/// `ms` as RFC 3339 UTC (`2030-01-31T12:00:00Z`; milliseconds only when there are some).
pub use keel_protocol::time::utc_rfc3339_short as rfc3339;

/// An RFC 3339 time (any offset) as ms since the epoch; what is wrong with it otherwise.
pub use keel_protocol::time::parse_rfc3339;

/// A duration for people: `45 s`, `4 min 10 s`, `2 h 5 min`, `3 d 4 h`.
pub fn human(ms: i64) -> String {
    let s = (ms.max(0) + 999) / 1000;
    match s {
        0..60 => format!("{s} s"),
        60..3600 if s % 60 == 0 => format!("{} min", s / 60),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        3600..86400 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86400, s % 86400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    fn sched(due_ms: i64, every: Option<u64>) -> Schedule {
        Schedule {
            id: "sched-1".into(),
            prompt: "check".into(),
            due_ms,
            every_seconds: every,
        }
    }

    #[test]
    fn times_round_trip_through_rfc3339() {
        let t = parse_rfc3339("2030-01-31T12:00:00Z").unwrap();
        assert_eq!(rfc3339(t), "2030-01-31T12:00:00Z");
        assert_eq!(rfc3339(t + 5), "2030-01-31T12:00:00.005Z");
        assert_eq!(parse_rfc3339("2030-01-31T13:00:00+01:00").unwrap(), t);
        assert!(parse_rfc3339("tomorrow").is_err());
        assert!(parse_rfc3339("2030-01-31").is_err());
    }

    #[test]
    fn a_recurring_schedule_advances_past_now_counting_what_passed() {
        let s = sched(10_000, Some(300));
        assert_eq!(s.advance(5_000), (Some(10_000), 0));
        assert_eq!(s.advance(10_000), (Some(310_000), 1));
        assert_eq!(s.advance(10_000 + 3 * 300_000 + 1), (Some(1_210_000), 4));
        let once = sched(10_000, None);
        assert_eq!(once.advance(9_999), (None, 0));
        assert_eq!(once.advance(20_000), (None, 1));
    }

    #[test]
    fn the_fold_follows_created_fired_missed_and_deleted() {
        let mut f = Fold::default();
        let one = sched(parse_rfc3339("2030-01-01T00:00:00Z").unwrap(), None);
        let mut two = sched(parse_rfc3339("2030-01-01T00:05:00Z").unwrap(), Some(300));
        two.id = "sched-2".into();
        f.apply(CREATED_EVENT, &one.created_data());
        f.apply(CREATED_EVENT, &two.created_data());
        assert_eq!(f.created, 2);
        assert_eq!(f.active, vec![one.clone(), two.clone()]);
        assert_eq!(f.next_due(), Some(one.due_ms));
        // A one-shot that fired is gone; a recurring one that was missed moves on.
        f.apply(FIRED_EVENT, &passed_data(&one, one.due_ms + 10, false));
        let later = two.due_ms + 2 * 300_000 + 5;
        let missed = passed_data(&two, later, true);
        assert_eq!(missed["count"], 3);
        assert_eq!(missed["nextDueAt"], "2030-01-01T00:20:00Z");
        f.apply(MISSED_EVENT, &missed);
        assert_eq!(f.active.len(), 1);
        assert_eq!(rfc3339(f.active[0].due_ms), "2030-01-01T00:20:00Z");
        f.apply(DELETED_EVENT, &json!({"id": "sched-2"}));
        assert!(f.active.is_empty());
        assert_eq!(f.created, 2, "ids are never reused");
        // Other plugins' events pass by.
        f.apply("goal/set", &json!({"id": "sched-9"}));
        assert_eq!(
            f,
            Fold {
                active: vec![],
                created: 2
            }
        );
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(human(1), "1 s");
        assert_eq!(human(45_000), "45 s");
        assert_eq!(human(300_000), "5 min");
        assert_eq!(human(250_000), "4 min 10 s");
        assert_eq!(human(7_500_000), "2 h 5 min");
        assert_eq!(human(273_600_000), "3 d 4 h");
    }
}
