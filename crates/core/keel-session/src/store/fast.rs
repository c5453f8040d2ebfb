//! A hand-written reader for the line shapes that make up almost all of a session file.
//!
//! Packed rows (`text-chunks`, `reasoning-chunks`, `tool-call-chunks`) and delta
//! `assistant/chunk` lines are read in one pass straight into the loader's [`Scratch`] buffers;
//! every other event has its envelope read here and its `data` handed to
//! [`EventBody::parse`] as one slice, so no byte is run through serde twice.
//!
//! The contract with the general reader ([`super::parse`]) is exact: [`parse`] returns `None`
//! for anything it does not fully check (another key order, unknown or duplicate keys, `null`s,
//! escapes in keys, numbers that are not plain integers, deep nesting, any error), and the
//! caller then reads the line the general way, which also words every error. When it returns a
//! line, the general reader would have returned the same one.

use super::parse::{Line, Row, Scratch};
use crate::record::Delta;
use keel_protocol::{EventBody, PackedKind, Seq, SessionEvent, SurfaceOp};
use keel_protocol::{StepNo, TurnNo};

/// Deepest nesting of a skipped `data` value this reader accepts (serde_json refuses 128).
const MAX_DEPTH: usize = 100;

/// A position in one line.
struct Cur<'a> {
    line: &'a str,
    s: &'a [u8],
    i: usize,
}

impl<'a> Cur<'a> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.i) {
            self.i += 1;
        }
    }

    /// The next non-blank byte, not consumed.
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        (self.peek()? == b).then(|| self.i += 1)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.ws();
        let end = self.i + word.len();
        (self.s.get(self.i..end)? == word).then(|| self.i = end)
    }

    /// A string without escapes or control characters, borrowed (keys, type names, and the
    /// common case of texts).
    fn plain_str(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        loop {
            match *self.s.get(self.i)? {
                b'"' => break,
                b'\\' | 0..0x20 => return None,
                _ => self.i += 1,
            }
        }
        // Both ends are at ASCII bytes of a `str`, so at char boundaries.
        let out = self.line.get(start..self.i)?;
        self.i += 1;
        Some(out)
    }

    /// A string, unescaped onto `out`.
    fn str_into(&mut self, out: &mut String) -> Option<()> {
        self.eat(b'"')?;
        let mut start = self.i;
        loop {
            match *self.s.get(self.i)? {
                b'"' => break,
                b'\\' => {
                    out.push_str(self.line.get(start..self.i)?);
                    self.i += 1;
                    self.escape(out)?;
                    start = self.i;
                }
                0..0x20 => return None,
                _ => self.i += 1,
            }
        }
        out.push_str(self.line.get(start..self.i)?);
        self.i += 1;
        Some(())
    }

    /// The escape after a backslash.
    fn escape(&mut self, out: &mut String) -> Option<()> {
        let c = match *self.s.get(self.i)? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                self.i += 1;
                let hi = self.hex4()?;
                let c = match hi {
                    0xD800..=0xDBFF => {
                        if self.s.get(self.i..self.i + 2)? != b"\\u" {
                            return None;
                        }
                        self.i += 2;
                        let lo = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&lo) {
                            return None;
                        }
                        0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                    }
                    0xDC00..=0xDFFF => return None,
                    c => c,
                };
                out.push(char::from_u32(c)?);
                return Some(());
            }
            _ => return None,
        };
        self.i += 1;
        out.push(c);
        Some(())
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.s.get(self.i..self.i + 4)?;
        let mut v = 0;
        for &d in digits {
            v = v * 16 + char::from(d).to_digit(16)?;
        }
        self.i += 4;
        Some(v)
    }

    /// Plain digits: `0` or `[1-9][0-9]{0,17}`, not followed by a fraction or an exponent.
    fn digits(&mut self) -> Option<u64> {
        let start = self.i;
        let mut v: u64 = 0;
        while let Some(&d @ b'0'..=b'9') = self.s.get(self.i) {
            v = v.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
            self.i += 1;
        }
        let n = self.i - start;
        let leading_zero = n > 1 && self.s[start] == b'0';
        if n == 0 || n > 18 || leading_zero {
            return None;
        }
        match self.s.get(self.i) {
            Some(b'.' | b'e' | b'E') => None,
            _ => Some(v),
        }
    }

    fn u64(&mut self) -> Option<u64> {
        self.ws();
        self.digits()
    }

    fn u32(&mut self) -> Option<u32> {
        u32::try_from(self.u64()?).ok()
    }

    fn i64(&mut self) -> Option<i64> {
        self.ws();
        let negative = self.s.get(self.i) == Some(&b'-');
        if negative {
            self.i += 1;
        }
        let v = i64::try_from(self.digits()?).ok()?;
        match (negative, v) {
            (true, 0) => None,
            (true, v) => Some(-v),
            (false, v) => Some(v),
        }
    }

    fn bool(&mut self) -> Option<bool> {
        match self.peek()? {
            b't' => self.literal(b"true").map(|()| true),
            b'f' => self.literal(b"false").map(|()| false),
            _ => None,
        }
    }

    /// After a member: `true` when another follows (`,`), `false` at the closing `close`.
    fn more(&mut self, close: u8) -> Option<bool> {
        match self.peek()? {
            b',' => {
                self.i += 1;
                Some(true)
            }
            b if b == close => {
                self.i += 1;
                Some(false)
            }
            _ => None,
        }
    }

    /// Open an object and say whether it has members.
    fn open(&mut self, open: u8, close: u8) -> Option<bool> {
        self.eat(open)?;
        if self.peek()? == close {
            self.i += 1;
            Some(false)
        } else {
            Some(true)
        }
    }

    /// `"key":`.
    fn key(&mut self) -> Option<&'a str> {
        let k = self.plain_str()?;
        self.eat(b':')?;
        Some(k)
    }

    /// Skip one value without checking it, returning its text. The caller parses that text,
    /// which checks it; for valid JSON the end found here is the value's end.
    fn skip_value(&mut self) -> Option<&'a str> {
        self.ws();
        let start = self.i;
        match *self.s.get(self.i)? {
            b'"' => self.skip_str()?,
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match *self.s.get(self.i)? {
                        b'"' => {
                            self.skip_str()?;
                            continue;
                        }
                        b'{' | b'[' => {
                            depth += 1;
                            if depth > MAX_DEPTH {
                                return None;
                            }
                        }
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.i += 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                    self.i += 1;
                }
            }
            _ => {
                while !matches!(
                    self.s.get(self.i),
                    None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
                ) {
                    self.i += 1;
                }
            }
        }
        self.line.get(start..self.i)
    }

    /// The `data` of an event of type `ty`, parsed in place.
    fn body(&mut self, ty: &str) -> Option<EventBody> {
        let (body, n) = EventBody::parse_prefix(ty, self.line.get(self.i..)?).ok()?;
        self.i += n;
        Some(body)
    }

    fn skip_str(&mut self) -> Option<()> {
        self.i += 1;
        loop {
            let rest = self.s.get(self.i..)?;
            let at = memchr::memchr2(b'"', b'\\', rest)?;
            self.i += at + 1;
            if rest[at] == b'"' {
                return Some(());
            }
            self.i += 1;
        }
    }

    fn at_end(&mut self) -> bool {
        self.ws();
        self.i == self.s.len()
    }
}

/// Set a field seen once; a second sighting fails.
fn once<T>(slot: &mut Option<T>, v: T) -> Option<()> {
    match slot {
        Some(_) => None,
        None => {
            *slot = Some(v);
            Some(())
        }
    }
}

/// What the envelope's `data` turned out to be.
enum Data<'a> {
    Row(RowData),
    Delta(DeltaData<'a>),
    /// Any other event's data, parsed by its type.
    Body(EventBody),
}

/// A line read the fast way; its strings may be in the scratch buffers.
pub(crate) enum Fast<'a> {
    Event(SessionEvent),
    Delta(u64, i64, DeltaData<'a>),
    Row(PackedKind, u64, i64, RowData),
}

impl<'a> Fast<'a> {
    /// The line, with its strings taken from `scratch` (the one `parse` filled).
    pub(crate) fn resolve(self, scratch: &'a Scratch) -> Line<'a> {
        match self {
            Fast::Event(e) => Line::Event(e),
            Fast::Delta(seq, time, d) => Line::Delta(scratch.delta(seq, time, &d)),
            Fast::Row(kind, seq0, time0, d) => Line::Row(scratch.row(kind, seq0, time0, &d)),
        }
    }
}

/// Read one event line the fast way, or `None` to send it down the general path.
pub(crate) fn parse<'a>(line: &'a str, scratch: &mut Scratch) -> Option<Fast<'a>> {
    let mut c = Cur {
        line,
        s: line.as_bytes(),
        i: 0,
    };
    let mut ty: Option<&str> = None;
    let mut seq = None;
    let mut time = None;
    let mut seq0 = None;
    let mut time0 = None;
    let mut data = None;
    let mut ignorable = None;
    let mut surface_op = None;
    let mut sources = None;
    scratch.clear();
    if c.open(b'{', b'}')? {
        loop {
            match c.key()? {
                "type" => once(&mut ty, c.plain_str()?)?,
                "seq" => once(&mut seq, c.u64()?)?,
                "time" => once(&mut time, c.i64()?)?,
                "seq0" => once(&mut seq0, c.u64()?)?,
                "time0" => once(&mut time0, c.i64()?)?,
                "data" => {
                    let d = match PackedKind::from_type_name(ty?) {
                        Some(_) => Data::Row(row_data(&mut c, scratch)?),
                        None if ty? == "assistant/chunk" => {
                            let at = c.i;
                            match delta_data(&mut c, scratch) {
                                Ok(d) => Data::Delta(d),
                                Err(Miss::NotDelta) => {
                                    c.i = at;
                                    scratch.clear();
                                    Data::Body(c.body(ty?)?)
                                }
                                Err(Miss::Bail) => return None,
                            }
                        }
                        None => Data::Body(c.body(ty?)?),
                    };
                    once(&mut data, d)?
                }
                "ignorable" => once(&mut ignorable, c.bool()?)?,
                "surfaceOp" => once(&mut surface_op, c.skip_value()?)?,
                "sourceEventSeqs" => once(&mut sources, c.skip_value()?)?,
                _ => return None,
            }
            if !c.more(b'}')? {
                break;
            }
        }
    }
    if !c.at_end() {
        return None;
    }
    let ty = ty?;
    if let Some(kind) = PackedKind::from_type_name(ty) {
        // The general reader parses but ignores these on a row; leave them to it.
        if ignorable.is_some() || surface_op.is_some() || sources.is_some() {
            return None;
        }
        let Some(Data::Row(d)) = data else {
            return None;
        };
        return Some(Fast::Row(kind, seq0?, time0?, d));
    }
    let (seq, time) = (seq?, time?);
    let plain = ignorable != Some(true) && surface_op.is_none() && sources.is_none();
    let body = match data {
        Some(Data::Delta(d)) if plain => {
            return Some(Fast::Delta(seq, time, d));
        }
        Some(Data::Delta(_)) | Some(Data::Row(_)) => return None,
        Some(Data::Body(body)) => body,
        None => EventBody::parse(ty, "null").ok()?,
    };
    let surface_op = match surface_op {
        Some(text) => Some(serde_json::from_str::<SurfaceOp>(text).ok()?),
        None => None,
    };
    let source_event_seqs = match sources {
        Some(text) => serde_json::from_str::<Vec<Seq>>(text).ok()?,
        None => Vec::new(),
    };
    Some(Fast::Event(SessionEvent {
        seq: Seq(seq),
        time,
        body,
        ignorable: ignorable.unwrap_or(false),
        surface_op,
        source_event_seqs,
    }))
}

/// A packed row's `data`; its texts, id and name are in the scratch buffers.
pub(crate) struct RowData {
    pub(crate) turn: TurnNo,
    pub(crate) step: StepNo,
    pub(crate) index: u32,
    /// Byte ranges of id and name in `scratch.aux`.
    pub(crate) id: Option<(usize, usize)>,
    pub(crate) name: Option<(usize, usize)>,
}

fn row_data(c: &mut Cur<'_>, scratch: &mut Scratch) -> Option<RowData> {
    let (mut turn, mut step, mut index) = (None, None, None);
    let (mut dt, mut texts, mut id, mut name) = (None, None, None, None);
    if c.open(b'{', b'}')? {
        loop {
            match c.key()? {
                "turn" => once(&mut turn, c.u32()?)?,
                "step" => once(&mut step, c.u32()?)?,
                "index" => once(&mut index, c.u32()?)?,
                "dt" => {
                    once(&mut dt, ())?;
                    if c.open(b'[', b']')? {
                        loop {
                            scratch.dt.push(c.i64()?);
                            if !c.more(b']')? {
                                break;
                            }
                        }
                    }
                }
                // Both present: the general reader takes `texts`; leave that to it.
                "texts" | "args" => {
                    once(&mut texts, ())?;
                    if c.open(b'[', b']')? {
                        loop {
                            c.str_into(&mut scratch.text)?;
                            scratch.ends.push(scratch.text.len());
                            if !c.more(b']')? {
                                break;
                            }
                        }
                    }
                }
                "id" => once(&mut id, aux_str(c, scratch)?)?,
                "name" => once(&mut name, aux_str(c, scratch)?)?,
                _ => return None,
            }
            if !c.more(b'}')? {
                break;
            }
        }
    }
    Some(RowData {
        turn: TurnNo(turn?),
        step: StepNo(step?),
        index: index?,
        id,
        name,
    })
}

fn aux_str(c: &mut Cur<'_>, scratch: &mut Scratch) -> Option<(usize, usize)> {
    let start = scratch.aux.len();
    c.str_into(&mut scratch.aux)?;
    Some((start, scratch.aux.len()))
}

/// A delta chunk's `data`: `{turn, step, chunk: {type, index, text | argumentsDelta, id, name}}`.
pub(crate) struct DeltaData<'a> {
    pub(crate) kind: PackedKind,
    pub(crate) turn: TurnNo,
    pub(crate) step: StepNo,
    pub(crate) index: u32,
    pub(crate) text: Text<'a>,
    pub(crate) id: Option<(usize, usize)>,
    pub(crate) name: Option<(usize, usize)>,
}

/// A delta's text: borrowed from the line, or unescaped into `scratch.text`.
pub(crate) enum Text<'a> {
    Line(&'a str),
    Scratch,
}

/// Why a chunk was not read as a delta.
enum Miss {
    /// Its type is not a delta type: the general reader makes an event of it too.
    NotDelta,
    /// Anything else: leave the whole line to the general reader.
    Bail,
}

fn delta_data<'a>(c: &mut Cur<'a>, scratch: &mut Scratch) -> Result<DeltaData<'a>, Miss> {
    let (mut turn, mut step, mut chunk) = (None, None, None);
    let bail = |o: Option<()>| o.ok_or(Miss::Bail);
    if c.open(b'{', b'}').ok_or(Miss::Bail)? {
        loop {
            match c.key().ok_or(Miss::Bail)? {
                "turn" => bail(once(&mut turn, c.u32().ok_or(Miss::Bail)?))?,
                "step" => bail(once(&mut step, c.u32().ok_or(Miss::Bail)?))?,
                "chunk" => bail(once(&mut chunk, delta_chunk(c, scratch)?))?,
                _ => return Err(Miss::Bail),
            }
            if !c.more(b'}').ok_or(Miss::Bail)? {
                break;
            }
        }
    }
    let (kind, index, text, id, name) = chunk.ok_or(Miss::Bail)?;
    Ok(DeltaData {
        kind,
        turn: TurnNo(turn.ok_or(Miss::Bail)?),
        step: StepNo(step.ok_or(Miss::Bail)?),
        index,
        text,
        id,
        name,
    })
}

type ChunkFields<'a> = (
    PackedKind,
    u32,
    Text<'a>,
    Option<(usize, usize)>,
    Option<(usize, usize)>,
);

fn delta_chunk<'a>(c: &mut Cur<'a>, scratch: &mut Scratch) -> Result<ChunkFields<'a>, Miss> {
    let mut ty = None;
    let fields = delta_fields(c, scratch, &mut ty);
    match (fields, ty) {
        (Some(f), _) => Ok(f),
        (None, Some("text-delta" | "reasoning-delta" | "tool-call-delta") | None) => {
            Err(Miss::Bail)
        }
        (None, Some(_)) => Err(Miss::NotDelta),
    }
}

/// The fields of a delta chunk; `ty` is its type once read.
fn delta_fields<'a>(
    c: &mut Cur<'a>,
    scratch: &mut Scratch,
    ty: &mut Option<&'a str>,
) -> Option<ChunkFields<'a>> {
    let (mut index, mut text, mut args, mut id, mut name) = (None, None, None, None, None);
    let read_text = |c: &mut Cur<'a>, scratch: &mut Scratch| -> Option<Text<'a>> {
        let at = c.i;
        if let Some(s) = c.plain_str() {
            return Some(Text::Line(s));
        }
        c.i = at;
        // Only one text per chunk goes to the scratch buffer.
        if !scratch.text.is_empty() {
            return None;
        }
        c.str_into(&mut scratch.text)?;
        Some(Text::Scratch)
    };
    if c.open(b'{', b'}')? {
        loop {
            match c.key()? {
                "type" => once(ty, c.plain_str()?)?,
                "index" => once(&mut index, c.u32()?)?,
                "text" => once(&mut text, read_text(c, scratch)?)?,
                "argumentsDelta" => once(&mut args, read_text(c, scratch)?)?,
                "id" => once(&mut id, aux_str(c, scratch)?)?,
                "name" => once(&mut name, aux_str(c, scratch)?)?,
                _ => return None,
            }
            if !c.more(b'}')? {
                break;
            }
        }
    }
    let index = index?;
    match (*ty)? {
        "text-delta" if args.is_none() && id.is_none() && name.is_none() => {
            Some((PackedKind::Text, index, text?, None, None))
        }
        "reasoning-delta" if args.is_none() && id.is_none() && name.is_none() => {
            Some((PackedKind::Reasoning, index, text?, None, None))
        }
        "tool-call-delta" if text.is_none() => Some((
            PackedKind::ToolCall,
            index,
            args.unwrap_or(Text::Line("")),
            id,
            name,
        )),
        _ => None,
    }
}

impl Scratch {
    fn row(&self, kind: PackedKind, seq0: u64, time0: i64, d: &RowData) -> Row<'_> {
        Row {
            kind,
            seq0,
            time0,
            turn: d.turn,
            step: d.step,
            index: d.index,
            id: d.id.map(|(a, b)| &self.aux[a..b]),
            name: d.name.map(|(a, b)| &self.aux[a..b]),
            dt: &self.dt,
            text: &self.text,
            ends: &self.ends,
        }
    }

    fn delta<'a>(&'a self, seq: u64, time: i64, d: &DeltaData<'a>) -> Delta<'a> {
        Delta {
            kind: d.kind,
            seq,
            time,
            turn: d.turn,
            step: d.step,
            index: d.index,
            id: d.id.map(|(a, b)| &self.aux[a..b]),
            name: d.name.map(|(a, b)| &self.aux[a..b]),
            text: match d.text {
                Text::Line(s) => s,
                Text::Scratch => &self.text,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    //! The fast reader against the general one: whenever the fast reader returns a line, the
    //! general reader returns the same one, on real and synthetic lines and on mutations of them.

    use super::super::parse::{Line, Scratch, parse_general};
    use crate::record::Delta;
    use crate::store::encode::encode_records;
    use crate::synth::{SynthOptions, generate};
    use pretty_assertions::assert_eq;
    use rand::{Rng, SeedableRng};
    use serde_json::{Value, json};

    fn delta(d: &Delta<'_>) -> Value {
        json!({ "delta": [
            d.kind.type_name(), d.seq, d.time, d.turn, d.step, d.index, d.id, d.name, d.text
        ] })
    }

    /// What the session makes of a line: an event it stores as a delta counts as that delta.
    fn repr(line: Line<'_>) -> Value {
        match line {
            Line::Event(e) => match Delta::of_event(&e) {
                Some(d) => delta(&d),
                None => json!({ "event": serde_json::to_value(&e).unwrap() }),
            },
            Line::Delta(d) => delta(&d),
            Line::Row(r) => {
                let texts: Vec<&str> = (0..r.len()).map(|i| r.text(i)).collect();
                json!({ "row": [
                    r.kind.type_name(), r.seq0, r.time0, r.turn, r.step, r.index, r.id, r.name,
                    r.dt, texts
                ] })
            }
        }
    }

    /// The fast reading of `line`, if any, checked against the general one.
    fn check(line: &str) -> bool {
        let mut s1 = Scratch::default();
        let mut s2 = Scratch::default();
        let Some(fast) = super::parse(line, &mut s1) else {
            return false;
        };
        let fast = repr(fast.resolve(&s1));
        let general = parse_general(line, &mut s2).map(repr).unwrap_or_else(|e| {
            panic!("fast path accepted what the general one refuses ({e}): {line}")
        });
        assert_eq!(fast, general, "{line}");
        true
    }

    fn corpus() -> (Vec<String>, usize) {
        let session = generate(&SynthOptions {
            events: 600,
            ..SynthOptions::default()
        })
        .unwrap();
        let mut buf = Vec::new();
        encode_records(session.records().records(), 0, &mut buf).unwrap();
        let mut lines: Vec<String> = String::from_utf8(buf)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        let synthetic = lines.len();
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../testdata/dsh-sessions");
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            for name in ["session.plain.jsonl", "session.jsonl"] {
                if let Ok(text) = std::fs::read_to_string(entry.path().join(name)) {
                    lines.extend(text.lines().skip(1).map(str::to_owned));
                }
            }
        }
        lines.extend(
            [
                r#"{"type":"text-chunks","seq0":3,"time0":-7,"data":{"turn":1,"step":2,"index":0,"dt":[1,-2,0],"texts":["a\n\"b\"","\u00e9\ud83d\ude00 x","\\\/\b\f\r\t",""]}}"#,
                r#" { "data" : {"index":4,"texts":[],"step":1,"turn":1} , "seq0":0 ,"time0":0, "type":"text-chunks" } "#,
                r#"{"type":"tool-call-chunks","seq0":9,"time0":5,"data":{"turn":1,"step":1,"index":2,"dt":[0],"id":"c\"1","name":"bash","args":["{\"a\":","1}"]}}"#,
                r#"{"type":"reasoning-chunks","seq0":1,"time0":1,"data":{"turn":1,"step":1,"index":0,"texts":["a"],"args":["b"]}}"#,
                r#"{"type":"text-chunks","seq0":1,"time0":1,"seq":4,"data":{"turn":1,"step":1,"index":0,"texts":["a"]},"ignorable":true}"#,
                r#"{"type":"assistant/chunk","seq":5,"time":6,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"x\ty"}}}"#,
                r#"{"type":"assistant/chunk","seq":5,"time":6,"data":{"chunk":{"text":"q","index":0,"type":"reasoning-delta"},"step":1,"turn":1}}"#,
                r#"{"type":"assistant/chunk","seq":5,"time":6,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":2,"id":"c","name":"n"}}}"#,
                r#"{"type":"assistant/chunk","seq":5,"time":6,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"x","id":"c"}}}"#,
                r#"{"type":"assistant/chunk","seq":5,"time":6,"ignorable":true,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"x"}}}"#,
                r#"{"type":"assistant/chunk","seq":5,"time":6,"data":{"turn":1,"step":1,"chunk":{"type":"block-start","index":0,"blockType":"text"}}}"#,
                r#"{"type":"future/x","seq":1,"time":2,"ignorable":true,"data":{"v":[1,{"w":null}]}}"#,
                r#"{"type":"turn/start","seq":1,"time":2}"#,
                r#"{"type":"turn/start","seq":1,"time":2,"data":{"turn":1},"seq0":null}"#,
                r#"{"type":"user/message","seq":4,"time":5,"data":{"role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"id":"u"},"surfaceOp":{"op":"replace","start":1,"end":2},"sourceEventSeqs":[1,2]}"#,
                r#"{"type":"turn/start","seq":01,"time":2,"data":{"turn":1}}"#,
                r#"{"type":"turn/start","seq":1.0,"time":2,"data":{"turn":1}}"#,
                r#"{"type":"turn/start","seq":1,"time":-0,"data":{"turn":1}}"#,
                r#"{"type":"turn/start","seq":1,"seq":1,"time":2,"data":{"turn":1}}"#,
                r#"{"type":"turn/start","seq":99999999999999999999,"time":2,"data":{"turn":1}}"#,
                r#"{"type":"session/title","seq":0,"time":1,"data":{"title":"\ud800"}}"#,
            ]
            .map(str::to_owned),
        );
        (lines, synthetic)
    }

    #[test]
    fn fast_reader_agrees_with_the_general_one() {
        let (lines, synthetic) = corpus();
        let taken = lines.iter().filter(|l| check(l)).count();
        // Every line keel writes takes the fast path.
        assert!(lines[..synthetic].iter().all(|l| check(l)));
        assert!(taken > synthetic);
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        const BYTES: &[u8] = b" \"\\{}[],:0159-.eEnulltrfa\x01\x7f";
        for _ in 0..40_000 {
            let mut b = lines[rng.gen_range(0..lines.len())].clone().into_bytes();
            for _ in 0..rng.gen_range(1..4) {
                let at = rng.gen_range(0..=b.len());
                match rng.gen_range(0..3) {
                    0 => b.insert(at, BYTES[rng.gen_range(0..BYTES.len())]),
                    1 if at < b.len() => {
                        b.remove(at);
                    }
                    _ if at < b.len() => b[at] = BYTES[rng.gen_range(0..BYTES.len())],
                    _ => {}
                }
            }
            if let Ok(line) = String::from_utf8(b) {
                check(&line);
            }
        }
    }
}
