//! The progress of a call that runs children (a workflow's agents, ralph's rounds), folded from
//! the [`Step`]s plugins' presenters give ([`keel_protocol::present`]) into a small tree the
//! front ends show under the call: the terminal UI in the tool's running block, ACP as the
//! call's `tool_call_update` content.

use keel_protocol::present::Step;

/// Lines kept (older log lines are dropped first).
const MAX_LINES: usize = 60;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Phase(String),
    Child {
        key: String,
        label: String,
        status: String,
        error: String,
    },
    Log(String),
}

/// The progress tree of one call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    title: String,
    entries: Vec<Entry>,
}

impl Progress {
    /// True when nothing was reported.
    pub fn is_empty(&self) -> bool {
        self.title.is_empty() && self.entries.is_empty()
    }

    /// Fold one step in.
    pub fn apply(&mut self, step: &Step) {
        match step {
            Step::Title(title) => self.title = title.clone(),
            Step::Heading(title) => self.entries.push(Entry::Phase(title.clone())),
            Step::Log(text) => self.entries.push(Entry::Log(text.clone())),
            Step::Child {
                key,
                label,
                state,
                error,
            } => {
                let found = self.entries.iter_mut().find_map(|e| match e {
                    Entry::Child {
                        key: k,
                        status,
                        error,
                        ..
                    } if k == key => Some((status, error)),
                    _ => None,
                });
                match found {
                    Some((st, er)) => {
                        st.clone_from(state);
                        er.clone_from(error);
                    }
                    None => self.entries.push(Entry::Child {
                        key: key.clone(),
                        label: label.clone(),
                        status: state.clone(),
                        error: error.clone(),
                    }),
                }
            }
        }
        while self.entries.len() > MAX_LINES {
            let at = self
                .entries
                .iter()
                .position(|e| matches!(e, Entry::Log(_)))
                .unwrap_or(0);
            self.entries.remove(at);
        }
    }

    /// The tree as lines: the title, phase headings, one line per child (a mark for its
    /// status) and log lines, children and logs indented under their phase.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.title.is_empty() {
            out.push(self.title.clone());
        }
        let mut indent = "";
        for e in &self.entries {
            match e {
                Entry::Phase(title) => {
                    out.push(format!("▸ {title}"));
                    indent = "  ";
                }
                Entry::Child {
                    label,
                    status,
                    error,
                    ..
                } => {
                    let mark = match status.as_str() {
                        "running" => "…",
                        "failed" => "✗",
                        _ => "✓",
                    };
                    let mut line = format!("{indent}{mark} {label}");
                    if !matches!(status.as_str(), "running" | "completed" | "failed") {
                        line.push_str(&format!(" ({status})"));
                    }
                    if !error.is_empty() {
                        line.push_str(&format!(": {}", crate::view::text::one_line(error, 120)));
                    }
                    out.push(line);
                }
                Entry::Log(text) => out.push(format!("{indent}· {text}")),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn child(key: &str, label: &str, state: &str, error: &str) -> Step {
        Step::Child {
            key: key.into(),
            label: label.into(),
            state: state.into(),
            error: error.into(),
        }
    }

    #[test]
    fn steps_fold_into_a_tree_updated_in_place() {
        let mut p = Progress::default();
        for step in [
            Step::Title("fan: four".into()),
            Step::Heading("survey".into()),
            child("a1", "a.rs", "running", ""),
            child("a2", "b.rs", "running", ""),
            child("a1", "a.rs", "completed", ""),
            Step::Log("half way".into()),
            child("a2", "b.rs", "failed", "no JSON"),
        ] {
            p.apply(&step);
        }
        assert_eq!(
            p.lines(),
            vec![
                "fan: four",
                "▸ survey",
                "  ✓ a.rs",
                "  ✗ b.rs: no JSON",
                "  · half way"
            ]
        );
        let mut r = Progress::default();
        r.apply(&child("r1", "round 1", "running", ""));
        r.apply(&child("r1", "round 1", "continue", ""));
        r.apply(&child("r2", "round 2", "running", ""));
        assert_eq!(r.lines(), vec!["✓ round 1 (continue)", "… round 2"]);
    }
}
