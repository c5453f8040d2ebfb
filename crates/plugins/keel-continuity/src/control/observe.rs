//! The observer (`session/event` of the top agent): activation by the human's words
//! (`on-request`), fencing each human message that arrives once a contract is open, and
//! revoking an unused authorization when the history is replaced (compaction).

use super::{
    ACTIVATION_PHRASE, CONTROL_EVENT, ControlError, ControlMode, Controller, Pending, State,
};
use keel_protocol::{EventBody, SessionEvent, SurfaceOp};
use serde_json::json;

impl Controller {
    /// `session/event` (the top agent's): activation by the human's words, fencing each human
    /// message that arrives once a contract is open, revoking an unused authorization when the
    /// history is replaced (compaction).
    pub(crate) fn observe(&self, ev: &SessionEvent) {
        // Only human messages and replacements matter; anything else (this controller's own
        // records, logged while its lock is held) returns before locking.
        let human = matches!(&ev.body, EventBody::UserMessage(m) if m.source.is_user());
        if !human && !matches!(ev.surface_op, Some(SurfaceOp::Replace { .. })) {
            return;
        }
        let mut events = Pending::new();
        {
            let mut st = self.state();
            if !st.bound {
                return;
            }
            match &ev.body {
                EventBody::UserMessage(m) if m.source.is_user() => {
                    let mut activated_now = false;
                    if !st.active
                        && self.mode == ControlMode::OnRequest
                        && m.text().to_lowercase().contains(ACTIVATION_PHRASE)
                    {
                        st.active = true;
                        activated_now = true;
                    }
                    if st.active && !st.activation_logged {
                        st.activation_logged = true;
                        let reason = if activated_now { "task text" } else { "config" };
                        events.push((
                            CONTROL_EVENT,
                            json!({"active": true, "reason": reason, "inputSeq": ev.seq.0}),
                        ));
                    }
                    if st.active && !activated_now {
                        match self.fence(&mut st, ev.seq.0) {
                            Ok(()) => {}
                            Err(e) => {
                                st.failure.get_or_insert(format!(
                                    "continuity could not fence human message seq {}: {e}",
                                    ev.seq.0
                                ));
                            }
                        }
                    }
                }
                _ if st.active && matches!(ev.surface_op, Some(SurfaceOp::Replace { .. })) => {
                    match self.revoke(
                        &mut st,
                        &format!("the history was replaced at seq {} (compaction)", ev.seq.0),
                    ) {
                        Ok(()) => {}
                        Err(e) => {
                            st.failure.get_or_insert(e.to_string());
                        }
                    }
                }
                _ => {}
            }
        }
        // An observer cannot fail; a log failure shows up on the next append.
        let _ = self.log(events);
    }

    fn fence(&self, st: &mut State, seq: u64) -> Result<(), ControlError> {
        let Some(mut c) = self.load(st)? else {
            return Ok(());
        };
        if seq < c.opened_at_seq || c.fence.pending_input_seqs.contains(&seq) {
            return Ok(());
        }
        c.fence.pending_input_seqs.push(seq);
        c.fence.pending_input_seqs.sort_unstable();
        self.commit(st, &c, "fence", json!({"inputSeq": seq}))
    }

    fn revoke(&self, st: &mut State, reason: &str) -> Result<(), ControlError> {
        let Some(mut c) = self.load(st)? else {
            return Ok(());
        };
        let Some(a) = c
            .authorization
            .as_mut()
            .filter(|a| !a.used && a.revoked.is_none())
        else {
            return Ok(());
        };
        a.revoked = Some(reason.to_owned());
        let id = a.id.clone();
        self.commit(
            st,
            &c,
            "revoke",
            json!({"authorization": id, "reason": reason}),
        )
    }
}
