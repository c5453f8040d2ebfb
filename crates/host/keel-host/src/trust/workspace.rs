//! A workspace's trust as front ends show it: the decision and the files it governs, and the
//! words of `/trust` and of the notice, shared by the terminal UI and ACP.

use super::pins::Change;
use super::{Ignored, ProjectTrust, TrustDecision};
use std::path::Path;

/// A workspace's trust decision and what its own files hold that the decision governs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceTrust {
    /// The decision (its root, level and where it came from).
    pub decision: TrustDecision,
    /// What the workspace's files hold that runs or widens keel's permissions only when it is
    /// trusted, by file: ignored now when untrusted, in effect when trusted.
    pub files: Vec<Ignored>,
}

/// One file a workspace's trust governs, as [`WorkspaceTrust::governed`] gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GovernedFile<'a> {
    /// The file, relative to the workspace root where it is under it.
    pub file: &'a Path,
    /// What it holds that the decision governs (`hooks.SessionStart`, `mcpServers.x`).
    pub what: &'a [String],
    /// How it changed since the workspace was trusted, if it did.
    pub change: Option<&'a Change>,
}

impl WorkspaceTrust {
    /// Whether to ask before the first agent: nobody decided and trusting would change
    /// something, or it is trusted and files changed since ([`Self::is_changed`]). A workspace
    /// with nothing to ignore is not asked about and stays undecided.
    pub fn should_ask(&self) -> bool {
        self.decision.is_undecided() && !self.files.is_empty() || self.is_changed()
    }

    /// Whether the workspace is trusted and some of its files changed since
    /// ([`super::pins`]): those stay inert until it is trusted again.
    pub fn is_changed(&self) -> bool {
        self.decision.is_trusted() && !self.decision.changed.is_empty()
    }

    /// The one line the UI shows while the workspace's files are left alone (what, and how to
    /// trust it); `None` when trusted or when there is nothing to leave alone.
    pub fn notice(&self) -> Option<String> {
        super::notice(&self.decision, &self.files)
    }

    /// The governed files, in order: each with its path relative to the workspace root where
    /// it is under it, what it holds, and how it changed since the workspace was trusted (if
    /// it did). What [`Self::file_lines`] words, and `keel serve` answers as JSON.
    pub fn governed(&self) -> impl Iterator<Item = GovernedFile<'_>> {
        self.files.iter().map(|i| GovernedFile {
            file: i.file.strip_prefix(&self.decision.root).unwrap_or(&i.file),
            what: &i.what,
            change: self
                .decision
                .changed
                .iter()
                .find(|c| c.file == i.file)
                .map(|c| &c.change),
        })
    }

    /// The governed files as lines: `- .claude/settings.json: hooks.UserPromptSubmit`, paths
    /// relative to the workspace root where they are under it; a file changed since the
    /// workspace was trusted says so (`(created since trusted: inert)`).
    pub fn file_lines(&self) -> Vec<String> {
        self.governed()
            .map(|g| {
                let mut line = format!("- {}: {}", g.file.display(), g.what.join(", "));
                if self.decision.is_trusted()
                    && let Some(change) = g.change
                {
                    line.push_str(&format!(" ({change} since trusted: inert)"));
                }
                line
            })
            .collect()
    }

    /// The files changed since the workspace was trusted as lines:
    /// `- .mcp.json (created): mcpServers.x`.
    pub fn changed_lines(&self) -> Vec<String> {
        self.decision
            .changed
            .iter()
            .map(|c| {
                let file = c.file.strip_prefix(&self.decision.root).unwrap_or(&c.file);
                let mut line = format!("- {} ({})", file.display(), c.change);
                if let Some(i) = self.files.iter().find(|i| i.file == c.file) {
                    line.push_str(&format!(": {}", i.what.join(", ")));
                }
                line
            })
            .collect()
    }

    /// What `/trust` without an argument shows.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "Workspace {}: {}",
            self.decision.root.display(),
            self.decision.describe()
        );
        if self.files.is_empty() {
            s.push_str(
                "\nIts files hold no hooks, MCP servers or settings that trust would change.",
            );
        } else if self.is_changed() {
            s.push_str("\nIn effect because it is trusted, but for what changed since:");
        } else if self.decision.is_trusted() {
            s.push_str("\nIn effect because it is trusted:");
        } else {
            s.push_str("\nIgnored until you trust it:");
        }
        for line in self.file_lines() {
            s.push('\n');
            s.push_str(&line);
        }
        s.push_str("\n/trust yes trusts it · /trust no keeps its files inert (both are recorded)");
        s
    }

    /// The transcript line after `/trust` recorded `level` (`before`: the decision in force
    /// until then): what changed from the next turn.
    pub fn changed(&self, before: ProjectTrust) -> String {
        let level = self.decision.trust;
        let mut s = format!(
            "Workspace {} is now {}.",
            self.decision.root.display(),
            self.decision.describe()
        );
        if self.files.is_empty() {
            s.push_str(" Its files hold nothing that trust changes.");
            return s;
        }
        s.push_str(match (before == level, level.is_trusted()) {
            (true, _) => " Nothing changes in this session:",
            (false, true) => " From the next turn these take effect:",
            (false, false) => " From the next turn these stay inert:",
        });
        for line in self.file_lines() {
            s.push('\n');
            s.push_str(&line);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trust::TrustSource;
    use std::path::PathBuf;

    fn workspace(trust: ProjectTrust, source: TrustSource, files: Vec<Ignored>) -> WorkspaceTrust {
        WorkspaceTrust {
            decision: TrustDecision {
                root: PathBuf::from("/src/repo"),
                trust,
                source,
                changed: Vec::new(),
            },
            files,
        }
    }

    fn hooks() -> Vec<Ignored> {
        vec![
            Ignored {
                file: PathBuf::from("/src/repo/.claude/settings.json"),
                what: vec!["hooks.SessionStart".into(), "hooks.UserPromptSubmit".into()],
            },
            Ignored {
                file: PathBuf::from("/src/repo/.mcp.json"),
                what: vec!["mcpServers.evil".into()],
            },
        ]
    }

    #[test]
    fn only_an_undecided_workspace_with_something_to_ignore_is_asked_about() {
        let undecided = workspace(ProjectTrust::Untrusted, TrustSource::Undecided, hooks());
        assert!(undecided.should_ask());
        let empty = workspace(ProjectTrust::Untrusted, TrustSource::Undecided, Vec::new());
        assert!(!empty.should_ask());
        let recorded = TrustSource::Recorded {
            dir: "/src/repo".into(),
            layer: "/h/config.toml".into(),
        };
        let decided = workspace(ProjectTrust::Untrusted, recorded, hooks());
        assert!(!decided.should_ask());
        let flagged = workspace(ProjectTrust::Trusted, TrustSource::Flag, hooks());
        assert!(!flagged.should_ask());
        // Trusted, with a file changed since: asked again, the file named.
        let mut changed = workspace(
            ProjectTrust::Trusted,
            decided.decision.source.clone(),
            hooks(),
        );
        assert!(!changed.should_ask());
        changed.decision.changed.push(crate::trust::pins::Changed {
            file: PathBuf::from("/src/repo/.mcp.json"),
            pinned: ".mcp.json",
            change: crate::trust::pins::Change::Created,
        });
        assert!(changed.should_ask());
        assert_eq!(
            changed.changed_lines(),
            vec!["- .mcp.json (created): mcpServers.evil"]
        );
        assert!(
            changed.file_lines()[1].ends_with("(created since trusted: inert)"),
            "{:?}",
            changed.file_lines()
        );
        assert_eq!(flagged.notice(), None);
        assert!(
            decided
                .notice()
                .is_some_and(|n| n.contains("mcpServers.evil"))
        );
    }

    #[test]
    fn describe_and_changed_say_what_the_decision_does() {
        let recorded = TrustSource::Recorded {
            dir: "/src/repo".into(),
            layer: "/h/config.toml".into(),
        };
        let ws = workspace(ProjectTrust::Trusted, recorded, hooks());
        assert_eq!(
            ws.describe(),
            "Workspace /src/repo: trusted (recorded in /h/config.toml)\n\
             In effect because it is trusted:\n\
             - .claude/settings.json: hooks.SessionStart, hooks.UserPromptSubmit\n\
             - .mcp.json: mcpServers.evil\n\
             /trust yes trusts it · /trust no keeps its files inert (both are recorded)"
        );
        assert_eq!(
            ws.changed(ProjectTrust::Untrusted),
            "Workspace /src/repo is now trusted (recorded in /h/config.toml). From the next turn these take effect:\n\
             - .claude/settings.json: hooks.SessionStart, hooks.UserPromptSubmit\n\
             - .mcp.json: mcpServers.evil"
        );
        assert!(
            ws.changed(ProjectTrust::Trusted)
                .contains("Nothing changes")
        );
        let undecided = workspace(ProjectTrust::Untrusted, TrustSource::Undecided, Vec::new());
        assert!(undecided.describe().contains("hold no hooks"));
    }
}
