//! The demo project and the scripted model that works on it (`keel demo`).
//!
//! The project is a two-file shell "library" with a failing test. The script drives a real
//! agent loop over real tools: it keeps a todo list, reads the code, runs the test (it fails),
//! fixes the bug with `edit`, runs the test again (it passes) and answers.

use anyhow::{Context, Result};
use std::path::Path;

/// The task given to the agent.
pub const PROMPT: &str =
    "The test in test.sh fails. Find the bug in add.sh, fix it, and make sure the test passes.";

/// The project's files.
pub const FILES: &[(&str, &str)] = &[
    (
        "README.md",
        "# demo\n\n`add.sh A B` prints A + B. Run `sh test.sh` to test it.\n",
    ),
    (
        "add.sh",
        "#!/bin/sh\n# add.sh A B: print the sum of A and B\necho $(( $1 - $2 ))\n",
    ),
    (
        "test.sh",
        "#!/bin/sh\ngot=$(sh add.sh 2 3)\nif [ \"$got\" = \"5\" ]; then echo \"ok: add 2 3 = 5\"; else echo \"FAIL: add 2 3 = $got, expected 5\"; exit 1; fi\n",
    ),
];

/// The scripted model's responses (see docs/scripts.md).
pub const SCRIPT: &str = r#"
responses:
  - reasoning: "The user wants a failing test fixed. I'll plan first, then read the code."
    text: "I'll keep a short plan and start by reading the code and the test."
    tool_calls:
      - name: todo_write
        arguments:
          todos:
            - {content: "Read add.sh and test.sh", status: in_progress}
            - {content: "Fix the bug in add.sh", status: pending}
            - {content: "Run the test", status: pending}
  - reasoning: "Read both files in one go; reads can run in parallel."
    tool_calls:
      - {name: read, arguments: {file_path: "add.sh"}}
      - {name: read, arguments: {file_path: "test.sh"}}
  - reasoning: "add.sh subtracts. Confirm with the test before changing anything."
    text: "add.sh computes $1 - $2. Let me confirm the failure."
    tool_calls:
      - {name: bash, arguments: {command: "sh test.sh", description: "Run the test"}}
  - reasoning: "The test fails as expected (2 - 3 = -1). Fix the operator."
    tool_calls:
      - {name: edit, arguments: {file_path: "add.sh", old_string: "$(( $1 - $2 ))", new_string: "$(( $1 + $2 ))"}}
  - tool_calls:
      - {name: bash, arguments: {command: "sh test.sh", description: "Run the test again"}}
      - name: todo_write
        arguments:
          todos:
            - {content: "Read add.sh and test.sh", status: completed}
            - {content: "Fix the bug in add.sh", status: completed}
            - {content: "Run the test", status: completed}
  - text: "Fixed: add.sh subtracted its arguments (`$1 - $2`); it now adds them (`$1 + $2`), and `sh test.sh` prints `ok: add 2 3 = 5`."
"#;

/// The task of `keel demo --delegate`.
pub const DELEGATE_PROMPT: &str = "The test in test.sh fails. Have a delegate find the bug while you wait, then fix it and make sure the test passes.";

/// The script of `keel demo --delegate`, shared by the supervisor and its delegate (another
/// `keel run` process replaying the same file): each request takes the first unused response
/// whose `match` holds, so the two agents' steps are told apart by what their requests end with
/// (the delegate's first: its read of test.sh holds the text the supervisor's test run prints).
pub const DELEGATE_SCRIPT: &str = r#"
responses:
  # The delegate.
  - match: {last_message_contains: "INVESTIGATE"}
    reasoning: "Read the script and its test."
    tool_calls:
      - {name: read, arguments: {file_path: "add.sh"}}
      - {name: read, arguments: {file_path: "test.sh"}}
  - match: {last_tool_result_contains: "got=$(sh add.sh 2 3)"}
    text: "The bug is on line 3 of add.sh: it computes `$(( $1 - $2 ))`. Change it to `$(( $1 + $2 ))`; test.sh expects `add 2 3` to print 5."
  # The supervisor.
  - match: {last_message_contains: "Have a delegate find the bug"}
    reasoning: "Investigation can run in a separate agent while I wait; it only needs to read."
    text: "I'll hand the investigation to a delegate (read-only) and wait for its answer."
    tool_calls:
      - name: delegate
        arguments:
          label: "find the bug"
          prompt: "INVESTIGATE: `sh test.sh` fails in this project. Find the bug in add.sh and say exactly which line to change and how. Do not edit any file."
  - match: {last_tool_result_contains: "Started delegation delegate-1"}
    text: "The delegate is working; its answer will arrive as a notice."
  - match: {last_message_contains: "<untrusted-delegate-output"}
    reasoning: "The delegate says add.sh subtracts. That is a claim to verify: read the line, then the edit and the test run will show it."
    tool_calls:
      - {name: read, arguments: {file_path: "add.sh"}}
  - match: {last_tool_result_contains: "<path>add.sh</path>"}
    tool_calls:
      - {name: edit, arguments: {file_path: "add.sh", old_string: "$(( $1 - $2 ))", new_string: "$(( $1 + $2 ))"}}
  - match: {last_tool_result_contains: "Edited add.sh"}
    tool_calls:
      - {name: bash, arguments: {command: "sh test.sh", description: "Run the test"}}
  - match: {last_tool_result_contains: "ok: add 2 3 = 5"}
    text: "Fixed: the delegate found that add.sh subtracted its arguments; it now adds them, and `sh test.sh` prints `ok: add 2 3 = 5`."
"#;

/// Write the project into `dir`.
pub fn write_project(dir: &Path) -> Result<()> {
    for (name, text) in FILES {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
