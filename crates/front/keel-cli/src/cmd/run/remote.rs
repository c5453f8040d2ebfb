//! `keel run --server URL`: a headless run through a running `keel serve` (docs/serve.md).
//!
//! The session is created on the server in this working directory (`POST /api/v1/sessions`,
//! with the prompt and `--model`; with `--image`, the prompt goes on the message route with
//! the images as `data:` URLs), then its event stream (`GET …/events`, Server-Sent Events,
//! parsed by [`Sse`]) is read to the turn's end. Each event is the log's own JSON: it is read
//! back into a [`SessionEvent`] and fed to the same [`Progress`] observers a local run installs
//! on its agent, so progress on stderr and `--json` on stdout are printed by the same code, and
//! the run's end is said by the same [`super::drive::say_end`]. Ctrl-C posts `…/cancel` (the
//! session stays on the server); a second Ctrl-C exits at once (130), as a local run does.
//!
//! An approval or a question the server puts to its clients (the named SSE messages `pending`
//! and `request`) is not answered here: a line on stderr says it waits for another client.

use super::drive::{runtime, say_end};
use crate::cli::{Common, RunArgs};
use crate::cmd::Ctx;
use crate::cmd::progress::{Output, Progress};
use anyhow::{Context, Result, anyhow, bail};
use keel_agent::{HookRegistry, TurnOutcome};
use keel_protocol::{EventBody, LogRecord, SessionEvent};
use reqwest::{StatusCode, Url, header};
use serde_json::{Value, json};
use std::io::Write;
use std::process::ExitCode;

/// The variable naming a PEM certificate to trust for an `https://` server (its own
/// self-signed certificate, or its CA's).
const SERVE_CA_ENV: &str = "KEEL_SERVE_CA";

/// `keel run --server URL`.
pub(in crate::cmd) fn run(ctx: &Ctx, args: RunArgs, url: &str) -> Result<ExitCode> {
    refuse_local_flags(&ctx.common)?;
    let prompt = super::read_prompt(args.prompt)?;
    let images = super::super::images::read(&ctx.cwd, &args.image)?
        .iter()
        .map(|i| i.data_url())
        .collect::<Vec<_>>();
    let server = Server::new(ctx, url)?;
    let progress = Progress::new(Output::from_json_flag(args.json));
    runtime()?.block_on(drive(ctx, &server, &progress, &prompt, images))
}

/// The global flags that configure the agent a local run builds: through a server the session
/// runs under the server's own settings, so each is refused, named (not silently dropped).
fn refuse_local_flags(common: &Common) -> Result<()> {
    let given: [(&str, bool); 17] = [
        ("--provider", common.provider.is_some()),
        ("--base-url", common.base_url.is_some()),
        ("--api-key-env", common.api_key_env.is_some()),
        ("--profile", common.profile.is_some()),
        ("--config", common.config_file.is_some()),
        ("-c", !common.overrides.is_empty()),
        ("--sandbox", common.sandbox.is_some()),
        ("--approval", common.approval.is_some()),
        ("--context-window", common.context_window.is_some()),
        ("--max-output", common.max_output.is_some()),
        ("--provenance", common.provenance),
        ("--control", common.control.is_some()),
        ("--memory", common.memory),
        ("--context", common.context.is_some()),
        ("--delegate", common.delegate.is_some()),
        // DSH_TOOLS_MODE in the environment sets it too: only the flag itself is refused.
        (
            "--tools-mode",
            common.tools_mode.is_some() && std::env::var_os("DSH_TOOLS_MODE").is_none(),
        ),
        ("--preset", common.preset.is_some()),
    ];
    let trust = [
        ("--trust-project", common.trust_project),
        ("--project-trust", common.project_trust.is_some()),
    ];
    if let Some((flag, _)) = given.iter().chain(trust.iter()).find(|(_, on)| *on) {
        bail!(
            "{flag} cannot be used with --server: a session on the server runs under the \
             server's own configuration, sandbox, approval policy and workspace trust (give \
             {flag} to `keel serve`, or run without --server)"
        );
    }
    Ok(())
}

/// A `keel serve` this run talks to.
struct Server {
    /// `http://HOST:PORT/`, without the token.
    base: Url,
    token: String,
    http: reqwest::Client,
}

impl Server {
    fn new(ctx: &Ctx, url: &str) -> Result<Server> {
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

    /// The server as people name it: `http://HOST:PORT`.
    fn shown(&self) -> &str {
        self.base.as_str().trim_end_matches('/')
    }

    fn url(&self, path: &str) -> Result<Url> {
        self.base
            .join(path)
            .with_context(|| format!("bad path {path}"))
    }

    /// Send `request` with the token; a refused connection or an error answer (the server's
    /// `{"error": {"code", "message"}}`) is an error naming the server.
    async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response> {
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
        bail!(
            "the keel server at {} answered {} {}: {}{hint}",
            self.shown(),
            status.as_u16(),
            code.unwrap_or_else(|| status.canonical_reason().unwrap_or("error").to_owned()),
            message.unwrap_or(body),
        )
    }

    /// `POST path` with a JSON body; the JSON answer.
    async fn post(&self, path: &str, body: &Value) -> Result<Value> {
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
    let state = home.join("serve.json");
    let why = match std::fs::read_to_string(&state) {
        Ok(text) => match serde_json::from_str::<Value>(&text) {
            Ok(saved) => {
                let same = saved["url"]
                    .as_str()
                    .and_then(|u| Url::parse(u).ok())
                    .is_some_and(|u| {
                        u.host_str() == base.host_str()
                            && u.port_or_known_default() == base.port_or_known_default()
                    });
                match (same, saved["token"].as_str()) {
                    (true, Some(token)) if !token.is_empty() => {
                        return Ok((base, token.to_owned()));
                    }
                    (true, _) => format!("{} has no token", state.display()),
                    (false, _) => format!(
                        "{} is another server's ({})",
                        state.display(),
                        saved["url"]
                            .as_str()
                            .map(|u| u.split("/?").next().unwrap_or(u))
                            .unwrap_or("no url")
                    ),
                }
            }
            Err(e) => format!("{} is not valid JSON: {e}", state.display()),
        },
        Err(e) => format!("{}: {e}", state.display()),
    };
    bail!(
        "no token for the keel server at {}: give the URL it printed (…/?token=TOKEN), or set \
         KEEL_SERVE_TOKEN (and {why})",
        base.as_str().trim_end_matches('/')
    )
}

/// The code and the message of the server's `{"error": {"code", "message"}}`.
fn error_of(body: &str) -> (Option<String>, Option<String>) {
    let Ok(v) = serde_json::from_str::<Value>(body) else {
        return (None, None);
    };
    let field = |k: &str| v["error"][k].as_str().map(str::to_owned);
    (field("code"), field("message"))
}

/// Create the session, stream it to its turn's end, say the end.
async fn drive(
    ctx: &Ctx,
    server: &Server,
    progress: &Progress,
    prompt: &str,
    images: Vec<String>,
) -> Result<ExitCode> {
    let cwd = ctx.cwd.to_string_lossy();
    let mut create = json!({ "cwd": cwd });
    if images.is_empty() {
        create["prompt"] = json!(prompt);
    }
    if let Some(model) = &ctx.common.model {
        create["model"] = json!(model);
    }
    let cancel = Cancel::install(server)?;
    let created = server.post("/api/v1/sessions", &create).await?;
    let id = created["id"]
        .as_str()
        .ok_or_else(|| {
            anyhow!(
                "the keel server at {} created no session id",
                server.shown()
            )
        })?
        .to_owned();
    cancel.session(&id);
    if !images.is_empty() {
        server
            .post(
                &format!("/api/v1/sessions/{id}/messages"),
                &json!({ "text": prompt, "delivery": "queue", "images": images }),
            )
            .await?;
    }
    if progress.output() == Output::Json {
        json_header(ctx, progress, &id)?;
    }
    let outcome = stream(server, progress, &id).await;
    cancel.abort();
    let outcome = outcome?;
    let place = format!("on {}", server.shown());
    say_end(progress, outcome.as_ref(), &id, &place)
}

/// With `--json`, the session's header first, as a local run prints it: read from the session
/// file when the server keeps its sessions in this `$KEEL_HOME` (its header is on disk before
/// the server answers the creation).
fn json_header(ctx: &Ctx, progress: &Progress, id: &str) -> Result<()> {
    let header = ctx
        .store
        .resolve(id, &ctx.cwd)
        .ok()
        .and_then(|path| keel_session::Store::load(&path).ok())
        .map(|loaded| loaded.session.header().clone());
    match header {
        Some(header) => progress.header(&header)?,
        None => writeln!(
            std::io::stderr(),
            "keel: session {id} is not in {} (the server keeps its sessions in another \
             KEEL_HOME): the JSON lines start with its first event, without its header",
            ctx.home.display()
        )?,
    }
    Ok(())
}

/// Ctrl-C while the run lasts: the first cancels the turn on the server (before the session
/// exists, it exits at once: there is nothing to cancel yet), the second exits (130).
struct Cancel {
    task: tokio::task::JoinHandle<()>,
    session: tokio::sync::watch::Sender<Option<String>>,
}

impl Cancel {
    /// Listening from now on (SIGINT is caught from this call, not from the task's start).
    fn install(server: &Server) -> Result<Cancel> {
        let mut interrupts =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
                .context("cannot listen for Ctrl-C")?;
        let http = server.http.clone();
        let base = server.base.clone();
        let token = server.token.clone();
        let shown = server.shown().to_owned();
        let (session, known) = tokio::sync::watch::channel(None::<String>);
        let task = tokio::spawn(async move {
            let mut presses = 0;
            while interrupts.recv().await.is_some() {
                presses += 1;
                let id = known.borrow().clone();
                let Some(id) = id.filter(|_| presses == 1) else {
                    std::process::exit(130);
                };
                let _ = writeln!(
                    std::io::stderr(),
                    "\nkeel: cancelling the turn (Ctrl-C again to exit)"
                );
                let failed = match base.join(&format!("api/v1/sessions/{id}/cancel")) {
                    Ok(url) => match http.post(url).bearer_auth(&token).send().await {
                        Ok(r) if r.status().is_success() => None,
                        Ok(r) => Some(format!("it answered {}", r.status())),
                        Err(e) => Some(e.to_string()),
                    },
                    Err(e) => Some(e.to_string()),
                };
                if let Some(why) = failed {
                    let _ = writeln!(
                        std::io::stderr(),
                        "keel: cannot cancel the turn on the keel server at {shown}: {why}"
                    );
                }
            }
        });
        Ok(Cancel { task, session })
    }

    /// The session a Ctrl-C cancels the turn of.
    fn session(&self, id: &str) {
        self.session.send_replace(Some(id.to_owned()));
    }

    fn abort(self) {
        self.task.abort();
    }
}

/// Read session `id`'s events from its first to its first turn's end, through `progress`;
/// the turn's outcome (`None` when the stream has no turn, which it always has here).
async fn stream(server: &Server, progress: &Progress, id: &str) -> Result<Option<TurnOutcome>> {
    let mut hooks = HookRegistry::default();
    progress.install(&mut hooks);
    let request = server
        .http
        .get(server.url(&format!("/api/v1/sessions/{id}/events"))?)
        .header(header::ACCEPT, "text/event-stream");
    let mut response = server.send(request).await?;
    let mut sse = Sse::default();
    let mut final_text = String::new();
    loop {
        let chunk = response.chunk().await.with_context(|| {
            format!(
                "the event stream of session {id} from the keel server at {} broke",
                server.shown()
            )
        })?;
        let Some(chunk) = chunk else {
            bail!(
                "the keel server at {} ended the event stream of session {id} before its turn \
                 ended (the server stopped, or the session was closed)",
                server.shown()
            );
        };
        for message in sse.push(&chunk)? {
            match message.event.as_deref() {
                None | Some("message") => {
                    let event = event_of(&message.data)?;
                    hooks.session_event.notify(&event);
                    match &event.body {
                        EventBody::TurnStart(_) => final_text.clear(),
                        // The turn's answer, as the agent keeps it: the last text of a
                        // message the model finished (a cancelled one's partial is not it).
                        EventBody::AssistantMessage(m) if !m.interrupted => {
                            let text = m.message.text();
                            if !text.is_empty() {
                                final_text = text;
                            }
                        }
                        EventBody::TurnEnd(end) => {
                            return Ok(Some(TurnOutcome {
                                turn: end.turn,
                                reason: end.reason.clone(),
                                final_text,
                                handed_off: false,
                            }));
                        }
                        _ => {}
                    }
                }
                Some("pending") => {
                    let data: Value = serde_json::from_str(&message.data).unwrap_or_default();
                    for request in data["requests"].as_array().into_iter().flatten() {
                        say_request(request)?;
                    }
                }
                Some("request") => {
                    let request: Value = serde_json::from_str(&message.data).unwrap_or_default();
                    say_request(&request)?;
                }
                // `resolved`: the log says how (approval/decided, question/answered).
                Some(_) => {}
            }
        }
    }
}

/// A log event of the stream (its `data:`, the log's own JSON).
fn event_of(data: &str) -> Result<SessionEvent> {
    match keel_session::store::parse_record(data) {
        Ok(LogRecord::Event(event)) => Ok(event),
        Ok(_) => bail!("the event stream sent a record that is not an event: {data}"),
        Err(e) => Err(anyhow!(
            "the event stream sent an event keel cannot read ({e}): {data}"
        )),
    }
}

/// A request the server puts to its clients, said on stderr: this headless run does not
/// answer it; another client may.
fn say_request(request: &Value) -> Result<()> {
    let id = request["requestId"].as_str().unwrap_or("?");
    let mut err = std::io::stderr().lock();
    match request["kind"].as_str() {
        Some("question") => writeln!(
            err,
            "keel: the model's question waits for an answer from another client of the server \
             (request {id}); this run does not answer it"
        )?,
        _ => writeln!(
            err,
            "keel: {} waits for approval from another client of the server (request {id}{}); \
             this run does not answer it",
            request["tool"].as_str().unwrap_or("a tool call"),
            request["reason"]
                .as_str()
                .map(|r| format!(": {r}"))
                .unwrap_or_default(),
        )?,
    }
    Ok(())
}

/// One Server-Sent Events message.
#[derive(Debug, Default, PartialEq, Eq)]
struct Message {
    /// `id:`.
    id: Option<String>,
    /// `event:` (absent for a plain message).
    event: Option<String>,
    /// The `data:` lines, joined by newlines.
    data: String,
}

/// A Server-Sent Events parser (the WHATWG event-stream format): bytes in, whole messages out.
/// Lines end in LF, CRLF or CR; `:` lines are comments (keep-alives); a blank line dispatches
/// the message; a message with no `data:` is dropped.
#[derive(Debug, Default)]
struct Sse {
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
    fn push(&mut self, bytes: &[u8]) -> Result<Vec<Message>> {
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
