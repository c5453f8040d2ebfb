//! `keel attach [SESSION] [--server URL]`: the terminal UI (keel-tui) on a session of a running
//! `keel serve` (docs/serve.md, "keel attach"). keel-tui's remote driver says which route does
//! what; this is its HTTP client ([`keel_tui::ServerLink`]), the one `keel run --server` uses
//! (`serve_client`).

use super::Ctx;
use super::serve_client::{Refused, Server, Sse};
use super::source::{Say, Source};
use anyhow::{Context, Result, anyhow, bail};
use keel_host::ModelSource;
use keel_protocol::sync::Locked;
use keel_tui::StreamError;
use reqwest::header;
use serde_json::Value;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

/// keel-tui's futures (`futures::future::BoxFuture<T>`).
type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'static>>;

/// `keel attach`.
pub fn run(ctx: &Ctx, args: crate::cli::AttachArgs, alt_screen: bool) -> Result<ExitCode> {
    super::run::remote::refuse_local_flags(&ctx.common)?;
    if !super::tui::is_interactive() {
        bail!(
            "keel attach needs a terminal (stdin and stdout); use `keel run --server URL` in a script"
        );
    }
    let url = match args.server {
        Some(url) => url,
        None => saved_url(&ctx.home)?,
    };
    let server = Server::new(ctx, &url)?;
    let session = match args.session {
        Some(id) => Some(id),
        None => super::run::runtime()?.block_on(newest_here(&server, &ctx.cwd))?,
    };
    let flags = ctx.flags()?;
    let source = Source::new(ctx, flags, ModelSource::Configured, Say::Nothing);
    let link: Arc<dyn keel_tui::ServerLink> = Arc::new(Link {
        server: Arc::new(Mutex::new(server)),
        home: ctx.home.clone(),
    });
    keel_tui::attach(
        &source,
        keel_tui::Remote { link, session },
        keel_tui::Options {
            alternate_screen: alt_screen,
            ..Default::default()
        },
    )
    .map_err(|e| anyhow!(e))?;
    Ok(ExitCode::SUCCESS)
}

/// The URL of the running server, from `$KEEL_HOME/serve.json`.
fn saved_url(home: &std::path::Path) -> Result<String> {
    let state = home.join("serve.json");
    let text = std::fs::read_to_string(&state).with_context(|| {
        format!(
            "no --server URL and no running keel serve here ({} cannot be read): start \
             `keel serve`, or give the URL it printed",
            state.display()
        )
    })?;
    let saved: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON", state.display()))?;
    saved["url"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("{} names no url: give --server URL", state.display()))
}

/// The newest session of `cwd` the server lists (`None`: none, a new one is made).
async fn newest_here(server: &Server, cwd: &std::path::Path) -> Result<Option<String>> {
    let request = server.http.get(server.url("/api/v1/sessions")?);
    let text = server.send(request).await?.text().await?;
    let listed: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} listed sessions that are not JSON", server.shown()))?;
    let here = cwd.to_string_lossy();
    Ok(listed["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["cwd"].as_str() == Some(here.as_ref()))
        .and_then(|s| s["id"].as_str())
        .map(str::to_owned))
}

/// keel-tui's link to the server. A server started again makes a new token: a request that
/// fails while `$KEEL_HOME/serve.json` names the same server with another token is tried once
/// more with that one (so an attached terminal follows its server through a restart).
struct Link {
    server: Arc<Mutex<Server>>,
    home: PathBuf,
}

fn said(e: anyhow::Error) -> String {
    format!("{e:#}")
}

/// The server as it is now (its token may have been renewed).
fn current(server: &Mutex<Server>) -> Server {
    server.locked().clone()
}

/// After a failed request: take the token `serve.json` names for the same server, when it is
/// another one; whether it was taken (the request is then worth trying again).
fn renew(server: &Mutex<Server>, home: &std::path::Path) -> bool {
    let mut server = server.locked();
    match server.saved_token(home) {
        Some(token) if token != server.token => {
            server.token = token;
            true
        }
        _ => false,
    }
}

impl Link {
    /// Run `call` on the server; once more with a renewed token when it fails and
    /// `serve.json` has one.
    fn retried<T, F, Fut>(&self, call: F) -> BoxFuture<Result<T, String>>
    where
        T: Send + 'static,
        F: Fn(Server) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<T, String>> + Send + 'static,
    {
        let (server, home) = (self.server.clone(), self.home.clone());
        Box::pin(async move {
            match call(current(&server)).await {
                Err(e) if renew(&server, &home) => call(current(&server)).await.map_err(|_| e),
                done => done,
            }
        })
    }
}

impl keel_tui::ServerLink for Link {
    fn get(&self, path: &str) -> BoxFuture<Result<Value, String>> {
        let path = path.to_owned();
        self.retried(move |server| {
            let path = path.clone();
            async move {
                let request = server.http.get(server.url(&path).map_err(said)?);
                let response = server.send(request).await.map_err(said)?;
                let text = response.text().await.map_err(|e| e.to_string())?;
                serde_json::from_str(&text).map_err(|e| format!("{path}: not JSON ({e})"))
            }
        })
    }

    fn post(&self, path: &str, body: Value) -> BoxFuture<Result<Value, String>> {
        let path = path.to_owned();
        self.retried(move |server| {
            let (path, body) = (path.clone(), body.clone());
            async move { server.post(&path, &body).await.map_err(said) }
        })
    }

    fn stream(
        &self,
        path: &str,
        last: Option<u64>,
        mut sink: keel_tui::StreamSink,
    ) -> BoxFuture<Result<(), StreamError>> {
        let (shared, home) = (self.server.clone(), self.home.clone());
        let path = path.to_owned();
        Box::pin(async move {
            let open = |server: Server| {
                let path = path.clone();
                async move {
                    let mut request = server
                        .http
                        .get(server.url(&path)?)
                        .header(header::ACCEPT, "text/event-stream");
                    if let Some(last) = last {
                        request = request.header("Last-Event-ID", last.to_string());
                    }
                    server.send(request).await
                }
            };
            let opened = match open(current(&shared)).await {
                Err(e) if renew(&shared, &home) => open(current(&shared)).await.map_err(|_| e),
                opened => opened,
            };
            let mut response = opened.map_err(|e| {
                let beyond = e
                    .downcast_ref::<Refused>()
                    .is_some_and(|r| r.code == "beyond_log");
                if beyond {
                    StreamError::BeyondLog(said(e))
                } else {
                    StreamError::Broken(said(e))
                }
            })?;
            let shown = current(&shared).shown().to_owned();
            let mut sse = Sse::default();
            while let Some(chunk) = response.chunk().await.map_err(|e| {
                StreamError::Broken(format!(
                    "the event stream from the keel server at {shown} broke: {e}"
                ))
            })? {
                for m in sse.push(&chunk).map_err(|e| StreamError::Broken(said(e)))? {
                    sink(keel_tui::StreamMessage {
                        id: m.id,
                        event: m.event,
                        data: m.data,
                    });
                }
            }
            Ok(())
        })
    }

    fn shown(&self) -> String {
        current(&self.server).shown().to_owned()
    }
}
