//! End-to-end: `keel login` / `keel logout` and the stored keys of `$KEEL_HOME/credentials.toml`,
//! checked on the headers the loopback mock model server receives from the real `keel` binary.
//! A stored key goes to its provider's URL when the environment names none (the environment
//! wins), never to `--base-url` nor to a URL a project's `.keel/config.toml` sets; `keel config
//! dump` says where the key comes from and never shows it; a file others may read, or bad TOML,
//! is refused with its name and never overwritten.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use support::*;

const STORED: &str = "sk-stored-secret";

fn answers(n: usize) -> String {
    let mut s = "responses:\n".to_owned();
    for i in 0..n {
        s.push_str(&format!("  - text: \"Answer {i}.\"\n"));
    }
    s
}

/// The `Authorization` header of every request the mock received.
fn authorization(mock: &Mock) -> Vec<Option<String>> {
    mock.request_headers()
        .iter()
        .map(|h| h.get("authorization").map(str::to_owned))
        .collect()
}

/// Run `keel run hi` built by `build` (given a fresh mock's URL) to success; the distinct
/// `Authorization` headers the mock received (every request of the run, whatever else the run
/// asks the model beside its turn).
fn sent(build: impl FnOnce(&str) -> Command) -> Vec<Option<String>> {
    let mock = Mock::start(&answers(4));
    let mut cmd = build(&mock.base_url());
    let out = run(cmd.args(["run", "hi"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let mut all = authorization(&mock);
    assert!(!all.is_empty());
    all.sort();
    all.dedup();
    all
}

/// `keel login PROVIDER --stdin` with `input` piped in.
fn login(env: &Env, provider: &str, input: &str) -> Output {
    let mut cmd = env.keel_bare();
    cmd.args(["login", provider, "--stdin"])
        .stdin(Stdio::piped());
    let mut running = spawn(&mut cmd);
    let mut stdin = running.take_stdin();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    running.wait()
}

fn credentials(env: &Env) -> std::path::PathBuf {
    env.home.join("credentials.toml")
}

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// `keel run hi` against `mock` as the DeepSeek endpoint (`DEEPSEEK_BASE_URL`), no key variable.
fn run_deepseek(env: &Env, mock: &Mock) -> Command {
    let mut cmd = env.keel_bare();
    cmd.env("DEEPSEEK_BASE_URL", mock.base_url())
        .args(["run", "hi"]);
    cmd
}

#[test]
fn login_stores_the_key_and_runs_send_it_to_the_provider_only() {
    let env = Env::new();
    let out = login(&env, "deepseek", &format!("{STORED}\n"));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let file = credentials(&env);
    assert_eq!(
        out.stdout.trim(),
        format!(
            "saved the key for deepseek in {} (mode 600)",
            file.display()
        )
    );
    assert!(!out.stdout.contains(STORED) && !out.stderr.contains(STORED));
    assert_eq!(mode(&file), 0o600);

    let stored = vec![Some(format!("Bearer {STORED}"))];
    // The DeepSeek endpoint (DEEPSEEK_BASE_URL's), no DEEPSEEK_API_KEY: the stored key.
    let deepseek = |url: &str| {
        let mut cmd = env.keel_bare();
        cmd.env("DEEPSEEK_BASE_URL", url);
        cmd
    };
    assert_eq!(sent(deepseek), stored);
    // A user's own layer (-c) moving the URL: the stored key follows it.
    let moved = |url: &str| {
        let mut cmd = env.keel_bare();
        cmd.args(["-c", &format!("providers.deepseek.base_url={url}")]);
        cmd
    };
    assert_eq!(sent(moved), stored);
    // The environment wins over the store.
    let with_env = |url: &str| {
        let mut cmd = deepseek(url);
        cmd.env("DEEPSEEK_API_KEY", "sk-env");
        cmd
    };
    assert_eq!(sent(with_env), vec![Some("Bearer sk-env".to_owned())]);
    // --base-url never gets a stored key.
    let own = |url: &str| {
        let mut cmd = env.keel_bare();
        cmd.args(["--base-url", url]);
        cmd
    };
    assert_eq!(sent(own), vec![None]);
    let mock = Mock::start(&answers(1));

    // `keel config dump` says where the key comes from, never the key.
    let out = run(env
        .keel_bare()
        .env("DEEPSEEK_BASE_URL", mock.base_url())
        .args(["config", "dump"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert!(
        out.stdout.contains(&format!(
            "endpoint.api_key_env = \"DEEPSEEK_API_KEY\"  # defaults; not set: the stored key is sent instead\nendpoint.api_key = credentials.toml [providers.deepseek]  # {}",
            file.display()
        )),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains(STORED), "{}", out.stdout);
    let out = run(env
        .keel_bare()
        .env("DEEPSEEK_API_KEY", "sk-env")
        .args(["config", "dump"]));
    assert!(
        out.stdout
            .contains("endpoint.api_key = env DEEPSEEK_API_KEY  # the environment wins"),
        "{}",
        out.stdout
    );

    // Logout: the key is gone, and a run fails before any request, saying how to fix it.
    let out = run(env.keel_bare().args(["logout", "deepseek"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(
        out.stdout.trim(),
        format!(
            "removed the stored key for deepseek from {}",
            file.display()
        )
    );
    let out = run(&mut run_deepseek(&env, &mock));
    assert_eq!(out.code, Some(2), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr.contains(
            "set the environment variable DEEPSEEK_API_KEY, or\n  keel login deepseek      store a key"
        ),
        "stderr:\n{}",
        out.stderr
    );
    assert_eq!(mock.requests().len(), 0);
    let out = run(env.keel_bare().args(["logout", "deepseek"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert!(
        out.stdout.starts_with("no key stored for deepseek in "),
        "{}",
        out.stdout
    );
}

#[test]
fn a_project_config_never_gets_the_stored_key() {
    for trusted in [true, false] {
        let env = if trusted {
            Env::new()
        } else {
            Env::untrusted()
        };
        assert_eq!(login(&env, "deepseek", STORED).code, Some(0));
        let project = Mock::start(&answers(8));
        let user = Mock::start(&answers(8));
        env.write(
            ".keel/config.toml",
            &format!(
                "[providers.deepseek]\nbase_url = \"{}\"\n",
                project.base_url()
            ),
        );
        // The user's DEEPSEEK_BASE_URL stands in for the built-in URL (a trusted project's
        // table wins over it; an untrusted one's is left out).
        let out = run(&mut run_deepseek(&env, &user));
        assert_eq!(out.code, Some(0), "trusted {trusted}: {}", out.stderr);
        let dedup = |mut v: Vec<Option<String>>| {
            v.dedup();
            v
        };
        if trusted {
            assert_eq!(dedup(authorization(&project)), vec![None]);
            assert_eq!(authorization(&user), Vec::<Option<String>>::new());
        } else {
            assert_eq!(authorization(&project), Vec::<Option<String>>::new());
            assert_eq!(
                dedup(authorization(&user)),
                vec![Some(format!("Bearer {STORED}"))]
            );
        }
        let before = project.requests().len();

        // Naming the variable again does not bring the stored key either.
        env.write(
            ".keel/config.toml",
            &format!(
                "[providers.deepseek]\nbase_url = \"{}\"\napi_key_env = \"DEEPSEEK_API_KEY\"\n",
                project.base_url()
            ),
        );
        let out = run(&mut run_deepseek(&env, &user));
        if trusted {
            assert_eq!(out.code, Some(2), "stderr:\n{}", out.stderr);
            assert!(
                out.stderr
                    .contains("no API key: set the environment variable DEEPSEEK_API_KEY"),
                "stderr:\n{}",
                out.stderr
            );
        } else {
            assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
        }
        assert_eq!(
            project.requests().len(),
            before,
            "no request to the project's URL"
        );
        let all: Vec<_> = authorization(&project);
        assert!(!all.contains(&Some(format!("Bearer {STORED}"))), "{all:?}");
    }
}

#[test]
fn a_credentials_file_keel_cannot_read_is_named_and_kept() {
    let env = Env::new();
    let file = credentials(&env);
    let mock = Mock::start(&answers(4));
    let text = format!("[providers.deepseek]\napi_key = \"{STORED}\"\n");
    std::fs::write(&file, &text).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();

    let out = run(&mut run_deepseek(&env, &mock));
    assert_eq!(out.code, Some(2), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "refusing to read {}: its mode is 644",
            file.display()
        )) && out
            .stderr
            .contains(&format!("chmod 600 {}", file.display())),
        "stderr:\n{}",
        out.stderr
    );
    let out = login(&env, "deepseek", "sk-new\n");
    assert_ne!(out.code, Some(0), "stdout:\n{}", out.stdout);
    assert!(out.stderr.contains("chmod 600"), "stderr:\n{}", out.stderr);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text, "kept");
    assert_eq!(mode(&file), 0o644, "left as it was");
    assert!(!out.stderr.contains(STORED));

    // Bad TOML: named, with the line, and kept through a login too.
    let bad = "[providers.deepseek]\napi_key = \"sk-unterminated\n";
    std::fs::write(&file, bad).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = run(&mut run_deepseek(&env, &mock));
    assert_eq!(out.code, Some(2), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("invalid credentials file {}", file.display()))
            && out.stderr.contains("line 2"),
        "stderr:\n{}",
        out.stderr
    );
    let out = login(&env, "deepseek", "sk-new\n");
    assert_ne!(out.code, Some(0));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), bad, "kept");

    // The environment wins: the store is not even read.
    let out = run(run_deepseek(&env, &mock).env("DEEPSEEK_API_KEY", "sk-env"));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let mut all = authorization(&mock);
    all.dedup();
    assert_eq!(all, vec![Some("Bearer sk-env".to_owned())]);
}

#[test]
fn login_refuses_an_unknown_provider_and_an_empty_key() {
    let env = Env::new();
    let out = login(&env, "nope", "sk-x\n");
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr
            .contains("unknown provider \"nope\": known providers are ")
            && out.stderr.contains("deepseek"),
        "stderr:\n{}",
        out.stderr
    );
    let out = login(&env, "deepseek", "\n");
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains("no key read"),
        "stderr:\n{}",
        out.stderr
    );
    assert!(!credentials(&env).exists());

    // A provider of the user's configuration is known; keys of others are kept.
    std::fs::write(
        env.home.join("config.toml"),
        "[providers.local]\nbase_url = \"http://127.0.0.1:9/v1\"\n",
    )
    .unwrap();
    assert_eq!(login(&env, "deepseek", "sk-one\n").code, Some(0));
    assert_eq!(login(&env, "local", "sk-two\n").code, Some(0));
    assert_eq!(run(env.keel_bare().args(["logout", "local"])).code, Some(0));
    assert_eq!(
        std::fs::read_to_string(credentials(&env)).unwrap(),
        "[providers.deepseek]\napi_key = \"sk-one\"\n"
    );

    let out = run(env.keel_bare().args(["login", "--help"]));
    assert!(out.stdout.contains("echo"), "{}", out.stdout);
}
