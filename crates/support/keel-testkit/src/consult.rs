//! A fake `consult` CLI (the delegation CLI behind dsh-consult, v1.0–1.3) for keel's delegation
//! tests: the `fake-consult` executable, [`fake_consult_path`] to find it, [`FakeConsult`] to build
//! its scenario environment, and readers for what it leaves behind ([`invocations`],
//! [`read_record`], [`job_ids`], [`steers`]).
//!
//! The fake is a real process spawned through keel's real subprocess service (real argv, env,
//! streams and exit codes) and matches consult 1.3.0's contracts as `specs/delegation.md` lists
//! them. It is controlled **only** through the environment, and keeps its state (jobs, counters)
//! in a directory named by `FAKE_CONSULT_STATE_DIR` — there is no global state, so parallel tests
//! with their own directories never see each other.
//!
//! # Subcommands
//! - `--version` → `consult <version>`.
//! - `doctor --json [--read-only|--write] [--sandbox confined|inherit] [--agent A]` →
//!   `{schemaVersion, ok, mode, sandbox, checks: [{name, ok, message}]}`; a failing doctor prints
//!   `ok: false` and exits `FAKE_CONSULT_DOCTOR_FAIL_EXIT` (1).
//! - `agents --json` → `{schemaVersion, agents: [{name, available, default}]}`.
//! - `capabilities --json` (1.2+) → `{schemaVersion, version, subcommands, features {steer,
//!   events, report, review, chain}, agents, extensions {sandbox, isolated}}`; below 1.2 it is
//!   missing (`unknown subcommand: capabilities`, exit 2).
//! - `delegate --background --json [--agent P] --read-only|--write [--isolated] --sandbox S
//!   [--model M] [--effort E] [--label L] [--after ID]... -- <prompt>` → the job result v1
//!   envelope of the new job (`job-1`, `job-2`, … per state dir). Without `--background` it blocks
//!   until the job is final. `--isolated --write` jobs get a `patchPath` (a file in the state
//!   dir); every job gets a `logPath`. A job started with `CONSULT_JOB_ID` naming a known job is
//!   its child (same `chainId`, `parentJobId`, `delegationDepth + 1`).
//! - `review --json [--agent A] [--base REF | --job ID] --sandbox S` → blocks for the run time,
//!   then prints the envelope of a `kind: "review"` job whose final text is the findings.
//! - `status [ID] --json` / `status --all --json` → `{schemaVersion, jobs: [job]}`; without an
//!   id and without `--all`, only the jobs of the calling `CONSULT_HOST_SESSION_ID` (all jobs
//!   when that is unset).
//! - `wait <ID>... --json --keep-running` → blocks until every job is final, then
//!   `{schemaVersion, jobs}`; exit 4 after `FAKE_CONSULT_WAIT_LIMIT_MS`.
//! - `result <ID> --json` → the envelope `{schemaVersion, job {id, label, kind, status, profile,
//!   authority {mode, confinement}, prompt, submittedAt, startedAt, completedAt, model, effort,
//!   afterJobIds, hostSessionId}, outcome {stopReason, sessionId, errorMessage, finalText},
//!   artifacts {touchedFiles, logPath, patchPath}, lineage {chainId, parentJobId, childJobIds,
//!   delegationDepth}}`; exit 5 (`not final`, nothing on stdout) while queued or running; exit 6
//!   (envelope printed) for a `failed` job.
//! - `logs <ID> [--tail N]` → plain lines `[<id>] log line <i>`; one line at submission and one
//!   more every `FAKE_CONSULT_LOG_EVERY_MS`, up to `FAKE_CONSULT_LOG_LINES`.
//! - `cancel <ID>` → `cancelled <id>` (status becomes `cancelled`) or `<id> is already final`.
//! - `steer <ID> --message <text>` → exit 0 `steer accepted …` (the message is appended to the
//!   job's events as a `steer` event and to [`steers`]); exit 5 when the job is final; exits 1
//!   (unsupported) and 3 (refused) through `FAKE_CONSULT_EXIT_STEER`.
//! - `events <ID> --json [--since N]` → `{schemaVersion, jobId, events: [event]}`;
//!   `events <ID> --json --follow [--since N]` → NDJSON lines `{schemaVersion, jobId, event}`, one
//!   per `FAKE_CONSULT_EVENT_STEP_MS`, following new events (reports, steers) until the job is
//!   final (exit 0) or dying with exit 4 after `FAKE_CONSULT_FOLLOW_DIE_AFTER` events. An event
//!   is `{seq, at, type, urgency, message, data?}`; `seq` counts from 1 per job.
//! - `report [ID] --type T --message M [--urgency wake|info] [--data JSON | --data-file PATH]`
//!   (the id defaults to `CONSULT_JOB_ID`; `--data-file` is the fake's own, for data larger than
//!   an argument may be) → appends an event, prints `{schemaVersion, jobId, seq}`.
//! - `chain [ID] --json` → `{schemaVersion, chains: [{chainId, jobs: [{id, status, parentJobId,
//!   delegationDepth}]}]}` (one chain for an id or `CONSULT_JOB_ID`, else all).
//! - `<sub> --help` → a usage line, exit 0 (exit 2 `unknown subcommand` when the subcommand is
//!   missing, which is how callers probe older builds).
//! - An unknown job id anywhere → `job not found: <id>` on stderr, exit 2. An unknown option or a
//!   malformed argument → exit 2.
//!
//! Each invocation, in order: append to the record file; count it (`<sub>`, or `version`);
//! sleep the delays; refuse a missing subcommand; apply a transient failure; apply a forced exit;
//! serve.
//!
//! # Environment
//! | variable | default | effect |
//! |---|---|---|
//! | `FAKE_CONSULT_STATE_DIR` | — (required except for `--version`, `--help` and forced exits; without it nothing is counted, so first-N failures never fire) | jobs and invocation counters (`state.json`, written under a lock file), logs, patches |
//! | `FAKE_CONSULT_RECORD` | unset | file that gets one JSON line per invocation: `{argv (without the program name), env (only CONSULT_* variables), cwd}` |
//! | `FAKE_CONSULT_VERSION` | `1.3.0` | what `--version` prints (`consult <v>`) and `capabilities` reports; below 1.2 `capabilities` is missing |
//! | `FAKE_CONSULT_EXIT_<SUB>` | 0 | force exit code for a subcommand (`<SUB>` upper-cased: `VERSION`, `DOCTOR`, `DELEGATE`, `WAIT`, `STEER`, …); nothing on stdout, a code-specific line on stderr; 0 = not forced |
//! | `FAKE_CONSULT_STDERR_<SUB>` | by code | the stderr line of a forced exit (e.g. `unknown job: job-9`) |
//! | `FAKE_CONSULT_FAIL_FIRST_<SUB>` | 0 | the first N invocations of the subcommand fail … |
//! | `FAKE_CONSULT_FAIL_CODE_<SUB>` | 3 | … with this exit code (3 = busy), later ones are served |
//! | `FAKE_CONSULT_DOCTOR_FAIL_FIRST` | 0 | the first N `doctor` invocations report `ok: false` |
//! | `FAKE_CONSULT_DOCTOR_FAIL_EXIT` | 1 | exit code of a failing doctor |
//! | `FAKE_CONSULT_DOCTOR_PROBLEM` | `agent is not authenticated` | the failing check's message |
//! | `FAKE_CONSULT_AGENTS` | `claude,codex,opencode,copilot` | `agents --json` (the first is the default) |
//! | `FAKE_CONSULT_CAPABILITIES` | generated | raw text printed by `capabilities --json` instead |
//! | `FAKE_CONSULT_MISSING` | empty | comma list of subcommands this build lacks (`events,steer,capabilities`): `unknown subcommand: X`, exit 2 |
//! | `FAKE_CONSULT_STATUS` | `completed` | a job's status once its run time has passed (`failed`, `cancelled`, `running` = never ends, or any unknown string) — captured at submission |
//! | `FAKE_CONSULT_RUN_MS` | 0 | a job is `running` for this long after submission — captured at submission |
//! | `FAKE_CONSULT_FINAL_TEXT` | `Done: <prompt>` | `outcome.finalText` of a final job — captured at submission |
//! | `FAKE_CONSULT_ERROR_MESSAGE` | `the delegate failed` for failed jobs | `outcome.errorMessage` — captured at submission |
//! | `FAKE_CONSULT_STOP_REASON` | `end_turn` | `outcome.stopReason` of a completed job |
//! | `FAKE_CONSULT_TOUCHED_FILES` | empty | comma list for `artifacts.touchedFiles` |
//! | `FAKE_CONSULT_REVIEW_TEXT` | a one-finding review | final text of `review` |
//! | `FAKE_CONSULT_DELAY_MS` | 0 | sleep before serving every subcommand |
//! | `FAKE_CONSULT_DELAY_MS_<SUB>` | 0 | extra sleep before serving one subcommand (a large value = a hang) |
//! | `FAKE_CONSULT_LOG_LINES` | 3 | total log lines of a job — captured at submission |
//! | `FAKE_CONSULT_LOG_EVERY_MS` | 0 (all at once) | log growth: one more line per interval — captured at submission |
//! | `FAKE_CONSULT_EVENTS` | `[]` | JSON array of `{type, urgency?, message, data?}`: the job's scripted events (seq 1…) — captured at submission; urgency defaults to `wake` for `blocked`/`decision_needed`, else `info` |
//! | `FAKE_CONSULT_EVENT_STEP_MS` | 0 | `--follow` sleeps this long before each event |
//! | `FAKE_CONSULT_FOLLOW_DIE_AFTER` | unset | a `--follow` invocation exits 4 right after emitting this many events |
//! | `FAKE_CONSULT_FOLLOW_DIE_TIMES` | unset (all) | only the first K `--follow` invocations die |
//! | `FAKE_CONSULT_FOLLOW_LIMIT_MS` | 60000 | a follow still open after this exits 4 |
//! | `FAKE_CONSULT_WAIT_LIMIT_MS` | 60000 | `wait` (and a blocking `delegate`/`review`) exits 4 after this |
//! | `FAKE_CONSULT_BAD_JSON` | empty | comma list of subcommands (or `all`) whose JSON output is garbage (exit 0) |
//! | `FAKE_CONSULT_SCHEMA_VERSION` | 1 | `schemaVersion` of every envelope |
//!
//! Exit codes the fake produces by itself: 0 ok, 1 a failing doctor or a broken scenario
//! variable, 2 usage / `unknown subcommand: X` / `job not found: <id>`, 4 wait or follow limits and
//! a dying follow, 5 result or steer of a job not final / final, 6 result of a failed job. Any
//! other code (3 busy, 8 review-unsupported, 130, 143, …) comes from `FAKE_CONSULT_EXIT_<SUB>` or
//! `FAKE_CONSULT_FAIL_FIRST_<SUB>` with the code's usual stderr line.

pub mod fake;

pub use fake::{invocations, job_ids, steers};

use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The name of the fake's executable (without the platform suffix).
pub const BIN_NAME: &str = "fake-consult";

/// Environment variable that, when set, names the fake's executable directly.
pub const PATH_OVERRIDE: &str = "KEEL_FAKE_CONSULT";

/// The path of the built `fake-consult` executable.
///
/// Looks at [`PATH_OVERRIDE`] first, then next to the running test executable: the target
/// profile directory (`target/debug/fake-consult`, the parent of the test's `deps/`), the way
/// Cargo lays out keel-testkit's own binaries. Cargo builds the binary before keel-testkit's own
/// integration tests, and for any workspace-wide build; when another crate's tests run alone it
/// is missing, so this builds it once per process (`$CARGO build --manifest-path
/// crates/support/keel-testkit/Cargo.toml --bin fake-consult` into the same target dir and profile) and
/// returns an error naming the command when that fails.
pub fn fake_consult_path() -> std::io::Result<PathBuf> {
    if let Some(path) = std::env::var_os(PATH_OVERRIDE) {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe()?;
    if let Some(found) = find_next_to(&exe) {
        return Ok(found);
    }
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| build_next_to(&exe))
        .clone()
        .map_err(|message| std::io::Error::new(std::io::ErrorKind::NotFound, message))
}

fn exe_name() -> String {
    format!("{BIN_NAME}{}", std::env::consts::EXE_SUFFIX)
}

/// `deps/<name>`'s parent (the profile dir) and one level up, where Cargo puts binaries.
fn find_next_to(exe: &Path) -> Option<PathBuf> {
    let name = exe_name();
    exe.ancestors()
        .skip(1)
        .take(3)
        .map(|dir| dir.join(&name))
        .find(|p| p.is_file())
}

fn build_next_to(exe: &Path) -> Result<PathBuf, String> {
    let command = format!("cargo build -p keel-testkit --bin {BIN_NAME}");
    let profile_dir = exe
        .parent()
        .filter(|d| d.ends_with("deps"))
        .and_then(Path::parent)
        .ok_or_else(|| {
            format!(
                "{BIN_NAME} not found and {} is not in a Cargo deps dir: run `{command}` or set {PATH_OVERRIDE}",
                exe.display()
            )
        })?;
    let profile = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("debug")
        .to_owned();
    let target_dir = profile_dir.parent().unwrap_or(profile_dir);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let mut cmd = std::process::Command::new(cargo);
    cmd.arg("build")
        .arg("--quiet")
        .arg("--manifest-path")
        .arg(&manifest)
        .args(["--bin", BIN_NAME])
        .arg("--target-dir")
        .arg(target_dir);
    match profile.as_str() {
        "debug" => {}
        "release" => {
            cmd.arg("--release");
        }
        other => {
            cmd.args(["--profile", other]);
        }
    }
    let out = cmd.output().map_err(|e| {
        format!("{BIN_NAME} not found and cargo could not run ({e}): run `{command}`")
    })?;
    if !out.status.success() {
        return Err(format!(
            "{BIN_NAME} not found and `{command}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    find_next_to(exe).ok_or_else(|| {
        format!(
            "{BIN_NAME} was built but is not next to {}: set {PATH_OVERRIDE}",
            exe.display()
        )
    })
}

/// A typed builder of the fake's scenario environment; [`FakeConsult::env`] turns it into the
/// `FAKE_CONSULT_*` pairs to pass to the child (see the module docs for each variable).
#[derive(Clone, Debug, Default)]
pub struct FakeConsult {
    vars: BTreeMap<String, String>,
}

fn sub_key(sub: &str) -> String {
    sub.to_ascii_uppercase().replace('-', "_")
}

fn join<I: IntoIterator<Item = S>, S: AsRef<str>>(items: I) -> String {
    items
        .into_iter()
        .map(|s| s.as_ref().to_owned())
        .collect::<Vec<_>>()
        .join(",")
}

impl FakeConsult {
    /// An empty scenario: consult 1.3.0, everything succeeds immediately.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `FAKE_CONSULT_<name>` to `value` (for anything without a typed setter).
    pub fn set(mut self, name: &str, value: impl ToString) -> Self {
        self.vars
            .insert(format!("FAKE_CONSULT_{name}"), value.to_string());
        self
    }

    /// Appends `item` to the comma list in `FAKE_CONSULT_<name>`.
    fn push(mut self, name: &str, item: &str) -> Self {
        let key = format!("FAKE_CONSULT_{name}");
        let entry = self.vars.entry(key).or_default();
        if !entry.is_empty() {
            entry.push(',');
        }
        entry.push_str(item);
        self
    }

    /// The state directory (`FAKE_CONSULT_STATE_DIR`).
    pub fn state_dir(self, dir: impl AsRef<Path>) -> Self {
        self.set("STATE_DIR", dir.as_ref().display())
    }

    /// The JSONL invocation record (`FAKE_CONSULT_RECORD`).
    pub fn record(self, file: impl AsRef<Path>) -> Self {
        self.set("RECORD", file.as_ref().display())
    }

    /// The version `--version` prints (`FAKE_CONSULT_VERSION`).
    pub fn version(self, version: &str) -> Self {
        self.set("VERSION", version)
    }

    /// The exit code of `--version` (`FAKE_CONSULT_EXIT_VERSION`).
    pub fn version_exit(self, code: i32) -> Self {
        self.exit("version", code)
    }

    /// The first `n` doctor runs report not ready (`FAKE_CONSULT_DOCTOR_FAIL_FIRST`).
    pub fn doctor_fail_first(self, n: u64) -> Self {
        self.set("DOCTOR_FAIL_FIRST", n)
    }

    /// Forces `sub` to exit with `code` (`FAKE_CONSULT_EXIT_<SUB>`); `sub` is e.g. `"wait"`.
    pub fn exit(self, sub: &str, code: i32) -> Self {
        self.set(&format!("EXIT_{}", sub_key(sub)), code)
    }

    /// The stderr line of `sub`'s forced exit (`FAKE_CONSULT_STDERR_<SUB>`).
    pub fn stderr(self, sub: &str, line: &str) -> Self {
        self.set(&format!("STDERR_{}", sub_key(sub)), line)
    }

    /// The first `n` invocations of `sub` exit `code`, later ones succeed
    /// (`FAKE_CONSULT_FAIL_FIRST_<SUB>`, `FAKE_CONSULT_FAIL_CODE_<SUB>`).
    pub fn fail_first(self, sub: &str, n: u64, code: i32) -> Self {
        self.set(&format!("FAIL_FIRST_{}", sub_key(sub)), n)
            .set(&format!("FAIL_CODE_{}", sub_key(sub)), code)
    }

    /// Makes `sub` missing from this build (`FAKE_CONSULT_MISSING`).
    pub fn missing(self, sub: &str) -> Self {
        self.push("MISSING", sub)
    }

    /// The final status of new jobs (`FAKE_CONSULT_STATUS`), any string.
    pub fn status(self, status: &str) -> Self {
        self.set("STATUS", status)
    }

    /// How long new jobs run (`FAKE_CONSULT_RUN_MS`).
    pub fn run_ms(self, ms: u64) -> Self {
        self.set("RUN_MS", ms)
    }

    /// The final text of new jobs (`FAKE_CONSULT_FINAL_TEXT`).
    pub fn final_text(self, text: &str) -> Self {
        self.set("FINAL_TEXT", text)
    }

    /// The error message of new jobs (`FAKE_CONSULT_ERROR_MESSAGE`).
    pub fn error_message(self, text: &str) -> Self {
        self.set("ERROR_MESSAGE", text)
    }

    /// The touched files of new jobs (`FAKE_CONSULT_TOUCHED_FILES`).
    pub fn touched_files<I: IntoIterator<Item = S>, S: AsRef<str>>(self, files: I) -> Self {
        self.set("TOUCHED_FILES", join(files))
    }

    /// The agents `agents --json` lists (`FAKE_CONSULT_AGENTS`), the first being the default.
    pub fn agents<I: IntoIterator<Item = S>, S: AsRef<str>>(self, agents: I) -> Self {
        self.set("AGENTS", join(agents))
    }

    /// The findings `review` returns (`FAKE_CONSULT_REVIEW_TEXT`).
    pub fn review_text(self, text: &str) -> Self {
        self.set("REVIEW_TEXT", text)
    }

    /// A delay before every subcommand is served (`FAKE_CONSULT_DELAY_MS`).
    pub fn delay_ms(self, ms: u64) -> Self {
        self.set("DELAY_MS", ms)
    }

    /// A delay before `sub` is served (`FAKE_CONSULT_DELAY_MS_<SUB>`).
    pub fn delay_ms_for(self, sub: &str, ms: u64) -> Self {
        self.set(&format!("DELAY_MS_{}", sub_key(sub)), ms)
    }

    /// Total log lines of new jobs, one more every `every_ms` (`FAKE_CONSULT_LOG_LINES`,
    /// `FAKE_CONSULT_LOG_EVERY_MS`; 0 = all at once).
    pub fn log_lines(self, lines: u64, every_ms: u64) -> Self {
        self.set("LOG_LINES", lines).set("LOG_EVERY_MS", every_ms)
    }

    /// Appends one scripted event `{type, message}` to new jobs (`FAKE_CONSULT_EVENTS`); the
    /// urgency follows the type.
    pub fn event(self, kind: &str, message: &str) -> Self {
        // Keys in sorted order: the same text whether or not serde_json keeps insertion order.
        self.event_value(serde_json::json!({"message": message, "type": kind}))
    }

    /// Appends one scripted event given as JSON `{type, urgency?, message, data?}`.
    pub fn event_value(mut self, event: Value) -> Self {
        let key = "FAKE_CONSULT_EVENTS".to_owned();
        let mut list: Vec<Value> = self
            .vars
            .get(&key)
            .and_then(|raw| serde_json::from_str(raw).ok())
            .unwrap_or_default();
        list.push(event);
        self.vars.insert(key, Value::Array(list).to_string());
        self
    }

    /// The delay before each followed event (`FAKE_CONSULT_EVENT_STEP_MS`).
    pub fn event_step_ms(self, ms: u64) -> Self {
        self.set("EVENT_STEP_MS", ms)
    }

    /// `--follow` exits 4 after `n` events (`FAKE_CONSULT_FOLLOW_DIE_AFTER`).
    pub fn follow_die_after(self, n: u64) -> Self {
        self.set("FOLLOW_DIE_AFTER", n)
    }

    /// Only the first `k` follows die (`FAKE_CONSULT_FOLLOW_DIE_TIMES`).
    pub fn follow_die_times(self, k: u64) -> Self {
        self.set("FOLLOW_DIE_TIMES", k)
    }

    /// `wait` gives up with exit 4 after this long (`FAKE_CONSULT_WAIT_LIMIT_MS`).
    pub fn wait_limit_ms(self, ms: u64) -> Self {
        self.set("WAIT_LIMIT_MS", ms)
    }

    /// `sub` prints garbage instead of JSON (`FAKE_CONSULT_BAD_JSON`; `"all"` for every one).
    pub fn bad_json(self, sub: &str) -> Self {
        self.push("BAD_JSON", sub)
    }

    /// The `schemaVersion` of every envelope (`FAKE_CONSULT_SCHEMA_VERSION`).
    pub fn schema_version(self, version: u64) -> Self {
        self.set("SCHEMA_VERSION", version)
    }

    /// The scenario as environment pairs, sorted by name.
    pub fn env(&self) -> Vec<(String, String)> {
        self.vars
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// One line of the invocation record.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Invocation {
    /// The arguments, without the program name.
    pub argv: Vec<String>,
    /// The `CONSULT_*` variables the process saw.
    pub env: BTreeMap<String, String>,
    /// The working directory.
    pub cwd: PathBuf,
}

/// Reads a JSONL invocation record (empty when the file does not exist yet).
pub fn read_record(path: &Path) -> std::io::Result<Vec<Invocation>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    /// Unit tests run without Cargo building the crate's binaries first, so this exercises the
    /// build-on-demand path whenever the binary is absent (and the lookup when it is present).
    #[test]
    fn fake_consult_path_finds_or_builds_the_binary() {
        #[allow(clippy::unwrap_used)]
        let path = super::fake_consult_path().unwrap();
        assert!(path.is_file(), "{}", path.display());
        #[allow(clippy::unwrap_used)]
        let out = std::process::Command::new(&path)
            .arg("--version")
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "consult 1.3.0\n");
    }
}
