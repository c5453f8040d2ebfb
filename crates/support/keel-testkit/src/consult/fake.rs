//! The behaviour of the `fake-consult` binary: one invocation, argv in, exit code out, scenario
//! read from `FAKE_CONSULT_*` variables (the table is in [`crate::consult`]).
//!
//! Every invocation is appended to the record file (when configured) and counted in the state
//! directory first, then delayed, then checked for a missing subcommand, a transient failure and
//! a forced exit, and only then served.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

mod commands;
mod store;

use commands::*;
use store::*;

/// The subcommands consult 1.3.0 knows (plus `version` for `--version`).
const SUBCOMMANDS: &[&str] = &[
    "version",
    "doctor",
    "agents",
    "capabilities",
    "delegate",
    "review",
    "status",
    "wait",
    "result",
    "logs",
    "cancel",
    "steer",
    "events",
    "report",
    "chain",
];

/// The report types `consult report` accepts; the first two wake the host.
const REPORT_TYPES: &[&str] = &[
    "blocked",
    "decision_needed",
    "discovery",
    "progress",
    "steer",
    "lifecycle",
];

/// A failed invocation: the exit code and the line written to stderr.
struct Fail {
    code: i32,
    message: String,
}

fn fail(code: i32, message: impl Into<String>) -> Fail {
    Fail {
        code,
        message: message.into(),
    }
}

fn usage(message: impl Into<String>) -> Fail {
    fail(2, message)
}

fn not_found(id: &str) -> Fail {
    fail(2, format!("job not found: {id}"))
}

/// The stderr line a forced or transient exit prints, by exit code.
fn forced_message(sub: &str, code: i32) -> String {
    let what = match code {
        2 => "usage error (forced)",
        3 => "busy: another consult operation holds the lock",
        4 => "timed out",
        5 => "job is not final",
        6 => "delegate failed",
        8 => "review is not supported by this agent",
        130 => "interrupted",
        143 => "terminated",
        _ => "forced failure",
    };
    format!("consult {sub}: {what}")
}

/// Runs one invocation (`args` without the program name) and returns the process exit code.
pub fn run(args: Vec<String>) -> i32 {
    match run_inner(&args) {
        Ok(()) => 0,
        Err(f) => {
            if !f.message.is_empty() {
                let mut err = std::io::stderr().lock();
                let _ = writeln!(err, "{}", f.message);
                let _ = err.flush();
            }
            f.code
        }
    }
}

fn var(name: &str) -> Option<String> {
    std::env::var(format!("FAKE_CONSULT_{name}"))
        .ok()
        .filter(|v| !v.is_empty())
}

fn var_u64(name: &str, default: u64) -> Result<u64, Fail> {
    match var(name) {
        None => Ok(default),
        Some(v) => v
            .trim()
            .parse()
            .map_err(|_| fail(1, format!("FAKE_CONSULT_{name}: {v:?} is not a number"))),
    }
}

fn var_list(name: &str) -> Vec<String> {
    var(name)
        .map(|v| {
            v.split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// `delegate` → `DELEGATE`, for the per-subcommand variable names.
fn key(sub: &str) -> String {
    sub.to_ascii_uppercase().replace('-', "_")
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn sleep_ms(ms: u64) {
    if ms > 0 {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// RFC 3339 UTC with milliseconds, from Unix milliseconds.
fn rfc3339(ms: u64) -> String {
    keel_protocol::time::utc_rfc3339(i64::try_from(ms).unwrap_or(i64::MAX))
}

fn write_stdout(text: &str) -> Result<(), Fail> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| fail(1, format!("consult: cannot write stdout: {e}")))
}

/// Prints one JSON document, or garbage when `FAKE_CONSULT_BAD_JSON` names the subcommand.
fn emit(sub: &str, value: &Value) -> Result<(), Fail> {
    let bad = var_list("BAD_JSON");
    if bad.iter().any(|s| s == sub || s == "all") {
        return write_stdout("{\"schemaVersion\": 1, \"jobs\": [ <<not json>>\n");
    }
    write_stdout(&format!("{value}\n"))
}

fn schema() -> Result<u64, Fail> {
    var_u64("SCHEMA_VERSION", 1)
}

fn version() -> String {
    var("VERSION").unwrap_or_else(|| "1.3.0".to_owned())
}

/// `(major, minor)` of the configured version, when it parses.
fn version_pair() -> Option<(u64, u64)> {
    let v = version();
    let mut parts = v.trim().trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The subcommands this build lacks: `FAKE_CONSULT_MISSING`, plus `capabilities` before 1.2.
fn missing() -> BTreeSet<String> {
    let mut set: BTreeSet<String> = var_list("MISSING").into_iter().collect();
    if version_pair().is_some_and(|p| p < (1, 2)) {
        set.insert("capabilities".to_owned());
    }
    set
}

// ---------------------------------------------------------------------------------------------
// State

#[derive(Default)]
struct Args {
    values: BTreeMap<String, Vec<String>>,
    flags: BTreeSet<String>,
    positional: Vec<String>,
    rest: Vec<String>,
}

impl Args {
    fn parse(args: &[String], valued: &[&str], flags: &[&str]) -> Result<Self, Fail> {
        let mut out = Self::default();
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            if arg == "--" {
                out.rest = it.cloned().collect();
                break;
            }
            if let Some(name) = arg.strip_prefix("--") {
                let (name, inline) = match name.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_owned())),
                    None => (name, None),
                };
                if valued.contains(&name) {
                    let value = match inline {
                        Some(v) => v,
                        None => it
                            .next()
                            .cloned()
                            .ok_or_else(|| usage(format!("option --{name} needs a value")))?,
                    };
                    out.values.entry(name.to_owned()).or_default().push(value);
                } else if flags.contains(&name) && inline.is_none() {
                    out.flags.insert(name.to_owned());
                } else {
                    return Err(usage(format!("unknown option: --{name}")));
                }
            } else {
                out.positional.push(arg.clone());
            }
        }
        Ok(out)
    }

    fn value(&self, name: &str) -> Option<&str> {
        self.values
            .get(name)
            .and_then(|v| v.last())
            .map(String::as_str)
    }

    fn flag(&self, name: &str) -> bool {
        self.flags.contains(name)
    }

    fn one_id(&self, sub: &str) -> Result<&str, Fail> {
        match self.positional.as_slice() {
            [id] => Ok(id),
            [] => Err(usage(format!("consult {sub}: missing job id"))),
            _ => Err(usage(format!("consult {sub}: too many arguments"))),
        }
    }

    fn mode(&self) -> Result<&'static str, Fail> {
        match (self.flag("read-only"), self.flag("write")) {
            (true, true) => Err(usage("--read-only and --write are exclusive")),
            (_, true) => Ok("write"),
            _ => Ok("read-only"),
        }
    }

    fn sandbox(&self) -> Result<String, Fail> {
        let s = self.value("sandbox").unwrap_or("confined");
        match s {
            "confined" | "inherit" => Ok(s.to_owned()),
            other => Err(usage(format!("unknown sandbox: {other}"))),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Dispatch

/// The subcommand an argv names: `--version` is `version`, otherwise the first argument.
fn subcommand(args: &[String]) -> String {
    match args.first().map(String::as_str) {
        Some("--version" | "-V") => "version".to_owned(),
        Some(first) => first.to_owned(),
        None => "help".to_owned(),
    }
}

fn record(args: &[String]) -> Result<(), Fail> {
    let Some(path) = var("RECORD") else {
        return Ok(());
    };
    let env: BTreeMap<String, String> = std::env::vars()
        .filter(|(k, _)| k.starts_with("CONSULT_"))
        .collect();
    let cwd = std::env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let line = format!("{}\n", json!({"argv": args, "env": env, "cwd": cwd}));
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .map_err(|e| fail(1, format!("consult (fake): record {path}: {e}")))
}

fn run_inner(args: &[String]) -> Result<(), Fail> {
    record(args)?;
    let sub = subcommand(args);
    let store = Store::open().ok();
    let count = match &store {
        Some(store) => store.count(&sub)?,
        None => 0,
    };
    sleep_ms(
        var_u64("DELAY_MS", 0)?.saturating_add(var_u64(&format!("DELAY_MS_{}", key(&sub)), 0)?),
    );
    if !SUBCOMMANDS.contains(&sub.as_str()) || missing().contains(&sub) {
        return Err(usage(format!("unknown subcommand: {sub}")));
    }
    let fail_first = var_u64(&format!("FAIL_FIRST_{}", key(&sub)), 0)?;
    if count <= fail_first && fail_first > 0 {
        let code = i32::try_from(var_u64(&format!("FAIL_CODE_{}", key(&sub)), 3)?).unwrap_or(1);
        return Err(fail(code, forced_message(&sub, code)));
    }
    let forced = var_u64(&format!("EXIT_{}", key(&sub)), 0)?;
    if forced != 0 {
        let code = i32::try_from(forced).unwrap_or(1);
        let message =
            var(&format!("STDERR_{}", key(&sub))).unwrap_or_else(|| forced_message(&sub, code));
        return Err(fail(code, message));
    }
    let rest = &args[1.min(args.len())..];
    if sub != "version" && rest.iter().any(|a| a == "--help" || a == "-h") {
        return write_stdout(&format!("usage: consult {sub} [options]\n"));
    }
    if sub == "version" {
        return write_stdout(&format!("consult {}\n", version()));
    }
    let store = match store {
        Some(store) => store,
        None => Store::open()?,
    };
    match sub.as_str() {
        "doctor" => doctor(rest, count),
        "agents" => agents(rest),
        "capabilities" => capabilities(rest),
        "delegate" => delegate(&store, rest),
        "review" => review(&store, rest),
        "status" => status(&store, rest),
        "wait" => wait(&store, rest),
        "result" => result(&store, rest),
        "logs" => logs(&store, rest),
        "cancel" => cancel(&store, rest),
        "steer" => steer(&store, rest),
        "events" => events(&store, rest),
        "report" => report(&store, rest),
        "chain" => chain(&store, rest),
        other => Err(usage(format!("unknown subcommand: {other}"))),
    }
}

// ---------------------------------------------------------------------------------------------
// Subcommands

fn doctor(args: &[String], count: u64) -> Result<(), Fail> {
    let a = Args::parse(args, &["sandbox", "agent"], &["json", "read-only", "write"])?;
    let mode = a.mode()?;
    let sandbox = a.sandbox()?;
    let schema = schema()?;
    if count <= var_u64("DOCTOR_FAIL_FIRST", 0)? {
        let problem =
            var("DOCTOR_PROBLEM").unwrap_or_else(|| "agent is not authenticated".to_owned());
        emit(
            "doctor",
            &json!({
                "schemaVersion": schema, "ok": false, "mode": mode, "sandbox": sandbox,
                "checks": [{"name": "agent-auth", "ok": false, "message": problem}],
            }),
        )?;
        let code = i32::try_from(var_u64("DOCTOR_FAIL_EXIT", 1)?).unwrap_or(1);
        return Err(fail(code, format!("consult doctor: {problem}")));
    }
    emit(
        "doctor",
        &json!({
            "schemaVersion": schema, "ok": true, "mode": mode, "sandbox": sandbox,
            "checks": [{"name": "agent-auth", "ok": true, "message": "ok"}],
        }),
    )
}

fn agent_names() -> Vec<String> {
    let list = var_list("AGENTS");
    if list.is_empty() {
        ["claude", "codex", "opencode", "copilot"]
            .into_iter()
            .map(str::to_owned)
            .collect()
    } else {
        list
    }
}

fn agents(args: &[String]) -> Result<(), Fail> {
    Args::parse(args, &[], &["json"])?;
    let agents: Vec<Value> = agent_names()
        .iter()
        .enumerate()
        .map(|(i, name)| json!({"name": name, "available": true, "default": i == 0}))
        .collect();
    emit(
        "agents",
        &json!({"schemaVersion": schema()?, "agents": agents}),
    )
}

fn capabilities(args: &[String]) -> Result<(), Fail> {
    Args::parse(args, &[], &["json"])?;
    if let Some(raw) = var("CAPABILITIES") {
        return write_stdout(&format!("{raw}\n"));
    }
    let missing = missing();
    let has = |s: &str| !missing.contains(s);
    let subcommands: Vec<&str> = SUBCOMMANDS
        .iter()
        .copied()
        .filter(|s| *s != "version" && has(s))
        .collect();
    emit(
        "capabilities",
        &json!({
            "schemaVersion": schema()?,
            "version": version(),
            "subcommands": subcommands,
            "features": {
                "steer": has("steer"), "events": has("events"), "report": has("report"),
                "review": has("review"), "chain": has("chain"),
            },
            "agents": agent_names(),
            "extensions": {
                "sandbox": {"values": ["confined", "inherit"]},
                "isolated": {"type": "boolean"},
            },
        }),
    )
}

/// Reads `FAKE_CONSULT_EVENTS` (a JSON array of `{type, urgency?, message, data?}`) into numbered
/// events stamped at `at`.
fn scripted_events(at: u64) -> Result<Vec<Value>, Fail> {
    let Some(raw) = var("EVENTS") else {
        return Ok(Vec::new());
    };
    let list: Vec<Value> = serde_json::from_str(&raw)
        .map_err(|e| fail(1, format!("FAKE_CONSULT_EVENTS: not a JSON array: {e}")))?;
    Ok(list
        .into_iter()
        .enumerate()
        .map(|(i, e)| make_event(i as u64 + 1, at, &e))
        .collect())
}

fn default_urgency(kind: &str) -> &'static str {
    if matches!(kind, "blocked" | "decision_needed") {
        "wake"
    } else {
        "info"
    }
}

fn make_event(seq: u64, at: u64, spec: &Value) -> Value {
    let kind = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("progress");
    let mut event = json!({
        "seq": seq,
        "at": rfc3339(at),
        "type": kind,
        "urgency": spec.get("urgency").and_then(Value::as_str).unwrap_or(default_urgency(kind)),
        "message": spec.get("message").and_then(Value::as_str).unwrap_or(""),
    });
    if let (Some(data), Some(obj)) = (spec.get("data"), event.as_object_mut()) {
        obj.insert("data".to_owned(), data.clone());
    }
    event
}

/// The job ids a state directory holds, in submission order (for tests and diagnostics).
pub fn job_ids(state_dir: &Path) -> Vec<String> {
    fs::read_to_string(state_dir.join("state.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<State>(&t).ok())
        .map(|s| s.jobs.into_iter().map(|j| j.id).collect())
        .unwrap_or_default()
}

/// How many times `sub` was invoked against a state directory (0 when never).
pub fn invocations(state_dir: &Path, sub: &str) -> u64 {
    fs::read_to_string(state_dir.join("state.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<State>(&t).ok())
        .and_then(|s| s.counters.get(sub).copied())
        .unwrap_or(0)
}

/// The steer messages a job accepted, in order.
pub fn steers(state_dir: &Path, id: &str) -> Vec<String> {
    fs::read_to_string(state_dir.join("state.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<State>(&t).ok())
        .and_then(|s| s.jobs.into_iter().find(|j| j.id == id))
        .map(|j| j.steers)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::rfc3339;

    #[test]
    fn rfc3339_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339(1_767_225_599_000), "2025-12-31T23:59:59.000Z");
    }
}
