//! One job's reports and who listens to them: the event bookkeeping of the job table
//! (`crate::table`) every provider that keeps its jobs in memory uses (keel, acp, in-process).
//!
//! ```text
//! push(event) ─► seq = count + 1 ─► kept ─► (event, listeners) ─► deliver, outside the lock
//! since(from_seq) ─► the events after it          (DelegationService::events)
//! watch(listener) ─► listening while live; the backlog handed back   (DelegationService::watch)
//! close() ─► no more listeners (the job is final)
//! ```

use crate::seam::{DelegationEvent, EventListener};

/// A job's events, in order (seq from 1), and its listeners until it is final.
#[derive(Default)]
pub(crate) struct EventLog {
    events: Vec<DelegationEvent>,
    listeners: Vec<EventListener>,
}

/// An event and the listeners it is for: handed over with [`Fired::deliver`] once the lock
/// that guards the log is released.
#[must_use]
pub(crate) struct Fired {
    event: DelegationEvent,
    listeners: Vec<EventListener>,
}

impl Fired {
    /// Hand the event to each listener.
    pub(crate) fn deliver(self) {
        for l in self.listeners {
            l(self.event.clone());
        }
    }
}

impl EventLog {
    /// Keep `event` as the next one (its `seq` is set here); it comes back with the listeners
    /// to hand it to.
    pub(crate) fn push(&mut self, mut event: DelegationEvent) -> Fired {
        event.seq = Some(self.events.len() as u64 + 1);
        self.events.push(event.clone());
        Fired {
            event,
            listeners: self.listeners.clone(),
        }
    }

    /// The events after `from_seq` (all when `None`).
    pub(crate) fn since(&self, from_seq: Option<u64>) -> Vec<DelegationEvent> {
        self.events
            .iter()
            .filter(|e| e.seq.unwrap_or(0) > from_seq.unwrap_or(0))
            .cloned()
            .collect()
    }

    /// `listener` gets each new event while the job is `live`; the events so far come back
    /// for it (to hand over outside the lock).
    pub(crate) fn watch(&mut self, listener: &EventListener, live: bool) -> Vec<DelegationEvent> {
        if live {
            self.listeners.push(listener.clone());
        }
        self.events.clone()
    }

    /// The job is final: nobody listens any more.
    pub(crate) fn close(&mut self) {
        self.listeners.clear();
    }
}
