//! MCP OAuth and elicitation through the real `keel` binary, against a real loopback
//! authorization server: `crates/plugins/keel-mcp/tests/node/oauth-server.mjs`, the TypeScript
//! MCP SDK's own authorization server (metadata, dynamic client registration, `/authorize`
//! with PKCE, `/token`) and bearer middleware in front of a streamable HTTP MCP server. The
//! "browser" is curl following the redirect to keel's loopback listener (`$BROWSER`), as a
//! person clicking "allow" would. The model is the loopback mock.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use support::{Env, Mock, ensure_node_modules, load_consistent, of_type, run, tool_results};

/// A running `oauth-server.mjs` (killed on drop).
struct AuthServer {
    child: Child,
    url: String,
    log: PathBuf,
}

impl AuthServer {
    fn start(env: &Env, mode: &str, ttl: u64) -> AuthServer {
        AuthServer::start_with(env, mode, ttl, ttl)
    }

    /// With `valid_for`: how long the server really honours a token.
    fn start_with(env: &Env, mode: &str, ttl: u64, valid_for: u64) -> AuthServer {
        let dir = ensure_node_modules();
        let log = env
            .root()
            .join(format!("oauth-{mode}-{}.log", std::process::id()));
        let log = unique(log);
        let mut child = Command::new("node")
            .arg(dir.join("oauth-server.mjs"))
            .env("MODE", mode)
            .env("TOKEN_TTL", ttl.to_string())
            .env("VALID_FOR", valid_for.to_string())
            .env("LOG", &log)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let v: Value = serde_json::from_str(&first)
            .unwrap_or_else(|e| panic!("oauth-server said {first:?}: {e}"));
        AuthServer {
            child,
            url: v["url"].as_str().unwrap().to_owned(),
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

fn unique(path: PathBuf) -> PathBuf {
    let mut p = path.clone();
    let mut n = 0;
    while p.exists() {
        n += 1;
        p = path.with_extension(format!("{n}.log"));
    }
    p
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn configure(env: &Env, name: &str, url: &str) {
    env.write(
        ".keel/config.toml",
        &format!("[mcp_servers.{name}]\nurl = {url:?}\nstartup_timeout_sec = 20\n"),
    );
}

/// `keel mcp login NAME` with curl as the browser.
fn login(env: &Env, name: &str) -> support::Output {
    run(env
        .keel_bare()
        .env("BROWSER", "curl -sSL -o /dev/null")
        .args(["mcp", "login", name, "--timeout", "30"]))
}

fn token_files(env: &Env) -> Vec<PathBuf> {
    match std::fs::read_dir(env.home.join("mcp/oauth")) {
        Ok(d) => d.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn login_stores_a_private_token_that_runs_use_and_logout_forgets() {
    let env = Env::new();
    let server = AuthServer::start(&env, "ok", 3600);
    configure(&env, "secure", &server.url);

    // Without a token: a clear hint, at once.
    let out = run(env.keel_bare().args(["mcp", "test", "secure"]));
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains("keel mcp login secure") && out.stderr.contains("bearer_token_env_var"),
        "{}",
        out.stderr
    );

    let out = login(&env, "secure");
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stderr.contains("/authorize?"), "{}", out.stderr);
    assert!(
        out.stderr.contains("code_challenge_method=S256"),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.contains("logged in to MCP server 'secure'"),
        "{}",
        out.stdout
    );
    let files = token_files(&env);
    assert_eq!(files.len(), 1, "{files:?}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&files[0]).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir = std::fs::metadata(env.home.join("mcp/oauth"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir & 0o777, 0o700);
    }
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    assert_eq!(stored["server_url"], server.url.as_str());
    assert!(stored["refresh_token"].is_string());

    // `keel mcp test` and `keel run` use it.
    let out = run(env.keel_bare().args(["mcp", "test", "secure"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("mcp__secure__whoami"), "{}", out.stdout);
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "who" }
    tool_calls:
      - { id: w1, name: mcp__secure__whoami, arguments: {} }
  - match: { last_tool_result_contains: "" }
    text: "DONE"
"#,
    );
    let out = run(env
        .keel(&mock.base_url())
        .args(["--approval", "auto", "run", "who am i"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    let events = load_consistent(&env.only_session());
    let results = tool_results(&events);
    assert!(results[0].1.starts_with("authorized as "), "{results:?}");
    assert!(!results[0].1.contains("nobody"), "{results:?}");
    // The token is in no session file or message.
    let token = stored["access_token"].as_str().unwrap();
    let log = std::fs::read_to_string(env.only_session()).unwrap_or_default();
    assert!(!log.contains(token));

    let out = run(env.keel_bare().args(["mcp", "logout", "secure"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("logged out"), "{}", out.stdout);
    assert!(token_files(&env).is_empty());
    let out = run(env.keel_bare().args(["mcp", "test", "secure"]));
    assert_eq!(out.code, Some(1), "{out:?}");
}

#[test]
fn an_expired_token_is_refreshed_and_a_refused_refresh_names_the_server() {
    let env = Env::new();
    // A 5-second token: within keel's 30-second margin, so it counts as expired at once.
    let server = AuthServer::start(&env, "ok", 5);
    configure(&env, "secure", &server.url);
    let out = login(&env, "secure");
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(!server.log().contains("refresh"), "{}", server.log());
    let out = run(env.keel_bare().args(["mcp", "test", "secure"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(server.log().contains("refresh"), "{}", server.log());

    let env = Env::new();
    let server = AuthServer::start(&env, "refresh-fail", 5);
    configure(&env, "secure", &server.url);
    let out = login(&env, "secure");
    assert_eq!(out.code, Some(0), "{out:?}");
    let out = run(env.keel_bare().args(["mcp", "test", "secure"]));
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains("MCP server 'secure'")
            && out.stderr.contains("token endpoint")
            && out.stderr.contains("invalid_grant")
            && out.stderr.contains("keel mcp login secure"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_token_the_server_refuses_before_its_expiry_is_refreshed_once() {
    let env = Env::new();
    let server = AuthServer::start_with(&env, "ok", 3600, 1);
    configure(&env, "secure", &server.url);
    assert_eq!(login(&env, "secure").code, Some(0));
    std::thread::sleep(Duration::from_millis(1500));
    // keel thinks the token good for an hour; the server answers 401: refreshed, connected.
    let out = run(env.keel_bare().args(["mcp", "test", "secure"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    let log = server.log();
    assert_eq!(log.matches("refresh").count(), 1, "{log}");
}

#[test]
fn bad_discovery_answers_and_a_failing_token_endpoint_are_named() {
    for (mode, expect) in [
        (
            "prm-garbage",
            vec![
                "protected resource metadata",
                "not a JSON object",
                "this is not json",
            ],
        ),
        ("no-s256", vec!["S256", "code_challenge_methods_supported"]),
        (
            "other-resource",
            vec!["https://elsewhere.example/mcp", "is not the server's URL"],
        ),
        (
            "token-fail",
            vec!["token endpoint", "500", "token service down"],
        ),
    ] {
        let env = Env::new();
        let server = AuthServer::start(&env, mode, 3600);
        configure(&env, "secure", &server.url);
        let out = login(&env, "secure");
        assert_eq!(out.code, Some(1), "{mode}: {out:?}");
        assert!(
            out.stderr.contains("MCP server 'secure'"),
            "{mode}: {}",
            out.stderr
        );
        for e in expect {
            assert!(
                out.stderr.contains(e),
                "{mode}: {e:?} not in {}",
                out.stderr
            );
        }
        assert!(token_files(&env).is_empty(), "{mode}");
    }
}

#[test]
fn a_stored_token_is_never_sent_to_another_url() {
    let env = Env::new();
    let real = AuthServer::start(&env, "ok", 3600);
    configure(&env, "secure", &real.url);
    assert_eq!(login(&env, "secure").code, Some(0));
    // The project now names another server under the same name.
    let other = AuthServer::start(&env, "open", 3600);
    configure(&env, "secure", &other.url);
    let out = run(env.keel_bare().args(["mcp", "test", "secure"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    let log = other.log();
    assert!(log.contains("POST /mcp auth=no"), "{log}");
    assert!(!log.contains("auth=yes"), "{log}");
}

/// The next stdout line of `lines` that is an event of type `ty`.
fn until(lines: &mpsc::Receiver<String>, ty: &str) -> Value {
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no {ty} line came"));
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if v["type"] == ty {
            return v;
        }
    }
}

const ASKS: &str = r#"
responses:
  - match: { last_user_contains: "ask me" }
    tool_calls:
      - { id: e1, name: mcp__form__ask, arguments: {} }
  - match: { last_tool_result_contains: "" }
    text: "DONE"
"#;

#[test]
fn an_elicitation_is_put_to_the_person_and_headless_declines() {
    let env = Env::new();
    let server = AuthServer::start(&env, "open", 3600);
    configure(&env, "form", &server.url);

    // Headless: declined, as before.
    let mock = Mock::start(ASKS);
    let out = run(env
        .keel(&mock.base_url())
        .args(["--approval", "auto", "run", "ask me"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    let events = load_consistent(&env.only_session());
    let results = tool_results(&events);
    assert!(results[0].1.contains("action=decline"), "{results:?}");

    // With a person (here a script on --inbox-stdin): the form's fields as questions.
    let env = Env::new();
    configure(&env, "form", &server.url);
    let mock = Mock::start(ASKS);
    let mut child = env
        .keel(&mock.base_url())
        .args([
            "--approval",
            "auto",
            "run",
            "--json",
            "--inbox-stdin",
            "ask me",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let asked = until(&lines, "question/asked");
    let questions = &asked["data"]["questions"];
    assert_eq!(asked["data"]["callId"], "e1");
    // One question per field, in the schema's order; the server's message with the first.
    assert_eq!(questions[0]["id"], "name", "{questions}");
    assert!(
        questions[0]["question"]
            .as_str()
            .unwrap()
            .starts_with("[MCP server form] Who is there?\nYour name (required)"),
        "{questions}"
    );
    assert_eq!(questions[1]["id"], "color");
    assert_eq!(questions[1]["options"][1]["label"], "green");
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        r#"{{"answer": {{"call_id": "e1", "answers": {{"name": "Ada", "color": "green"}}}}}}"#
    )
    .unwrap();
    stdin.flush().unwrap();
    until(&lines, "question/answered");
    drop(stdin);
    let status = child.wait().unwrap();
    let stderr = err.join().unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    let events = load_consistent(&env.only_session());
    assert_eq!(of_type(&events, "question/asked").len(), 1);
    let results = tool_results(&events);
    assert!(
        results[0]
            .1
            .contains(r#"action=accept content={"name":"Ada","color":"green"}"#),
        "{results:?}"
    );
}

/// `elicit-server.mjs`, a raw stdio server, as server `raw`.
fn configure_raw(env: &Env) {
    let script = ensure_node_modules().join("elicit-server.mjs");
    env.write(
        ".keel/config.toml",
        &format!(
            "[mcp_servers.raw]\ncommand = \"node\"\nargs = [{:?}]\n",
            script.display().to_string()
        ),
    );
}

/// Start `keel run --json --inbox-stdin PROMPT`: its stdout lines, its stdin, the child.
fn live(
    env: &Env,
    mock: &Mock,
    prompt: &str,
) -> (Child, std::process::ChildStdin, mpsc::Receiver<String>) {
    let mut child = env
        .keel(&mock.base_url())
        .args([
            "--approval",
            "auto",
            "run",
            "--json",
            "--inbox-stdin",
            prompt,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let stdin = child.stdin.take().unwrap();
    (child, stdin, lines)
}

#[test]
fn an_input_required_result_is_asked_and_the_call_sent_again_with_the_answer() {
    let env = Env::new();
    configure_raw(&env);
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "greet me" }
    tool_calls:
      - { id: g1, name: mcp__raw__greet, arguments: {} }
  - match: { last_tool_result_contains: "" }
    text: "DONE"
"#,
    );
    let (mut child, mut stdin, lines) = live(&env, &mock, "greet me");
    let asked = until(&lines, "question/asked");
    assert_eq!(asked["data"]["callId"], "g1");
    assert!(
        asked["data"]["questions"][0]["question"]
            .as_str()
            .unwrap()
            .starts_with("[MCP server raw] What is your name?"),
        "{asked}"
    );
    writeln!(
        stdin,
        r#"{{"answer": {{"call_id": "g1", "answers": {{"name": "Ada"}}}}}}"#
    )
    .unwrap();
    stdin.flush().unwrap();
    until(&lines, "question/answered");
    drop(stdin);
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let results = tool_results(&load_consistent(&env.only_session()));
    assert_eq!(results[0].1, "Hello, Ada!", "{results:?}");
}

#[test]
fn a_form_keel_cannot_ask_is_declined_naming_the_server_and_the_field() {
    let env = Env::new();
    configure_raw(&env);
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "where" }
    tool_calls:
      - { id: n1, name: mcp__raw__nested, arguments: {} }
  - match: { last_tool_result_contains: "" }
    text: "DONE"
"#,
    );
    let (mut child, stdin, lines) = live(&env, &mock, "where do I live");
    until(&lines, "tool/result");
    drop(stdin);
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let events = load_consistent(&env.only_session());
    assert!(
        of_type(&events, "question/asked").is_empty(),
        "nobody is asked"
    );
    let results = tool_results(&events);
    let text = &results[0].1;
    assert!(text.contains(r#"reply={"action":"decline"}"#), "{text}");
    assert!(
        text.contains("MCP server 'raw'") && text.contains("'address'"),
        "{text}"
    );
}
