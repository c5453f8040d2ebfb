//! Workspace trust in the UI: the question asked once, before the first agent, when a workspace
//! nobody decided about holds hooks, MCP servers or settings that would widen what keel does
//! (asked again, listing them, when files of a trusted workspace changed since it was
//! trusted), and the texts of `/trust`.
//!
//! Data flow: the front end loads the decision and the files it governs
//! ([`crate::AgentSource::trust`] → [`WorkspaceTrust`]); [`WorkspaceTrust::should_ask`] says
//! whether to ask; [`question`] is the modal; the answer goes back to the front end
//! ([`crate::AgentSource::record_trust`]), which records it in the user's configuration, and the
//! agent is built (or rebuilt over the same session, for `/trust`) on the new decision. Nothing
//! here reads or writes files.

use crate::view::Modal;
pub use keel_host::trust::WorkspaceTrust;

/// The transcript line after the trust question was answered with `answer` (`ws`: the
/// decision after recording it).
pub fn answered(ws: &WorkspaceTrust, answer: Answer) -> String {
    let root = ws.decision.root.display();
    let decision = ws.decision.describe();
    match answer {
        Answer::Trust => format!(
            "Workspace {root} is {decision}: its hooks, MCP servers and settings take effect. /trust no revokes it."
        ),
        Answer::Distrust => format!(
            "Workspace {root} is {decision}: keel will not ask again. /trust yes trusts it."
        ),
        Answer::Dismissed if ws.is_changed() => format!(
            "Nothing recorded: the files changed since you trusted {root} stay inert in this session and keel asks again next time (keel trust, /trust yes accept them)."
        ),
        Answer::Dismissed => format!(
            "No answer: nothing recorded. Workspace {root} stays untrusted in this session and keel asks again next time."
        ),
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
    if ws.is_changed() {
        return question_changed(ws);
    }
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

/// The question for a trusted workspace whose files changed since it was trusted: trust them
/// as they are now, or leave them inert for now (nothing recorded, asked again).
fn question_changed(ws: &WorkspaceTrust) -> Modal {
    let mut body = format!(
        "{}\n\nYou trusted this folder, but these files changed since (by a command, a checkout, \
         another program) and are ignored until you trust them:\n",
        ws.decision.root.display()
    );
    for line in ws.changed_lines() {
        body.push('\n');
        body.push_str(&line);
    }
    body.push_str(
        "\n\nYes records them as they are now in your keel configuration (as keel trust does). \
         Esc: decide later (ignored for now).",
    );
    Modal {
        title: "Trust the changed files in this folder?".into(),
        body,
        options: vec![
            "Yes, trust them as they are now: they take effect".into(),
            "No, keep them inert for now (asked again next time)".into(),
        ],
        selected: DEFAULT_CHOICE,
        markdown: false,
    }
}

/// The answer a choice of `ws`'s [`question`] stands for (the second option of the question
/// about changed files records nothing).
pub fn answer_of(ws: &WorkspaceTrust, choice: usize) -> Answer {
    match choice {
        0 => Answer::Trust,
        _ if ws.is_changed() => Answer::Dismissed,
        _ => Answer::Distrust,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_host::ProjectTrust;
    use keel_host::trust::pins::{Change, Changed};
    use keel_host::trust::{Ignored, TrustDecision, TrustSource};
    use std::path::PathBuf;

    #[test]
    fn the_question_lists_each_file_relative_to_the_root_and_defaults_to_no() {
        let ignored = |file: &str, what: &[&str]| Ignored {
            file: PathBuf::from(file),
            what: what.iter().map(|w| (*w).to_owned()).collect(),
        };
        let ws = WorkspaceTrust {
            decision: TrustDecision {
                root: PathBuf::from("/src/repo"),
                trust: ProjectTrust::Untrusted,
                source: TrustSource::Undecided,
                changed: Vec::new(),
            },
            files: vec![
                ignored("/src/repo/.claude/settings.json", &["hooks.SessionStart"]),
                ignored("/elsewhere/.mcp.json", &["mcpServers.evil"]),
            ],
        };
        let q = question(&ws);
        assert_eq!(q.title, "Trust the files in this folder?");
        assert!(
            q.body.contains(
                "- .claude/settings.json: hooks.SessionStart\n- /elsewhere/.mcp.json: mcpServers.evil"
            ),
            "{}",
            q.body
        );
        assert!(q.body.starts_with("/src/repo\n"), "{}", q.body);
        assert_eq!(answer_of(&ws, q.selected), Answer::Distrust);
        assert_eq!(answer_of(&ws, 0), Answer::Trust);
    }

    #[test]
    fn a_trusted_folder_with_changed_files_is_asked_about_them_and_no_records_nothing() {
        let mut ws = WorkspaceTrust {
            decision: TrustDecision {
                root: PathBuf::from("/src/repo"),
                trust: ProjectTrust::Trusted,
                source: TrustSource::Recorded {
                    dir: "/src/repo".into(),
                    layer: "/h/config.toml".into(),
                },
                changed: vec![Changed {
                    file: PathBuf::from("/src/repo/.mcp.json"),
                    pinned: ".mcp.json",
                    change: Change::Created,
                }],
            },
            files: vec![Ignored {
                file: PathBuf::from("/src/repo/.mcp.json"),
                what: vec!["mcpServers.evil".into()],
            }],
        };
        assert!(ws.should_ask());
        let q = question(&ws);
        assert_eq!(q.title, "Trust the changed files in this folder?");
        assert!(
            q.body
                .contains("\n- .mcp.json (created): mcpServers.evil\n"),
            "{}",
            q.body
        );
        assert_eq!(answer_of(&ws, q.selected), Answer::Dismissed);
        assert_eq!(answer_of(&ws, 0), Answer::Trust);
        assert!(answered(&ws, Answer::Dismissed).contains("stay inert"));
        ws.decision.changed.clear();
        assert!(!ws.should_ask());
    }
}
