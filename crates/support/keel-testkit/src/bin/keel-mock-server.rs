//! `keel-mock-server --script FILE [--port N] [--record FILE]`: serves a model script as a
//! loopback chat-completions endpoint. Prints its base URL as the first line of stdout, then
//! serves until killed.

use keel_llm::Script;
use keel_testkit::{MockOptions, MockServer};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: keel-mock-server --script FILE [--port N] [--record FILE]";

fn parse_args() -> Result<(PathBuf, MockOptions), String> {
    let mut script = None;
    let mut options = MockOptions::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))
        };
        match arg.as_str() {
            "--script" => script = Some(PathBuf::from(value("--script")?)),
            "--port" => {
                let v = value("--port")?;
                options.port = v
                    .parse()
                    .map_err(|_| format!("--port: {v:?} is not a port number"))?;
            }
            "--record" => options.record = Some(PathBuf::from(value("--record")?)),
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    let script = script.ok_or_else(|| format!("--script is required\n{USAGE}"))?;
    Ok((script, options))
}

async fn run() -> Result<(), String> {
    let (path, options) = parse_args()?;
    let script = Script::from_path(&path).map_err(|e| e.to_string())?;
    let server = MockServer::start_with(script, options)
        .await
        .map_err(|e| format!("cannot start the mock server: {e}"))?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", server.base_url()).map_err(|e| e.to_string())?;
    stdout.flush().map_err(|e| e.to_string())?;
    drop(stdout);
    std::future::pending::<()>().await;
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            let _ = writeln!(std::io::stderr(), "keel-mock-server: {message}");
            ExitCode::from(2)
        }
    }
}
