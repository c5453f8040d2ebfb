//! Tool names and arguments as Claude Code hooks expect them.
//!
//! keel's built-in tools are lower-case (`bash`, `read`, …); Claude Code's are capitalised
//! (`Bash`, `Read`, …) and a few are named differently. Matchers compare case-insensitively
//! against both keel's name and the alias below, so `Bash`, `bash` and `Task` (for keel's
//! `subagent`) all work. The payload's `tool_name` is the Claude name when there is one (so
//! scripts written for Claude Code run unchanged) and `keel_tool_name` is keel's. For the file
//! tools, `tool_input.file_path` repeats keel's `path` (Claude's spelling).

use serde_json::Value;

/// keel name → Claude Code name.
const ALIASES: &[(&str, &str)] = &[
    ("bash", "Bash"),
    ("read", "Read"),
    ("write", "Write"),
    ("edit", "Edit"),
    ("glob", "Glob"),
    ("grep", "Grep"),
    ("todo_write", "TodoWrite"),
    ("exit_plan_mode", "ExitPlanMode"),
    ("ask_user_question", "AskUserQuestion"),
    ("subagent", "Task"),
];

/// Claude Code's name for keel's tool `name`, if it has one.
pub fn claude_name(name: &str) -> Option<&'static str> {
    ALIASES.iter().find(|(k, _)| *k == name).map(|(_, c)| *c)
}

/// The names a matcher is tried against: keel's, then Claude's.
pub(crate) fn match_names(name: &str) -> Vec<&str> {
    let mut names = vec![name];
    names.extend(claude_name(name));
    names
}

/// `tool_input` for a call of `name`: keel's arguments, plus `file_path` for file tools.
pub(crate) fn tool_input(name: &str, args: &Value) -> Value {
    let mut input = args.clone();
    if matches!(name, "read" | "write" | "edit")
        && let Value::Object(map) = &mut input
        && !map.contains_key("file_path")
        && let Some(path) = map.get("path").cloned()
    {
        map.insert("file_path".into(), path);
    }
    input
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_and_file_path() {
        assert_eq!(match_names("subagent"), ["subagent", "Task"]);
        assert_eq!(match_names("my_tool"), ["my_tool"]);
        let input = tool_input(
            "write",
            &serde_json::json!({"path": "a.txt", "content": "x"}),
        );
        assert_eq!(input["file_path"], "a.txt");
        assert_eq!(input["path"], "a.txt");
        let bash = tool_input("bash", &serde_json::json!({"command": "ls"}));
        assert_eq!(bash, serde_json::json!({"command": "ls"}));
    }
}
