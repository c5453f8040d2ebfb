//! The cost of an MCP tool call over stdio against the real `@modelcontextprotocol/server-everything`
//! (`echo`), through keel's client (the MCP runtime, the server connection, the result as JSON),
//! and the start-up of one and of three servers in parallel. Needs the pinned npm packages
//! (`npm ci --prefix crates/plugins/keel-mcp/tests/node`) or `$KEEL_TEST_MCP_NODE_BIN`.
//!
//! `cargo bench -p keel-mcp --bench mcp`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use keel_mcp::client::runtime::McpRuntime;
use keel_mcp::client::server::Server;
use keel_mcp::config::{ServerConfig, Transport};
use keel_tools::subprocess::{SubprocessConfig, SubprocessService};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn everything() -> String {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/node/node_modules/.bin");
    [
        Some(repo),
        std::env::var_os("KEEL_TEST_MCP_NODE_BIN").map(PathBuf::from),
    ]
    .into_iter()
    .flatten()
    .map(|d| d.join("mcp-server-everything"))
    .find(|p| p.exists())
    .expect("npm ci --prefix crates/plugins/keel-mcp/tests/node")
    .display()
    .to_string()
}

fn server(name: &str) -> Arc<Server> {
    let sp = SubprocessService::new(SubprocessConfig::from_process_env(std::env::temp_dir()));
    Arc::new(Server::new(
        ServerConfig {
            name: name.into(),
            transport: Transport::Stdio {
                command: everything(),
                args: vec!["stdio".into()],
                env: Default::default(),
                cwd: None,
            },
            enabled: true,
            startup_timeout: Duration::from_secs(30),
            tool_timeout: Duration::from_secs(30),
            enabled_tools: None,
            disabled_tools: Vec::new(),
            origin: "bench".into(),
            protocol_version: None,
        },
        sp,
        std::env::temp_dir(),
    ))
}

fn bench(c: &mut Criterion) {
    let rt = Arc::new(McpRuntime::start().unwrap());
    let s = server("everything");
    rt.wait({
        let s = s.clone();
        async move { s.start().await.unwrap() }
    })
    .unwrap();
    let args: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(r#"{"message":"ping"}"#).unwrap();
    let mut g = c.benchmark_group("mcp");
    g.sample_size(200).measurement_time(Duration::from_secs(8));
    g.bench_function("call/echo/stdio", |b| {
        b.iter(|| {
            let s = s.clone();
            let args = args.clone();
            rt.wait(async move {
                s.call("echo", Some(args), CancellationToken::new())
                    .await
                    .unwrap()
            })
            .unwrap()
        })
    });
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    for n in [1usize, 3] {
        g.bench_function(format!("start/{n}-in-parallel"), |b| {
            b.iter(|| {
                let servers: Vec<Arc<Server>> = (0..n).map(|i| server(&format!("s{i}"))).collect();
                rt.wait(async move {
                    let all = futures::future::join_all(servers.iter().map(|s| s.start())).await;
                    assert!(all.iter().all(Result::is_ok));
                    drop(servers);
                })
                .unwrap()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
