//! Following one delegation's reports: one long-lived `events <id> --json --follow` per watched
//! job, its NDJSON lines handed to the listener as they are read, restarted with `--since <last
//! seq>` after it dies. Events are delivered in `seq` order and at most once (a restart that
//! repeats an event is filtered); consecutive restarts without a new event are capped.

use super::envelope::{EventV1, SCHEMA_VERSION};
use super::run::{ConsultConfig, spawn_once_tee};
use crate::seam::{Caller, EventListener};
use keel_acp_client::lines::{LineBuffer, Piece};
use keel_protocol::sync::Locked;
use keel_tools::subprocess::{OutputSink, SubprocessService};
use serde::Deserialize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Restarts in a row that brought no new event before following gives up.
pub const MAX_IDLE_RESTARTS: u32 = 5;

/// Pause before a restart.
const RESTART_PAUSE: Duration = Duration::from_millis(100);

/// Time limit of one follow process (consult ends it itself when the job is final).
const FOLLOW_LIMIT: Duration = Duration::from_secs(24 * 60 * 60);

/// One NDJSON line `{schemaVersion, jobId, event}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Line {
    schema_version: u64,
    job_id: String,
    event: EventV1,
}

/// Longest NDJSON line read; a longer one is dropped like any untrusted line.
const MAX_LINE: usize = 8 << 20;

/// Line assembly and de-duplication shared with the output sink.
struct Stream {
    lines: LineBuffer,
    seen: Seen,
}

/// What was delivered: the last seq, how many events, to whom.
struct Seen {
    last_seq: u64,
    delivered: u64,
    job_id: String,
    listener: EventListener,
}

impl Stream {
    fn feed(&mut self, bytes: &[u8]) {
        self.lines.feed(bytes, |piece| {
            if let Piece::Line(line) = piece {
                self.seen.line(line);
            }
        });
    }
}

impl Seen {
    fn line(&mut self, raw: &[u8]) {
        // Untrusted lines (another version, garbage, stderr text) are dropped.
        let Ok(line) = serde_json::from_slice::<Line>(raw) else {
            return;
        };
        if line.schema_version != SCHEMA_VERSION || line.job_id != self.job_id {
            return;
        }
        let seq = line.event.seq;
        if seq.is_some_and(|s| s <= self.last_seq) {
            return;
        }
        if let Some(event) = line.event.into_event(&self.job_id) {
            (self.listener)(event);
        }
        if let Some(s) = seq {
            self.last_seq = s;
        }
        self.delivered += 1;
    }
}

/// Follow `id` until its stream ends normally (the job is final), the job is unknown, or
/// [`MAX_IDLE_RESTARTS`] restarts in a row bring nothing new.
pub(crate) async fn follow(
    subprocess: SubprocessService,
    config: ConsultConfig,
    caller: Caller,
    id: String,
    listener: EventListener,
) {
    let stream = Arc::new(Mutex::new(Stream {
        lines: LineBuffer::new(MAX_LINE),
        seen: Seen {
            last_seq: 0,
            delivered: 0,
            job_id: id.clone(),
            listener,
        },
    }));
    let mut idle_restarts = 0;
    loop {
        let (since, before) = {
            let s = stream.locked();
            (s.seen.last_seq, s.seen.delivered)
        };
        let mut argv = vec![
            "events".to_owned(),
            id.clone(),
            "--json".into(),
            "--follow".into(),
        ];
        if since > 0 {
            argv.extend(["--since".to_owned(), since.to_string()]);
        }
        let sink_stream = stream.clone();
        let sink = OutputSink::new(move |bytes| {
            sink_stream.locked().feed(bytes);
        });
        let run = spawn_once_tee(&subprocess, &config, &caller, &argv, FOLLOW_LIMIT, sink).await;
        let after = {
            let mut s = stream.locked();
            s.lines.clear();
            s.seen.delivered
        };
        match run {
            Ok(r) if r.exit == Some(0) => return,
            Ok(r) if r.exit == Some(2) => return, // unknown job or a usage error: no point
            Ok(_) | Err(_) => {}
        }
        if after > before {
            idle_restarts = 0;
        } else {
            idle_restarts += 1;
            if idle_restarts > MAX_IDLE_RESTARTS {
                return;
            }
        }
        tokio::time::sleep(RESTART_PAUSE).await;
    }
}
