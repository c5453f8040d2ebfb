//! `keel sessions list|show|check|export|import` against the real DeepSeek Harness logs in
//! `testdata/dsh-sessions`, run through the real `keel` binary with `KEEL_HOME` in a temp
//! directory. Damaged copies (torn last line, corrupted middle line, garbage bytes) are made
//! from the fixtures in temp directories.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_session::Store;
use pretty_assertions::assert_eq;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../testdata/dsh-sessions"
);
const ALL: [&str; 5] = [
    "read-file",
    "multi-step",
    "multi-step-plain",
    "interrupted",
    "compaction-prune",
];

fn fixture(dir: &str) -> PathBuf {
    Path::new(FIXTURES).join(dir)
}

/// A keel home and a project directory, both temporary.
struct Env {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
}

impl Env {
    fn new() -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let project = tmp.path().join("project");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        let project = project.canonicalize().unwrap();
        Env {
            _tmp: tmp,
            home,
            project,
        }
    }

    fn keel(&self, args: &[&str]) -> Out {
        let out = Command::new(env!("CARGO_BIN_EXE_keel"))
            .args(args)
            .current_dir(&self.project)
            .env("KEEL_HOME", &self.home)
            .env_remove("DEEPSEEK_BASE_URL")
            .output()
            .unwrap();
        let out = Out::from(out);
        assert!(
            !out.stderr.contains("panicked"),
            "keel {args:?} panicked:\n{}",
            out.stderr
        );
        out
    }

    /// Import `path`, expecting success; returns the new session id and file.
    fn import(&self, path: &Path) -> (String, PathBuf) {
        let out = self.keel(&["sessions", "import", path.to_str().unwrap()]);
        assert_eq!(out.code, 0, "import {}: {}", path.display(), out.stderr);
        let field = |name: &str| {
            out.stdout
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_owned())
                .unwrap_or_else(|| panic!("no {name:?} line in {}", out.stdout))
        };
        (field("id "), PathBuf::from(field("path ")))
    }

    fn temp(&self, name: &str) -> PathBuf {
        self._tmp.path().join(name)
    }
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl From<Output> for Out {
    fn from(o: Output) -> Out {
        Out {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

fn load(path: &Path) -> keel_session::Loaded {
    Store::load(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn events_json(s: &keel_session::Session) -> Vec<Value> {
    s.events()
        .map(|e| serde_json::to_value(&*e).unwrap())
        .collect()
}

/// The lines of the multi-step plain fixture.
fn plain_lines() -> Vec<String> {
    std::fs::read_to_string(fixture("multi-step-plain").join("session.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A copy of the multi-step plain fixture with its header changed by `edit`.
fn with_header(
    env: &Env,
    name: &str,
    edit: impl FnOnce(&mut serde_json::Map<String, Value>),
) -> PathBuf {
    let mut lines = plain_lines();
    let mut header: serde_json::Map<String, Value> = serde_json::from_str(&lines[0]).unwrap();
    edit(&mut header);
    lines[0] = serde_json::to_string(&header).unwrap();
    let dir = env.temp(name);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("session.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

#[test]
fn every_fixture_imports_keeps_its_id_and_events_and_lists() {
    let env = Env::new();
    let mut ids = vec![];
    for dir in ALL {
        let (id, path) = env.import(&fixture(dir));
        let source = load(&fixture(dir));
        assert_eq!(id, source.session.header().id.as_str(), "{dir}");
        assert!(
            path.starts_with(
                env.home
                    .join("sessions")
                    .join("--home-user-project--")
                    .join(&id)
            ),
            "{dir}: {}",
            path.display()
        );
        let copy = load(&path);
        assert_eq!(copy.session.header(), source.session.header(), "{dir}");
        assert_eq!(
            events_json(&copy.session),
            events_json(&source.session),
            "{dir}"
        );
        ids.push(id);
    }

    // The fixtures ran in /home/user/project, not in this project.
    let here = env.keel(&["sessions", "list"]);
    assert_eq!(here.code, 0, "{}", here.stderr);
    assert_eq!(here.stdout, "");
    assert!(here.stderr.contains("--all"), "{}", here.stderr);

    let all = env.keel(&["sessions", "list", "--all"]);
    assert_eq!(all.code, 0, "{}", all.stderr);
    for id in &ids {
        assert!(
            all.stdout.contains(id.as_str()),
            "{id} missing:\n{}",
            all.stdout
        );
    }
    assert!(all.stdout.contains("/home/user/project"), "{}", all.stdout);
    assert!(
        all.stdout.contains("Run the slow command."),
        "{}",
        all.stdout
    );

    let json = env.keel(&["sessions", "list", "--all", "--json"]);
    let rows: Vec<Value> = serde_json::from_str(&json.stdout).unwrap();
    let mut counts: Vec<(String, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_owned(),
                r["events"].as_u64().unwrap(),
            )
        })
        .collect();
    counts.sort();
    let mut expected: Vec<(String, u64)> = ALL
        .iter()
        .map(|d| {
            let s = load(&fixture(d)).session;
            (s.header().id.to_string(), s.len())
        })
        .collect();
    expected.sort();
    assert_eq!(counts, expected);

    // A second import of the same session is refused and changes nothing.
    let again = env.keel(&["sessions", "import", fixture("read-file").to_str().unwrap()]);
    assert_eq!(again.code, 2);
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
}

#[test]
fn import_files_under_the_header_cwd_or_the_current_one() {
    let env = Env::new();
    let project = env.project.to_str().unwrap().to_owned();
    let here = with_header(&env, "here", |h| {
        h.insert("id".into(), "session-imported-here".into());
        h.insert("cwd".into(), project.clone().into());
    });
    let nowhere = with_header(&env, "no-cwd", |h| {
        h.insert("id".into(), "session-without-cwd".into());
        h.remove("cwd");
    });
    let (_, path) = env.import(&here);
    assert_eq!(
        path,
        env.home
            .join("sessions")
            .join(Store::project_key(&env.project))
            .join("session-imported-here")
            .join("session.jsonl")
    );
    env.import(&nowhere);
    env.import(&fixture("read-file"));
    let list = env.keel(&["sessions", "list"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert!(
        list.stdout.contains("session-imported-here"),
        "{}",
        list.stdout
    );
    assert!(
        list.stdout.contains("session-without-cwd"),
        "{}",
        list.stdout
    );
    assert!(!list.stdout.contains("session-8de7"), "{}", list.stdout);
    // Lines: the column titles and the two sessions of this project.
    assert_eq!(list.stdout.lines().count(), 3, "{}", list.stdout);
}

#[test]
fn show_prints_turns_steps_calls_results_and_the_end() {
    let env = Env::new();
    let (id, _) = env.import(&fixture("multi-step"));
    let out = env.keel(&["sessions", "show", &id]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let s = &out.stdout;
    for want in [
        "turn 1 (#4)",
        "  step 1.1 (#6)",
        "  step 1.7 (#158)",
        "    #7 user:",
        "Write calc.py",
        "context (@deepseek-ai/dsh-system-prompt)",
        "#40 reasoning: The user wants a small Python module with a test.",
        "#40 call todo_write ",
        "#66 call write ",
        "#91 call edit {\"file_path\":\"calc.py\",\"new_string\":\"return a + b\",\"old_string\":\"return a - b\"} [call_mock_4_0]",
        "#110 call bash ",
        "#112 result bash ok:",
        "#129 result read ok:",
        "todo/write: 3 items: [x] Write calc.py",
        "  turn 1 ended: completed (#173)",
    ] {
        assert!(s.contains(want), "missing {want:?} in:\n{s}");
    }
    // Steps come in order.
    let pos = |p: &str| s.find(p).unwrap();
    assert!(pos("step 1.1 ") < pos("step 1.2 ") && pos("step 1.6 ") < pos("step 1.7 "));
}

#[test]
fn show_keeps_the_pruned_original_and_marks_both_results() {
    let env = Env::new();
    let (id, _) = env.import(&fixture("compaction-prune"));
    let out = env.keel(&["sessions", "show", &id]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let s = &out.stdout;
    for want in [
        "#33 result bash ok [pruned → #36]:",
        "(4000 lines, ",
        "#35 compaction/prune: shadows #33..#33",
        "#36 result bash ok [replaces #33]:",
        "turn 1 ended: completed (#84)",
    ] {
        assert!(s.contains(want), "missing {want:?} in:\n{s}");
    }
    assert!(s.find("#33 result").unwrap() < s.find("#36 result").unwrap());

    let json = env.keel(&["sessions", "show", &id, "--json"]);
    let t: Value = serde_json::from_str(&json.stdout).unwrap();
    let step1 = &t["blocks"][0]["entries"][0];
    assert_eq!(step1["entry"], "step");
    let original = step1["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["seq"] == 33)
        .unwrap();
    assert_eq!(original["kind"], "tool-result");
    assert_eq!(
        original["shadowedBy"],
        serde_json::json!({"seq": 36, "how": "pruned"})
    );
    let replacement = t["blocks"][0]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["seq"] == 36)
        .unwrap();
    assert_eq!(replacement["replaces"], serde_json::json!([33]));
}

#[test]
fn show_events_prints_one_line_or_one_json_object_per_event() {
    let env = Env::new();
    let (id, path) = env.import(&fixture("multi-step"));
    let n = load(&path).session.len() as usize;

    let lines = env.keel(&["sessions", "show", &id, "--events"]);
    assert_eq!(lines.code, 0, "{}", lines.stderr);
    assert_eq!(lines.stdout.lines().count(), n);
    let first: Vec<&str> = lines
        .stdout
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(&first[..2], ["0", "permission/preset"]);
    assert!(lines.stdout.contains("tool/call"), "{}", lines.stdout);

    let raw = env.keel(&["sessions", "show", &id, "--events", "--json"]);
    assert_eq!(raw.code, 0, "{}", raw.stderr);
    let seqs: Vec<u64> = raw
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, (0..n as u64).collect::<Vec<_>>());
}

#[test]
fn check_exit_codes_valid_repairable_corrupt() {
    let env = Env::new();
    let (valid, _) = env.import(&fixture("multi-step"));
    let (open, _) = env.import(&fixture("interrupted"));

    let out = env.keel(&["sessions", "check", &valid]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    for want in [
        "format      zstd",
        "events      174",
        "derived from",
        "torn tail   none",
        "invariants  ok",
        "nothing to close",
        "status      valid",
    ] {
        assert!(
            out.stdout.contains(want),
            "missing {want:?} in:\n{}",
            out.stdout
        );
    }

    let out = env.keel(&["sessions", "check", &open]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("turn 1 open (step 1.1 open)"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("TOOL_OUTCOME_UNKNOWN"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("turn/end turn 1: interrupted"),
        "{}",
        out.stdout
    );
    let json = env.keel(&["sessions", "check", &open, "--json"]);
    assert_eq!(json.code, 1);
    let r: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(r["status"], "repairable");
    assert_eq!(r["openTurn"], 1);
    let planned: Vec<&str> = r["repair"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(planned, ["tool/result", "step/end", "turn/end"]);
    // Nothing was written.
    assert_eq!(load(&fixture("interrupted")).session.len(), 35);

    // A torn last line (the turn/end cut mid-write): dropped, the turn is open again.
    let mut lines = plain_lines();
    let last = lines.pop().unwrap();
    let torn = env.temp("torn.jsonl");
    std::fs::write(&torn, lines.join("\n") + "\n" + &last[..last.len() / 2]).unwrap();
    let out = env.keel(&["sessions", "check", torn.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains(&format!("torn tail   line {}", lines.len() + 1)),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("turn/end turn 1: interrupted"),
        "{}",
        out.stdout
    );

    // A damaged line before the last turn/end: corrupt.
    let mut lines = plain_lines();
    let mid = lines.len() / 2;
    lines[mid] = lines[mid].replacen('{', "{{", 1);
    let bad = env.temp("corrupt.jsonl");
    std::fs::write(&bad, lines.join("\n") + "\n").unwrap();
    let out = env.keel(&["sessions", "check", bad.to_str().unwrap()]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(&format!("corrupt at line {}", mid + 1)),
        "{}",
        out.stdout
    );
    let json = env.keel(&["sessions", "check", bad.to_str().unwrap(), "--json"]);
    assert_eq!(json.code, 2);
    let r: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(r["status"], "corrupt");
    assert!(
        r["error"].as_str().unwrap().contains("corrupt at line"),
        "{r}"
    );

    // Garbage bytes.
    let garbage = env.temp("garbage.jsonl");
    std::fs::write(&garbage, [0xff, 0x00, 0x13, 0x37, b'\n', 0xc3, 0x28, b'\n']).unwrap();
    let out = env.keel(&["sessions", "check", garbage.to_str().unwrap()]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("line 1 is not a session header"),
        "{}",
        out.stdout
    );
    let zgarbage = env.temp("garbage.jsonl.zst");
    std::fs::write(&zgarbage, b"this is not zstd at all").unwrap();
    let out = env.keel(&["sessions", "check", zgarbage.to_str().unwrap()]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
}

#[test]
fn export_jsonl_round_trips_and_markdown_has_prompt_and_answer() {
    let env = Env::new();
    let (id, path) = env.import(&fixture("multi-step"));
    let original = load(&path).session;

    let out_file = env.temp("export").join("session.jsonl");
    std::fs::create_dir_all(out_file.parent().unwrap()).unwrap();
    let out = env.keel(&[
        "sessions",
        "export",
        &id,
        "--format",
        "jsonl",
        "-o",
        out_file.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let exported = load(&out_file);
    assert_eq!(exported.report.torn, None);
    assert_eq!(exported.session.header(), original.header());
    assert_eq!(events_json(&exported.session), events_json(&original));
    // Packed rows are expanded: one line per event after the header.
    let text = std::fs::read_to_string(&out_file).unwrap();
    assert_eq!(text.lines().count() as u64, original.len() + 1);
    // Export to stdout is the same bytes.
    let stdout = env.keel(&["sessions", "export", &id]);
    assert_eq!(stdout.stdout, text);

    let md = env.keel(&["sessions", "export", &id, "--format", "markdown"]);
    assert_eq!(md.code, 0, "{}", md.stderr);
    let prompt = original.first_prompt().unwrap();
    let answer = original
        .events()
        .filter_map(|e| match &e.body {
            keel_protocol::EventBody::AssistantMessage(a) => Some(a.message.text()),
            _ => None,
        })
        .last()
        .unwrap();
    assert!(!answer.is_empty());
    assert!(
        md.stdout.starts_with(&format!("# Session `{id}`")),
        "{}",
        md.stdout
    );
    assert!(
        md.stdout.contains(prompt.trim()),
        "prompt {prompt:?} missing:\n{}",
        md.stdout
    );
    assert!(
        md.stdout.contains(answer.trim()),
        "answer {answer:?} missing:\n{}",
        md.stdout
    );
    assert!(md.stdout.contains("### Step 1.7"), "{}", md.stdout);
}

#[test]
fn import_and_lookup_errors_are_clean() {
    let env = Env::new();
    let missing = env.temp("does-not-exist");
    let out = env.keel(&["sessions", "import", missing.to_str().unwrap()]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("no such file or directory"),
        "{}",
        out.stderr
    );

    let empty = env.temp("empty-dir");
    std::fs::create_dir_all(&empty).unwrap();
    let out = env.keel(&["sessions", "import", empty.to_str().unwrap()]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("holds no session file"),
        "{}",
        out.stderr
    );

    let garbage = env.temp("garbage").join("session.jsonl");
    std::fs::create_dir_all(garbage.parent().unwrap()).unwrap();
    std::fs::write(&garbage, b"\x00\x01 not json\n").unwrap();
    let out = env.keel(&[
        "sessions",
        "import",
        garbage.parent().unwrap().to_str().unwrap(),
    ]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("refusing to import"), "{}", out.stderr);

    // A corrupt middle line is refused too, and nothing lands in the store.
    let mut lines = plain_lines();
    lines[10] = "{\"type\":".to_owned();
    let bad = env.temp("bad.jsonl");
    std::fs::write(&bad, lines.join("\n") + "\n").unwrap();
    let out = env.keel(&["sessions", "import", bad.to_str().unwrap()]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("corrupt at line 11"), "{}", out.stderr);
    assert!(!env.home.join("sessions").exists());

    // An id that would leave the store is refused.
    let evil = with_header(&env, "evil", |h| {
        h.insert("id".into(), "../../escape".into());
    });
    let out = env.keel(&["sessions", "import", evil.to_str().unwrap()]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("cannot be used as a directory name"),
        "{}",
        out.stderr
    );

    // A torn tail imports with a warning, without the torn record.
    let mut lines = plain_lines();
    let last = lines.pop().unwrap();
    let torn = with_header(&env, "torn", |h| {
        h.insert("id".into(), "session-torn".into());
    });
    let mut text = std::fs::read_to_string(&torn).unwrap();
    text.truncate(text.len() - last.len() - 1);
    text.push_str(&last[..10]);
    std::fs::write(&torn, &text).unwrap();
    let out = env.keel(&["sessions", "import", torn.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("torn tail"), "{}", out.stderr);
    let out = env.keel(&["sessions", "check", "session-torn"]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(out.stdout.contains("torn tail   none"), "{}", out.stdout);

    // Unknown ids and prefixes.
    let out = env.keel(&["sessions", "show", "session-nope"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("no session matches \"session-nope\""),
        "{}",
        out.stderr
    );
    let out = env.keel(&["sessions", "export", "session-nope"]);
    assert_eq!(out.code, 2);
    let out = env.keel(&["sessions", "check", "session-nope"]);
    assert_eq!(out.code, 2);
}

#[test]
fn list_shows_unreadable_sessions_with_the_reason() {
    let env = Env::new();
    let (id, _) = env.import(&fixture("read-file"));
    let broken = env
        .home
        .join("sessions")
        .join(Store::project_key(&env.project))
        .join("session-broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("session.jsonl"), b"garbage\n").unwrap();

    let out = env.keel(&["sessions", "list"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let row = out
        .stdout
        .lines()
        .find(|l| l.starts_with("session-broken"))
        .unwrap_or_else(|| panic!("no row for the broken session:\n{}", out.stdout));
    assert!(row.contains("(unreadable: "), "{row}");
    assert!(row.contains("line 1 is not a session header"), "{row}");

    let all = env.keel(&["sessions", "list", "--all", "--json"]);
    let rows: Vec<Value> = serde_json::from_str(&all.stdout).unwrap();
    assert_eq!(rows.len(), 2);
    let by_id = |want: &str| rows.iter().find(|r| r["id"] == want).unwrap().clone();
    assert!(by_id("session-broken")["problem"].as_str().is_some());
    assert_eq!(by_id(&id)["problem"], Value::Null);
    assert_eq!(by_id(&id)["compressed"], true);

    // show on the broken one fails cleanly, check calls it corrupt.
    let out = env.keel(&["sessions", "show", "session-broken"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("line 1 is not a session header"),
        "{}",
        out.stderr
    );
    let out = env.keel(&["sessions", "check", "session-broken"]);
    assert_eq!(out.code, 2);
}

/// A dsh session (its `write` calls took `file_path`) imported into keel and resumed goes on with
/// dsh-shaped calls: `read {file_path}`, `grep {include}`, `bash {timeoutMs}`; an unknown
/// property is refused by name and the turn goes on.
#[test]
fn an_imported_dsh_session_resumes_with_dsh_shaped_calls() {
    let env = Env::new();
    let project = env.project.to_str().unwrap().to_owned();
    let session = with_header(&env, "dsh", |h| {
        h.insert("id".into(), "session-from-dsh".into());
        h.insert("cwd".into(), project.clone().into());
    });
    let (id, _) = env.import(&session);
    std::fs::write(env.project.join("hello.txt"), "hello\nworld\n").unwrap();
    std::fs::write(env.project.join("notes.md"), "hello in markdown\n").unwrap();
    let script = env.temp("dsh-shaped.yaml");
    std::fs::write(
        &script,
        r#"responses:
  - tool_calls:
      - { id: d_read, name: read, arguments: { file_path: hello.txt, offset: 2 } }
      - { id: d_grep, name: grep, arguments: { pattern: hello, include: "*.txt" } }
      - { id: d_bash, name: bash, arguments: { command: "echo ok", description: "say ok", timeoutMs: 5000 } }
      - { id: d_bad, name: read, arguments: { file_path: hello.txt, encoding: utf8 } }
  - text: "Done."
"#,
    )
    .unwrap();
    let out = env.keel(&[
        "resume",
        &id,
        "Read it again.",
        "--script",
        script.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("Done."), "{}", out.stdout);

    let path = env
        .home
        .join("sessions")
        .join(Store::project_key(&env.project))
        .join("session-from-dsh")
        .join("session.jsonl");
    let events = events_json(&load(&path).session);
    let result = |call: &str| -> (String, bool) {
        events
            .iter()
            .filter(|e| e["type"] == "tool/result")
            .flat_map(|e| {
                e["data"]["message"]["content"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .find(|b| b["toolCallId"] == call)
            .map(|b| {
                let text = b["content"]
                    .as_array()
                    .map(|c| {
                        c.iter()
                            .filter_map(|t| t["text"].as_str())
                            .collect::<String>()
                    })
                    .unwrap_or_default();
                (text, b["isError"].as_bool().unwrap_or(false))
            })
            .unwrap_or_else(|| panic!("no result for {call}"))
    };
    assert_eq!(
        result("d_read"),
        (
            "<path>hello.txt</path>\n<content>\n2: world\n</content>".to_owned(),
            false
        )
    );
    assert_eq!(result("d_grep"), ("hello.txt\n1:hello".to_owned(), false));
    assert_eq!(result("d_bash"), ("ok\n".to_owned(), false));
    let (bad, is_error) = result("d_bad");
    assert!(is_error, "{bad}");
    assert!(
        bad.contains("/encoding: unknown property (allowed: file_path, limit, offset)"),
        "{bad}"
    );
}
