//! Instruction files deeper in the workspace (`sub/AGENTS.md`, `sub/CLAUDE.md`): the system
//! prompt carries those from the workspace root down to the working directory
//! ([`crate::prompt::load_instructions`]); the others are found when a file tool touches their
//! directory, as dsh does, and announced once in that call's result:
//!
//! ```text
//! <instructions path="sub/AGENTS.md" applies-to="sub/">
//! …the file…
//! </instructions>
//! ```
//!
//! A file announced before is announced again (marked `changed="true"`) when it has changed
//! on disk since; all the announcements of an agent share a byte budget
//! ([`NESTED_INSTRUCTIONS_BUDGET`]), past which a file is cut with a marker and then no more
//! are announced. The result is what the log keeps, so a resumed session's history holds what
//! the model was shown; what was announced is not itself kept across a resume (a touched file
//! is announced again).

use crate::prompt::{INSTRUCTION_FILE_NAMES, MAX_INSTRUCTION_FILE, skip_reason};
use async_trait::async_trait;
use keel_protocol::ContentBlock;
use keel_protocol::sync::Locked;
use keel_tools::beneath::Beneath;
use keel_tools::workspace::normalize;
use keel_tools::{HookContext, PostDecision, PostExecuteHook, ResultDraft};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

/// Bytes of nested instruction files one agent announces, all files together.
pub const NESTED_INSTRUCTIONS_BUDGET: usize = 64 * 1024;

/// The tools whose calls name a path, and the parameter (with its earlier name) that does.
const PATH_TOOLS: &[(&str, &str, Option<&str>)] = &[
    ("read", "file_path", Some("path")),
    ("write", "file_path", Some("path")),
    ("edit", "file_path", Some("path")),
    ("read_image", "file_path", Some("path")),
    ("glob", "path", None),
    ("grep", "path", None),
];

/// The `tools/post-execute` hook that announces nested instruction files (see the module).
#[derive(Debug)]
pub struct NestedInstructions {
    roots: Vec<PathBuf>,
    cwd: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Each announced file's size and modification time when it was announced.
    announced: HashMap<PathBuf, (u64, Option<SystemTime>)>,
    remaining: usize,
}

impl NestedInstructions {
    /// For a workspace with `roots` and working directory `cwd` (both canonical).
    pub fn new(roots: &[PathBuf], cwd: &Path, budget: usize) -> Self {
        NestedInstructions {
            roots: roots.to_vec(),
            cwd: cwd.to_path_buf(),
            state: Mutex::new(State {
                announced: HashMap::new(),
                remaining: budget,
            }),
        }
    }

    /// The directory a call touched, if it names a path inside a root.
    fn touched(&self, tool: &str, arguments: &str) -> Option<(PathBuf, &Path)> {
        let (_, key, old) = PATH_TOOLS.iter().find(|(name, ..)| *name == tool)?;
        let args: serde_json::Value = serde_json::from_str(arguments).ok()?;
        let raw = args
            .get(*key)
            .or_else(|| old.and_then(|o| args.get(o)))
            .and_then(|v| v.as_str())
            .unwrap_or(".");
        let path = normalize(&self.cwd.join(raw));
        let dir = if path.is_dir() {
            path
        } else {
            path.parent()?.to_path_buf()
        };
        let root = self.roots.iter().find(|r| dir.starts_with(r))?;
        Some((dir, root))
    }

    /// The announcements for a call that touched `dir` (under `root`), outermost first.
    fn announce(&self, dir: &Path, root: &Path) -> Option<String> {
        let rel = dir.strip_prefix(root).ok()?;
        let mut out = String::new();
        let mut cur = root.to_path_buf();
        let beneath = Beneath::open(root).ok()?;
        let mut state = self.state.locked();
        for comp in rel.components() {
            cur.push(comp);
            // The root and the directories down to the working directory are in the prompt.
            if self.cwd.starts_with(&cur) {
                continue;
            }
            for name in INSTRUCTION_FILE_NAMES {
                if state.remaining == 0 {
                    return (!out.is_empty()).then_some(out);
                }
                let path = cur.join(name);
                let Ok(rel) = path.strip_prefix(root) else {
                    continue;
                };
                // Opened beneath the root, never through a link out of it (see the module).
                let before = state.announced.get(&path).copied();
                let read = beneath.metadata(rel).and_then(|meta| {
                    let stamp = (meta.len(), meta.modified().ok());
                    if before == Some(stamp) {
                        return Ok(None);
                    }
                    let text = beneath.read_text(rel, MAX_INSTRUCTION_FILE)?;
                    Ok(Some((stamp, text)))
                });
                let (stamp, text) = match read {
                    Ok(None) => continue,
                    Ok(Some(read)) => read,
                    Err(e) => {
                        let Some(reason) = skip_reason(&e) else {
                            continue;
                        };
                        // Said once per file.
                        if state
                            .announced
                            .insert(path.clone(), (u64::MAX, None))
                            .is_some()
                        {
                            continue;
                        }
                        out.push_str(&format!(
                            "\n\n<instructions path=\"{}\" skipped=\"true\">not read: {reason}</instructions>",
                            rel.display()
                        ));
                        continue;
                    }
                };
                state.announced.insert(path.clone(), stamp);
                if text.trim().is_empty() {
                    continue;
                }
                let text = if text.len() > state.remaining {
                    let cut = text.floor_char_boundary(state.remaining);
                    format!(
                        "{}\n[... cut: nested instructions budget of {NESTED_INSTRUCTIONS_BUDGET} bytes reached]",
                        &text[..cut]
                    )
                } else {
                    text
                };
                state.remaining = state.remaining.saturating_sub(text.len());
                let shown = path.strip_prefix(root).unwrap_or(&path).display();
                let scope = cur.strip_prefix(root).unwrap_or(&cur).display();
                let changed = if before.is_some() {
                    " changed=\"true\""
                } else {
                    ""
                };
                out.push_str(&format!(
                    "\n\n<instructions path=\"{shown}\" applies-to=\"{scope}/\"{changed}>\n{}\n</instructions>",
                    text.trim_end()
                ));
            }
        }
        (!out.is_empty()).then_some(out)
    }
}

#[async_trait]
impl PostExecuteHook for NestedInstructions {
    async fn post_execute(&self, ctx: &HookContext<'_>, result: &ResultDraft) -> PostDecision {
        if result.is_error {
            return PostDecision::Accept;
        }
        let Some((dir, root)) = self.touched(&ctx.call.name, &ctx.call.arguments) else {
            return PostDecision::Accept;
        };
        let Some(text) = self.announce(&dir, root) else {
            return PostDecision::Accept;
        };
        let mut content = result.content.clone();
        content.push(ContentBlock::text(text.trim_start().to_owned()));
        PostDecision::ReplaceContent(content)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn hook(root: &Path, cwd: &Path, budget: usize) -> NestedInstructions {
        NestedInstructions::new(&[root.to_path_buf()], cwd, budget)
    }

    #[test]
    fn a_touched_directory_announces_its_files_once_and_again_when_changed() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("AGENTS.md"), "root rule").unwrap();
        std::fs::write(root.join("a/AGENTS.md"), "a rule").unwrap();
        std::fs::write(root.join("a/b/CLAUDE.md"), "b rule").unwrap();
        std::fs::write(root.join("a/b/x.rs"), "").unwrap();
        let h = hook(&root, &root, 1000);
        let (d, r) = h.touched("read", r#"{"file_path":"a/b/x.rs"}"#).unwrap();
        let text = h.announce(&d, r).unwrap();
        assert!(!text.contains("root rule"), "{text}");
        let a = text
            .find("path=\"a/AGENTS.md\" applies-to=\"a/\">\na rule\n")
            .unwrap();
        let b = text
            .find("path=\"a/b/CLAUDE.md\" applies-to=\"a/b/\">\nb rule\n")
            .unwrap();
        assert!(a < b, "{text}");
        assert_eq!(h.announce(&d, r), None);
        std::fs::write(root.join("a/AGENTS.md"), "a rule, longer now").unwrap();
        let again = h.announce(&d, r).unwrap();
        assert!(
            again.contains("changed=\"true\">\na rule, longer now"),
            "{again}"
        );
        assert!(!again.contains("b rule"), "{again}");
    }

    #[test]
    fn the_prompts_directories_other_tools_and_outside_paths_announce_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("cwd/deeper")).unwrap();
        std::fs::write(root.join("cwd/AGENTS.md"), "in the prompt").unwrap();
        std::fs::write(root.join("cwd/deeper/AGENTS.md"), "deeper rule").unwrap();
        let h = hook(&root, &root.join("cwd"), 1000);
        let (d, r) = h.touched("glob", r#"{"pattern":"*"}"#).unwrap();
        assert_eq!(h.announce(&d, r), None);
        assert!(h.touched("bash", r#"{"command":"ls deeper"}"#).is_none());
        assert!(h.touched("read", r#"{"file_path":"/etc/hosts"}"#).is_none());
        let (d, r) = h
            .touched("grep", r#"{"pattern":"x","path":"deeper"}"#)
            .unwrap();
        assert!(h.announce(&d, r).unwrap().contains("deeper rule"));
    }

    #[test]
    fn the_budget_cuts_the_file_that_reaches_it_and_stops_there() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/AGENTS.md"), "x".repeat(30)).unwrap();
        std::fs::write(root.join("a/b/AGENTS.md"), "never shown").unwrap();
        let h = hook(&root, &root, 10);
        let (d, r) = h.touched("read", r#"{"path":"a/b"}"#).unwrap();
        let text = h.announce(&d, r).unwrap();
        assert!(
            text.contains("[... cut: nested instructions budget"),
            "{text}"
        );
        assert!(!text.contains("never shown"), "{text}");
    }
}
