//! A client of a running `keel serve` (docs/serve.md), shared by `keel run --server` and
//! `keel attach`: the server's URL and token ([`Server::new`]: the URL's `?token=`,
//! KEEL_SERVE_TOKEN, or `$KEEL_HOME/serve.json`), requests that read the server's error
//! answers, and a Server-Sent Events parser ([`Sse`]) for a session's event stream.

use crate::cmd::Ctx;
use anyhow::{Context, Result, anyhow, bail};
use keel_protocol::{LogRecord, SessionEvent};
use reqwest::{StatusCode, Url, header};
use serde_json::Value;

/// The variable naming a PEM certificate to trust for an `https://` server (its own
/// self-signed certificate, or its CA's).
const SERVE_CA_ENV: &str = "KEEL_SERVE_CA";

/// A `keel serve` this client talks to.
#[derive(Clone)]
pub(crate) struct Server {
    /// `http://HOST:PORT/`, without the token.
    pub(crate) base: Url,
    pub(crate) token: String,
    pub(crate) http: reqwest::Client,
}

impl Server {
    pub(crate) fn new(ctx: &Ctx, url: &str) -> Result<Server> {
        let (base, token) = locate(url, &ctx.home, std::env::var("KEEL_SERVE_TOKEN").ok())?;
        let mut builder = reqwest::Client::builder()
            // A server of the user's: never through a proxy of the environment.
            .no_proxy()
            .connect_timeout(std::time::Duration::from_secs(10));
        // An https:// server with its own certificate (`keel serve --tls-cert`): trust it.
        if let Some(ca) = std::env::var_os(SERVE_CA_ENV) {
            let pem = std::fs::read(&ca).with_context(|| {
                format!(
                    "{SERVE_CA_ENV}: cannot read {}",
                    std::path::Path::new(&ca).display()
                )
            })?;
            let cert = reqwest::Certificate::from_pem(&pem).with_context(|| {
                format!(
                    "{SERVE_CA_ENV}: {} is not a PEM certificate",
                    std::path::Path::new(&ca).display()
                )
            })?;
            builder = builder.add_root_certificate(cert);
        }
        let http = builder.build().context("cannot start the HTTP client")?;
        Ok(Server { base, token, http })
    }

    /// The token `$KEEL_HOME/serve.json` (under `home`) names when it is this server's (the
    /// same host and port): a server started again on the same address writes a new one.
    pub(crate) fn saved_token(&self, home: &std::path::Path) -> Option<String> {
        let (url, token) = saved_for(home, &self.base).ok()?;
        (url.scheme() == self.base.scheme()).then_some(token)
    }

    /// The server as people name it: `http://HOST:PORT`.
    pub(crate) fn shown(&self) -> &str {
        self.base.as_str().trim_end_matches('/')
    }

    pub(crate) fn url(&self, path: &str) -> Result<Url> {
        self.base
            .join(path)
            .with_context(|| format!("bad path {path}"))
    }

    /// Send `request` with the token; a refused connection or an error answer (the server's
    /// `{"error": {"code", "message"}}`) is an error naming the server.
    pub(crate) async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response> {
        let response = request.bearer_auth(&self.token).send().await.map_err(|e| {
            anyhow::Error::new(e).context(format!(
                "cannot reach the keel server at {} (is `keel serve` running there?)",
                self.shown()
            ))
        })?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        let (code, message) = error_of(&body);
        let hint = if status == StatusCode::UNAUTHORIZED {
            " (the token is wrong or stale: the server makes a new one at every start; give \
             the URL it printed, with its ?token=)"
        } else {
            ""
        };
        Err(Refused {
            server: self.shown().to_owned(),
            status: status.as_u16(),
            code: code.unwrap_or_else(|| status.canonical_reason().unwrap_or("error").to_owned()),
            message: message.unwrap_or(body),
            hint,
        }
        .into())
    }

    /// `POST path` with a JSON body; the JSON answer.
    pub(crate) async fn post(&self, path: &str, body: &Value) -> Result<Value> {
        let request = self
            .http
            .post(self.url(path)?)
            .header(header::CONTENT_TYPE, "application/json")
            .body(body.to_string());
        let text = self
            .send(request)
            .await?
            .text()
            .await
            .with_context(|| format!("reading the answer of {} failed", self.shown()))?;
        serde_json::from_str(&text).with_context(|| {
            format!(
                "the keel server at {} answered {path} with something that is not JSON: {text}",
                self.shown()
            )
        })
    }
}

/// The server's base URL and the token from `url` (`http://HOST:PORT[/?token=TOKEN]`): the
/// URL's `token`, else `env_token` (KEEL_SERVE_TOKEN), else `$KEEL_HOME/serve.json` when its
/// URL names the same host and port.
fn locate(url: &str, home: &std::path::Path, env_token: Option<String>) -> Result<(Url, String)> {
    let parsed = Url::parse(url).map_err(|e| {
        anyhow!("--server {url}: not a URL ({e}); give what `keel serve` printed, e.g. http://127.0.0.1:7878/?token=…")
    })?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        bail!("--server {url}: not an http:// URL of a keel server");
    }
    let mut base = parsed.clone();
    base.set_query(None);
    base.set_fragment(None);
    base.set_path("/");
    let _ = base.set_username("");
    let _ = base.set_password(None);
    let from_url = parsed
        .query_pairs()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned());
    if let Some(token) = from_url.or(env_token).filter(|t| !t.is_empty()) {
        return Ok((base, token));
    }
    match saved_for(home, &base) {
        Ok((_, token)) => Ok((base, token)),
        Err(why) => bail!(
            "no token for the keel server at {}: give the URL it printed (…/?token=TOKEN), or \
             set KEEL_SERVE_TOKEN (and {why})",
            base.as_str().trim_end_matches('/')
        ),
    }
}

/// What `$KEEL_HOME/serve.json` (under `home`) holds for the server at `base`: the URL it names
/// and its token when that URL has the same host and port, else why not.
fn saved_for(home: &std::path::Path, base: &Url) -> Result<(Url, String), String> {
    let state = home.join("serve.json");
    let text = std::fs::read_to_string(&state).map_err(|e| format!("{}: {e}", state.display()))?;
    let saved: Value = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not valid JSON: {e}", state.display()))?;
    let url = saved["url"]
        .as_str()
        .and_then(|u| Url::parse(u).ok())
        .filter(|u| {
            u.host_str() == base.host_str()
                && u.port_or_known_default() == base.port_or_known_default()
        });
    match (url, saved["token"].as_str()) {
        (Some(url), Some(token)) if !token.is_empty() => Ok((url, token.to_owned())),
        (Some(_), _) => Err(format!("{} has no token", state.display())),
        (None, _) => Err(format!(
            "{} is another server's ({})",
            state.display(),
            saved["url"]
                .as_str()
                .map(|u| u.split("/?").next().unwrap_or(u))
                .unwrap_or("no url")
        )),
    }
}

/// An error answer of the server: its status, its `{"error": {"code", "message"}}`.
#[derive(Debug)]
pub(crate) struct Refused {
    server: String,
    status: u16,
    /// The error's `code` (the status's reason when the body has none).
    pub(crate) code: String,
    message: String,
    hint: &'static str,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the keel server at {} answered {} {}: {}{}",
            self.server, self.status, self.code, self.message, self.hint
        )
    }
}

impl std::error::Error for Refused {}

/// The code and the message of the server's `{"error": {"code", "message"}}`.
fn error_of(body: &str) -> (Option<String>, Option<String>) {
    let Ok(v) = serde_json::from_str::<Value>(body) else {
        return (None, None);
    };
    let field = |k: &str| v["error"][k].as_str().map(str::to_owned);
    (field("code"), field("message"))
}

/// A log event of the stream (its `data:`, the log's own JSON).
pub(crate) fn event_of(data: &str) -> Result<SessionEvent> {
    match keel_session::store::parse_record(data) {
        Ok(LogRecord::Event(event)) => Ok(event),
        Ok(_) => bail!("the event stream sent a record that is not an event: {data}"),
        Err(e) => Err(anyhow!(
            "the event stream sent an event keel cannot read ({e}): {data}"
        )),
    }
}

/// One Server-Sent Events message.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Message {
    /// `id:`.
    pub(crate) id: Option<String>,
    /// `event:` (absent for a plain message).
    pub(crate) event: Option<String>,
    /// The `data:` lines, joined by newlines.
    pub(crate) data: String,
}

/// A Server-Sent Events parser (the WHATWG event-stream format): bytes in, whole messages out.
/// Lines end in LF, CRLF or CR; `:` lines are comments (keep-alives); a blank line dispatches
/// the message; a message with no `data:` is dropped.
#[derive(Debug, Default)]
pub(crate) struct Sse {
    /// Bytes of the line not yet ended.
    line: Vec<u8>,
    /// The last byte was a CR (an LF right after it ends nothing more).
    after_cr: bool,
    /// The message being read.
    current: Message,
    /// Whether `current` has a `data:` line.
    has_data: bool,
}

impl Sse {
    /// Feed `bytes`; the messages they complete.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result<Vec<Message>> {
        let mut out = Vec::new();
        for &b in bytes {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.line);
                    let line = String::from_utf8(line)
                        .map_err(|_| anyhow!("the event stream sent a line that is not UTF-8"))?;
                    if let Some(message) = self.line_done(&line) {
                        out.push(message);
                    }
                }
                _ => {
                    self.after_cr = false;
                    self.line.push(b);
                }
            }
        }
        Ok(out)
    }

    fn line_done(&mut self, line: &str) -> Option<Message> {
        if line.is_empty() {
            let message = std::mem::take(&mut self.current);
            let had = std::mem::take(&mut self.has_data);
            return had.then_some(message);
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.current.data.push('\n');
                }
                self.current.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.current.event = Some(value.to_owned()),
            "id" => self.current.id = Some(value.to_owned()),
            _ => {} // `retry:` and unknown fields
        }
        None
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn msg(id: Option<&str>, event: Option<&str>, data: &str) -> Message {
        Message {
            id: id.map(str::to_owned),
            event: event.map(str::to_owned),
            data: data.to_owned(),
        }
    }

    #[test]
    fn sse_messages_split_anywhere_in_the_bytes() {
        let stream = b": keep-alive\n\nid: 0\ndata: {\"a\":1}\n\nevent: pending\ndata: {}\n\n\
                       id:7\ndata:x\ndata: y\n\n";
        let want = vec![
            msg(Some("0"), None, "{\"a\":1}"),
            msg(None, Some("pending"), "{}"),
            msg(Some("7"), None, "x\ny"),
        ];
        // Whole, and cut at every byte.
        assert_eq!(Sse::default().push(stream).unwrap(), want);
        for cut in 0..stream.len() {
            let mut sse = Sse::default();
            let mut got = sse.push(&stream[..cut]).unwrap();
            got.extend(sse.push(&stream[cut..]).unwrap());
            assert_eq!(got, want, "cut at {cut}");
        }
    }

    #[test]
    fn sse_line_endings_comments_and_empty_messages() {
        let mut sse = Sse::default();
        // CRLF and CR end lines; a message without data is dropped; unknown fields ignored.
        let got = sse
            .push(
                b"id: 1\r\ndata: a\r\n\r\nevent: x\n\nretry: 5\rdata\r\rfoo: bar\ndata: \xc3\xa9\n",
            )
            .unwrap();
        assert_eq!(got, vec![msg(Some("1"), None, "a"), msg(None, None, "")]);
        // Not dispatched until its blank line.
        assert_eq!(sse.push(b"\n").unwrap(), vec![msg(None, None, "é")]);
        assert!(Sse::default().push(b"data: \xff\n").is_err());
    }

    #[test]
    fn the_token_comes_from_the_url_then_the_environment_then_serve_json() {
        let home = tempfile::tempdir().unwrap();
        let (base, token) = locate(
            "http://127.0.0.1:7878/?token=abc",
            home.path(),
            Some("env".into()),
        )
        .unwrap();
        assert_eq!(
            (base.as_str(), token.as_str()),
            ("http://127.0.0.1:7878/", "abc")
        );
        let (_, token) = locate("http://127.0.0.1:7878", home.path(), Some("env".into())).unwrap();
        assert_eq!(token, "env");
        let e = locate("http://127.0.0.1:7878", home.path(), None).unwrap_err();
        let e = format!("{e:#}");
        assert!(
            e.contains("no token for the keel server at http://127.0.0.1:7878")
                && e.contains("KEEL_SERVE_TOKEN")
                && e.contains("serve.json"),
            "{e}"
        );
        std::fs::write(
            home.path().join("serve.json"),
            r#"{"url": "http://127.0.0.1:7878/?token=saved", "token": "saved", "pid": 1}"#,
        )
        .unwrap();
        let (_, token) = locate("http://127.0.0.1:7878/", home.path(), None).unwrap();
        assert_eq!(token, "saved");
        let e = locate("http://127.0.0.1:9999", home.path(), None).unwrap_err();
        assert!(
            format!("{e:#}").contains("another server's (http://127.0.0.1:7878)"),
            "{e:#}"
        );
        assert!(locate("127.0.0.1:7878", home.path(), None).is_err());
        assert!(locate("ftp://127.0.0.1:7878", home.path(), None).is_err());
    }

    #[test]
    fn the_servers_json_error_is_read() {
        assert_eq!(
            error_of(r#"{"error": {"code": "unauthorized", "message": "no token"}}"#),
            (Some("unauthorized".into()), Some("no token".into()))
        );
        assert_eq!(error_of("<html>"), (None, None));
    }
}
