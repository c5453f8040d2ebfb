//! The API judged from outside: schemathesis (pinned in `schemathesis/requirements.txt`,
//! installed by `.ci/run` into `schemathesis/.venv`) reads the OpenAPI document a real `keel
//! serve` serves and throws generated requests at every route — valid ones, invalid ones,
//! chains of them (a session created, then messaged, forked, rewound…) — with all its checks:
//! no 5xx, every status, content type, header and body as documented, invalid data refused,
//! valid data accepted, the token required. `schemathesis/schemathesis.toml` says what the
//! document cannot: which routes may refuse schema-valid data (a `cwd` that is no directory)
//! and how long the endless event stream is read. Without schemathesis installed the test is
//! skipped, except under CI, where it fails.
//!
//! It cannot do harm: the server runs in a temp `$KEEL_HOME` and `$HOME`, its workspaces are
//! untrusted (no project hooks or MCP servers run in a `cwd` schemathesis picks, `/` included)
//! and its model only ever answers text, so no tool runs in them.

use crate::client::Server;
use crate::support::{Env, HANG_GUARD, Mock};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The directory of the pinned requirements, the venv and the configuration.
fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serve/schemathesis")
}

/// The `st` command: `$KEEL_TEST_SCHEMATHESIS`, else the venv `.ci/run` makes.
fn st_command() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KEEL_TEST_SCHEMATHESIS") {
        return Some(PathBuf::from(p));
    }
    let venv = dir().join(".venv/bin/st");
    venv.exists().then_some(venv)
}

/// A model that answers every request with text (no tool calls), more times than any run asks.
fn text_only_script() -> String {
    let mut script = String::from("responses:\n");
    for i in 0..2000 {
        script.push_str(&format!("  - text: \"answer {i}.\"\n"));
    }
    script
}

#[test]
fn schemathesis_finds_the_api_as_documented() {
    let Some(st) = st_command() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "schemathesis is not installed (tests/serve/schemathesis/.venv): .ci/run installs it"
        );
        eprintln!(
            "skipped: schemathesis is not installed (tests/serve/schemathesis/.venv, or set \
             KEEL_TEST_SCHEMATHESIS)"
        );
        return;
    };
    let env = Env::untrusted();
    // Checkpoints of small workspaces only: a rewind can restore files in the temp workspace
    // (a few files), never in a real directory schemathesis happened to name.
    std::fs::write(
        env.home.join("config.toml"),
        "[[plugins]]\nid = \"checkpoints\"\nenabled = true\n[plugins.config]\nmax_files = 50\n",
    )
    .unwrap();
    env.write("notes.txt", "hello\n");
    let mock = Mock::start(&text_only_script());
    let server = Server::start(&env, &mock);
    let base = format!("http://{}", server.host());
    let work = env.root().join("schemathesis");
    std::fs::create_dir_all(&work).unwrap();
    // The checked-in configuration, and the temp workspace offered as a `cwd`.
    let mut config = std::fs::read_to_string(dir().join("schemathesis.toml")).unwrap();
    let ws = serde_json::to_string(&env.ws).unwrap();
    config.push_str(&format!(
        "\n[dictionaries.workspace]\nvalues = [{ws}]\n\n[parameters]\n\
         \"body.cwd\" = {{ dictionary = \"workspace\", probability = 0.5 }}\n\
         \"query.cwd\" = {{ dictionary = \"workspace\", probability = 0.5 }}\n"
    ));
    let config_file = work.join("schemathesis.toml");
    std::fs::write(&config_file, config).unwrap();
    // A deeper or another run: `KEEL_TEST_SCHEMATHESIS_EXAMPLES=200`, `…_SEED=7`.
    let knob = |name: &str, default: &str| {
        std::env::var(format!("KEEL_TEST_SCHEMATHESIS_{name}")).unwrap_or_else(|_| default.into())
    };
    let (examples, seed) = (knob("EXAMPLES", "10"), knob("SEED", "46"));
    let started = Instant::now();
    let mut child = Command::new(&st)
        .arg("--config-file")
        .arg(&config_file)
        .args(["--no-color", "run"])
        .arg(format!("{base}/api/v1/openapi.json"))
        .args(["--header", &format!("Authorization: {}", server.auth())])
        .args([
            "--checks",
            "all",
            "--seed",
            &seed,
            "--max-examples",
            &examples,
        ])
        .args(["--generation-database", "none", "--request-timeout", "10"])
        .args(["--workers", "1"])
        .current_dir(&work)
        .env("HOME", env.root())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", st.display()));
    // Read the output as it comes (a full pipe would stall it), with a hang guard.
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).unwrap();
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut s).unwrap();
        s
    });
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > HANG_GUARD {
            let _ = child.kill();
            let _ = child.wait();
            panic!("hang guard: schemathesis ran for {HANG_GUARD:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    // Shown with `--nocapture`: what was tested, the warnings, the time.
    eprintln!(
        "{out}\nschemathesis ran for {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        status.success(),
        "schemathesis found problems ({status}):\n{out}\n{err}"
    );
    // The server is still serving.
    let list = server.call("GET", "/api/v1/sessions", None);
    assert_eq!(list.status, 200, "{}", list.body);
}
