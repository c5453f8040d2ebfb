//! Ctrl-C for a batch and for a Ray job's side of it: SIGINT and SIGTERM are counted (the
//! handler touches an atomic only), and the scheduler's loop or the job's watcher looks.

use std::sync::atomic::{AtomicU32, Ordering};

/// SIGINT/SIGTERM received.
static SIGNALS: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALS.fetch_add(1, Ordering::SeqCst);
}

/// Count SIGINT and SIGTERM from now on (instead of dying of them).
pub(crate) fn catch() {
    let handler: extern "C" fn(libc::c_int) = on_signal;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only touches an atomic (async-signal-safe).
        unsafe {
            libc::signal(sig, handler as libc::sighandler_t);
        }
    }
}

/// How many were received.
pub(crate) fn received() -> u32 {
    SIGNALS.load(Ordering::SeqCst)
}
