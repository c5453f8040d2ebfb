//! The `keel` binary: command-line parsing, configuration, and the commands.
//!
//! Output policy: progress and diagnostics go to stderr, results (final answers, listings,
//! JSON) to stdout. Errors are reported with their whole cause chain and a non-zero exit code.

mod cli;
mod cmd;

use std::process::ExitCode;

/// When the process started (for `KEEL_REPORT_RUSAGE` timings).
pub static STARTED: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

fn main() -> ExitCode {
    STARTED.get_or_init(std::time::Instant::now);
    few_malloc_arenas();
    let cli = cli::parse();
    let code = match cmd::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("keel: error: {e:#}");
            }
            ExitCode::from(2)
        }
    };
    if std::env::var_os("KEEL_REPORT_RUSAGE").is_some() {
        report_rusage();
    }
    code
}

/// At most two malloc arenas, for every command. glibc gives busy threads arenas of their own
/// (up to eight per core), and each arena keeps what its threads freed. A server's turns run on
/// many threads: every hosted session cost ~1.4 MiB private against ~1.1 MiB with two arenas
/// (`bench/serve.sh 10`). A headless run's 30-step peak RSS is ~130 KiB lower
/// (`bench/link-order.sh --check`). No measurable change in CPU per step or event latency.
fn few_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt(3) takes two integers; it only changes the allocator's parameter.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// `KEEL_REPORT_RUSAGE=1`: print this process's own CPU time and peak RSS (children excluded)
/// and its children's CPU time, for the end-to-end benchmarks in `bench/`.
fn report_rusage() {
    fn usage(who: i32) -> Option<(f64, f64, i64)> {
        let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: getrusage writes a full `rusage` into the pointer on success.
        let rc = unsafe { libc::getrusage(who, ru.as_mut_ptr()) };
        if rc != 0 {
            return None;
        }
        // SAFETY: rc == 0, so the struct was initialised.
        let ru = unsafe { ru.assume_init() };
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        Some((secs(ru.ru_utime), secs(ru.ru_stime), ru.ru_maxrss))
    }
    if let (Some(own), Some(children)) = (usage(libc::RUSAGE_SELF), usage(libc::RUSAGE_CHILDREN)) {
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "keel-rusage self_user_s={:.4} self_sys_s={:.4} self_maxrss_kib={} children_user_s={:.4} children_sys_s={:.4}",
                own.0, own.1, own.2, children.0, children.1
            );
        }
    }
}
