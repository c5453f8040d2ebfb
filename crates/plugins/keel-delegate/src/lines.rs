//! Lines assembled from the chunks a child writes on stdout, with a bound on an unfinished
//! line: one longer than the bound is dropped whole (reported once as [`Piece::Oversized`]), so
//! memory stays bounded whatever the child writes. Used by the keel provider's stream reader
//! and the consult follower.

/// What [`LineBuffer::feed`] hands over.
pub(crate) enum Piece<'a> {
    /// One whole line, without its newline.
    Line(&'a [u8]),
    /// A line outgrew the bound; it is skipped up to its newline.
    Oversized,
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct LineBuffer {
    partial: Vec<u8>,
    skipping: bool,
    max: usize,
}

impl LineBuffer {
    /// A buffer dropping unfinished lines longer than `max` bytes.
    pub(crate) fn new(max: usize) -> Self {
        LineBuffer {
            partial: Vec::new(),
            skipping: false,
            max,
        }
    }

    /// Take `bytes`; every line they finish goes to `out`.
    pub(crate) fn feed(&mut self, mut bytes: &[u8], mut out: impl FnMut(Piece<'_>)) {
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
    pub(crate) fn finish(&mut self, mut out: impl FnMut(Piece<'_>)) {
        let line = std::mem::take(&mut self.partial);
        if !line.is_empty() && !self.skipping {
            out(Piece::Line(&line));
        }
        self.skipping = false;
    }

    /// Bytes held for an unfinished line (capacity).
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.partial.capacity()
    }

    /// Forget an unfinished line (its writer is gone).
    pub(crate) fn clear(&mut self) {
        self.partial.clear();
        self.skipping = false;
    }
}
