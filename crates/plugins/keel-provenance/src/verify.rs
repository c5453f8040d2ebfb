//! The offline validator behind `keel provenance verify SESSION`.
//!
//! [`verify`] re-reads `receipts.jsonl` and `graph.json` and checks, stopping at the first
//! failure and naming it (file, line, receipt id, field):
//!
//! 1. every line is strict, canonical JSON whose `receipt_id` is the SHA-256 of its data and
//!    whose `payload_sha256` is the SHA-256 of its payload → else `RECEIPT_HASH_MISMATCH`;
//! 2. sequences count from 0, every `previous_receipt_sha256` names the line before, one run id
//!    → else `RECEIPT_SEQUENCE_MISMATCH`;
//! 3. every binding names an outcome that an earlier receipt produced → else
//!    `SILENT_OCCURRENCE_LOSS`;
//! 4. `graph.json` is canonical and its `graph_id` is the SHA-256 of its content → else
//!    `GRAPH_HASH_MISMATCH`;
//! 5. `graph.json` is byte for byte the compilation of the first N receipts, N being the number
//!    of receipts it lists (it may lag the journal) → else `GRAPH_BINDING_MISMATCH`; if it lists
//!    more receipts than the journal holds, `INCOMPLETE_JOURNAL_TAIL` when the journal ends in a
//!    torn line, `SILENT_OCCURRENCE_LOSS` otherwise.
//!
//! A torn last line (no newline: a crash mid-append) that `graph.json` does not cover is not a
//! failure: the journal verifies as the prefix before it and the report names the tail.

use crate::graph::{CompileError, Snapshot};
use crate::journal::{GRAPH_FILE, RECEIPTS_FILE};
use crate::receipt::{Receipt, decode_line};
use keel_jcs::digest::sha256_hex;
use serde_json::Value;
use std::fmt;
use std::path::{Path, PathBuf};

/// Validator error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyCode {
    /// A line's bytes disagree with its receipt hash, payload hash or canonical form.
    ReceiptHashMismatch,
    /// Sequence, chain link or run id out of order.
    ReceiptSequenceMismatch,
    /// A receipt the graph or a binding depends on is missing.
    SilentOccurrenceLoss,
    /// The journal ends in a torn line that the graph covers.
    IncompleteJournalTail,
    /// `graph.json` is not canonical or its `graph_id` is wrong.
    GraphHashMismatch,
    /// `graph.json` is not what the receipts compile to.
    GraphBindingMismatch,
}

impl VerifyCode {
    /// The spelled code.
    pub fn as_str(self) -> &'static str {
        match self {
            VerifyCode::ReceiptHashMismatch => "RECEIPT_HASH_MISMATCH",
            VerifyCode::ReceiptSequenceMismatch => "RECEIPT_SEQUENCE_MISMATCH",
            VerifyCode::SilentOccurrenceLoss => "SILENT_OCCURRENCE_LOSS",
            VerifyCode::IncompleteJournalTail => "INCOMPLETE_JOURNAL_TAIL",
            VerifyCode::GraphHashMismatch => "GRAPH_HASH_MISMATCH",
            VerifyCode::GraphBindingMismatch => "GRAPH_BINDING_MISMATCH",
        }
    }
}

/// The first failed check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyFailure {
    /// Code.
    pub code: VerifyCode,
    /// `receipts.jsonl` or `graph.json`.
    pub file: &'static str,
    /// 1-based line of `receipts.jsonl`.
    pub line: Option<usize>,
    /// The receipt involved.
    pub receipt_id: Option<String>,
    /// The field involved.
    pub field: Option<String>,
    /// What was found.
    pub detail: String,
}

impl fmt::Display for VerifyFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.file)?;
        if let Some(l) = self.line {
            write!(f, " line {l}")?;
        }
        if let Some(r) = &self.receipt_id {
            write!(f, " receipt {r}")?;
        }
        if let Some(x) = &self.field {
            write!(f, " field {x}")?;
        }
        write!(f, ": {}", self.detail)
    }
}

/// Why verification did not pass.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// A file could not be read (the journal does not exist, permissions…).
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A check failed; the journal or graph was altered, truncated or lost receipts.
    #[error("{0}")]
    Failed(Box<VerifyFailure>),
}

impl VerifyError {
    /// The failure code, when a check failed.
    pub fn code(&self) -> Option<VerifyCode> {
        match self {
            VerifyError::Failed(f) => Some(f.code),
            VerifyError::Io { .. } => None,
        }
    }
}

/// A torn last line of `receipts.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// 1-based line number of the torn line.
    pub line: usize,
    /// Byte offset where it starts.
    pub offset: u64,
    /// Its length in bytes.
    pub bytes: u64,
    /// Hex SHA-256 of its bytes.
    pub sha256: String,
}

/// What a passing verification found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// The run id (`None` for an empty journal).
    pub run_id: Option<String>,
    /// Complete receipts checked.
    pub receipts: usize,
    /// Receipts `graph.json` covers (`None` when there is no `graph.json`).
    pub graph_receipts: Option<usize>,
    /// `graph_id` of `graph.json`.
    pub graph_id: Option<String>,
    /// A torn last line beyond the graph (crash mid-append).
    pub torn_tail: Option<TornTail>,
    /// Capture failures recorded in the journal (the graph is incomplete when > 0).
    pub capture_failures: usize,
}

/// Receipts read from a journal.
#[derive(Debug, Clone)]
pub(crate) struct Scan {
    pub receipts: Vec<Receipt>,
    pub torn: Option<TornTail>,
    /// Bytes up to and including the last complete line.
    pub good_len: u64,
}

fn fail(code: VerifyCode, file: &'static str, detail: impl Into<String>) -> VerifyFailure {
    VerifyFailure {
        code,
        file,
        line: None,
        receipt_id: None,
        field: None,
        detail: detail.into(),
    }
}

/// Journals with at least this many lines are decoded on two threads.
const PARALLEL_MIN_LINES: usize = 512;

/// Decode and self-check one line (check 1); `lineno` counts from 1.
fn decode_at(raw: &[u8], lineno: usize) -> Result<Receipt, VerifyFailure> {
    let text = std::str::from_utf8(raw).map_err(|_| {
        let mut f = fail(
            VerifyCode::ReceiptHashMismatch,
            RECEIPTS_FILE,
            "line is not UTF-8",
        );
        f.line = Some(lineno);
        f
    })?;
    decode_line(text).map_err(|lf| VerifyFailure {
        code: VerifyCode::ReceiptHashMismatch,
        file: RECEIPTS_FILE,
        line: Some(lineno),
        receipt_id: lf.receipt_id.clone(),
        field: Some(lf.field.to_owned()),
        detail: lf.detail,
    })
}

/// Decode every line (the two halves of a long journal on two threads); results in line order.
fn decode_lines(bytes: &[u8], lines: &[(usize, usize)]) -> Vec<Result<Receipt, VerifyFailure>> {
    let decode = |from: usize, part: &[(usize, usize)]| -> Vec<Result<Receipt, VerifyFailure>> {
        part.iter()
            .enumerate()
            .map(|(k, &(a, b))| decode_at(&bytes[a..b], from + k + 1))
            .collect()
    };
    if lines.len() < PARALLEL_MIN_LINES {
        return decode(0, lines);
    }
    let mid = lines.len() / 2;
    let (first, second) = lines.split_at(mid);
    std::thread::scope(|s| {
        let upper = std::thread::Builder::new()
            .name("keel-provenance-verify".into())
            .spawn_scoped(s, || decode(mid, second));
        let mut out = decode(0, first);
        match upper.map(|h| h.join()) {
            Ok(Ok(rest)) => out.extend(rest),
            _ => out.extend(decode(mid, second)),
        }
        out
    })
}

/// Read and check every complete line (checks 1 and 2). The first failing line is reported,
/// whichever check it fails.
pub(crate) fn scan_receipts(
    bytes: &[u8],
    expected_run: Option<&str>,
) -> Result<Scan, VerifyFailure> {
    let mut lines: Vec<(usize, usize)> = Vec::new();
    let mut pos = 0usize;
    while let Some(nl) = bytes[pos..].iter().position(|&b| b == b'\n') {
        lines.push((pos, pos + nl));
        pos += nl + 1;
    }
    let mut receipts: Vec<Receipt> = Vec::with_capacity(lines.len());
    let mut run: Option<String> = expected_run.map(str::to_owned);
    for decoded in decode_lines(bytes, &lines) {
        let lineno = receipts.len() + 1;
        let r = decoded?;
        let seq_fail = |field: &str, detail: String| VerifyFailure {
            code: VerifyCode::ReceiptSequenceMismatch,
            file: RECEIPTS_FILE,
            line: Some(lineno),
            receipt_id: Some(r.receipt_id.clone()),
            field: Some(field.to_owned()),
            detail,
        };
        if r.sequence != receipts.len() as u64 {
            return Err(seq_fail(
                "sequence",
                format!(
                    "sequence {} where {} was expected",
                    r.sequence,
                    receipts.len()
                ),
            ));
        }
        let prev = receipts.last().map(|p| p.sha256());
        if r.previous_receipt_sha256.as_deref() != prev {
            return Err(seq_fail(
                "previous_receipt_sha256",
                format!(
                    "chains to {:?}, previous receipt is {prev:?}",
                    r.previous_receipt_sha256
                ),
            ));
        }
        match &run {
            Some(run) if *run != r.run_id => {
                return Err(seq_fail(
                    "run_id",
                    format!("run {:?} in a journal of run {run:?}", r.run_id),
                ));
            }
            Some(_) => {}
            None => run = Some(r.run_id.clone()),
        }
        receipts.push(r);
    }
    let torn = (pos < bytes.len()).then(|| {
        let rest = &bytes[pos..];
        TornTail {
            line: receipts.len() + 1,
            offset: pos as u64,
            bytes: rest.len() as u64,
            sha256: sha256_hex(rest),
        }
    });
    Ok(Scan {
        receipts,
        torn,
        good_len: pos as u64,
    })
}

/// Map a compile error to a validator failure.
pub(crate) fn compile_failure(e: &CompileError) -> VerifyFailure {
    let (code, receipt_id, field) = match e {
        CompileError::UnknownOutcome {
            receipt_id,
            binding,
            ..
        } => (
            VerifyCode::SilentOccurrenceLoss,
            receipt_id,
            format!("bindings[{binding}].origin"),
        ),
        CompileError::OutOfSequence { receipt_id, .. } => (
            VerifyCode::ReceiptSequenceMismatch,
            receipt_id,
            "sequence".to_owned(),
        ),
    };
    VerifyFailure {
        code,
        file: RECEIPTS_FILE,
        line: None,
        receipt_id: Some(receipt_id.clone()),
        field: Some(field),
        detail: e.to_string(),
    }
}

/// Verify the journal in `dir` (see the module docs for the checks).
pub fn verify(dir: &Path) -> Result<VerifyReport, VerifyError> {
    let receipts_path = dir.join(RECEIPTS_FILE);
    let bytes = std::fs::read(&receipts_path).map_err(|source| VerifyError::Io {
        path: receipts_path,
        source,
    })?;
    let graph_path = dir.join(GRAPH_FILE);
    let graph_bytes = match std::fs::read(&graph_path) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => {
            return Err(VerifyError::Io {
                path: graph_path,
                source,
            });
        }
    };
    verify_bytes(&bytes, graph_bytes.as_deref())
}

/// Verify the contents of `receipts.jsonl` and (if present) `graph.json`.
pub fn verify_bytes(bytes: &[u8], graph_bytes: Option<&[u8]>) -> Result<VerifyReport, VerifyError> {
    let scan = scan_receipts(bytes, None).map_err(|f| VerifyError::Failed(Box::new(f)))?;
    // An empty journal (a session that captured nothing) names its run only in graph.json.
    let run_id = scan
        .receipts
        .first()
        .map(|r| r.run_id.clone())
        .or_else(|| graph_bytes.and_then(claimed_run_id));
    let failed = |f: VerifyFailure| VerifyError::Failed(Box::new(f));
    let mut snapshot = Snapshot::new(run_id.as_deref().unwrap_or(""));
    for (i, r) in scan.receipts.iter().enumerate() {
        snapshot.apply_receipt(r.view()).map_err(|e| {
            let mut f = compile_failure(&e);
            f.line = Some(i + 1);
            failed(f)
        })?;
    }
    let mut report = VerifyReport {
        run_id: run_id.clone(),
        receipts: scan.receipts.len(),
        graph_receipts: None,
        graph_id: None,
        torn_tail: scan.torn.clone(),
        capture_failures: snapshot.failures().len(),
    };
    let Some(graph_bytes) = graph_bytes else {
        return Ok(report);
    };
    // Fast path: the graph covers every complete receipt.
    let (graph_id, mut expected) = snapshot.to_canonical();
    expected.push(b'\n');
    if expected == graph_bytes {
        report.graph_receipts = Some(scan.receipts.len());
        report.graph_id = Some(graph_id);
        return Ok(report);
    }
    // Slow path: check the graph on its own, then as a prefix compilation.
    let (covered, claimed_id) = check_graph_file(graph_bytes).map_err(failed)?;
    if covered > scan.receipts.len() {
        let code = if scan.torn.is_some() {
            VerifyCode::IncompleteJournalTail
        } else {
            VerifyCode::SilentOccurrenceLoss
        };
        let mut f = fail(
            code,
            RECEIPTS_FILE,
            format!(
                "graph.json covers {covered} receipts, the journal holds {} complete ones",
                scan.receipts.len()
            ),
        );
        f.line = Some(scan.receipts.len() + 1);
        return Err(failed(f));
    }
    let prefix = Snapshot::compile(run_id.as_deref().unwrap_or(""), &scan.receipts[..covered])
        .map_err(|e| failed(compile_failure(&e)))?;
    let (_, mut expected) = prefix.to_canonical();
    expected.push(b'\n');
    if expected != graph_bytes {
        return Err(failed(first_difference(&expected, graph_bytes)));
    }
    report.graph_receipts = Some(covered);
    report.graph_id = Some(claimed_id);
    Ok(report)
}

/// The `run_id` a `graph.json` claims, if it can be read (the rest is checked by comparison).
fn claimed_run_id(bytes: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(bytes).ok()?;
    match keel_jcs::parse_strict(text.trim_end_matches('\n')).ok()? {
        Value::Object(mut m) => match m.remove("run_id") {
            Some(Value::String(s)) => Some(s),
            _ => None,
        },
        _ => None,
    }
}

/// Check 4 on `graph.json` alone; returns (receipts covered, graph_id).
fn check_graph_file(bytes: &[u8]) -> Result<(usize, String), VerifyFailure> {
    let g = |detail: String, field: &str| {
        let mut f = fail(VerifyCode::GraphHashMismatch, GRAPH_FILE, detail);
        f.field = Some(field.to_owned());
        f
    };
    let text = std::str::from_utf8(bytes).map_err(|_| g("not UTF-8".into(), "graph.json"))?;
    let body = text
        .strip_suffix('\n')
        .ok_or_else(|| g("missing final newline".into(), "graph.json"))?;
    let mut value = keel_jcs::parse_strict(body)
        .map_err(|e| g(format!("not strict JSON: {e}"), "graph.json"))?;
    let canonical =
        keel_jcs::to_canonical_vec(&value).map_err(|e| g(e.to_string(), "graph.json"))?;
    if canonical != body.as_bytes() {
        return Err(g("not in canonical (JCS) form".into(), "graph.json"));
    }
    let Value::Object(map) = &mut value else {
        return Err(g("not a JSON object".into(), "graph.json"));
    };
    let claimed = match map.remove("graph_id") {
        Some(Value::String(s)) => s,
        _ => return Err(g("missing graph_id".into(), "graph_id")),
    };
    let content = keel_jcs::to_canonical_vec(&value).map_err(|e| g(e.to_string(), "graph.json"))?;
    let actual = sha256_hex(&content);
    if actual != claimed {
        return Err(g(
            format!("content hashes to {actual}, graph_id says {claimed}"),
            "graph_id",
        ));
    }
    let covered = value
        .get("receipts")
        .and_then(Value::as_array)
        .map(Vec::len)
        .ok_or_else(|| g("missing receipts".into(), "receipts"))?;
    Ok((covered, claimed))
}

/// Name the first top-level field (and element) where the graph differs from the compilation.
fn first_difference(expected: &[u8], found: &[u8]) -> VerifyFailure {
    let parse = |b: &[u8]| {
        std::str::from_utf8(b)
            .ok()
            .and_then(|t| keel_jcs::parse_strict(t.trim_end()).ok())
    };
    let mut field = "graph.json".to_owned();
    let mut detail = "graph.json differs from the compilation of the receipts".to_owned();
    if let (Some(Value::Object(e)), Some(Value::Object(f))) = (parse(expected), parse(found))
        && let Some((k, ev)) = e
            .iter()
            .find(|(k, v)| k.as_str() != "graph_id" && f.get(k.as_str()) != Some(*v))
    {
        field = k.clone();
        if let (Value::Array(ea), Some(Value::Array(fa))) = (ev, f.get(k.as_str()))
            && let Some(i) = (0..ea.len().max(fa.len())).find(|&i| ea.get(i) != fa.get(i))
        {
            field = format!("{k}[{i}]");
            let id = ea
                .get(i)
                .and_then(|v| v.get("id"))
                .and_then(Value::as_str)
                .unwrap_or("");
            detail = format!(
                "{field} (expected node/edge {id:?}) differs from the compilation of the receipts"
            );
        }
    }
    let mut f = fail(VerifyCode::GraphBindingMismatch, GRAPH_FILE, detail);
    f.field = Some(field);
    f
}
