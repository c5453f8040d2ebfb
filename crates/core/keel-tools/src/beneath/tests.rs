//! Tests of the beneath-open helper against real trees (the property test comparing it with
//! the kernel and a reference model is `tests/beneath_prop.rs`).

use super::*;
use std::os::unix::fs::symlink;

fn both(root: &Path) -> [Beneath; 2] {
    [
        Beneath::open_with(root, Resolver::Openat2).unwrap(),
        Beneath::open_with(root, Resolver::Walk).unwrap(),
    ]
}

#[test]
fn links_inside_are_followed_and_links_out_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("AGENTS.md"), "inside").unwrap();
    std::fs::write(tmp.path().join("secret"), "outside").unwrap();
    symlink("AGENTS.md", root.join("CLAUDE.md")).unwrap();
    symlink("../AGENTS.md", root.join("sub/AGENTS.md")).unwrap();
    symlink("../secret", root.join("out")).unwrap();
    symlink(tmp.path().join("secret"), root.join("abs")).unwrap();
    symlink("/proc/self/environ", root.join("env")).unwrap();
    symlink("loop", root.join("loop")).unwrap();
    for b in both(&root) {
        let r = b.resolver();
        assert_eq!(b.read_text(Path::new("CLAUDE.md"), 100).unwrap(), "inside");
        assert_eq!(
            b.read_text(Path::new("sub/AGENTS.md"), 100).unwrap(),
            "inside"
        );
        for esc in [
            "out",
            "abs",
            "env",
            "../secret",
            "sub/../../secret",
            "/etc/passwd",
        ] {
            let e = b.read_text(Path::new(esc), 100).unwrap_err();
            assert!(
                matches!(e, BeneathError::Escapes { .. }),
                "{r:?} {esc}: {e}"
            );
        }
        let e = b.read_text(Path::new("loop"), 100).unwrap_err();
        assert!(matches!(e, BeneathError::Loop { .. }), "{r:?}: {e}");
        let e = b.read_text(Path::new("missing"), 100).unwrap_err();
        assert!(e.is_not_found(), "{r:?}: {e}");
    }
}

#[test]
fn fifos_devices_directories_and_large_files_are_not_read() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let fifo = cstring(root.join("fifo").as_os_str()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    symlink("/dev/zero", root.join("zero")).unwrap();
    std::fs::create_dir(root.join("dir")).unwrap();
    std::fs::write(root.join("big"), vec![b'x'; 2000]).unwrap();
    for b in both(root) {
        let e = b.read_text(Path::new("fifo"), 100).unwrap_err();
        assert!(
            matches!(e, BeneathError::NotRegular { kind: "a FIFO", .. }),
            "{e}"
        );
        let e = b.read_text(Path::new("zero"), 100).unwrap_err();
        assert!(matches!(e, BeneathError::Escapes { .. }), "{e}");
        let e = b.read_text(Path::new("dir"), 100).unwrap_err();
        assert!(matches!(e, BeneathError::NotRegular { .. }), "{e}");
        let e = b.read_text(Path::new("big"), 1000).unwrap_err();
        assert!(
            matches!(
                e,
                BeneathError::TooLarge {
                    size: 2000,
                    cap: 1000,
                    ..
                }
            ),
            "{e}"
        );
    }
}

#[test]
fn replace_swaps_a_symlink_itself_and_keeps_the_old_mode() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(tmp.path().join("target"), "outside").unwrap();
    symlink(tmp.path().join("target"), root.join("r")).unwrap();
    std::fs::write(root.join("x.sh"), "old").unwrap();
    std::fs::set_permissions(root.join("x.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
    for b in both(&root) {
        b.replace(OsStr::new("r"), b"model", None).unwrap();
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("target")).unwrap(),
            "outside"
        );
        assert!(
            !std::fs::symlink_metadata(root.join("r"))
                .unwrap()
                .is_symlink()
        );
        b.replace(OsStr::new("x.sh"), b"new", None).unwrap();
        let mode = std::fs::metadata(root.join("x.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o750);
        std::fs::remove_file(root.join("r")).unwrap();
        symlink(tmp.path().join("target"), root.join("r")).unwrap();
    }
    let left: Vec<_> = std::fs::read_dir(&root).unwrap().collect();
    assert_eq!(left.len(), 2, "no temporary file left behind");
}

#[test]
fn create_dir_all_refuses_a_link_out() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir_all(tmp.path().join("outside")).unwrap();
    std::fs::create_dir(&root).unwrap();
    symlink("../outside", root.join("o")).unwrap();
    for b in both(&root) {
        let e = b.create_dir_all(Path::new("o/new")).unwrap_err();
        assert!(matches!(e, BeneathError::Escapes { .. }), "{e}");
        let d = b.create_dir_all(Path::new("a/b/c")).unwrap();
        d.replace(OsStr::new("f"), b"x", None).unwrap();
        assert_eq!(std::fs::read_to_string(root.join("a/b/c/f")).unwrap(), "x");
    }
    assert!(!tmp.path().join("outside/new").exists());
}
