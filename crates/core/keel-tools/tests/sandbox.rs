//! The OS sandbox for commands (Landlock): real `bash` children writing inside and outside the
//! workspace under each mode. The fixture's workspace, "outside" directory and temp directory
//! are siblings under one temporary root, and the workspace's temp directory is set to the
//! fixture's own, so "outside" is outside every writable place even though it lies under /tmp.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod common;

use common::{Fixture, call, run_one};
use keel_tools::subprocess::confine::{ConfineSpec, Confinement, Enforcement, NetworkRule};
use keel_tools::subprocess::{CommandSpec, OutputMode};
use keel_tools::{Pipeline, SandboxMode, ToolHooks, Workspace};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

struct Sandboxed {
    f: Fixture,
    tmp: PathBuf,
}

impl Sandboxed {
    fn new() -> Self {
        let f = Fixture::new();
        let tmp = f.dir.path().join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        Sandboxed { f, tmp }
    }

    fn workspace(&self, mode: SandboxMode) -> Workspace {
        let mut ws = Workspace::new(&self.f.ws, mode).unwrap();
        ws.set_temp_dir(&self.tmp).unwrap();
        ws
    }

    fn pipeline(&self, ws: Workspace) -> Pipeline {
        self.f
            .pipeline_for(ws, self.f.registry(vec![]), ToolHooks::new())
    }

    fn outside(&self, name: &str) -> PathBuf {
        self.f.outside.join(name)
    }
}

/// Run `command` through the `bash` tool; (text the model reads, exit code).
async fn bash(p: &Pipeline, command: &str) -> (String, i64) {
    let out = run_one(p, call("c", "bash", json!({ "command": command }))).await;
    let code = out
        .meta
        .as_ref()
        .and_then(|m| m["exitCode"].as_i64())
        .unwrap_or(-1);
    (out.text(), code)
}

/// Whether this kernel enforces Landlock at all. Where it does not, the tests check that keel
/// says so instead of claiming a confinement.
fn landlock_available(ws: &Workspace) -> bool {
    match ws.confinement().enforcement() {
        Enforcement::Landlock { .. } => true,
        Enforcement::Unavailable { reason } => {
            eprintln!("Landlock not available here ({reason}); checking the report only");
            assert!(!ws.confinement().enforcement().is_complete());
            false
        }
        Enforcement::Unconfined => panic!("workspace-write reported as unconfined"),
    }
}

/// The escapes of the issue: `..`, an absolute path outside, a system path, a symlink from
/// inside pointing out, a rename out, a directory made outside.
fn escapes(s: &Sandboxed) -> Vec<(String, PathBuf)> {
    let out = s.f.outside.display().to_string();
    vec![
        ("echo x > ../outside/dotdot".into(), s.outside("dotdot")),
        (format!("echo x > {out}/absolute"), s.outside("absolute")),
        (
            "touch /etc/keel-sandbox-probe".into(),
            PathBuf::from("/etc/keel-sandbox-probe"),
        ),
        (
            format!("ln -s {out} link && echo x > link/via-symlink"),
            s.outside("via-symlink"),
        ),
        (
            format!("echo x > moved && mv moved {out}/moved"),
            s.outside("moved"),
        ),
        (format!("mkdir {out}/made"), s.outside("made")),
    ]
}

#[tokio::test]
async fn workspace_write_refuses_writes_outside_with_the_os_error() {
    let s = Sandboxed::new();
    let ws = s.workspace(SandboxMode::WorkspaceWrite);
    if !landlock_available(&ws) {
        return;
    }
    let p = s.pipeline(ws);
    for (command, target) in escapes(&s) {
        let (text, code) = bash(&p, &command).await;
        let made = target.exists() || target.symlink_metadata().is_ok();
        if target.starts_with("/etc") {
            let _ = std::fs::remove_file(&target);
        }
        assert!(!made, "{command}: wrote {}", target.display());
        assert_ne!(code, 0, "{command}: {text}");
        assert!(
            text.contains("Permission denied") || text.contains("Operation not permitted"),
            "{command}: the OS error reaches the model: {text}"
        );
        assert!(
            text.ends_with("[sandbox: file access denied under workspace-write mode]"),
            "{command}: the refusal is marked as the sandbox's: {text}"
        );
    }
}

#[tokio::test]
async fn workspace_write_allows_the_workspace_temp_and_dev_null() {
    let s = Sandboxed::new();
    let ws = s.workspace(SandboxMode::WorkspaceWrite);
    let p = s.pipeline(ws);
    let (text, code) = bash(
        &p,
        "mkdir -p sub && echo in > sub/inside.txt && mv sub/inside.txt moved.txt && \
         echo t > \"$TMPDIR/t.txt\" && echo gone > /dev/null && cat moved.txt \"$TMPDIR/t.txt\"",
    )
    .await;
    assert_eq!((text.as_str(), code), ("in\nt\n", 0));
    assert_eq!(std::fs::read_to_string(s.tmp.join("t.txt")).unwrap(), "t\n");
}

#[tokio::test]
async fn the_compiler_and_git_work_inside_a_confined_workspace() {
    let s = Sandboxed::new();
    let ws = s.workspace(SandboxMode::WorkspaceWrite);
    let p = s.pipeline(ws);
    let (text, code) = bash(
        &p,
        "git init -q && echo 'fn main() { println!(\"built\"); }' > m.rs && \
         rustc -O m.rs -o m && ./m && git add m.rs && \
         git -c user.email=k@example.com -c user.name=keel commit -qm first && \
         git log --format=%s",
    )
    .await;
    assert_eq!((text.as_str(), code), ("built\nfirst\n", 0), "{text}");
}

#[tokio::test]
async fn full_access_runs_the_same_escapes_unconfined() {
    let s = Sandboxed::new();
    let ws = s.workspace(SandboxMode::FullAccess);
    assert_eq!(ws.confinement().enforcement(), &Enforcement::Unconfined);
    let p = s.pipeline(ws);
    for (command, target) in escapes(&s) {
        if target.starts_with("/etc") {
            continue; // not written on the machine running the tests
        }
        let (text, code) = bash(&p, &command).await;
        assert_eq!(code, 0, "{command}: {text}");
        assert!(target.symlink_metadata().is_ok(), "{command}: nothing made");
    }
}

#[tokio::test]
async fn an_extra_writable_root_is_writable_for_commands_and_file_tools() {
    let s = Sandboxed::new();
    let mut ws = s.workspace(SandboxMode::WorkspaceWrite);
    ws.add_writable(&s.f.outside).unwrap();
    let p = s.pipeline(ws);
    let out = s.f.outside.display().to_string();
    let (text, code) = bash(&p, &format!("echo x > {out}/by-bash")).await;
    assert_eq!(code, 0, "{text}");
    let target = s.outside("by-write");
    let written = run_one(
        &p,
        call(
            "w",
            "write",
            json!({ "path": target.display().to_string(), "content": "y" }),
        ),
    )
    .await;
    assert!(!written.is_error, "{}", written.text());
    assert_eq!(std::fs::read_to_string(target).unwrap(), "y");
}

/// Run `command` under `confinement` through the subprocess service directly.
async fn confined(s: &Sandboxed, confinement: Confinement, command: &str) -> (String, Option<i32>) {
    let out =
        s.f.service(vec![], &[])
            .run(
                CommandSpec::new(["/bin/bash", "-c", command])
                    .cwd(&s.f.ws)
                    .env("TMPDIR", &s.tmp)
                    .output(OutputMode::Merged)
                    .confine(Arc::new(confinement)),
                &CancellationToken::new(),
            )
            .await
            .unwrap();
    (out.stdout.text(), out.code)
}

fn spec<'a>(
    s: &'a Sandboxed,
    mode: SandboxMode,
    roots: &'a [PathBuf],
    network: bool,
) -> ConfineSpec<'a> {
    ConfineSpec {
        mode,
        roots,
        extra_writable: &[],
        temp: &s.tmp,
        network,
    }
}

#[tokio::test]
async fn read_only_allows_temp_only() {
    let s = Sandboxed::new();
    let roots = [s.f.ws.clone()];
    let c = Confinement::prepare(&spec(&s, SandboxMode::ReadOnly, &roots, true));
    if !matches!(c.enforcement(), Enforcement::Landlock { .. }) {
        assert!(!c.enforcement().is_complete());
        return;
    }
    let (text, code) = confined(&s, c, "echo x > inside.txt").await;
    assert_ne!(code, Some(0));
    assert!(text.contains("Permission denied"), "{text}");
    assert!(!s.f.ws.join("inside.txt").exists());
    let c = Confinement::prepare(&spec(&s, SandboxMode::ReadOnly, &roots, true));
    let (text, code) = confined(
        &s,
        c,
        "echo x > \"$TMPDIR/ok\" && cat inside-missing 2>/dev/null; cat \"$TMPDIR/ok\"",
    )
    .await;
    assert_eq!((text.as_str(), code), ("x\n", Some(0)));
}

#[tokio::test]
async fn a_closed_network_refuses_tcp_and_an_open_one_connects() {
    let s = Sandboxed::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let roots = [s.f.ws.clone()];
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");

    let closed = Confinement::prepare(&spec(&s, SandboxMode::WorkspaceWrite, &roots, false));
    match closed.enforcement().clone() {
        Enforcement::Landlock {
            network: NetworkRule::TcpClosed,
            ..
        } => {
            let (text, code) = confined(&s, closed, &connect).await;
            assert_ne!(code, Some(0), "{text}");
            assert!(text.contains("Permission denied"), "{text}");
        }
        other => {
            assert!(!other.is_complete(), "{other}");
            return;
        }
    }
    let open = Confinement::prepare(&spec(&s, SandboxMode::WorkspaceWrite, &roots, true));
    assert!(matches!(
        open.enforcement(),
        Enforcement::Landlock {
            network: NetworkRule::Open,
            ..
        }
    ));
    let (text, code) = confined(&s, open, &connect).await;
    assert_eq!((text.as_str(), code), ("connected\n", Some(0)));
}

#[test]
fn the_enforcement_reads_as_what_it_is() {
    let ll = Enforcement::Landlock {
        abi: 7,
        network: NetworkRule::NotEnforced,
    };
    assert!(!ll.is_complete());
    assert!(ll.to_string().contains("network NOT closed"), "{ll}");
    let none = Enforcement::Unavailable {
        reason: "this kernel has no Landlock".into(),
    };
    assert_eq!(
        none.to_string(),
        "none: commands run unconfined (this kernel has no Landlock)"
    );
}
