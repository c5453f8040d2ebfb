//! The shadow repository against real files and the real `git`: snapshots, restores both
//! ways, caps, kept paths, ignored files and the user's own `.git` left alone.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_checkpoint::{Caps, Shadow};
use pretty_assertions::assert_eq;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

/// Every file under `root` (but `.git`) with its bytes and whether it is executable.
fn tree(root: &Path) -> BTreeMap<String, (Vec<u8>, bool)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if e.file_name() == ".git" {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                let exec = std::fs::metadata(&p).unwrap().permissions().mode() & 0o111 != 0;
                out.insert(rel, (std::fs::read(&p).unwrap(), exec));
            }
        }
    }
    out
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

struct Fixture {
    _tmp: tempfile::TempDir,
    ws: std::path::PathBuf,
    git: std::path::PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let git = tmp.path().join("home/checkpoints/ws/git");
    Fixture { ws, git, _tmp: tmp }
}

#[test]
fn restores_a_workspace_both_ways_exactly() {
    use std::os::unix::fs::PermissionsExt;
    let f = fixture();
    write(&f.ws, "a.txt", "one\n");
    write(&f.ws, "dir/b.txt", "bee\n");
    write(&f.ws, "run.sh", "#!/bin/sh\necho hi\n");
    std::fs::set_permissions(f.ws.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut shadow = Shadow::open(&f.git, &f.ws, Caps::default()).unwrap();
    let first = shadow.snapshot("first").unwrap();
    assert_eq!(first.changed, 3);
    let before = tree(&f.ws);

    // Unchanged: the same checkpoint.
    assert_eq!(shadow.snapshot("again").unwrap().commit, first.commit);

    // Change, delete, create (in a new directory), and drop the executable bit.
    write(&f.ws, "a.txt", "two\n");
    std::fs::remove_file(f.ws.join("dir/b.txt")).unwrap();
    write(&f.ws, "new/deep/c.txt", "sea\n");
    std::fs::set_permissions(f.ws.join("run.sh"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let second = shadow.snapshot("second").unwrap();
    assert_ne!(second.commit, first.commit);
    let after = tree(&f.ws);

    let back = shadow
        .restore(&second.commit, &first.commit, &HashSet::new())
        .unwrap();
    assert_eq!(tree(&f.ws), before);
    assert_eq!(back.removed, ["new/deep/c.txt"]);
    assert!(!f.ws.join("new").exists(), "emptied directories go too");
    // And forward again (redo).
    let now = shadow.snapshot("rewound").unwrap();
    assert!(
        shadow
            .changed_between(&first.commit, &now.commit)
            .unwrap()
            .is_empty()
    );
    shadow
        .restore(&now.commit, &second.commit, &HashSet::new())
        .unwrap();
    assert_eq!(tree(&f.ws), after);
    assert_eq!(
        shadow
            .changed_between(&first.commit, &second.commit)
            .unwrap(),
        ["a.txt", "dir/b.txt", "new/deep/c.txt", "run.sh"]
    );
}

#[test]
fn ignored_files_and_the_users_git_are_left_alone_and_kept_paths_too() {
    let f = fixture();
    std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&f.ws)
        .status()
        .unwrap();
    write(&f.ws, ".gitignore", "target/\n");
    write(&f.ws, "target/out.bin", "build output");
    write(&f.ws, "src/lib.rs", "fn a() {}\n");
    write(&f.ws, "notes.md", "v1\n");
    let user_git_head = std::fs::read(f.ws.join(".git/HEAD")).unwrap();
    let mut shadow = Shadow::open(&f.git, &f.ws, Caps::default()).unwrap();
    let first = shadow.snapshot("first").unwrap();
    assert_eq!(first.changed, 3, "ignored files are not stored");

    write(&f.ws, "target/out.bin", "rebuilt");
    write(&f.ws, "src/lib.rs", "fn b() {}\n");
    write(&f.ws, "notes.md", "v2 by hand\n");
    let second = shadow.snapshot("second").unwrap();
    let keep: HashSet<String> = ["notes.md".to_owned()].into();
    let r = shadow
        .restore(&second.commit, &first.commit, &keep)
        .unwrap();
    assert_eq!(r.written, ["src/lib.rs"]);
    assert_eq!(r.kept, ["notes.md"]);
    assert_eq!(
        std::fs::read_to_string(f.ws.join("src/lib.rs")).unwrap(),
        "fn a() {}\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join("notes.md")).unwrap(),
        "v2 by hand\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join("target/out.bin")).unwrap(),
        "rebuilt"
    );
    assert_eq!(
        std::fs::read(f.ws.join(".git/HEAD")).unwrap(),
        user_git_head
    );
    // The user's repository has no commits and no keel refs.
    let log = std::process::Command::new("git")
        .args(["log", "--oneline"])
        .current_dir(&f.ws)
        .output()
        .unwrap();
    assert!(!log.status.success() || log.stdout.is_empty());
}

#[test]
fn files_over_a_cap_are_listed_as_not_restorable_and_never_touched() {
    let f = fixture();
    write(&f.ws, "small.txt", "s");
    let caps = Caps {
        max_file_bytes: 10,
        max_checkpoint_bytes: 1_000,
        ..Caps::default()
    };
    let mut shadow = Shadow::open(&f.git, &f.ws, caps).unwrap();
    let first = shadow.snapshot("first").unwrap();
    write(&f.ws, "big.bin", "0123456789abcdef");
    write(&f.ws, "small.txt", "t");
    let second = shadow.snapshot("second").unwrap();
    assert_eq!(second.not_restorable, ["big.bin"]);
    shadow
        .restore(&second.commit, &first.commit, &HashSet::new())
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(f.ws.join("small.txt")).unwrap(),
        "s"
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join("big.bin")).unwrap(),
        "0123456789abcdef",
        "not stored, so not removed either"
    );
}

#[test]
fn a_missing_workspace_and_a_damaged_shadow_are_clear_errors() {
    let f = fixture();
    write(&f.ws, "a.txt", "x");
    let mut shadow = Shadow::open(&f.git, &f.ws, Caps::default()).unwrap();
    shadow.snapshot("first").unwrap();
    // The shadow repository damaged under it.
    std::fs::remove_dir_all(f.git.join("objects")).unwrap();
    write(&f.ws, "a.txt", "y");
    let e = shadow.snapshot("second").unwrap_err().to_string();
    assert!(e.contains(&f.git.display().to_string()), "{e}");
    // The workspace gone.
    std::fs::remove_dir_all(&f.ws).unwrap();
    let e = shadow.snapshot("third").unwrap_err().to_string();
    assert!(
        e.contains("not a directory any more") && e.contains("ws"),
        "{e}"
    );
}

#[test]
fn a_workspace_with_too_many_files_gets_no_checkpoint_and_says_why() {
    let f = fixture();
    for i in 0..5 {
        write(&f.ws, &format!("f{i}.txt"), "x");
    }
    let caps = Caps {
        max_files: 4,
        ..Caps::default()
    };
    let mut shadow = Shadow::open(&f.git, &f.ws, caps).unwrap();
    let e = shadow.snapshot("first").unwrap_err().to_string();
    assert!(
        e.contains("more than 4 files") && e.contains("max_files"),
        "{e}"
    );
}

/// `git` with `args` on the shadow repository `git_dir` and the work tree `ws`; its stdout.
fn git(git_dir: &Path, ws: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .arg("--git-dir")
        .arg(git_dir)
        .arg("--work-tree")
        .arg(ws)
        .args(["-c", "core.bare=false"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The objects keel writes itself are git's: `git fsck --strict` finds nothing wrong, and each
/// checkpoint's tree is the tree `git add -A` + `git write-tree` makes of the same files (names
/// that test git's tree order, an executable, a symlink, nested directories, a removal).
#[test]
fn checkpoints_are_the_objects_git_itself_writes() {
    use std::os::unix::fs::PermissionsExt;
    let f = fixture();
    for (path, text) in [
        ("a", "file a\n"),
        ("a.txt", "dot\n"),
        ("a-b", "dash\n"),
        ("b/a", "nested\n"),
        ("b/c/d/e.txt", "deep\n"),
        ("ab/x", "x\n"),
        ("x/in", "a directory sorted as x/\n"),
        ("x.txt", "after x- before x/\n"),
        ("x-y", "first\n"),
        ("empty", ""),
    ] {
        write(&f.ws, path, text);
    }
    write(&f.ws, "aa/z.sh", "#!/bin/sh\n");
    std::fs::set_permissions(f.ws.join("aa/z.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("a.txt", f.ws.join("link")).unwrap();
    let mut shadow = Shadow::open(&f.git, &f.ws, Caps::default()).unwrap();
    let expect_tree = |f: &Fixture| {
        let index = f.git.parent().unwrap().join("check-index");
        let _ = std::fs::remove_file(&index);
        let run = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_INDEX_FILE", &index)
                .arg("--git-dir")
                .arg(&f.git)
                .arg("--work-tree")
                .arg(&f.ws)
                .args(["-c", "core.bare=false"])
                .args(args)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        };
        run(&["add", "-A"]);
        run(&["write-tree"])
    };
    let first = shadow.snapshot("first").unwrap();
    assert_eq!(
        git(
            &f.git,
            &f.ws,
            &["rev-parse", &format!("{}^{{tree}}", first.commit)]
        ),
        expect_tree(&f)
    );
    // A change deep down, a removal that empties a directory, a new file.
    write(&f.ws, "b/c/d/e.txt", "deeper\n");
    std::fs::remove_file(f.ws.join("ab/x")).unwrap();
    write(&f.ws, "new.txt", "new\n");
    let second = shadow.snapshot("second").unwrap();
    assert_eq!(second.paths, ["ab/x", "b/c/d/e.txt", "new.txt"]);
    // A checkpoint after the first of a turn is held in memory until the turn's end (publish)
    // or the next git command; another process does not see it before.
    assert!(
        std::process::Command::new("git")
            .arg("--git-dir")
            .arg(&f.git)
            .args(["cat-file", "-e", &second.commit])
            .status()
            .is_ok_and(|s| !s.success())
    );
    shadow.publish().unwrap();
    assert_eq!(
        git(
            &f.git,
            &f.ws,
            &["rev-parse", &format!("{}^{{tree}}", second.commit)]
        ),
        expect_tree(&f)
    );
    assert_eq!(
        git(
            &f.git,
            &f.ws,
            &["rev-parse", &format!("{}^", second.commit)]
        ),
        first.commit
    );
    assert_eq!(
        git(&f.git, &f.ws, &["rev-parse", "refs/keel/checkpoints"]),
        second.commit
    );
    git(&f.git, &f.ws, &["fsck", "--strict", "--no-dangling"]);
    // A new process reads the last checkpoint back and goes on from it.
    drop(shadow);
    let mut shadow = Shadow::open(&f.git, &f.ws, Caps::default()).unwrap();
    std::fs::remove_file(f.ws.join("a-b")).unwrap();
    let third = shadow.snapshot("third").unwrap();
    assert_eq!(
        git(
            &f.git,
            &f.ws,
            &["rev-parse", &format!("{}^{{tree}}", third.commit)]
        ),
        expect_tree(&f)
    );
    assert_eq!(
        git(&f.git, &f.ws, &["rev-parse", &format!("{}^", third.commit)]),
        second.commit
    );
}

/// A kept file standing where a restored path needs a directory is not replaced by it (git
/// would): the path is reported kept, the file is the user's still.
#[test]
fn a_kept_file_in_the_way_of_a_restored_directory_is_left_alone() {
    let f = fixture();
    write(&f.ws, "dir/b.txt", "bee\n");
    let mut shadow = Shadow::open(&f.git, &f.ws, Caps::default()).unwrap();
    let first = shadow.snapshot("first").unwrap();
    std::fs::remove_dir_all(f.ws.join("dir")).unwrap();
    write(&f.ws, "dir", "a file now, by hand\n");
    let now = shadow.snapshot("now").unwrap();
    let keep: HashSet<String> = ["dir".to_owned()].into();
    let done = shadow.restore(&now.commit, &first.commit, &keep).unwrap();
    assert_eq!(done.kept, ["dir", "dir/b.txt"]);
    assert_eq!(
        std::fs::read_to_string(f.ws.join("dir")).unwrap(),
        "a file now, by hand\n"
    );
}

/// A FIFO in the workspace is not content (git skips it too) and must not hang a snapshot; a
/// restore that removes a file whose directory was swapped for a link out of the workspace
/// removes nothing outside (issue 44: restores work beneath the workspace).
#[test]
fn a_fifo_is_skipped_and_a_removal_never_follows_a_swapped_directory_link() {
    let f = fixture();
    write(&f.ws, "dir/made.txt", "x\n");
    let made = std::process::Command::new("mkfifo")
        .arg(f.ws.join("pipe"))
        .status()
        .unwrap();
    assert!(made.success());
    let mut shadow = Shadow::open(&f.git, &f.ws, Caps::default()).unwrap();
    let before = shadow.snapshot("before").unwrap();
    assert_eq!(before.changed, 1, "the FIFO is not recorded");
    write(&f.ws, "dir/new.txt", "new\n");
    let after = shadow.snapshot("after").unwrap();

    // `dir` becomes a link to a directory outside holding a file of the same name.
    let outside = f.ws.parent().unwrap().join("outside-dir");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("new.txt"), "precious\n").unwrap();
    std::fs::remove_dir_all(f.ws.join("dir")).unwrap();
    std::os::unix::fs::symlink(&outside, f.ws.join("dir")).unwrap();
    let _ = shadow.restore(&after.commit, &before.commit, &HashSet::new());
    assert_eq!(
        std::fs::read_to_string(outside.join("new.txt")).unwrap(),
        "precious\n",
        "the removal followed the link out of the workspace"
    );
}
