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
    let secs = ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let (y, m, d) = keel_protocol::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
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

/// Everything the fake remembers between invocations: one JSON file in the state directory.
#[derive(Serialize, Deserialize, Default)]
#[serde(default)]
struct State {
    counters: BTreeMap<String, u64>,
    next_job: u64,
    next_chain: u64,
    jobs: Vec<Job>,
}

/// One job, with the scenario captured when it was submitted.
#[derive(Serialize, Deserialize, Default, Clone)]
#[serde(default)]
struct Job {
    id: String,
    label: Option<String>,
    kind: String,
    profile: Option<String>,
    mode: String,
    confinement: String,
    prompt: String,
    model: Option<String>,
    effort: Option<String>,
    after: Vec<String>,
    host_session_id: Option<String>,
    submitted_ms: u64,
    run_ms: u64,
    final_status: String,
    cancelled_ms: Option<u64>,
    final_text: Option<String>,
    error_message: Option<String>,
    stop_reason: String,
    touched_files: Vec<String>,
    log_lines: u64,
    log_every_ms: u64,
    log_path: Option<String>,
    patch_path: Option<String>,
    events: Vec<Value>,
    steers: Vec<String>,
    chain_id: String,
    parent_job_id: Option<String>,
    depth: u64,
}

impl Job {
    fn status(&self, now: u64) -> String {
        if self.cancelled_ms.is_some() {
            "cancelled".to_owned()
        } else if now < self.submitted_ms.saturating_add(self.run_ms) {
            "running".to_owned()
        } else {
            self.final_status.clone()
        }
    }

    fn completed_ms(&self, now: u64) -> Option<u64> {
        if let Some(at) = self.cancelled_ms {
            return Some(at);
        }
        let done = self.submitted_ms.saturating_add(self.run_ms);
        let status = self.status(now);
        (is_terminal(&status) && now >= done).then_some(done)
    }

    fn object(&self, now: u64) -> Value {
        json!({
            "id": self.id,
            "label": self.label,
            "kind": self.kind,
            "status": self.status(now),
            "profile": self.profile,
            "authority": {"mode": self.mode, "confinement": self.confinement},
            "prompt": self.prompt,
            "submittedAt": rfc3339(self.submitted_ms),
            "startedAt": rfc3339(self.submitted_ms),
            "completedAt": self.completed_ms(now).map(rfc3339),
            "model": self.model,
            "effort": self.effort,
            "afterJobIds": self.after,
            "hostSessionId": self.host_session_id,
        })
    }
}

fn is_terminal(status: &str) -> bool {
    !matches!(status, "queued" | "running")
}

/// The job result v1 envelope.
fn envelope(schema: u64, state: &State, job: &Job, now: u64) -> Value {
    let status = job.status(now);
    let terminal = is_terminal(&status);
    let children: Vec<&str> = state
        .jobs
        .iter()
        .filter(|j| j.parent_job_id.as_deref() == Some(job.id.as_str()))
        .map(|j| j.id.as_str())
        .collect();
    let error_message = match status.as_str() {
        "failed" => Some(
            job.error_message
                .clone()
                .unwrap_or_else(|| "the delegate failed".to_owned()),
        ),
        _ => job.error_message.clone().filter(|_| terminal),
    };
    json!({
        "schemaVersion": schema,
        "job": job.object(now),
        "outcome": {
            "stopReason": terminal.then(|| match status.as_str() {
                "cancelled" => "cancelled".to_owned(),
                "failed" => "error".to_owned(),
                _ => job.stop_reason.clone(),
            }),
            "sessionId": format!("sess-{}", job.id),
            "errorMessage": error_message,
            "finalText": if terminal && status != "cancelled" { job.final_text.clone() } else { None },
        },
        "artifacts": {
            "touchedFiles": job.touched_files,
            "logPath": job.log_path,
            "patchPath": job.patch_path,
        },
        "lineage": {
            "chainId": job.chain_id,
            "parentJobId": job.parent_job_id,
            "childJobIds": children,
            "delegationDepth": job.depth,
        },
    })
}

struct Store {
    dir: PathBuf,
}

/// Removes the lock file when the critical section ends.
struct Lock(PathBuf);

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

impl Store {
    fn open() -> Result<Self, Fail> {
        let dir = var("STATE_DIR")
            .map(PathBuf::from)
            .ok_or_else(|| fail(1, "consult (fake): FAKE_CONSULT_STATE_DIR is not set"))?;
        fs::create_dir_all(&dir).map_err(|e| {
            fail(
                1,
                format!("consult (fake): state dir {}: {e}", dir.display()),
            )
        })?;
        Ok(Self { dir })
    }

    fn lock(&self) -> Result<Lock, Fail> {
        let path = self.dir.join("state.lock");
        let start = Instant::now();
        loop {
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(_) => return Ok(Lock(path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    // A holder killed mid-section leaves the file behind; sections are tiny.
                    let stale = fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|m| m.elapsed().ok())
                        .is_some_and(|age| age > Duration::from_secs(5));
                    if stale {
                        let _ = fs::remove_file(&path);
                    } else if start.elapsed() > Duration::from_secs(20) {
                        return Err(fail(1, "consult (fake): state lock timeout"));
                    } else {
                        sleep_ms(2);
                    }
                }
                Err(e) => return Err(fail(1, format!("consult (fake): lock: {e}"))),
            }
        }
    }

    fn read(&self) -> Result<State, Fail> {
        let path = self.dir.join("state.json");
        match fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| fail(1, format!("consult (fake): corrupt state: {e}"))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
            Err(e) => Err(fail(1, format!("consult (fake): state: {e}"))),
        }
    }

    fn write(&self, state: &State) -> Result<(), Fail> {
        let text = serde_json::to_string_pretty(state)
            .map_err(|e| fail(1, format!("consult (fake): state: {e}")))?;
        let tmp = self.dir.join(format!("state.json.{}", std::process::id()));
        fs::write(&tmp, text)
            .and_then(|()| fs::rename(&tmp, self.dir.join("state.json")))
            .map_err(|e| fail(1, format!("consult (fake): state: {e}")))
    }

    /// Reads, changes and writes the state under the lock.
    fn update<T>(&self, f: impl FnOnce(&mut State) -> Result<T, Fail>) -> Result<T, Fail> {
        let _lock = self.lock()?;
        let mut state = self.read()?;
        let out = f(&mut state)?;
        self.write(&state)?;
        Ok(out)
    }

    fn snapshot(&self) -> Result<State, Fail> {
        let _lock = self.lock()?;
        self.read()
    }

    fn count(&self, name: &str) -> Result<u64, Fail> {
        self.update(|s| {
            let n = s.counters.entry(name.to_owned()).or_insert(0);
            *n += 1;
            Ok(*n)
        })
    }
}

fn find<'a>(state: &'a State, id: &str) -> Result<&'a Job, Fail> {
    state
        .jobs
        .iter()
        .find(|j| j.id == id)
        .ok_or_else(|| not_found(id))
}

fn find_mut<'a>(state: &'a mut State, id: &str) -> Result<&'a mut Job, Fail> {
    state
        .jobs
        .iter_mut()
        .find(|j| j.id == id)
        .ok_or_else(|| not_found(id))
}

// ---------------------------------------------------------------------------------------------
// Arguments

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

struct Submission {
    kind: &'static str,
    label: Option<String>,
    profile: Option<String>,
    mode: String,
    confinement: String,
    prompt: String,
    model: Option<String>,
    effort: Option<String>,
    after: Vec<String>,
    isolated: bool,
    final_text: Option<String>,
}

fn submit(store: &Store, sub: Submission) -> Result<String, Fail> {
    let now = now_ms();
    let run_ms = var_u64("RUN_MS", 0)?;
    let final_status = var("STATUS").unwrap_or_else(|| "completed".to_owned());
    let error_message = var("ERROR_MESSAGE");
    let stop_reason = var("STOP_REASON").unwrap_or_else(|| "end_turn".to_owned());
    let touched = var_list("TOUCHED_FILES");
    let log_lines = var_u64("LOG_LINES", 3)?;
    let log_every_ms = var_u64("LOG_EVERY_MS", 0)?;
    let events = scripted_events(now)?;
    let host_session = std::env::var("CONSULT_HOST_SESSION_ID").ok();
    let parent = std::env::var("CONSULT_JOB_ID").ok();
    let dir = store.dir.clone();
    store.update(move |state| {
        for id in &sub.after {
            find(state, id)?;
        }
        state.next_job += 1;
        let id = format!("job-{}", state.next_job);
        let (chain_id, parent_job_id, depth) = match parent.and_then(|p| {
            state
                .jobs
                .iter()
                .find(|j| j.id == p)
                .map(|j| (j.chain_id.clone(), j.id.clone(), j.depth + 1))
        }) {
            Some((chain, parent, depth)) => (chain, Some(parent), depth),
            None => {
                state.next_chain += 1;
                (format!("chain-{}", state.next_chain), None, 0)
            }
        };
        let log_path = dir.join("logs").join(format!("{id}.log"));
        let lines: String = (1..=log_lines)
            .map(|i| format!("[{id}] log line {i}\n"))
            .collect();
        let _ = fs::create_dir_all(dir.join("logs"));
        let _ = fs::write(&log_path, lines);
        let patch_path = (sub.isolated && sub.mode == "write").then(|| {
            let path = dir.join("patches").join(format!("{id}.patch"));
            let _ = fs::create_dir_all(dir.join("patches"));
            let _ = fs::write(
                &path,
                "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-old\n+new\n",
            );
            path.display().to_string()
        });
        let final_text = sub
            .final_text
            .or_else(|| var("FINAL_TEXT"))
            .or_else(|| Some(format!("Done: {}", sub.prompt)));
        state.jobs.push(Job {
            id: id.clone(),
            label: sub.label,
            kind: sub.kind.to_owned(),
            profile: sub.profile,
            mode: sub.mode,
            confinement: sub.confinement,
            prompt: sub.prompt,
            model: sub.model,
            effort: sub.effort,
            after: sub.after,
            host_session_id: host_session,
            submitted_ms: now,
            run_ms,
            final_status,
            cancelled_ms: None,
            final_text,
            error_message,
            stop_reason,
            touched_files: touched,
            log_lines,
            log_every_ms,
            log_path: Some(log_path.display().to_string()),
            patch_path,
            events,
            steers: Vec::new(),
            chain_id,
            parent_job_id,
            depth,
        });
        Ok(id)
    })
}

fn print_envelope(store: &Store, sub: &str, id: &str) -> Result<(), Fail> {
    let state = store.snapshot()?;
    let job = find(&state, id)?;
    emit(sub, &envelope(schema()?, &state, job, now_ms()))
}

fn delegate(store: &Store, args: &[String]) -> Result<(), Fail> {
    let a = Args::parse(
        args,
        &["agent", "sandbox", "model", "effort", "label", "after"],
        &["background", "json", "read-only", "write", "isolated"],
    )?;
    if !a.positional.is_empty() {
        return Err(usage(format!(
            "consult delegate: unexpected argument {:?} (the prompt goes after --)",
            a.positional[0]
        )));
    }
    let prompt = a.rest.join(" ");
    if prompt.trim().is_empty() {
        return Err(usage("consult delegate: missing prompt"));
    }
    if let Some(label) = a.value("label") {
        let n = label.chars().count();
        if n == 0 || n > 80 {
            return Err(usage("consult delegate: --label must be 1-80 characters"));
        }
    }
    if let Some(agent) = a.value("agent")
        && !agent_names().iter().any(|n| n == agent)
    {
        return Err(usage(format!("unknown agent: {agent}")));
    }
    let id = submit(
        store,
        Submission {
            kind: "task",
            label: a.value("label").map(str::to_owned),
            profile: Some(
                a.value("agent")
                    .map(str::to_owned)
                    .unwrap_or_else(|| agent_names().first().cloned().unwrap_or_default()),
            ),
            mode: a.mode()?.to_owned(),
            confinement: a.sandbox()?,
            prompt,
            model: a.value("model").map(str::to_owned),
            effort: a.value("effort").map(str::to_owned),
            after: a.values.get("after").cloned().unwrap_or_default(),
            isolated: a.flag("isolated"),
            final_text: None,
        },
    )?;
    if !a.flag("background") {
        wait_terminal(store, std::slice::from_ref(&id))?;
    }
    print_envelope(store, "delegate", &id)
}

fn review(store: &Store, args: &[String]) -> Result<(), Fail> {
    let a = Args::parse(
        args,
        &[
            "agent", "base", "job", "sandbox", "model", "effort", "label",
        ],
        &["json"],
    )?;
    if a.value("base").is_some() && a.value("job").is_some() {
        return Err(usage("--base and --job are exclusive"));
    }
    if let Some(job) = a.value("job") {
        find(&store.snapshot()?, job)?;
    }
    let target = a
        .value("job")
        .map(|j| format!("job {j}"))
        .or_else(|| a.value("base").map(|b| format!("changes since {b}")))
        .unwrap_or_else(|| "the working tree".to_owned());
    let text = var("REVIEW_TEXT")
        .unwrap_or_else(|| format!("Findings for {target}:\n1. [minor] no blocking issues found."));
    let id = submit(
        store,
        Submission {
            kind: "review",
            label: a.value("label").map(str::to_owned),
            profile: a.value("agent").map(str::to_owned),
            mode: "read-only".to_owned(),
            confinement: a.sandbox()?,
            prompt: format!("review {target}"),
            model: a.value("model").map(str::to_owned),
            effort: a.value("effort").map(str::to_owned),
            after: Vec::new(),
            isolated: false,
            final_text: Some(text),
        },
    )?;
    // consult has no queued review: it blocks until the review is done.
    wait_terminal(store, std::slice::from_ref(&id))?;
    print_envelope(store, "review", &id)
}

fn status(store: &Store, args: &[String]) -> Result<(), Fail> {
    let a = Args::parse(args, &[], &["json", "all"])?;
    let state = store.snapshot()?;
    let now = now_ms();
    let session = std::env::var("CONSULT_HOST_SESSION_ID").ok();
    let jobs: Vec<Value> = match a.positional.as_slice() {
        [id] => vec![find(&state, id)?.object(now)],
        [] => state
            .jobs
            .iter()
            .filter(|j| a.flag("all") || session.is_none() || j.host_session_id == session)
            .map(|j| j.object(now))
            .collect(),
        _ => return Err(usage("consult status: too many arguments")),
    };
    emit("status", &json!({"schemaVersion": schema()?, "jobs": jobs}))
}

/// Blocks until every job is terminal, or exits 4 after `FAKE_CONSULT_WAIT_LIMIT_MS`.
fn wait_terminal(store: &Store, ids: &[String]) -> Result<(), Fail> {
    let limit = var_u64("WAIT_LIMIT_MS", 60_000)?;
    let start = Instant::now();
    loop {
        let state = store.snapshot()?;
        let now = now_ms();
        let mut all = true;
        for id in ids {
            all &= is_terminal(&find(&state, id)?.status(now));
        }
        if all {
            return Ok(());
        }
        if start.elapsed() >= Duration::from_millis(limit) {
            return Err(fail(4, "consult wait: timed out"));
        }
        sleep_ms(20);
    }
}

fn wait(store: &Store, args: &[String]) -> Result<(), Fail> {
    let a = Args::parse(args, &["timeout"], &["json", "keep-running"])?;
    if a.positional.is_empty() {
        return Err(usage("consult wait: missing job id"));
    }
    wait_terminal(store, &a.positional)?;
    let state = store.snapshot()?;
    let now = now_ms();
    let mut jobs = Vec::new();
    for id in &a.positional {
        jobs.push(find(&state, id)?.object(now));
    }
    emit("wait", &json!({"schemaVersion": schema()?, "jobs": jobs}))
}

fn result(store: &Store, args: &[String]) -> Result<(), Fail> {
    let a = Args::parse(args, &[], &["json"])?;
    let id = a.one_id("result")?;
    let state = store.snapshot()?;
    let job = find(&state, id)?;
    let now = now_ms();
    let status = job.status(now);
    if !is_terminal(&status) {
        return Err(fail(
            5,
            format!("consult result: job {id} is not final ({status})"),
        ));
    }
    emit("result", &envelope(schema()?, &state, job, now))?;
    if status == "failed" {
        return Err(fail(6, format!("consult result: job {id} failed")));
    }
    Ok(())
}

fn logs(store: &Store, args: &[String]) -> Result<(), Fail> {
    let a = Args::parse(args, &["tail"], &[])?;
    let id = a.one_id("logs")?;
    let tail = match a.value("tail") {
        Some(t) => Some(
            t.parse::<u64>()
                .map_err(|_| usage(format!("--tail: {t:?} is not a number")))?,
        ),
        None => None,
    };
    let state = store.snapshot()?;
    let job = find(&state, id)?;
    let elapsed = now_ms().saturating_sub(job.submitted_ms);
    // One line at submission, one more every LOG_EVERY_MS, up to LOG_LINES.
    let available = elapsed
        .checked_div(job.log_every_ms)
        .map_or(job.log_lines, |steps| (steps + 1).min(job.log_lines));
    let first = tail.map_or(1, |t| available.saturating_sub(t) + 1);
    let text: String = (first..=available)
        .map(|i| format!("[{id}] log line {i}\n"))
        .collect();
    write_stdout(&text)
}

fn cancel(store: &Store, args: &[String]) -> Result<(), Fail> {
    let a = Args::parse(args, &[], &["json"])?;
    let id = a.one_id("cancel")?.to_owned();
    let now = now_ms();
    let cancelled = store.update(|state| {
        let job = find_mut(state, &id)?;
        if is_terminal(&job.status(now)) {
            return Ok(false);
        }
        job.cancelled_ms = Some(now);
        Ok(true)
    })?;
    let line = if cancelled {
        format!("cancelled {id}\n")
    } else {
        format!("{id} is already final\n")
    };
    write_stdout(&line)
}

fn steer(store: &Store, args: &[String]) -> Result<(), Fail> {
    let a = Args::parse(args, &["message"], &["json"])?;
    let id = a.one_id("steer")?.to_owned();
    let message = a
        .value("message")
        .ok_or_else(|| usage("consult steer: --message is required"))?
        .to_owned();
    let now = now_ms();
    store.update(|state| {
        let job = find_mut(state, &id)?;
        let status = job.status(now);
        if is_terminal(&status) {
            return Err(fail(
                5,
                format!("consult steer: job {id} is final ({status})"),
            ));
        }
        let seq = job.events.len() as u64 + 1;
        job.events.push(make_event(
            seq,
            now,
            &json!({"type": "steer", "urgency": "info", "message": message}),
        ));
        job.steers.push(message);
        Ok(())
    })?;
    write_stdout(&format!("steer accepted for {id}\n"))
}

fn events(store: &Store, args: &[String]) -> Result<(), Fail> {
    let a = Args::parse(args, &["since"], &["json", "follow"])?;
    let id = a.one_id("events")?.to_owned();
    let since = match a.value("since") {
        Some(s) => s
            .parse::<u64>()
            .map_err(|_| usage(format!("--since: {s:?} is not a number")))?,
        None => 0,
    };
    let schema = schema()?;
    let seq_of = |e: &Value| e.get("seq").and_then(Value::as_u64).unwrap_or(0);
    if !a.flag("follow") {
        let state = store.snapshot()?;
        let job = find(&state, &id)?;
        let events: Vec<&Value> = job.events.iter().filter(|e| seq_of(e) > since).collect();
        return emit(
            "events",
            &json!({"schemaVersion": schema, "jobId": id, "events": events}),
        );
    }
    let follow_n = store.count("events-follow")?;
    let die_after = var("FOLLOW_DIE_AFTER")
        .map(|_| var_u64("FOLLOW_DIE_AFTER", 0))
        .transpose()?;
    let die_times = var("FOLLOW_DIE_TIMES")
        .map(|_| var_u64("FOLLOW_DIE_TIMES", 0))
        .transpose()?;
    let die_after = die_after.filter(|_| die_times.is_none_or(|t| follow_n <= t));
    let step = var_u64("EVENT_STEP_MS", 0)?;
    let limit = Duration::from_millis(var_u64("FOLLOW_LIMIT_MS", 60_000)?);
    let start = Instant::now();
    let mut last = since;
    let mut emitted = 0u64;
    loop {
        let state = store.snapshot()?;
        let job = find(&state, &id)?;
        let terminal = is_terminal(&job.status(now_ms()));
        let pending: Vec<Value> = job
            .events
            .iter()
            .filter(|e| seq_of(e) > last)
            .cloned()
            .collect();
        if pending.is_empty() && terminal {
            return Ok(());
        }
        for event in pending {
            sleep_ms(step);
            last = seq_of(&event);
            let line = json!({"schemaVersion": schema, "jobId": id, "event": event});
            if var_list("BAD_JSON")
                .iter()
                .any(|s| s == "events" || s == "all")
            {
                write_stdout("{\"event\": <<not json>>\n")?;
            } else {
                write_stdout(&format!("{line}\n"))?;
            }
            emitted += 1;
            if die_after.is_some_and(|n| emitted >= n) {
                return Err(fail(4, "consult events: follow stream lost"));
            }
        }
        if start.elapsed() >= limit {
            return Err(fail(4, "consult events: follow timed out"));
        }
        sleep_ms(20);
    }
}

fn report(store: &Store, args: &[String]) -> Result<(), Fail> {
    let a = Args::parse(
        args,
        &["type", "message", "urgency", "data", "data-file"],
        &["json"],
    )?;
    let id = match a.positional.as_slice() {
        [id] => id.clone(),
        [] => std::env::var("CONSULT_JOB_ID")
            .map_err(|_| usage("consult report: no job id (argument or CONSULT_JOB_ID)"))?,
        _ => return Err(usage("consult report: too many arguments")),
    };
    let kind = a.value("type").unwrap_or("progress").to_owned();
    if !REPORT_TYPES.contains(&kind.as_str()) {
        return Err(usage(format!("unknown report type: {kind}")));
    }
    let urgency = a
        .value("urgency")
        .unwrap_or(default_urgency(&kind))
        .to_owned();
    if !matches!(urgency.as_str(), "wake" | "info") {
        return Err(usage(format!("unknown urgency: {urgency}")));
    }
    let message = a
        .value("message")
        .ok_or_else(|| usage("consult report: --message is required"))?
        .to_owned();
    // `--data-file` (a test convenience: argv strings are limited to 128 KiB) reads the JSON
    // from a file.
    let from_file = match a.value("data-file") {
        Some(path) => {
            Some(fs::read_to_string(path).map_err(|e| usage(format!("--data-file {path}: {e}")))?)
        }
        None => None,
    };
    let data = match from_file.as_deref().or(a.value("data")) {
        Some(raw) => Some(
            serde_json::from_str::<Value>(raw)
                .map_err(|e| usage(format!("--data is not JSON: {e}")))?,
        ),
        None => None,
    };
    let now = now_ms();
    let seq = store.update(|state| {
        let job = find_mut(state, &id)?;
        let seq = job.events.len() as u64 + 1;
        let mut spec = json!({"type": kind, "urgency": urgency, "message": message});
        if let (Some(data), Some(obj)) = (data, spec.as_object_mut()) {
            obj.insert("data".to_owned(), data);
        }
        job.events.push(make_event(seq, now, &spec));
        Ok(seq)
    })?;
    emit(
        "report",
        &json!({"schemaVersion": schema()?, "jobId": id, "seq": seq}),
    )
}

fn chain(store: &Store, args: &[String]) -> Result<(), Fail> {
    let a = Args::parse(args, &[], &["json"])?;
    let state = store.snapshot()?;
    let now = now_ms();
    let wanted = match a.positional.as_slice() {
        [id] => Some(find(&state, id)?.chain_id.clone()),
        [] => std::env::var("CONSULT_JOB_ID")
            .ok()
            .and_then(|id| find(&state, &id).ok().map(|j| j.chain_id.clone())),
        _ => return Err(usage("consult chain: too many arguments")),
    };
    let mut chains: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for job in &state.jobs {
        if wanted.as_deref().is_none_or(|w| w == job.chain_id) {
            chains.entry(&job.chain_id).or_default().push(json!({
                "id": job.id,
                "status": job.status(now),
                "parentJobId": job.parent_job_id,
                "delegationDepth": job.depth,
            }));
        }
    }
    let chains: Vec<Value> = chains
        .into_iter()
        .map(|(chain, jobs)| json!({"chainId": chain, "jobs": jobs}))
        .collect();
    emit(
        "chain",
        &json!({"schemaVersion": schema()?, "chains": chains}),
    )
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
