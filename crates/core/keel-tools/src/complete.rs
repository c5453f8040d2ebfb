//! `@path` completion: the workspace paths a person may mean while typing one (the terminal
//! UI's composer and the web app's, through `keel serve`). One directory level at a time, as a
//! shell completes: `src/ma` offers the entries of `src/` starting with `ma`.

use std::path::{Component, Path};

/// The entries of `root` (a workspace) that `partial` may be completed to: those of its
/// directory part starting with its last part, gitignore-aware (hidden ones only when the last
/// part starts with `.`), directories with a trailing `/`, sorted, at most `max`. Nothing for a
/// `partial` that leaves `root` (`..`, an absolute path, a directory that is a link out of it).
pub fn complete_path(root: &Path, partial: &str, max: usize) -> Vec<String> {
    let (dir, stem) = match partial.rfind('/') {
        Some(i) => (&partial[..=i], &partial[i + 1..]),
        None => ("", partial),
    };
    let inside = Path::new(dir)
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !inside {
        return Vec::new();
    }
    let base = root.join(dir);
    // A directory part through a link out of the workspace lists nothing.
    match (base.canonicalize(), root.canonicalize()) {
        (Ok(real), Ok(top)) if real.starts_with(&top) => {}
        _ => return Vec::new(),
    }
    let walker = ignore::WalkBuilder::new(&base)
        .max_depth(Some(1))
        .hidden(!stem.starts_with('.'))
        .build();
    let mut out: Vec<String> = walker
        .filter_map(Result::ok)
        .filter(|e| e.depth() == 1)
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_owned();
            if !name.starts_with(stem) {
                return None;
            }
            let slash = if e.file_type().is_some_and(|t| t.is_dir()) {
                "/"
            } else {
                ""
            };
            Some(format!("{dir}{name}{slash}"))
        })
        .collect();
    out.sort();
    out.truncate(max);
    out
}

#[cfg(test)]
mod tests {
    use super::complete_path;

    #[test]
    fn completes_one_level_and_never_leaves_the_workspace() {
        let top = tempfile::tempdir().unwrap();
        let root = top.path().join("ws");
        std::fs::create_dir_all(root.join("src/major")).unwrap();
        std::fs::write(root.join("src/main.rs"), "").unwrap();
        std::fs::write(root.join("src/lib.rs"), "").unwrap();
        std::fs::write(root.join(".env"), "").unwrap();
        std::fs::write(top.path().join("secret.txt"), "").unwrap();
        std::os::unix::fs::symlink(top.path(), root.join("out")).unwrap();
        assert_eq!(
            complete_path(&root, "src/ma", 8),
            ["src/main.rs", "src/major/"]
        );
        assert_eq!(complete_path(&root, "src/", 1), ["src/lib.rs"]);
        // A link is listed as it is, not followed.
        assert_eq!(complete_path(&root, "", 8), ["out", "src/"]);
        assert_eq!(complete_path(&root, ".e", 8), [".env"]);
        assert!(complete_path(&root, "../", 8).is_empty());
        assert!(complete_path(&root, "/etc/", 8).is_empty());
        assert!(
            complete_path(&root, "out/", 8).is_empty(),
            "a link out of the workspace"
        );
    }
}
