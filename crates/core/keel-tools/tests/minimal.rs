//! The minimal preset's tools through the pipeline, with real files and a real `bash`: the
//! persistent shell keeps its directory and variables, reports statuses, survives a timeout
//! by starting over; `str_replace_editor` views, creates, replaces and inserts under the same
//! rules as read/write/edit.
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
async fn the_minimal_preset_offers_its_two_tools() {
    let f = Fixture::new();
    let p = minimal(&f);
    let names: Vec<String> = p.registry().names().map(str::to_owned).collect();
    assert_eq!(names, ["bash", "str_replace_editor", "exit_plan_mode"]);
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
async fn str_replace_editor_views_creates_replaces_and_inserts() {
    let f = Fixture::new();
    f.write("src/a.txt", "one\ntwo\nthree\n");
    f.write("src/deep/b.txt", "b");
    f.write(".hidden", "h");
    let p = minimal(&f);
    let ed = |args: serde_json::Value| {
        let p = &p;
        async move { run_one(p, call("e", "str_replace_editor", args)).await }
    };

    // Editing before viewing is refused as `edit` refuses it.
    let out = ed(
        json!({"command": "str_replace", "path": "src/a.txt", "old_str": "two", "new_str": "2"}),
    )
    .await;
    assert!(out.text().starts_with("FILE_NOT_READ:"), "{}", out.text());

    let out = ed(json!({"command": "view", "path": "src/a.txt", "view_range": [2, -1]})).await;
    assert!(out.text().contains("2: two\n3: three"), "{}", out.text());
    assert!(!out.text().contains("1: one"), "{}", out.text());
    let out = ed(json!({"command": "view", "path": "."})).await;
    assert_eq!(
        out.text(),
        "./ (two levels, hidden entries left out):\nsrc/\nsrc/a.txt\nsrc/deep/"
    );

    let out = ed(
        json!({"command": "str_replace", "path": "src/a.txt", "old_str": "two", "new_str": "2"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.text());
    let out =
        ed(json!({"command": "insert", "path": "src/a.txt", "insert_line": 0, "new_str": "zero"}))
            .await;
    assert!(!out.is_error, "{}", out.text());
    let out = ed(
        json!({"command": "insert", "path": "src/a.txt", "insert_line": 4, "new_str": "four\n"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.text());
    assert_eq!(f.read("src/a.txt"), "zero\none\n2\nthree\nfour\n");

    let out = ed(json!({"command": "create", "path": "new/c.txt", "file_text": "c"})).await;
    assert!(!out.is_error, "{}", out.text());
    assert_eq!(f.read("new/c.txt"), "c");

    // Bad input names what is wrong.
    let out =
        ed(json!({"command": "insert", "path": "src/a.txt", "insert_line": 99, "new_str": "x"}))
            .await;
    assert!(
        out.text()
            .contains("insert_line 99 is outside 'src/a.txt', which has 5 lines"),
        "{}",
        out.text()
    );
    let out = ed(json!({"command": "create", "path": "d.txt"})).await;
    assert!(
        out.text().contains("'create' needs 'file_text'"),
        "{}",
        out.text()
    );
    let out = ed(json!({"command": "view", "path": "src/a.txt", "view_range": [3, 1]})).await;
    assert_eq!(out.code(), Some("INVALID_ARGS"), "{}", out.text());
    let out = ed(json!({"command": "delete", "path": "src/a.txt"})).await;
    assert_eq!(out.code(), Some("INVALID_ARGS"), "{}", out.text());
    let out = ed(json!({"command": "create", "path": f.outside.join("x").display().to_string(), "file_text": "x"})).await;
    assert_eq!(out.code(), Some("DENIED"), "{}", out.text());
}

#[tokio::test]
async fn str_replace_editor_does_not_list_a_directory_linked_out_of_the_workspace() {
    let f = Fixture::new();
    f.write("src/a.txt", "a");
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("MARKER.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(outside.path(), f.ws.join("src/out")).unwrap();
    let p = minimal(&f);
    let out = run_one(
        &p,
        call(
            "e",
            "str_replace_editor",
            json!({"command": "view", "path": "."}),
        ),
    )
    .await;
    assert!(!out.is_error, "{}", out.text());
    assert!(out.text().contains("src/out\n") || out.text().ends_with("src/out"));
    assert!(!out.text().contains("MARKER"), "{}", out.text());
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
