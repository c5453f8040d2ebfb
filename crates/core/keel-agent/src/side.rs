//! Side work: short tasks an agent's hooks start on its behalf outside the loop (the session
//! title request, [`crate::titles`]), which must neither block nor fail a turn.
//!
//! A hook starts one with [`crate::AgentHandle::spawn_side_work`] on the running async
//! runtime; it runs beside the turns. A long-lived front end (the terminal UI, ACP, `keel
//! serve`) lets it finish on its own; a headless one that exits after its turns (`keel run`)
//! awaits [`Agent::settle_side_work`] first, with a bound, so that what the work appends to the
//! log is not lost with the process.

use crate::agent::Agent;
use keel_protocol::sync::Locked;
use std::future::Future;
use std::time::Duration;
use tokio::task::JoinHandle;

/// The side work of one agent still running (finished handles are dropped as new work comes).
#[derive(Default)]
pub(crate) struct SideWork(std::sync::Mutex<Vec<JoinHandle<()>>>);

impl Agent {
    /// Start `work` beside the loop on the current async runtime. Returns false (and drops
    /// `work`) when no runtime is running here.
    pub fn spawn_side_work(&self, work: impl Future<Output = ()> + Send + 'static) -> bool {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        let task = runtime.spawn(work);
        let mut list = self.inner.side_work.0.locked();
        list.retain(|t| !t.is_finished());
        list.push(task);
        true
    }

    /// Wait until the side work started so far has finished, at most `within`; work still
    /// running then is left running (it ends with the runtime). Returns true when none is
    /// left.
    pub async fn settle_side_work(&self, within: Duration) -> bool {
        let tasks: Vec<JoinHandle<()>> = std::mem::take(&mut *self.inner.side_work.0.locked());
        if tasks.is_empty() {
            return true;
        }
        let all = futures::future::join_all(tasks);
        tokio::time::timeout(within, all).await.is_ok()
    }
}
