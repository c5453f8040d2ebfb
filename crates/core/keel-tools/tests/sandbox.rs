//! The OS sandbox for commands (Landlock): real `bash` children writing inside and outside the
//! workspace under each mode. The fixture's workspace, "outside" directory and temp directory
//! are siblings under one temporary root, and the workspace's temp directory is set to the
//! fixture's own, so "outside" is outside every writable place even though it lies under /tmp.
//! The protected paths (`.git`, `.keel`, `.mcp.json` …) are read-only to commands under
//! `workspace-write` through read-only binds in each command's own mount namespace.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod common;

use common::{Fixture, call, run_one};
use keel_testkit::recording::{Log, RecordingHost};
use keel_tools::subprocess::confine::{
    ConfineSpec, Confinement, Enforcement, NetworkRule, ProtectedRule,
};
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
        protected: ProtectedRule::ReadOnly,
    };
    assert!(!ll.is_complete());
    assert!(ll.to_string().contains("network NOT closed"), "{ll}");
    let full = Enforcement::Landlock {
        abi: 7,
        network: NetworkRule::Open,
        protected: ProtectedRule::ReadOnly,
    };
    assert!(full.is_complete());
    assert_eq!(
        full.to_string(),
        "landlock (ABI 7): writes confined, protected paths read-only, network open"
    );
    let writable = Enforcement::Landlock {
        abi: 7,
        network: NetworkRule::Open,
        protected: ProtectedRule::NotEnforced {
            reason: "no mount namespace: Operation not permitted (os error 1)".into(),
        },
    };
    assert!(!writable.is_complete());
    assert_eq!(
        writable.to_string(),
        "landlock (ABI 7): writes confined, protected paths NOT read-only to commands (no mount \
         namespace: Operation not permitted (os error 1)), network open"
    );
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

// Protected paths (`keel_tools::protected`): read-only to commands under `workspace-write`
// (each command's own mount namespace), writable under `full-access`.

/// The protected files a trusted project holds: a git repository, `.keel/config.toml`,
/// `.claude/settings.json` and `.mcp.json`.
const PROTECTED_FILES: &[&str] = &[
    ".git/config",
    ".git/HEAD",
    ".keel/config.toml",
    ".claude/settings.json",
    ".mcp.json",
];

/// Make the fixture's workspace such a project.
fn with_protected(s: &Sandboxed) {
    let out = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&s.f.ws)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    s.f.write(
        ".keel/config.toml",
        "[sandbox]\nmode = \"workspace-write\"\n",
    );
    s.f.write(".claude/settings.json", "{}\n");
    s.f.write(".mcp.json", "{\"mcpServers\":{}}\n");
}

/// The protected files' contents (`None`: missing).
fn protected_contents(s: &Sandboxed) -> Vec<(&'static str, Option<String>)> {
    PROTECTED_FILES
        .iter()
        .map(|f| (*f, std::fs::read_to_string(s.f.ws.join(f)).ok()))
        .collect()
}

/// Whether this machine keeps the protected paths read-only to commands. Where it cannot (no
/// Landlock, no mount namespace) the tests check that keel says so.
fn protected_read_only(ws: &Workspace) -> bool {
    if !landlock_available(ws) {
        return false;
    }
    match ws.confinement().enforcement() {
        Enforcement::Landlock {
            protected: ProtectedRule::ReadOnly,
            ..
        } => true,
        other => {
            eprintln!("protected paths not read-only here ({other}); checking the report only");
            assert!(!other.is_complete());
            assert!(
                other
                    .to_string()
                    .contains("protected paths NOT read-only to commands"),
                "{other}"
            );
            false
        }
    }
}

/// Assert `command` failed with EROFS, marked as the sandbox's refusal.
fn assert_read_only(command: &str, (text, code): (String, i64)) {
    assert_ne!(code, 0, "{command}: {text}");
    assert!(
        text.contains("Read-only file system"),
        "{command}: the OS error reaches the model: {text}"
    );
    assert!(
        text.ends_with("[sandbox: file access denied under workspace-write mode]"),
        "{command}: {text}"
    );
}

/// The writes of issue 44 part 3: a git hook and `core.fsmonitor`, keel's sandbox, Claude
/// Code's hooks, an MCP server.
const PLANTS: &[&str] = &[
    "echo '[core]' >> .git/config",
    "printf '#!/bin/sh\\ntouch pwned\\n' > .git/hooks/post-checkout",
    "git config core.fsmonitor 'touch pwned'",
    "echo 'sandbox = \"full-access\"' >> .keel/config.toml",
    "echo '{\"hooks\":{}}' > .claude/settings.json",
    "echo '{\"mcpServers\":{\"x\":{\"command\":\"sh\"}}}' > .mcp.json",
    "touch .keel/more.toml",
];

#[tokio::test]
async fn protected_paths_are_read_only_to_commands_unless_full_access() {
    let s = Sandboxed::new();
    with_protected(&s);
    let ws = s.workspace(SandboxMode::WorkspaceWrite);
    if !protected_read_only(&ws) {
        return;
    }
    let before = protected_contents(&s);
    let p = s.pipeline(ws);
    let (text, code) = bash(
        &p,
        "mkdir -p src && echo x > src/x && cat src/x && git status --short >/dev/null && \
         cat .git/HEAD .mcp.json",
    )
    .await;
    let expected = format!("x\n{}{{\"mcpServers\":{{}}}}\n", s.f.read(".git/HEAD"));
    assert_eq!((text, code), (expected, 0));
    for command in PLANTS {
        assert_read_only(command, bash(&p, command).await);
    }
    assert_eq!(protected_contents(&s), before);
    assert!(!s.f.ws.join(".git/hooks/post-checkout").exists());
    assert!(!s.f.ws.join(".keel/more.toml").exists());

    let p = s.pipeline(s.workspace(SandboxMode::FullAccess));
    for command in PLANTS {
        let (text, code) = bash(&p, command).await;
        assert_eq!(code, 0, "{command}: {text}");
    }
    assert!(s.f.ws.join(".git/hooks/post-checkout").exists());
    assert!(s.f.read(".keel/config.toml").contains("full-access"));
    assert!(s.f.read(".mcp.json").contains("\"x\""));
}

#[tokio::test]
async fn a_protected_directory_cannot_be_removed_or_renamed_by_a_command() {
    let s = Sandboxed::new();
    with_protected(&s);
    let ws = s.workspace(SandboxMode::WorkspaceWrite);
    if !protected_read_only(&ws) {
        return;
    }
    let before = protected_contents(&s);
    let p = s.pipeline(ws);
    for command in [
        "rm -rf .git",
        "mv .git g",
        "rm -f .mcp.json",
        "mv .mcp.json m.json",
        "rm -rf .keel",
    ] {
        let (text, code) = bash(&p, command).await;
        assert_ne!(code, 0, "{command}: {text}");
    }
    assert_eq!(protected_contents(&s), before);
    assert!(!s.f.ws.join("g").exists() && !s.f.ws.join("m.json").exists());
}

#[tokio::test]
async fn a_command_s_background_children_are_held_to_the_same_binds() {
    let s = Sandboxed::new();
    with_protected(&s);
    let ws = s.workspace(SandboxMode::WorkspaceWrite);
    if !protected_read_only(&ws) {
        return;
    }
    let p = s.pipeline(ws);
    let (text, code) = bash(
        &p,
        "sh -c '(sleep 0.2; { echo x > .git/y; } 2>err.txt; echo \"done $?\" > bg.txt) \
         >/dev/null 2>&1 &'",
    )
    .await;
    assert_eq!(code, 0, "{text}");
    let marker = s.f.ws.join("bg.txt");
    let started = std::time::Instant::now();
    while std::fs::read_to_string(&marker).map_or(true, |t| !t.ends_with('\n')) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the job never ran"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_ne!(std::fs::read_to_string(&marker).unwrap(), "done 0\n");
    let error = s.f.read("err.txt");
    assert!(error.contains("Read-only file system"), "{error}");
    assert!(!s.f.ws.join(".git/y").exists());
}

#[tokio::test]
async fn a_protected_entry_is_read_only_from_inside_from_elsewhere_and_once_it_appears() {
    let s = Sandboxed::new();
    std::fs::create_dir_all(s.f.outside.join(".git")).unwrap();
    let mut ws = s.workspace(SandboxMode::WorkspaceWrite);
    ws.add_writable(&s.f.outside).unwrap();
    if !protected_read_only(&ws) {
        return;
    }
    let p = s.pipeline(ws);
    // No .keel yet: made by the command, it is writable (decided at each spawn).
    let (text, code) = bash(&p, "mkdir .keel && echo a > .keel/config.toml").await;
    assert_eq!(code, 0, "{text}");
    // Once it exists (say an approved escalation made it), the next command cannot write it.
    assert_read_only(".keel", bash(&p, "echo b >> .keel/config.toml").await);
    assert_eq!(s.f.read(".keel/config.toml"), "a\n");
    // Nor from a working directory inside it.
    let out = run_one(
        &p,
        call(
            "w",
            "bash",
            json!({"command": "echo b >> config.toml", "workdir": ".keel"}),
        ),
    )
    .await;
    assert_read_only("in .keel", (out.text(), 1));
    // Nor through a symlink to a place inside the workspace.
    s.f.write("shared/claude/settings.json", "{}\n");
    std::os::unix::fs::symlink("shared/claude", s.f.ws.join(".claude")).unwrap();
    for command in [
        "echo x > .claude/settings.json",
        "echo x > shared/claude/settings.json",
    ] {
        assert_read_only(command, bash(&p, command).await);
    }
    // A symlink leading out of every writable place is Landlock's: refused as before.
    std::os::unix::fs::symlink(s.f.dir.path().join("elsewhere"), s.f.ws.join(".mcp.json")).unwrap();
    let (text, code) = bash(&p, "echo x > .mcp.json").await;
    assert_ne!(code, 0, "{text}");
    assert!(text.contains("Permission denied"), "{text}");
    // The protected entries of an extra writable root too.
    let git = s.f.outside.join(".git");
    assert_read_only(
        "outside/.git",
        bash(&p, &format!("touch {}/hooks", git.display())).await,
    );
    assert!(!git.join("hooks").exists());
}

/// `/proc/self/mountinfo`'s lines.
fn mount_table() -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn the_binds_are_the_command_s_own_and_never_reach_keel() {
    let s = Sandboxed::new();
    with_protected(&s);
    let ws = s.workspace(SandboxMode::WorkspaceWrite);
    if !protected_read_only(&ws) {
        return;
    }
    let before = mount_table();
    let p = s.pipeline(ws);
    let (text, code) = bash(&p, "cat /proc/self/mountinfo").await;
    assert_eq!(code, 0, "{text}");
    // In the command's namespace: each entry mounted on itself, read-only.
    for entry in [".git", ".keel", ".claude", ".mcp.json"] {
        let at = s.f.ws.join(entry).display().to_string();
        assert!(
            text.lines().any(|l| {
                let fields: Vec<&str> = l.split(' ').collect();
                fields[4] == at && fields[5].split(',').any(|o| o == "ro")
            }),
            "{entry} is not a read-only mount in the command's namespace:\n{text}"
        );
    }
    // In keel's: nothing new.
    let after = mount_table();
    let new: Vec<&String> = after.iter().filter(|l| !before.contains(l)).collect();
    assert!(new.is_empty(), "{new:#?}");
    let root = s.f.dir.path().display().to_string();
    assert!(!after.iter().any(|l| l.contains(&root)), "{after:#?}");
}

/// A program clearing the read-only flag of the mount at its argument with `mount_setattr(2)`
/// (which Landlock does not refuse), saying how that went.
const SETATTR_RS: &str = r#"
extern "C" {
    fn syscall(n: i64, ...) -> i64;
}
#[repr(C)]
struct MountAttr { set: u64, clr: u64, propagation: u64, userns_fd: u64 }
fn main() {
    let path = std::ffi::CString::new(std::env::args().nth(1).unwrap()).unwrap();
    let attr = MountAttr { set: 0, clr: 1, propagation: 0, userns_fd: 0 };
    let rc = unsafe { syscall(442, -100i64, path.as_ptr(), 0i64, &attr as *const MountAttr, 32i64) };
    let how = if rc == 0 { "cleared".to_string() } else { std::io::Error::last_os_error().to_string() };
    println!("mount_setattr: {how}");
}
"#;

#[tokio::test]
async fn a_command_cannot_undo_the_binds() {
    let s = Sandboxed::new();
    with_protected(&s);
    let ws = s.workspace(SandboxMode::WorkspaceWrite);
    if !protected_read_only(&ws) {
        return;
    }
    let source = s.tmp.join("setattr.rs");
    std::fs::write(&source, SETATTR_RS).unwrap();
    let out = std::process::Command::new("rustc")
        .args(["--edition", "2021", "-o"])
        .arg(s.tmp.join("setattr"))
        .arg(&source)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let before = protected_contents(&s);
    let p = s.pipeline(ws);
    let command = "umount .git; umount -l .git; mount -o remount,bind,rw .git; \
                   unshare -m sh -c 'umount .git'; \"$TMPDIR/setattr\" .git; echo x >> .git/config";
    let (text, code) = bash(&p, command).await;
    assert!(text.contains("mount_setattr: "), "{text}");
    assert!(!text.contains("mount_setattr: cleared"), "{text}");
    assert_read_only(command, (text, code));
    assert_eq!(protected_contents(&s), before);
}
