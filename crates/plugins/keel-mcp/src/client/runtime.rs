//! The MCP runtime: one small tokio runtime on its own thread that owns every server
//! connection of an agent. Connections must outlive whichever runtime a front end drives the
//! agent on (`keel run` builds the agent before it starts its own), and starting them must be
//! possible from the synchronous plugin install; calls from the agent's runtime hand their work
//! here and await it. Dropping the runtime ends every connection and kills the servers' process
//! trees (the subprocess service's process-group guard).

use keel_protocol::sync::Locked;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The runtime (see the module docs).
pub struct McpRuntime {
    handle: Handle,
    stop: Mutex<Option<oneshot::Sender<()>>>,
}

impl std::fmt::Debug for McpRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("McpRuntime")
    }
}

impl McpRuntime {
    /// Start the runtime thread.
    pub fn start() -> std::io::Result<McpRuntime> {
        let (handle_tx, handle_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("keel-mcp".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("keel-mcp-worker")
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = handle_tx.send(Err(e));
                        return;
                    }
                };
                let _ = handle_tx.send(Ok(rt.handle().clone()));
                rt.block_on(async {
                    let _ = stop_rx.await;
                });
                rt.shutdown_timeout(Duration::from_secs(2));
            })?;
        let handle = handle_rx
            .recv()
            .map_err(|_| std::io::Error::other("the MCP runtime thread ended at start"))??;
        Ok(McpRuntime {
            handle,
            stop: Mutex::new(Some(stop_tx)),
        })
    }

    /// Run `future` on the runtime.
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn(future)
    }

    /// Run `future` on the runtime and wait for it from synchronous code (plugin install).
    /// Safe to call from inside another runtime's worker: this thread only waits on a channel.
    pub fn wait<F>(&self, future: F) -> Option<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::channel();
        self.handle.spawn(async move {
            let _ = tx.send(future.await);
        });
        rx.recv().ok()
    }
}

impl Drop for McpRuntime {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.locked().take() {
            let _ = stop.send(());
        }
    }
}
