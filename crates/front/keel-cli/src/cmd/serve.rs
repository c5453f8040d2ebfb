//! `keel serve`: sessions as a local HTTP service ([`keel_serve`]), with the binary's agent
//! source ([`super::source`]): each session's agent is built like `keel run`'s in the
//! workspace the request names, or resumed like `keel resume`'s. The first stdout line is the
//! URL with the token; the same URL, token and pid go to `$KEEL_HOME/serve.json` (mode 0600),
//! removed when the server stops. Every diagnostic goes to stderr.

use super::Ctx;
use super::source::{Say, Source};
use crate::cli::ServeArgs;
use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// `keel serve`.
pub fn run(ctx: &Ctx, args: ServeArgs) -> Result<ExitCode> {
    let flags = ctx.flags()?;
    let model = super::run::server_model(ctx, &flags, args.script.as_deref())?;
    let source = Source::new(ctx, flags, model, Say::NotesAndTrust).origin("serve");
    if let Some(bad) = args
        .trusted_hosts
        .iter()
        .find(|h| keel_serve::security::trusted_host(h).is_none())
    {
        return Err(keel_serve::ServeError::TrustedHost(bad.clone()).into());
    }
    raise_open_files_limit();
    let rt = super::run::runtime()?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(keel_serve::Tls::from_pem_files(cert, key)?),
        _ => None,
    };
    let bound = rt.block_on(keel_serve::Bound::bind(keel_serve::Listen {
        addr: args.listen,
        tls,
        insecure: args.insecure_no_tls,
    }))?;
    if args.insecure_no_tls && !bound.local_addr().ip().is_loopback() {
        let _ = writeln!(
            std::io::stderr(),
            "keel: warning: serving plain HTTP on {}: the token and every session cross the \
             network in clear (--insecure-no-tls)",
            bound.local_addr()
        );
    }
    // The signals are caught from here on: a SIGTERM right after the URL is printed stops the
    // server cleanly instead of killing it with serve.json left behind.
    let stop = {
        let _runtime = rt.enter();
        stop_signal(args.private)
    };
    let token = keel_serve::new_token();
    let url = bound.url(&token);
    let state = ctx.home.join("serve.json");
    if !args.private {
        write_state(&state, &url, &token)?;
    }
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "keel serve: {url}").context("cannot write to stdout")?;
        out.flush().context("cannot write to stdout")?;
    }
    let _ = writeln!(
        std::io::stderr(),
        "keel: serving sessions on {}://{} (API /api/v1; state in {})",
        bound.scheme(),
        bound.local_addr(),
        if args.private {
            "no file: --private".into()
        } else {
            state.display().to_string()
        }
    );
    let served = rt.block_on(keel_serve::serve(
        bound,
        source,
        ctx.store.clone(),
        keel_serve::Access {
            token,
            trusted_hosts: args.trusted_hosts,
        },
        stop,
    ));
    rt.shutdown_timeout(Duration::from_secs(1));
    if !args.private {
        let _ = std::fs::remove_file(&state);
    }
    served?;
    Ok(ExitCode::SUCCESS)
}

/// Write `serve.json` readable by its owner only (created so: the token is never readable by
/// others, even for a moment).
fn write_state(path: &Path, url: &str, token: &str) -> Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(&serde_json::json!({
        "url": url,
        "token": token,
        "pid": std::process::id(),
    }))?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    // An older file keeps its mode through `open`: make it the owner's only.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot restrict {}", path.display()))?;
    file.write_all(format!("{text}\n").as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Raise the soft limit of open files to the hard one (at most 65,536): each client's connection
/// is a descriptor, and a common default soft limit (1,024) is too few for a server.
fn raise_open_files_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit(2) writes the limit into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    let want = limit.rlim_max.min(65_536);
    if limit.rlim_cur < want {
        limit.rlim_cur = want;
        // SAFETY: setrlimit(2) reads the struct we own; failing leaves the limit as it was.
        let _ = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
    }
}

/// Ctrl-C or SIGTERM, or with `stdin_eof` the end of stdin. Called inside the runtime: the
/// handlers are installed at once, not when the future is first polled.
fn stop_signal(stdin_eof: bool) -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let term = signal(SignalKind::terminate()).ok();
    let int = signal(SignalKind::interrupt()).ok();
    let eof = stdin_eof.then(|| {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
            let _ = tx.send(());
        });
        rx
    });
    async move {
        let wait = |s: Option<tokio::signal::unix::Signal>| async move {
            match s {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        let eof = async move {
            match eof {
                Some(rx) => {
                    let _ = rx.await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = wait(term) => {}
            () = wait(int) => {}
            () = eof => {}
        }
    }
}
