//! The sessions hosted live: each an agent, whether its turns run, and the channel that tells
//! event streams a new event is in its log. Turns run on blocking threads of their own (a
//! turn's future holds the session log), one runner per session at a time, until the session
//! has no turn queued.

use crate::requests::{self, Requests, ServeApprover, ServeAsker};
use keel_agent::{Agent, InboxMode};
use keel_host::BuildOptions;
use keel_host::commands::CommandSet;
use keel_protocol::SessionEvent;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;
use tokio::sync::{Notify, broadcast};

/// How many new-event notices a slow stream may fall behind before it lags. A notice only wakes
/// a stream, which then reads the log from where it is (a lagging one too), so nothing is lost
/// and the agent never waits for a client: a few slots are enough (each costs 40 bytes per
/// hosted session; 1,024 of them were 40 KiB of every session's memory).
const NOTICES: usize = 16;

/// How often a cancelled turn is cancelled again until it stops (a cancel can land between
/// two steps of the turn).
const RECANCEL_EVERY: Duration = Duration::from_millis(200);

/// One session hosted live.
pub(crate) struct Live {
    /// Its agent.
    pub(crate) agent: Agent,
    /// Its workspace.
    pub(crate) cwd: PathBuf,
    /// A runner is running its turns.
    running: AtomicBool,
    /// No longer hosted ([`Hub::close`]): its event streams end once they sent its log.
    pub(crate) closed: AtomicBool,
    /// Tells the runner to cancel the running turn.
    cancel: Notify,
    /// The seq of every event appended to its log, as it is appended.
    pub(crate) events: broadcast::Sender<u64>,
    /// Its approvals and questions waiting for a client's answer.
    pub(crate) requests: Arc<Requests>,
    /// The live session that took its place (an agent rebuilt over the same session on
    /// another model): its event streams follow it.
    pub(crate) successor: OnceLock<Arc<Live>>,
    /// The custom commands (Markdown files) of its workspace and of the user, read once when
    /// first listed or run ([`crate::commands`]), as the ACP front end does.
    pub(crate) custom: OnceLock<CommandSet>,
}

impl Live {
    /// `"running"` while a turn runs or is about to, else `"idle"`.
    pub(crate) fn status(&self) -> &'static str {
        if self.running.load(Ordering::Acquire) || self.agent.is_busy() {
            "running"
        } else {
            "idle"
        }
    }
}

/// What is made before a session's agent is built and finished after: its build options
/// carry hooks that need the session they feed.
pub(crate) struct Pending {
    events: broadcast::Sender<u64>,
    live: Arc<OnceLock<Weak<Live>>>,
    requests: Arc<Requests>,
}

impl Pending {
    /// Build options whose hooks announce every event of the log and run the turns plugins
    /// queue while the session is idle (a schedule firing), and whose approver and asker put
    /// their requests to the session's clients through `requests`.
    pub(crate) fn new(requests: Arc<Requests>) -> (Pending, BuildOptions) {
        Self::announcing(requests, broadcast::channel(NOTICES).0)
    }

    /// [`Pending::new`] for an agent rebuilt over `old`'s session: the same requests, and
    /// its events announced on `old`'s channel, which its streams listen to.
    pub(crate) fn following(old: &Live) -> (Pending, BuildOptions) {
        Self::announcing(old.requests.clone(), old.events.clone())
    }

    fn announcing(
        requests: Arc<Requests>,
        events: broadcast::Sender<u64>,
    ) -> (Pending, BuildOptions) {
        let live: Arc<OnceLock<Weak<Live>>> = Arc::new(OnceLock::new());
        let mut options = BuildOptions {
            approver: Some(Arc::new(ServeApprover::new(requests.clone()))),
            asker: Some(Arc::new(ServeAsker::new(requests.clone()))),
            ..BuildOptions::default()
        };
        let tx = events.clone();
        options
            .agent_hooks
            .session_event
            .push(Arc::new(move |ev: &SessionEvent| {
                let _ = tx.send(ev.seq.0);
            }));
        let woken = live.clone();
        let rt = tokio::runtime::Handle::try_current().ok();
        options.agent_hooks.inbox_inserted.push(Arc::new(
            move |m: &keel_agent::seams::InboxInserted| {
                if m.mode != InboxMode::Followup || m.message.source.is_user() {
                    return;
                }
                if let (Some(live), Some(rt)) = (woken.get().and_then(Weak::upgrade), &rt) {
                    let _guard = rt.enter();
                    run_turns(live);
                }
            },
        ));
        (
            Pending {
                events,
                live,
                requests,
            },
            options,
        )
    }

    /// The live session of `agent`, built with this pending's options.
    pub(crate) fn finish(self, agent: Agent, cwd: PathBuf) -> Arc<Live> {
        let live = Arc::new(Live {
            agent,
            cwd,
            running: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            cancel: Notify::new(),
            events: self.events,
            requests: self.requests,
            successor: OnceLock::new(),
            custom: OnceLock::new(),
        });
        let _ = self.live.set(Arc::downgrade(&live));
        live
    }
}

/// The live sessions, by id.
#[derive(Default)]
pub(crate) struct Hub {
    sessions: Mutex<HashMap<String, Arc<Live>>>,
    /// Held while a stored session is resumed, so that it is resumed once.
    pub(crate) opening: tokio::sync::Mutex<()>,
    /// The requests of sessions hosted before and closed since, by session id: a session
    /// resumed again keeps them, and an answer to one is refused as already resolved.
    retired: Mutex<HashMap<String, Arc<Requests>>>,
    /// Sessions being created: built (their log files exist) but not hosted yet.
    creating: AtomicUsize,
    /// Announced whenever a creation ends.
    created: Notify,
}

/// A session's creation under way ([`Hub::creation`]), until dropped.
pub(crate) struct Creation<'h>(&'h Hub);

impl Drop for Creation<'_> {
    fn drop(&mut self) {
        self.0.creating.fetch_sub(1, Ordering::AcqRel);
        self.0.created.notify_waiters();
    }
}

impl Hub {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Live>>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The requests of session `id` when this server hosted it before (closed since).
    pub(crate) fn retired(&self, id: &str) -> Option<Arc<Requests>> {
        self.retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
    }

    /// The live session `id`.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<Live>> {
        self.table().get(id).cloned()
    }

    /// A session's creation starts: until the returned value is dropped (after the session is
    /// hosted, or its creation failed), [`Hub::get_settled`] waits for it.
    pub(crate) fn creation(&self) -> Creation<'_> {
        self.creating.fetch_add(1, Ordering::AcqRel);
        Creation(self)
    }

    /// [`Hub::get`], once the creations under way have ended: a session being created has its
    /// log file an instant before it is hosted, and must not be taken for a stored one then
    /// (its event stream would end after what is stored). Waits 10 s at most.
    pub(crate) async fn get_settled(&self, id: &str) -> Option<Arc<Live>> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let created = self.created.notified();
            tokio::pin!(created);
            // Registered before the checks: a creation that ends after them wakes us.
            created.as_mut().enable();
            if let Some(live) = self.get(id) {
                return Some(live);
            }
            if self.creating.load(Ordering::Acquire) == 0 {
                return None;
            }
            if tokio::time::timeout_at(deadline, created).await.is_err() {
                return self.get(id);
            }
        }
    }

    /// Host `live`.
    pub(crate) fn insert(&self, live: Arc<Live>) {
        let id = live.agent.session_id().as_str().to_owned();
        self.table().insert(id, live);
    }

    /// Stop hosting `id`: its running turn cancelled and awaited (up to `grace`), its jobs
    /// stopped. The session stays in the store. Whether it was hosted.
    pub(crate) async fn close(&self, id: &str, grace: Duration) -> bool {
        let Some(live) = self.table().remove(id) else {
            return false;
        };
        live.requests
            .resolve_all(requests::BY_CLOSE, "the session was closed");
        self.retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_owned(), live.requests.clone());
        cancel(&live);
        let deadline = tokio::time::Instant::now() + grace;
        while live.running.load(Ordering::Acquire) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Its streams end after what its log holds (a client follows it again when a
        // message resumes it under a new agent).
        live.closed.store(true, Ordering::Release);
        let _ = live.events.send(0);
        live.agent.kill_jobs();
        // One writer per session: the log is let go of now, so that another keel process may
        // open the session at once, though a client's stream may hold this agent a while.
        if !live.running.load(Ordering::Acquire) {
            let held = live.clone();
            // A write that failed was the turn's to report; the log stays as far as it is written.
            let _ = tokio::task::spawn_blocking(move || held.agent.log().release()).await;
        }
        // The last holder drops the agent, which may wait for its log's writer.
        drop(tokio::task::spawn_blocking(move || drop(live)));
        true
    }

    /// Stop hosting `id` without closing it: its agent is about to be rebuilt over the same
    /// session ([`Hub::replace`]). The live session it was.
    pub(crate) fn take(&self, id: &str) -> Option<Arc<Live>> {
        self.table().remove(id)
    }

    /// Host `new` in `old`'s place: `old`'s event streams follow `new` from now on.
    pub(crate) fn replace(&self, old: &Live, new: Arc<Live>) {
        let _ = old.successor.set(new.clone());
        self.insert(new);
        // Wakes the streams waiting on the channel the two share, so that they move over.
        let _ = old.events.send(0);
    }

    /// Every live session.
    pub(crate) fn all(&self) -> Vec<Arc<Live>> {
        self.table().values().cloned().collect()
    }

    /// Cancel every running turn and wait up to `grace` for them to end.
    pub(crate) async fn shutdown(&self, grace: Duration) {
        let all = self.all();
        for live in &all {
            live.requests
                .resolve_all(requests::BY_CLOSE, "the server stopped");
            cancel(live);
        }
        let deadline = tokio::time::Instant::now() + grace;
        while all.iter().any(|l| l.running.load(Ordering::Acquire))
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for live in &all {
            live.agent.kill_jobs();
        }
    }
}

/// Cancel `live`'s running turn, its open requests resolved as nobody's. Whether one was
/// running.
pub(crate) fn cancel(live: &Live) -> bool {
    let running = live.running.load(Ordering::Acquire);
    if running {
        live.cancel.notify_one();
    }
    // After the notice: the turn sees its cancel before it goes on from a refused call.
    live.requests
        .resolve_all(requests::BY_CANCEL, "the turn was cancelled");
    running
}

/// A session kept from running turns while something changes it between turns (a rewind,
/// a mode or a model switch): messages sent meanwhile are queued, and run once it is let go.
pub(crate) struct Hold(Arc<Live>);

impl Hold {
    /// Hold `live`, unless a turn runs (or is about to).
    pub(crate) fn take(live: &Arc<Live>) -> Option<Hold> {
        if live.running.swap(true, Ordering::AcqRel) {
            return None;
        }
        if live.agent.is_busy() {
            live.running.store(false, Ordering::Release);
            return None;
        }
        Some(Hold(live.clone()))
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.0.running.store(false, Ordering::Release);
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        // A session rebuilt on another agent runs its turns there, never on the old one: a
        // message queued on the old agent while it was held is in the log, so the new agent
        // (resumed from it) has it in its inbox.
        let live = match self.0.successor.get() {
            Some(next) => next.clone(),
            None => self.0.clone(),
        };
        if live.agent.has_pending_turn() {
            run_turns(live);
        }
    }
}

/// Run `live`'s queued turns on a blocking thread unless a runner already does. Must be
/// called within the server's runtime.
pub(crate) fn run_turns(live: Arc<Live>) {
    if live.running.swap(true, Ordering::AcqRel) {
        return;
    }
    // A cancel meant for a run that ended before it looked must not cancel this one.
    let _ = futures::FutureExt::now_or_never(live.cancel.notified());
    let rt = tokio::runtime::Handle::current();
    // The turn's future holds the session log: it runs on a blocking thread of its own.
    drop(tokio::task::spawn_blocking(move || {
        loop {
            // Boxed: the turn's future (tens of KiB) lives on the heap for the turn, not on the
            // runner thread's stack, whose touched pages would stay with the thread.
            let _ = rt.block_on(Box::pin(run_cancellable(&live)));
            live.running.store(false, Ordering::Release);
            // A message queued as the runner stopped is run here, not left waiting.
            if !live.agent.has_pending_turn() || live.running.swap(true, Ordering::AcqRel) {
                break;
            }
        }
    }));
}

/// Run the session's queued turns until idle, cancelling when asked.
async fn run_cancellable(
    live: &Live,
) -> Result<Option<keel_agent::TurnOutcome>, keel_agent::AgentError> {
    live.agent
        .run_until_idle_cancellable(live.cancel.notified(), RECANCEL_EVERY)
        .await
}
