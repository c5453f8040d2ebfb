//! Streamable HTTP servers, end to end against the real `@modelcontextprotocol/server-everything`
//! (`mcp-server-everything streamableHttp`, pinned in `tests/node/package.json`), kept on
//! 127.0.0.1, driven through the MCP runtime and [`Server`].
//!
//! The binary is `tests/node/node_modules/.bin/mcp-server-everything` (after
//! `npm ci --prefix crates/plugins/keel-mcp/tests/node`), or the one in the directory named by
//! `KEEL_TEST_MCP_NODE_BIN`. Without it the tests say so and pass, unless `CI` is set.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use keel_mcp::client::runtime::McpRuntime;
use keel_mcp::client::server::{CallFailure, Server, StartFailure};
use keel_mcp::config::{ServerConfig, Transport};
use keel_tools::subprocess::{SubprocessConfig, SubprocessService};
use rmcp::model::{JsonObject, Tool};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The server-everything binary (see the module docs).
fn everything_bin() -> Option<PathBuf> {
    let pinned = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/node/node_modules/.bin/mcp-server-everything");
    if pinned.exists() {
        return Some(pinned);
    }
    let dir = std::env::var_os("KEEL_TEST_MCP_NODE_BIN")?;
    let bin = PathBuf::from(dir).join("mcp-server-everything");
    bin.exists().then_some(bin)
}

/// The binary, or `None` after saying why the test does nothing (a failure on CI).
fn require_bin() -> Option<PathBuf> {
    let bin = everything_bin();
    if bin.is_none() {
        let why = "mcp-server-everything not found: run `npm ci --prefix crates/plugins/keel-mcp/tests/node` \
                   or set KEEL_TEST_MCP_NODE_BIN to a directory holding it";
        assert!(std::env::var_os("CI").is_none(), "{why}");
        eprintln!("skipped: {why}");
    }
    bin
}

/// Loaded before server-everything (`node --import`): every `listen(port)` binds 127.0.0.1
/// only (server-everything listens on all interfaces), and says the port it got, so `PORT=0`
/// works.
const LOOPBACK_PRELOAD: &str = r#"
import net from "node:net";
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const p = args[0];
  if (typeof p === "number" || (typeof p === "string" && /^\d+$/.test(p))) {
    if (typeof args[1] !== "string") args.splice(1, 0, "127.0.0.1");
  }
  this.once("listening", () => {
    const a = this.address();
    if (a && typeof a === "object") process.stderr.write(`KEEL_TEST_LISTENING ${a.address} ${a.port}\n`);
  });
  return listen.apply(this, args);
};
"#;

/// A running server-everything (killed on drop).
struct Everything {
    child: Child,
    port: u16,
}

impl Everything {
    /// Start it on `port` (0: any) and wait until it listens.
    fn start(bin: &Path, dir: &Path, port: u16) -> Everything {
        let preload = dir.join("loopback.mjs");
        std::fs::write(&preload, LOOPBACK_PRELOAD).unwrap();
        let mut child = Command::new("node")
            .arg("--import")
            .arg(&preload)
            .arg(bin)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stderr).lines();
            let mut said = Vec::new();
            for line in lines.by_ref() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.strip_prefix("KEEL_TEST_LISTENING ") {
                    let port = rest.split(' ').nth(1).and_then(|p| p.parse::<u16>().ok());
                    let _ = tx.send(Ok((rest.to_owned(), port)));
                    // Keep draining so the pipe never fills.
                    for _ in lines.by_ref() {}
                    return;
                }
                said.push(line);
            }
            let _ = tx.send(Err(said.join("\n")));
        });
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok((addr, Some(port)))) => {
                assert!(addr.starts_with("127.0.0.1 "), "listening on {addr}");
                Everything { child, port }
            }
            other => {
                let _ = child.kill();
                panic!("server-everything did not start: {other:?}");
            }
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Everything {
    fn drop(&mut self) {
        self.kill();
    }
}

fn http_config(name: &str, url: &str, bearer_token_env_var: Option<&str>) -> ServerConfig {
    ServerConfig {
        name: name.to_owned(),
        transport: Transport::Http {
            url: url.to_owned(),
            headers: BTreeMap::new(),
            bearer_token_env_var: bearer_token_env_var.map(str::to_owned),
        },
        enabled: true,
        startup_timeout: Duration::from_secs(20),
        tool_timeout: Duration::from_secs(60),
        enabled_tools: None,
        disabled_tools: Vec::new(),
        origin: "test".to_owned(),
        protocol_version: None,
    }
}

/// The runtime and a server on it.
fn connect_to(config: ServerConfig, dir: &Path) -> (McpRuntime, Arc<Server>) {
    let rt = McpRuntime::start().unwrap();
    let subprocess = SubprocessService::new(SubprocessConfig::from_process_env(dir.join("spill")));
    (
        rt,
        Arc::new(Server::new(config, subprocess, dir.to_path_buf())),
    )
}

fn start(rt: &McpRuntime, server: &Arc<Server>) -> Result<Vec<Tool>, StartFailure> {
    let server = server.clone();
    rt.wait(async move { server.start().await }).unwrap()
}

fn call(
    rt: &McpRuntime,
    server: &Arc<Server>,
    tool: &str,
    args: Value,
) -> Result<Value, CallFailure> {
    let server = server.clone();
    let tool = tool.to_owned();
    let args: JsonObject = serde_json::from_value(args).unwrap();
    rt.wait(async move {
        server
            .call(&tool, Some(args), CancellationToken::new())
            .await
    })
    .unwrap()
}

/// The text of a tool result's first content block.
fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// A port on 127.0.0.1 nothing listens on.
fn closed_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    listener.local_addr().unwrap().port()
}

/// A loopback proxy in front of `upstream` that forwards bytes both ways and keeps every
/// byte the client sent (request lines and headers included).
struct Recorder {
    port: u16,
    /// What each connection sent.
    sent: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Recorder {
    fn start(upstream: u16) -> Recorder {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let sent = Arc::new(Mutex::new(Vec::new()));
        let record = sent.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect((Ipv4Addr::LOCALHOST, upstream)) else {
                    continue;
                };
                let (Ok(mut client_r), Ok(mut server_w)) = (client.try_clone(), server.try_clone())
                else {
                    continue;
                };
                let record = record.clone();
                let index = {
                    let mut all = record.lock().unwrap();
                    all.push(Vec::new());
                    all.len() - 1
                };
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16 << 10];
                    while let Ok(n) = client_r.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        record.lock().unwrap()[index].extend_from_slice(&buf[..n]);
                        if server_w.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = server_w.shutdown(std::net::Shutdown::Write);
                });
                let (mut server_r, mut client_w) = (server, client);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut server_r, &mut client_w);
                    let _ = client_w.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        Recorder { port, sent }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// The requests the client sent: each request line with its headers.
    fn requests(&self) -> Vec<(String, Vec<(String, String)>)> {
        let mut out = Vec::new();
        for conn in self.sent.lock().unwrap().iter() {
            let text = String::from_utf8_lossy(conn);
            let mut rest: &str = &text;
            // Each request's head: from its method to the blank line (bodies sit between).
            while let Some(at) = ["GET /", "POST /", "DELETE /"]
                .iter()
                .filter_map(|m| rest.find(m))
                .min()
            {
                let head_end = rest[at..].find("\r\n\r\n").map_or(rest.len(), |e| at + e);
                let mut lines = rest[at..head_end].split("\r\n");
                let line = lines.next().unwrap_or_default().to_owned();
                let headers = lines
                    .filter_map(|l| l.split_once(':'))
                    .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_owned()))
                    .collect();
                out.push((line, headers));
                rest = &rest[head_end..];
            }
        }
        out
    }
}

/// The value of header `name` (lower case) among `headers`.
fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn start_lists_the_tools_and_echo_answers() {
    let Some(bin) = require_bin() else { return };
    let dir = tempfile::tempdir().unwrap();
    let everything = Everything::start(&bin, dir.path(), 0);
    let (rt, server) = connect_to(
        http_config("everything", &everything.url(), None),
        dir.path(),
    );

    let tools = start(&rt, &server).unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for want in [
        "echo",
        "get-sum",
        "get-structured-content",
        "trigger-long-running-operation",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }

    let result = call(&rt, &server, "echo", json!({"message": "hello over http"})).unwrap();
    assert_eq!(text(&result), "Echo: hello over http", "{result}");
    let result = call(&rt, &server, "get-sum", json!({"a": 2, "b": 40})).unwrap();
    assert!(text(&result).contains("42"), "{result}");
}

#[test]
fn the_bearer_token_reaches_the_server_and_no_message() {
    let Some(bin) = require_bin() else { return };
    const VAR: &str = "KEEL_TEST_HTTP_BEARER_9C41";
    let token = format!("keel-test-token-{}", std::process::id());
    // SAFETY: this variable is this test's own; nothing else reads or writes it.
    unsafe { std::env::set_var(VAR, &token) };

    let dir = tempfile::tempdir().unwrap();
    let everything = Everything::start(&bin, dir.path(), 0);
    let recorder = Recorder::start(everything.port);
    let mut config = http_config("authed", &recorder.url(), Some(VAR));
    if let Transport::Http { headers, .. } = &mut config.transport {
        headers.insert("X-Keel-Test".into(), "configured".into());
    }
    let (rt, server) = connect_to(config, dir.path());

    start(&rt, &server).unwrap();
    let result = call(&rt, &server, "echo", json!({"message": "with a token"})).unwrap();
    assert_eq!(text(&result), "Echo: with a token");
    // An error from the server, and a failed call: neither carries the token.
    let failure = call(&rt, &server, "no-such-tool", json!({})).err();
    let failure = format!("{failure:?}");
    assert!(!failure.contains(&token), "{failure}");
    assert!(!format!("{server:?}").contains(&token));

    let requests = recorder.requests();
    assert!(requests.len() >= 3, "{requests:?}");
    let bearer = format!("Bearer {token}");
    for (line, headers) in &requests {
        assert_eq!(
            header(headers, "authorization"),
            Some(bearer.as_str()),
            "{line} was sent without the token"
        );
        assert_eq!(
            header(headers, "x-keel-test"),
            Some("configured"),
            "{line} was sent without the configured header"
        );
    }

    // The same token against a closed port: the start failure does not carry it either.
    let (rt, closed) = connect_to(
        http_config(
            "closed",
            &format!("http://127.0.0.1:{}/mcp", closed_port()),
            Some(VAR),
        ),
        dir.path(),
    );
    let failure = start(&rt, &closed).unwrap_err();
    assert!(!failure.to_string().contains(&token), "{failure}");
    let failure = call(&rt, &closed, "echo", json!({"message": "x"})).unwrap_err();
    assert!(!format!("{failure:?}").contains(&token), "{failure:?}");
}

#[test]
fn an_unset_token_variable_is_a_start_failure_naming_it() {
    let Some(bin) = require_bin() else { return };
    const VAR: &str = "KEEL_TEST_HTTP_UNSET_5D02";
    let dir = tempfile::tempdir().unwrap();
    let everything = Everything::start(&bin, dir.path(), 0);
    let (rt, server) = connect_to(
        http_config("authed", &everything.url(), Some(VAR)),
        dir.path(),
    );
    let failure = start(&rt, &server).unwrap_err();
    assert_eq!(
        failure.reason,
        format!("bearer_token_env_var: the variable {VAR} is not set")
    );
    let later = call(&rt, &server, "echo", json!({"message": "x"})).unwrap_err();
    assert!(
        matches!(&later, CallFailure::Disabled(why) if why.contains(VAR)),
        "{later:?}"
    );
}

#[test]
fn an_unreachable_url_fails_start_within_the_startup_timeout() {
    // No node needed.
    let dir = tempfile::tempdir().unwrap();
    let port = closed_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut config = http_config("gone", &url, None);
    config.startup_timeout = Duration::from_secs(5);
    let (rt, server) = connect_to(config, dir.path());
    let begun = Instant::now();
    let failure = start(&rt, &server).unwrap_err();
    eprintln!("after {:?}: {failure}", begun.elapsed());
    assert!(
        begun.elapsed() < Duration::from_secs(7),
        "{:?}",
        begun.elapsed()
    );
    let reason = failure.reason.to_lowercase();
    assert!(reason.contains(&url), "{failure}");
    assert!(
        reason.contains("connection refused") || reason.contains("did not answer"),
        "{failure}"
    );
    assert!(!reason.contains("workertransport"), "{failure}");

    // A port that accepts connections and never answers: the startup timeout ends it.
    let silent = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let url = format!(
        "http://127.0.0.1:{}/mcp",
        silent.local_addr().unwrap().port()
    );
    let mut config = http_config("silent", &url, None);
    config.startup_timeout = Duration::from_secs(1);
    let (rt, server) = connect_to(config, dir.path());
    let begun = Instant::now();
    let failure = start(&rt, &server).unwrap_err();
    let took = begun.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert_eq!(
        failure.reason,
        format!(
            "{url} did not answer server/discover (then initialize) and tools/list within 1 s \
             (startup_timeout_sec)"
        )
    );
    drop(silent);
}

#[test]
fn a_server_killed_mid_call_fails_the_call_and_a_restarted_one_serves_the_next() {
    let Some(bin) = require_bin() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut everything = Everything::start(&bin, dir.path(), 0);
    let port = everything.port;
    let (rt, server) = connect_to(http_config("flaky", &everything.url(), None), dir.path());
    start(&rt, &server).unwrap();

    let pending = {
        let server = server.clone();
        let args: JsonObject =
            serde_json::from_value(json!({"duration": 40, "steps": 40})).unwrap();
        rt.spawn(async move {
            server
                .call(
                    "trigger-long-running-operation",
                    Some(args),
                    CancellationToken::new(),
                )
                .await
        })
    };
    std::thread::sleep(Duration::from_secs(2));
    assert!(!pending.is_finished(), "the long call ended early");
    let killed = Instant::now();
    everything.kill();
    let outcome = rt
        .wait(async move { tokio::time::timeout(Duration::from_secs(30), pending).await })
        .unwrap();
    let outcome = outcome
        .expect("the call did not end after its server died")
        .unwrap();
    eprintln!(
        "the call ended {:?} after the kill: {outcome:?}",
        killed.elapsed()
    );
    match &outcome {
        Err(CallFailure::Broken(why)) => {
            assert!(why.contains("went away"), "{why}");
            assert!(!why.to_lowercase().contains("workertransport"), "{why}");
        }
        other => panic!("expected a broken call, got {other:?}"),
    }

    let _again = Everything::start(&bin, dir.path(), port);
    let result = call(&rt, &server, "echo", json!({"message": "after restart"})).unwrap();
    assert_eq!(text(&result), "Echo: after restart", "{result}");
}
