//! Where skills are looked for, in rank order: the first root holding a name wins.
//!
//! 1. the project's roots, at the git root of the workspace (or the workspace outside git),
//!    read only when the workspace is trusted: [`PROJECT_DIRS`];
//! 2. the directories of the plugin's `dirs` setting, in the order given;
//! 3. the `skills/` folder of each plugin bundle the user installed, in the host's order
//!    (scope [`Scope::Config`], read beneath the bundle's folder: [`Root::bundle`]);
//! 4. the home roots: `~/.dsh/skills`, `~/.agents/skills`, `$KEEL_HOME/skills`,
//!    `~/.claude/skills`, `~/.codex/skills` (`~` is `$HOME`).
//!
//! A directory reached twice (the workspace is the home directory, say) is read once, at its
//! first rank.

use keel_agent::plugin::Bundle;
use keel_tools::beneath::{BeneathError, Reader};
use std::path::{Path, PathBuf};

/// A plugin bundle's skill root, relative to its folder.
pub const BUNDLE_SKILLS_DIR: &str = "skills";

/// A project's skill roots, relative to its git root, in rank order.
pub const PROJECT_DIRS: [&str; 5] = [
    ".dsh/skills",
    ".agents/skills",
    ".keel/skills",
    ".claude/skills",
    ".codex/skills",
];

/// The home roots before `$KEEL_HOME/skills`, relative to `$HOME`.
const HOME_BEFORE_KEEL: [&str; 2] = [".dsh/skills", ".agents/skills"];
/// The home roots after `$KEEL_HOME/skills`.
const HOME_AFTER_KEEL: [&str; 2] = [".claude/skills", ".codex/skills"];

/// Which kind of root a skill came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The workspace's own (governed by workspace trust).
    Project,
    /// A directory of the plugin's `dirs` setting, or a plugin bundle's `skills/`
    /// ([`Root::bundle`] says which).
    Config,
    /// The user's home or `$KEEL_HOME`.
    Home,
}

/// One root directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// The directory (it may not exist).
    pub dir: PathBuf,
    /// Its kind.
    pub scope: Scope,
    /// The plugin bundle folder it is in (`BUNDLE/skills`), `None` for the other roots: its
    /// files are opened beneath the bundle, never through a link out of it.
    pub bundle: Option<PathBuf>,
}

impl Root {
    /// The directory this root's files are opened beneath: for a project root, the project
    /// directory it sits in (`…/.claude/skills` → `…`), so that no listing or read follows a
    /// link out of the workspace; for a plugin bundle's, the bundle's folder; `None` for the
    /// user's and configured roots, whose links (to dotfiles) are followed.
    pub fn beneath(&self) -> Option<PathBuf> {
        if let Some(bundle) = &self.bundle {
            return Some(bundle.clone());
        }
        if self.scope != Scope::Project {
            return None;
        }
        let base = PROJECT_DIRS
            .iter()
            .filter(|rel| self.dir.ends_with(rel))
            .find_map(|rel| {
                self.dir
                    .ancestors()
                    .nth(Path::new(rel).components().count())
            });
        Some(base.unwrap_or(&self.dir).to_path_buf())
    }
}

/// How the files of a root are read: beneath `beneath` ([`Root::beneath`]) when given, else
/// as the user's own.
pub fn reader(beneath: Option<&Path>) -> Result<Reader, BeneathError> {
    match beneath {
        Some(base) => Reader::beneath(base),
        None => Ok(Reader::User),
    }
}

/// The directory a workspace's project roots sit in: the nearest ancestor-or-self of
/// `workspace` holding `.git` (a directory, or a worktree's file), else `workspace` itself.
/// Canonical when the workspace exists.
pub fn project_root(workspace: &Path) -> PathBuf {
    let dir = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf());
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(&dir)
        .to_path_buf()
}

/// `~/x` with `$HOME`, a relative path against `base`, an absolute one as it is.
pub fn expand(dir: &str, home: Option<&Path>, base: &Path) -> PathBuf {
    if let Some(rest) = dir.strip_prefix("~/")
        && let Some(home) = home
    {
        return home.join(rest);
    }
    if dir == "~"
        && let Some(home) = home
    {
        return home.to_path_buf();
    }
    base.join(dir)
}

/// Every root in rank order: the project's when `project` is given (a trusted workspace's
/// [`project_root`]), then `configured`, then the home roots (`home` is `$HOME`, when set).
pub fn roots(
    project: Option<&Path>,
    configured: &[PathBuf],
    home: Option<&Path>,
    keel_home: &Path,
) -> Vec<Root> {
    roots_with_bundles(project, configured, &[], home, keel_home)
}

/// [`roots`] with the `skills/` folder of each of `bundles` (the user's installed plugin
/// bundles) after the configured roots and before the home roots.
pub fn roots_with_bundles(
    project: Option<&Path>,
    configured: &[PathBuf],
    bundles: &[Bundle],
    home: Option<&Path>,
    keel_home: &Path,
) -> Vec<Root> {
    let mut out: Vec<Root> = Vec::new();
    let mut add = |dir: PathBuf, scope: Scope, bundle: Option<&Path>| {
        let key = dir.canonicalize().unwrap_or_else(|_| dir.clone());
        let seen = out
            .iter()
            .any(|r| r.dir == dir || r.dir.canonicalize().is_ok_and(|c| c == key));
        if !seen {
            out.push(Root {
                dir,
                scope,
                bundle: bundle.map(Path::to_path_buf),
            });
        }
    };
    if let Some(project) = project {
        for rel in PROJECT_DIRS {
            add(project.join(rel), Scope::Project, None);
        }
    }
    for dir in configured {
        add(dir.clone(), Scope::Config, None);
    }
    for bundle in bundles {
        add(
            bundle.root.join(BUNDLE_SKILLS_DIR),
            Scope::Config,
            Some(&bundle.root),
        );
    }
    if let Some(home) = home {
        for rel in HOME_BEFORE_KEEL {
            add(home.join(rel), Scope::Home, None);
        }
    }
    add(keel_home.join("skills"), Scope::Home, None);
    if let Some(home) = home {
        for rel in HOME_AFTER_KEEL {
            add(home.join(rel), Scope::Home, None);
        }
    }
    out
}

/// The project skill roots of `workspace` that hold anything, with the skills each would
/// offer (folder names and `.md` file stems, hidden entries skipped), for the trust notice
/// and `keel trust`: what an untrusted workspace's skills would be. Nothing is parsed or read;
/// the roots are listed beneath the project directory (a root or folder linked out of it is
/// left out).
pub fn project_skill_dirs(workspace: &Path) -> Vec<(PathBuf, Vec<String>)> {
    let base = project_root(workspace);
    let mut out = Vec::new();
    let Ok(reader) = Reader::beneath(&base) else {
        return out;
    };
    let is_file = |path: &Path| reader.metadata(path).is_ok_and(|m| m.is_file());
    for rel in PROJECT_DIRS {
        let dir = base.join(rel);
        let Ok(entries) = reader.list(&dir) else {
            continue;
        };
        let names: Vec<String> = entries
            .into_iter()
            .filter_map(|e| {
                let name = e.to_string_lossy().into_owned();
                if name.starts_with('.') {
                    return None;
                }
                let path = dir.join(&e);
                if is_file(&path.join("SKILL.md")) {
                    Some(name)
                } else {
                    name.strip_suffix(".md")
                        .filter(|_| is_file(&path))
                        .map(str::to_owned)
                }
            })
            .collect();
        if !names.is_empty() {
            out.push((dir, names));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn roots_are_in_rank_order_and_a_directory_is_read_once() {
        let p = Path::new("/p");
        let h = Path::new("/h");
        let dirs: Vec<String> = roots(Some(p), &["/c".into()], Some(h), Path::new("/k"))
            .into_iter()
            .map(|r| r.dir.display().to_string())
            .collect();
        assert_eq!(
            dirs,
            [
                "/p/.dsh/skills",
                "/p/.agents/skills",
                "/p/.keel/skills",
                "/p/.claude/skills",
                "/p/.codex/skills",
                "/c",
                "/h/.dsh/skills",
                "/h/.agents/skills",
                "/k/skills",
                "/h/.claude/skills",
                "/h/.codex/skills",
            ]
        );
        // The workspace is the home directory: each root once, at its project rank.
        let same = roots(Some(h), &[], Some(h), Path::new("/h/.keel"));
        assert_eq!(same.len(), 5);
        assert!(same.iter().all(|r| r.scope == Scope::Project));
        // Untrusted: no project roots.
        assert_eq!(roots(None, &[], None, Path::new("/k")).len(), 1);
    }

    #[test]
    fn bundle_roots_come_after_the_configured_ones_and_before_the_home_ones() {
        let bundles = [
            Bundle {
                name: "a".into(),
                root: "/b/a".into(),
            },
            Bundle {
                name: "z".into(),
                root: "/b/z".into(),
            },
        ];
        let got = roots_with_bundles(None, &["/c".into()], &bundles, None, Path::new("/k"));
        let dirs: Vec<String> = got.iter().map(|r| r.dir.display().to_string()).collect();
        assert_eq!(dirs, ["/c", "/b/a/skills", "/b/z/skills", "/k/skills"]);
        assert_eq!(got[1].beneath(), Some(PathBuf::from("/b/a")));
        assert_eq!(got[0].beneath(), None);
        assert_eq!(got[3].beneath(), None);
    }

    #[test]
    fn expand_home_and_relative() {
        let h = Some(Path::new("/h"));
        assert_eq!(expand("~/s", h, Path::new("/k")), PathBuf::from("/h/s"));
        assert_eq!(expand("s", h, Path::new("/k")), PathBuf::from("/k/s"));
        assert_eq!(expand("/a", h, Path::new("/k")), PathBuf::from("/a"));
    }

    #[test]
    fn project_skill_dirs_lists_candidates_at_the_git_root() {
        let t = tempfile::tempdir().unwrap();
        let repo = t.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("sub")).unwrap();
        std::fs::create_dir_all(repo.join(".claude/skills/a")).unwrap();
        std::fs::write(repo.join(".claude/skills/a/SKILL.md"), "x").unwrap();
        std::fs::write(repo.join(".claude/skills/b.md"), "x").unwrap();
        std::fs::create_dir_all(repo.join(".claude/skills/empty")).unwrap();
        std::fs::create_dir_all(repo.join(".codex/skills")).unwrap();
        let found = project_skill_dirs(&repo.join("sub"));
        assert_eq!(found.len(), 1);
        assert!(found[0].0.ends_with(".claude/skills"));
        assert_eq!(found[0].1, ["a", "b"]);
    }
}
