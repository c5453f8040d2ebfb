//! Wake-ups: how a finished job reaches its owner and the wake budget (the loop that waits for
//! them, [`keel_agent::Agent::run_until_idle`], is the core's; it asks [`crate::JobService`] through the
//! background seam).
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

use keel_agent::AgentHandle;
use keel_agent::background::{TurnActivity, WakeLedger};
use keel_agent::inbox::InboxMode;
use keel_protocol::Message;
use keel_protocol::sync::Locked;
use std::sync::Mutex;

/// The jobs' wake ledger: follow-ups inserted by `keel/jobs`.
pub(crate) fn ledger() -> WakeLedger {
    WakeLedger::new(crate::ID.source())
}

/// Hand `notice` to `agent`: inject while a turn runs, wake with a follow-up while idle and the
/// budget allows, inject otherwise. Returns whether it woke the agent. A log failure is
/// dropped here: the log refuses every later append too, and the agent's own loop reports it.
pub(crate) fn deliver(
    agent: &AgentHandle,
    ledger: &Mutex<WakeLedger>,
    max_wakeups: u32,
    notice: Message,
) -> bool {
    let mut ledger = ledger.locked();
    agent.with_session(|s| ledger.catch_up(s));
    let mode = agent.deliver(notice, |activity| {
        if activity == TurnActivity::Idle && ledger.consecutive() < max_wakeups {
            InboxMode::Followup
        } else {
            InboxMode::Inject
        }
    });
    mode.is_ok_and(|m| m == InboxMode::Followup)
}
