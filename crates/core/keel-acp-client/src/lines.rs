//! What a child process writes, kept bounded: [`LineBuffer`] assembles lines from the chunks
//! it writes on stdout, with a bound on an unfinished line (one longer than the bound is
//! dropped whole, reported once as [`Piece::Oversized`]), and [`BoundedLog`] keeps the log
//! lines made of them (a file up to its cap, the last lines in memory); a log line is shaped
//! by the project's one rule, `keel_protocol::text::one_line` (at most [`LOG_LINE_CHARS`]).
//! The ACP client's account is built on them; keel's delegation providers (the keel stream
//! reader, the consult follower) use them as well.

/// What [`LineBuffer::feed`] hands over.
pub enum Piece<'a> {
    /// One whole line, without its newline.
    Line(&'a [u8]),
    /// A line outgrew the bound; it is skipped up to its newline.
    Oversized,
}

/// See the module docs.
#[derive(Debug)]
pub struct LineBuffer {
    partial: Vec<u8>,
    skipping: bool,
    max: usize,
}

impl LineBuffer {
    /// A buffer dropping unfinished lines longer than `max` bytes.
    pub fn new(max: usize) -> Self {
        LineBuffer {
            partial: Vec::new(),
            skipping: false,
            max,
        }
    }

    /// Take `bytes`; every line they finish goes to `out`.
    pub fn feed(&mut self, mut bytes: &[u8], mut out: impl FnMut(Piece<'_>)) {
        while let Some(nl) = bytes.iter().position(|b| *b == b'\n') {
            let (head, rest) = bytes.split_at(nl);
            bytes = &rest[1..];
            if self.skipping {
                self.skipping = false;
                self.partial.clear();
                continue;
            }
            if self.partial.is_empty() {
                out(Piece::Line(head));
            } else {
                self.partial.extend_from_slice(head);
                let line = std::mem::take(&mut self.partial);
                out(Piece::Line(&line));
            }
        }
        if self.skipping {
            return;
        }
        self.partial.extend_from_slice(bytes);
        if self.partial.len() > self.max {
            self.partial = Vec::new();
            self.skipping = true;
            out(Piece::Oversized);
        }
    }

    /// The end of the stream: a last line without a newline goes to `out`; the buffer is
    /// empty afterwards.
    pub fn finish(&mut self, mut out: impl FnMut(Piece<'_>)) {
        let line = std::mem::take(&mut self.partial);
        if !line.is_empty() && !self.skipping {
            out(Piece::Line(&line));
        }
        self.skipping = false;
    }

    /// Bytes held for an unfinished line (capacity).
    pub fn held(&self) -> usize {
        self.partial.capacity()
    }

    /// Forget an unfinished line (its writer is gone).
    pub fn clear(&mut self) {
        self.partial.clear();
        self.skipping = false;
    }
}

/// Characters of one line of a run's log.
pub const LOG_LINE_CHARS: usize = 200;

/// A run's `log.txt` and its last lines in memory: past `max_bytes` lines are counted, not
/// written (the in-memory tail still has them). The default writes nothing and keeps nothing.
#[derive(Default)]
pub struct BoundedLog {
    file: Option<std::fs::File>,
    bytes: u64,
    dropped: u64,
    tail: std::collections::VecDeque<String>,
    max_bytes: u64,
    tail_lines: usize,
}

impl BoundedLog {
    /// A log written to `path` (nothing is written when it cannot be created) up to
    /// `max_bytes`, keeping the last `tail_lines` lines.
    pub fn create(path: &std::path::Path, max_bytes: u64, tail_lines: usize) -> Self {
        BoundedLog {
            file: std::fs::File::create(path).ok(),
            bytes: 0,
            dropped: 0,
            tail: std::collections::VecDeque::new(),
            max_bytes,
            tail_lines,
        }
    }

    /// Add `line`.
    pub fn push(&mut self, line: String) {
        use std::io::Write as _;
        let bytes = line.len() as u64 + 1;
        if self.bytes + bytes <= self.max_bytes {
            if let Some(f) = self.file.as_mut() {
                let _ = writeln!(f, "{line}");
            }
            self.bytes += bytes;
        } else {
            self.dropped += 1;
        }
        if self.tail.len() == self.tail_lines {
            self.tail.pop_front();
        }
        self.tail.push_back(line);
    }

    /// Write what is buffered to the file.
    pub fn flush(&mut self) {
        use std::io::Write as _;
        if let Some(f) = self.file.as_mut() {
            let _ = f.flush();
        }
    }

    /// The last `n` lines (all kept when `None`), and a note when the file reached its cap.
    pub fn tail(&self, n: Option<usize>) -> String {
        let n = n.unwrap_or(self.tail.len()).min(self.tail.len());
        let mut out: Vec<String> = self
            .tail
            .iter()
            .skip(self.tail.len() - n)
            .cloned()
            .collect();
        if self.dropped > 0 {
            out.push(format!(
                "({} later lines are not in the log file: it reached its cap)",
                self.dropped
            ));
        }
        out.join("\n")
    }
}
