//! The engine on its own: programs, hostile programs, limits, scheduling of sub-calls. The
//! bridge here is a small in-process tool set (the pipeline bridge is tested end to end in
//! keel-cli's `code_mode` test and in `bridge.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use keel_codemode::engine::{
    self, Bridge, Completed, Failed, FailureKind, Limits, SubCall, SubResult,
};
use keel_tools::ExecMode;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// `echo` returns its arguments; `slow` sleeps `ms` and counts how many run at once; `excl` is
/// exclusive and records whether anything else ran beside it; `fail` rejects.
#[derive(Default)]
struct Tools {
    now: AtomicUsize,
    peak: AtomicUsize,
    excl_overlapped: AtomicUsize,
    calls: Mutex<Vec<SubCall>>,
}

#[async_trait]
impl Bridge for Tools {
    fn mode(&self, name: &str) -> ExecMode {
        if name == "excl" {
            ExecMode::Exclusive
        } else {
            ExecMode::Parallel
        }
    }

    async fn call(&self, call: SubCall, cancel: CancellationToken) -> SubResult {
        self.calls.lock().unwrap().push(call.clone());
        let args: Value = serde_json::from_str(&call.arguments).unwrap();
        let running = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(running, Ordering::SeqCst);
        let ms = args["ms"].as_u64().unwrap_or(0);
        let cancelled = tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(ms)) => false,
            () = cancel.cancelled() => true,
        };
        if call.name == "excl" && self.now.load(Ordering::SeqCst) > 1 {
            self.excl_overlapped.fetch_add(1, Ordering::SeqCst);
        }
        self.now.fetch_sub(1, Ordering::SeqCst);
        if cancelled {
            return SubResult {
                ok: false,
                text: "cancelled".into(),
                code: Some("ABORTED".into()),
            };
        }
        match call.name.as_str() {
            "fail" => SubResult {
                ok: false,
                text: "no such file: x.txt".into(),
                code: Some("TOOL_FAILED".into()),
            },
            _ => SubResult {
                ok: true,
                text: call.arguments.clone(),
                code: None,
            },
        }
    }
}

fn names() -> Vec<String> {
    ["echo", "excl", "fail", "slow"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

async fn run_with(code: &str, limits: Limits) -> (Result<Completed, Failed>, Tools) {
    let tools = Tools::default();
    let out = engine::run(code, &names(), &limits, &tools, &CancellationToken::new()).await;
    (out, tools)
}

async fn run(code: &str) -> Result<Completed, Failed> {
    run_with(code, Limits::default()).await.0
}

async fn fails(code: &str) -> Failed {
    match run(code).await {
        Ok(done) => panic!("expected a failure, got {done:?}"),
        Err(f) => f,
    }
}

fn result(done: &Completed) -> Value {
    serde_json::from_str(&done.result).unwrap()
}

#[tokio::test]
async fn a_program_returns_a_value_and_its_logs() {
    let done = run("console.log('a', 1, {b: 2}); const x = 6 * 7; return {x, s: 'ok'};")
        .await
        .unwrap();
    assert_eq!(done.logs, vec!["a 1 {\"b\":2}"]);
    assert_eq!(result(&done), json!({"x": 42, "s": "ok"}));
    assert_eq!(done.sub_calls, 0);
    assert_eq!(run("let y = 1;").await.unwrap().result, "null");
    assert_eq!(run("return 10n;").await.unwrap().result, "\"10\"");
}

#[tokio::test]
async fn tool_calls_resolve_to_their_text_and_failures_reject_with_code_and_tool() {
    let done = run(
        "const a = await tools.echo({path: 'a.txt'});
         let caught;
         try { await tools.fail({}); } catch (e) { caught = [e.toolName, e.code, e.message, e instanceof Error]; }
         return {a, caught};",
    )
    .await
    .unwrap();
    assert_eq!(
        result(&done),
        json!({"a": "{\"path\":\"a.txt\"}", "caught": ["fail", "TOOL_FAILED", "no such file: x.txt", true]})
    );
    assert_eq!(done.sub_calls, 2);

    // Uncaught, a failed call ends the program with the tool, the code and the line.
    let f = fails("const a = 1;\nawait tools.fail({});\nreturn a;").await;
    assert_eq!(f.kind, FailureKind::Thrown);
    assert_eq!(f.message, "Error: no such file: x.txt");
    assert_eq!(f.line, Some(2));
    assert_eq!(
        (f.tool_name.as_deref(), f.code.as_deref()),
        (Some("fail"), Some("TOOL_FAILED"))
    );
}

#[tokio::test]
async fn parallel_calls_overlap_up_to_the_bound_and_exclusive_ones_run_alone() {
    let limits = Limits {
        max_parallel: 3,
        ..Limits::default()
    };
    let (out, tools) = run_with(
        "const ps = [];
         for (let i = 0; i < 8; i++) ps.push(tools.slow({ms: 30, i}));
         ps.push(tools.excl({ms: 30}));
         for (let i = 0; i < 2; i++) ps.push(tools.slow({ms: 30, i}));
         return (await Promise.all(ps)).length;",
        limits,
    )
    .await;
    assert_eq!(out.unwrap().result, "11");
    assert_eq!(tools.peak.load(Ordering::SeqCst), 3);
    assert_eq!(tools.excl_overlapped.load(Ordering::SeqCst), 0);
    let order: Vec<String> = tools
        .calls
        .lock()
        .unwrap()
        .iter()
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(order[8], "excl", "{order:?}");
}

#[tokio::test]
async fn a_syntax_error_names_its_line() {
    let f = fails("const a = 1;\nconst b = ;\nreturn a;").await;
    assert_eq!(f.kind, FailureKind::Syntax);
    assert!(f.message.starts_with("SyntaxError"), "{f:?}");
    assert_eq!(f.line, Some(2), "{f:?}");
}

#[tokio::test]
async fn a_thrown_error_names_its_line_and_keeps_the_logs() {
    let f = fails("console.log('before');\n\n  null.x;\n").await;
    assert_eq!(f.kind, FailureKind::Thrown);
    assert!(f.message.starts_with("TypeError"), "{f:?}");
    assert_eq!(f.line, Some(3));
    assert_eq!(f.logs, vec!["before"]);
    let f = fails("throw 'plain';").await;
    assert_eq!(f.message, "thrown value: plain");
}

#[tokio::test]
async fn an_infinite_loop_stops_at_the_time_limit() {
    let limits = Limits {
        time: Duration::from_millis(300),
        ..Limits::default()
    };
    let started = std::time::Instant::now();
    let (out, _) = run_with("while (true) {}", limits.clone()).await;
    let f = out.unwrap_err();
    assert_eq!(f.kind, FailureKind::TimeLimit, "{f:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // A loop that catches everything cannot keep running either.
    let (out, _) = run_with(
        "for (;;) { try { while (true) {} } catch (e) {} }",
        limits.clone(),
    )
    .await;
    assert_eq!(out.unwrap_err().kind, FailureKind::TimeLimit);
    // Waiting on a slow tool is bounded by the same limit.
    let (out, _) = run_with("await tools.slow({ms: 60000});", limits).await;
    assert_eq!(out.unwrap_err().kind, FailureKind::TimeLimit);
}

#[tokio::test]
async fn an_allocation_bomb_stops_at_the_memory_limit() {
    let limits = Limits {
        memory_bytes: 16 * 1024 * 1024,
        ..Limits::default()
    };
    let (out, _) = run_with(
        "const a = []; while (true) a.push('x'.repeat(1 << 20) + a.length);",
        limits.clone(),
    )
    .await;
    let f = out.unwrap_err();
    assert_eq!(f.kind, FailureKind::MemoryLimit, "{f:?}");
    let (out, _) = run_with(
        "const a = []; while (true) a.push(new Array(100000).fill(1));",
        limits,
    )
    .await;
    assert_eq!(out.unwrap_err().kind, FailureKind::MemoryLimit);
}

#[tokio::test]
async fn deep_recursion_is_a_stack_error_not_a_crash() {
    let f = fails("function f(n) { return f(n + 1) + 1; }\nreturn f(0);").await;
    assert_eq!(f.kind, FailureKind::StackLimit, "{f:?}");
    // Caught, the program goes on.
    let done = run("function f(n) { return f(n + 1) + 1; }\ntry { f(0); } catch (e) { return 'caught ' + e.name; }")
        .await
        .unwrap();
    assert!(done.result.starts_with("\"caught"), "{done:?}");
}

#[tokio::test]
async fn there_is_no_ambient_authority() {
    let done = run(
        "const probe = (f) => { try { const v = f(); return typeof v; } catch (e) { return e.name; } };
         let dynamicImport;
         try { await import('fs'); dynamicImport = 'loaded'; } catch (e) { dynamicImport = e.name || String(e); }
         return {
           require: probe(() => require('fs')),
           fetch: probe(() => fetch('http://127.0.0.1/')),
           process: probe(() => process.env),
           Deno: probe(() => Deno.readTextFile),
           std: probe(() => std.loadFile),
           os: probe(() => os.exec),
           setTimeout: probe(() => setTimeout(() => {}, 1)),
           globals: Object.getOwnPropertyNames(globalThis).filter(n => /^[a-z]/.test(n)).sort(),
           dynamicImport,
         };",
    )
    .await
    .unwrap();
    let r = result(&done);
    for name in [
        "require",
        "fetch",
        "process",
        "Deno",
        "std",
        "os",
        "setTimeout",
    ] {
        assert_eq!(r[name], "ReferenceError", "{name}: {r}");
    }
    assert_ne!(r["dynamicImport"], "loaded", "{r}");
    // Lower-case globals: the language's own functions, and the two the prelude installs.
    assert_eq!(
        r["globals"],
        json!([
            "console",
            "decodeURI",
            "decodeURIComponent",
            "encodeURI",
            "encodeURIComponent",
            "escape",
            "eval",
            "globalThis",
            "isFinite",
            "isNaN",
            "parseFloat",
            "parseInt",
            "queueMicrotask",
            "tools",
            "undefined",
            "unescape"
        ])
    );
}

#[tokio::test]
async fn tools_and_console_cannot_be_replaced_and_undeclared_tools_do_not_exist() {
    let done = run(
        "tools.echo = null; try { globalThis.tools = 1; } catch (e) {}
         let nested;
         try { await tools.run_code({code: 'return 1'}); } catch (e) { nested = e.name; }
         return [typeof tools.echo, typeof tools, nested, Object.keys(tools)];",
    )
    .await
    .unwrap();
    assert_eq!(
        result(&done),
        json!([
            "function",
            "object",
            "TypeError",
            ["echo", "excl", "fail", "slow"]
        ])
    );
}

#[tokio::test]
async fn a_program_waiting_on_nothing_is_stalled_not_hung() {
    let f = fails("await new Promise(() => {});").await;
    assert_eq!(f.kind, FailureKind::Stalled);
}

#[tokio::test]
async fn cancellation_stops_a_running_program_and_its_calls() {
    let tools = Tools::default();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        trigger.cancel();
    });
    let f = engine::run(
        "await tools.slow({ms: 60000});",
        &names(),
        &Limits::default(),
        &tools,
        &cancel,
    )
    .await
    .unwrap_err();
    assert_eq!(f.kind, FailureKind::Cancelled);
    assert_eq!(
        tools.now.load(Ordering::SeqCst),
        0,
        "the sub-call settled before the run ended"
    );

    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        trigger.cancel();
    });
    let f = engine::run(
        "while (true) {}",
        &names(),
        &Limits::default(),
        &tools,
        &cancel,
    )
    .await
    .unwrap_err();
    assert_eq!(f.kind, FailureKind::Cancelled, "{f:?}");
}

#[tokio::test]
async fn logs_are_bounded() {
    let limits = Limits {
        max_log_lines: 3,
        ..Limits::default()
    };
    let (out, _) = run_with("for (let i = 0; i < 10; i++) console.log(i);", limits).await;
    let done = out.unwrap();
    assert_eq!(done.logs, vec!["0", "1", "2"]);
    assert_eq!(done.logs_dropped, 7);
}

#[tokio::test]
async fn a_closed_wrapper_is_refused() {
    let f = fails("return 1; })(); (function () {").await;
    assert!(matches!(f.kind, FailureKind::Syntax), "{f:?}");
}
