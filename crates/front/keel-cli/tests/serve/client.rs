//! The test's own HTTP/1.1 client (std `TcpStream`): a running `keel serve` read from its
//! first line, whole requests and answers, chunked bodies, and a Server-Sent Events reader;
//! plus the listing and socket helpers the tests share.

use crate::support::{Env, HANG_GUARD, Mock};
use serde_json::Value;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Stdio};
use std::sync::mpsc::channel;
use std::time::Duration;

/// A running `keel serve` (SIGTERM and reaped on drop).
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) addr: SocketAddr,
    pub(crate) token: String,
    pub(crate) url: String,
}

impl Server {
    pub(crate) fn start(env: &Env, mock: &Mock) -> Server {
        Server::start_with(env, mock, &[])
    }

    /// [`Server::start`] with more `keel serve` arguments.
    pub(crate) fn start_with(env: &Env, mock: &Mock, args: &[&str]) -> Server {
        Server::start_on(env, mock, "127.0.0.1:0", args)
    }

    /// [`Server::start_with`] listening on `listen` (a server started again on its port).
    pub(crate) fn start_on(env: &Env, mock: &Mock, listen: &str, args: &[&str]) -> Server {
        let mut cmd = env.keel(&mock.base_url());
        cmd.args(["serve", "--listen", listen])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let mut reader = BufReader::new(stdout);
            let _ = reader.read_line(&mut line);
            let _ = tx.send(line);
            // Keep draining so the server never blocks on a full pipe.
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        });
        let line = rx
            .recv_timeout(HANG_GUARD)
            .expect("hang guard: keel serve printed no first line");
        let url = line
            .trim()
            .strip_prefix("keel serve: ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))
            .unwrap();
        let (authority, token) = rest.split_once("/?token=").unwrap();
        assert_eq!(token.len(), 64, "a 32-byte hex token: {token}");
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
        Server {
            child,
            addr: authority.parse().unwrap(),
            token: token.to_owned(),
            url,
        }
    }

    pub(crate) fn host(&self) -> String {
        format!("127.0.0.1:{}", self.addr.port())
    }

    pub(crate) fn auth(&self) -> String {
        format!("Bearer {}", self.token)
    }

    /// `POST /api/v1/sessions {cwd, prompt}`, which must answer 201; the new session's id.
    pub(crate) fn create(&self, cwd: &std::path::Path, prompt: &str) -> String {
        let created = self.call(
            "POST",
            "/api/v1/sessions",
            Some(&serde_json::json!({"cwd": cwd, "prompt": prompt})),
        );
        assert_eq!(created.status, 201, "{}", created.body);
        created.json()["id"].as_str().unwrap().to_owned()
    }

    /// A request with the token and the right `Host`, plus `extra` headers.
    pub(crate) fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Reply {
        let auth = self.auth();
        let host = self.host();
        request(
            self.addr,
            method,
            path,
            &[("Host", &host), ("Authorization", &auth)],
            body,
        )
    }
}

impl Server {
    /// SIGTERM, and the exit status.
    pub(crate) fn stop(&mut self) -> std::process::ExitStatus {
        // SAFETY: kill(2) on the child we spawned and have not reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = std::time::Instant::now() + HANG_GUARD;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "hang guard: keel serve did not stop"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the child we spawned and have not reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A whole answer.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Reply {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The JSON error's code, checking the error shape.
    pub(crate) fn error_code(&self) -> String {
        let v = self.json();
        assert!(v["error"]["message"].is_string(), "{v}");
        v["error"]["code"].as_str().unwrap().to_owned()
    }
}

pub(crate) fn send_head(
    stream: &mut TcpStream,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) {
    let body = body.map(|b| b.to_string());
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(body) = &body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    head.push_str(body.as_deref().unwrap_or(""));
    stream.write_all(head.as_bytes()).unwrap();
}

pub(crate) fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(HANG_GUARD)).unwrap();
    stream
}

/// Read the status line and headers.
pub(crate) fn read_head(reader: &mut BufReader<TcpStream>) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let status = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (k, v) = line.split_once(':').unwrap();
        headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    (status, headers)
}

pub(crate) fn is_chunked(headers: &[(String, String)]) -> bool {
    headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    })
}

/// One chunk of a chunked body (`None` at its end).
pub(crate) fn read_chunk(reader: &mut BufReader<TcpStream>) -> Option<Vec<u8>> {
    let mut size = String::new();
    if reader.read_line(&mut size).unwrap() == 0 {
        return None;
    }
    let size = usize::from_str_radix(size.trim().split(';').next().unwrap(), 16).unwrap();
    let mut data = vec![0; size + 2];
    reader.read_exact(&mut data).unwrap();
    data.truncate(size);
    (size > 0).then_some(data)
}

pub(crate) fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> Reply {
    let mut stream = connect(addr);
    send_head(&mut stream, method, path, headers, body);
    let mut reader = BufReader::new(stream);
    let (status, headers) = read_head(&mut reader);
    let mut bytes = Vec::new();
    if is_chunked(&headers) {
        while let Some(chunk) = read_chunk(&mut reader) {
            bytes.extend(chunk);
        }
    } else {
        reader.read_to_end(&mut bytes).unwrap();
    }
    Reply {
        status,
        headers,
        // Lossy: a presented file's bytes need not be text.
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

/// A Server-Sent Events reader. Log events (with `id:`) and named messages without one (a
/// session's requests: `pending`, `request`, `resolved`) are read apart: each kind is kept
/// while the other is read.
pub(crate) struct Sse {
    pub(crate) reader: BufReader<TcpStream>,
    pub(crate) pending: String,
    /// Log events read while looking for a named message.
    logged: VecDeque<(u64, Value)>,
    /// Named messages read while looking for log events.
    named: VecDeque<(String, Value)>,
    /// While waiting for an event (`until…`): when to give up. The server's keep-alive
    /// comments keep the socket's read timeout from firing, so the wait is bounded here.
    deadline: Option<std::time::Instant>,
}

/// One message of a stream.
enum Block {
    Logged(u64, Value),
    Named(String, Value),
}

impl Sse {
    pub(crate) fn open(server: &Server, path: &str, last_event_id: Option<u64>) -> Sse {
        let mut stream = connect(server.addr);
        let (auth, host) = (server.auth(), server.host());
        let last = last_event_id.map(|s| s.to_string());
        let mut headers = vec![
            ("Host", host.as_str()),
            ("Authorization", auth.as_str()),
            ("Accept", "text/event-stream"),
        ];
        if let Some(last) = &last {
            headers.push(("Last-Event-ID", last));
        }
        send_head(&mut stream, "GET", path, &headers, None);
        let mut reader = BufReader::new(stream);
        let (status, headers) = read_head(&mut reader);
        assert_eq!(status, 200, "{path}: {headers:?}");
        assert!(is_chunked(&headers), "{headers:?}");
        Sse {
            reader,
            pending: String::new(),
            logged: VecDeque::new(),
            named: VecDeque::new(),
            deadline: None,
        }
    }

    /// The next message, skipping keep-alive comments (`None` when the stream ends).
    fn block(&mut self) -> Option<Block> {
        loop {
            if let Some(end) = self.pending.find("\n\n") {
                let block: String = self.pending.drain(..end + 2).collect();
                let mut id = None;
                let mut name = None;
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().parse().unwrap());
                    } else if let Some(v) = line.strip_prefix("event:") {
                        name = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.strip_prefix(' ').unwrap_or(v));
                    }
                }
                match (id, name) {
                    (Some(_), Some(name)) => panic!("a log event is not named: {name} {data}"),
                    (Some(id), None) => {
                        return Some(Block::Logged(id, serde_json::from_str(&data).unwrap()));
                    }
                    (None, Some(name)) => {
                        return Some(Block::Named(name, serde_json::from_str(&data).unwrap()));
                    }
                    // A keep-alive comment.
                    (None, None) => {
                        if let Some(deadline) = self.deadline {
                            assert!(
                                std::time::Instant::now() < deadline,
                                "hang guard: no awaited event on the stream"
                            );
                        }
                        continue;
                    }
                }
            }
            let chunk = read_chunk(&mut self.reader)?;
            self.pending.push_str(&String::from_utf8(chunk).unwrap());
        }
    }

    /// The next log event: its `id:` and its `data:` as JSON (`None` when the stream ends).
    pub(crate) fn next(&mut self) -> Option<(u64, Value)> {
        if let Some(event) = self.logged.pop_front() {
            return Some(event);
        }
        loop {
            match self.block()? {
                Block::Logged(id, event) => return Some((id, event)),
                Block::Named(name, data) => self.named.push_back((name, data)),
            }
        }
    }

    /// The next named message (`event: NAME`, no `id:`): its name and data.
    pub(crate) fn next_named(&mut self) -> Option<(String, Value)> {
        if let Some(named) = self.named.pop_front() {
            return Some(named);
        }
        loop {
            match self.block()? {
                Block::Logged(id, event) => self.logged.push_back((id, event)),
                Block::Named(name, data) => return Some((name, data)),
            }
        }
    }

    /// The named messages read (while reading log events) and not taken yet.
    pub(crate) fn named_seen(&self) -> Vec<(String, Value)> {
        self.named.iter().cloned().collect()
    }

    /// The data of the next named message, which must be called `name`.
    pub(crate) fn expect_named(&mut self, name: &str) -> Value {
        match self.next_named() {
            Some((got, data)) => {
                assert_eq!(got, name, "{data}");
                data
            }
            None => panic!("the stream ended before a {name} message"),
        }
    }

    /// Events up to and including the first `turn/end`.
    pub(crate) fn until_turn_end(&mut self) -> Vec<(u64, Value)> {
        self.until("turn/end")
    }

    /// Every event until the stream ends (a stored session's log).
    pub(crate) fn rest(&mut self) -> Vec<(u64, Value)> {
        std::iter::from_fn(|| self.next()).collect()
    }

    /// Events up to and including the first that satisfies `done`.
    pub(crate) fn until_where(&mut self, done: impl Fn(&Value) -> bool) -> Vec<(u64, Value)> {
        self.deadline = Some(std::time::Instant::now() + HANG_GUARD);
        let mut out = Vec::new();
        while let Some((id, ev)) = self.next() {
            let end = done(&ev);
            out.push((id, ev));
            if end {
                self.deadline = None;
                return out;
            }
        }
        panic!("the stream ended early: {out:?}");
    }

    /// Events up to and including the first of type `ty`.
    pub(crate) fn until(&mut self, ty: &str) -> Vec<(u64, Value)> {
        self.deadline = Some(std::time::Instant::now() + HANG_GUARD);
        let mut out = Vec::new();
        while let Some((id, ev)) = self.next() {
            let end = ev["type"] == ty;
            out.push((id, ev));
            if end {
                self.deadline = None;
                return out;
            }
        }
        panic!("the stream ended before {ty}: {out:?}");
    }
}

pub(crate) fn check_ids(events: &[(u64, Value)]) {
    for (id, ev) in events {
        assert_eq!(
            ev["seq"].as_u64(),
            Some(*id),
            "id: is the event's seq: {ev}"
        );
    }
    for pair in events.windows(2) {
        assert_eq!(pair[1].0, pair[0].0 + 1, "seqs in order, none missing");
    }
}

/// The row of session `id` in the listing.
pub(crate) fn listed(server: &Server, id: &str) -> Value {
    let list = server.call("GET", "/api/v1/sessions", None);
    assert_eq!(list.status, 200, "{}", list.body);
    list.json()["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("{id} not listed: {}", list.body))
}

/// Poll until session `id` is listed as idle (its runner stops just after its turn's end).
pub(crate) fn wait_idle(server: &Server, id: &str) {
    let deadline = std::time::Instant::now() + HANG_GUARD;
    loop {
        let row = listed(server, id);
        if row["status"] == "idle" {
            return;
        }
        assert_eq!(row["status"], "running", "{row}");
        assert!(std::time::Instant::now() < deadline, "hang guard: {row}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn seq_types(events: &[(u64, Value)]) -> Vec<(u64, String)> {
    events
        .iter()
        .map(|(id, e)| (*id, e["type"].as_str().unwrap().to_owned()))
        .collect()
}

/// Set the receive buffer of `sse`'s socket (a small one makes the server's writes to it block).
pub(crate) fn receive_buffer(sse: &Sse, bytes: libc::c_int) {
    let fd = std::os::fd::AsRawFd::as_raw_fd(sse.reader.get_ref());
    // SAFETY: setsockopt on a socket we own, with a c_int option value of the right size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
}

/// Session `id`'s events on disk (the server's `$KEEL_HOME`), each whole.
pub(crate) fn events_of(env: &Env, id: &str) -> Vec<Value> {
    let file = env
        .session_files()
        .into_iter()
        .find(|f| f.to_string_lossy().contains(id))
        .unwrap_or_else(|| panic!("no session file for {id}"));
    crate::support::load_consistent(&file)
}
