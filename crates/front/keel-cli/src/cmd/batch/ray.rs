//! The Ray engine (`keel batch --engine ray --address http://HEAD:8265`): each attempt is a
//! Ray job submitted through the Jobs REST API (no Python here), and the job's output is read
//! back through the same API while it runs.
//!
//! - **What a job gets.** Its `working_dir` is a package uploaded for it: the task's workspace,
//!   the [`Spec`] `keel batch-job` reads, the session it resumes, the user's configuration.
//!   keel itself is shipped once per batch as a `py_modules` package (content-addressed, so an
//!   unchanged binary is never uploaded twice), unless `--keel-on-nodes PATH` names a keel
//!   every node has. Shipping is the default because a Ray cluster's nodes share Ray's install,
//!   not the user's files: a task then needs nothing on the nodes.
//! - **Where the session lives.** On the node, `keel run --json` prints the session's events;
//!   the batch appends each to the task's session here (the [`Mirror`], filed under the task's
//!   local workspace), validating it as keel's own writer does. That copy is the session: a
//!   retry or a resume ships it back, and results are read from it.
//! - **Node death.** A job that fails without keel failing (Ray's supervisor actor died: its
//!   node is gone) is submitted again, up to `--retries` times, resuming its session from the
//!   copy here after crash repair — so no tool call settled here runs twice. What the lost node
//!   did after the batch last read its output is lost with it, as are its file changes.
//! - **Cancellation.** Ctrl-C stops every job (`POST …/stop`; Ray sends SIGINT, which keel
//!   takes as Ctrl-C, ending its turn) and reads each to its end.

use super::engine::{Attempt, CheckOutcome, Engine, Msg, Reattached};
use super::job::{LINE, Spec, hex_sha256};
use super::pack::{Pack, unpack};
use base64::Engine as _;
use keel_protocol::{LogRecord, SessionEvent, SessionHeader};
use keel_session::store::{Store, WriterOptions, parse_record};
use keel_session::{PersistentSession, Session};
use serde_json::{Value, json};
use sha2::Digest as _;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the Ray engine is set up.
pub struct RayOptions {
    /// The dashboard's address (`http://HEAD:8265`).
    pub address: String,
    /// Submissions again of a job lost without keel failing.
    pub retries: u32,
    /// `entrypoint_num_cpus` of each job.
    pub cpus: f64,
    /// A keel binary every node has (else this one is shipped).
    pub keel_on_nodes: Option<String>,
    /// Environment variables every job gets.
    pub env: BTreeMap<String, String>,
    /// The check's time limit.
    pub check_timeout: Duration,
    /// Global flags every task's keel gets.
    pub common: Vec<String>,
    /// Files put under the job's `$KEEL_HOME` (relative path → bytes): the user's
    /// configuration and profile.
    pub home_files: Vec<(String, Vec<u8>)>,
    /// The session store here.
    pub store: Store,
    /// This keel binary.
    pub exe: PathBuf,
}

/// Job states Ray is done with.
const TERMINAL: [&str; 3] = ["SUCCEEDED", "FAILED", "STOPPED"];

/// Ray's reasons for a failed job that say nothing about the task: its node or its
/// supervisor went away, or it never started. Such a job is submitted again.
const LOST: [&str; 4] = [
    "JOB_SUPERVISOR_ACTOR_DIED",
    "JOB_SUPERVISOR_ACTOR_UNKNOWN_FAILURE",
    "JOB_SUPERVISOR_ACTOR_START_FAILURE",
    "JOB_SUPERVISOR_ACTOR_START_TIMEOUT",
];

/// Runs attempts as Ray jobs.
pub struct RayEngine {
    rt: tokio::runtime::Runtime,
    shared: Arc<Shared>,
    /// Running tasks: index → its current job's submission id (once submitted).
    running: HashMap<usize, Arc<Mutex<Option<String>>>>,
}

struct Shared {
    opts: RayOptions,
    api: Api,
    /// The shipped binary's package URI, once uploaded.
    binary: tokio::sync::OnceCell<String>,
    /// Ctrl-C: no new job, running ones are being stopped.
    stop: AtomicBool,
}

impl RayEngine {
    /// An engine for the cluster at `opts.address`. Nothing is contacted yet: an unreachable
    /// cluster fails each task with a message saying so.
    pub fn new(opts: RayOptions) -> Result<RayEngine, String> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the Ray engine's runtime: {e}"))?;
        let api = Api::new(&opts.address)?;
        Ok(RayEngine {
            rt,
            shared: Arc::new(Shared {
                opts,
                api,
                binary: tokio::sync::OnceCell::new(),
                stop: AtomicBool::new(false),
            }),
            running: HashMap::new(),
        })
    }
}

impl Engine for RayEngine {
    fn start(&mut self, attempt: Attempt, tx: Sender<Msg>) -> Result<(), String> {
        let slot = Arc::new(Mutex::new(None));
        self.running.insert(attempt.index, slot.clone());
        let shared = self.shared.clone();
        self.rt
            .spawn(async move { run_task(shared, slot, attempt, tx).await });
        Ok(())
    }

    fn ended(&mut self, index: usize) {
        self.running.remove(&index);
    }

    fn interrupt(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for slot in self.running.values() {
            let job = slot.lock().ok().and_then(|j| j.clone());
            if let Some(job) = job {
                let shared = self.shared.clone();
                self.rt.spawn(async move {
                    let _ = shared.api.stop(&job).await;
                });
            }
        }
    }

    fn check_alone(&mut self, index: usize, attempt: &Attempt, tx: Sender<Msg>) {
        let shared = self.shared.clone();
        let job = attempt.job.clone();
        let has_check = attempt.check.is_some();
        self.rt.spawn(async move {
            let (check, ms) = match (has_check, job) {
                (false, _) => (CheckOutcome::None, 0),
                (true, None) => (
                    CheckOutcome::Error(
                        "the session ended on a Ray node and no job of it is recorded; the check \
                         cannot run again (its workspace stayed on the node)"
                            .into(),
                    ),
                    0,
                ),
                (true, Some(job)) => match shared.api.logs(&job).await {
                    Ok(text) => last_check(&text).unwrap_or_else(|| {
                        (
                            CheckOutcome::Error(format!(
                                "the Ray job {job} reported no check result, and the check \
                                 cannot run again (its workspace stayed on the node)"
                            )),
                            0,
                        )
                    }),
                    Err(e) => (CheckOutcome::Error(e), 0),
                },
            };
            let _ = tx.send(Msg::Finished {
                index,
                check,
                check_wall: Duration::from_millis(ms),
            });
        });
    }

    fn reattach(&mut self, runs: &[(usize, String, PathBuf)]) -> Vec<Reattached> {
        // All at once: a job left pending waits for a CPU the others hold, so stopping them
        // one after another would let the others run on unread meanwhile.
        let handles: Vec<_> = runs
            .iter()
            .map(|(index, job, workspace)| {
                let shared = self.shared.clone();
                self.rt
                    .spawn(reattach_one(shared, *index, job.clone(), workspace.clone()))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| self.rt.block_on(h).unwrap_or_default())
            .collect()
    }
}

/// Stop `job` if it still runs, wait for its end, and read its output into the session here.
async fn reattach_one(
    shared: Arc<Shared>,
    index: usize,
    job: String,
    workspace: PathBuf,
) -> Reattached {
    let Ok(info) = shared.api.status(&job).await else {
        return Reattached::default();
    };
    let stopped = !is_terminal(&info);
    if stopped {
        // It ran on while no batch was reading it: stop it and read it to its end.
        let _ = shared.api.stop(&job).await;
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(250)).await;
            match shared.api.status(&job).await {
                Ok(info) if is_terminal(&info) => break,
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }
    let Ok(text) = shared.api.logs(&job).await else {
        return Reattached {
            session: None,
            stopped,
        };
    };
    let mut reader = Reader::new(index, shared.opts.store.clone(), workspace.clone(), None);
    let mut sink = Vec::new();
    reader.feed(&text, None, &mut sink);
    reader.mirror.close();
    if reader.exited.is_some() {
        // It ran to its end (or its stop): its workspace came back with it.
        let _ = reader.bring_back(&workspace);
    }
    Reattached {
        session: reader.mirror.id.clone(),
        stopped,
    }
}

/// One task, from its first submission to its end (retries included).
async fn run_task(
    shared: Arc<Shared>,
    slot: Arc<Mutex<Option<String>>>,
    attempt: Attempt,
    tx: Sender<Msg>,
) {
    let index = attempt.index;
    let started = Instant::now();
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&attempt.log)
        .ok();
    let mut reader = Reader::new(
        index,
        shared.opts.store.clone(),
        attempt.workspace.clone(),
        attempt.resume.clone(),
    );
    let mut prompt = attempt.prompt.clone();
    let mut retries = 0;
    let (code, check, check_ms, error) = loop {
        if shared.stop.load(Ordering::SeqCst) {
            break (None, CheckOutcome::None, 0, None);
        }
        let resume = reader.mirror.id.clone();
        let job = match submit(&shared, &attempt, resume.as_deref(), &prompt, &mut reader).await {
            Ok(job) => job,
            Err(e) => break (None, CheckOutcome::None, 0, Some(e)),
        };
        if let Ok(mut s) = slot.lock() {
            *s = Some(job.clone());
        }
        let _ = tx.send(Msg::Job {
            index,
            id: job.clone(),
        });
        if shared.stop.load(Ordering::SeqCst) {
            // Ctrl-C came while it was being submitted: `interrupt` did not see its id.
            let _ = shared.api.stop(&job).await;
        }
        reader.reset_job();
        match follow(&shared, &job, &mut reader, &tx, log.as_mut()).await {
            End::Ran => {
                let check = match (&reader.check, &attempt.check) {
                    (Some((c, _)), _) => c.clone(),
                    (None, Some(_)) => CheckOutcome::Stopped,
                    (None, None) => CheckOutcome::None,
                };
                let ms = reader.check.as_ref().map_or(0, |(_, ms)| *ms);
                let error = reader.bring_back(&attempt.workspace);
                break (reader.exited.flatten(), check, ms, error);
            }
            End::Lost(why)
                if retries < shared.opts.retries && !shared.stop.load(Ordering::SeqCst) =>
            {
                retries += 1;
                let _ = tx.send(Msg::Retry {
                    index,
                    reason: format!("the Ray job {job} was lost ({why})"),
                });
                prompt = lost_prompt(&attempt, reader.mirror.id.is_some());
            }
            End::Lost(why) => {
                break (
                    None,
                    CheckOutcome::None,
                    0,
                    Some(format!("the Ray job {job} was lost: {why}")),
                );
            }
            End::Failed(why) => break (reader.exited.flatten(), CheckOutcome::None, 0, Some(why)),
        }
    };
    reader.mirror.close();
    if let Some(error) = error {
        let _ = tx.send(Msg::Error { index, error });
    }
    let _ = tx.send(Msg::Exited {
        index,
        code,
        wall: started.elapsed(),
    });
    let _ = tx.send(Msg::Finished {
        index,
        check,
        check_wall: Duration::from_millis(check_ms),
    });
}

/// The prompt of a task's next job after its node was lost.
fn lost_prompt(attempt: &Attempt, has_session: bool) -> String {
    if has_session {
        format!(
            "The machine running this task ({}) stopped before it ended, and the task moved to \
             another one. Continue the task from where it stopped; do not redo steps whose \
             results you already have. Files you changed on the other machine may be back as \
             they were when the task started: check them before going on.",
            attempt.id
        )
    } else {
        attempt.prompt.clone()
    }
}

/// Package the task and submit its job; returns the submission id.
async fn submit(
    shared: &Arc<Shared>,
    attempt: &Attempt,
    resume: Option<&str>,
    prompt: &str,
    reader: &mut Reader,
) -> Result<String, String> {
    let opts = &shared.opts;
    let binary = match &opts.keel_on_nodes {
        Some(_) => None,
        None => Some(binary_package(shared).await?),
    };
    let session_file = match resume {
        Some(id) => Some(reader.mirror.repaired(id)?),
        None => None,
    };
    let mut args = opts.common.clone();
    if let Some(model) = &attempt.model {
        args.push("--model".into());
        args.push(model.clone());
    }
    args.extend(attempt.flags.iter().cloned());
    match resume {
        None => args.extend(["run".into(), "--json".into(), prompt.to_owned()]),
        Some(id) => args.extend([
            "resume".into(),
            "--json".into(),
            id.to_owned(),
            prompt.to_owned(),
        ]),
    }
    let task = attempt.id.clone();
    let job = format!(
        "keel-{task}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    let spec = Spec {
        task: task.clone(),
        args,
        import: session_file
            .as_ref()
            .map(|_| "job/session.jsonl".to_owned()),
        check: attempt.check.clone(),
        check_timeout: opts.check_timeout.as_secs(),
    };
    let workspace = attempt.workspace.clone();
    let home_files = opts.home_files.clone();
    let job_id = job.clone();
    let data = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, String> {
        let mut pack = Pack::new(1);
        pack.tree(&workspace, "ws")?;
        let spec = serde_json::to_vec_pretty(&spec).map_err(|e| e.to_string())?;
        pack.file("job/spec.json", 0o644, &spec)?;
        // The submission id makes each job's package its own: Ray reuses an unpacked
        // working directory for the same package, and a job changes its directory.
        pack.file("job/submission", 0o644, job_id.as_bytes())?;
        if let Some(file) = &session_file {
            let data = std::fs::read(file)
                .map_err(|e| format!("cannot read the session {}: {e}", file.display()))?;
            pack.file("job/session.jsonl", 0o644, &data)?;
        }
        for (rel, data) in &home_files {
            pack.file(&format!("job/home/{rel}"), 0o600, data)?;
        }
        pack.finish()
    })
    .await
    .map_err(|e| format!("packaging the task failed: {e}"))??;
    let name = format!("_ray_pkg_keel_task_{}.zip", &hex_sha256(&data)[..32]);
    shared.api.upload(&name, data).await?;
    let mut env: serde_json::Map<String, Value> = opts
        .env
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    // A stop is SIGINT (keel's Ctrl-C: the turn ends and is logged) with time to finish.
    env.insert("RAY_JOB_STOP_SIGNAL".into(), json!("SIGINT"));
    env.insert("RAY_JOB_STOP_WAIT_TIME_S".into(), json!("30"));
    let mut runtime_env = json!({"working_dir": format!("gcs://{name}"), "env_vars": env});
    let entrypoint = match (&binary, &opts.keel_on_nodes) {
        (_, Some(path)) => format!("exec {} batch-job job/spec.json", shell_quote(path)),
        (Some(uri), None) => {
            runtime_env["py_modules"] = json!([uri]);
            format!(
                "k=; for d in $(printf %s \"$PYTHONPATH\" | tr : ' '); do if [ -x \"$d/keel\" ]; \
                 then k=\"$d/keel\"; break; fi; done; if [ -z \"$k\" ]; then echo \
                 '{{\"{LINE}\":\"error\",\"message\":\"the shipped keel binary is not among the \
                 py_modules of the job\"}}'; exit 1; fi; exec \"$k\" batch-job job/spec.json"
            )
        }
        (None, None) => return Err("no keel binary for the nodes".into()),
    };
    let body = json!({
        "entrypoint": entrypoint,
        "submission_id": job,
        "entrypoint_num_cpus": opts.cpus,
        "runtime_env": runtime_env,
        "metadata": {"keel_task": task},
    });
    shared.api.submit(&body).await?;
    Ok(job)
}

/// The shipped binary's `gcs://` URI, uploading it the first time (named by its hash, so a
/// cluster that already has this binary gets nothing).
async fn binary_package(shared: &Arc<Shared>) -> Result<String, String> {
    shared
        .binary
        .get_or_try_init(|| async {
            // Hashed and zipped as a stream: the binary (hundreds of MB with debug line
            // tables) is never held in memory, only its zip while it is uploaded.
            let exe = shared.opts.exe.clone();
            let open = move || {
                std::fs::File::open(&exe)
                    .map_err(|e| format!("cannot read the keel binary {}: {e}", exe.display()))
            };
            let hashed = open.clone();
            let name = tokio::task::spawn_blocking(move || {
                let mut hasher = sha2::Sha256::new();
                std::io::copy(&mut hashed()?, &mut hasher)
                    .map_err(|e| format!("cannot read the keel binary: {e}"))?;
                let digest = hex::encode(hasher.finalize());
                Ok::<_, String>(format!("_ray_pkg_keel_bin_{}.zip", &digest[..32]))
            })
            .await
            .map_err(|e| e.to_string())??;
            if !shared.api.package_exists(&name).await? {
                let data = tokio::task::spawn_blocking(move || {
                    let mut pack = Pack::new(1);
                    pack.copy("keel", 0o755, &mut open()?)?;
                    pack.finish()
                })
                .await
                .map_err(|e| e.to_string())??;
                shared.api.upload(&name, data).await?;
            }
            Ok(format!("gcs://{name}"))
        })
        .await
        .cloned()
}

/// How a job ended, for its task.
enum End {
    /// It ran to its end (keel's exit and the check, if any, are in the [`Reader`]), or was
    /// stopped.
    Ran,
    /// Lost without keel failing: submit again.
    Lost(String),
    /// Failed: the task fails with this.
    Failed(String),
}

/// Follow `job` to its end: its output into `reader`, its state from Ray.
async fn follow(
    shared: &Arc<Shared>,
    job: &str,
    reader: &mut Reader,
    tx: &Sender<Msg>,
    mut log: Option<&mut std::fs::File>,
) -> End {
    let mut wait = Duration::from_millis(50);
    let mut errors = 0u32;
    loop {
        tokio::time::sleep(wait).await;
        let before = reader.consumed;
        if let Ok(text) = shared.api.logs(job).await {
            reader.feed(&text, Some(tx), &mut log);
        }
        let info = match shared.api.status(job).await {
            Ok(info) => {
                errors = 0;
                info
            }
            Err(e) => {
                errors += 1;
                if errors >= 60 {
                    return End::Failed(format!("lost contact with the Ray job {job}: {e}"));
                }
                wait = Duration::from_millis(1000);
                continue;
            }
        };
        if is_terminal(&info) {
            if let Ok(text) = shared.api.logs(job).await {
                reader.feed(&text, Some(tx), &mut log);
            }
            return classify(job, &info, reader);
        }
        // New output: look again soon; quiet: back off to a second.
        wait = if reader.consumed > before {
            Duration::from_millis(50)
        } else {
            (wait * 2).min(Duration::from_millis(1000))
        };
    }
}

fn is_terminal(info: &Value) -> bool {
    info.get("status")
        .and_then(Value::as_str)
        .is_some_and(|s| TERMINAL.contains(&s))
}

fn classify(job: &str, info: &Value, reader: &Reader) -> End {
    let status = info.get("status").and_then(Value::as_str).unwrap_or("");
    // Ray's message can carry the job's whole log: its first line is the reason.
    let message = info
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("")
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .trim_end_matches(':')
        .to_owned();
    if let Some(e) = &reader.error {
        return End::Failed(format!("on its Ray node (job {job}): {e}"));
    }
    match status {
        "SUCCEEDED" | "STOPPED" => End::Ran,
        _ if reader.exited.is_some() => End::Ran,
        _ => {
            let kind = info.get("error_type").and_then(Value::as_str).unwrap_or("");
            if LOST.contains(&kind) {
                End::Lost(if message.is_empty() {
                    kind.to_owned()
                } else {
                    message
                })
            } else {
                let tail = reader.tail.join(" | ");
                End::Failed(format!(
                    "the Ray job {job} failed{}: {message}{}",
                    if kind.is_empty() {
                        String::new()
                    } else {
                        format!(" ({kind})")
                    },
                    if tail.is_empty() {
                        String::new()
                    } else {
                        format!("; its output ended: {tail}")
                    }
                ))
            }
        }
    }
}

/// The last check result in a job's output.
fn last_check(text: &str) -> Option<(CheckOutcome, u64)> {
    text.lines().rev().find_map(|line| {
        let v = own_line(line)?;
        (v.get(LINE)?.as_str()? == "check").then(|| {
            (
                CheckOutcome::from_json(&v),
                v.get("ms").and_then(Value::as_u64).unwrap_or(0),
            )
        })
    })
}

/// A job's own line (`{"keel_batch": …}`), parsed.
fn own_line(line: &str) -> Option<Value> {
    line.starts_with(&format!("{{\"{LINE}\":"))
        .then(|| serde_json::from_str(line).ok())
        .flatten()
}

/// Reads a job's output: the session's events into the [`Mirror`], the job's own lines into
/// what the task reports, anything else (Ray's lines, keel's stderr) into the task's log.
struct Reader {
    index: usize,
    mirror: Mirror,
    /// Bytes of the job's output already read.
    consumed: usize,
    /// keel's exit (`Some(code)`) once reported.
    exited: Option<Option<i32>>,
    check: Option<(CheckOutcome, u64)>,
    /// The job's own error line.
    error: Option<String>,
    /// The workspace coming back, and its end line.
    ws: Vec<u8>,
    ws_end: Option<Value>,
    ws_bad: Option<String>,
    /// The last lines that were neither events nor the job's own (for a failure's message).
    tail: Vec<String>,
}

impl Reader {
    fn new(index: usize, store: Store, workspace: PathBuf, session: Option<String>) -> Reader {
        Reader {
            index,
            mirror: Mirror {
                store,
                workspace,
                log: None,
                id: session,
                error: None,
            },
            consumed: 0,
            exited: None,
            check: None,
            error: None,
            ws: Vec::new(),
            ws_end: None,
            ws_bad: None,
            tail: Vec::new(),
        }
    }

    /// A new job: its output starts from nothing.
    fn reset_job(&mut self) {
        self.consumed = 0;
        self.exited = None;
        self.check = None;
        self.error = None;
        self.ws.clear();
        self.ws_end = None;
        self.ws_bad = None;
        self.tail.clear();
    }

    /// Read the whole output `text` so far (the API returns all of it): its new complete
    /// lines.
    fn feed<W: LogSink>(&mut self, text: &str, tx: Option<&Sender<Msg>>, log: &mut W) {
        let Some(rest) = text.get(self.consumed..) else {
            return;
        };
        let Some(end) = rest.rfind('\n') else { return };
        let chunk = &rest[..=end];
        self.consumed += chunk.len();
        for line in chunk.lines() {
            self.line(line, tx, log);
        }
    }

    fn line<W: LogSink>(&mut self, line: &str, tx: Option<&Sender<Msg>>, log: &mut W) {
        if let Some(v) = own_line(line) {
            let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
            match v.get(LINE).and_then(Value::as_str).unwrap_or("") {
                "stderr" | "check-output" => log.put(&text("line")),
                "exited" => {
                    self.exited = Some(
                        v.get("code")
                            .and_then(Value::as_i64)
                            .and_then(|c| i32::try_from(c).ok()),
                    );
                }
                "check" => {
                    self.check = Some((
                        CheckOutcome::from_json(&v),
                        v.get("ms").and_then(Value::as_u64).unwrap_or(0),
                    ));
                }
                "ws" => {
                    let b64 = base64::engine::general_purpose::STANDARD;
                    match b64.decode(text("data")) {
                        Ok(bytes) => self.ws.extend(bytes),
                        Err(e) => self.ws_bad = Some(format!("a part is not base64: {e}")),
                    }
                }
                "ws-end" => self.ws_end = Some(v),
                "ws-skipped" => {
                    self.ws_bad = Some(format!(
                        "the node did not send the workspace back: {}",
                        text("why")
                    ));
                }
                "error" => self.error = Some(text("message")),
                _ => log.put(line),
            }
            return;
        }
        match parse_record(line) {
            Ok(LogRecord::Header(h)) => {
                let new = self.mirror.id.as_deref() != Some(h.id.as_str());
                let id = h.id.0.clone();
                self.mirror.header(h);
                if let (true, Some(tx)) = (new, tx) {
                    let _ = tx.send(Msg::Session {
                        index: self.index,
                        id,
                    });
                }
            }
            Ok(LogRecord::Event(ev)) => {
                if let Some(tx) = tx
                    && ev.seq.0 >= self.mirror.len()
                    && let Some(msg) = super::engine::usage_of(self.index, &ev)
                {
                    let _ = tx.send(msg);
                }
                self.mirror.event(ev);
            }
            Ok(LogRecord::Packed(_)) | Err(_) => {
                log.put(line);
                self.tail.push(line.chars().take(300).collect());
                if self.tail.len() > 5 {
                    self.tail.remove(0);
                }
            }
        }
    }

    /// Put the workspace the node sent back in place of `workspace`; `Some(error)` when the
    /// copy failed or the session's mirror did.
    fn bring_back(&mut self, workspace: &Path) -> Option<String> {
        if let Some(e) = self.mirror.error.take() {
            return Some(e);
        }
        if let Some(bad) = self.ws_bad.take() {
            return Some(bad);
        }
        let end = self.ws_end.take()?;
        let data = std::mem::take(&mut self.ws);
        let sha = end.get("sha256").and_then(Value::as_str).unwrap_or("");
        if hex_sha256(&data) != sha {
            return Some("the workspace the node sent back is damaged (its hash differs)".into());
        }
        let name = workspace.file_name()?.to_string_lossy().into_owned();
        let parent = workspace.parent()?;
        let incoming = parent.join(format!(".{name}.incoming"));
        let old = parent.join(format!(".{name}.old"));
        let _ = std::fs::remove_dir_all(&incoming);
        let _ = std::fs::remove_dir_all(&old);
        if let Err(e) = unpack(&data, &incoming) {
            let _ = std::fs::remove_dir_all(&incoming);
            return Some(format!("the workspace the node sent back: {e}"));
        }
        let swapped =
            std::fs::rename(workspace, &old).and_then(|()| std::fs::rename(&incoming, workspace));
        let _ = std::fs::remove_dir_all(&old);
        swapped.err().map(|e| {
            format!(
                "cannot put the workspace back at {}: {e}",
                workspace.display()
            )
        })
    }
}

/// Where a [`Reader`] puts lines that are not the session's.
trait LogSink {
    fn put(&mut self, line: &str);
}

impl LogSink for Option<&mut std::fs::File> {
    fn put(&mut self, line: &str) {
        if let Some(f) = self {
            let _ = writeln!(f, "{line}");
        }
    }
}

impl LogSink for Vec<String> {
    fn put(&mut self, line: &str) {
        self.push(line.to_owned());
    }
}

/// The task's session here, rebuilt from the job's events: each is validated and appended by
/// keel's own writer; one it already has (a job's output read again) is skipped by its seq.
struct Mirror {
    store: Store,
    /// The task's workspace here (the session is filed under it).
    workspace: PathBuf,
    log: Option<PersistentSession>,
    /// The session's id, once known.
    id: Option<String>,
    /// The first thing that went wrong (the copy stops there).
    error: Option<String>,
}

impl Mirror {
    fn len(&self) -> u64 {
        self.log.as_ref().map_or(0, |l| l.session().len())
    }

    fn header(&mut self, h: SessionHeader) {
        if self.log.is_some() || self.error.is_some() {
            return;
        }
        let id = h.id.0.clone();
        // A copy already here is continued as it is (the job's events go on from where it
        // stops); crash repair is for a copy about to be resumed ([`Mirror::repaired`]).
        let opened = match self.store.resolve(&id, &self.workspace) {
            Ok(path) => PersistentSession::reopen(&path, WriterOptions::default())
                .map(|(log, _)| log)
                .map_err(|e| format!("cannot open the session {id} here: {e}")),
            Err(_) => PersistentSession::create(
                &self.store,
                &self.workspace,
                Session::new(h),
                WriterOptions::default(),
            )
            .map_err(|e| format!("cannot create the session {id} here: {e}")),
        };
        match opened {
            Ok(log) => self.log = Some(log),
            Err(e) => self.error = Some(e),
        }
        self.id = Some(id);
    }

    fn event(&mut self, ev: SessionEvent) {
        let Some(log) = self.log.as_mut() else { return };
        if self.error.is_some() {
            return;
        }
        let len = log.session().len();
        if ev.seq.0 < len {
            return;
        }
        if ev.seq.0 > len {
            self.error = Some(format!(
                "the job's output skipped from event {len} to {} of session {}",
                ev.seq.0,
                self.id.as_deref().unwrap_or("?")
            ));
            return;
        }
        let seq = ev.seq.0;
        if let Err(e) = log.append(ev) {
            self.error = Some(format!(
                "event {seq} of the job's output does not fit session {}: {e}",
                self.id.as_deref().unwrap_or("?")
            ));
        }
    }

    /// Flush and close the copy.
    fn close(&mut self) {
        if let Some(log) = self.log.take()
            && let Err(e) = log.close()
            && self.error.is_none()
        {
            self.error = Some(format!("cannot write the session here: {e}"));
        }
    }

    /// The session `id` here after crash repair (closing what a lost or stopped job left
    /// open), to ship with a job that resumes it.
    fn repaired(&mut self, id: &str) -> Result<PathBuf, String> {
        self.close();
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let path = self
            .store
            .resolve(id, &self.workspace)
            .map_err(|e| format!("session {id}: {e}"))?;
        let (log, _, _) = PersistentSession::resume(&path, WriterOptions::default())
            .map_err(|e| format!("cannot repair the session {}: {e}", path.display()))?;
        log.close()
            .map_err(|e| format!("cannot write the session {}: {e}", path.display()))?;
        Ok(path)
    }
}

/// `'…'` for sh.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The Jobs REST API of one cluster.
struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    fn new(address: &str) -> Result<Api, String> {
        let base = address.trim_end_matches('/').to_owned();
        let parsed =
            url::Url::parse(&base).map_err(|e| format!("--address {address} is not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!(
                "--address {address}: the Ray dashboard's address is http:// or https://"
            ));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
        Ok(Api { http, base })
    }

    fn unreachable(&self, e: &reqwest::Error) -> String {
        format!("cannot reach the Ray cluster at {}: {e}", self.base)
    }

    /// Send, retrying a connection failure twice; the body of a 2xx answer.
    async fn send(
        &self,
        what: &str,
        make: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<(u16, String), String> {
        let mut tries = 0;
        loop {
            match make().send().await {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let body = resp.text().await.unwrap_or_default();
                    return Ok((status, body));
                }
                Err(e) if tries < 2 && (e.is_connect() || e.is_timeout()) => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(500 * tries)).await;
                }
                Err(e) => return Err(format!("{what}: {}", self.unreachable(&e))),
            }
        }
    }

    fn refused(&self, what: &str, status: u16, body: &str) -> String {
        let body: String = body.trim().chars().take(400).collect();
        format!(
            "the Ray cluster at {} answered {status} to {what}: {body}",
            self.base
        )
    }

    /// [`Api::send`], insisting on a 200; its body.
    async fn call(
        &self,
        what: &str,
        make: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<String, String> {
        match self.send(what, make).await? {
            (200, body) => Ok(body),
            (status, body) => Err(self.refused(what, status, &body)),
        }
    }

    /// `GET path` as JSON.
    async fn get_json(&self, what: &str, path: &str, timeout: u64) -> Result<Value, String> {
        let url = format!("{}{path}", self.base);
        let body = self
            .call(what, || {
                self.http.get(&url).timeout(Duration::from_secs(timeout))
            })
            .await?;
        serde_json::from_str(&body).map_err(|e| format!("{what}: not JSON: {e}"))
    }

    fn package_url(&self, name: &str) -> String {
        format!("{}/api/packages/gcs/{name}", self.base)
    }

    async fn package_exists(&self, name: &str) -> Result<bool, String> {
        let url = self.package_url(name);
        let what = format!("asking for package {name}");
        match self
            .send(&what, || {
                self.http.get(&url).timeout(Duration::from_secs(60))
            })
            .await?
        {
            (200, _) => Ok(true),
            (404, _) => Ok(false),
            (status, body) => Err(self.refused(&what, status, &body)),
        }
    }

    async fn upload(&self, name: &str, data: Vec<u8>) -> Result<(), String> {
        let url = self.package_url(name);
        let what = format!("the upload of {name} ({} bytes)", data.len());
        let data = bytes::Bytes::from(data);
        self.call(&what, || {
            self.http
                .put(&url)
                .timeout(Duration::from_secs(900))
                .body(data.clone())
        })
        .await
        .map(drop)
    }

    async fn submit(&self, body: &Value) -> Result<(), String> {
        let url = format!("{}/api/jobs/", self.base);
        let text = body.to_string();
        self.call("a job submission", || {
            self.http
                .post(&url)
                .timeout(Duration::from_secs(120))
                .header("content-type", "application/json")
                .body(text.clone())
        })
        .await
        .map(drop)
    }

    async fn status(&self, job: &str) -> Result<Value, String> {
        self.get_json(
            &format!("the state of job {job}"),
            &format!("/api/jobs/{job}"),
            30,
        )
        .await
    }

    async fn logs(&self, job: &str) -> Result<String, String> {
        let v = self
            .get_json(
                &format!("the output of job {job}"),
                &format!("/api/jobs/{job}/logs"),
                60,
            )
            .await?;
        Ok(v.get("logs")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned())
    }

    async fn stop(&self, job: &str) -> Result<(), String> {
        let url = format!("{}/api/jobs/{job}/stop", self.base);
        self.call(&format!("stopping job {job}"), || {
            self.http.post(&url).timeout(Duration::from_secs(30))
        })
        .await
        .map(drop)
    }
}
