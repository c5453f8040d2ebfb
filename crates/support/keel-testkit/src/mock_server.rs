//! Loopback mock model server, driven by a keel-llm [`Script`].
//!
//! It binds `127.0.0.1` only, answers `POST …/chat/completions`, `POST …/v1/messages` and
//! `POST …/responses` with the script's next matching response (same selection and wire
//! rendering as the scripted provider: see [`keel_llm::script_render`]; the Messages and
//! Responses streams are that rendering re-expressed by [`keel_llm::script_wire`]), injects the script's faults (HTTP errors, resets, mid-stream
//! disconnects, stalls, malformed JSON, tiny network writes, CRLF, comments) and records every
//! request body and its headers. A deliberately small HTTP/1.1 implementation: one request per connection,
//! answered with `Connection: close`; streams use chunked transfer encoding.

use keel_llm::WireApi;
use keel_llm::script::{MatchInput, Script, ScriptCursor};
use keel_llm::script_render::{Delivery, PromptCacheSim, StreamPlan, plan};
use keel_llm::script_wire;
use keel_protocol::sync::Locked;
use serde_json::Value;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Largest request head the server reads.
const MAX_HEAD: usize = 64 * 1024;
/// Largest request body the server reads.
const MAX_BODY: usize = 512 * 1024 * 1024;

/// How to run the server.
#[derive(Debug, Clone, Default)]
pub struct MockOptions {
    /// Port on 127.0.0.1 (0 = any free port).
    pub port: u16,
    /// Append each request body as one JSON line to this file.
    pub record: Option<PathBuf>,
}

#[derive(Debug)]
struct State {
    cursor: Mutex<ScriptCursor>,
    cache: Mutex<PromptCacheSim>,
    requests: Mutex<Vec<Value>>,
    headers: Mutex<Vec<Headers>>,
    record: Option<Mutex<std::fs::File>>,
    shutdown: CancellationToken,
}

/// A running mock server; it shuts down (closing every open stream) when dropped.
#[derive(Debug)]
pub struct MockServer {
    addr: SocketAddr,
    state: Arc<State>,
}

impl MockServer {
    /// Starts a server on a free loopback port.
    pub async fn start(script: Script) -> std::io::Result<MockServer> {
        MockServer::start_with(script, MockOptions::default()).await
    }

    /// Starts a server with options.
    pub async fn start_with(script: Script, options: MockOptions) -> std::io::Result<MockServer> {
        let listener = TcpListener::bind(("127.0.0.1", options.port)).await?;
        let addr = listener.local_addr()?;
        let record = match &options.record {
            Some(path) => Some(Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?,
            )),
            None => None,
        };
        let state = Arc::new(State {
            cursor: Mutex::new(ScriptCursor::new(script)),
            cache: Mutex::new(PromptCacheSim::default()),
            requests: Mutex::new(Vec::new()),
            headers: Mutex::new(Vec::new()),
            record,
            shutdown: CancellationToken::new(),
        });
        let accept_state = state.clone();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = accept_state.shutdown.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((socket, _)) = accepted else { continue };
                let conn_state = accept_state.clone();
                tokio::spawn(async move {
                    let token = conn_state.shutdown.clone();
                    tokio::select! {
                        _ = token.cancelled() => {}
                        result = handle(socket, &conn_state) => {
                            if let Err(e) = result {
                                tracing::debug!(error = %e, "mock server connection ended");
                            }
                        }
                    }
                });
            }
        });
        Ok(MockServer { addr, state })
    }

    /// `http://127.0.0.1:PORT` (clients append `/chat/completions`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request body received so far, in order (non-JSON bodies as JSON strings).
    pub fn requests(&self) -> Vec<Value> {
        self.state.requests.locked().clone()
    }

    /// The headers of every chat-completions request received so far, in the order of
    /// [`MockServer::requests`].
    pub fn request_headers(&self) -> Vec<Headers> {
        self.state.headers.locked().clone()
    }

    /// Script responses not served yet.
    pub fn remaining(&self) -> usize {
        self.state.cursor.locked().remaining()
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.state.shutdown.cancel();
    }
}

/// The headers of one request, names lower-cased, in the order received.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers(pub Vec<(String, String)>);

impl Headers {
    /// The value of the first header called `name` (any case), if any.
    pub fn get(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

struct Request {
    method: String,
    path: String,
    headers: Headers,
    body: Vec<u8>,
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

async fn read_request(socket: &mut TcpStream) -> std::io::Result<Option<Request>> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_owned());
    let mut buf = Vec::with_capacity(8192);
    let mut tmp = vec![0u8; 64 * 1024];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD {
            return Err(bad("request head too large"));
        }
        let n = socket.read(&mut tmp).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_owned();
    let path = first.next().unwrap_or_default().to_owned();
    let mut length = 0usize;
    let mut headers = Headers::default();
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
        if name == "content-length" {
            length = value.parse().map_err(|_| bad("bad content-length"))?;
        }
        headers.0.push((name, value.to_owned()));
    }
    if length > MAX_BODY {
        return Err(bad("request body too large"));
    }
    let mut body = buf.split_off(head_end + 4);
    while body.len() < length {
        let n = socket.read(&mut tmp).await?;
        if n == 0 {
            return Err(bad("request body cut short"));
        }
        body.extend_from_slice(&tmp[..n]);
    }
    body.truncate(length);
    Ok(Some(Request {
        method,
        path,
        headers,
        body,
    }))
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        _ => "Error",
    }
}

async fn write_error(
    socket: &mut TcpStream,
    status: u16,
    body: &str,
    retry_after: Option<f64>,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\nx-request-id: mock-request\r\n",
        reason_phrase(status),
        body.len()
    );
    if let Some(secs) = retry_after {
        head.push_str(&format!("Retry-After: {secs}\r\n"));
    }
    head.push_str("\r\n");
    socket.write_all(head.as_bytes()).await?;
    socket.write_all(body.as_bytes()).await?;
    socket.flush().await?;
    socket.shutdown().await
}

/// Text of the wire request's last message with `role`.
/// The text of the last message of `role` (any role when `role` is empty).
fn last_content(body: &Value, role: &str) -> Option<String> {
    let messages = body.get("messages")?.as_array()?;
    let message = messages
        .iter()
        .rev()
        .find(|m| role.is_empty() || m.get("role").and_then(Value::as_str) == Some(role))?;
    match message.get("content")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<String>(),
        ),
        _ => None,
    }
}

async fn handle(mut socket: TcpStream, state: &State) -> std::io::Result<()> {
    socket.set_nodelay(true)?;
    let Some(request) = read_request(&mut socket).await? else {
        return Ok(());
    };
    // The wire is the path's: chat completions, the Messages API or the Responses API.
    let path = request.path.split('?').next().unwrap_or("");
    let api = if path.ends_with("/chat/completions") {
        Some(WireApi::Chat)
    } else if path.ends_with("/messages") {
        Some(WireApi::Messages)
    } else if path.ends_with("/responses") {
        Some(WireApi::Responses)
    } else {
        None
    };
    let Some(api) = api.filter(|_| request.method == "POST") else {
        let body = serde_json::json!({"error": {"message": format!("keel mock server: no route for {} {}", request.method, request.path)}});
        return write_error(&mut socket, 404, &body.to_string(), None).await;
    };
    let body: Value = serde_json::from_slice(&request.body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&request.body).into_owned()));
    state.requests.locked().push(body.clone());
    state.headers.locked().push(request.headers.clone());
    if let Some(file) = &state.record {
        let mut file = file.locked();
        writeln!(file, "{body}")?;
    }
    let view = script_wire::chat_view(api, &body);
    let (last_user, last_tool) = (last_content(&view, "user"), last_content(&view, "tool"));
    let last_message = last_content(&view, "");
    let taken = state.cursor.locked().take(MatchInput {
        last_user: last_user.as_deref(),
        last_tool: last_tool.as_deref(),
        last_message: last_message.as_deref(),
    });
    let (n, response) = match taken {
        Ok(t) => t,
        Err(e) => {
            let body = serde_json::json!({"error": {"message": format!("keel mock server: {e}"), "type": "invalid_request_error"}});
            return write_error(&mut socket, 400, &body.to_string(), None).await;
        }
    };
    let prompt = state.cache.locked().observe(&request.body);
    let model = body.get("model").and_then(Value::as_str).unwrap_or("mock");
    match plan(&response, n, model, prompt) {
        Delivery::ConnectionReset => {
            socket.set_zero_linger()?;
            drop(socket);
            Ok(())
        }
        Delivery::HttpError {
            status,
            body,
            retry_after,
        } => write_error(&mut socket, status, &body, retry_after).await,
        Delivery::Stream(stream) => {
            let stream = script_wire::convert(stream, api, n, model);
            let options = WireOptions {
                write_size: response.write_size,
                crlf: response.crlf,
                comments: response.comments,
                event_names: api != WireApi::Chat,
            };
            write_stream(&mut socket, n, &stream, options, &state.shutdown).await
        }
    }
}

#[derive(Clone, Copy)]
struct WireOptions {
    write_size: Option<usize>,
    crlf: bool,
    comments: bool,
    /// Write each event's `type` as its `event:` line (the Messages and Responses APIs do).
    event_names: bool,
}

async fn write_chunked(socket: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    socket
        .write_all(format!("{:x}\r\n", bytes.len()).as_bytes())
        .await?;
    socket.write_all(bytes).await?;
    socket.write_all(b"\r\n").await?;
    socket.flush().await
}

async fn write_stream(
    socket: &mut TcpStream,
    n: usize,
    stream: &StreamPlan,
    options: WireOptions,
    shutdown: &CancellationToken,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\nConnection: close\r\nx-request-id: mock-request-{n}\r\n\r\n"
    );
    socket.write_all(head.as_bytes()).await?;
    socket.flush().await?;
    let nl = if options.crlf { "\r\n" } else { "\n" };
    for (i, payload) in stream.payloads.iter().enumerate() {
        if let Some(pace) = stream.pace {
            tokio::time::sleep(pace).await;
        }
        if let Some(stall) = stream.stall.filter(|s| s.after == i) {
            match stall.duration {
                Some(d) => tokio::time::sleep(d).await,
                None => shutdown.cancelled().await,
            }
        }
        let mut event = String::with_capacity(payload.len() + 16);
        if options.comments {
            event.push_str(": keep-alive");
            event.push_str(nl);
            event.push_str(nl);
        }
        if let Some(name) = options
            .event_names
            .then(|| script_wire::event_name(payload))
            .flatten()
        {
            event.push_str("event: ");
            event.push_str(&name);
            event.push_str(nl);
        }
        event.push_str("data: ");
        event.push_str(payload);
        event.push_str(nl);
        event.push_str(nl);
        match options.write_size {
            None => write_chunked(socket, event.as_bytes()).await?,
            Some(size) => {
                for piece in event.as_bytes().chunks(size.max(1)) {
                    write_chunked(socket, piece).await?;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        }
    }
    if stream.disconnect {
        // No terminating chunk: the client sees the body end mid-stream.
        return socket.shutdown().await;
    }
    socket.write_all(b"0\r\n\r\n").await?;
    socket.flush().await?;
    socket.shutdown().await
}
