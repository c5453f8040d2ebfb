//! The background-work seam: how a job service (a plugin, `keel-jobs`) plugs into the loop
//! without the core knowing it.
//!
//! The core owns the loop's entry [`crate::Agent::run_until_idle`]: run pending turns, then,
//! while a [`Background`] service says work of this agent may still wake it, wait for that
//! work and run the turns it queues. A job service attaches itself to an agent once it is
//! built ([`crate::AgentHandle::attach_background`]) and delivers its notices through
//! [`crate::AgentHandle::deliver`], which decides under the loop's own lock whether the notice
//! joins the running turn or wakes the agent. This module only declares the seam: it knows
//! no agent, and the agent's side of it is in [`crate::agent`] and [`crate::turn`].
//!
//! ```text
//! front end ─► Agent::run_until_idle ─► run_pending ─► Background::idle(session id)
//!    ▲                                                  │ Woken: a notice was queued
//!    └──────────────────────────────────────────────────┘ Settled: nothing more can wake it
//! job service ─► AgentHandle::deliver(notice, choose mode by TurnActivity)
//! ```

use futures::future::BoxFuture;
use keel_protocol::{EventBody, InboxTarget, Seq, SessionId};
use keel_session::Session;
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

/// A service that runs background work owned by agents (the `jobs` plugin). Its owners are
/// named by session id: the service keeps what it needs of each (a [`crate::WeakHandle`] to
/// deliver notices) when the agent attaches ([`crate::AgentHandle::attach_background`]).
pub trait Background: Send + Sync {
    /// Job control scoped to `owner`, handed to its tools; `None` when `owner` cannot own jobs.
    fn control(&self, owner: &SessionId) -> Option<Arc<dyn JobControl>>;

    /// Wait until work owned by `owner` settles, or say at once that none can wake it.
    fn idle<'a>(&'a self, owner: &'a SessionId) -> BoxFuture<'a, IdleWait>;

    /// Stop every running job of `owner` (its front end is exiting). Returns their ids.
    fn stop_owned(&self, owner: &SessionId) -> Vec<String>;
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

    /// Read the events appended to `session` since the last call (the owner's session: read
    /// it with [`crate::AgentHandle::with_session`]).
    pub fn catch_up(&mut self, session: &Session) {
        let end = session.len();
        for seq in self.scanned..end {
            let Some(ev) = session.event(Seq(seq)) else {
                continue;
            };
            let EventBody::InboxSpliced(splice) = &ev.body else {
                continue;
            };
            for m in &splice.inserted {
                if m.source.is_user() {
                    self.consecutive = 0;
                } else if splice.target == InboxTarget::NextTurn
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
