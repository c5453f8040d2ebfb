//! Trust pins what it trusted: the SHA-256 (or the absence) of each workspace file that can
//! run code or widen keel's permissions, recorded beside `trust_level` when the user trusts
//! the workspace, so that a file created or changed afterwards (by a command of the model, a
//! `git checkout`, a background process) does not ride on that trust.
//!
//! ```toml
//! [projects."/home/ada/src/keel"]
//! trust_level = "trusted"
//! pins = { ".keel/config.toml" = "sha256:9f86…", ".mcp.json" = "absent" }
//! ```
//!
//! Data flow: [`super::record`] (`keel trust`, the UI's question, `/trust yes`) writes the pins
//! of [`PINNED_FILES`] for the root and the directory trusted, and re-reads every directory
//! pinned before ([`pin_entry`]); [`repin`] updates one file keel itself wrote on the user's
//! command (`keel mcp add`). At every load, [`check`] compares the files of the session's
//! workspace with the pins of the recorded entry that decides it and puts each mismatch in
//! [`TrustDecision::changed`]: that file stays inert as in an untrusted workspace, and
//! [`notice`] names it. Files are read beneath the recorded directory
//! ([`keel_tools::beneath`]): a link out of it, a FIFO or a file over 1 MiB cannot be pinned
//! and always counts as changed.
//!
//! A record without `pins` (written before keel pinned) trusts the files as they are; the next
//! `keel trust` pins them. A run's own `--trust-project` checks no pins.

use super::{ProjectSection, RecordError, TrustDecision, TrustSource};
use keel_tools::beneath::{Beneath, BeneathError};
use serde::{Deserialize, Deserializer};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The workspace files trust pins: what stays inert in an untrusted workspace and could run
/// or widen something once trusted — the project's `.keel/config.toml` (hooks, servers,
/// providers, a looser sandbox or approval: [`super::untrusted_view`]), `.mcp.json` servers and
/// the hooks of `.claude/settings.json` and `.claude/settings.local.json`
/// ([`super::project_files`]). Skill folders are not pinned: they are text the model reads.
pub const PINNED_FILES: [&str; 4] = [
    ".keel/config.toml",
    ".mcp.json",
    ".claude/settings.json",
    ".claude/settings.local.json",
];

/// The largest file that can be pinned; a larger one counts as changed.
const READ_CAP: u64 = 1 << 20;

/// What a pin says of a file, as written in `pins`: `"absent"` or `"sha256:<hex>"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pin {
    /// The file did not exist when the workspace was trusted.
    Absent,
    /// The lowercase hex SHA-256 of its content then.
    Sha256(String),
}

impl Pin {
    /// The spelling in the user's configuration.
    pub fn as_string(&self) -> String {
        match self {
            Pin::Absent => "absent".to_owned(),
            Pin::Sha256(hex) => format!("sha256:{hex}"),
        }
    }

    /// Parse `absent` or `sha256:` and 64 hex digits.
    pub fn parse(s: &str) -> Option<Pin> {
        if s == "absent" {
            return Some(Pin::Absent);
        }
        let hex = s.strip_prefix("sha256:")?;
        (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| Pin::Sha256(hex.to_ascii_lowercase()))
    }
}

impl<'de> Deserialize<'de> for Pin {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Pin, D::Error> {
        let s = String::deserialize(d)?;
        Pin::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown pin {s:?}; expected \"absent\" or \"sha256:<64 hex digits>\" (keel trust writes them)"
            ))
        })
    }
}

/// How a pinned file differs from its pin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// It exists now and did not then.
    Created,
    /// Its content is not what it was.
    Edited,
    /// It existed then and does not now.
    Deleted,
    /// It cannot be read beneath the trusted directory (a link out, not a regular file, too
    /// large): never pinned, always changed. Says why.
    Unreadable(String),
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::Created => f.write_str("created"),
            Change::Edited => f.write_str("edited"),
            Change::Deleted => f.write_str("deleted"),
            Change::Unreadable(why) => write!(f, "unreadable: {why}"),
        }
    }
}

/// A workspace file that does not match its pin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    /// The file as the plugins read it: the session's workspace joined with one of
    /// [`PINNED_FILES`].
    pub file: PathBuf,
    /// Which of [`PINNED_FILES`] it is.
    pub pinned: &'static str,
    /// How it changed.
    pub change: Change,
}

/// Why a pinned file cannot be read beneath the trusted directory ([`Change::Unreadable`]).
#[derive(Debug, thiserror::Error)]
enum Unreadable {
    /// The trusted directory itself cannot be opened.
    #[error("the trusted directory cannot be opened")]
    Directory,
    /// The file cannot be read beneath it (a link out, not a regular file, too large, …).
    #[error(transparent)]
    File(#[from] BeneathError),
}

/// What a file is now: absent, its hash, or why it cannot be read beneath the root.
fn state(beneath: Option<&Beneath>, rel: &Path) -> Result<Pin, Unreadable> {
    let Some(beneath) = beneath else {
        return Err(Unreadable::Directory);
    };
    match beneath.read_regular(rel, READ_CAP) {
        Ok(bytes) => Ok(Pin::Sha256(hex::encode(Sha256::digest(&bytes)))),
        Err(e) if e.is_not_found() => Ok(Pin::Absent),
        Err(e) => Err(e.into()),
    }
}

/// The key of `rel` (one of [`PINNED_FILES`]) of the workspace directory `sub` (relative to
/// the recorded directory; empty for the directory itself).
fn key(sub: &Path, rel: &str) -> String {
    sub.join(rel).display().to_string()
}

/// The workspace directories (relative to the recorded directory) that `pins` holds files of.
fn pinned_dirs(pins: &BTreeMap<String, Pin>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for k in pins.keys() {
        for rel in PINNED_FILES {
            let sub = if k == rel {
                Some("")
            } else {
                k.strip_suffix(rel).and_then(|s| s.strip_suffix('/'))
            };
            if let Some(sub) = sub
                && !dirs.iter().any(|d| d == Path::new(sub))
            {
                dirs.push(PathBuf::from(sub));
            }
        }
    }
    dirs
}

/// The pins of [`PINNED_FILES`] in each of `subs` (relative to `dir`) as they are now. A file
/// that cannot be read beneath `dir` gets no pin, so it counts as changed until it can.
pub fn current(dir: &Path, subs: &[PathBuf]) -> BTreeMap<String, Pin> {
    let beneath = Beneath::open(dir).ok();
    let mut pins = BTreeMap::new();
    for sub in subs {
        for rel in PINNED_FILES {
            if let Ok(pin) = state(beneath.as_ref(), &sub.join(rel)) {
                pins.insert(key(sub, rel), pin);
            }
        }
    }
    pins
}

/// The files of `workspace` that do not match the pins of the entry deciding `decision`;
/// empty unless it is a recorded trust whose entry has pins (a legacy entry, a run's flag and
/// an untrusted workspace check nothing). In [`PINNED_FILES`] order.
pub fn check(
    decision: &TrustDecision,
    projects: &BTreeMap<String, ProjectSection>,
    workspace: &Path,
) -> Vec<Changed> {
    let TrustSource::Recorded { dir, .. } = &decision.source else {
        return Vec::new();
    };
    if !decision.is_trusted() {
        return Vec::new();
    }
    let Some(pins) = projects
        .iter()
        .find(|(k, _)| Path::new(k) == dir)
        .and_then(|(_, section)| section.pins.as_ref())
    else {
        return Vec::new();
    };
    let canonical = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf());
    // The deciding directory is an ancestor-or-self of the workspace's canonical root.
    let sub = canonical.strip_prefix(dir).unwrap_or(&canonical);
    let beneath = Beneath::open(dir).ok();
    let mut changed = Vec::new();
    for rel in PINNED_FILES {
        let pin = pins.get(&key(sub, rel)).unwrap_or(&Pin::Absent);
        let change = match (pin, state(beneath.as_ref(), &sub.join(rel))) {
            (_, Err(why)) => Some(Change::Unreadable(why.to_string())),
            (Pin::Absent, Ok(Pin::Sha256(_))) => Some(Change::Created),
            (Pin::Sha256(_), Ok(Pin::Absent)) => Some(Change::Deleted),
            (Pin::Sha256(was), Ok(Pin::Sha256(now))) if *was != now => Some(Change::Edited),
            _ => None,
        };
        if let Some(change) = change {
            changed.push(Changed {
                file: workspace.join(rel),
                pinned: rel,
                change,
            });
        }
    }
    changed
}

/// Write the pins of a trusted entry (`entry`, for `root`): [`PINNED_FILES`] of the root, of
/// `dir` (the directory the user trusted, when under the root) and of every directory the
/// entry pinned before, as they are now.
pub(super) fn pin_entry(entry: &mut dyn toml_edit::TableLike, root: &Path, dir: &Path) {
    let before: BTreeMap<String, Pin> = entry
        .get("pins")
        .and_then(toml_edit::Item::as_table_like)
        .map(|t| {
            t.iter()
                .filter_map(|(k, v)| Some((k.to_owned(), Pin::parse(v.as_str()?)?)))
                .collect()
        })
        .unwrap_or_default();
    let mut subs = vec![PathBuf::new()];
    if let Ok(sub) = dir.strip_prefix(root)
        && !sub.as_os_str().is_empty()
    {
        subs.push(sub.to_path_buf());
    }
    for sub in pinned_dirs(&before) {
        if !subs.contains(&sub) {
            subs.push(sub);
        }
    }
    let mut table = toml_edit::InlineTable::new();
    for (k, pin) in current(root, &subs) {
        table.insert(&k, pin.as_string().into());
    }
    entry.insert("pins", toml_edit::value(table));
}

/// After keel wrote `file` (absolute) on the user's command (`keel mcp add` into the project's
/// `.keel/config.toml`): update its pin in the entry of `config` that decides `workspace`,
/// when that entry is a trusted one with pins. Returns whether a pin was written.
pub fn repin(config: &Path, workspace: &Path, file: &Path) -> Result<bool, RecordError> {
    let root = super::workspace_root(workspace).map_err(|source| RecordError::Directory {
        dir: workspace.to_path_buf(),
        source,
    })?;
    let Some(parent) = file.parent() else {
        return Ok(false);
    };
    let file = match parent.canonicalize() {
        Ok(p) => p.join(file.file_name().unwrap_or_default()),
        Err(_) => return Ok(false),
    };
    super::edit_config(config, |doc, invalid| {
        let Some(projects) = doc
            .get_mut("projects")
            .and_then(toml_edit::Item::as_table_like_mut)
        else {
            return Ok(false);
        };
        let Some(dir) = root
            .ancestors()
            .find(|d| {
                projects
                    .get(&d.display().to_string())
                    .and_then(|e| e.get("trust_level"))
                    .is_some()
            })
            .map(Path::to_path_buf)
        else {
            return Ok(false);
        };
        let name = dir.display().to_string();
        let entry = projects
            .get_mut(&name)
            .and_then(toml_edit::Item::as_table_like_mut)
            .ok_or_else(|| invalid(format!("`projects.{name:?}` is not a table")))?;
        let trusted = entry.get("trust_level").and_then(toml_edit::Item::as_str) == Some("trusted");
        let Some(pins) = entry
            .get_mut("pins")
            .and_then(toml_edit::Item::as_table_like_mut)
        else {
            return Ok(false);
        };
        let Ok(rel) = file.strip_prefix(&dir) else {
            return Ok(false);
        };
        if !trusted || !PINNED_FILES.iter().any(|p| rel.ends_with(p)) {
            return Ok(false);
        }
        let k = rel.display().to_string();
        match state(Beneath::open(&dir).ok().as_ref(), rel) {
            Ok(pin) => pins.insert(&k, toml_edit::value(pin.as_string())),
            Err(_) => pins.remove(&k),
        };
        Ok(true)
    })
}

/// The line a front end shows for a trusted workspace with changed files; `None` when nothing
/// changed. `ignored`: what each file holds that stays inert, by file.
pub(super) fn notice(decision: &TrustDecision, ignored: &[super::Ignored]) -> Option<String> {
    if decision.changed.is_empty() {
        return None;
    }
    let root = decision.root.display();
    let parts: Vec<String> = decision
        .changed
        .iter()
        .map(|c| {
            let name = c.file.strip_prefix(&decision.root).unwrap_or(&c.file);
            match ignored.iter().find(|i| i.file == c.file) {
                Some(i) => format!("{} ({}: {})", name.display(), c.change, i.what.join(", ")),
                None => format!("{} ({})", name.display(), c.change),
            }
        })
        .collect();
    Some(format!(
        "changed since you trusted {root}: {}; left inert until you run `keel trust {root}` again (or /trust yes)",
        parts.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trust::{ProjectTrust, decide};
    use pretty_assertions::assert_eq;

    /// A trusted workspace `ws/` (a git root) with its record in `config.toml` beside it.
    struct Fixture {
        _dir: tempfile::TempDir,
        ws: PathBuf,
        config: PathBuf,
    }

    impl Fixture {
        fn new() -> Fixture {
            let dir = tempfile::tempdir().unwrap();
            let ws = dir.path().canonicalize().unwrap().join("ws");
            std::fs::create_dir_all(ws.join(".git")).unwrap();
            std::fs::create_dir_all(ws.join(".keel")).unwrap();
            let config = dir.path().join("home/config.toml");
            Fixture {
                _dir: dir,
                ws,
                config,
            }
        }

        fn write(&self, rel: &str, text: &str) {
            let path = self.ws.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }

        fn projects(&self) -> BTreeMap<String, ProjectSection> {
            let text = std::fs::read_to_string(&self.config).unwrap();
            let config: crate::config::Config = toml::from_str(&text).unwrap();
            config.projects
        }

        /// What changed, as `(file relative to ws, change)`.
        fn changed(&self) -> Vec<(String, Change)> {
            let projects = self.projects();
            let decision = decide(&self.ws, &projects, &|_| "c".to_owned(), None);
            check(&decision, &projects, &self.ws)
                .into_iter()
                .map(|c| {
                    let rel = c.file.strip_prefix(&self.ws).unwrap();
                    (rel.display().to_string(), c.change)
                })
                .collect()
        }
    }

    fn sha(text: &str) -> Pin {
        Pin::Sha256(hex::encode(Sha256::digest(text.as_bytes())))
    }

    #[test]
    fn trust_pins_present_and_absent_files() {
        let f = Fixture::new();
        f.write(".mcp.json", "{}");
        f.write(".keel/config.toml", "model = \"m\"\n");
        super::super::record(&f.config, &f.ws, ProjectTrust::Trusted).unwrap();
        let pins = f.projects()[&f.ws.display().to_string()].pins.clone();
        let expected: BTreeMap<String, Pin> = [
            (".claude/settings.json", Pin::Absent),
            (".claude/settings.local.json", Pin::Absent),
            (".keel/config.toml", sha("model = \"m\"\n")),
            (".mcp.json", sha("{}")),
        ]
        .into_iter()
        .map(|(k, p)| (k.to_owned(), p))
        .collect();
        assert_eq!(pins, Some(expected));
        assert_eq!(f.changed(), vec![]);
        // Revoking drops the pins; an entry without pins (legacy) checks nothing.
        super::super::record(&f.config, &f.ws, ProjectTrust::Untrusted).unwrap();
        assert_eq!(f.projects()[&f.ws.display().to_string()].pins, None);
        let legacy = format!(
            "[projects.{:?}]\ntrust_level = \"trusted\"\n",
            f.ws.display().to_string()
        );
        std::fs::write(&f.config, legacy).unwrap();
        f.write(".claude/settings.json", "{}");
        assert_eq!(f.changed(), vec![]);
    }

    #[test]
    fn created_edited_deleted_and_linked_files_are_changed() {
        let f = Fixture::new();
        f.write(".mcp.json", "{}");
        f.write(".keel/config.toml", "model = \"m\"\n");
        f.write(".claude/settings.local.json", "{}");
        super::super::record(&f.config, &f.ws, ProjectTrust::Trusted).unwrap();
        f.write(".claude/settings.json", "{\"hooks\":{}}");
        f.write(".keel/config.toml", "sandbox = \"full-access\"\n");
        std::fs::remove_file(f.ws.join(".claude/settings.local.json")).unwrap();
        // The same content, but through a link out of the workspace.
        let outside = f.ws.parent().unwrap().join("elsewhere.json");
        std::fs::write(&outside, "{}").unwrap();
        std::fs::remove_file(f.ws.join(".mcp.json")).unwrap();
        std::os::unix::fs::symlink(&outside, f.ws.join(".mcp.json")).unwrap();
        let changed = f.changed();
        let names: Vec<(&str, &Change)> = changed.iter().map(|(n, c)| (n.as_str(), c)).collect();
        assert_eq!(names[0], (".keel/config.toml", &Change::Edited));
        assert_eq!(names[1].0, ".mcp.json");
        assert!(
            matches!(names[1].1, Change::Unreadable(why) if why.contains("outside")),
            "{changed:?}"
        );
        assert_eq!(names[2], (".claude/settings.json", &Change::Created));
        assert_eq!(names[3], (".claude/settings.local.json", &Change::Deleted));
        assert_eq!(names.len(), 4);
        // `keel trust` again accepts them all (the link out stays changed: it cannot be pinned).
        super::super::record(&f.config, &f.ws, ProjectTrust::Trusted).unwrap();
        let changed = f.changed();
        assert_eq!(changed.len(), 1, "{changed:?}");
        assert_eq!(changed[0].0, ".mcp.json");
        // A FIFO cannot be pinned either.
        std::fs::remove_file(f.ws.join(".mcp.json")).unwrap();
        super::super::record(&f.config, &f.ws, ProjectTrust::Trusted).unwrap();
        assert_eq!(f.changed(), vec![]);
        let made = std::process::Command::new("mkfifo")
            .arg(f.ws.join(".mcp.json"))
            .status()
            .unwrap();
        assert!(made.success());
        assert!(matches!(&f.changed()[..], [(n, Change::Unreadable(_))] if n == ".mcp.json"));
    }

    #[test]
    fn a_subdirectory_workspace_is_pinned_when_trusted_from_it_and_repin_updates_one_file() {
        let f = Fixture::new();
        f.write("pkg/.mcp.json", "{}");
        f.write(".keel/config.toml", "");
        super::super::record(&f.config, &f.ws.join("pkg"), ProjectTrust::Trusted).unwrap();
        let pkg = f.ws.join("pkg");
        let projects = f.projects();
        let decision = decide(&f.ws, &projects, &|_| "c".to_owned(), None);
        assert_eq!(check(&decision, &projects, &pkg), vec![]);
        // keel wrote the project's config on the user's command: re-pinned, nothing changed.
        f.write(
            ".keel/config.toml",
            "[mcp_servers.mine]\ncommand = \"true\"\n",
        );
        assert_eq!(f.changed().len(), 1);
        assert!(repin(&f.config, &f.ws, &f.ws.join(".keel/config.toml")).unwrap());
        assert_eq!(f.changed(), vec![]);
        // A pin never recorded counts as absent: a new directory's file is created.
        f.write("other/.mcp.json", "{}");
        let other = f.ws.join("other");
        let changed = check(&decision, &f.projects(), &other);
        assert_eq!(changed.len(), 1);
        assert_eq!(changed[0].change, Change::Created);
        assert_eq!(changed[0].file, other.join(".mcp.json"));
        // Trusting again keeps pinning the directories pinned before.
        super::super::record(&f.config, &f.ws, ProjectTrust::Trusted).unwrap();
        let pins = f.projects()[&f.ws.display().to_string()]
            .pins
            .clone()
            .unwrap();
        assert!(pins.contains_key("pkg/.mcp.json"), "{pins:?}");
    }

    #[test]
    fn the_notice_names_each_changed_file_and_what_stays_inert() {
        let decision = TrustDecision {
            root: "/src/repo".into(),
            trust: ProjectTrust::Trusted,
            source: TrustSource::Recorded {
                dir: "/src/repo".into(),
                layer: "/h/config.toml".into(),
            },
            changed: vec![
                Changed {
                    file: "/src/repo/.mcp.json".into(),
                    pinned: ".mcp.json",
                    change: Change::Created,
                },
                Changed {
                    file: "/src/repo/.keel/config.toml".into(),
                    pinned: ".keel/config.toml",
                    change: Change::Edited,
                },
            ],
        };
        let ignored = vec![super::super::Ignored {
            file: "/src/repo/.mcp.json".into(),
            what: vec!["mcpServers.evil".into()],
        }];
        assert_eq!(
            super::super::notice(&decision, &ignored).unwrap(),
            "changed since you trusted /src/repo: .mcp.json (created: mcpServers.evil); .keel/config.toml (edited); left inert until you run `keel trust /src/repo` again (or /trust yes)"
        );
        assert_eq!(Pin::parse("sha256:AB"), None);
        assert_eq!(Pin::parse("absent"), Some(Pin::Absent));
    }
}
