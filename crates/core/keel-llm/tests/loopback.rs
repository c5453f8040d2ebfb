//! The DeepSeek/OpenAI client against keel-testkit's mock server over real loopback HTTP: every
//! scripted behaviour, request mapping, reads split anywhere, large arguments, cancellation.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use keel_llm::{
    ApiKey, Assembled, ChatRequest, Interrupted, OpenAiProvider, Provider, ProviderConfig,
    RetryDecision, RetryPolicy, Script, ScriptFormat, ScriptedProvider, assemble,
};
use keel_protocol::{
    ContentBlock, FailureCode, FinishReason, Message, MessageSource, Role, StreamChunk, TokenUsage,
    ToolCallBlock, ToolResultBlock, ToolSchema,
};
use keel_testkit::MockServer;
use pretty_assertions::assert_eq;
use serde_json::json;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const KEY: &str = "sk-test-secret-key-123";

fn script(yaml: &str) -> Script {
    Script::from_str(yaml, ScriptFormat::Yaml).unwrap()
}

fn provider(server: &MockServer, idle: Duration) -> OpenAiProvider {
    let mut config = ProviderConfig::new(
        "deepseek",
        server.base_url(),
        ApiKey::new(KEY, "TEST_KEY").unwrap(),
    );
    config.idle_timeout = idle;
    OpenAiProvider::new(config).unwrap()
}

fn request(prompt: &str) -> ChatRequest {
    ChatRequest {
        model: "deepseek-v4-flash".into(),
        system: "You are a test agent. ".repeat(40),
        messages: vec![Message::user_text(prompt, MessageSource::user(), "u1")],
        tools: vec![ToolSchema {
            name: "read".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object"}),
        }],
        thinking: Some(true),
        reasoning_effort: Some("high".into()),
        ..ChatRequest::default()
    }
}

async fn call(p: &dyn Provider, req: ChatRequest) -> Result<Assembled, Interrupted> {
    assemble(p.stream(req, CancellationToken::new()), |_| {}).await
}

async fn serve(yaml: &str) -> (MockServer, OpenAiProvider) {
    let server = MockServer::start(script(yaml)).await.unwrap();
    let p = provider(&server, Duration::from_secs(10));
    (server, p)
}

fn code(result: Result<Assembled, Interrupted>) -> FailureCode {
    result.expect_err("the call should fail").failure.code
}

#[tokio::test]
async fn reasoning_and_text_with_cache_hit_usage() {
    let (server, p) = serve(
        "- behaviour: reasoning_success\n  reasoning: Let me think about héllo 🌍.\n  text: Hello there, this is a longer answer.\n  usage: { prompt: 1000, completion: 50, cache_hit: 640, reasoning: 12 }\n",
    )
    .await;
    let out = call(&p, request("hi")).await.unwrap();
    assert_eq!(
        out,
        Assembled {
            content: vec![
                ContentBlock::reasoning("Let me think about héllo 🌍."),
                ContentBlock::text("Hello there, this is a longer answer."),
            ],
            usage: Some(TokenUsage {
                input_tokens: 360,
                output_tokens: 50,
                cache_read_tokens: 640,
                reasoning_tokens: 12,
                cache_write_tokens: 0
            }),
            finish: Some(FinishReason::Stop),
        }
    );
    let bodies = server.requests();
    assert_eq!(bodies.len(), 1);
    assert_eq!(bodies[0]["stream"], json!(true));
    assert_eq!(bodies[0]["stream_options"], json!({"include_usage": true}));
    assert_eq!(bodies[0]["thinking"], json!({"type": "enabled"}));
    assert_eq!(
        bodies[0]["messages"][1],
        json!({"role": "user", "content": "hi"})
    );
    assert_eq!(server.remaining(), 0);
}

#[tokio::test]
async fn several_tool_calls_in_many_fragments_ids_only_in_first_and_reasoning_round_trip() {
    let (server, p) = serve(
        r#"
- behaviour: tool_call_success
  reasoning: I need two files.
  text: Reading.
  chunk_size: 3
  tool_calls:
    - { name: read, arguments: { file_path: "src/main.rs" } }
    - { id: call_custom, name: grep, arguments: '{"pattern": "fn main", "path": "."}' }
- match: { last_tool_result_contains: "fn main" }
  text: Found it.
"#,
    )
    .await;
    let mut chunks = Vec::new();
    let out = assemble(
        p.stream(request("find main"), CancellationToken::new()),
        |c| chunks.push(c.clone()),
    )
    .await
    .unwrap();
    let calls: Vec<&ToolCallBlock> = out
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolCall(c) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        vec![
            &ToolCallBlock {
                id: "call_1_0".into(),
                name: "read".into(),
                arguments: r#"{"file_path":"src/main.rs"}"#.into()
            },
            &ToolCallBlock {
                id: "call_custom".into(),
                name: "grep".into(),
                arguments: r#"{"pattern": "fn main", "path": "."}"#.into()
            },
        ]
    );
    assert_eq!(out.finish, Some(FinishReason::ToolCalls));
    let fragments = chunks
        .iter()
        .filter(|c| matches!(c, StreamChunk::ToolCallDelta { .. }))
        .count();
    assert!(
        fragments > 10,
        "arguments should arrive in many fragments, got {fragments}"
    );
    assert!(chunks.iter().all(|c| !matches!(
        c,
        StreamChunk::ToolCallDelta { id: Some(_), .. }
            | StreamChunk::ToolCallDelta { name: Some(_), .. }
    )));

    // Step 2: the assistant message (with reasoning) and the tool results go back.
    let mut req = request("find main");
    req.messages.push(Message {
        role: Role::Assistant,
        content: out.content.clone(),
        source: MessageSource::model("deepseek", "deepseek-v4-flash"),
        id: "a1".into(),
    });
    for (call, text) in calls.iter().zip(["", "fn main() {}"]) {
        req.messages.push(Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(ToolResultBlock {
                tool_call_id: call.id.clone(),
                content: vec![ContentBlock::text(text)],
                is_error: false,
            })],
            source: MessageSource::tool(call.id.clone()),
            id: format!("t-{}", call.id),
        });
    }
    let out2 = call(&p, req).await.unwrap();
    assert_eq!(out2.content, vec![ContentBlock::text("Found it.")]);
    let body = &server.requests()[1];
    assert_eq!(
        body["messages"][2],
        json!({
            "role": "assistant",
            "content": "Reading.",
            "reasoning_content": "I need two files.",
            "tool_calls": [
                {"id": "call_1_0", "type": "function", "function": {"name": "read", "arguments": "{\"file_path\":\"src/main.rs\"}"}},
                {"id": "call_custom", "type": "function", "function": {"name": "grep", "arguments": "{\"pattern\": \"fn main\", \"path\": \".\"}"}}
            ]
        })
    );
    assert_eq!(
        body["messages"][3],
        json!({"role": "tool", "tool_call_id": "call_1_0", "content": "(no output)"})
    );
    assert_eq!(
        body["messages"][4],
        json!({"role": "tool", "tool_call_id": "call_custom", "content": "fn main() {}"})
    );
    // The second request shares a long prefix with the first: the mock reports cache hits.
    assert!(out2.usage.unwrap().cache_read_tokens > 0);
}

#[tokio::test]
async fn max_tokens_drops_the_cut_tool_call_and_other_reasons_map_to_error() {
    let (_server, p) = serve(
        "- behaviour: max_tokens\n  text: Writing the file\n  tool_calls: [{ name: write, arguments: { content: 'aaaaaaaaaaaaaaaaaaaa' } }]\n- text: filtered\n  finish: content_filter\n",
    )
    .await;
    let out = call(&p, request("go")).await.unwrap();
    assert_eq!(out.content, vec![ContentBlock::text("Writing the file")]);
    assert_eq!(out.finish, Some(FinishReason::MaxTokens));
    let out = call(&p, request("go")).await.unwrap();
    assert_eq!(
        out.finish,
        Some(FinishReason::Error {
            code: "CONTENT_FILTER".into()
        })
    );
}

#[tokio::test]
async fn stream_faults_are_classified() {
    let (_server, p) = serve(
        "- behaviour: empty\n- behaviour: connection_reset\n- behaviour: stream_disconnect\n  text: 'This answer will be cut off half way through.'\n  chunk_size: 4\n- behaviour: malformed_json\n  text: abcdefgh\n  chunk_size: 2\n",
    )
    .await;
    assert_eq!(
        code(call(&p, request("a")).await),
        FailureCode::EmptyResponse
    );
    assert_eq!(code(call(&p, request("b")).await), FailureCode::Transport);
    let cut = call(&p, request("c")).await.unwrap_err();
    assert_eq!(cut.failure.code, FailureCode::StreamClosed);
    let ContentBlock::Text { text } = &cut.partial[0] else {
        panic!("{:?}", cut.partial)
    };
    assert!(text.starts_with("This") && text.len() < 46, "{text}");
    assert_eq!(
        code(call(&p, request("d")).await),
        FailureCode::MalformedResponse
    );
}

#[tokio::test]
async fn http_errors_are_classified_with_retry_after_and_request_id_and_no_key() {
    let (_server, p) = serve(
        "- { behaviour: rate_limit, retry_after: 2 }\n- behaviour: server_error\n- behaviour: context_overflow\n- behaviour: quota_exceeded\n- behaviour: auth_error\n  message: 'Authentication Fails, Your api key: sk-test-secret-key-123 is invalid'\n",
    )
    .await;
    let limited = call(&p, request("a")).await.unwrap_err().failure;
    assert_eq!(
        (limited.code.clone(), limited.status, limited.retry_after_ms),
        (FailureCode::RateLimit, Some(429), Some(2000))
    );
    assert_eq!(limited.request_id.as_deref(), Some("mock-request"));
    assert_eq!(
        RetryPolicy::seeded(1).decide(1, &limited),
        RetryDecision::Retry {
            delay: Duration::from_secs(2)
        }
    );
    assert_eq!(code(call(&p, request("b")).await), FailureCode::Server);
    assert_eq!(
        code(call(&p, request("c")).await),
        FailureCode::ContextWindowExceeded
    );
    assert_eq!(code(call(&p, request("d")).await), FailureCode::Quota);
    let auth = call(&p, request("e")).await.unwrap_err().failure;
    assert_eq!(auth.code, FailureCode::Auth);
    assert!(
        !auth.message.contains(KEY) && auth.message.contains("<redacted>"),
        "{}",
        auth.message
    );
    assert!(!format!("{p:?}").contains(KEY));
    // Script exhausted: a clear, non-retryable error rather than a hang.
    let done = call(&p, request("f")).await.unwrap_err().failure;
    assert_eq!(done.code, FailureCode::InvalidRequest);
    assert!(done.message.contains("exhausted"), "{}", done.message);
}

#[tokio::test]
async fn idle_stream_times_out_and_unreachable_server_is_transport() {
    let server = MockServer::start(script(
        "- { behaviour: stall, text: 'some text before the stall', chunk_size: 4 }\n",
    ))
    .await
    .unwrap();
    let p = provider(&server, Duration::from_millis(300));
    let out = call(&p, request("a")).await.unwrap_err();
    assert_eq!(out.failure.code, FailureCode::Timeout);
    assert!(!out.partial.is_empty());

    let addr = server.addr();
    drop(server);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let config = ProviderConfig::new(
        "x",
        format!("http://{addr}"),
        ApiKey::new(KEY, "K").unwrap(),
    );
    let p = OpenAiProvider::new(config).unwrap();
    assert_eq!(code(call(&p, request("b")).await), FailureCode::Transport);
}

#[tokio::test]
async fn cancellation_mid_stream_returns_the_blocks_streamed_so_far() {
    let (_server, p) = serve("- { behaviour: stall, reasoning: 'thinking hard', text: 'partial answer that stalls', chunk_size: 5 }\n").await;
    let cancel = CancellationToken::new();
    let mut stream = p.stream(request("a"), cancel.clone());
    let mut asm = keel_llm::BlockAssembler::new();
    let mut seen = 0;
    let failure = loop {
        match tokio::time::timeout(Duration::from_millis(300), stream.next()).await {
            Ok(Some(Ok(chunk))) => {
                asm.push(&chunk).unwrap();
                seen += 1;
            }
            Ok(Some(Err(f))) => break f,
            Ok(None) => panic!("stream ended without failure"),
            Err(_) => cancel.cancel(), // stalled: the caller gives up
        }
    };
    assert_eq!(failure.code, FailureCode::Aborted);
    assert!(seen > 2);
    let partial = asm.partial();
    assert_eq!(partial[0], ContentBlock::reasoning("thinking hard"));
    let ContentBlock::Text { text } = &partial[1] else {
        panic!("{partial:?}")
    };
    assert!("partial answer that stalls".starts_with(text.as_str()) && !text.is_empty());
    assert!(stream.next().await.is_none(), "nothing after the failure");
}

#[tokio::test]
async fn utf8_and_events_split_across_reads_with_crlf_and_comments() {
    let text = "naïve café — 日本語 🌍🚀";
    let (_server, p) = serve(&format!(
        "- text: '{text}'\n  reasoning: 'é🌍'\n  write_size: 1\n  crlf: true\n  comments: true\n  chunk_size: 7\n"
    ))
    .await;
    let out = call(&p, request("a")).await.unwrap();
    assert_eq!(
        out.content,
        vec![ContentBlock::reasoning("é🌍"), ContentBlock::text(text)]
    );
}

#[tokio::test]
async fn one_megabyte_tool_argument_arrives_intact() {
    let big = "x".repeat(1024 * 1024);
    let args = serde_json::to_string(&json!({"content": big})).unwrap();
    let yaml = serde_yaml::to_string(
        &json!([{"tool_calls": [{"name": "write", "arguments": args}], "chunk_size": 4096}]),
    )
    .unwrap();
    let (_server, p) = serve(&yaml).await;
    let out = call(&p, request("write it")).await.unwrap();
    let [ContentBlock::ToolCall(c)] = out.content.as_slice() else {
        panic!("{:?}", out.content.len())
    };
    assert_eq!(c.arguments.len(), args.len());
    assert!(c.arguments == args);
}

#[tokio::test]
async fn retry_policy_drives_a_same_request_retry_to_success() {
    let (server, p) = serve("- { behaviour: server_error }\n- { behaviour: rate_limit, retry_after: 0.01 }\n- text: ok\n").await;
    let policy = RetryPolicy {
        base_delay: Duration::from_millis(5),
        ..RetryPolicy::seeded(5)
    };
    let mut attempt = 0;
    let out = loop {
        match call(&p, request("a")).await {
            Ok(out) => break out,
            Err(e) => {
                attempt += 1;
                match policy.decide(attempt, &e.failure) {
                    RetryDecision::Retry { delay } => tokio::time::sleep(delay).await,
                    RetryDecision::GiveUp => panic!("gave up on {}", e.failure),
                }
            }
        }
    };
    assert_eq!(out.content, vec![ContentBlock::text("ok")]);
    assert_eq!(attempt, 2);
    let bodies = server.requests();
    assert_eq!(bodies.len(), 3);
    assert!(
        bodies.iter().all(|b| b == &bodies[0]),
        "a retry resends the same body"
    );
}

/// The scripted provider and the HTTP client produce the same result for the same script.
#[tokio::test]
async fn scripted_provider_matches_the_http_client() {
    let yaml = r#"
- { reasoning: "r1", text: "t1", usage: { prompt: 10, completion: 5, cache_hit: 0 } }
- { tool_calls: [{ name: read, arguments: { a: 1 } }, { name: bash, arguments: '{"broken"' }], usage: { prompt: 10, completion: 5, cache_hit: 0 } }
- { behaviour: max_tokens, text: "cut", tool_calls: [{ name: write, arguments: { c: "xyz" } }], usage: { prompt: 1, completion: 1 } }
- { behaviour: empty }
- { behaviour: malformed_json, text: abc }
- { behaviour: stream_disconnect, text: "abcdefghijklmnopqrstuvwxyz", chunk_size: 2 }
- { behaviour: rate_limit, retry_after: 3 }
- { behaviour: quota_exceeded }
- { behaviour: connection_reset }
"#;
    let (_server, http) = serve(yaml).await;
    let scripted = ScriptedProvider::from_str(yaml, ScriptFormat::Yaml).unwrap();
    for n in 0..9 {
        let a = call(&http, request("x")).await;
        let b = call(&scripted, request("x")).await;
        match (a, b) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "response {n}"),
            (Err(a), Err(b)) => {
                assert_eq!(a.failure.code, b.failure.code, "response {n}");
                assert_eq!(
                    a.failure.retry_after_ms, b.failure.retry_after_ms,
                    "response {n}"
                );
                assert_eq!(a.partial, b.partial, "response {n}");
            }
            (a, b) => panic!("response {n}: {a:?} vs {b:?}"),
        }
    }
    assert_eq!(scripted.remaining(), 0);
    assert_eq!(scripted.requests().len(), 9);
}

#[tokio::test]
async fn the_key_goes_in_the_authorization_header_and_no_key_sends_none() {
    let (server, with_key) = serve("responses:\n  - text: one\n  - text: two\n").await;
    call(&with_key, request("a")).await.unwrap();
    let keyless =
        OpenAiProvider::new(ProviderConfig::without_key("local", server.base_url())).unwrap();
    call(&keyless, request("b")).await.unwrap();
    let auth: Vec<Option<String>> = server
        .request_headers()
        .iter()
        .map(|h| h.get("Authorization").map(str::to_owned))
        .collect();
    assert_eq!(auth, vec![Some(format!("Bearer {KEY}")), None]);
}

/// Serves one HTTP request on a loopback port with `events` (`(type, data)`) as an SSE body;
/// the request's head and body come back through the join handle.
async fn serve_sse_once(
    events: Vec<(&'static str, serde_json::Value)>,
) -> (String, tokio::task::JoinHandle<(String, serde_json::Value)>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let handle = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = Vec::new();
        let (head, body) = loop {
            let mut read = [0u8; 8192];
            let n = socket.read(&mut read).await.unwrap();
            assert!(n > 0, "the client closed before sending its request");
            buf.extend_from_slice(&read[..n]);
            let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let length: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().unwrap())
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                break (head, buf[end + 4..end + 4 + length].to_vec());
            }
        };
        let mut reply = String::from(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n",
        );
        for (kind, data) in events {
            reply.push_str(&format!("event: {kind}\ndata: {data}\n\n"));
        }
        socket.write_all(reply.as_bytes()).await.unwrap();
        socket.shutdown().await.unwrap();
        (head, serde_json::from_slice(&body).unwrap())
    });
    (base, handle)
}

#[tokio::test]
async fn a_responses_call_streams_reasoning_text_and_a_tool_call() {
    let ev = |kind: &'static str, mut data: serde_json::Value| {
        data["type"] = json!(kind);
        (kind, data)
    };
    let function_call = |arguments: &str| json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read", "arguments": arguments});
    let (base, server) = serve_sse_once(vec![
        ev("response.created", json!({"response": {"id": "resp_1", "status": "in_progress"}})),
        ev("response.output_item.added", json!({"output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "summary": []}})),
        ev("response.reasoning_summary_text.delta", json!({"output_index": 0, "summary_index": 0, "delta": "Need the file."})),
        ev("response.output_item.done", json!({"output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "encrypted_content": "enc-1", "summary": [{"type": "summary_text", "text": "Need the file."}]}})),
        ev("response.output_item.added", json!({"output_index": 1, "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}})),
        ev("response.output_text.delta", json!({"output_index": 1, "content_index": 0, "delta": "Reading 🌍."})),
        ev("response.output_item.done", json!({"output_index": 1, "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": "Reading 🌍."}]}})),
        ev("response.output_item.added", json!({"output_index": 2, "item": function_call("")})),
        ev("response.function_call_arguments.delta", json!({"output_index": 2, "delta": "{\"file_path\":"})),
        ev("response.function_call_arguments.delta", json!({"output_index": 2, "delta": "\"a.txt\"}"})),
        ev("response.output_item.done", json!({"output_index": 2, "item": function_call("{\"file_path\":\"a.txt\"}")})),
        ev("response.completed", json!({"response": {"id": "resp_1", "status": "completed", "usage": {"input_tokens": 900, "input_tokens_details": {"cached_tokens": 300}, "output_tokens": 40, "output_tokens_details": {"reasoning_tokens": 10}}}})),
    ])
    .await;
    let mut config = ProviderConfig::new("openai", base, ApiKey::new(KEY, "TEST_KEY").unwrap());
    config.api = keel_llm::WireApi::Responses;
    let p = OpenAiProvider::new(config).unwrap();
    let out = call(&p, request("read a.txt")).await.unwrap();
    assert_eq!(
        out,
        Assembled {
            content: vec![
                ContentBlock::Reasoning {
                    text: "Need the file.".into(),
                    signature: Some("enc-1".into()),
                },
                ContentBlock::text("Reading 🌍."),
                ContentBlock::ToolCall(ToolCallBlock {
                    id: "call_1".into(),
                    name: "read".into(),
                    arguments: r#"{"file_path":"a.txt"}"#.into(),
                }),
            ],
            usage: Some(TokenUsage {
                input_tokens: 600,
                output_tokens: 40,
                cache_read_tokens: 300,
                reasoning_tokens: 10,
                cache_write_tokens: 0,
            }),
            finish: Some(FinishReason::ToolCalls),
        }
    );
    let (head, body) = server.await.unwrap();
    assert!(head.starts_with("POST /v1/responses HTTP/1.1"), "{head}");
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["store"], json!(false));
    assert_eq!(
        body["input"],
        json!([{"role": "user", "content": [{"type": "input_text", "text": "read a.txt"}]}])
    );
}

/// A base URL's credentials (user info, a `?token=` query) never reach a failure's text: what
/// reqwest says names the URL, and a failure's text goes into the session log.
#[tokio::test]
async fn a_base_urls_credentials_are_redacted_from_failures() {
    fn with_secrets(addr: std::net::SocketAddr) -> String {
        format!("http://user-secret-0:pw-secret-1@{addr}/v1?token=q-secret-2")
    }
    fn clean(message: &str) {
        for secret in ["user-secret-0", "pw-secret-1", "q-secret-2"] {
            assert!(!message.contains(secret), "{secret} in {message}");
        }
    }
    let server = MockServer::start(script(
        "- { behaviour: stream_disconnect, text: 'half of this answer and then nothing' }\n",
    ))
    .await
    .unwrap();
    let addr = server.addr();
    let config = ProviderConfig::new("x", with_secrets(addr), ApiKey::new(KEY, "K").unwrap());
    let p = OpenAiProvider::new(config).unwrap();
    let broke = call(&p, request("a")).await.unwrap_err().failure;
    clean(&broke.message);
    drop(server);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let unreachable = call(&p, request("b")).await.unwrap_err().failure;
    assert_eq!(unreachable.code, FailureCode::Transport);
    // The URL is still named, without its credentials.
    assert!(
        unreachable.message.contains(&addr.to_string()),
        "{}",
        unreachable.message
    );
    clean(&unreachable.message);
}
