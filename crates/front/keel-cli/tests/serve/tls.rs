//! `keel serve` over TLS (`--tls-cert`/`--tls-key`), judged by real outside tools: `openssl`
//! makes a certificate for 127.0.0.1 and `curl` is the client, verifying it. Plus the refusals:
//! a wildcard address, a certificate and key that do not belong together, a file that is no
//! PEM, one flag without the other.

use crate::client::{Server, connect};
use crate::support::{self, Env, HANG_GUARD, Mock};
use serde_json::Value;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The model: a text answer to each client.
const SCRIPT: &str = r#"
responses:
  - match: { last_user_contains: "first over tls" }
    text: "TLS answer."
  - match: { last_user_contains: "remote over tls" }
    text: "Remote TLS answer."
"#;

/// A self-signed certificate for 127.0.0.1 (EC P-256) made by `openssl`: (cert, key).
fn certificate(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let (cert, key) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "2", "-subj", "/CN=keel test"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        // An end-entity certificate (rustls refuses a CA's as a server's own).
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .args(["-addext", "extendedKeyUsage=serverAuth"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl must be installed (.ci/run relies on the system's)");
    assert!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cert, key)
}

/// `curl` with the test's certificate as the only trusted root: (status, headers and body).
fn curl(ca: &Path, url: &str, args: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sS", "-i", "--max-time", "20", "--cacert"])
        .arg(ca)
        .args(args)
        .arg(url)
        .output()
        .expect("curl must be installed");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "curl {url}: {}{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text}"));
    (status, text)
}

fn body_json(text: &str) -> Value {
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[test]
fn tls_serves_the_api_and_plain_http_gets_nothing() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let (cert, key) = certificate(env.root(), "server");
    let cert_arg = cert.to_str().unwrap();
    let key_arg = key.to_str().unwrap();
    let server = Server::start_with(&env, &mock, &["--tls-cert", cert_arg, "--tls-key", key_arg]);
    assert!(
        server.url.starts_with("https://127.0.0.1:"),
        "{}",
        server.url
    );
    let base = format!("https://127.0.0.1:{}", server.addr.port());
    let auth = format!("Authorization: {}", server.auth());

    // A client that connects and never says a word holds up no one's handshake.
    let mut silent = connect(server.addr);

    // The token is still required, and the API answers over TLS.
    let (status, _) = curl(&cert, &format!("{base}/api/v1/sessions"), &[]);
    assert_eq!(status, 401);
    let (status, text) = curl(&cert, &format!("{base}/api/v1/sessions"), &["-H", &auth]);
    assert_eq!(status, 200, "{text}");
    assert_eq!(body_json(&text)["sessions"], serde_json::json!([]));

    // A turn over TLS: created with its prompt, run to its end, its answer in the session.
    let cwd = format!(
        "{{\"cwd\": {:?}, \"prompt\": \"first over tls\"}}",
        env.ws.to_str().unwrap()
    );
    let (status, text) = curl(
        &cert,
        &format!("{base}/api/v1/sessions"),
        &[
            "-H",
            &auth,
            "-H",
            "Content-Type: application/json",
            "--data",
            &cwd,
        ],
    );
    assert_eq!(status, 201, "{text}");
    let id = body_json(&text)["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        let (_, text) = curl(&cert, &format!("{base}/api/v1/sessions"), &["-H", &auth]);
        let listed = body_json(&text);
        let me = listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id.as_str())
            .cloned();
        if me.is_some_and(|s| s["status"] == "idle") {
            break;
        }
        assert!(Instant::now() < deadline, "hang guard: {text}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let sessions = env.session_files();
    let log = std::fs::read_to_string(&sessions[0]).unwrap();
    assert!(log.contains("TLS answer."), "{log}");

    // The server's own origin is https://: the http:// one is another origin (CSRF).
    let port = server.addr.port();
    let own = format!("Origin: https://127.0.0.1:{port}");
    let plain = format!("Origin: http://127.0.0.1:{port}");
    let url = format!("{base}/api/v1/sessions");
    assert_eq!(curl(&cert, &url, &["-H", &auth, "-H", &own]).0, 200);
    let (status, text) = curl(&cert, &url, &["-H", &auth, "-H", &plain]);
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("forbidden_origin"), "{text}");

    // The cookie the printed URL sets is Secure over TLS.
    let (status, text) = curl(&cert, &server.url, &[]);
    assert_eq!(status, 303, "{text}");
    let cookie = text
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .unwrap_or_else(|| panic!("no cookie: {text}"));
    assert!(cookie.contains("; Secure"), "{cookie}");
    assert!(cookie.contains("HttpOnly"), "{cookie}");

    // Plain HTTP to the TLS port: no HTTP answer (the handshake fails and the server hangs up).
    let mut plain_http = connect(server.addr);
    plain_http
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    // One write; it may fail (the server can hang up after the first bytes): either way, no
    // HTTP answer comes back.
    let head = format!("GET /api/v1/sessions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    let _ = plain_http.write_all(head.as_bytes());
    let mut answer = Vec::new();
    let _ = plain_http.read_to_end(&mut answer);
    assert!(
        !String::from_utf8_lossy(&answer).contains("HTTP/1.1"),
        "{answer:?}"
    );

    // A client that does not trust the certificate refuses the server.
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20"])
        .arg(&url)
        .output()
        .unwrap();
    assert!(!out.status.success(), "curl trusted a self-signed server");

    // `keel run --server https://…` trusts the certificate named by KEEL_SERVE_CA, and only it.
    let out = support::run(
        crate::remote::remote(&env, &server.url, &["remote over tls"]).env("KEEL_SERVE_CA", &cert),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("Remote TLS answer."), "{}", out.stdout);
    let out = support::run(&mut crate::remote::remote(
        &env,
        &server.url,
        &["remote over tls"],
    ));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("cannot reach"), "{}", out.stderr);

    // The silent client is still connected and harmless.
    let _ = silent.write_all(b"");
}

#[test]
fn bad_certificates_and_addresses_are_refused_before_serving() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let (cert, _) = certificate(env.root(), "one");
    let (_, other_key) = certificate(env.root(), "two");
    env.write("not-pem.txt", "hello");
    let not_pem = env.ws.join("not-pem.txt");
    let serve = |args: &[&str]| {
        let out = support::run(
            env.keel(&mock.base_url())
                .args(["serve", "--listen", "127.0.0.1:0"])
                .args(args),
        );
        assert_ne!(out.code, Some(0), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: {}", out.stdout);
        assert!(!env.home.join("serve.json").exists());
        out.stderr
    };
    let c = cert.to_str().unwrap();
    let k = other_key.to_str().unwrap();
    let bad = not_pem.to_str().unwrap();
    // A key that is not the certificate's: named.
    let err = serve(&["--tls-cert", c, "--tls-key", k]);
    assert!(
        err.contains("two.key") && err.contains("does not go with"),
        "{err}"
    );
    // Files that are no PEM: named.
    let err = serve(&["--tls-cert", bad, "--tls-key", k]);
    assert!(
        err.contains("not-pem.txt") && err.contains("CERTIFICATE"),
        "{err}"
    );
    let err = serve(&["--tls-cert", c, "--tls-key", bad]);
    assert!(
        err.contains("not-pem.txt") && err.contains("private key"),
        "{err}"
    );
    let err = serve(&["--tls-cert", c, "--tls-key", "/no/such/file"]);
    assert!(err.contains("/no/such/file"), "{err}");
    // One without the other.
    let err = serve(&["--tls-cert", c]);
    assert!(err.contains("--tls-key"), "{err}");
    // A wildcard address, with TLS or without.
    let out = support::run(env.keel(&mock.base_url()).args([
        "serve",
        "--listen",
        "0.0.0.0:0",
        "--tls-cert",
        c,
        "--tls-key",
        cert.with_extension("key").to_str().unwrap(),
    ]));
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains("wildcard"), "{}", out.stderr);
    // Plain HTTP and TLS at once.
    let err = serve(&["--insecure-no-tls", "--tls-cert", c, "--tls-key", k]);
    assert!(err.contains("--insecure-no-tls"), "{err}");
}
