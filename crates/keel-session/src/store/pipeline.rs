//! Loading a big, sound session file on two threads.
//!
//! A reader thread reads (plain) or decodes (zstd) the text after the header and cuts it into
//! blocks of whole lines ([`Lines::next_block`]). Each block is parsed ([`parse_line`]) into a
//! [`Batch`] of owned lines, by whichever thread is free: the reader parses a block itself while
//! the appending thread still has blocks waiting, else hands it over raw. The calling thread
//! appends the batches in file order through the session's validation, exactly as
//! [`super::load`]'s sequential reader appends lines one at a time.
//!
//! This path only ever loads a file that is sound from end to end. At the first line it cannot
//! parse or append, an unfinished last line, a damaged zstd frame or a read error it gives up
//! and [`super::load`] reads the file again the sequential way, which finds and words the defect
//! (file, line, seq), decides between torn tail and corruption, and cuts. So errors and torn
//! tails are reported by one code path only, and a sound file loads to the same session either
//! way: the same lines, parsed by the same function, appended in the same order.

use super::lines::{Block, Lines};
use super::parse::{Line, Row, Scratch, parse_line};
use crate::record::Delta;
use crate::session::Session;
use keel_protocol::{PackedKind, SessionEvent};
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

/// Blocks read ahead of the appending thread, at most.
const AHEAD: usize = 4;

/// Tuning of the two-thread load.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tuning {
    /// Smallest file (in bytes on disk) worth a second thread.
    pub(crate) min_file: u64,
    /// Smallest block of lines handed between threads, in bytes (the last may be smaller).
    pub(crate) block: usize,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            min_file: 1 << 20,
            block: 512 << 10,
        }
    }
}

/// One parsed line; its strings are in its batch's buffers.
enum Item {
    Event(SessionEvent),
    Delta {
        kind: PackedKind,
        seq: u64,
        time: i64,
        turn: u32,
        step: u32,
        index: u32,
        id: Option<Range<usize>>,
        name: Option<Range<usize>>,
        text: Range<usize>,
    },
    Row {
        kind: PackedKind,
        seq0: u64,
        time0: i64,
        turn: u32,
        step: u32,
        index: u32,
        id: Option<Range<usize>>,
        name: Option<Range<usize>>,
        /// Into `Batch::dt`.
        dt: Range<usize>,
        /// Into `Batch::ends` (ends relative to the start of `text`).
        ends: Range<usize>,
        text: Range<usize>,
    },
}

/// The parsed lines of one block.
#[derive(Default)]
struct Batch {
    items: Vec<Item>,
    text: String,
    ends: Vec<usize>,
    dt: Vec<i64>,
    /// A line could not be parsed (it and the lines after it are not in `items`).
    defect: bool,
}

impl Batch {
    fn put(&mut self, s: &str) -> Range<usize> {
        let start = self.text.len();
        self.text.push_str(s);
        start..self.text.len()
    }

    fn push(&mut self, line: Line<'_>) {
        let item = match line {
            Line::Event(ev) => Item::Event(ev),
            Line::Delta(d) => Item::Delta {
                kind: d.kind,
                seq: d.seq,
                time: d.time,
                turn: d.turn,
                step: d.step,
                index: d.index,
                id: d.id.map(|s| self.put(s)),
                name: d.name.map(|s| self.put(s)),
                text: self.put(d.text),
            },
            Line::Row(r) => {
                let dt = self.dt.len()..self.dt.len() + r.dt.len();
                self.dt.extend_from_slice(r.dt);
                let ends = self.ends.len()..self.ends.len() + r.ends.len();
                self.ends.extend_from_slice(r.ends);
                Item::Row {
                    kind: r.kind,
                    seq0: r.seq0,
                    time0: r.time0,
                    turn: r.turn,
                    step: r.step,
                    index: r.index,
                    id: r.id.map(|s| self.put(s)),
                    name: r.name.map(|s| self.put(s)),
                    dt,
                    ends,
                    text: self.put(r.text),
                }
            }
        };
        self.items.push(item);
    }

    /// Append every line to `session`; false at the first one it refuses.
    fn append_to(self, session: &mut Session) -> bool {
        let Batch {
            items,
            text,
            ends,
            dt,
            defect,
        } = self;
        let opt = |r: &Option<Range<usize>>| r.clone().and_then(|r| text.get(r));
        for item in items {
            let res = match item {
                Item::Event(ev) => session.append_parsed(ev),
                Item::Delta {
                    kind,
                    seq,
                    time,
                    turn,
                    step,
                    index,
                    id,
                    name,
                    text: t,
                } => {
                    let Some(t) = text.get(t) else { return false };
                    session.append_delta(&Delta {
                        kind,
                        seq,
                        time,
                        turn,
                        step,
                        index,
                        id: opt(&id),
                        name: opt(&name),
                        text: t,
                    })
                }
                Item::Row {
                    kind,
                    seq0,
                    time0,
                    turn,
                    step,
                    index,
                    id,
                    name,
                    dt: d,
                    ends: e,
                    text: t,
                } => {
                    let (Some(t), Some(d), Some(e)) = (text.get(t), dt.get(d), ends.get(e)) else {
                        return false;
                    };
                    session.append_row(&Row {
                        kind,
                        seq0,
                        time0,
                        turn,
                        step,
                        index,
                        id: opt(&id),
                        name: opt(&name),
                        dt: d,
                        text: t,
                        ends: e,
                    })
                }
            };
            if res.is_err() {
                return false;
            }
        }
        !defect
    }
}

/// Parse a block of whole lines (each ending in a newline).
fn parse_block(block: &[u8], scratch: &mut Scratch) -> Batch {
    let mut batch = Batch::default();
    // Newlines are ASCII: when the block is UTF-8, so is each of its lines.
    let Ok(text) = std::str::from_utf8(block) else {
        batch.defect = true;
        return batch;
    };
    let text = text.strip_suffix('\n').unwrap_or(text);
    if text.len() + 1 != block.len() {
        batch.defect = true;
        return batch;
    }
    for line in text.split('\n') {
        match parse_line(line, scratch) {
            Ok(line) => batch.push(line),
            Err(_) => {
                batch.defect = true;
                break;
            }
        }
    }
    batch
}

/// What the reader hands over: a block to parse, or one it parsed.
enum Msg {
    Raw(Vec<u8>),
    Parsed(Batch),
}

/// How the reader ended.
enum End {
    /// The text ended after a whole line.
    Clean,
    /// Anything else (unfinished last line, read error, or the appender stopped listening).
    Stopped,
}

/// Read `lines` to the end on a second thread and append every line to `session`: the number
/// of lines appended when the whole text was read and appended (a damaged zstd frame, which
/// ends the text, is left to the caller to check); `None` at the first defect of any kind,
/// after which `session` holds some prefix of the log and must be thrown away.
pub(crate) fn ingest(lines: &mut Lines, session: &mut Session, tuning: Tuning) -> Option<u64> {
    let (tx, rx) = mpsc::sync_channel::<Msg>(AHEAD);
    // Blocks sent and not yet taken by the appender.
    let waiting = &AtomicUsize::new(0);
    std::thread::scope(|scope| {
        // Owns the sender: the channel closes when the reader returns.
        let reader = scope.spawn(move || {
            let mut scratch = Scratch::default();
            loop {
                let block = match lines.next_block(tuning.block) {
                    Ok(Block::Lines(block)) => block,
                    Ok(Block::End) => return End::Clean,
                    Ok(Block::Unfinished) | Err(_) => return End::Stopped,
                };
                // Parse here while the appender is busy; hand the block over when it waits.
                let msg = if waiting.load(Ordering::Acquire) > 0 {
                    Msg::Parsed(parse_block(&block, &mut scratch))
                } else {
                    Msg::Raw(block)
                };
                waiting.fetch_add(1, Ordering::AcqRel);
                if tx.send(msg).is_err() {
                    return End::Stopped;
                }
            }
        });
        let mut scratch = Scratch::default();
        let mut appended = 0u64;
        let mut sound = true;
        while let Ok(msg) = rx.recv() {
            waiting.fetch_sub(1, Ordering::AcqRel);
            let batch = match msg {
                Msg::Raw(block) => parse_block(&block, &mut scratch),
                Msg::Parsed(batch) => batch,
            };
            appended += batch.items.len() as u64;
            if !batch.append_to(session) {
                sound = false;
                break;
            }
        }
        // Stops the reader if it is still sending.
        drop(rx);
        let end = reader.join();
        match (sound, end) {
            (true, Ok(End::Clean)) => Some(appended),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    //! The two-thread load against the sequential one: same session, report and error on sound,
    //! torn, corrupt and foreign files, with blocks from one line to many.

    use super::super::load::{LoadError, Loaded, load_tuned};
    use super::Tuning;
    use crate::synth::{SynthOptions, write_file};
    use pretty_assertions::assert_eq;
    use rand::{Rng, SeedableRng};
    use std::path::{Path, PathBuf};

    fn outcome(r: Result<Loaded, LoadError>) -> String {
        match r {
            Ok(l) => format!("{:?}\n{:#?}", l.report, l.session),
            Err(e) => format!("error: {e}"),
        }
    }

    /// Load `path` both ways with every block size; returns the sequential outcome.
    fn same(path: &Path) -> String {
        let sequential = outcome(load_tuned(path, None));
        for block in [1, 200, 5000, 1 << 20] {
            let tuning = Tuning { min_file: 0, block };
            let two = outcome(load_tuned(path, Some(tuning)));
            assert_eq!(two, sequential, "{} with blocks of {block}", path.display());
        }
        sequential
    }

    /// Whether the two-thread reader takes `path` whole (rather than leaving it to the
    /// sequential one).
    fn taken_whole(path: &Path) -> bool {
        use super::super::lines::{Lines, Next, Source};
        let zstd = crate::store::Format::of_path(path) == crate::store::Format::Zstd;
        let mut lines = Lines::new(Source::open(path, zstd).unwrap(), u64::MAX);
        let Ok(Next::Line(_, header)) = lines.next() else {
            panic!("no header in {}", path.display())
        };
        let mut session = crate::Session::new(serde_json::from_slice(header).unwrap());
        let tuning = Tuning {
            min_file: 0,
            block: 200,
        };
        super::ingest(&mut lines, &mut session, tuning).is_some()
    }

    fn synth(dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        let options = SynthOptions {
            events: 3000,
            ..SynthOptions::default()
        };
        write_file(&path, &options, 97).unwrap();
        path
    }

    #[test]
    fn sound_files_load_the_same_on_two_threads() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["session.jsonl", "session.jsonl.zst"] {
            let path = synth(dir.path(), name);
            let out = same(&path);
            assert!(out.contains("torn: None"), "{out:.300}");
            assert!(taken_whole(&path));
        }
        let fixtures =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/dsh-sessions");
        for entry in std::fs::read_dir(&fixtures).into_iter().flatten().flatten() {
            for name in ["session.plain.jsonl", "session.jsonl", "session.jsonl.zstd"] {
                let path = entry.path().join(name);
                if path.is_file() {
                    same(&path);
                    assert!(taken_whole(&path), "{}", path.display());
                }
            }
        }
    }

    #[test]
    fn damaged_files_fail_or_tear_the_same_on_two_threads() {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for name in ["session.jsonl", "session.jsonl.zst"] {
            let path = synth(dir.path(), name);
            let good = std::fs::read(&path).unwrap();
            let mut kinds = std::collections::BTreeSet::new();
            for round in 0..60 {
                let mut b = good.clone();
                match round % 4 {
                    // Torn anywhere.
                    0 => b.truncate(rng.gen_range(0..b.len())),
                    // A flipped byte.
                    1 => {
                        let at = rng.gen_range(0..b.len());
                        b[at] ^= 1 << rng.gen_range(0..8);
                    }
                    // A line cut out, or a foreign event type in the middle.
                    _ if name.ends_with(".zst") => {
                        let at = rng.gen_range(b.len() / 2..b.len());
                        b[at] = b[at].wrapping_add(1);
                    }
                    2 => {
                        let nls: Vec<usize> = memchr::memchr_iter(b'\n', &b).collect();
                        let i = rng.gen_range(1..nls.len() - 1);
                        b.drain(nls[i - 1] + 1..=nls[i]);
                    }
                    _ => {
                        let text = String::from_utf8(b).unwrap();
                        let text = text.replacen(
                            "\"type\":\"step/start\"",
                            "\"type\":\"step/begin\"",
                            1 + round % 7,
                        );
                        b = text.into_bytes();
                    }
                }
                std::fs::write(&path, &b).unwrap();
                let out = same(&path);
                kinds.insert(out.split([':', '{', ' ']).next().unwrap_or("").to_owned());
            }
            // Both loaded (torn) and refused files were seen.
            assert!(kinds.len() >= 2, "{kinds:?}");
        }
    }
}
