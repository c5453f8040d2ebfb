//! `keel run --server URL`: a headless run through a running `keel serve` (docs/serve.md).
//!
//! The session is created on the server in this working directory (`POST /api/v1/sessions`,
//! with the prompt and `--model`; with `--image`, the prompt goes on the message route with
//! the images as `data:` URLs), then its event stream (`GET …/events`, Server-Sent Events,
//! parsed by [`Sse`], shared with `keel attach` in `cmd/serve_client.rs`) is read to the turn's end. Each event is the log's own JSON: it is read
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
use crate::cmd::serve_client::{Server, Sse, event_of};
use anyhow::{Context, Result, anyhow, bail};
use keel_agent::{HookRegistry, TurnOutcome};
use keel_protocol::EventBody;
use reqwest::header;
use serde_json::{Value, json};
use std::io::Write;
use std::process::ExitCode;

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
pub(in crate::cmd) fn refuse_local_flags(common: &Common) -> Result<()> {
    let given: [(&str, bool); 18] = [
        ("--provider", common.provider.is_some()),
        ("--api", common.api.is_some()),
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
