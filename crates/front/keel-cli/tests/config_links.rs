//! The project's `.keel/config.toml` is the repository's: `keel mcp add`, `keel mcp remove`
//! and `keel config set --project` open it beneath the workspace, so a link planted in the
//! repository never leads their read or their write to a file outside it.
#![allow(clippy::unwrap_used)]

mod support;

use std::os::unix::fs::symlink;
use support::*;

const OUTSIDE_TEXT: &str = "# the user's file outside the workspace\nmodel = \"kept\"\n";

fn keel(env: &Env, args: &[&str]) -> Output {
    run(env.keel_bare().args(args))
}

/// A workspace whose `.keel/config.toml` is a link to `outside/victim.toml`.
fn linked_file() -> (Env, std::path::PathBuf) {
    let env = Env::new();
    let victim = env.outside.join("victim.toml");
    std::fs::write(&victim, OUTSIDE_TEXT).unwrap();
    std::fs::create_dir_all(env.ws.join(".keel")).unwrap();
    symlink(&victim, env.ws.join(".keel/config.toml")).unwrap();
    (env, victim)
}

#[test]
fn a_linked_project_config_is_neither_read_nor_written_through() {
    for args in [
        &["mcp", "add", "files", "--", "echo", "hi"][..],
        &["config", "set", "--project", "model", "other"][..],
        &["mcp", "remove", "files"][..],
    ] {
        let (env, victim) = linked_file();
        let out = keel(&env, args);
        assert_ne!(out.code, Some(0), "keel {args:?} succeeded: {}", out.stdout);
        assert!(
            out.stderr.contains(".keel/config.toml"),
            "keel {args:?}: the error names the file\n{}",
            out.stderr
        );
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            OUTSIDE_TEXT,
            "keel {args:?} changed the file outside the workspace"
        );
        // The link is still a link: nothing was written in its place either.
        let meta = std::fs::symlink_metadata(env.ws.join(".keel/config.toml")).unwrap();
        assert!(meta.file_type().is_symlink(), "keel {args:?}");
    }
}

#[test]
fn a_linked_keel_directory_is_not_written_through() {
    let env = Env::new();
    let elsewhere = env.outside.join("dir");
    std::fs::create_dir_all(&elsewhere).unwrap();
    symlink(&elsewhere, env.ws.join(".keel")).unwrap();
    for args in [
        &["mcp", "add", "files", "--", "echo", "hi"][..],
        &["config", "set", "--project", "model", "other"][..],
    ] {
        let out = keel(&env, args);
        assert_ne!(out.code, Some(0), "keel {args:?} succeeded: {}", out.stdout);
        assert!(
            !elsewhere.join("config.toml").exists(),
            "keel {args:?} wrote outside the workspace"
        );
    }
}

#[test]
fn a_link_inside_the_workspace_is_replaced_not_followed() {
    // A (relative) link that stays inside the workspace is read (it leads nowhere out), and
    // the write replaces the link with the file rather than writing through it.
    let env = Env::new();
    env.write("shared.toml", "model = \"m\"\n");
    std::fs::create_dir_all(env.ws.join(".keel")).unwrap();
    symlink("../shared.toml", env.ws.join(".keel/config.toml")).unwrap();
    let out = keel(&env, &["mcp", "add", "files", "--", "echo", "hi"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let written = env.read(".keel/config.toml");
    assert!(
        written.contains("model = \"m\"") && written.contains("[mcp_servers.files]"),
        "{written}"
    );
    let meta = std::fs::symlink_metadata(env.ws.join(".keel/config.toml")).unwrap();
    assert!(meta.file_type().is_file());
    assert_eq!(env.read("shared.toml"), "model = \"m\"\n");
}
