//! Write a realistic synthetic session file: `synth PATH [EVENTS]` (a `.zst` path writes zstd).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use keel_session::synth::{SynthOptions, write_file};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: synth PATH [EVENTS]   (PATH ending in .zst writes zstd)");
        std::process::exit(2);
    };
    let events = args
        .next()
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(1_300_000);
    let options = SynthOptions {
        events,
        ..SynthOptions::default()
    };
    let n = write_file(std::path::Path::new(&path), &options, 4096)?;
    let bytes = std::fs::metadata(&path)?.len();
    println!(
        "events={n} bytes={bytes} bytes_per_event={:.2}",
        bytes as f64 / n as f64
    );
    Ok(())
}
