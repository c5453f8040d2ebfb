//! Loading a big session file on two threads.
//!
//! A reader thread reads (plain) or decodes (zstd) the text after the header and cuts it into
//! blocks of whole lines ([`Lines::next_block`]). Each block is parsed ([`parse_line`]) into a
//! [`Batch`] of owned lines, by whichever thread is free: the reader parses a block itself while
//! the appending thread still has blocks waiting, else hands it over raw. The calling thread
//! appends the batches in file order through the session's validation, exactly as
//! [`super::load`]'s sequential reader appends lines one at a time.
//!
//! It stops at the first line it cannot read, parse or append (or an unfinished last line, or
//! a read error) and hands back how far it got: the session then holds exactly the lines
//! before that one, and [`super::load`] rewinds the text to it and goes on the sequential way,
//! which meets the same line again and alone words the defect (file, line, seq), decides
//! between torn tail and corruption, and cuts. So a sound file loads to the same session either
//! way (the same lines, parsed by the same function, appended in the same order), and a damaged
//! one fails or tears exactly as it would sequentially.

use super::lines::{Block, Lines};
use super::parse::{Line, Row, Scratch, parse_line};
use crate::record::Delta;
use crate::session::Session;
use keel_protocol::{PackedKind, SessionEvent};
use keel_protocol::{StepNo, TurnNo};
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
        turn: TurnNo,
        step: StepNo,
        index: u32,
        id: Option<Range<usize>>,
        name: Option<Range<usize>>,
        text: Range<usize>,
    },
    Row {
        kind: PackedKind,
        seq0: u64,
        time0: i64,
        turn: TurnNo,
        step: StepNo,
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
    /// Decoded offset of each line in `items`, then of the line that could not be parsed, if
    /// one could not (it and the lines after it are not in `items`).
    starts: Vec<u64>,
    /// Decoded offset just past the block.
    end: u64,
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

    /// Append every line to `session`. At the first line it refuses or that could not be
    /// parsed: `Err` with the number of lines appended before it and its offset (the session
    /// holds exactly the lines before it: a refused append changes nothing).
    fn append_to(self, session: &mut Session) -> Result<u64, (u64, u64)> {
        let Batch {
            items,
            text,
            ends,
            dt,
            starts,
            end,
        } = self;
        let n = items.len();
        let stop = |i: usize| Err((i as u64, starts.get(i).copied().unwrap_or(end)));
        let opt = |r: &Option<Range<usize>>| r.clone().and_then(|r| text.get(r));
        for (i, item) in items.into_iter().enumerate() {
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
                    let Some(t) = text.get(t) else { return stop(i) };
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
                        return stop(i);
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
                return stop(i);
            }
        }
        if starts.len() > n {
            return stop(n);
        }
        Ok(n as u64)
    }
}

/// A thread's parsing state: the scratch buffers, and the sizes of its last batch (the next
/// one is sized like it, so that its buffers do not grow by copying).
#[derive(Default)]
struct Parser {
    scratch: Scratch,
    last: [usize; 4],
}

impl Parser {
    /// Parse a block of whole lines (each ending in a newline) starting at decoded offset
    /// `start`, up to the first line that cannot be parsed.
    fn parse_block(&mut self, start: u64, block: &[u8]) -> Batch {
        let room = |n: usize| n + n / 4 + 16;
        let [items, text, ends, dt] = self.last;
        let mut batch = Batch {
            items: Vec::with_capacity(room(items)),
            text: String::with_capacity(room(text)),
            ends: Vec::with_capacity(room(ends)),
            dt: Vec::with_capacity(room(dt)),
            starts: Vec::with_capacity(room(items)),
            end: start + block.len() as u64,
        };
        // Newlines are ASCII: the lines before the first bad byte are UTF-8, and parse; the
        // line holding it is a defect.
        let (text, bad) = match std::str::from_utf8(block) {
            Ok(text) => (text, false),
            Err(e) => {
                let good = &block[..e.valid_up_to()];
                let cut = memchr::memrchr(b'\n', good).map_or(0, |nl| nl + 1);
                (std::str::from_utf8(&block[..cut]).unwrap_or(""), true)
            }
        };
        let mut at = 0;
        let mut stopped = false;
        for nl in memchr::memchr_iter(b'\n', text.as_bytes()) {
            batch.starts.push(start + at as u64);
            // Both ends are at ASCII bytes, so at char boundaries.
            let parsed = text
                .get(at..nl)
                .map(|line| parse_line(line, &mut self.scratch));
            at = nl + 1;
            match parsed {
                Some(Ok(line)) => batch.push(line),
                _ => {
                    stopped = true;
                    break;
                }
            }
        }
        if bad && !stopped {
            batch.starts.push(start + at as u64);
        }
        self.last = [
            batch.items.len(),
            batch.text.len(),
            batch.ends.len(),
            batch.dt.len(),
        ];
        batch
    }
}

/// What the reader hands over: a block to parse, or one it parsed.
enum Msg {
    Raw(u64, Vec<u8>),
    Parsed(Batch),
}

/// How the reader ended.
enum End {
    /// The text ended after a whole line.
    Clean,
    /// Anything else (unfinished last line, read error, or the appender stopped listening).
    Stopped,
}

/// How far [`ingest`] got.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Progress {
    /// Lines appended.
    pub(crate) lines: u64,
    /// Decoded offset just past them: where the first line not appended starts.
    pub(crate) at: u64,
    /// The text ended right after them (a damaged zstd frame, which ends the text, is left to
    /// the caller to check). Then `lines` stands at the end of the text; else it stands
    /// anywhere and must be rewound to `at`.
    pub(crate) whole: bool,
}

/// Read `lines` on a second thread and append its lines to `session`, in order, up to the end
/// of the text or the first line that cannot be read, parsed or appended.
pub(crate) fn ingest(lines: &mut Lines, session: &mut Session, tuning: Tuning) -> Progress {
    let mut progress = Progress {
        lines: 0,
        at: lines.offset(),
        whole: false,
    };
    let (tx, rx) = mpsc::sync_channel::<Msg>(AHEAD);
    // Blocks sent and not yet taken by the appender.
    let waiting = &AtomicUsize::new(0);
    std::thread::scope(|scope| {
        // Owns the sender: the channel closes when the reader returns. No thread to be had:
        // leave the file to the sequential reader.
        let reader = std::thread::Builder::new().spawn_scoped(scope, move || {
            let mut parser = Parser::default();
            loop {
                let block = match lines.next_block(tuning.block) {
                    Ok(Block::Lines(start, block)) => (start, block),
                    Ok(Block::End) => return End::Clean,
                    Ok(Block::Unfinished) | Err(_) => return End::Stopped,
                };
                // Parse here while the appender is busy; hand the block over when it waits.
                let msg = if waiting.load(Ordering::Acquire) > 0 {
                    Msg::Parsed(parser.parse_block(block.0, &block.1))
                } else {
                    Msg::Raw(block.0, block.1)
                };
                waiting.fetch_add(1, Ordering::AcqRel);
                if tx.send(msg).is_err() {
                    return End::Stopped;
                }
            }
        });
        let Ok(reader) = reader else {
            return progress;
        };
        let mut parser = Parser::default();
        let mut sound = true;
        while let Ok(msg) = rx.recv() {
            waiting.fetch_sub(1, Ordering::AcqRel);
            let batch = match msg {
                Msg::Raw(start, block) => parser.parse_block(start, &block),
                Msg::Parsed(batch) => batch,
            };
            let end = batch.end;
            match batch.append_to(session) {
                Ok(n) => {
                    progress.lines += n;
                    progress.at = end;
                }
                Err((n, at)) => {
                    progress.lines += n;
                    progress.at = at;
                    sound = false;
                    break;
                }
            }
        }
        // Stops the reader if it is still sending.
        drop(rx);
        let end = reader.join();
        progress.whole = sound && matches!(end, Ok(End::Clean));
        progress
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
            Err(e) => {
                // The same damage, decoded with other buffer sizes, can get another word from
                // zstd ("Data corruption detected", "Destination buffer is too small"): the
                // file, line and seq must agree, zstd's own wording need not.
                let e = e.to_string();
                let cut = e
                    .find("damaged zstd frame")
                    .map_or(e.len(), |i| i + "damaged zstd frame".len());
                format!("error: {}", &e[..cut])
            }
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
        use super::super::lines::{LineRead, Lines, Source};
        let format = crate::store::Format::of_path(path);
        let mut lines = Lines::new(Source::open(path, format).unwrap(), u64::MAX);
        let Ok(LineRead::Line(_, header)) = lines.next() else {
            panic!("no header in {}", path.display())
        };
        let mut session = crate::Session::new(serde_json::from_slice(header).unwrap());
        let tuning = Tuning {
            min_file: 0,
            block: 200,
        };
        super::ingest(&mut lines, &mut session, tuning).whole
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
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../testdata/dsh-sessions");
        let mut seen = 0;
        for entry in std::fs::read_dir(&fixtures).unwrap().flatten() {
            for name in ["session.plain.jsonl", "session.jsonl", "session.jsonl.zstd"] {
                let path = entry.path().join(name);
                if path.is_file() {
                    same(&path);
                    assert!(taken_whole(&path), "{}", path.display());
                    seen += 1;
                }
            }
        }
        assert!(
            seen >= 5,
            "the dsh fixtures were not found in {}",
            fixtures.display()
        );
    }

    #[test]
    fn damaged_files_fail_or_tear_the_same_on_two_threads() {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for name in ["session.jsonl", "session.jsonl.zst"] {
            let zstd = name.ends_with(".zst");
            let path = synth(dir.path(), name);
            let good = std::fs::read(&path).unwrap();
            let mut kinds = std::collections::BTreeSet::new();
            for round in 0..72 {
                let mut b = good.clone();
                let len = b.len();
                match round % 6 {
                    // Torn anywhere, or near the end.
                    0 => b.truncate(rng.gen_range(0..len)),
                    1 => b.truncate(rng.gen_range(len - 2000..len)),
                    // A flipped byte anywhere, or near the end.
                    2 => b[rng.gen_range(0..len)] ^= 1 << rng.gen_range(0..8),
                    3 if zstd => b[rng.gen_range(len - len / 10..len)] ^= 1 << rng.gen_range(0..8),
                    // A line cut out.
                    3 => {
                        let nls: Vec<usize> = memchr::memchr_iter(b'\n', &b).collect();
                        let i = rng.gen_range(1..nls.len() - 1);
                        b.drain(nls[i - 1] + 1..=nls[i]);
                    }
                    // Garbage after a cut.
                    4 if zstd => {
                        b.truncate(rng.gen_range(len / 2..len));
                        b.extend((0..rng.gen_range(1..300)).map(|_| rng.gen_range(0..=255u8)));
                    }
                    // A foreign event type.
                    4 => {
                        let text = String::from_utf8(b).unwrap();
                        let n = 1 + round % 7;
                        b = text
                            .replacen("\"type\":\"step/start\"", "\"type\":\"step/begin\"", n)
                            .into_bytes();
                    }
                    // A byte that is not UTF-8, or a missing last newline.
                    _ if zstd || round % 12 == 5 => {
                        b = good.clone();
                        if !zstd {
                            b.pop();
                        } else {
                            b.truncate(len - rng.gen_range(1..40));
                        }
                    }
                    _ => {
                        let at = rng.gen_range(len / 3..len);
                        b.insert(at, 0xff);
                    }
                }
                std::fs::write(&path, &b).unwrap();
                if !zstd {
                    // The same text in sound zstd frames cut anywhere: a bad line inside a
                    // frame that decodes.
                    let mut z = Vec::new();
                    let mut rest = &b[..];
                    while !rest.is_empty() {
                        let n = rng.gen_range(1..6000).min(rest.len());
                        z.extend(super::super::compress_frame(&rest[..n], 1, &path).unwrap());
                        rest = &rest[n..];
                    }
                    let zpath = dir.path().join("reframed.jsonl.zst");
                    std::fs::write(&zpath, &z).unwrap();
                    same(&zpath);
                }
                let out = same(&path);
                let kind = if let Some(e) = out.strip_prefix("error: ") {
                    e.split(": ").nth(1).unwrap_or(e).chars().take(12).collect()
                } else if out.contains("torn: None") {
                    "whole".to_owned()
                } else {
                    "torn".to_owned()
                };
                kinds.insert(kind);
            }
            // Torn tails and refusals were both met.
            eprintln!("{name}: {kinds:?}");
            assert!(
                kinds.contains("torn") && kinds.len() >= 2,
                "{name}: {kinds:?}"
            );
        }
    }
}
