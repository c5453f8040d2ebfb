//! `fake-consult`: a stand-in for the `consult` delegation CLI, driven by `FAKE_CONSULT_*`
//! environment variables (see `keel_testkit::consult`).

use std::process::ExitCode;

fn main() -> ExitCode {
    let code = keel_testkit::consult::fake::run(std::env::args().skip(1).collect());
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
