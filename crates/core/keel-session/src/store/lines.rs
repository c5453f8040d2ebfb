//! A session file's decoded text, read line by line in pieces.
//!
//! [`Source`] produces the decoded bytes: a plain file read 1 MiB at a time, or a zstd file
//! decoded one frame at a time (each frame whole, so a frame that fails its checksum gives
//! nothing). [`Lines`] cuts them into lines, keeping only the unfinished last line between
//! pieces, and tells each line's offset in the decoded text. Nothing holds the whole text.
//!
//! A zstd file's frames are recorded as (compressed start, decoded start) while they are read,
//! and the first frame that cannot be decoded ends the text (its damage is recorded);
//! [`Source::later`] then reads what the frames after it decode to, skipping damaged ones.

use std::fs::File;
use std::io::{self, Read, Seek};

/// Bytes read from a plain file at a time.
const PIECE: u64 = 1 << 20;
/// Largest declared frame size decoded into a buffer of that size at once; larger (or
/// undeclared) frames are streamed.
const MAX_DIRECT_FRAME: u64 = 256 << 20;

/// A damaged zstd frame: (compressed offset, decoded offset, reason).
pub(crate) type Damage = (u64, u64, String);

/// Why a zstd frame gives no text.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FrameError {
    /// The bytes at the frame's start are not a whole zstd frame.
    #[error("incomplete or invalid zstd frame")]
    Incomplete,
    /// The stream decoder rejected the frame.
    #[error("{0}")]
    Decode(io::Error),
}

/// Where decoded text comes from.
pub(crate) enum Source {
    Plain {
        file: File,
        /// Bytes read so far.
        read: u64,
    },
    Zstd(Box<Zstd>),
}

/// A zstd file, held compressed, decoded a frame at a time.
pub(crate) struct Zstd {
    data: Vec<u8>,
    /// Start of the next frame in `data`.
    off: usize,
    /// (compressed start, decoded start) of each frame read, the damaged one included.
    pub(crate) frames: Vec<(u64, u64)>,
    /// The first damaged frame, once met.
    pub(crate) damage: Option<Damage>,
    /// Reading the frames after the damaged one: damaged frames are skipped, not recorded.
    later: bool,
    bulk: Option<zstd::bulk::Decompressor<'static>>,
    /// A frame decoded while the line buffer holds an unfinished line.
    tmp: Vec<u8>,
}

impl Source {
    /// Open `file` for reading in `format`.
    pub(crate) fn open(file: &std::path::Path, format: super::Format) -> io::Result<Source> {
        if format == super::Format::Zstd {
            Ok(Source::Zstd(Box::new(Zstd {
                data: std::fs::read(file)?,
                off: 0,
                frames: Vec::new(),
                damage: None,
                later: false,
                bulk: None,
                tmp: Vec::new(),
            })))
        } else {
            Ok(Source::Plain {
                file: File::open(file)?,
                read: 0,
            })
        }
    }

    /// Bytes of the file read so far (all of it, for zstd).
    pub(crate) fn file_len(&self) -> u64 {
        match self {
            Source::Plain { read, .. } => *read,
            Source::Zstd(z) => z.data.len() as u64,
        }
    }

    /// Append the next piece of text to `buf`, whose end is at decoded offset `at`. False at
    /// the end of the text.
    fn fill(&mut self, buf: &mut Vec<u8>, at: u64) -> io::Result<bool> {
        match self {
            Source::Plain { file, read } => {
                let n = file.take(PIECE).read_to_end(buf)?;
                *read += n as u64;
                Ok(n > 0)
            }
            Source::Zstd(z) => Ok(z.fill(buf, at)),
        }
    }

    /// Go back to decoded offset `at` (not past what was read): a plain file seeks there, a zstd
    /// file to the start of the frame that decoded to `at`, forgetting that frame, the ones after
    /// it and any damage met since. Returns the decoded offset reading resumes at.
    fn rewind(&mut self, at: u64) -> io::Result<u64> {
        match self {
            Source::Plain { file, read } => {
                file.seek(io::SeekFrom::Start(at))?;
                *read = at;
                Ok(at)
            }
            Source::Zstd(z) => {
                let i = z.frames.partition_point(|&(_, dec)| dec <= at);
                let (off, dec) = match i.checked_sub(1).and_then(|i| z.frames.get(i)) {
                    Some(&(off, dec)) => (off, dec),
                    None => (0, 0),
                };
                z.frames.truncate(i.saturating_sub(1));
                z.off = usize::try_from(off).unwrap_or(usize::MAX);
                z.damage = None;
                z.later = false;
                z.tmp.clear();
                Ok(dec)
            }
        }
    }

    /// What the frames after the damaged one decode to, when a frame was damaged.
    pub(crate) fn later(self) -> Option<Source> {
        match self {
            Source::Zstd(mut z) if z.damage.is_some() => {
                z.later = true;
                Some(Source::Zstd(z))
            }
            _ => None,
        }
    }

    pub(crate) fn zstd(&self) -> Option<&Zstd> {
        match self {
            Source::Zstd(z) => Some(z),
            Source::Plain { .. } => None,
        }
    }
}

impl Zstd {
    fn fill(&mut self, buf: &mut Vec<u8>, at: u64) -> bool {
        if self.damage.is_some() && !self.later {
            return false;
        }
        while self.off < self.data.len() {
            let off = self.off;
            let frame = zstd::zstd_safe::find_frame_compressed_size(&self.data[off..])
                .ok()
                .filter(|&n| n > 0 && off + n <= self.data.len());
            let before = buf.len();
            let res = match frame {
                Some(n) => self.decode(off, n, buf),
                None => Err(FrameError::Incomplete),
            };
            match res {
                Ok(()) => {
                    if !self.later {
                        self.frames.push((off as u64, at));
                    }
                    self.off = off + frame.unwrap_or(0);
                    if buf.len() > before {
                        return true;
                    }
                }
                Err(reason) => {
                    buf.truncate(before);
                    self.off = frame.map_or(self.data.len(), |n| off + n);
                    if !self.later {
                        // The damaged frame starts a (dropped) batch too.
                        self.frames.push((off as u64, at));
                        self.damage = Some((off as u64, at, reason.to_string()));
                        return false;
                    }
                }
            }
        }
        false
    }

    /// Decode the frame `data[off..off + n]` onto `buf`, whole or not at all.
    fn decode(&mut self, off: usize, n: usize, buf: &mut Vec<u8>) -> Result<(), FrameError> {
        let src = &self.data[off..off + n];
        let declared = zstd::zstd_safe::get_frame_content_size(src)
            .ok()
            .flatten()
            .filter(|&len| len <= MAX_DIRECT_FRAME);
        if let Some(len) = declared
            && let Some(bulk) = bulk(&mut self.bulk)
        {
            // The bulk decoder writes from the start of its buffer.
            let out = if buf.is_empty() {
                &mut *buf
            } else {
                &mut self.tmp
            };
            out.clear();
            out.reserve(len as usize);
            if bulk.decompress_to_buffer(src, out).is_ok() {
                if !self.tmp.is_empty() {
                    buf.extend_from_slice(&self.tmp);
                    self.tmp.clear();
                }
                return Ok(());
            }
            // Decode it again below for the stream decoder's own account of the damage.
            out.clear();
        }
        zstd::stream::read::Decoder::with_buffer(src)
            .and_then(|d| d.single_frame().read_to_end(buf))
            .map(|_| ())
            .map_err(FrameError::Decode)
    }
}

fn bulk<'a>(
    slot: &'a mut Option<zstd::bulk::Decompressor<'static>>,
) -> Option<&'a mut zstd::bulk::Decompressor<'static>> {
    if slot.is_none() {
        *slot = zstd::bulk::Decompressor::new().ok();
    }
    slot.as_mut()
}

/// What [`Lines::next`] found.
pub(crate) enum LineRead<'a> {
    /// A whole line (without its newline) starting at this decoded offset.
    Line(u64, &'a [u8]),
    /// The text ends with this unfinished line (no newline) at this offset.
    Unfinished(u64, &'a [u8]),
    /// The end of the text.
    End,
}

/// What [`Lines::next_block`] found.
pub(crate) enum Block {
    /// Whole lines, each with its newline, the first starting at this decoded offset.
    Lines(u64, Vec<u8>),
    /// The text ends with an unfinished line (no newline).
    Unfinished,
    /// The end of the text.
    End,
}

/// The lines of a [`Source`]'s text, up to an optional cut.
pub(crate) struct Lines {
    pub(crate) src: Source,
    buf: Vec<u8>,
    /// Start of the next line in `buf`.
    pos: usize,
    /// Decoded offset of `buf[0]`.
    base: u64,
    /// Decoded offset the text is cut at.
    limit: u64,
    /// No more text will come.
    done: bool,
}

impl Lines {
    /// The lines of `src`'s text, cut at decoded offset `limit`.
    pub(crate) fn new(src: Source, limit: u64) -> Lines {
        Lines {
            src,
            buf: Vec::new(),
            pos: 0,
            base: 0,
            limit,
            done: false,
        }
    }

    /// The next line.
    pub(crate) fn next(&mut self) -> io::Result<LineRead<'_>> {
        loop {
            let rest = &self.buf[self.pos..];
            if let Some(nl) = memchr::memchr(b'\n', rest) {
                let start = self.pos;
                self.pos += nl + 1;
                return Ok(LineRead::Line(
                    self.base + start as u64,
                    &self.buf[start..start + nl],
                ));
            }
            if self.done {
                if rest.is_empty() {
                    return Ok(LineRead::End);
                }
                let start = self.pos;
                self.pos = self.buf.len();
                return Ok(LineRead::Unfinished(
                    self.base + start as u64,
                    &self.buf[start..],
                ));
            }
            self.refill()?;
        }
    }

    /// The next lines, whole and at least `min` bytes in all unless the text ends first, as one
    /// owned block (handed over, not copied: the buffer keeps only what follows the block).
    pub(crate) fn next_block(&mut self, min: usize) -> io::Result<Block> {
        loop {
            let rest = &self.buf[self.pos..];
            if self.done || rest.len() >= min {
                if let Some(nl) = memchr::memrchr(b'\n', rest) {
                    let start = self.base + self.pos as u64;
                    let cut = self.pos + nl + 1;
                    let mut tail = Vec::with_capacity(self.buf.len() - cut + (PIECE as usize));
                    tail.extend_from_slice(&self.buf[cut..]);
                    let mut block = std::mem::replace(&mut self.buf, tail);
                    block.truncate(cut);
                    block.drain(..self.pos);
                    self.base += cut as u64;
                    self.pos = 0;
                    return Ok(Block::Lines(start, block));
                }
                if self.done {
                    return Ok(if rest.is_empty() {
                        Block::End
                    } else {
                        Block::Unfinished
                    });
                }
            }
            self.refill()?;
        }
    }

    fn refill(&mut self) -> io::Result<()> {
        self.buf.drain(..self.pos);
        self.base += self.pos as u64;
        self.pos = 0;
        let end = self.base + self.buf.len() as u64;
        if end >= self.limit || !self.src.fill(&mut self.buf, end)? {
            self.done = true;
        }
        let cut = self.limit.saturating_sub(self.base);
        if (self.buf.len() as u64) > cut {
            self.buf.truncate(cut as usize);
            self.done = true;
        }
        Ok(())
    }

    /// Decoded offset of the next line.
    pub(crate) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Go back to decoded offset `at`, the start of a line read before (or the end of the text
    /// read so far): the next line is the one starting there, with the same offset, and a zstd
    /// file records its frames and damage again from the frame holding `at`, exactly as on the
    /// first reading.
    pub(crate) fn rewind(&mut self, at: u64) -> io::Result<()> {
        let start = self.src.rewind(at)?;
        self.buf.clear();
        self.pos = 0;
        self.base = start;
        self.done = false;
        while !self.done && self.base + (self.buf.len() as u64) < at {
            self.refill()?;
        }
        match usize::try_from(at - self.base) {
            Ok(skip) if skip <= self.buf.len() => {
                self.pos = skip;
                Ok(())
            }
            _ => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the file got shorter while it was read",
            )),
        }
    }

    /// Give back the source.
    pub(crate) fn into_source(self) -> Source {
        self.src
    }
}
