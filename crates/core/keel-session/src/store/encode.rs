//! Encoding events as session-file lines, packing delta runs into dsh's packed rows.
//!
//! Consecutive deltas of one block become one `text-chunks` / `reasoning-chunks` /
//! `tool-call-chunks` row (a run of one stays a plain `assistant/chunk` line); every other event
//! is one line. Packing happens per batch, so a run split across batches becomes several rows.

use crate::record::{ChunkRun, Record, Records};
use keel_protocol::{PackedKind, Seq, SessionEvent};
use std::io::Write;

/// Longest packed row written (members); longer runs are split.
const MAX_ROW: usize = 4096;

/// Why an event could not be encoded.
#[derive(Debug)]
pub(crate) struct EncodeError {
    pub(crate) seq: Seq,
    pub(crate) source: serde_json::Error,
}

/// Append the lines for `records` to `out`, skipping events before `from`.
pub(crate) fn encode_records(
    records: &[Record],
    from: u64,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    for rec in records {
        match rec {
            Record::Event(e) => {
                if e.seq.0 >= from {
                    encode_event(e, out)?;
                }
            }
            Record::Run(run) => {
                let skip = from.saturating_sub(run.seq0).min(run.len() as u64) as usize;
                let mut i = skip;
                while i < run.len() {
                    let to = (i + MAX_ROW).min(run.len());
                    if to - i == 1 {
                        encode_event(&run.member(i).as_event(), out)?;
                    } else {
                        encode_row(run, i, to, out).map_err(|source| EncodeError {
                            seq: Seq(run.seq0 + i as u64),
                            source,
                        })?;
                    }
                    i = to;
                }
            }
        }
    }
    Ok(())
}

/// Append the lines for a batch of events (packing their delta runs) to `out`.
pub(crate) fn encode_batch(
    events: Vec<SessionEvent>,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let mut recs = Records::default();
    for ev in events {
        recs.push_event(ev);
    }
    encode_records(recs.records(), 0, out)
}

fn encode_event(ev: &SessionEvent, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    serde_json::to_writer(&mut *out, ev).map_err(|source| EncodeError {
        seq: ev.seq,
        source,
    })?;
    out.push(b'\n');
    Ok(())
}

/// One packed row for members `from..to`, field for field as `PackedChunks` serialises.
fn encode_row(
    run: &ChunkRun,
    from: usize,
    to: usize,
    out: &mut Vec<u8>,
) -> Result<(), serde_json::Error> {
    let first = run.member(from);
    write!(
        out,
        "{{\"type\":\"{}\",\"seq0\":{},\"time0\":{},\"data\":{{\"turn\":{},\"step\":{},\"index\":{},\"dt\":[",
        run.kind.type_name(),
        first.seq,
        first.time,
        run.turn,
        run.step,
        run.index
    )
    .map_err(serde_json::Error::io)?;
    let mut prev = first.time;
    for i in from + 1..to {
        let t = run.member(i).time;
        if i > from + 1 {
            out.push(b',');
        }
        write!(out, "{}", t - prev).map_err(serde_json::Error::io)?;
        prev = t;
    }
    out.extend_from_slice(b"]");
    if let Some(id) = first.id {
        out.extend_from_slice(b",\"id\":");
        serde_json::to_writer(&mut *out, id)?;
    }
    if let Some(name) = first.name {
        out.extend_from_slice(b",\"name\":");
        serde_json::to_writer(&mut *out, name)?;
    }
    out.extend_from_slice(if run.kind == PackedKind::ToolCall {
        b",\"args\":["
    } else {
        b",\"texts\":["
    });
    for i in from..to {
        if i > from {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, run.member(i).text)?;
    }
    out.extend_from_slice(b"]}}\n");
    Ok(())
}
