//! The `keel-mock-server` binary: prints its base URL first, serves the script over loopback,
//! records request bodies with `--record`, and rejects bad arguments clearly.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use pretty_assertions::assert_eq;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_keel-mock-server");

/// Kills the child when the test ends, pass or fail.
struct Child(std::process::Child);
impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn serves_script_prints_url_and_records_requests() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.yaml");
    std::fs::write(&script, "- text: hello from the binary\n").unwrap();
    let record = dir.path().join("requests.jsonl");
    let mut child = Child(
        Command::new(BIN)
            .args([
                "--script",
                script.to_str().unwrap(),
                "--record",
                record.to_str().unwrap(),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut first = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let base = first.trim().to_owned();
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");

    let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": true});
    let response = reqwest::Client::new()
        .post(format!("{base}/chat/completions"))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let text = response.text().await.unwrap();
    assert!(text.contains(r#""content":"hello from the "#), "{text}");
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");

    // Exhausted script: a clear 400, not a hang.
    let response = reqwest::Client::new()
        .post(format!("{base}/chat/completions"))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    assert!(response.text().await.unwrap().contains("exhausted"));

    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines, vec![body.clone(), body]);
}

#[test]
fn bad_arguments_and_scripts_fail_with_a_message() {
    let out = Command::new(BIN).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--script is required"));
    let out = Command::new(BIN)
        .args(["--script", "/nonexistent.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.yaml"));
}
