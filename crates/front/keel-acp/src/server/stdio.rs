//! The stdio transport: `keel acp` reads requests from stdin and writes answers and updates to
//! stdout, a thread each, the writer flushing once its queue is empty.

use super::{err, params, serve};
use agent_client_protocol::Error;
use agent_client_protocol::v1::schema::ErrorCode;
use keel_host::AgentSource;

/// Serve ACP on stdin/stdout until the client closes stdin. Must run inside a multi-threaded
/// tokio runtime.
///
/// Lines are read and written by a thread each: the writer writes every line queued and
/// flushes once the queue is empty, instead of a flush (a thread hand-off) per message, which
/// dominated the cost of a streamed update.
pub async fn serve_stdio<S: AgentSource + 'static>(source: S) -> Result<(), Error> {
    let (out_tx, out_rx) = std::sync::mpsc::channel::<String>();
    let writer = std::thread::Builder::new()
        .name("keel-acp-stdout".into())
        .spawn(move || write_lines(&out_rx))
        .map_err(|e| {
            err(
                ErrorCode::InternalError,
                format!("keel: cannot start the stdout writer: {e}"),
            )
        })?;
    let (in_tx, in_rx) = tokio::sync::mpsc::unbounded_channel::<std::io::Result<String>>();
    let refusals = out_tx.clone();
    std::thread::Builder::new()
        .name("keel-acp-stdin".into())
        .spawn(move || {
            use std::io::BufRead;
            // Until an `initialize` with a usable version arrives, one with a version of the
            // wrong type is answered here, naming what was sent (the SDK's answer does not).
            let mut initialized = false;
            for line in std::io::stdin().lock().lines() {
                if let Ok(text) = &line
                    && !initialized
                {
                    match params::check_initialize(text) {
                        params::Initialize::Other => {}
                        params::Initialize::Valid => initialized = true,
                        params::Initialize::Refused(answer) => {
                            let _ = refusals.send(answer);
                            continue;
                        }
                    }
                }
                let stop = line.is_err();
                if in_tx.send(line).is_err() || stop {
                    break;
                }
            }
        })
        .map_err(|e| {
            err(
                ErrorCode::InternalError,
                format!("keel: cannot start the stdin reader: {e}"),
            )
        })?;
    let outgoing = futures::sink::unfold(out_tx, |tx, line: String| async move {
        tx.send(line)
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "stdout is closed"))?;
        Ok::<_, std::io::Error>(tx)
    });
    let incoming = futures::stream::unfold(in_rx, |mut rx| async move {
        rx.recv().await.map(|line| (line, rx))
    });
    let served = serve(
        source,
        agent_client_protocol::Lines::new(Box::pin(outgoing), Box::pin(incoming)),
    )
    .await;
    // The connection (and with it the sending side) is gone: the writer drains and ends.
    let _ = tokio::task::spawn_blocking(move || writer.join()).await;
    served
}

/// Write each line to stdout, flushing whenever nothing more is queued.
fn write_lines(lines: &std::sync::mpsc::Receiver<String>) {
    use std::io::Write;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, stdout.lock());
    while let Ok(line) = lines.recv() {
        let mut next = Some(line);
        while let Some(line) = next {
            if out.write_all(line.as_bytes()).is_err() || out.write_all(b"\n").is_err() {
                return;
            }
            next = lines.try_recv().ok();
        }
        if out.flush().is_err() {
            return;
        }
    }
}
