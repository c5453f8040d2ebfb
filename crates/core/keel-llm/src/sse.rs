//! Incremental Server-Sent Events parser.
//!
//! Bytes go in as they arrive from the network ([`SseParser::feed`]); complete events come out
//! ([`SseParser::next_event`]). It follows the SSE wire rules that matter for chat streams: lines
//! end with LF, CRLF or CR (a CRLF split across two reads counts once); lines starting with `:`
//! are comments; several `data:` lines of one event are joined with `\n`; one optional space after
//! the colon is dropped; a blank line ends an event. Events and UTF-8 sequences may be split
//! across reads anywhere: the parser works on bytes and decodes only complete events. An event's
//! size is bounded so a hostile stream cannot exhaust memory.

use memchr::memchr2;

/// Largest event keel accepts (64 MiB): far above any real chunk, below a memory problem.
pub const MAX_EVENT_BYTES: usize = 64 * 1024 * 1024;

/// Why the byte stream is not a readable event stream. The client maps both to
/// `MALFORMED_RESPONSE`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// An event's data is not valid UTF-8.
    #[error("event data is not valid UTF-8")]
    InvalidUtf8,
    /// An event (or a single line) grew past [`MAX_EVENT_BYTES`].
    #[error("event larger than {MAX_EVENT_BYTES} bytes")]
    TooLarge,
}

/// One complete event, borrowed from the parser until the next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The `event:` field, empty when absent.
    pub event: &'a str,
    /// The joined `data:` lines.
    pub data: &'a str,
}

/// The incremental parser. See the module docs.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    /// Start of the first unprocessed line in `buf`.
    pos: usize,
    /// `buf[pos..scanned]` is known to hold no line terminator.
    scanned: usize,
    /// The previous line ended with CR: an LF right after it belongs to it.
    pending_cr: bool,
    data: Vec<u8>,
    has_data: bool,
    event: Vec<u8>,
    /// The last event was handed out: reset `data`/`event` before parsing more.
    dispatched: bool,
}

impl SseParser {
    /// An empty parser.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends bytes read from the network.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.scanned -= self.pos;
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete event, if the bytes fed so far hold one.
    pub fn next_event(&mut self) -> Option<Result<SseEvent<'_>, SseError>> {
        self.reset_if_dispatched();
        loop {
            let Some(line_end) = self.next_line_end() else {
                if self.buf.len() - self.pos > MAX_EVENT_BYTES {
                    return Some(Err(SseError::TooLarge));
                }
                return None;
            };
            let (start, end) = (self.pos, line_end.0);
            self.pos = line_end.1;
            self.scanned = self.pos;
            match self.take_line(start, end) {
                Ok(true) => return Some(self.dispatch()),
                Ok(false) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// Call at end of stream: an unterminated last line is processed, and an event that has data
    /// but lacks its closing blank line is still returned.
    pub fn finish(&mut self) -> Option<Result<SseEvent<'_>, SseError>> {
        self.reset_if_dispatched();
        if self.pos < self.buf.len() {
            let (start, end) = (self.pos, self.buf.len());
            self.pos = end;
            self.scanned = end;
            match self.take_line(start, end) {
                Ok(true) => return Some(self.dispatch()),
                Ok(false) => {}
                Err(e) => return Some(Err(e)),
            }
        }
        if self.has_data {
            Some(self.dispatch())
        } else {
            None
        }
    }

    fn reset_if_dispatched(&mut self) {
        if self.dispatched {
            self.dispatched = false;
            self.data.clear();
            self.event.clear();
            self.has_data = false;
        }
    }

    /// (end of line content, start of next line) for the next complete line.
    fn next_line_end(&mut self) -> Option<(usize, usize)> {
        if self.pending_cr && self.pos < self.buf.len() {
            self.pending_cr = false;
            if self.buf[self.pos] == b'\n' {
                self.pos += 1;
                self.scanned = self.scanned.max(self.pos);
            }
        }
        let from = self.scanned.max(self.pos);
        match memchr2(b'\n', b'\r', self.buf.get(from..).unwrap_or_default()) {
            None => {
                self.scanned = self.buf.len();
                None
            }
            Some(i) => {
                let at = from + i;
                if self.buf[at] == b'\n' {
                    return Some((at, at + 1));
                }
                match self.buf.get(at + 1) {
                    Some(b'\n') => Some((at, at + 2)),
                    Some(_) => Some((at, at + 1)),
                    None => {
                        self.pending_cr = true;
                        Some((at, at + 1))
                    }
                }
            }
        }
    }

    /// Processes one line; `Ok(true)` when it completes an event.
    fn take_line(&mut self, start: usize, end: usize) -> Result<bool, SseError> {
        let line = &self.buf[start..end];
        if line.is_empty() {
            return Ok(self.has_data);
        }
        if line[0] == b':' {
            return Ok(false);
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &[][..]),
        };
        match field {
            b"data" => {
                if self.data.len() + value.len() + 1 > MAX_EVENT_BYTES {
                    return Err(SseError::TooLarge);
                }
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => {
                self.event.clear();
                self.event.extend_from_slice(value);
            }
            _ => {} // id, retry and unknown fields do not matter to chat streams
        }
        Ok(false)
    }

    fn dispatch(&mut self) -> Result<SseEvent<'_>, SseError> {
        self.dispatched = true;
        let data = std::str::from_utf8(&self.data).map_err(|_| SseError::InvalidUtf8)?;
        let event = std::str::from_utf8(&self.event).map_err(|_| SseError::InvalidUtf8)?;
        Ok(SseEvent { event, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;

    fn parse_in_pieces(input: &[u8], cuts: &[usize]) -> Vec<Result<(String, String), SseError>> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        let mut last = 0;
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
        points.sort_unstable();
        points.push(input.len());
        for p in points {
            parser.feed(&input[last..p]);
            last = p;
            while let Some(ev) = parser.next_event() {
                out.push(ev.map(|e| (e.event.to_owned(), e.data.to_owned())));
            }
        }
        while let Some(ev) = parser.finish() {
            out.push(ev.map(|e| (e.event.to_owned(), e.data.to_owned())));
        }
        out
    }

    fn ok(event: &str, data: &str) -> Result<(String, String), SseError> {
        Ok((event.to_owned(), data.to_owned()))
    }

    #[test]
    fn comments_crlf_cr_multiline_and_fields() {
        let input = b": keep-alive\r\n\r\ndata: a\r\ndata:b\r\n\r\nevent: error\rdata:  two spaces\r\rid: 7\nretry: 10\nnoval\ndata\n\n";
        assert_eq!(
            parse_in_pieces(input, &[]),
            vec![ok("", "a\nb"), ok("error", " two spaces"), ok("", "")]
        );
    }

    #[test]
    fn crlf_split_between_reads_is_one_line_end() {
        let input = b"data: x\r\n\r\ndata: y\r\n\r\n";
        for cut in 0..=input.len() {
            assert_eq!(
                parse_in_pieces(input, &[cut]),
                vec![ok("", "x"), ok("", "y")],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn utf8_split_across_reads() {
        let input = "data: héllo 🌍 wörld\n\n".as_bytes();
        for cut in 0..=input.len() {
            assert_eq!(
                parse_in_pieces(input, &[cut]),
                vec![ok("", "héllo 🌍 wörld")]
            );
        }
    }

    #[test]
    fn unterminated_event_at_eof_is_still_returned_and_invalid_utf8_is_an_error() {
        assert_eq!(
            parse_in_pieces(b"data: [DONE]", &[]),
            vec![ok("", "[DONE]")]
        );
        assert_eq!(parse_in_pieces(b"data: a\n", &[]), vec![ok("", "a")]);
        assert_eq!(
            parse_in_pieces(b"data: \xff\xfe\n\n", &[]),
            vec![Err(SseError::InvalidUtf8)]
        );
        assert_eq!(parse_in_pieces(b"", &[]), vec![]);
    }

    #[test]
    fn oversized_line_is_an_error_not_an_allocation_spiral() {
        let mut parser = SseParser::new();
        let chunk = vec![b'a'; 1024 * 1024];
        let mut err = None;
        parser.feed(b"data: ");
        for _ in 0..70 {
            parser.feed(&chunk);
            if let Some(Err(e)) = parser.next_event() {
                err = Some(e);
                break;
            }
        }
        assert_eq!(err, Some(SseError::TooLarge));
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_events(
            datas in proptest::collection::vec("[a-zé🌍 :\\n]{0,20}", 1..6),
            crlf in any::<bool>(),
            cuts in proptest::collection::vec(0usize..10_000, 0..8),
        ) {
            let nl = if crlf { "\r\n" } else { "\n" };
            let mut input = String::new();
            let mut expected = Vec::new();
            for d in &datas {
                input.push_str(": c");
                input.push_str(nl);
                for line in d.split('\n') {
                    input.push_str("data: ");
                    input.push_str(line);
                    input.push_str(nl);
                }
                input.push_str(nl);
                expected.push(ok("", d));
            }
            prop_assert_eq!(parse_in_pieces(input.as_bytes(), &cuts), expected);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), cuts in proptest::collection::vec(0usize..600, 0..6)) {
            let _ = parse_in_pieces(&bytes, &cuts);
        }
    }
}
