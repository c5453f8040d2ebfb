//! The task file: one JSON object a line (`id`, `prompt`, `workspace`, `check`?, `model`?,
//! `flags`?). A line that is not a task is kept as a [`BadLine`] naming its line number; the
//! other tasks still run.

use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Longest task id (it names a directory under the out dir).
const MAX_ID: usize = 100;

/// One task of the file.
#[derive(Debug, Clone)]
pub struct Task {
    /// Line number (1-based).
    pub line: usize,
    /// Unique id: `[A-Za-z0-9._-]`, the name of its workspace directory.
    pub id: String,
    /// The prompt of its session.
    pub prompt: String,
    /// Where its workspace comes from.
    pub workspace: Workspace,
    /// Shell command run in the workspace after the session; exit 0 passes.
    pub check: Option<String>,
    /// `--model` for this task.
    pub model: Option<String>,
    /// More global flags for this task's `keel` (e.g. `["--sandbox", "full-access"]`).
    pub flags: Vec<String>,
}

/// Where a task's workspace comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Workspace {
    /// A directory (a template), copied whole for the task.
    Copy(PathBuf),
    /// A git repository (a local path or a URL) at a ref: a `git worktree` of a local
    /// repository, a clone of a URL.
    Git {
        /// Local path (resolved) or URL.
        repo: String,
        /// Commit, branch or tag (default `HEAD`).
        reference: String,
    },
}

/// A line that is not a task; shown as `line N: WHAT IS WRONG`.
#[derive(Debug)]
pub struct BadLine {
    /// Line number (1-based).
    pub line: usize,
    /// Its id, when it has a readable one.
    pub id: Option<String>,
    /// What is wrong.
    pub error: TaskError,
}

impl std::fmt::Display for BadLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.error)
    }
}

/// What is wrong with a line of the task file.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// Not JSON.
    #[error("not a JSON object: {0}")]
    NotJson(serde_json::Error),
    /// JSON, but not an object.
    #[error("not a JSON object")]
    NotObject,
    /// A field a task does not have.
    #[error("unknown field {0:?} (a task has id, prompt, workspace, check, model, flags)")]
    UnknownField(String),
    /// No `id`, or not a string.
    #[error("`id` must be a string")]
    IdNotString,
    /// An `id` that cannot name a directory.
    #[error("`id` {0:?} must be 1 to {MAX_ID} of A-Z a-z 0-9 . _ - (not starting with .)")]
    BadId(String),
    /// The id of an earlier line.
    #[error("id {id:?} is already used on line {first}")]
    DuplicateId {
        /// The id.
        id: String,
        /// The line that has it first.
        first: usize,
    },
    /// No prompt, or an empty one.
    #[error("`prompt` must be a non-empty string")]
    Prompt,
    /// A `check` that is no command.
    #[error("`check` must be a non-empty string (a shell command)")]
    Check,
    /// A `model` that is no string.
    #[error("`model` must be a string")]
    Model,
    /// `flags` that are not strings.
    #[error("`flags` must be a list of strings")]
    Flags,
    /// A field a workspace object does not have.
    #[error("`workspace`: unknown field {0:?} (expected \"dir\", or \"git\" and \"ref\")")]
    WorkspaceField(String),
    /// A `workspace.ref` that is no git ref.
    #[error("`workspace.ref` must be a git ref")]
    WorkspaceRef,
    /// A workspace object of neither form.
    #[error("`workspace` must be {{\"dir\": PATH}} or {{\"git\": REPO, \"ref\": REF}}")]
    WorkspaceObject,
    /// No workspace, or of no known form.
    #[error(
        "`workspace` must be a directory path, {{\"dir\": PATH}} or {{\"git\": REPO, \"ref\": REF}}"
    )]
    Workspace,
}

/// Read the task file; relative workspace paths are relative to its directory.
pub fn read(path: &Path) -> std::io::Result<(Vec<Task>, Vec<BadLine>)> {
    let text = std::fs::read_to_string(path)?;
    let base = path.parent().unwrap_or(Path::new("."));
    Ok(parse(&text, base))
}

/// Parse task lines (blank lines are skipped).
pub fn parse(text: &str, base: &Path) -> (Vec<Task>, Vec<BadLine>) {
    let mut tasks: Vec<Task> = Vec::new();
    let mut bad = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        match parse_line(raw, line, base) {
            Ok(task) => match seen.get(&task.id) {
                Some(first) => bad.push(BadLine {
                    line,
                    id: Some(task.id.clone()),
                    error: TaskError::DuplicateId {
                        id: task.id.clone(),
                        first: *first,
                    },
                }),
                None => {
                    seen.insert(task.id.clone(), line);
                    tasks.push(task);
                }
            },
            Err((id, error)) => bad.push(BadLine { line, id, error }),
        }
    }
    (tasks, bad)
}

/// One line as a task; else what is wrong with it, with its id when it has a readable one.
fn parse_line(raw: &str, line: usize, base: &Path) -> Result<Task, (Option<String>, TaskError)> {
    let value: Value = serde_json::from_str(raw).map_err(|e| (None, TaskError::NotJson(e)))?;
    let Value::Object(map) = value else {
        return Err((None, TaskError::NotObject));
    };
    let id = map.get("id").and_then(Value::as_str).map(str::to_owned);
    let fail = |error: TaskError| (id.clone(), error);
    for key in map.keys() {
        if !matches!(
            key.as_str(),
            "id" | "prompt" | "workspace" | "check" | "model" | "flags"
        ) {
            return Err(fail(TaskError::UnknownField(key.clone())));
        }
    }
    let Some(id_text) = id.clone() else {
        return Err(fail(TaskError::IdNotString));
    };
    if id_text.is_empty()
        || id_text.len() > MAX_ID
        || id_text.starts_with('.')
        || !id_text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err(fail(TaskError::BadId(id_text)));
    }
    let prompt = match map.get("prompt") {
        Some(Value::String(p)) if !p.trim().is_empty() => p.clone(),
        _ => return Err(fail(TaskError::Prompt)),
    };
    let workspace = workspace(map.get("workspace"), base).map_err(fail)?;
    let check = match map.get("check") {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) if !c.trim().is_empty() => Some(c.clone()),
        Some(_) => return Err(fail(TaskError::Check)),
    };
    let model = match map.get("model") {
        None | Some(Value::Null) => None,
        Some(Value::String(m)) if !m.is_empty() => Some(m.clone()),
        Some(_) => return Err(fail(TaskError::Model)),
    };
    let flags = match map.get("flags") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| fail(TaskError::Flags))?,
        Some(_) => return Err(fail(TaskError::Flags)),
    };
    Ok(Task {
        line,
        id: id_text,
        prompt,
        workspace,
        check,
        model,
        flags,
    })
}

/// A task's `workspace` field.
fn workspace(value: Option<&Value>, base: &Path) -> Result<Workspace, TaskError> {
    let local = |p: &str| {
        let path = Path::new(p);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            base.join(path)
        }
    };
    match value {
        Some(Value::String(dir)) if !dir.is_empty() => Ok(Workspace::Copy(local(dir))),
        Some(Value::Object(map)) => {
            for key in map.keys() {
                if !matches!(key.as_str(), "dir" | "git" | "ref") {
                    return Err(TaskError::WorkspaceField(key.clone()));
                }
            }
            match (map.get("dir"), map.get("git"), map.get("ref")) {
                (Some(Value::String(dir)), None, None) if !dir.is_empty() => {
                    Ok(Workspace::Copy(local(dir)))
                }
                (None, Some(Value::String(repo)), reference) if !repo.is_empty() => {
                    let reference = match reference {
                        None | Some(Value::Null) => "HEAD".to_owned(),
                        Some(Value::String(r)) if !r.is_empty() && !r.starts_with('-') => r.clone(),
                        Some(_) => return Err(TaskError::WorkspaceRef),
                    };
                    let repo = if is_url(repo) {
                        repo.clone()
                    } else {
                        local(repo).to_string_lossy().into_owned()
                    };
                    Ok(Workspace::Git { repo, reference })
                }
                _ => Err(TaskError::WorkspaceObject),
            }
        }
        _ => Err(TaskError::Workspace),
    }
}

/// A git URL rather than a local path (`scheme://…` or scp-like `user@host:path`).
fn is_url(repo: &str) -> bool {
    repo.contains("://") || (repo.contains('@') && repo.contains(':') && !repo.starts_with('/'))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn good_and_bad_lines_are_told_apart_by_line_number() {
        let text = r#"{"id":"a","prompt":"p","workspace":"ws","check":"true"}

{"id":"b","prompt":"p","workspace":{"git":"repo","ref":"main"},"flags":["--sandbox","full-access"]}
not json
{"id":"a","prompt":"p","workspace":"ws"}
{"id":"c","prompt":"","workspace":"ws"}
{"id":"../x","prompt":"p","workspace":"ws"}
{"id":"d","prompt":"p","workspace":"ws","color":1}
"#;
        let (tasks, bad) = parse(text, Path::new("/base"));
        assert_eq!(tasks.len(), 2);
        assert_eq!(tasks[0].workspace, Workspace::Copy("/base/ws".into()));
        assert_eq!(
            tasks[1].workspace,
            Workspace::Git {
                repo: "/base/repo".into(),
                reference: "main".into()
            }
        );
        assert_eq!(tasks[1].line, 3);
        let lines: Vec<usize> = bad.iter().map(|b| b.line).collect();
        assert_eq!(lines, vec![4, 5, 6, 7, 8]);
        assert_eq!(
            bad[1].to_string(),
            "line 5: id \"a\" is already used on line 1"
        );
        assert!(bad[2].to_string().contains("`prompt`"));
        assert_eq!(
            bad[4].to_string(),
            "line 8: unknown field \"color\" (a task has id, prompt, workspace, check, model, flags)"
        );
        assert_eq!(bad[0].to_string().split(": ").next(), Some("line 4"));
        assert_eq!(
            bad[3].to_string(),
            "line 7: `id` \"../x\" must be 1 to 100 of A-Z a-z 0-9 . _ - (not starting with .)"
        );
    }

    #[test]
    fn a_bad_workspace_says_which_forms_there_are() {
        let text = r#"{"id":"a","prompt":"p","workspace":3}
{"id":"b","prompt":"p","workspace":{"dir":"x","git":"y"}}
{"id":"c","prompt":"p","workspace":{"git":"y","ref":"-x"}}
{"id":"d","prompt":"p","workspace":{"path":"x"}}
[1]
"#;
        let (tasks, bad) = parse(text, Path::new("/base"));
        assert!(tasks.is_empty());
        let said: Vec<String> = bad.iter().map(ToString::to_string).collect();
        assert_eq!(
            said,
            [
                r#"line 1: `workspace` must be a directory path, {"dir": PATH} or {"git": REPO, "ref": REF}"#,
                r#"line 2: `workspace` must be {"dir": PATH} or {"git": REPO, "ref": REF}"#,
                "line 3: `workspace.ref` must be a git ref",
                r#"line 4: `workspace`: unknown field "path" (expected "dir", or "git" and "ref")"#,
                "line 5: not a JSON object",
            ]
        );
        assert_eq!(bad[0].id.as_deref(), Some("a"));
        assert_eq!(bad[4].id, None);
    }
}
