//! The minimal preset's tools through the pipeline, with real files and a real `bash`: the
//! persistent shell keeps its directory and variables, reports statuses, survives a timeout
//! by starting over; `working_directory` moves where relative paths start, within the sandbox.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Fixture, call, run_one};
use keel_tools::builtins::BashConfig;
use keel_tools::{BuiltinConfig, Pipeline, Preset, SandboxMode, ToolHooks, ToolRegistry};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn minimal(f: &Fixture) -> Pipeline {
    let cfg = BuiltinConfig {
        preset: Preset::Minimal,
        bash: BashConfig {
            default_timeout: Duration::from_secs(20),
            ..BashConfig::default()
        },
        ..BuiltinConfig::default()
    };
    let registry = Arc::new(ToolRegistry::with_builtins(&cfg));
    f.pipeline_with(SandboxMode::WorkspaceWrite, registry, ToolHooks::new())
}

async fn sh(p: &Pipeline, args: serde_json::Value) -> keel_tools::ToolOutcome {
    run_one(p, call("c", "bash", args)).await
}

#[tokio::test]
async fn the_minimal_preset_is_dsh_0_2s() {
    let f = Fixture::new();
    let p = minimal(&f);
    let names: Vec<String> = p.registry().names().map(str::to_owned).collect();
    assert_eq!(
        names,
        [
            "bash",
            "read",
            "write",
            "edit",
            "working_directory",
            "exit_plan_mode"
        ]
    );
}

#[tokio::test]
async fn the_shell_keeps_its_directory_and_variables_between_calls() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.ws.join("sub")).unwrap();
    let p = minimal(&f);
    let out = sh(
        &p,
        json!({"command": "cd sub && export GREETING=hi && x() { echo fn-$1; }"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.text());
    assert_eq!(out.text(), "(no output)");
    let out = sh(
        &p,
        json!({"command": "pwd; echo $GREETING; x 1; echo err >&2"}),
    )
    .await;
    assert_eq!(
        out.text(),
        format!("{}\nhi\nfn-1\nerr\n", f.ws.join("sub").display())
    );
    // A failing command reports its status; stdin is not the shell's script.
    let out = sh(&p, json!({"command": "cat; false"})).await;
    assert_eq!(out.text(), "(no output)\n[exit code: 1]");
    assert_eq!(out.meta.as_ref().unwrap()["exitCode"], 1);
    // `restart` starts over in the working directory.
    let out = sh(
        &p,
        json!({"command": "pwd; echo ${GREETING:-unset}", "restart": true}),
    )
    .await;
    assert_eq!(
        out.text(),
        format!("[shell restarted]\n{}\nunset\n", f.ws.display())
    );
}

#[tokio::test]
async fn a_timeout_or_an_exit_kills_the_shell_and_the_next_call_starts_fresh() {
    let f = Fixture::new();
    let p = minimal(&f);
    sh(&p, json!({"command": "cd /tmp && V=1"})).await;
    let out = sh(
        &p,
        json!({"command": "echo before; sleep 30", "timeoutMs": 300}),
    )
    .await;
    assert_eq!(out.code(), Some("TOOL_TIMEOUT"), "{}", out.text());
    assert!(out.text().contains("before"), "{}", out.text());
    let out = sh(&p, json!({"command": "pwd; echo ${V:-gone}"})).await;
    assert_eq!(
        out.text(),
        format!(
            "[the previous shell had ended; this is a fresh one]\n{}\ngone\n",
            f.ws.display()
        )
    );
    let out = sh(&p, json!({"command": "echo bye; exit 3"})).await;
    assert!(out.text().ends_with("bye\n"), "{}", out.text());
    assert!(
        out.text()
            .contains("[the shell exited; the next call starts a fresh one]"),
        "{}",
        out.text()
    );
    let out = sh(&p, json!({"command": "echo again"})).await;
    assert!(out.text().ends_with("again\n"), "{}", out.text());
}

#[tokio::test]
async fn working_directory_moves_where_paths_and_new_commands_start() {
    let f = Fixture::new();
    f.write("sub/notes.txt", "in sub\n");
    let p = minimal(&f);
    let wd = |args: serde_json::Value| {
        let p = &p;
        async move { run_one(p, call("w", "working_directory", args)).await }
    };
    let root = std::fs::canonicalize(&f.ws).unwrap();
    let out = wd(json!({})).await;
    assert_eq!(out.text(), format!("Working directory: {}", root.display()));
    let out = wd(json!({"cd": "sub"})).await;
    assert!(!out.is_error, "{}", out.text());
    assert_eq!(
        out.text(),
        format!("Working directory is now {}", root.join("sub").display())
    );
    // `read` resolves a relative path against the new directory.
    let out = run_one(&p, call("r", "read", json!({"file_path": "notes.txt"}))).await;
    assert!(out.text().contains("in sub"), "{}", out.text());
    // Bad input is a named tool error, and the sandbox decides where `cd` may go.
    let out = wd(json!({"cd": "notes.txt"})).await;
    assert_eq!(out.code(), Some("INVALID_ARGS"), "{}", out.text());
    assert!(
        out.text().contains("'notes.txt' is not a directory"),
        "{}",
        out.text()
    );
    let out = wd(json!({"cd": f.outside.display().to_string()})).await;
    assert_eq!(out.code(), Some("DENIED"), "{}", out.text());
    let out = wd(json!({"cd": "no-such-dir"})).await;
    assert!(out.is_error, "{}", out.text());
    let out = wd(json!({})).await;
    assert!(out.text().ends_with("/sub"), "{}", out.text());
}

#[tokio::test]
async fn read_image_refuses_a_fifo_without_waiting_on_it() {
    let f = Fixture::new();
    let made = std::process::Command::new("mkfifo")
        .arg(f.ws.join("pic.png"))
        .status()
        .unwrap();
    assert!(made.success());
    let cfg = BuiltinConfig {
        preset: Preset::Minimal,
        images: Some(keel_tools::Attachments::new(
            f.dir.path().join("attachments"),
        )),
        ..BuiltinConfig::default()
    };
    let registry = Arc::new(ToolRegistry::with_builtins(&cfg));
    let p = f.pipeline_with(SandboxMode::WorkspaceWrite, registry, ToolHooks::new());
    let out = run_one(&p, call("i", "read_image", json!({"file_path": "pic.png"}))).await;
    assert!(out.is_error, "{}", out.text());
    assert!(out.text().contains("not a regular file"), "{}", out.text());
}
