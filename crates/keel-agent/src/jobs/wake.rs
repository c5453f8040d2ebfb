//! Wake-ups: how a finished job reaches its owner, the wake budget, and
//! [`Agent::run_until_idle`].
//!
//! A notice joins a busy owner's running turn ([`InboxMode::Inject`]: the next step sees it).
//! An idle owner is woken with a follow-up turn ([`InboxMode::Followup`]) unless it has already
//! been woken [`super::JobsConfig::max_wakeups`] times in a row with no human message in
//! between; then the notice is injected without waking and waits for the next human turn.
//!
//! The budget is read from the owner's log, not kept beside it: a [`WakeLedger`] scans
//! `agent/inbox/spliced` events incrementally, counting follow-ups inserted by `keel/jobs` and
//! resetting at every inserted message whose source is the human
//! ([`MessageSource::user`](keel_protocol::MessageSource::user)). A resumed session therefore
//! keeps its count.

use super::notice::JOBS_PLUGIN;
use super::service::{JobService, OwnerView};
use crate::agent::Agent;
use crate::error::AgentError;
use crate::inbox::InboxMode;
use crate::seams::InboxInserted;
use crate::turn::TurnOutcome;
use keel_protocol::{EventBody, InboxTarget, Message, Seq};
use keel_tools::JobControl;
use std::sync::{Arc, Mutex};

/// Consecutive job wake-ups since the last human message, as read from an owner's log.
#[derive(Debug, Default)]
pub(crate) struct WakeLedger {
    scanned: u64,
    consecutive: u32,
}

impl WakeLedger {
    /// Read the events appended since the last call.
    fn catch_up(&mut self, agent: &Agent) {
        let log = agent.log();
        let session = log.session();
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
                    && m.source.plugin_id() == Some(JOBS_PLUGIN)
                {
                    self.consecutive += 1;
                }
            }
        }
        self.scanned = end;
    }
}

/// Hand `notice` to `agent`: inject while a turn runs, wake with a follow-up while idle and the
/// budget allows, inject otherwise. Returns whether it woke the agent. A log failure is
/// dropped here: the log refuses every later append too, and the agent's own loop reports it.
pub(crate) fn deliver(
    agent: &Agent,
    ledger: &Mutex<WakeLedger>,
    max_wakeups: u32,
    notice: Message,
) -> bool {
    let mut ledger = ledger.lock().unwrap_or_else(|p| p.into_inner());
    ledger.catch_up(agent);
    let (splice, mode) = {
        let mut state = agent.state();
        let mode = if !state.running && ledger.consecutive < max_wakeups {
            InboxMode::Followup
        } else {
            InboxMode::Inject
        };
        (state.inbox.insert(mode, notice.clone()).0, mode)
    };
    if agent
        .push(EventBody::InboxSpliced(Box::new(splice)))
        .is_err()
    {
        return false;
    }
    agent.hooks().inbox_inserted.notify(&InboxInserted {
        mode,
        message: notice,
    });
    mode == InboxMode::Followup
}

impl Agent {
    /// The job service this agent owns jobs in, if one is attached ([`JobService::attach`]).
    pub fn jobs(&self) -> Option<&Arc<JobService>> {
        self.inner.jobs.get()
    }

    /// Job control scoped to this agent, for its tools.
    pub(crate) fn job_control(&self) -> Option<Arc<dyn JobControl>> {
        let service = self.jobs()?.clone();
        Some(Arc::new(OwnerView {
            service,
            owner: self.session_id(),
        }))
    }

    /// Kill this agent's running jobs (a front end about to exit). Returns their ids.
    pub fn kill_jobs(&self) -> Vec<String> {
        self.jobs()
            .map(|s| s.kill_owned(&self.session_id()))
            .unwrap_or_default()
    }

    /// Run pending turns, then, while this agent's background jobs are running and may still
    /// wake it, wait for them: each finished job's notice wakes the agent with a follow-up turn
    /// (see the module docs for the budget). Returns the last turn's outcome (`None` when no
    /// turn ran). Without a job service this is [`Agent::run_pending`]. Jobs still running when
    /// it returns (the budget is spent) keep running; see [`Agent::kill_jobs`].
    pub async fn run_until_idle(&self) -> Result<Option<TurnOutcome>, AgentError> {
        let mut last = None;
        loop {
            if let Some(outcome) = self.run_pending().await? {
                last = Some(outcome);
            }
            let Some(service) = self.jobs() else {
                return Ok(last);
            };
            let owner = self.session_id();
            let Some((signal, ledger)) = service.owner_parts(&owner) else {
                return Ok(last);
            };
            if self.has_pending_turn() {
                continue;
            }
            let may_wake = {
                let mut ledger = ledger.lock().unwrap_or_else(|p| p.into_inner());
                ledger.catch_up(self);
                ledger.consecutive < service.config().max_wakeups
            };
            if service.running(&owner) == 0 || !may_wake {
                return Ok(last);
            }
            // Every settlement of an owned job signals (`notify_one` keeps a permit, so one
            // that lands between the checks above and this wait is not lost).
            signal.notified().await;
        }
    }
}
