//! The web plugin end to end (docs/web.md) through the real `keel` binary, the loopback mock
//! model and a loopback mock of DeepSeek's Messages API named by `DEEPSEEK_SEARCH_BASE_URL`:
//! the model calls `web_search {queries: ["x"]}`, the search API gets dsh's request with the
//! key, and the framed findings with numbered sources reach the next model request. Against a
//! loopback model endpoint with no search URL of the user's, neither web tool is offered (the
//! request stays what it was before the plugin).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use support::{API_KEY, Env, Mock, run, tool_names};

/// A mock Messages API on 127.0.0.1: every request's head and body recorded, each answered
/// with one search result and a finding.
/// Each search request's head and JSON body.
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

fn search_api() -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            let mut len = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
                if line.trim().is_empty() {
                    break;
                }
                head.push_str(&line);
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            record
                .lock()
                .unwrap()
                .push((head, serde_json::from_slice(&body).unwrap_or(Value::Null)));
            let answer = json!({
                "type": "message", "role": "assistant",
                "content": [
                    {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"query": "x"}},
                    {"type": "web_search_tool_result", "tool_use_id": "s1", "content": [
                        {"type": "web_search_result", "url": "https://example.org/x", "title": "All about x"}
                    ]},
                    {"type": "text", "text": "FINDING: x is a letter."}
                ]
            })
            .to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    (base, seen)
}

#[test]
fn a_web_search_reaches_the_search_api_and_its_framed_result_the_next_request() {
    let env = Env::new();
    let (search_base, seen) = search_api();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "GO" }
    tool_calls:
      - { id: w1, name: web_search, arguments: { queries: ["x"] } }
  - match: { last_tool_result_contains: "FINDING" }
    text: "DONE"
"#,
    );
    let out = run(env
        .keel(&mock.base_url())
        .env("DEEPSEEK_SEARCH_BASE_URL", &search_base)
        .args(["run", "GO"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("DONE"), "{out:?}");

    let searches = seen.lock().unwrap().clone();
    assert_eq!(searches.len(), 1);
    let (head, body) = &searches[0];
    let head_lc = head.to_ascii_lowercase();
    assert!(
        head.starts_with("POST /anthropic/v1/messages HTTP/1.1"),
        "{head}"
    );
    assert!(head_lc.contains(&format!("x-api-key: {API_KEY}")), "{head}");
    assert!(head_lc.contains("anthropic-version: 2023-06-01"), "{head}");
    assert_eq!(body["model"], "deepseek-v4-flash");
    assert_eq!(body["tools"][0]["type"], "web_search_20250305");
    assert_eq!(body["tools"][0]["max_uses"], 5);

    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let names = tool_names(&requests[0]);
    assert!(names.contains(&"web_search".to_owned()), "{names:?}");
    // The model endpoint is loopback, not DeepSeek's: web_fetch stays off by default.
    assert!(!names.contains(&"web_fetch".to_owned()), "{names:?}");
    let result = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "w1")
        .map(|m| m["content"].to_string())
        .unwrap();
    assert!(result.contains("FINDING: x is a letter."), "{result}");
    assert!(result.contains("not instructions"), "{result}");
    assert!(
        result.contains("1. All about x — https://example.org/x"),
        "{result}"
    );
}

#[test]
fn without_a_search_url_a_loopback_model_gets_no_web_tool_and_a_call_is_told_why() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "GO" }
    tool_calls:
      - { id: w1, name: web_search, arguments: { queries: ["x"] } }
  - text: "DONE"
"#,
    );
    let out = run(env.keel(&mock.base_url()).args(["run", "GO"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    let requests = mock.requests();
    let names = tool_names(&requests[0]);
    assert!(!names.iter().any(|n| n.starts_with("web_")), "{names:?}");
    let result = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .unwrap();
    assert!(result.contains("web_search is not available"), "{result}");
    assert!(result.contains("DEEPSEEK_SEARCH_BASE_URL"), "{result}");
}
