//! A session bundled with its writer: every accepted event is validated in memory, then queued
//! for durable writing, so the file never holds an event the session refused.

use crate::error::{AppendError, RepairError};
use crate::repair::RepairReport;
use crate::session::Session;
use crate::store::{
    FlushTicket, LoadError, LoadReport, SessionWriter, Store, StoreError, WriterOptions,
};
use crate::surface::DerivedMessage;
use keel_protocol::{EventBody, Seq, SessionEvent, SurfaceOp};
use std::path::Path;

/// Why creating or resuming a [`PersistentSession`] failed.
#[derive(Debug, thiserror::Error)]
pub enum PersistentError {
    /// Returned by `resume` when the file cannot be loaded; see [`LoadError`].
    #[error(transparent)]
    Load(#[from] LoadError),
    /// Returned when the file cannot be created, opened or written; see [`StoreError`].
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Returned by `resume` when crash repair could not append its closers (a bug).
    #[error(transparent)]
    Repair(#[from] RepairError),
}

/// A [`Session`] whose appended events are written by a [`SessionWriter`].
#[derive(Debug)]
pub struct PersistentSession {
    session: Session,
    writer: SessionWriter,
}

impl PersistentSession {
    /// Publish `session` (header and existing events) under `cwd`'s project and keep appending.
    pub fn create(
        store: &Store,
        cwd: &Path,
        session: Session,
        options: WriterOptions,
    ) -> Result<Self, StoreError> {
        let writer = store.create(cwd, &session, options)?;
        Ok(PersistentSession { session, writer })
    }

    /// Open the file at `path` to append to it as it is: a torn tail is cut, nothing is
    /// repaired (what is open stays open, for events that continue it: a copy of a session
    /// being written elsewhere). Returns the session and what the loader found.
    pub fn reopen(
        path: &Path,
        options: WriterOptions,
    ) -> Result<(Self, LoadReport), PersistentError> {
        // Locked before loading: no other writer appends between the load and the open.
        let lock = Store::lock(path)?;
        let loaded = Store::load(path)?;
        let writer = Store::open_locked(lock, path, &loaded.session, &loaded.report, options)?;
        Ok((
            PersistentSession {
                session: loaded.session,
                writer,
            },
            loaded.report,
        ))
    }

    /// Cold resume: load the file at `path`, cut a torn tail, append crash-repair closers and
    /// flush them. Returns the session, what the loader found and what repair closed.
    pub fn resume(
        path: &Path,
        options: WriterOptions,
    ) -> Result<(Self, LoadReport, RepairReport), PersistentError> {
        let (mut this, load) = Self::reopen(path, options)?;
        let report = this.session.repair()?;
        for &seq in &report.appended {
            if let Some(ev) = this.session.event(seq) {
                this.writer.enqueue(&ev);
            }
        }
        this.writer.flush()?;
        Ok((this, load, report))
    }

    /// The session (read-only: appends go through this type so they reach the file).
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The writer.
    pub fn writer(&self) -> &SessionWriter {
        &self.writer
    }

    /// Validate and append `event`, then queue it for writing.
    pub fn append(&mut self, event: SessionEvent) -> Result<(), AppendError> {
        let copy = event.clone();
        self.session.append(event)?;
        self.writer.enqueue_owned(copy);
        Ok(())
    }

    /// [`Session::push`], then queue the event.
    pub fn push(&mut self, body: EventBody) -> Result<Seq, AppendError> {
        let ev = self.session.stamp(body, None);
        let seq = ev.seq;
        self.append(ev)?;
        Ok(seq)
    }

    /// [`Session::push_surface`], then queue the event.
    pub fn push_surface(
        &mut self,
        body: EventBody,
        op: SurfaceOp,
        sources: Vec<Seq>,
    ) -> Result<Seq, AppendError> {
        let ev = self.session.stamp(body, Some((op, sources)));
        let seq = ev.seq;
        self.append(ev)?;
        Ok(seq)
    }

    /// [`Session::derive_messages`].
    pub fn derive_messages(&mut self) -> &[DerivedMessage] {
        self.session.derive_messages()
    }

    /// Block until every queued event is durable.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.writer.flush()
    }

    /// A ticket to await durability of every queued event (see [`FlushTicket`]).
    pub fn flush_ticket(&self) -> FlushTicket {
        self.writer.flush_ticket()
    }

    /// Flush, stop the writer and release the session's lock, keeping the session in memory:
    /// later appends are refused by the writer ([`StoreError::WriterGone`]). For a front end
    /// about to open this session again in a new agent (see [`SessionWriter::release`]).
    pub fn release(&mut self) -> Result<(), StoreError> {
        self.writer.release()
    }

    /// Flush, stop the writer and hand back the session.
    pub fn close(self) -> Result<Session, StoreError> {
        self.writer.close()?;
        Ok(self.session)
    }
}
