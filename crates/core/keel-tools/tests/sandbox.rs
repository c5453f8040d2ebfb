//! The OS sandbox for commands (Landlock): real `bash` children writing inside and outside the
//! workspace under each mode. The fixture's workspace, "outside" directory and temp directory
//! are siblings under one temporary root, and the workspace's temp directory is set to the
//! fixture's own, so "outside" is outside every writable place even though it lies under /tmp.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod common;

use common::{Fixture, call, run_one};
use keel_testkit::recording::{Log, RecordingHost};
use keel_tools::subprocess::confine::{ConfineSpec, Confinement, Enforcement, NetworkRule};
use keel_tools::subprocess::{CommandSpec, OutputMode};
use keel_tools::{ApprovalOutcome, Pipeline, SandboxMode, ToolHooks, Workspace, enter_plan_mode};
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

/// One call through `p` answered by a host that gives `answer` to every approval; (outcome,
/// the reasons asked).
async fn escalated(
    p: &Pipeline,
    c: keel_protocol::ToolCallBlock,
    answer: keel_tools::ApprovalOutcome,
) -> (keel_tools::ToolOutcome, Vec<String>) {
    let host = RecordingHost::answering(Log::default(), answer);
    let mut out = p.run_batch(&[c], &host, Default::default()).await;
    let asked = host.asked().into_iter().map(|(_, r)| r).collect();
    (out.remove(0), asked)
}

fn escalating(
    id: &str,
    tool: &str,
    mut args: serde_json::Value,
    mode: &str,
) -> keel_protocol::ToolCallBlock {
    args["sandbox_permissions"] = json!(mode);
    args["justification"] = json!("the build cache lives outside the workspace");
    call(id, tool, args)
}

#[tokio::test]
async fn an_escalated_call_asks_a_person_and_runs_unconfined_only_when_approved() {
    let s = Sandboxed::new();
    let ws = s.workspace(SandboxMode::WorkspaceWrite);
    let confined = landlock_available(&ws);
    let p = s.pipeline(ws);
    let target = s.outside("written.txt");
    let write = |id: &str| {
        escalating(
            id,
            "write",
            json!({"file_path": target.display().to_string(), "content": "x"}),
            "danger-full-access",
        )
    };

    // Refused by the person: nothing written, the model told not to ask again.
    let denied = ApprovalOutcome::Denied {
        reason: Some("not now".into()),
    };
    let (out, asked) = escalated(&p, write("w1"), denied).await;
    assert_eq!(out.code(), Some("DENIED"), "{}", out.text());
    assert!(
        out.text()
            .contains("sandbox_permissions=danger-full-access"),
        "{}",
        out.text()
    );
    assert!(out.text().contains("(not now)"), "{}", out.text());
    assert!(!target.exists());
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].contains("outside the workspace-write sandbox, with danger-full-access")
            && asked[0].contains("the build cache lives outside the workspace"),
        "{}",
        asked[0]
    );

    // Nobody to ask: refused naming the flag.
    let nobody = ApprovalOutcome::Unanswered {
        reason: Some("headless".into()),
    };
    let (out, _) = escalated(&p, write("w2"), nobody).await;
    assert_eq!(out.code(), Some("DENIED"));
    assert!(
        out.text().contains("'sandbox_permissions' needs a person"),
        "{}",
        out.text()
    );
    assert!(!target.exists());

    // Approved: the write lands outside, and the outcome says it ran escalated.
    let (out, _) = escalated(&p, write("w3"), ApprovalOutcome::Approved).await;
    assert!(!out.is_error, "{}", out.text());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "x");
    assert_eq!(
        out.meta.as_ref().unwrap()["sandboxEscalated"],
        "danger-full-access"
    );

    // The same write without the flag is still refused by the sandbox, unasked.
    let plain = call(
        "w4",
        "write",
        json!({"file_path": s.outside("plain.txt").display().to_string(), "content": "x"}),
    );
    let (out, asked) = escalated(&p, plain, ApprovalOutcome::Approved).await;
    assert_eq!(out.code(), Some("DENIED"), "{}", out.text());
    assert!(asked.is_empty());

    // A command: confined without the flag (where the kernel confines), unconfined when approved.
    let escape = format!("echo y > {}", s.outside("ran.txt").display());
    let (out, _) = escalated(
        &p,
        call("b1", "bash", json!({"command": escape})),
        ApprovalOutcome::Approved,
    )
    .await;
    assert_eq!(s.outside("ran.txt").exists(), !confined, "{}", out.text());
    let (out, _) = escalated(
        &p,
        escalating(
            "b2",
            "bash",
            json!({"command": escape}),
            "danger-full-access",
        ),
        ApprovalOutcome::Approved,
    )
    .await;
    assert!(!out.is_error, "{}", out.text());
    assert!(s.outside("ran.txt").exists());
}

#[tokio::test]
async fn an_escalation_is_checked_before_anyone_is_asked() {
    let s = Sandboxed::new();
    let p = s.pipeline(s.workspace(SandboxMode::WorkspaceWrite));

    // A mode without a justification is refused as arguments, naming the missing one.
    let mut args = json!({"command": "true", "sandbox_permissions": "danger-full-access"});
    let (out, asked) = escalated(
        &p,
        call("a", "bash", args.take()),
        ApprovalOutcome::Approved,
    )
    .await;
    assert_eq!(out.code(), Some("INVALID_ARGS"));
    assert!(out.text().contains("'justification'"), "{}", out.text());
    assert!(asked.is_empty());

    // A mode the schema does not know is refused by it.
    let (out, _) = escalated(
        &p,
        escalating("b", "bash", json!({"command": "true"}), "root"),
        ApprovalOutcome::Approved,
    )
    .await;
    assert_eq!(out.code(), Some("INVALID_ARGS"), "{}", out.text());

    // Tools that cannot escalate do not take the flag.
    let (out, _) = escalated(
        &p,
        escalating("c", "read", json!({"file_path": "x"}), "danger-full-access"),
        ApprovalOutcome::Approved,
    )
    .await;
    assert_eq!(out.code(), Some("INVALID_ARGS"));
    assert!(out.text().contains("sandbox_permissions"), "{}", out.text());

    // Asking for no more than the session has runs the call without asking.
    let (out, asked) = escalated(
        &p,
        escalating(
            "d",
            "bash",
            json!({"command": "echo ok"}),
            "workspace-write",
        ),
        ApprovalOutcome::Denied { reason: None },
    )
    .await;
    assert!(!out.is_error, "{}", out.text());
    assert!(asked.is_empty());

    // Plan mode refuses the request itself, naming the flag, without asking.
    let host = RecordingHost::new(Log::default(), false);
    enter_plan_mode(p.plan_state(), &host).await;
    let (out, asked) = escalated(
        &p,
        escalating(
            "e",
            "bash",
            json!({"command": "true"}),
            "danger-full-access",
        ),
        ApprovalOutcome::Approved,
    )
    .await;
    assert_eq!(out.code(), Some("DENIED"));
    assert!(
        out.text()
            .contains("'sandbox_permissions' is not available in plan mode"),
        "{}",
        out.text()
    );
    assert!(asked.is_empty());
}
