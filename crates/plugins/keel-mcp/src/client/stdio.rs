//! A stdio server through keel's subprocess service (credential scrub with the server's `env`
//! set explicitly, own process group, the tree killed when the connection or keel goes): its
//! stdout and stdin as the byte streams the MCP transport reads and writes.

use super::server::MAX_LINE;
use keel_tools::subprocess::{
    CommandOutput, CommandSpec, OutputSink, SubprocessError, SubprocessService,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Bytes of the server's stderr kept for reports.
const STDERR_TAIL: usize = 4096;

/// A started stdio server's process.
pub(crate) struct StdioChild {
    /// Resolves when it exits (with its stderr tail).
    pub exit: JoinHandle<Result<CommandOutput, SubprocessError>>,
    /// Kills its process tree.
    pub kill: CancellationToken,
}

/// Start `command args` in `cwd`: its stdout, its stdin, the process. Must run on the MCP
/// runtime.
pub(crate) fn spawn(
    sp: &SubprocessService,
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: &Path,
    label: &str,
    oversized: Arc<AtomicBool>,
) -> (ChannelReader, ChannelWriter, StdioChild) {
    let (out_tx, out_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let (in_tx, in_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let mut spec =
        CommandSpec::new(std::iter::once(command.to_owned()).chain(args.iter().cloned()))
            .cwd(cwd)
            .stdin_stream(in_rx)
            .tee_stdout(OutputSink::new(move |b| {
                let _ = out_tx.send(b.to_vec());
            }))
            .spill(false)
            .cap(STDERR_TAIL)
            .label(format!("mcp-{label}"));
    for (k, v) in env {
        spec = spec.env(k, v);
    }
    let kill = CancellationToken::new();
    let exit = {
        let sp = sp.clone();
        let kill = kill.clone();
        tokio::spawn(async move { sp.run(spec, &kill).await })
    };
    (
        ChannelReader {
            rx: out_rx,
            buf: Vec::new(),
            pos: 0,
            line: 0,
            oversized,
        },
        ChannelWriter { tx: Some(in_tx) },
        StdioChild { exit, kill },
    )
}

/// The server's stdout as an [`AsyncRead`]. A line longer than [`MAX_LINE`] ends the stream
/// (and sets `oversized`): the transport would drop it and the call waiting for it would wait
/// out its timeout.
pub(crate) struct ChannelReader {
    rx: mpsc::UnboundedReceiver<Vec<u8>>,
    buf: Vec<u8>,
    pos: usize,
    /// Bytes of the current line handed out so far.
    line: usize,
    oversized: Arc<AtomicBool>,
}

impl AsyncRead for ChannelReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        loop {
            if self.oversized.load(Ordering::Relaxed) {
                return Poll::Ready(Ok(())); // EOF
            }
            if self.pos < self.buf.len() {
                let n = out.remaining().min(self.buf.len() - self.pos);
                let start = self.pos;
                let chunk = &self.buf[start..start + n];
                // Reads are small (the transport's buffer): checking the line the chunk
                // continues and the one it starts is enough.
                let (first, line) = match chunk.iter().position(|&b| b == b'\n') {
                    Some(i) => {
                        let last = chunk.iter().rposition(|&b| b == b'\n').unwrap_or(i);
                        (self.line + i, n - last - 1)
                    }
                    None => (self.line + n, self.line + n),
                };
                if first > MAX_LINE || line > MAX_LINE {
                    self.oversized.store(true, Ordering::Relaxed);
                    return Poll::Ready(Ok(())); // EOF
                }
                out.put_slice(chunk);
                self.line = line;
                self.pos += n;
                return Poll::Ready(Ok(()));
            }
            match self.rx.poll_recv(cx) {
                Poll::Ready(Some(chunk)) => {
                    self.buf = chunk;
                    self.pos = 0;
                }
                Poll::Ready(None) => return Poll::Ready(Ok(())), // EOF
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// The server's stdin as an [`AsyncWrite`].
pub(crate) struct ChannelWriter {
    tx: Option<mpsc::UnboundedSender<Vec<u8>>>,
}

impl AsyncWrite for ChannelWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let sent = self
            .tx
            .as_ref()
            .is_some_and(|tx| tx.send(buf.to_vec()).is_ok());
        Poll::Ready(if sent {
            Ok(buf.len())
        } else {
            Err(std::io::ErrorKind::BrokenPipe.into())
        })
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.tx = None; // closes the server's stdin
        Poll::Ready(Ok(()))
    }
}
