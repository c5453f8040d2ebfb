//! Scoring: what a task's session log says ([`Stats`]), the result line of a task whose run
//! and check ended (or that could not run), and results.jsonl, rewritten atomically in task
//! file order after each result.

use crate::batch::{BatchError, Run};
use crate::engine::CheckOutcome;
use crate::state::{self, Status};
use keel_protocol::{EventBody, TurnEndReason};
use keel_session::StoreError;
use keel_session::store::LoadError;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// Why a task's session could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The session is not in the store (for the task's workspace).
    #[error("session {session}: {error}")]
    Resolve {
        /// The session id.
        session: String,
        /// What the store said.
        error: StoreError,
    },
    /// Its log could not be loaded.
    #[error("cannot load {}: {error}", path.display())]
    Load {
        /// The log file.
        path: PathBuf,
        /// What the loader said.
        error: LoadError,
    },
}

/// What a session's log says.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) turns: u64,
    open: bool,
    last: Option<TurnEndReason>,
    usage: keel_session::view::cells::Usage,
}

impl Stats {
    /// Its last turn ended, and not because it was interrupted (nor, when `stopped`, the
    /// batch stopped it: a turn cancelled by Ctrl-C ends `aborted`).
    pub(crate) fn settled(&self, stopped: bool) -> bool {
        self.turns > 0
            && !self.open
            && match &self.last {
                Some(TurnEndReason::Interrupted) | None => false,
                Some(TurnEndReason::Completed) => true,
                Some(_) => !stopped,
            }
    }
}

impl Run<'_> {
    /// What task `i`'s session `session` says.
    pub(crate) fn session_stats(&self, i: usize, session: &str) -> Result<Stats, SessionError> {
        let ws = self.live[i]
            .workspace
            .clone()
            .or_else(|| self.workspace_dir(i).canonicalize().ok())
            .unwrap_or_else(|| self.workspace_dir(i));
        let path = self
            .store
            .resolve(session, &ws)
            .map_err(|error| SessionError::Resolve {
                session: session.to_owned(),
                error,
            })?;
        stats_of(&path)
    }

    /// Task `i`'s session (if any) and check are done: record its result.
    pub(crate) fn finish(&mut self, i: usize, check: CheckOutcome) -> Result<(), BatchError> {
        let id = self.tasks[i].id.clone();
        let session = self.state.tasks.get(&id).and_then(|t| t.session.clone());
        let Some(session) = session else {
            if self.interrupted {
                // Stopped before it had a session: it starts afresh next time.
                let mut result = self.result_base(i);
                result.extend([
                    ("outcome".into(), json!("interrupted")),
                    ("check".into(), Value::Null),
                    ("error".into(), json!("stopped before its session started")),
                ]);
                self.record(i, Value::Object(result), Status::Pending, false)?;
                self.say(&format!("{id}: interrupted before its session started"));
                return Ok(());
            }
            if let Some(error) = self.live[i].error.take() {
                return self.fail(i, error.to_string(), Status::Failed);
            }
            let why = match self.live[i].code {
                Some(code) => format!("keel exited with status {code}"),
                None => "keel was killed".to_owned(),
            };
            return self.fail(
                i,
                format!(
                    "{why} before starting a session (see {})",
                    self.log_path(i).display()
                ),
                Status::Failed,
            );
        };
        let stats = match self.session_stats(i, &session) {
            Ok(stats) => stats,
            Err(e) => return self.fail(i, e.to_string(), Status::Failed),
        };
        let (outcome, error) = if stats.open {
            ("interrupted".to_owned(), None)
        } else {
            match &stats.last {
                None => (
                    "failed".to_owned(),
                    Some("the session ran no turn".to_owned()),
                ),
                Some(reason) => outcome_of(reason),
            }
        };
        // A turn the batch's Ctrl-C cancelled ends `aborted`: it is resumed next time.
        let stopped_here = self.interrupted && outcome != "completed";
        let (outcome, error) = if stopped_here {
            ("interrupted".to_owned(), error)
        } else {
            (outcome, error)
        };
        let status = if outcome == "interrupted" || check == CheckOutcome::Stopped {
            Status::Interrupted
        } else {
            Status::Done
        };
        let mut result = self.result_base(i);
        let previous_wall = self
            .state
            .tasks
            .get(&id)
            .and_then(|t| t.result.as_ref())
            .and_then(|r| r.get("wall_ms"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let u = &stats.usage;
        let model = if u.model.is_empty() {
            self.pricing.default_model.clone()
        } else {
            u.model.clone()
        };
        let cost = (self.pricing.price)(&model).map(|p| p.cost(u.prompt, u.cached, u.output));
        result.extend([
            ("outcome".into(), json!(outcome)),
            ("check".into(), json!(check.word())),
            (
                "check_exit".into(),
                match &check {
                    CheckOutcome::Passed => json!(0),
                    CheckOutcome::Failed(code) => json!(code),
                    _ => Value::Null,
                },
            ),
            ("check_ms".into(), json!(self.live[i].check_ms)),
            ("turns".into(), json!(stats.turns)),
            ("requests".into(), json!(u.requests)),
            (
                "tokens".into(),
                json!({"prompt": u.prompt, "cached": u.cached, "output": u.output}),
            ),
            ("model".into(), json!(model)),
            ("cost_usd".into(), json!(cost)),
            (
                "wall_ms".into(),
                json!(previous_wall + u64::try_from(self.live[i].wall.as_millis()).unwrap_or(0)),
            ),
            ("session".into(), json!(session)),
        ]);
        let check_error = match &check {
            CheckOutcome::Timeout(secs) => Some(format!(
                "the check did not end within {secs} s; its process group was killed"
            )),
            CheckOutcome::Error(e) => Some(e.clone()),
            CheckOutcome::Stopped => {
                Some("the check did not run: the batch was interrupted".to_owned())
            }
            _ => None,
        };
        let engine_error = self.live[i].error.take().map(|e| e.to_string());
        let error = [error, engine_error, check_error]
            .into_iter()
            .flatten()
            .reduce(|a, b| format!("{a}; {b}"));
        result.insert("error".into(), json!(error));
        let failed = outcome != "completed" || matches!(check.word(), Some(w) if w != "passed");
        let line = format!(
            "{id}: {outcome}{}{}",
            check
                .word()
                .map(|w| format!(", check {w}"))
                .unwrap_or_default(),
            error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        );
        self.record(i, Value::Object(result), status, failed)?;
        self.say(&line);
        Ok(())
    }

    /// The fields every result line has.
    fn result_base(&self, i: usize) -> serde_json::Map<String, Value> {
        let task = &self.tasks[i];
        let attempts = self.state.tasks.get(&task.id).map_or(0, |t| t.attempts);
        let mut m = serde_json::Map::new();
        m.insert("id".into(), json!(task.id));
        m.insert("line".into(), json!(task.line));
        m.insert("attempts".into(), json!(attempts));
        m.insert(
            "workspace".into(),
            json!(
                self.live[i]
                    .workspace
                    .as_ref()
                    .map(|w| w.display().to_string())
            ),
        );
        m.insert("started_at_ms".into(), json!(self.live[i].started_at));
        m.insert("ended_at_ms".into(), json!(keel_session::now_ms()));
        m
    }

    /// Task `i` could not run: its result says why.
    pub(crate) fn fail(
        &mut self,
        i: usize,
        error: String,
        status: Status,
    ) -> Result<(), BatchError> {
        let mut result = self.result_base(i);
        result.extend([
            ("outcome".into(), json!("failed")),
            ("check".into(), Value::Null),
            ("error".into(), json!(error)),
        ]);
        let line = format!("{}: failed ({error})", self.tasks[i].id);
        self.record(i, Value::Object(result), status, true)?;
        self.say(&line);
        Ok(())
    }

    fn record(
        &mut self,
        i: usize,
        result: Value,
        status: Status,
        failed: bool,
    ) -> Result<(), BatchError> {
        let record = self.state.task(&self.tasks[i].id);
        record.status = status;
        record.result = Some(result);
        self.save()?;
        self.write_results()?;
        self.counters.done += 1;
        self.counters.failed += usize::from(failed);
        self.observer.update(&self.counters, true);
        Ok(())
    }

    /// results.jsonl (atomically): one line per task line with a result, in file order.
    pub(crate) fn write_results(&self) -> Result<Vec<Value>, BatchError> {
        let mut lines: Vec<(usize, Value)> = self
            .tasks
            .iter()
            .filter_map(|t| {
                let r = self.state.tasks.get(&t.id)?.result.clone()?;
                Some((t.line, r))
            })
            .collect();
        lines.extend(self.bad.iter().map(|b| {
            (
                b.line,
                json!({"id": b.id, "line": b.line, "outcome": "invalid", "check": null, "error": b.to_string()}),
            )
        }));
        lines.sort_by_key(|(line, _)| *line);
        let mut text = String::new();
        for (_, v) in &lines {
            text.push_str(&v.to_string());
            text.push('\n');
        }
        let path = self.out.join("results.jsonl");
        state::write_through_temp(&path, text.as_bytes(), false)
            .map_err(|error| BatchError::Write { path, error })?;
        Ok(lines.into_iter().map(|(_, v)| v).collect())
    }
}

/// A turn's end as results.jsonl says it, with the detail of a failure.
fn outcome_of(reason: &TurnEndReason) -> (String, Option<String>) {
    match reason {
        TurnEndReason::Completed => ("completed".into(), None),
        TurnEndReason::Interrupted => ("interrupted".into(), None),
        TurnEndReason::MaxTokens => ("max_tokens".into(), None),
        TurnEndReason::Aborted { reason } => ("aborted".into(), Some(reason.clone())),
        TurnEndReason::Blocked { reason } => ("blocked".into(), reason.clone()),
        TurnEndReason::Error { code, message } => {
            let detail = if message.starts_with(code.as_str()) {
                message.clone()
            } else {
                format!("{code}: {message}")
            };
            ("error".into(), Some(detail))
        }
    }
}

/// Turns, how the last ended, and usage, from the session log at `path`.
fn stats_of(path: &Path) -> Result<Stats, SessionError> {
    let loaded = keel_session::Store::load(path).map_err(|error| SessionError::Load {
        path: path.to_path_buf(),
        error,
    })?;
    let mut cells = keel_session::view::cells::Cells::new();
    let mut stats = Stats::default();
    for ev in loaded.session.events() {
        match &ev.body {
            EventBody::TurnStart(_) => {
                stats.turns += 1;
                stats.open = true;
            }
            EventBody::TurnEnd(end) => {
                stats.open = false;
                stats.last = Some(end.reason.clone());
            }
            _ => {}
        }
        cells.apply(&ev);
    }
    stats.usage = cells.usage;
    Ok(stats)
}
