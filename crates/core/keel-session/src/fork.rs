//! Forking: a child session that inherits a prefix of its parent's log.
//!
//! The child's header names the parent (`parentSession`) and the inherited event count
//! (`seedLength`); its log is the parent's events `0..boundary` (same seqs) followed by
//! `session/end-seed` at seq `boundary`. A boundary inside an open turn is refused.

use crate::error::ForkError;
use crate::record::Record;
use crate::session::{Session, now_ms};
use keel_protocol::{EventBody, Seq, SessionEndSeed, SessionEvent, SessionHeader, SessionId};

impl Session {
    /// A child session seeded with the events before `boundary` (`boundary` = number of events
    /// inherited), with id `child_id`, origin `"fork"`, and a `session/end-seed` event.
    pub fn fork(&self, boundary: Seq, child_id: SessionId) -> Result<Session, ForkError> {
        if boundary.0 > self.len() {
            return Err(ForkError::BeyondEnd {
                boundary,
                len: self.len(),
            });
        }
        let parent = self.header();
        let header = SessionHeader {
            record_type: "session".to_owned(),
            version: parent.version,
            id: child_id,
            created_at: now_ms(),
            cwd: parent.cwd.clone(),
            parent_session: Some(parent.id.clone()),
            seed_length: Some(boundary.0),
            origin: Some("fork".to_owned()),
            delegation_depth: parent.delegation_depth,
        };
        let mut child = Session::new(header);
        'copy: for rec in self.records().records() {
            match rec {
                Record::Event(e) => {
                    if e.seq >= boundary {
                        break 'copy;
                    }
                    child.append_parsed((**e).clone())?;
                }
                Record::Run(r) => {
                    for i in 0..r.len() {
                        let d = r.member(i);
                        if d.seq >= boundary.0 {
                            break 'copy;
                        }
                        child.append_delta(&d)?;
                    }
                }
            }
        }
        if let Some(turn) = child.turn_state().open_turn {
            return Err(ForkError::InsideOpenTurn { boundary, turn });
        }
        let end_seed = EventBody::SessionEndSeed(Box::new(SessionEndSeed {
            parent_session: self.header().id.clone(),
            seed_length: boundary.0,
        }));
        child.append(SessionEvent::new(boundary, now_ms(), end_seed))?;
        Ok(child)
    }
}
