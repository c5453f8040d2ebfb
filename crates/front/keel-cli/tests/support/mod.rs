//! Shared fixtures of the end-to-end `run_*` tests: a temp project and `$KEEL_HOME`, the
//! loopback mock model server (optionally behind a byte-recording tap), the real `keel` binary
//! as a child process with a hang guard, and readers of the session log it writes.
//!
//! Only the model is mocked: files, child processes and the session store are real.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // each test binary uses a subset

pub mod crash;
pub mod tmux;

use keel_llm::{Script, ScriptFormat};
use keel_testkit::MockServer;
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Hang guard for one `keel` process (never an assertion about speed).
pub const HANG_GUARD: Duration = Duration::from_secs(120);

/// API key the tests hand to `keel` (the mock accepts any).
pub const API_KEY: &str = "sk-test";

/// A temp directory holding the workspace (`ws/`), a directory beside it (`outside/`),
/// `$KEEL_HOME` (`home/`) and keel's `$TMPDIR` (`tmp/`: the only temp directory the sandbox
/// lets commands write, so `outside/` is outside every writable place).
pub struct Env {
    root: tempfile::TempDir,
    /// The workspace (canonical), passed as `--cwd`.
    pub ws: PathBuf,
    /// A directory outside the workspace.
    pub outside: PathBuf,
    /// `$KEEL_HOME`.
    pub home: PathBuf,
    /// Whether `keel` runs with `--trust-project` (the default: a test's workspace is the
    /// user's own; the trust tests turn it off).
    trusted: bool,
}

impl Env {
    pub fn new() -> Env {
        let root = tempfile::Builder::new()
            .prefix("keel-e2e-")
            .tempdir()
            .unwrap();
        let base = root.path().canonicalize().unwrap();
        let (ws, outside, home) = (base.join("ws"), base.join("outside"), base.join("home"));
        for d in [&ws, &outside, &home, &base.join("tmp")] {
            std::fs::create_dir_all(d).unwrap();
        }
        Env {
            root,
            ws,
            outside,
            home,
            trusted: true,
        }
    }

    /// [`Env::new`] whose `keel` commands decide trust as a user's would: no `--trust-project`,
    /// so the workspace is untrusted until recorded (docs/trust.md).
    pub fn untrusted() -> Env {
        Env {
            trusted: false,
            ..Env::new()
        }
    }

    /// The temp root holding everything.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// Write a workspace file (parents created).
    pub fn write(&self, rel: &str, text: &str) {
        write_file(&self.ws.join(rel), text);
    }

    /// Read a workspace file.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.ws.join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
    }

    /// `keel --base-url URL --cwd WS` with `$KEEL_HOME` and `DEEPSEEK_API_KEY` set (which keel
    /// must not send to a `--base-url` server) and no stray keel/DeepSeek variables inherited
    /// from the test's environment.
    pub fn keel(&self, base_url: &str) -> Command {
        let mut cmd = self.keel_bare();
        cmd.env("DEEPSEEK_API_KEY", API_KEY)
            .arg("--base-url")
            .arg(base_url);
        cmd
    }

    /// `keel --cwd WS` with `$KEEL_HOME` set and no keel/DeepSeek variables at all (no key, no
    /// base URL); with `--trust-project` unless the env is [`Env::untrusted`].
    pub fn keel_bare(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_keel"));
        for var in [
            "DEEPSEEK_BASE_URL",
            "DEEPSEEK_API_KEY",
            "DEEPSEEK_SEARCH_BASE_URL",
            "KEEL_HOME",
            "RUST_LOG",
            "DSH_TOOLS_MODE",
        ] {
            cmd.env_remove(var);
        }
        cmd.env("KEEL_HOME", &self.home)
            .env("HOME", self.root())
            .env("TMPDIR", self.root().join("tmp"))
            .arg("--cwd")
            .arg(&self.ws)
            .stdin(Stdio::null());
        if self.trusted {
            cmd.arg("--trust-project");
        }
        cmd
    }

    /// Every session file under `$KEEL_HOME/sessions`.
    pub fn session_files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let Ok(projects) = std::fs::read_dir(self.home.join("sessions")) else {
            return out;
        };
        for project in projects.flatten() {
            for session in std::fs::read_dir(project.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                for name in ["session.jsonl", "session.jsonl.zst"] {
                    let f = session.path().join(name);
                    if f.exists() {
                        out.push(f);
                    }
                }
            }
        }
        out.sort();
        out
    }

    /// The one session file (panics when there are none or several).
    pub fn only_session(&self) -> PathBuf {
        let files = self.session_files();
        assert_eq!(
            files.len(),
            1,
            "expected exactly one session under {}: {files:?}",
            self.home.display()
        );
        files.into_iter().next().unwrap()
    }

    /// The one session file whose header satisfies `pick` (panics when there are none or
    /// several).
    pub fn only_session_where(&self, pick: impl Fn(&Value) -> bool) -> PathBuf {
        let files: Vec<PathBuf> = self
            .session_files()
            .into_iter()
            .filter(|p| {
                let text = std::fs::read_to_string(p).unwrap_or_default();
                let header = text.lines().next().unwrap_or("{}");
                pick(&serde_json::from_str(header).unwrap_or(Value::Null))
            })
            .collect();
        assert_eq!(
            files.len(),
            1,
            "expected exactly one such session: {files:?}"
        );
        files.into_iter().next().unwrap()
    }

    /// Poll until the session log satisfies `done` (the file may not exist yet, and may end in
    /// a torn record while being written). Returns the events seen. Hang guard only.
    pub fn wait_for_log(&self, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + HANG_GUARD;
        loop {
            if let Some(path) = self.session_files().into_iter().next()
                && let Ok(loaded) = keel_session::Store::load(&path)
            {
                let events = to_values(&loaded.session);
                if done(&events) {
                    return events;
                }
            }
            assert!(
                Instant::now() < deadline,
                "hang guard: the session log never showed {what}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Poll until `rel` exists in the workspace. Hang guard only.
    pub fn wait_for_file(&self, rel: &str) -> String {
        let deadline = Instant::now() + HANG_GUARD;
        loop {
            if let Ok(text) = std::fs::read_to_string(self.ws.join(rel))
                && text.ends_with('\n')
            {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "hang guard: {rel} never appeared"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Parse a YAML/JSON model script.
pub fn script(yaml: &str) -> Script {
    Script::from_str(yaml, ScriptFormat::Yaml).unwrap_or_else(|e| panic!("bad test script: {e}"))
}

/// The mock model server on its own runtime (so the test thread can block on `keel`).
pub struct Mock {
    server: MockServer,
    tap: Option<Tap>,
    rt: tokio::runtime::Runtime,
}

impl Mock {
    /// Serve `yaml`.
    pub fn start(yaml: &str) -> Mock {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let server = rt.block_on(MockServer::start(script(yaml))).unwrap();
        Mock {
            server,
            tap: None,
            rt,
        }
    }

    /// Serve `yaml` behind a tap that keeps every request body byte for byte.
    pub fn start_tapped(yaml: &str) -> Mock {
        let mut mock = Mock::start(yaml);
        let tap = mock.rt.block_on(Tap::start(mock.server.addr())).unwrap();
        mock.tap = Some(tap);
        mock
    }

    /// Where `keel` should send requests.
    pub fn base_url(&self) -> String {
        match &self.tap {
            Some(tap) => format!("http://{}", tap.addr),
            None => self.server.base_url(),
        }
    }

    /// Request bodies received, parsed.
    pub fn requests(&self) -> Vec<Value> {
        self.server.requests()
    }

    /// Request headers received, in the order of [`Mock::requests`].
    pub fn request_headers(&self) -> Vec<keel_testkit::Headers> {
        self.server.request_headers()
    }

    /// Request bodies exactly as sent (only with [`Mock::start_tapped`]).
    pub fn raw_requests(&self) -> Vec<Vec<u8>> {
        self.tap
            .as_ref()
            .expect("raw_requests needs Mock::start_tapped")
            .bodies()
    }

    /// Script responses not used yet.
    pub fn remaining(&self) -> usize {
        self.server.remaining()
    }
}

/// A loopback TCP relay in front of the mock server that records the body of every HTTP
/// request passing through it (the mock itself keeps only parsed JSON).
struct Tap {
    addr: std::net::SocketAddr,
    bodies: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Tap {
    async fn start(upstream: std::net::SocketAddr) -> std::io::Result<Tap> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let sink = bodies.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let sink = sink.clone();
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (mut cr, mut cw) = client.into_split();
                    let (mut sr, mut sw) = server.into_split();
                    let down = tokio::spawn(async move {
                        let _ = tokio::io::copy(&mut sr, &mut cw).await;
                        let _ = cw.shutdown().await;
                    });
                    let mut seen = Vec::new();
                    let mut buf = vec![0u8; 64 * 1024];
                    let mut recorded = 0;
                    loop {
                        let n = match cr.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        seen.extend_from_slice(&buf[..n]);
                        while let Some((_, body, used)) = http_request(&seen[recorded..]) {
                            sink.lock().unwrap().push(body);
                            recorded += used;
                        }
                        if sw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    let _ = sw.shutdown().await;
                    let _ = down.await;
                });
            }
        });
        Ok(Tap { addr, bodies })
    }

    fn bodies(&self) -> Vec<Vec<u8>> {
        self.bodies.lock().unwrap().clone()
    }
}

/// The complete HTTP/1.1 request at the start of `bytes` (Content-Length framed): its head
/// (request line and headers), its body, and the bytes it spans.
pub fn http_request(bytes: &[u8]) -> Option<(String, Vec<u8>, usize)> {
    let head_end = bytes.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&bytes[..head_end]).into_owned();
    let length: usize = head
        .split("\r\n")
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.trim().parse().unwrap())
        .unwrap_or(0);
    let end = head_end + 4 + length;
    (bytes.len() >= end).then(|| (head, bytes[head_end + 4..end].to_vec(), end))
}

/// What a finished `keel` process left.
#[derive(Debug)]
pub struct Output {
    /// Exit code (`None` when killed by a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// A `keel` child process whose output is being collected.
pub struct Running {
    child: Child,
    stdout: Option<JoinHandle<String>>,
    stderr: Option<JoinHandle<String>>,
}

/// A test that panics before waiting leaves no keel behind.
impl Drop for Running {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn collect(mut r: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = r.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

impl Running {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The process's stdin, when it was spawned with `Stdio::piped()` (taken once).
    #[allow(dead_code)]
    pub fn take_stdin(&mut self) -> std::process::ChildStdin {
        self.child.stdin.take().expect("spawned with a piped stdin")
    }

    /// Send `signal` to the `keel` process (not to its tools).
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) with a pid we spawned and still own (not yet reaped).
        let rc = unsafe { libc::kill(self.pid(), signal) };
        assert_eq!(rc, 0, "kill({}, {signal}) failed", self.pid());
    }

    /// Wait for exit (hang guard: kill and panic).
    pub fn wait(mut self) -> Output {
        let deadline = Instant::now() + HANG_GUARD;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let stderr = self.stderr.take().unwrap().join().unwrap_or_default();
                panic!("hang guard: keel did not exit within {HANG_GUARD:?}; stderr:\n{stderr}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        Output {
            code: status.code(),
            stdout: self.stdout.take().unwrap().join().unwrap(),
            stderr: self.stderr.take().unwrap().join().unwrap(),
        }
    }
}

/// Start `cmd` with piped output.
pub fn spawn(cmd: &mut Command) -> Running {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = collect(child.stdout.take().unwrap());
    let stderr = collect(child.stderr.take().unwrap());
    Running {
        child,
        stdout: Some(stdout),
        stderr: Some(stderr),
    }
}

/// Run `cmd` to completion.
pub fn run(cmd: &mut Command) -> Output {
    spawn(cmd).wait()
}

/// Every event of a session as JSON (the log's own serialisation).
pub fn to_values(session: &keel_session::Session) -> Vec<Value> {
    session
        .events()
        .map(|e| serde_json::from_str(&e.to_json().unwrap()).unwrap())
        .collect()
}

/// Load a session file, insisting it loads cleanly (no torn tail) and keeps every turn/step
/// bracket rule; returns its events as JSON.
pub fn load_consistent(path: &Path) -> Vec<Value> {
    let loaded = keel_session::Store::load(path)
        .unwrap_or_else(|e| panic!("{} does not load: {e}", path.display()));
    assert_eq!(loaded.report.torn, None, "torn tail in {}", path.display());
    if let Err(v) = loaded.session.check_invariants() {
        panic!("invariants broken in {}: {v:?}", path.display());
    }
    to_values(&loaded.session)
}

/// The session id of a session file (its directory name).
/// `git ARGS` in `dir` (as a committer named t), which must succeed; its stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Write `path` (parents created).
pub fn write_file(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Commit everything in `repo` (as [`git`]'s author) with `message`; the new commit's id.
pub fn commit_all(repo: &Path, message: &str) -> String {
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-q", "-m", message]);
    git(repo, &["rev-parse", "HEAD"]).trim().to_owned()
}

pub fn session_id(path: &Path) -> String {
    path.parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// Event type.
pub fn ty(e: &Value) -> &str {
    e["type"].as_str().unwrap_or_default()
}

/// Events of one type.
pub fn of_type<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| ty(e) == t).collect()
}

/// `data.reason` of every `turn/end`.
pub fn turn_end_reasons(events: &[Value]) -> Vec<Value> {
    of_type(events, "turn/end")
        .iter()
        .map(|e| e["data"]["reason"].clone())
        .collect()
}

/// The last event (panics on an empty log).
pub fn last(events: &[Value]) -> &Value {
    events.last().expect("empty session log")
}

/// A `tool/result` as (call id, text, is_error).
pub fn tool_result(e: &Value) -> (String, String, bool) {
    let block = &e["data"]["message"]["content"][0];
    let text = block["content"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<String>()
        })
        .unwrap_or_default();
    (
        block["toolCallId"].as_str().unwrap().to_owned(),
        text,
        block["isError"].as_bool().unwrap_or(false),
    )
}

/// Every `tool/result` of the log, in log order.
pub fn tool_results(events: &[Value]) -> Vec<(String, String, bool)> {
    of_type(events, "tool/result")
        .into_iter()
        .map(tool_result)
        .collect()
}

/// `(callId, name)` of every `tool/call`, in log order.
pub fn tool_calls(events: &[Value]) -> Vec<(String, String)> {
    of_type(events, "tool/call")
        .into_iter()
        .map(|e| {
            (
                e["data"]["callId"].as_str().unwrap().to_owned(),
                e["data"]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Check a chat-completions request the way a strict endpoint does: every assistant tool call
/// is answered by a `tool` message (in call order, right after it), no `tool` message answers
/// anything else, and no two `user` messages follow each other (strict chat templates such as
/// Gemma's reject that). Returns the tool messages' contents by call id.
pub fn assert_wire_valid(request: &Value) -> Vec<(String, String)> {
    let messages = request["messages"]
        .as_array()
        .expect("request without messages");
    assert_eq!(
        messages.first().map(|m| m["role"].clone()),
        Some(Value::from("system")),
        "first message must be the system prompt"
    );
    for pair in messages.windows(2) {
        assert!(
            !(pair[0]["role"] == "user" && pair[1]["role"] == "user"),
            "two user messages in a row: {} then {}",
            pair[0],
            pair[1]
        );
    }
    let mut answered = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        let m = &messages[i];
        i += 1;
        match m["role"].as_str() {
            Some("assistant") => {
                let ids: Vec<&str> = m["tool_calls"]
                    .as_array()
                    .map(|calls| calls.iter().map(|c| c["id"].as_str().unwrap()).collect())
                    .unwrap_or_default();
                for id in ids {
                    let t = messages
                        .get(i)
                        .unwrap_or_else(|| panic!("tool call {id} is never answered"));
                    assert_eq!(
                        t["role"], "tool",
                        "tool call {id} is not answered right after its message: {t}"
                    );
                    assert_eq!(t["tool_call_id"], id, "tool results out of call order");
                    answered.push((
                        id.to_owned(),
                        t["content"].as_str().unwrap_or_default().to_owned(),
                    ));
                    i += 1;
                }
            }
            Some("tool") => panic!("a tool message answers no pending call: {m}"),
            Some("user") | Some("system") => {}
            other => panic!("unexpected role {other:?}"),
        }
    }
    answered
}

/// The names of the tools a request offers (none when it has no `tools`).
pub fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Text of the last `role: user` message of a request.
pub fn last_user_text(request: &Value) -> String {
    let m = last_user_message(request);
    m["content"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| m["content"].to_string())
}

/// Is any process of process group `pgid` still alive (zombies count as dead)?
pub fn group_alive(pgid: i32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten().any(|p| {
        let Ok(stat) = std::fs::read_to_string(p.path().join("stat")) else {
            return false;
        };
        // pid (comm) state ppid pgrp …; comm may hold spaces, so split after the last ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            return false;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        fields.len() > 2 && fields[0] != "Z" && fields[0] != "X" && fields[2] == pgid.to_string()
    })
}

/// Kill a leftover process group (cleanup after SIGKILLing keel, whose tools outlive it).
pub fn kill_group(pgid: i32) {
    // SAFETY: kill(2) on a process group id the test's own command reported.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

/// crates/plugins/keel-mcp/tests/node: the pinned npm packages of the MCP tests.
pub fn node_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins/keel-mcp/tests/node")
}

/// Install the MCP tests' node modules once when they are missing; see [`ensure_npm`].
pub fn ensure_node_modules() -> PathBuf {
    ensure_npm(&node_dir(), "@modelcontextprotocol/sdk")
}

/// crates/front/keel-acp/tests/node: the pinned ACP SDK of the `keel acp` tests.
pub fn acp_node_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../keel-acp/tests/node")
}

/// Install the ACP tests' node modules once when they are missing; see [`ensure_npm`].
pub fn ensure_acp_node_modules() -> PathBuf {
    ensure_npm(&acp_node_dir(), "@agentclientprotocol/sdk")
}

/// acpx, a third-party headless ACP client (crates/front/keel-acp/tests/acpx, pinned in its lock
/// file): its executable, installed when missing.
pub fn acpx_bin() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../keel-acp/tests/acpx");
    let bin = ensure_npm(&dir, "acpx").join("node_modules/.bin/acpx");
    assert!(bin.exists(), "{} is not installed", bin.display());
    bin
}

/// Install the node modules of `dir` once when `package` is missing (`npm ci` from the lock
/// file; `.ci/run` does it first). Test binaries run in parallel: an exclusive lock on a file
/// beside them serialises the installs, and whoever comes second finds them installed.
pub fn ensure_npm(dir: &Path, package: &str) -> PathBuf {
    let dir = dir.to_path_buf();
    let marker = dir.join("node_modules").join(package).join("package.json");
    if marker.exists() {
        return dir;
    }
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(".npm-install.lock"))
        .unwrap();
    {
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor we own; released when `lock` is closed.
        let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(rc, 0, "cannot lock {}", dir.display());
    }
    if !marker.exists() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .stdout(Stdio::null())
            .status()
            .expect("npm is needed for the node tests");
        assert!(status.success(), "npm ci in {} failed", dir.display());
    }
    drop(lock);
    dir
}

/// A pinned npm package's executable (`node_modules/.bin/NAME`), installed when missing.
pub fn node_bin(name: &str) -> PathBuf {
    let p = ensure_node_modules().join("node_modules/.bin").join(name);
    assert!(p.exists(), "{} is not installed", p.display());
    p
}

/// A model script for Code Mode's approvals: the prompt "run the program" gets one `run_code`
/// (call `call_code`) whose program runs `echo from-the-program` through `tools.bash`, then the
/// answer "The program ran." once the command's output is back.
pub const PROGRAM_RUNS_A_COMMAND: &str = r#"
responses:
  - match: { last_user_contains: "run the program" }
    tool_calls:
      - id: call_code
        name: run_code
        arguments:
          description: "one command"
          code: |
            const out = await tools.bash({ command: 'echo from-the-program' });
            return out.trim();
  - match: { last_tool_result_contains: "from-the-program" }
    text: "The program ran."
"#;

/// The sub-call of [`PROGRAM_RUNS_A_COMMAND`]'s program that runs the command.
pub const PROGRAM_COMMAND_CALL: &str = "call_code:code:1";

/// The log of a [`PROGRAM_RUNS_A_COMMAND`] run whose command the person approved: one decision,
/// on the program's sub-call, approved by the user, and the command's output in the result.
pub fn assert_program_command_approved(events: &[Value]) {
    let decided = of_type(events, "approval/decided");
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["data"]["callId"], PROGRAM_COMMAND_CALL);
    assert_eq!(decided[0]["data"]["approved"], true);
    assert_eq!(decided[0]["data"]["by"], "user");
    let result = of_type(events, "tool/result");
    assert!(
        result[0]["data"].to_string().contains("from-the-program"),
        "{result:?}"
    );
}

/// A batch task's model script: `steps` bash steps for task `id` (each appends `step N` to
/// log.txt after `sleep`), one that appends `done`, then the answer, `answers` times (a spare
/// for a run that lost one); every response matched by the task id in the last user message.
pub fn step_responses(id: &str, steps: usize, sleep: &str, answers: usize) -> Vec<Value> {
    let step = |text: String, command: String| {
        serde_json::json!({"match": {"last_user_contains": id}, "text": text,
               "tool_calls": [{"name": "bash", "arguments": {"command": command}}]})
    };
    let mut out: Vec<Value> = (1..=steps)
        .map(|s| {
            step(
                format!("Step {s}."),
                format!("{sleep}echo step {s} >> log.txt"),
            )
        })
        .collect();
    out.push(step("Last step.".into(), "echo done >> log.txt".into()));
    for _ in 0..answers {
        out.push(serde_json::json!({"match": {"last_user_contains": id}, "text": format!("{id} finished.")}));
    }
    out
}

/// The lines of a batch's `results.jsonl` in `out`.
pub fn read_results(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A batch of step tasks: each of `ids` on the template `tpl` ("Work on ID.", scored by
/// `check`), written to the task file `tasks`, and the mock serving their
/// [`step_responses`].
pub fn step_tasks(
    tasks: &Path,
    tpl: &Path,
    ids: &[String],
    (steps, sleep, answers): (usize, &str, usize),
    check: &str,
) -> Mock {
    let script: Vec<Value> = ids
        .iter()
        .flat_map(|id| step_responses(id, steps, sleep, answers))
        .collect();
    let lines: Vec<String> = ids
        .iter()
        .map(|id| {
            serde_json::json!({"id": id, "prompt": format!("Work on {id}."), "workspace": tpl, "check": check})
                .to_string()
        })
        .collect();
    std::fs::write(tasks, lines.join("\n") + "\n").unwrap();
    Mock::start(&serde_json::json!({"responses": script}).to_string())
}

/// Every process and its command line (from /proc).
pub fn processes() -> Vec<(i32, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        out.push((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
    }
    out
}

/// The last `user` message of a request the mock model received.
pub fn last_user_message(request: &Value) -> Value {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()
        .clone()
}

/// `id` with another last hex digit: the first of `digits` it does not end in.
pub fn other_id(id: &str, digits: [char; 2]) -> String {
    let last = if id.ends_with(digits[0]) {
        digits[1]
    } else {
        digits[0]
    };
    format!("{}{last}", &id[..id.len() - 1])
}

/// A copy of the session at `real` under a new id, holding its header only (what an opened
/// and left UI used to leave), written after it.
pub fn empty_copy(real: &Path) -> PathBuf {
    std::thread::sleep(std::time::Duration::from_millis(50));
    let id = session_id(real);
    let empty_id = other_id(&id, ['0', '1']);
    assert_ne!(empty_id, id);
    let header = std::fs::read_to_string(real)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .replace(&id, &empty_id);
    let dir = real.parent().unwrap().with_file_name(&empty_id);
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join(real.file_name().unwrap());
    std::fs::write(&empty, format!("{header}\n")).unwrap();
    empty
}
