//! End-to-end: which key goes to which endpoint, checked on the headers the loopback mock model
//! server receives from the real `keel` binary. `DEEPSEEK_API_KEY` goes to the DeepSeek
//! endpoint only (its default URL or `DEEPSEEK_BASE_URL`'s); a `--base-url` server gets the key
//! of `--api-key-env`, or none and no `Authorization` header. `keel config dump` names the
//! variable, never its value.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use support::*;

const ONE_ANSWER: &str = "responses:\n  - text: \"Hello.\"\n";

/// The `Authorization` header of every request the mock received.
fn authorization(mock: &Mock) -> Vec<Option<String>> {
    mock.request_headers()
        .iter()
        .map(|h| h.get("authorization").map(str::to_owned))
        .collect()
}

#[test]
fn deepseek_api_key_is_not_sent_to_a_base_url_server() {
    let env = Env::new();
    let mock = Mock::start(ONE_ANSWER);
    // `Env::keel` sets DEEPSEEK_API_KEY and passes --base-url.
    let out = run(env.keel(&mock.base_url()).args(["run", "hi"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(authorization(&mock), vec![None]);
}

#[test]
fn api_key_env_sends_that_key_to_the_base_url_server() {
    let env = Env::new();
    let mock = Mock::start(ONE_ANSWER);
    let out = run(env.keel(&mock.base_url()).env("MY_KEY", "sk-mine").args([
        "--api-key-env",
        "MY_KEY",
        "run",
        "hi",
    ]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(
        authorization(&mock),
        vec![Some("Bearer sk-mine".to_owned())]
    );

    // A named variable that is unset is an error naming it, before any request.
    let out = run(env.keel(&mock.base_url()).env_remove("MY_KEY").args([
        "--api-key-env",
        "MY_KEY",
        "run",
        "hi",
    ]));
    assert_eq!(out.code, Some(2), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr
            .contains("no API key: set the environment variable MY_KEY"),
        "stderr:\n{}",
        out.stderr
    );
    assert_eq!(mock.requests().len(), 1);
}

#[test]
fn a_base_url_server_needs_no_key_at_all() {
    let env = Env::new();
    let mock = Mock::start(ONE_ANSWER);
    let out = run(env
        .keel_bare()
        .args(["--base-url", &mock.base_url()])
        .args(["run", "hi"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout.trim(), "Hello.");
    assert_eq!(authorization(&mock), vec![None]);
}

#[test]
fn deepseek_base_url_moves_the_deepseek_endpoint_and_its_key() {
    let env = Env::new();
    let mock = Mock::start(ONE_ANSWER);
    let out = run(env
        .keel_bare()
        .env("DEEPSEEK_BASE_URL", mock.base_url())
        .env("DEEPSEEK_API_KEY", "sk-deepseek")
        .args(["run", "hi"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(
        authorization(&mock),
        vec![Some("Bearer sk-deepseek".to_owned())]
    );
}

#[test]
fn a_provider_table_sends_its_own_key_only() {
    let env = Env::new();
    let mock = Mock::start("responses:\n  - text: \"One.\"\n  - text: \"Two.\"\n");
    env.write(
        ".keel/config.toml",
        &format!(
            "provider = \"local\"\n[providers.local]\nbase_url = \"{}\"\napi_key_env = \"LOCAL_KEY\"\n",
            mock.base_url()
        ),
    );
    let out = run(env
        .keel_bare()
        .env("DEEPSEEK_API_KEY", "sk-deepseek")
        .env("LOCAL_KEY", "sk-local")
        .args(["run", "hi"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);

    // A later layer that moves the URL without naming the key again sends none.
    let out = run(env
        .keel_bare()
        .env("DEEPSEEK_API_KEY", "sk-deepseek")
        .env("LOCAL_KEY", "sk-local")
        .args([
            "-c",
            &format!("providers.local.base_url={}/", mock.base_url()),
        ])
        .args(["run", "hi"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(
        authorization(&mock),
        vec![Some("Bearer sk-local".to_owned()), None]
    );
}

#[test]
fn config_dump_names_the_key_variable_of_the_endpoint_never_its_value() {
    let env = Env::new();
    let out = run(env
        .keel_bare()
        .env("DEEPSEEK_API_KEY", "sk-secret-deepseek")
        .env("MY_KEY", "sk-secret-mine")
        .args(["config", "dump"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert!(
        out.stdout.contains(
            "endpoint.base_url = \"https://api.deepseek.com\"  # defaults\nendpoint.api_key_env = \"DEEPSEEK_API_KEY\"  # defaults; set"
        ),
        "{}",
        out.stdout
    );

    let out = run(env
        .keel_bare()
        .env("DEEPSEEK_API_KEY", "sk-secret-deepseek")
        .env("MY_KEY", "sk-secret-mine")
        .args(["--base-url", "http://127.0.0.1:9/v1"])
        .args(["config", "dump"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert!(
        out.stdout.contains("endpoint.base_url = \"http://127.0.0.1:9/v1\"  # --base-url\nendpoint.api_key_env = none  # no key"),
        "{}",
        out.stdout
    );

    let out = run(env
        .keel_bare()
        .env("DEEPSEEK_API_KEY", "sk-secret-deepseek")
        .env("MY_KEY", "sk-secret-mine")
        .args([
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--api-key-env",
            "MY_KEY",
        ])
        .args(["config", "dump"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert!(
        out.stdout
            .contains("endpoint.api_key_env = \"MY_KEY\"  # --api-key-env; set"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("sk-secret"), "{}", out.stdout);
}
