//! The agent's inbox: input waiting for a turn or a step.
//!
//! Three ways in: [`InboxMode::Followup`] queues a message as its own turn and wakes the agent;
//! [`InboxMode::Steer`] joins the next step and wakes; [`InboxMode::Inject`] joins the next step
//! without waking. Every change is described by an [`InboxSpliced`] payload that the agent logs as
//! `agent/inbox/spliced`, so the inbox can be rebuilt from the log.

use keel_protocol::{InboxSpliced, InboxTarget, Message};
use std::collections::VecDeque;

/// How a message enters the inbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboxMode {
    /// Its own turn; wakes an idle agent.
    Followup,
    /// Joins the next step; wakes an idle agent.
    Steer,
    /// Joins the next step; does not wake.
    Inject,
}

/// Pending input.
#[derive(Debug, Default, Clone)]
pub struct Inbox {
    next_turn: VecDeque<Message>,
    next_step: VecDeque<Message>,
}

impl Inbox {
    /// Add a message; returns the splice to log and whether the agent should wake.
    pub fn insert(&mut self, mode: InboxMode, message: Message) -> (InboxSpliced, bool) {
        let (queue, target, wake) = match mode {
            InboxMode::Followup => (&mut self.next_turn, InboxTarget::NextTurn, true),
            InboxMode::Steer => (&mut self.next_step, InboxTarget::NextStep, true),
            InboxMode::Inject => (&mut self.next_step, InboxTarget::NextStep, false),
        };
        let start = queue.len() as u32;
        queue.push_back(message.clone());
        (
            InboxSpliced {
                target,
                start,
                removed_count: 0,
                inserted: vec![message],
            },
            wake,
        )
    }

    /// Claim the next turn's input (one follow-up message).
    pub fn claim_turn(&mut self) -> Option<(Message, InboxSpliced)> {
        let message = self.next_turn.pop_front()?;
        let splice = InboxSpliced {
            target: InboxTarget::NextTurn,
            start: 0,
            removed_count: 1,
            inserted: Vec::new(),
        };
        Some((message, splice))
    }

    /// Claim everything waiting for the next step.
    pub fn claim_step(&mut self) -> Option<(Vec<Message>, InboxSpliced)> {
        if self.next_step.is_empty() {
            return None;
        }
        let messages: Vec<Message> = self.next_step.drain(..).collect();
        let splice = InboxSpliced {
            target: InboxTarget::NextStep,
            start: 0,
            removed_count: messages.len() as u32,
            inserted: Vec::new(),
        };
        Some((messages, splice))
    }

    /// True when a turn is waiting.
    pub fn has_turn(&self) -> bool {
        !self.next_turn.is_empty()
    }

    /// True when step input is waiting.
    pub fn has_step_input(&self) -> bool {
        !self.next_step.is_empty()
    }

    /// Replay a logged splice (used when rebuilding the inbox from a session log).
    pub fn replay(&mut self, splice: &InboxSpliced) {
        let queue = match splice.target {
            InboxTarget::NextTurn => &mut self.next_turn,
            InboxTarget::NextStep => &mut self.next_step,
        };
        let start = (splice.start as usize).min(queue.len());
        let end = (start + splice.removed_count as usize).min(queue.len());
        queue.drain(start..end);
        for (i, m) in splice.inserted.iter().enumerate() {
            queue.insert(start + i, m.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::MessageSource;

    fn msg(t: &str) -> Message {
        Message::user_text(t, MessageSource::user(), t)
    }

    #[test]
    fn modes_route_and_wake_and_replay_rebuilds() {
        let mut inbox = Inbox::default();
        let mut log = Vec::new();
        let (s, wake) = inbox.insert(InboxMode::Followup, msg("a"));
        assert!(wake);
        log.push(s);
        let (s, wake) = inbox.insert(InboxMode::Inject, msg("b"));
        assert!(!wake);
        log.push(s);
        let (s, wake) = inbox.insert(InboxMode::Steer, msg("c"));
        assert!(wake);
        assert_eq!(s.start, 1);
        log.push(s);

        let mut rebuilt = Inbox::default();
        for s in &log {
            rebuilt.replay(s);
        }
        let (m, s) = inbox.claim_turn().unwrap();
        assert_eq!(m.text(), "a");
        rebuilt.replay(&s);
        let (ms, s) = inbox.claim_step().unwrap();
        assert_eq!(
            ms.iter().map(|m| m.text()).collect::<Vec<_>>(),
            vec!["b", "c"]
        );
        rebuilt.replay(&s);
        assert!(!inbox.has_turn() && !inbox.has_step_input());
        assert!(!rebuilt.has_turn() && !rebuilt.has_step_input());
        assert!(inbox.claim_step().is_none());
    }
}
