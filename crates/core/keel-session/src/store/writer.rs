//! The write-behind session writer: a background thread that batches enqueued events for a
//! short window, writes each batch (one zstd frame per batch in compressed files) and fsyncs it.
//!
//! `enqueue` never blocks on I/O. `flush` (or `flush_ticket().wait()`) returns once everything
//! enqueued before it is durable. A write or fsync failure is sticky: it is returned by that flush
//! and by every later one, because the file's state is then unknown (reload to recover).
//!
//! From async code: `writer.flush_ticket().durable().await`, which the writer thread wakes
//! directly (no blocking-pool thread in between).

use super::encode::encode_batch;
use super::{Format, SessionLock, StoreError};
use futures::channel::oneshot;
use keel_protocol::SessionEvent;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Knobs of a [`SessionWriter`].
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// Write `session.jsonl.zst` (independent zstd frames, one per batch) instead of plain JSONL.
    pub format: Format,
    /// How long the writer waits for more events before writing a batch (default 3 ms).
    pub batch_window: Duration,
    /// zstd level for compressed files (default 3).
    pub zstd_level: i32,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            format: Format::Plain,
            batch_window: Duration::from_millis(3),
            zstd_level: 3,
        }
    }
}

impl WriterOptions {
    /// Default options writing compressed files.
    pub fn zstd() -> Self {
        WriterOptions {
            format: Format::Zstd,
            ..WriterOptions::default()
        }
    }
}

enum Msg {
    Event(SessionEvent),
    Flush(oneshot::Sender<Result<(), StoreError>>),
}

/// A pending flush: [`FlushTicket::wait`] blocks (and [`FlushTicket::durable`] resolves) once
/// everything enqueued before the ticket was taken is durable, or with the writer's error.
#[derive(Debug)]
pub struct FlushTicket {
    rx: Option<oneshot::Receiver<Result<(), StoreError>>>,
    err: Option<StoreError>,
    path: PathBuf,
}

impl FlushTicket {
    /// Block until durable. For threads that may block (not an async runtime's workers: await
    /// [`FlushTicket::durable`] there).
    pub fn wait(self) -> Result<(), StoreError> {
        futures::executor::block_on(self.durable())
    }

    /// Resolve once durable: the writer thread wakes the awaiting task itself.
    pub async fn durable(self) -> Result<(), StoreError> {
        if let Some(e) = self.err {
            return Err(e);
        }
        match self.rx {
            Some(rx) => rx
                .await
                .unwrap_or(Err(StoreError::WriterGone { path: self.path })),
            None => Ok(()),
        }
    }
}

/// Appends events to one session file from a background thread.
#[derive(Debug)]
pub struct SessionWriter {
    tx: Option<Sender<Msg>>,
    thread: Option<JoinHandle<()>>,
    sticky: Arc<Mutex<Option<StoreError>>>,
    path: PathBuf,
    /// The session's lock, released after the thread has written everything (drop order).
    lock: Option<SessionLock>,
}

struct Worker {
    file: File,
    path: PathBuf,
    options: WriterOptions,
    sticky: Arc<Mutex<Option<StoreError>>>,
}

impl SessionWriter {
    /// Start a writer appending to `file`, already open for append at `path` and positioned
    /// after a complete record (normally obtained through [`super::Store`], which also locks
    /// the session: a writer made here holds no lock).
    pub fn from_file(
        file: File,
        path: PathBuf,
        options: WriterOptions,
    ) -> Result<SessionWriter, StoreError> {
        let (tx, rx) = mpsc::channel();
        let sticky = Arc::new(Mutex::new(None));
        let worker = Worker {
            file,
            path: path.clone(),
            options,
            sticky: Arc::clone(&sticky),
        };
        let thread = std::thread::Builder::new()
            .name("keel-session-writer".to_owned())
            .spawn(move || worker.run(rx))
            .map_err(|e| StoreError::io("spawn writer thread for", &path, e))?;
        Ok(SessionWriter {
            tx: Some(tx),
            thread: Some(thread),
            sticky,
            path,
            lock: None,
        })
    }

    /// Hold `lock` (the session's, taken before the file was opened) until this writer stops.
    pub(crate) fn holding(mut self, lock: SessionLock) -> SessionWriter {
        self.lock = Some(lock);
        self
    }

    /// Write what is queued, stop the thread and release the session's lock, so another
    /// writer may open it; every later enqueue and flush is [`StoreError::WriterGone`]. For a
    /// front end that reopens the session it writes in a new agent.
    pub fn release(&mut self) -> Result<(), StoreError> {
        let r = self.flush();
        self.shutdown();
        self.lock = None;
        r
    }

    /// The file this writer appends to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queue an event for writing (cheap: clones it and hands it to the writer thread).
    pub fn enqueue(&self, event: &SessionEvent) {
        self.enqueue_owned(event.clone());
    }

    /// Queue an event for writing without cloning it.
    pub fn enqueue_owned(&self, event: SessionEvent) {
        let sent = self
            .tx
            .as_ref()
            .map(|tx| tx.send(Msg::Event(event)).is_ok())
            .unwrap_or(false);
        if !sent {
            set_sticky(
                &self.sticky,
                StoreError::WriterGone {
                    path: self.path.clone(),
                },
            );
        }
    }

    /// A ticket for a flush of everything enqueued so far; see [`FlushTicket::wait`].
    pub fn flush_ticket(&self) -> FlushTicket {
        let (tx, rx) = oneshot::channel();
        let sent = self
            .tx
            .as_ref()
            .map(|t| t.send(Msg::Flush(tx)).is_ok())
            .unwrap_or(false);
        let err = if sent {
            None
        } else {
            Some(StoreError::WriterGone {
                path: self.path.clone(),
            })
        };
        FlushTicket {
            rx: sent.then_some(rx),
            err,
            path: self.path.clone(),
        }
    }

    /// Block until everything enqueued so far is written and fsynced.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.flush_ticket().wait()
    }

    /// Flush, then stop the writer thread.
    pub fn close(mut self) -> Result<(), StoreError> {
        let r = self.flush();
        self.shutdown();
        r
    }

    fn shutdown(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            // A panicking writer thread already recorded nothing more we could report here.
            let _ = t.join();
        }
    }
}

impl Drop for SessionWriter {
    /// Dropping the writer writes what is queued (durably) and stops the thread.
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn set_sticky(sticky: &Mutex<Option<StoreError>>, e: StoreError) {
    if let Ok(mut g) = sticky.lock()
        && g.is_none()
    {
        *g = Some(e);
    }
}

fn get_sticky(sticky: &Mutex<Option<StoreError>>) -> Option<StoreError> {
    sticky.lock().ok().and_then(|g| g.clone())
}

impl Worker {
    fn run(mut self, rx: Receiver<Msg>) {
        let mut events = Vec::new();
        let mut waiters = Vec::new();
        while let Ok(first) = rx.recv() {
            let mut deadline = None;
            let mut msg = Some(first);
            loop {
                match msg.take() {
                    Some(Msg::Event(e)) => {
                        events.push(e);
                        deadline.get_or_insert_with(|| Instant::now() + self.options.batch_window);
                    }
                    Some(Msg::Flush(w)) => {
                        waiters.push(w);
                        break;
                    }
                    None => {}
                }
                let Some(d) = deadline else { break };
                let left = d.saturating_duration_since(Instant::now());
                match rx.recv_timeout(left) {
                    Ok(m) => msg = Some(m),
                    Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
                }
            }
            // Drain anything already queued behind a flush: it costs nothing to include it.
            while let Ok(m) = rx.try_recv() {
                match m {
                    Msg::Event(e) => events.push(e),
                    Msg::Flush(w) => waiters.push(w),
                }
            }
            if !events.is_empty() {
                let batch = std::mem::take(&mut events);
                if get_sticky(&self.sticky).is_none()
                    && let Err(e) = self.write_batch(batch)
                {
                    set_sticky(&self.sticky, e);
                }
            }
            let result = match get_sticky(&self.sticky) {
                Some(e) => Err(e),
                None => Ok(()),
            };
            for w in waiters.drain(..) {
                // A waiter that stopped waiting is fine.
                let _ = w.send(result.clone());
            }
        }
    }

    fn write_batch(&mut self, batch: Vec<SessionEvent>) -> Result<(), StoreError> {
        let mut buf = Vec::with_capacity(batch.len() * 64);
        encode_batch(batch, &mut buf).map_err(|e| StoreError::encode(&self.path, e))?;
        let bytes = match self.options.format {
            Format::Plain => buf,
            Format::Zstd => super::compress_frame(&buf, self.options.zstd_level, &self.path)?,
        };
        self.file
            .write_all(&bytes)
            .map_err(|e| StoreError::io("append to", &self.path, e))?;
        self.file
            .sync_data()
            .map_err(|e| StoreError::io("fsync", &self.path, e))
    }
}
