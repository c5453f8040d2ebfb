//! Receipts: one capture made tamper-evident. A receipt is the capture plus `run_id`, `sequence`,
//! `payload_sha256` and `previous_receipt_sha256`; its id is `receipt_` + the hex SHA-256 of the
//! JCS bytes of all of that (everything but `receipt_id`). One receipt is one line of
//! `receipts.jsonl`: the JCS bytes of the receipt *with* its `receipt_id`.
//!
//! [`encode`] builds a receipt from borrowed pieces in one pass (the payload is canonicalized once
//! and never copied into a tree); [`decode_line`] is its inverse and checks everything a line can
//! check on its own: canonical form, receipt hash, payload hash.

use crate::model::{Binding, Disposition, Origin, Stage};
use keel_jcs::digest::{is_sha256_hex, push_hex, sha256_hex};
use keel_jcs::{JcsError, Payload};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Prefix of receipt ids.
pub const RECEIPT_PREFIX: &str = "receipt_";

/// A receipt without its payload (the payload lives only in the journal line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// `receipt_` + hex SHA-256 of the receipt's data.
    pub receipt_id: String,
    /// The run (session) this receipt belongs to.
    pub run_id: String,
    /// Position in the run's chain, from 0.
    pub sequence: u64,
    /// The boundary observed.
    pub stage: Stage,
    /// The native identity at that boundary (call id, event id, execution token).
    pub native_id: String,
    /// What happened there (`commit`, `allow`, `deny`, `return`, `replace_value`…).
    pub transform: String,
    /// Origin → outcome relations.
    pub bindings: Vec<Binding>,
    /// Names under which outcome 0 can be queried (call id, event id).
    pub outcome_aliases: Vec<String>,
    /// Hex SHA-256 of the JCS bytes of the payload.
    pub payload_sha256: String,
    /// Hex SHA-256 of the previous receipt of the run, `None` for sequence 0.
    pub previous_receipt_sha256: Option<String>,
}

impl Receipt {
    /// The hex SHA-256 part of the id (what the next receipt chains to).
    pub fn sha256(&self) -> &str {
        self.receipt_id.get(RECEIPT_PREFIX.len()..).unwrap_or("")
    }
}

/// The capture fields of a receipt to encode.
#[derive(Debug, Clone, Copy)]
pub struct ReceiptInput<'a> {
    /// Run id.
    pub run_id: &'a str,
    /// Sequence.
    pub sequence: u64,
    /// Stage.
    pub stage: Stage,
    /// Native id.
    pub native_id: &'a str,
    /// Transform.
    pub transform: &'a str,
    /// Bindings.
    pub bindings: &'a [Binding],
    /// Outcome aliases.
    pub outcome_aliases: &'a [String],
    /// Previous receipt's hex SHA-256.
    pub previous: Option<&'a str>,
}

/// A receipt's fields, borrowed: what the graph compiles from. Capture builds one from its
/// [`ReceiptInput`] and the encoder's hashes, so nothing is copied into an owned [`Receipt`];
/// replay and verification borrow a decoded [`Receipt`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReceiptView<'a> {
    pub receipt_id: &'a str,
    pub run_id: &'a str,
    pub sequence: u64,
    pub stage: Stage,
    pub native_id: &'a str,
    pub transform: &'a str,
    pub bindings: &'a [Binding],
    pub outcome_aliases: &'a [String],
    pub payload_sha256: &'a str,
}

impl Receipt {
    /// This receipt, borrowed.
    pub(crate) fn view(&self) -> ReceiptView<'_> {
        ReceiptView {
            receipt_id: &self.receipt_id,
            run_id: &self.run_id,
            sequence: self.sequence,
            stage: self.stage,
            native_id: &self.native_id,
            transform: &self.transform,
            bindings: &self.bindings,
            outcome_aliases: &self.outcome_aliases,
            payload_sha256: &self.payload_sha256,
        }
    }
}

/// 64 lower-case hex digits, inline (a SHA-256).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hex64([u8; 64]);

impl Hex64 {
    /// The hex of `digest` (32 bytes).
    pub(crate) fn of(digest: &[u8]) -> Hex64 {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [b'0'; 64];
        for (i, &b) in digest.iter().take(32).enumerate() {
            out[2 * i] = HEX[usize::from(b >> 4)];
            out[2 * i + 1] = HEX[usize::from(b & 0xf)];
        }
        Hex64(out)
    }

    /// From 64 hex digits (anything else, which a checked receipt never has, gives zeros).
    pub(crate) fn parse(hex: &str) -> Hex64 {
        let mut out = [b'0'; 64];
        if hex.len() == 64 {
            out.copy_from_slice(hex.as_bytes());
        }
        Hex64(out)
    }

    /// As text (always ASCII).
    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl std::fmt::Debug for Hex64 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What encoding produced besides the line: the receipt id and the payload hash.
#[derive(Debug, Clone)]
pub(crate) struct Encoded {
    /// `receipt_` + hex SHA-256.
    pub receipt_id: String,
    /// Hex SHA-256 of the payload's canonical bytes.
    pub payload_sha256: Hex64,
}

/// Reusable buffers for encoding receipts (capture encodes one per stage).
#[derive(Debug, Default)]
pub(crate) struct Encoder {
    /// `{"bindings":…,"native_id":…,"outcome_aliases":[…],"payload":`
    pre: Vec<u8>,
    payload: Vec<u8>,
    /// `,"payload_sha256":"…","previous_receipt_sha256":…`
    mid: Vec<u8>,
    /// `,"run_id":…,"sequence":…,"stage":…,"transform":…}`
    tail: Vec<u8>,
}

impl Encoder {
    /// Encode a receipt; when `line` is given, its journal line and a newline are appended to
    /// it (memory-only capture needs the hashes, not the line). The receipt's data bytes are
    /// hashed piece by piece, so the payload is never copied but into the line.
    pub(crate) fn encode(
        &mut self,
        input: ReceiptInput<'_>,
        payload: &Payload<'_>,
        line: Option<&mut Vec<u8>>,
    ) -> Result<Encoded, JcsError> {
        let Encoder {
            pre,
            payload: payload_bytes,
            mid,
            tail,
        } = self;
        payload_bytes.clear();
        keel_jcs::write_payload(payload_bytes, payload)?;
        let payload_sha256 = Hex64::of(&Sha256::digest(&payload_bytes[..]));

        pre.clear();
        pre.extend_from_slice(b"{\"bindings\":");
        write_bindings(pre, input.bindings);
        pre.extend_from_slice(b",\"native_id\":");
        keel_jcs::write_str(pre, input.native_id);
        pre.extend_from_slice(b",\"outcome_aliases\":[");
        for (i, a) in input.outcome_aliases.iter().enumerate() {
            if i > 0 {
                pre.push(b',');
            }
            keel_jcs::write_str(pre, a);
        }
        pre.extend_from_slice(b"],\"payload\":");
        mid.clear();
        mid.extend_from_slice(b",\"payload_sha256\":\"");
        mid.extend_from_slice(&payload_sha256.0);
        mid.extend_from_slice(b"\",\"previous_receipt_sha256\":");
        match input.previous {
            Some(p) => keel_jcs::write_str(mid, p),
            None => mid.extend_from_slice(b"null"),
        }
        tail.clear();
        tail.extend_from_slice(b",\"run_id\":");
        keel_jcs::write_str(tail, input.run_id);
        tail.extend_from_slice(b",\"sequence\":");
        tail.extend_from_slice(itoa_u64(input.sequence).bytes());
        tail.extend_from_slice(b",\"stage\":");
        keel_jcs::write_str(tail, input.stage.as_str());
        tail.extend_from_slice(b",\"transform\":");
        keel_jcs::write_str(tail, input.transform);
        tail.push(b'}');

        let mut hasher = Sha256::new();
        for part in [&pre[..], &payload_bytes[..], &mid[..], &tail[..]] {
            hasher.update(part);
        }
        let mut receipt_id = String::with_capacity(RECEIPT_PREFIX.len() + 64);
        receipt_id.push_str(RECEIPT_PREFIX);
        push_hex(&mut receipt_id, &hasher.finalize());

        if let Some(line) = line {
            line.reserve(
                pre.len() + payload_bytes.len() + mid.len() + tail.len() + receipt_id.len() + 18,
            );
            line.extend_from_slice(pre);
            line.extend_from_slice(payload_bytes);
            line.extend_from_slice(mid);
            line.extend_from_slice(b",\"receipt_id\":\"");
            line.extend_from_slice(receipt_id.as_bytes());
            line.push(b'"');
            line.extend_from_slice(tail);
            line.push(b'\n');
        }
        Ok(Encoded {
            receipt_id,
            payload_sha256,
        })
    }
}

/// Decimal digits of `n` without allocating.
struct Digits {
    buf: [u8; 20],
    start: usize,
}

impl Digits {
    fn bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }
}

fn itoa_u64(mut n: u64) -> Digits {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    Digits { buf, start: i }
}

/// Encode a receipt: returns it and its journal line (without the newline).
pub fn encode(
    input: ReceiptInput<'_>,
    payload: &Payload<'_>,
) -> Result<(Receipt, String), JcsError> {
    let mut line = Vec::new();
    let encoded = Encoder::default().encode(input, payload, Some(&mut line))?;
    line.pop();
    let line = String::from_utf8(line).map_err(|_| JcsError::Syntax {
        offset: 0,
        what: "invalid UTF-8",
    })?;
    let receipt = Receipt {
        receipt_id: encoded.receipt_id,
        run_id: input.run_id.to_owned(),
        sequence: input.sequence,
        stage: input.stage,
        native_id: input.native_id.to_owned(),
        transform: input.transform.to_owned(),
        bindings: input.bindings.to_vec(),
        outcome_aliases: input.outcome_aliases.to_vec(),
        payload_sha256: encoded.payload_sha256.as_str().to_owned(),
        previous_receipt_sha256: input.previous.map(str::to_owned),
    };
    Ok((receipt, line))
}

fn write_bindings(out: &mut Vec<u8>, bindings: &[Binding]) {
    out.push(b'[');
    for (i, b) in bindings.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'{');
        if let Some(d) = b.disposition {
            out.extend_from_slice(b"\"disposition\":");
            keel_jcs::write_str(out, d.as_str());
            out.push(b',');
        }
        out.extend_from_slice(b"\"origin\":{");
        match &b.origin {
            Origin::Source { source } => {
                out.extend_from_slice(b"\"source\":");
                keel_jcs::write_str(out, source);
            }
            Origin::Outcome { outcome, run_id } => {
                out.extend_from_slice(b"\"outcome\":");
                keel_jcs::write_str(out, outcome);
                if let Some(run) = run_id {
                    out.extend_from_slice(b",\"run_id\":");
                    keel_jcs::write_str(out, run);
                }
            }
        }
        out.extend_from_slice(b"},\"outcome\":");
        out.extend_from_slice(itoa_u64(u64::from(b.outcome)).bytes());
        out.extend_from_slice(b",\"relation_role\":");
        keel_jcs::write_str(out, &b.relation_role);
        out.push(b'}');
    }
    out.push(b']');
}

/// What is wrong with one journal line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineFault {
    /// `true` when bytes disagree with a hash (or the canonical form); `false` when the line is
    /// not a well-formed receipt at all.
    pub hash_mismatch: bool,
    /// The field involved (`receipt_id`, `payload_sha256`, `line`…).
    pub field: &'static str,
    /// Human-readable detail.
    pub detail: String,
    /// The receipt id the line claims, when it could be read.
    pub receipt_id: Option<String>,
}

fn malformed(field: &'static str, detail: impl Into<String>) -> LineFault {
    LineFault {
        hash_mismatch: false,
        field,
        detail: detail.into(),
        receipt_id: None,
    }
}

/// Decode and self-check one journal line: strict JSON, canonical bytes, receipt hash, payload
/// hash, field types. Chain and sequence are checked by the caller, which knows the previous line.
pub fn decode_line(line: &str) -> Result<Receipt, LineFault> {
    let value = keel_jcs::parse_strict(line)
        .map_err(|e| malformed("line", format!("not strict JSON: {e}")))?;
    let canonical =
        keel_jcs::to_canonical_vec(&value).map_err(|e| malformed("line", e.to_string()))?;
    let Value::Object(map) = &value else {
        return Err(malformed("line", "not a JSON object"));
    };
    let claimed = map
        .get("receipt_id")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let fault = |field: &'static str, detail: String| LineFault {
        hash_mismatch: true,
        field,
        detail,
        receipt_id: claimed.clone(),
    };
    if canonical != line.as_bytes() {
        return Err(fault("line", "line is not in canonical (JCS) form".into()));
    }
    let get_str = |k: &'static str| {
        map.get(k)
            .and_then(Value::as_str)
            .ok_or_else(|| malformed(k, format!("missing string field {k}")))
    };
    let receipt_id = get_str("receipt_id")?.to_owned();
    let hex_part = receipt_id.strip_prefix(RECEIPT_PREFIX).unwrap_or("");
    if !is_sha256_hex(hex_part) {
        return Err(fault(
            "receipt_id",
            format!("{receipt_id:?} is not receipt_<sha256>"),
        ));
    }
    // The line is canonical, so its data bytes are the line without the top-level receipt_id
    // member (the last occurrence: every later member is a fixed-shape field).
    let segment = format!(",\"receipt_id\":\"{receipt_id}\"");
    let at = line
        .rfind(&segment)
        .ok_or_else(|| fault("receipt_id", "receipt_id member not found".into()))?;
    let mut hasher = Sha256::new();
    hasher.update(&line.as_bytes()[..at]);
    hasher.update(&line.as_bytes()[at + segment.len()..]);
    let mut actual = String::with_capacity(64);
    push_hex(&mut actual, &hasher.finalize());
    if actual != hex_part {
        return Err(fault(
            "receipt_id",
            format!("receipt data hashes to {actual}"),
        ));
    }
    let payload_sha256 = get_str("payload_sha256")?.to_owned();
    if !map.contains_key("payload") {
        return Err(malformed("payload", "missing payload"));
    }
    // The line is canonical, so the payload's canonical bytes are a slice of it: after the first
    // `,"payload":` (no earlier member can contain that byte sequence: quotes inside strings are
    // escaped) and before the last `,"payload_sha256":"` (no later member can contain it).
    const START: &str = ",\"payload\":";
    const END: &str = ",\"payload_sha256\":\"";
    let (Some(a), Some(b)) = (line.find(START), line.rfind(END)) else {
        return Err(malformed("payload", "payload member not found"));
    };
    let payload_bytes = line.as_bytes().get(a + START.len()..b).unwrap_or_default();
    let actual = sha256_hex(payload_bytes);
    if actual != payload_sha256 {
        return Err(fault(
            "payload_sha256",
            format!("payload hashes to {actual}"),
        ));
    }
    let run_id = get_str("run_id")?.to_owned();
    let native_id = get_str("native_id")?.to_owned();
    let transform = get_str("transform")?.to_owned();
    let sequence = map
        .get("sequence")
        .and_then(Value::as_u64)
        .ok_or_else(|| malformed("sequence", "missing sequence"))?;
    let stage: Stage = serde_json::from_value(map.get("stage").cloned().unwrap_or(Value::Null))
        .map_err(|e| malformed("stage", e.to_string()))?;
    let bindings: Vec<Binding> =
        serde_json::from_value(map.get("bindings").cloned().unwrap_or(Value::Null))
            .map_err(|e| malformed("bindings", e.to_string()))?;
    let outcome_aliases: Vec<String> =
        serde_json::from_value(map.get("outcome_aliases").cloned().unwrap_or(Value::Null))
            .map_err(|e| malformed("outcome_aliases", e.to_string()))?;
    let previous_receipt_sha256 = match map.get("previous_receipt_sha256") {
        Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        _ => {
            return Err(malformed(
                "previous_receipt_sha256",
                "missing previous_receipt_sha256",
            ));
        }
    };
    if map.len() != 11 {
        return Err(malformed(
            "line",
            format!("receipt has {} members, expected 11", map.len()),
        ));
    }
    Ok(Receipt {
        receipt_id,
        run_id,
        sequence,
        stage,
        native_id,
        transform,
        bindings,
        outcome_aliases,
        payload_sha256,
        previous_receipt_sha256,
    })
}

/// Spelling check helper for dispositions read back from bindings.
pub fn disposition_of(bindings: &[Binding], ordinal: u32) -> Option<Disposition> {
    bindings
        .iter()
        .filter(|b| b.outcome == ordinal)
        .find_map(|b| b.disposition)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn encode_then_decode_round_trips() {
        let bindings = vec![Binding::from_source("model:e1".into(), "proposes")];
        let aliases = vec!["call_1".to_owned()];
        let input = ReceiptInput {
            run_id: "run",
            sequence: 0,
            stage: Stage::AssistantMessage,
            native_id: "e1",
            transform: "commit",
            bindings: &bindings,
            outcome_aliases: &aliases,
            previous: None,
        };
        let v = serde_json::json!({"text": "hi", "n": [1.5, 1e30]});
        let encoded = encode(input, &Payload::Value(&v));
        let Ok((receipt, line)) = encoded else {
            panic!("encode failed: {encoded:?}")
        };
        assert_eq!(decode_line(&line), Ok(receipt));
        assert!(line.contains(r#""n":[1.5,1e+30]"#), "{line}");
    }
}
