//! Load a session file, plan crash repair and derive messages; print counts and timings.
//! Measure peak memory with `/usr/bin/time -v target/release/examples/load PATH`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: load PATH (a session directory or file)");
        std::process::exit(2);
    };
    let t0 = Instant::now();
    let loaded = keel_session::Store::load(std::path::Path::new(&path))?;
    let t_load = t0.elapsed();
    let mut session = loaded.session;
    let (repair, _) = session.plan_repair();
    let t_repair = t0.elapsed();
    let messages = session.derive_messages().len();
    let total = t0.elapsed();
    let (runs, whole) = session.storage_counts();
    println!(
        "events={} messages={} repair_events={} turns={} torn={} surface_nodes={} runs={} whole_events={}",
        session.len(),
        messages,
        repair.len(),
        session.turn_count(),
        loaded.report.torn.is_some(),
        session.surface().nodes().len(),
        runs,
        whole
    );
    println!(
        "load_ms={:.1} repair_plan_ms={:.1} total_ms={:.1}",
        t_load.as_secs_f64() * 1e3,
        (t_repair - t_load).as_secs_f64() * 1e3,
        total.as_secs_f64() * 1e3
    );
    Ok(())
}
