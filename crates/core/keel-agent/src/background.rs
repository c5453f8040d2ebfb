//! The background-work seam: how a job service (a plugin, `keel-jobs`) plugs into the loop
//! without the core knowing it.
//!
//! The core owns the loop's entry [`Agent::run_until_idle`]: run pending turns, then, while a
//! [`Background`] service says work of this agent may still wake it, wait for that work and run
//! the turns it queues. A job service attaches itself to an agent once it is built
//! ([`Agent::attach_background`]) and delivers its notices through [`Agent::deliver`], which
//! decides under the loop's own lock whether the notice joins the running turn or wakes the
//! agent.
//!
//! ```text
//! front end ─► Agent::run_until_idle ─► run_pending ─► Background::idle(agent)
//!    ▲                                                  │ Woken: a notice was queued
//!    └──────────────────────────────────────────────────┘ Settled: nothing more can wake it
//! job service ─► Agent::deliver(notice, choose mode by TurnActivity)
//! ```

use crate::agent::Agent;
use crate::error::AgentError;
use crate::inbox::InboxMode;
use crate::seams::InboxInserted;
use crate::turn::TurnOutcome;
use futures::future::BoxFuture;
use keel_protocol::{EventBody, Message};
use keel_tools::JobControl;
use std::sync::Arc;

/// What [`Background::idle`] found after waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleWait {
    /// Some work settled; the agent may have a turn to run now.
    Settled,
    /// Nothing owned by the agent can wake it any more (none running, or its wake budget is
    /// spent): the loop returns.
    Done,
}

/// Whether the agent is in a turn when a notice arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnActivity {
    /// A turn is running: its next step can see the notice.
    Running,
    /// The agent is idle: only a new turn can show the notice.
    Idle,
}

/// A service that runs background work owned by agents (the `jobs` plugin).
pub trait Background: std::any::Any + Send + Sync {
    /// Job control scoped to `owner`, handed to its tools; `None` when `owner` cannot own jobs.
    fn control(&self, owner: &Agent) -> Option<Arc<dyn JobControl>>;

    /// Wait until work owned by `owner` settles, or say at once that none can wake it.
    fn idle<'a>(&'a self, owner: &'a Agent) -> BoxFuture<'a, IdleWait>;

    /// Stop every running job of `owner` (its front end is exiting). Returns their ids.
    fn stop_owned(&self, owner: &Agent) -> Vec<String>;
}

impl Agent {
    /// Attach the background service whose jobs this agent owns. The first attachment wins;
    /// returns false when one was attached before.
    pub fn attach_background(&self, service: Arc<dyn Background>) -> bool {
        self.inner.background.set(service).is_ok()
    }

    /// The attached background service, if any.
    pub fn background(&self) -> Option<&Arc<dyn Background>> {
        self.inner.background.get()
    }

    /// The attached background service as its concrete type `B` (a front end's job panel).
    pub fn background_as<B: Background>(&self) -> Option<&B> {
        let service: &dyn std::any::Any = self.background()?.as_ref();
        service.downcast_ref::<B>()
    }

    /// Job control scoped to this agent, for its tools.
    pub(crate) fn job_control(&self) -> Option<Arc<dyn JobControl>> {
        self.background()?.control(self)
    }

    /// Stop this agent's running jobs (a front end about to exit). Returns their ids.
    pub fn kill_jobs(&self) -> Vec<String> {
        self.background()
            .map(|s| s.stop_owned(self))
            .unwrap_or_default()
    }

    /// Queue a message from outside the loop (a job's notice). `choose` picks the inbox mode
    /// from whether a turn is running, atomically with the insertion. Returns the mode used.
    pub fn deliver(
        &self,
        message: Message,
        choose: impl FnOnce(TurnActivity) -> InboxMode,
    ) -> Result<InboxMode, AgentError> {
        let (splice, mode) = {
            let mut state = self.state();
            let activity = if state.running {
                TurnActivity::Running
            } else {
                TurnActivity::Idle
            };
            let mode = choose(activity);
            (state.inbox.insert(mode, message.clone()).0, mode)
        };
        self.push(EventBody::InboxSpliced(Box::new(splice)))?;
        self.hooks()
            .inbox_inserted
            .notify(&InboxInserted { mode, message });
        if mode == InboxMode::Followup {
            self.inner.woken.notify_one();
        }
        Ok(mode)
    }

    /// Run pending turns, then, while background work of this agent may still wake it, wait
    /// for it: each notice that wakes the agent queues a follow-up turn, which runs here — a
    /// follow-up queued by any [`Agent::deliver`] (a delegation's report) wakes the wait too.
    /// Returns the last turn's outcome (`None` when no turn ran). Without a background service
    /// this is [`Agent::run_pending`]. Work still running when it returns keeps running; see
    /// [`Agent::kill_jobs`].
    pub async fn run_until_idle(&self) -> Result<Option<TurnOutcome>, AgentError> {
        let mut last = None;
        loop {
            if let Some(outcome) = self.run_pending().await? {
                last = Some(outcome);
            }
            let Some(service) = self.background().cloned() else {
                return Ok(last);
            };
            if self.has_pending_turn() {
                continue;
            }
            tokio::select! {
                wait = service.idle(self) => {
                    if wait == IdleWait::Done && !self.has_pending_turn() {
                        return Ok(last);
                    }
                }
                () = self.inner.woken.notified() => {}
            }
        }
    }
}

/// Consecutive wake-ups of an idle agent by one background source (a plugin's follow-up turns),
/// read from the agent's log: `agent/inbox/spliced` events are scanned incrementally, counting
/// follow-ups inserted by messages whose source is `source` and resetting at every inserted
/// human message. A resumed session therefore keeps its count. Each wake budget (the jobs',
/// delegation's) keeps its own ledger.
#[derive(Debug)]
pub struct WakeLedger {
    source: &'static str,
    scanned: u64,
    consecutive: u32,
}

impl WakeLedger {
    /// A ledger of the follow-ups inserted by `source` (a plugin's message source,
    /// `PluginId::source`).
    pub fn new(source: &'static str) -> WakeLedger {
        WakeLedger {
            source,
            scanned: 0,
            consecutive: 0,
        }
    }

    /// Read the events appended to `agent`'s log since the last call.
    pub fn catch_up(&mut self, agent: &crate::Agent) {
        let log = agent.log();
        let session = log.session();
        let end = session.len();
        for seq in self.scanned..end {
            let Some(ev) = session.event(keel_protocol::Seq(seq)) else {
                continue;
            };
            let keel_protocol::EventBody::InboxSpliced(splice) = &ev.body else {
                continue;
            };
            for m in &splice.inserted {
                if m.source.is_user() {
                    self.consecutive = 0;
                } else if splice.target == keel_protocol::InboxTarget::NextTurn
                    && m.source.plugin_id() == Some(self.source)
                {
                    self.consecutive += 1;
                }
            }
        }
        self.scanned = end;
    }

    /// Wake-ups in a row since the last human message.
    pub fn consecutive(&self) -> u32 {
        self.consecutive
    }
}
