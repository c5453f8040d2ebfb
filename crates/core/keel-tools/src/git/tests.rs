//! A real repository with every program its configuration can make git run planted (hooks,
//! fsmonitor, filter/diff drivers, external diff, pager): keel's git runs none of them, the
//! same commands without it do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::subprocess::SubprocessConfig;
use std::path::Path;

/// A script that records its run as `marks/<name>` and passes its stdin through.
fn script(bin: &Path, marks: &Path, name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = bin.join(name);
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\ntouch '{}/{name}'\nif [ -f \"$1\" ]; then cat \"$1\"; else cat; fi\n",
            marks.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// git as a user would run it, without keel's hardening (the control).
fn plain(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn ok(out: std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A repository whose committed `.gitattributes` routes every file through the filter and
/// diff driver `evil`, with `.git/config` and `.git/hooks` planted after the commit and an
/// uncommitted change to `a.txt`. Returns (repository, marks directory).
fn planted(tmp: &Path) -> (PathBuf, PathBuf) {
    let repo = tmp.join("repo");
    let marks = tmp.join("marks");
    let bin = tmp.join("bin");
    for d in [&repo, &marks, &bin] {
        std::fs::create_dir_all(d).unwrap();
    }
    ok(plain(&repo, &["init", "-q"]));
    std::fs::write(repo.join("a.txt"), "one\n").unwrap();
    std::fs::write(repo.join(".gitattributes"), "* filter=evil diff=evil\n").unwrap();
    ok(plain(&repo, &["add", "-A"]));
    ok(plain(&repo, &["commit", "-qm", "init"]));
    let hooks = repo.join(".git/hooks");
    for hook in [
        "post-checkout",
        "post-commit",
        "pre-commit",
        "post-index-change",
        "reference-transaction",
    ] {
        let s = script(&bin, &marks, &format!("hook-{hook}"));
        std::fs::copy(&s, hooks.join(hook)).unwrap();
    }
    for (key, name) in [
        ("core.fsmonitor", "fsmonitor"),
        ("filter.evil.clean", "filter-clean"),
        ("filter.evil.smudge", "filter-smudge"),
        ("diff.evil.textconv", "diff-textconv"),
        ("diff.evil.command", "diff-command"),
        ("core.pager", "pager"),
        ("pager.diff", "pager-diff"),
    ] {
        let s = script(&bin, &marks, name);
        ok(plain(&repo, &["config", key, &s.to_string_lossy()]));
    }
    ok(plain(&repo, &["config", "filter.evil.required", "true"]));
    std::fs::write(repo.join("a.txt"), "two\n").unwrap();
    (repo, marks)
}

fn marks(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn run(git: Git) -> String {
    ok(git.std_command().unwrap().output().unwrap())
}

#[test]
fn nothing_the_repository_plants_runs_through_keels_git() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, marks_dir) = planted(tmp.path());
    let keel = |args: &[&str]| {
        Git::new(&repo)
            .config("user.name", "keel")
            .config("user.email", "keel@localhost")
            .args(args)
    };
    run(keel(&["status"]).read_only());
    let diff = run(keel(&["diff"]).read_only());
    assert!(diff.contains("+two"), "{diff}");
    run(keel(&["diff", "HEAD"]).read_only());
    run(keel(&["log", "-p", "-1"]).read_only());
    run(keel(&["show", "HEAD"]).read_only());
    run(keel(&["rev-parse", "--show-toplevel"]).read_only());
    let stash = run(keel(&["stash", "create"]));
    let tree = tmp.path().join("tree");
    run(keel(&[
        "worktree",
        "add",
        "--detach",
        &tree.to_string_lossy(),
        stash.trim(),
    ]));
    assert_eq!(
        std::fs::read_to_string(tree.join("a.txt")).unwrap(),
        "two\n"
    );
    run(keel(&["add", "-A"]));
    run(keel(&["commit", "-qm", "second"]));
    run(keel(&["checkout", "-q", "HEAD~1", "--", "a.txt"]));
    assert_eq!(marks(&marks_dir), Vec::<String>::new());
}

#[test]
fn the_same_commands_without_it_run_what_the_repository_planted() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, marks_dir) = planted(tmp.path());
    ok(plain(&repo, &["status"]));
    ok(plain(&repo, &["diff", "HEAD"]));
    ok(plain(&repo, &["diff", "--no-ext-diff", "HEAD"]));
    ok(plain(&repo, &["add", "-A"]));
    let tree = tmp.path().join("tree");
    ok(plain(
        &repo,
        &["worktree", "add", "--detach", &tree.to_string_lossy()],
    ));
    ok(plain(&repo, &["commit", "-qm", "second"]));
    let ran = marks(&marks_dir);
    for expected in [
        "diff-command",
        "diff-textconv",
        "filter-clean",
        "filter-smudge",
        "fsmonitor",
        "hook-post-checkout",
        "hook-post-commit",
        "hook-pre-commit",
    ] {
        assert!(
            ran.iter().any(|m| m == expected),
            "{expected} not in {ran:?}"
        );
    }
}

#[tokio::test]
async fn the_tokio_command_and_the_service_spec_are_hardened_too() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, marks_dir) = planted(tmp.path());
    let out = Git::new(&repo)
        .args(["diff"])
        .read_only()
        .tokio_command()
        .await
        .unwrap()
        .output()
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("+two"));
    let mut cfg = SubprocessConfig::from_process_env(tmp.path().join("spill"));
    // An inherited GIT_DIR and external diff are not the repository keel asked for.
    cfg.base_env.push(("GIT_DIR".into(), "/nonexistent".into()));
    cfg.base_env
        .push(("GIT_EXTERNAL_DIFF".into(), marks_dir.join("x").into()));
    let sp = SubprocessService::new(cfg);
    let spec = Git::new(&repo)
        .args(["diff", "HEAD"])
        .read_only()
        .spec(&sp)
        .await
        .unwrap();
    let out = sp.run(spec, &CancellationToken::new()).await.unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr.text());
    assert!(out.stdout.text().contains("+two"));
    assert_eq!(marks(&marks_dir), Vec::<String>::new());
}

#[test]
fn drivers_named_in_included_files_and_with_odd_names_are_found() {
    let listing = b"global\0filter.lfs.clean\0local\0filter.a=b.c.clean\0local\0diff.external\0\
local\0diff.X.textconv\0local\0merge.m.driver\0worktree\0core.fsmonitor\0";
    assert_eq!(
        named_overrides(listing),
        vec![
            ("filter.a=b.c.clean".to_owned(), ""),
            ("filter.a=b.c.required".to_owned(), "false"),
            ("diff.X.textconv".to_owned(), "cat"),
            ("merge.m.driver".to_owned(), ""),
        ]
    );
    let tmp = tempfile::tempdir().unwrap();
    let (repo, marks_dir) = planted(tmp.path());
    let bin = tmp.path().join("bin");
    let s = script(&bin, &marks_dir, "included-clean");
    let inc = tmp.path().join("inc.cfg");
    std::fs::write(
        &inc,
        format!("[filter \"o=dd\"]\n\tclean = {}\n", s.display()),
    )
    .unwrap();
    ok(plain(
        &repo,
        &["config", "include.path", &inc.to_string_lossy()],
    ));
    std::fs::write(repo.join(".gitattributes"), "* filter=o=dd\n").unwrap();
    run(Git::new(&repo).args(["add", "-A"]));
    assert_eq!(marks(&marks_dir), Vec::<String>::new());
    std::fs::write(repo.join("a.txt"), "three\n").unwrap();
    ok(plain(&repo, &["add", "-A"]));
    assert!(marks(&marks_dir).contains(&"included-clean".to_owned()));
}

#[test]
fn a_read_only_git_cannot_write_outside_the_temp_directory() {
    if !matches!(
        read_only_confinement().enforcement(),
        crate::subprocess::confine::Enforcement::Landlock { .. }
    ) {
        eprintln!("no Landlock on this kernel: nothing to show");
        return;
    }
    // Beside the test binary: under the target directory, not the temp directory.
    let exe = std::env::current_exe().unwrap();
    let near = exe.parent().unwrap();
    if near.starts_with(std::env::temp_dir()) {
        return;
    }
    let dir = tempfile::tempdir_in(near).unwrap();
    let out = Git::new(dir.path())
        .args(["init", "-q"])
        .read_only()
        .std_command()
        .unwrap()
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(!dir.path().join(".git").exists());
    run(Git::new(dir.path()).args(["init", "-q"]));
    assert!(dir.path().join(".git").exists());
}

#[test]
fn the_command_line_carries_the_overrides_and_the_diff_flags() {
    let argv: Vec<String> = Git::new(".")
        .config("user.name", "keel")
        .args(["diff", "--cached"])
        .argv()
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert_eq!(argv[0], "--no-pager");
    assert_eq!(argv[1..3], ["-c", "user.name=keel"]);
    assert!(argv.contains(&"core.hooksPath=/dev/null".to_owned()));
    assert_eq!(
        argv[argv.len() - 4..],
        ["diff", "--no-ext-diff", "--no-textconv", "--cached"]
    );
}
