//! `keel web [DIR]`: the web app (docs/web-app.md) in the person's browser. The server is the
//! running `keel serve` that `$KEEL_HOME/serve.json` names when it answers; else one started
//! now, in the background, with this command's global flags (it outlives this command: the
//! sessions live there). The browser opens the server's URL with its token, on the app's
//! new-session form for DIR; the URL is printed as well.

use super::Ctx;
use super::serve_client::Server;
use crate::cli::WebArgs;
use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

/// How long a server started here gets to write its `serve.json`.
const START_DEADLINE: Duration = Duration::from_secs(20);

/// `keel web`.
pub fn run(ctx: &Ctx, args: &WebArgs) -> Result<ExitCode> {
    let dir = match &args.dir {
        Some(dir) => ctx.cwd.join(dir),
        None => ctx.cwd.clone(),
    };
    let dir = dir
        .canonicalize()
        .with_context(|| format!("{}: no such directory", dir.display()))?;
    if !dir.is_dir() {
        bail!("{}: not a directory", dir.display());
    }
    let url = match running(ctx)? {
        Some(url) => url,
        None => start(ctx, args)?,
    };
    let page = format!("{url}#/new?cwd={}", encode(&dir.to_string_lossy()));
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "keel web: {page}").context("cannot write to stdout")?;
        out.flush().context("cannot write to stdout")?;
    }
    if !args.no_open
        && let Err(why) = open(&page)
    {
        let _ = writeln!(
            std::io::stderr(),
            "keel: could not open a browser ({why}): open the URL above"
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The URL (with its token) of the server `serve.json` names, when it answers.
fn running(ctx: &Ctx) -> Result<Option<String>> {
    let Some(url) = saved_url(&ctx.home, None) else {
        return Ok(None);
    };
    let server = Server::new(ctx, &url)?;
    let rt = super::run::runtime()?;
    let answered = rt.block_on(async {
        let request = server.http.get(server.url("/api/v1/sessions")?);
        tokio::time::timeout(Duration::from_secs(3), server.send(request))
            .await
            .map_err(|_| anyhow::anyhow!("no answer in 3 s"))?
    });
    Ok(answered.is_ok().then_some(url))
}

/// `serve.json`'s URL (with the token), when it is there and (with `pid`) that process's.
fn saved_url(home: &Path, pid: Option<u32>) -> Option<String> {
    let text = std::fs::read_to_string(home.join("serve.json")).ok()?;
    let saved: Value = serde_json::from_str(&text).ok()?;
    if let Some(pid) = pid
        && saved["pid"].as_u64() != Some(u64::from(pid))
    {
        return None;
    }
    saved["url"].as_str().map(str::to_owned)
}

/// Start `keel serve` in the background (its own process group, its output appended to
/// `$KEEL_HOME/serve.log`) and wait until its `serve.json` names it.
fn start(ctx: &Ctx, args: &WebArgs) -> Result<String> {
    let exe = std::env::current_exe().context("cannot find the keel executable")?;
    std::fs::create_dir_all(&ctx.home)
        .with_context(|| format!("cannot create {}", ctx.home.display()))?;
    let log_path = ctx.home.join("serve.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("cannot open {}", log_path.display()))?;
    let mut child = std::process::Command::new(exe)
        .args(serve_argv(args))
        .stdin(Stdio::null())
        .stdout(log.try_clone().context("cannot open the server's log")?)
        .stderr(log)
        // Not in the terminal's process group: a Ctrl-C there does not stop it.
        .process_group(0)
        .spawn()
        .context("cannot start keel serve")?;
    let pid = child.id();
    let deadline = Instant::now() + START_DEADLINE;
    loop {
        if let Some(url) = saved_url(&ctx.home, Some(pid)) {
            let _ = writeln!(
                std::io::stderr(),
                "keel: started keel serve (pid {pid}; log {}); it keeps running after this",
                log_path.display()
            );
            return Ok(url);
        }
        if let Ok(Some(status)) = child.try_wait() {
            bail!(
                "keel serve stopped at once ({status}): {}",
                tail(&log_path).unwrap_or_default()
            );
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            bail!(
                "keel serve did not start in {} s: {}",
                START_DEADLINE.as_secs(),
                tail(&log_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The server's arguments: this command's global flags (those before `web`, and those after
/// it that are not `web`'s own), then `serve --listen ADDR`.
fn serve_argv(args: &WebArgs) -> Vec<OsString> {
    let given: Vec<OsString> = std::env::args_os().skip(1).collect();
    let at = given.iter().position(|a| a == "web").unwrap_or(given.len());
    let mut out: Vec<OsString> = given[..at].to_vec();
    let dir = args.dir.as_ref().map(|d| d.as_os_str().to_owned());
    let mut dir_seen = false;
    let mut rest = given.iter().skip(at + 1);
    while let Some(arg) = rest.next() {
        let text = arg.to_string_lossy();
        if text == "--no-open" || text.starts_with("--listen=") {
            continue;
        }
        if text == "--listen" {
            rest.next();
            continue;
        }
        if !dir_seen && Some(arg) == dir.as_ref() {
            dir_seen = true;
            continue;
        }
        out.push(arg.clone());
    }
    out.extend([
        "serve".into(),
        "--listen".into(),
        args.listen.to_string().into(),
    ]);
    out
}

/// The last lines of the server's log, for an error.
fn tail(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let lines: Vec<&str> = text.lines().rev().take(5).collect();
    Some(lines.into_iter().rev().collect::<Vec<_>>().join("\n"))
}

/// Open `url` in the person's browser: `$BROWSER URL`, else the system's opener.
fn open(url: &str) -> Result<()> {
    let program = match std::env::var_os("BROWSER").filter(|b| !b.is_empty()) {
        Some(browser) => browser,
        None if cfg!(target_os = "macos") => "open".into(),
        None => "xdg-open".into(),
    };
    std::process::Command::new(&program)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("{}", program.to_string_lossy()))?;
    Ok(())
}

/// What a URL's fragment keeps as it is: letters, digits, `-_.~` and `/` (a path stays
/// readable); everything else is percent-encoded.
const KEPT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

fn encode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, KEPT).to_string()
}
