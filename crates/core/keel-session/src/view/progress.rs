//! The progress of a call that runs children (the `workflow` and `ralph` plugins' events, keyed
//! by the call's `callId`), folded into a small tree the front ends show under the call: the
//! terminal UI in the tool's running block, ACP as the call's `tool_call_update` content.
//!
//! | event | what it adds |
//! |---|---|
//! | `workflow/started` | the title (`name: description`) |
//! | `workflow/phase` | a phase heading |
//! | `workflow/agent` | an agent line, updated in place by its later events (`n`) |
//! | `workflow/log` | a log line |
//! | `ralph/round` | a round line, updated in place (`round`) |

use serde_json::Value;

/// Event types folded here.
pub const PROGRESS_EVENTS: &[&str] = &[
    "workflow/started",
    "workflow/phase",
    "workflow/agent",
    "workflow/log",
    "ralph/round",
];

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

    /// Fold one event (`type_name`, `data`) in.
    pub fn apply(&mut self, type_name: &str, data: &Value) {
        let s = |k: &str| data.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        match type_name {
            "workflow/started" => self.title = format!("{}: {}", s("name"), s("description")),
            "workflow/phase" => self.entries.push(Entry::Phase(s("title"))),
            "workflow/log" => self.entries.push(Entry::Log(s("message"))),
            "workflow/agent" | "ralph/round" => {
                let (key, label) = if type_name == "ralph/round" {
                    let r = data.get("round").map(Value::to_string).unwrap_or_default();
                    (format!("r{r}"), format!("round {r}"))
                } else {
                    let n = data.get("n").map(Value::to_string).unwrap_or_default();
                    (format!("a{n}"), s("label"))
                };
                let (status, error) = (s("status"), s("error"));
                let found = self.entries.iter_mut().find_map(|e| match e {
                    Entry::Child {
                        key: k,
                        status,
                        error,
                        ..
                    } if *k == key => Some((status, error)),
                    _ => None,
                });
                match found {
                    Some((st, er)) => {
                        *st = status;
                        *er = error;
                    }
                    None => self.entries.push(Entry::Child {
                        key,
                        label,
                        status,
                        error,
                    }),
                }
            }
            _ => return,
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
    use serde_json::json;

    #[test]
    fn a_workflow_folds_into_a_tree_updated_in_place() {
        let mut p = Progress::default();
        p.apply(
            "workflow/started",
            &json!({"name": "fan", "description": "four"}),
        );
        p.apply("workflow/phase", &json!({"title": "survey"}));
        p.apply(
            "workflow/agent",
            &json!({"n": 1, "label": "a.rs", "status": "running"}),
        );
        p.apply(
            "workflow/agent",
            &json!({"n": 2, "label": "b.rs", "status": "running"}),
        );
        p.apply(
            "workflow/agent",
            &json!({"n": 1, "label": "a.rs", "status": "completed"}),
        );
        p.apply("workflow/log", &json!({"message": "half way"}));
        p.apply(
            "workflow/agent",
            &json!({"n": 2, "label": "b.rs", "status": "failed", "error": "no JSON"}),
        );
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
        r.apply("ralph/round", &json!({"round": 1, "status": "running"}));
        r.apply("ralph/round", &json!({"round": 1, "status": "continue"}));
        r.apply("ralph/round", &json!({"round": 2, "status": "running"}));
        assert_eq!(r.lines(), vec!["✓ round 1 (continue)", "… round 2"]);
    }
}
