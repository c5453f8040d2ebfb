//! The jobs of a provider that runs its delegates itself (the keel, acp and in-process
//! providers): one table per provider, keyed by job id (`keel-N`, `acp-N`, `ip-N`), each job
//! with its result, its
//! events and their listeners, its cancellation and its "final" signal, plus what the
//! provider keeps of its own (`X`: the delegate's stdin or steering channel, its log).
//!
//! ```text
//! Provider::start ─► Table::insert (job.json written) ─► run task: Table::run (after, running),
//!                                                         push_event…
//!                                                       └► conclude: result, job.json, final
//! DelegationService (impl for every Provider) ─► delegate = start + submitted; steer refused
//!   unless running, else Provider::steer_running; status/wait/result/logs/cancel/events/watch
//!   ─► the Table methods
//! a job of an earlier process of the session ─► read back from its job.json
//! ```
//!
//! [`Provider`] is what such a provider implements itself (its capability report, start,
//! steer, review); the rest is done here once.
//!
//! Files live under `$KEEL_HOME/delegations/<supervisor session>/<job id>/`; an in-memory
//! table ([`Table::in_memory`], the in-process provider's) keeps none, and its jobs end with
//! the process.

mod provider;

pub(crate) use provider::{Provider, capabilities};

use crate::events::EventLog;
use crate::seam::{
    Caller, DelegateSpec, DelegationError, DelegationEvent, DelegationJob, DelegationResult,
    ErrorCode, EventListener, EventType, Lineage, RunStatus, Urgency,
};
use keel_protocol::sync::Locked;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Lines of a job's log kept in memory (and read back from `log.txt`) for `logs`.
pub(crate) const TAIL_LINES: usize = 400;

/// What a provider keeps of a job's log.
pub(crate) trait JobLog {
    /// The last `n` log lines (all kept when `None`).
    fn tail(&self, n: Option<usize>) -> String;
}

/// One job.
pub(crate) struct Job<X> {
    /// The supervisor session it belongs to.
    pub(crate) caller: String,
    /// Its result so far.
    pub(crate) result: DelegationResult,
    /// Its events and who listens to them (until the job is final).
    pub(crate) events: EventLog,
    /// Fired by `cancel`.
    pub(crate) cancel: CancellationToken,
    /// `true` once the job is final.
    pub(crate) final_tx: watch::Sender<bool>,
    /// The provider's own.
    pub(crate) own: X,
}

impl<X> Job<X> {
    /// A job of `caller` with `result` and the provider's `own` part.
    pub(crate) fn new(caller: &Caller, result: DelegationResult, own: X) -> Self {
        Job {
            caller: caller.session_id.clone(),
            result,
            events: EventLog::default(),
            cancel: CancellationToken::new(),
            final_tx: watch::channel(false).0,
            own,
        }
    }
}

/// The table (cheap to clone: clones share it).
pub(crate) struct Table<X> {
    prefix: &'static str,
    /// `None`: in memory only (no files written or read back).
    home: Option<PathBuf>,
    jobs: Arc<Mutex<HashMap<String, Job<X>>>>,
}

impl<X> Clone for Table<X> {
    fn clone(&self) -> Self {
        Table {
            prefix: self.prefix,
            home: self.home.clone(),
            jobs: self.jobs.clone(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.locked()
}

/// Now as RFC 3339 UTC (seconds).
pub(crate) fn now_rfc3339() -> String {
    let now = keel_protocol::time::now_ms();
    keel_protocol::time::utc_rfc3339_short(now - now.rem_euclid(1000))
}

/// A file-name-safe form of a session id.
pub(crate) fn sanitize(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl<X: JobLog> Table<X> {
    /// An empty table of jobs named `PREFIX-N`, their files under `home/delegations`.
    pub(crate) fn new(prefix: &'static str, home: PathBuf) -> Self {
        Table {
            prefix,
            home: Some(home),
            jobs: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// An empty table of jobs named `PREFIX-N` that keeps no files: jobs live as long as the
    /// table, and numbering is across sessions.
    pub(crate) fn in_memory(prefix: &'static str) -> Self {
        Table {
            prefix,
            home: None,
            jobs: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The directory of `caller`'s jobs (`None` for an in-memory table).
    fn session_dir(&self, caller: &Caller) -> Option<PathBuf> {
        Some(
            self.home
                .as_ref()?
                .join("delegations")
                .join(sanitize(&caller.session_id)),
        )
    }

    /// A new job of `caller` for `spec`: its id, its directory (created) and its first result
    /// (queued behind `spec.after` or running; `kind` and `profile` as given; its log at
    /// `log.txt` in the directory; `depth` is the delegate's). Nothing is in the table yet.
    pub(crate) fn open(
        &self,
        caller: &Caller,
        spec: &DelegateSpec,
        kind: &str,
        profile: String,
        depth: u32,
    ) -> Result<(String, PathBuf, DelegationResult), DelegationError> {
        let id = self.next_id(caller);
        let dir = self
            .session_dir(caller)
            .ok_or_else(|| {
                DelegationError::new(ErrorCode::Internal, "an in-memory job table keeps no files")
            })?
            .join(&id);
        std::fs::create_dir_all(&dir).map_err(|e| {
            DelegationError::new(
                ErrorCode::Internal,
                format!("cannot create {}: {e}", dir.display()),
            )
        })?;
        let mut job = DelegationJob::new(
            &id,
            if spec.after.is_empty() {
                RunStatus::Running
            } else {
                RunStatus::Queued
            },
        );
        job.label = spec.label.clone();
        job.profile = Some(profile);
        job.mode = Some(spec.mode);
        job.kind = Some(kind.into());
        job.submitted_at = Some(now_rfc3339());
        let mut result = DelegationResult::new(job);
        result.lineage = Lineage {
            chain_id: None,
            parent_job_id: None,
            child_job_ids: Vec::new(),
            delegation_depth: Some(depth),
        };
        result.artifacts.log_path = Some(dir.join("log.txt").display().to_string());
        Ok((id, dir, result))
    }

    fn number(&self, id: &str) -> Option<u64> {
        id.strip_prefix(self.prefix)?
            .strip_prefix('-')?
            .parse()
            .ok()
    }

    /// The next free `PREFIX-N` of the caller's session (jobs of an earlier process of the
    /// same session keep their directories, so numbering goes on after them).
    pub(crate) fn next_id(&self, caller: &Caller) -> String {
        let on_disk = self
            .session_dir(caller)
            .and_then(|dir| std::fs::read_dir(dir).ok())
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| self.number(e.file_name().to_str()?))
            .max()
            .unwrap_or(0);
        let in_memory = lock(&self.jobs)
            .keys()
            .filter_map(|k| self.number(k))
            .max()
            .unwrap_or(0);
        format!("{}-{}", self.prefix, on_disk.max(in_memory) + 1)
    }

    /// Add job `id`.
    pub(crate) fn insert(&self, id: &str, job: Job<X>) {
        lock(&self.jobs).insert(id.to_owned(), job);
    }

    /// A job of `caller`: in memory, or read back from its `job.json`.
    pub(crate) fn lookup(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<DelegationResult, DelegationError> {
        if let Some(job) = lock(&self.jobs).get(id) {
            if job.caller != caller.session_id {
                return Err(DelegationError::unknown_job(id));
            }
            return Ok(job.result.clone());
        }
        let dir = self.session_dir(caller);
        let Some(dir) = dir.filter(|_| !id.contains('/') && !id.contains("..")) else {
            return Err(DelegationError::unknown_job(id));
        };
        let path = dir.join(id).join("job.json");
        let text = std::fs::read_to_string(&path).map_err(|_| DelegationError::unknown_job(id))?;
        let mut r: DelegationResult = serde_json::from_str(&text).map_err(|e| {
            DelegationError::new(
                ErrorCode::Internal,
                format!("{} is not a delegation record: {e}", path.display()),
            )
        })?;
        if !r.job.status.is_final() {
            // Recorded at its start by an earlier process of this session that ended before
            // the delegation did; its delegate was stopped with it (its process group dies with
            // the supervisor).
            r.job.raw_status = Some(format!("{} (interrupted)", r.job.status.as_str()));
            r.job.status = RunStatus::Unknown;
            r.error_message = Some(
                "from an earlier session: the supervisor process ended before this delegation \
                 finished, and its delegate was stopped with it"
                    .into(),
            );
        }
        Ok(r)
    }

    /// The "final" signals of the caller's jobs `ids`; `unknown-job` for any other.
    pub(crate) fn finals(
        &self,
        caller: &Caller,
        ids: &[String],
    ) -> Result<Vec<(String, watch::Receiver<bool>)>, DelegationError> {
        let jobs = lock(&self.jobs);
        ids.iter()
            .map(|a| match jobs.get(a) {
                Some(j) if j.caller == caller.session_id => Ok((a.clone(), j.final_tx.subscribe())),
                _ => Err(DelegationError::unknown_job(a)),
            })
            .collect()
    }

    /// `f` on the caller's live job `id` (under the table's lock); `unknown-job` otherwise.
    pub(crate) fn with_job<T>(
        &self,
        caller: &Caller,
        id: &str,
        f: impl FnOnce(&mut Job<X>) -> T,
    ) -> Result<T, DelegationError> {
        match lock(&self.jobs).get_mut(id) {
            Some(j) if j.caller == caller.session_id => Ok(f(j)),
            _ => Err(DelegationError::unknown_job(id)),
        }
    }

    /// `f` on job `id`, whoever's it is (the run of the job itself); `None` when gone.
    pub(crate) fn update<T>(&self, id: &str, f: impl FnOnce(&mut Job<X>) -> T) -> Option<T> {
        lock(&self.jobs).get_mut(id).map(f)
    }

    /// Append an event to job `id` and hand it to its listeners.
    pub(crate) fn push_event(
        &self,
        id: &str,
        event_type: EventType,
        message: String,
        data: Option<serde_json::Value>,
        lifecycle: Option<String>,
    ) {
        self.push(DelegationEvent {
            job_id: id.to_owned(),
            seq: None,
            at: now_rfc3339(),
            event_type,
            urgency: Urgency::Info,
            message,
            data,
            lifecycle,
        });
    }

    /// Append `event` to its job and hand it to the job's listeners; `false` when there is no
    /// such job.
    pub(crate) fn push(&self, event: DelegationEvent) -> bool {
        let id = event.job_id.clone();
        match self.update(&id, |j| j.events.push(event)) {
            Some(fired) => {
                fired.deliver();
                true
            }
            None => false,
        }
    }

    /// A lifecycle event: job `id` is now `state`.
    pub(crate) fn lifecycle(&self, id: &str, state: &str) {
        self.push_event(
            id,
            EventType::Lifecycle,
            format!("{id} {state}"),
            None,
            Some(state.into()),
        );
    }

    /// Job `id` is now `status` (with its lifecycle event).
    pub(crate) fn set_status(&self, id: &str, status: RunStatus) {
        self.update(id, |j| j.result.job.status = status);
        self.lifecycle(id, status.as_str());
    }

    /// Write job `id`'s current result to `dir/job.json` (best effort: memory stays the
    /// truth while this process lives).
    pub(crate) fn record(&self, id: &str, dir: &std::path::Path) {
        let Some(record) = self.update(id, |j| j.result.clone()) else {
            return;
        };
        if let Ok(text) = serde_json::to_string_pretty(&record) {
            let _ = std::fs::write(dir.join("job.json"), text);
        }
    }

    /// Job `id` is final: `f` completes its result (status, answer, artifacts…), which is
    /// recorded in `dir` (when it has one); then the lifecycle event, and its waiters are
    /// released.
    pub(crate) fn finish(
        &self,
        id: &str,
        dir: Option<&std::path::Path>,
        f: impl FnOnce(&mut Job<X>),
    ) {
        let Some(status) = self.update(id, |j| {
            f(j);
            j.result.job.finished_at = Some(now_rfc3339());
            j.result.job.status
        }) else {
            return;
        };
        if let Some(dir) = dir {
            self.record(id, dir);
        }
        self.lifecycle(id, status.as_str());
        self.update(id, |j| {
            j.events.close();
            let _ = j.final_tx.send(true);
        });
    }

    /// Wait for the jobs `after` (a job's `after` list); `Some((status, why))` when it must
    /// not run: cancelled meanwhile, or one of them did not complete.
    pub(crate) async fn wait_after(
        &self,
        after: Vec<(String, watch::Receiver<bool>)>,
        cancel: &CancellationToken,
    ) -> Option<(RunStatus, Option<String>)> {
        for (id, mut rx) in after {
            tokio::select! {
                r = rx.wait_for(|f| *f) => { let _ = r; }
                () = cancel.cancelled() => return Some((RunStatus::Cancelled, None)),
            }
            let status = self.update(&id, |j| j.result.job.status);
            if status != Some(RunStatus::Completed) {
                return Some((
                    RunStatus::Skipped,
                    Some(format!(
                        "not run: job {id} it runs after ended {}",
                        status.map_or("unknown", RunStatus::as_str)
                    )),
                ));
            }
        }
        None
    }

    /// `status`: one job, or the caller's jobs in id order.
    pub(crate) fn status(
        &self,
        caller: &Caller,
        id: Option<&str>,
    ) -> Result<Vec<DelegationJob>, DelegationError> {
        if let Some(id) = id {
            return Ok(vec![self.lookup(caller, id)?.job]);
        }
        let mut jobs: Vec<DelegationJob> = lock(&self.jobs)
            .values()
            .filter(|j| j.caller == caller.session_id)
            .map(|j| j.result.job.clone())
            .collect();
        jobs.sort_by_key(|j| self.number(&j.id).unwrap_or(0));
        Ok(jobs)
    }

    /// Every job's id (whoever's), in number order.
    pub(crate) fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = lock(&self.jobs).keys().cloned().collect();
        ids.sort_by_key(|id| self.number(id).unwrap_or(0));
        ids
    }

    /// `wait`: until every job of `ids` is final, or `timeout`.
    pub(crate) async fn wait(
        &self,
        caller: &Caller,
        ids: &[String],
        timeout: Duration,
    ) -> Result<Vec<DelegationJob>, DelegationError> {
        let receivers = self.finals(caller, ids)?;
        let all = async {
            for (_, mut rx) in receivers {
                let _ = rx.wait_for(|f| *f).await;
            }
        };
        if tokio::time::timeout(timeout, all).await.is_err() {
            return Err(DelegationError::new(
                ErrorCode::Timeout,
                format!("not final after {} s", timeout.as_secs()),
            ));
        }
        ids.iter()
            .map(|id| self.lookup(caller, id).map(|r| r.job))
            .collect()
    }

    /// `result`: a final job's; `not-final` while it runs.
    pub(crate) fn result(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<DelegationResult, DelegationError> {
        let r = self.lookup(caller, id)?;
        if !r.job.status.is_final() {
            return Err(DelegationError::new(
                ErrorCode::NotFinal,
                format!("job {id} is {}", r.job.status.as_str()),
            ));
        }
        Ok(r)
    }

    /// `logs`: a live job's from memory, an earlier one's from its `log.txt`.
    pub(crate) fn logs(
        &self,
        caller: &Caller,
        id: &str,
        tail: Option<usize>,
    ) -> Result<String, DelegationError> {
        let live = match lock(&self.jobs).get(id) {
            Some(j) if j.caller == caller.session_id => Some(j.own.tail(tail)),
            Some(_) => return Err(DelegationError::unknown_job(id)),
            None => None,
        };
        if let Some(lines) = live {
            return Ok(lines);
        }
        let r = self.lookup(caller, id)?;
        let path = r.artifacts.log_path.unwrap_or_default();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let n = tail.unwrap_or(TAIL_LINES).min(lines.len());
        Ok(lines[lines.len() - n..].join("\n"))
    }

    /// `cancel`: fire the job's cancellation and wait until it is final.
    pub(crate) async fn cancel(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<DelegationJob, DelegationError> {
        let live = lock(&self.jobs).get(id).and_then(|j| {
            (j.caller == caller.session_id).then(|| (j.cancel.clone(), j.final_tx.subscribe()))
        });
        if let Some((token, mut done)) = live {
            token.cancel();
            let _ = done.wait_for(|f| *f).await;
        }
        Ok(self.lookup(caller, id)?.job)
    }

    /// `events` after `from_seq`.
    pub(crate) fn events(
        &self,
        caller: &Caller,
        id: &str,
        from_seq: Option<u64>,
    ) -> Result<Vec<DelegationEvent>, DelegationError> {
        self.with_job(caller, id, |j| j.events.since(from_seq))
    }

    /// `watch`: the events so far, then each new one until the job is final.
    pub(crate) fn watch(
        &self,
        caller: &Caller,
        id: &str,
        listener: EventListener,
    ) -> Result<(), DelegationError> {
        let past = self.with_job(caller, id, |j| {
            j.events.watch(&listener, !j.result.job.status.is_final())
        })?;
        for e in past {
            listener(e);
        }
        Ok(())
    }

    /// Cancel every job (the provider is going, and its delegates with it).
    pub(crate) fn cancel_all(&self) {
        for j in lock(&self.jobs).values() {
            j.cancel.cancel();
        }
    }
}

/// How a delegate's run ended, before it is written into its job.
pub(crate) struct Ending {
    /// Its final status.
    pub(crate) status: RunStatus,
    /// Why it failed, when it did.
    pub(crate) error: Option<String>,
    /// The patch and the files it touched (a write-mode run in an isolated worktree).
    pub(crate) artifacts: Option<(Option<String>, Vec<String>)>,
    /// The delegate's own session id (the job's chain).
    pub(crate) session: Option<String>,
}

impl Ending {
    /// `status`, with `error`, and nothing else known.
    pub(crate) fn with(status: RunStatus, error: Option<String>) -> Self {
        Ending {
            status,
            error,
            artifacts: None,
            session: None,
        }
    }
}

impl<X: JobLog> Table<X> {
    /// A job's life after its start, in its own task: wait for the jobs it runs `after`
    /// (cancelled or skipped meanwhile: it does not run), else mark it running and `run` it.
    pub(crate) async fn run(
        &self,
        id: &str,
        after: Vec<(String, watch::Receiver<bool>)>,
        cancel: &CancellationToken,
        run: impl Future<Output = Ending>,
    ) -> Ending {
        match self.wait_after(after, cancel).await {
            Some((status, error)) => Ending::with(status, error),
            None => {
                self.set_status(id, RunStatus::Running);
                run.await
            }
        }
    }

    /// Job `id` ended as `ending` with `answer` (its text and whether it was cut): its result
    /// is completed and recorded in `dir` ([`Table::finish`]); `own` lets go of the provider's
    /// handles on the delegate.
    pub(crate) fn conclude(
        &self,
        id: &str,
        dir: &std::path::Path,
        ending: Ending,
        answer: (Option<String>, bool),
        own: impl FnOnce(&mut X),
    ) {
        self.finish(id, Some(dir), |j| {
            let r = &mut j.result;
            r.job.status = ending.status;
            (r.final_text, r.final_text_truncated) = answer;
            r.error_message = ending.error;
            if let Some((patch, touched)) = ending.artifacts {
                r.artifacts.patch_path = patch;
                r.artifacts.touched_files = touched;
            }
            r.lineage.chain_id = ending.session;
            own(&mut j.own);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_has_the_shape() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 20, "{t}");
        assert!(
            t.starts_with("20") && t.ends_with('Z') && t.as_bytes()[10] == b'T',
            "{t}"
        );
    }

    #[test]
    fn session_ids_become_safe_directory_names() {
        assert_eq!(sanitize("abc-1_2"), "abc-1_2");
        assert_eq!(sanitize("../x y"), "___x_y");
    }
}
