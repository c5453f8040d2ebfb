//! Workspace trust in the UI: the question asked once, before the first agent, when a workspace
//! nobody decided about holds hooks, MCP servers or settings that would widen what keel does,
//! and the texts of `/trust`.
//!
//! Data flow: the front end loads the decision and the files it governs
//! ([`crate::AgentSource::trust`] → [`WorkspaceTrust`]); [`WorkspaceTrust::should_ask`] says
//! whether to ask; [`question`] is the modal; the answer goes back to the front end
//! ([`crate::AgentSource::record_trust`]), which records it in the user's configuration, and the
//! agent is built (or rebuilt over the same session, for `/trust`) on the new decision. Nothing
//! here reads or writes files.

use crate::view::Modal;
use keel_host::ProjectTrust;
use keel_host::trust::{Ignored, TrustDecision};

/// A workspace's trust decision and what its own files hold that the decision governs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceTrust {
    /// The decision (its root, level and where it came from).
    pub decision: TrustDecision,
    /// What the workspace's files hold that runs or widens keel's permissions only when it is
    /// trusted, by file: ignored now when untrusted, in effect when trusted.
    pub files: Vec<Ignored>,
}

impl WorkspaceTrust {
    /// Whether to ask before the first agent: nobody decided and trusting would change
    /// something. A workspace with nothing to ignore is not asked about and stays undecided.
    pub fn should_ask(&self) -> bool {
        self.decision.is_undecided() && !self.files.is_empty()
    }

    /// The one line the UI shows while the workspace's files are left alone (what, and how to
    /// trust it); `None` when trusted or when there is nothing to leave alone.
    pub fn notice(&self) -> Option<String> {
        keel_host::trust::notice(&self.decision, &self.files)
    }

    /// The governed files as lines: `- .claude/settings.json: hooks.UserPromptSubmit`, paths
    /// relative to the workspace root where they are under it.
    fn file_lines(&self) -> Vec<String> {
        self.files
            .iter()
            .map(|i| {
                let file = i.file.strip_prefix(&self.decision.root).unwrap_or(&i.file);
                format!("- {}: {}", file.display(), i.what.join(", "))
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

    /// The transcript line after the trust question was answered with `answer` (this is the
    /// decision after recording it).
    pub fn answered(&self, answer: Answer) -> String {
        let root = self.decision.root.display();
        let decision = self.decision.describe();
        match answer {
            Answer::Trust => format!(
                "Workspace {root} is {decision}: its hooks, MCP servers and settings take effect. /trust no revokes it."
            ),
            Answer::Distrust => format!(
                "Workspace {root} is {decision}: keel will not ask again. /trust yes trusts it."
            ),
            Answer::Dismissed => format!(
                "No answer: nothing recorded. Workspace {root} stays untrusted in this session and keel asks again next time."
            ),
        }
    }
}

/// How the person answered the trust question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Trust the workspace (recorded).
    Trust,
    /// Keep its files inert (recorded: not asked again).
    Distrust,
    /// Esc or Ctrl-C: nothing recorded; untrusted for this run, asked again next time.
    Dismissed,
}

/// The option of [`question`] highlighted first: "No" (a reflexive Enter keeps the files
/// inert).
pub const DEFAULT_CHOICE: usize = 1;

/// The trust question for `ws`.
pub fn question(ws: &WorkspaceTrust) -> Modal {
    let mut body = format!(
        "{}\n\nThey can run commands or widen what keel may do, and are ignored until you \
         trust this folder:\n",
        ws.decision.root.display()
    );
    for line in ws.file_lines() {
        body.push('\n');
        body.push_str(&line);
    }
    body.push_str(
        "\n\nYour answer is recorded in your keel configuration (keel trust, /trust change it). \
         Esc: decide later (untrusted for now).",
    );
    Modal {
        title: "Trust the files in this folder?".into(),
        body,
        options: vec![
            "Yes, trust this folder: its hooks, MCP servers and settings take effect".into(),
            "No, keep them inert (not asked again)".into(),
        ],
        selected: DEFAULT_CHOICE,
        markdown: false,
    }
}

/// The answer a choice of [`question`]'s options stands for.
pub fn answer_of(choice: usize) -> Answer {
    if choice == 0 {
        Answer::Trust
    } else {
        Answer::Distrust
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_host::trust::TrustSource;
    use std::path::PathBuf;

    fn workspace(trust: ProjectTrust, source: TrustSource, files: Vec<Ignored>) -> WorkspaceTrust {
        WorkspaceTrust {
            decision: TrustDecision {
                root: PathBuf::from("/src/repo"),
                trust,
                source,
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
        assert_eq!(flagged.notice(), None);
        assert!(
            decided
                .notice()
                .is_some_and(|n| n.contains("mcpServers.evil"))
        );
    }

    #[test]
    fn the_question_lists_each_file_relative_to_the_root_and_defaults_to_no() {
        let ws = workspace(ProjectTrust::Untrusted, TrustSource::Undecided, hooks());
        let q = question(&ws);
        assert_eq!(q.title, "Trust the files in this folder?");
        assert!(
            q.body
                .contains("- .claude/settings.json: hooks.SessionStart, hooks.UserPromptSubmit\n- .mcp.json: mcpServers.evil"),
            "{}",
            q.body
        );
        assert!(q.body.starts_with("/src/repo\n"), "{}", q.body);
        assert_eq!(answer_of(q.selected), Answer::Distrust);
        assert_eq!(answer_of(0), Answer::Trust);
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
