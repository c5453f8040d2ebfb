//! End-to-end (the real binary against the loopback mock model): the smaller first-hour items
//! of issue 50. `keel rewind` names the files it put back and says the point plainly; `keel
//! sessions show --last` shows the session `keel resume --last` continues; `keel batch` does
//! not print `$0.0000` for a cost it cannot know; `keel sessions list` says how each session
//! ended.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use support::*;

/// `keel --approval auto run PROMPT` against `mock`; its output, asserted successful.
fn run_ok(env: &Env, mock: &Mock, prompt: &str) -> Output {
    let out = run(env
        .keel(&mock.base_url())
        .args(["--approval", "auto", "run", prompt]));
    assert_eq!(out.code, Some(0), "run stderr:\n{}", out.stderr);
    out
}

#[test]
fn rewind_names_the_files_it_put_back() {
    let env = Env::new();
    env.write("notes.txt", "original\n");
    env.write("gone.txt", "keep me\n");
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "change things" }
    tool_calls: [{ id: b1, name: bash, arguments: { command: "echo changed > notes.txt; echo new > extra.txt; rm gone.txt", description: "change" } }]
  - text: "Changed."
"#,
    );
    run_ok(&env, &mock, "change things");
    assert!(!env.ws.join("gone.txt").exists());

    let out = run(env.keel_bare().args(["rewind", "--to", "1", "--files"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let said = &out.stdout;
    assert!(
        said.contains("Rewound the files to before turn 1: 3 files put back: "),
        "{said}"
    );
    for file in [
        "notes.txt (restored)",
        "gone.txt (created)",
        "extra.txt (deleted)",
    ] {
        assert!(said.contains(file), "no {file:?} in:\n{said}");
    }
    assert!(!said.contains("--to 1"), "the flag is echoed:\n{said}");
    assert_eq!(env.read("notes.txt"), "original\n");
    assert_eq!(env.read("gone.txt"), "keep me\n");
    assert!(!env.ws.join("extra.txt").exists());
    // The JSON record says which were created.
    let session = env.only_session();
    let restored = of_type(&load_consistent(&session), "checkpoint/restored")[0]["data"].clone();
    assert_eq!(restored["created"], json!(["gone.txt"]), "{restored}");

    let out = run(env.keel_bare().args(["rewind", "--undo", "--files"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert!(
        out.stdout
            .contains("Rewound the files to before the last rewind: 3 files put back"),
        "{}",
        out.stdout
    );
}

#[test]
fn rewind_names_the_first_ten_files_and_counts_the_rest() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "make files" }
    tool_calls: [{ id: b1, name: bash, arguments: { command: "for i in 01 02 03 04 05 06 07 08 09 10 11 12 13; do echo $i > f$i.txt; done", description: "make" } }]
  - text: "Made."
"#,
    );
    run_ok(&env, &mock, "make files");
    let out = run(env.keel_bare().args(["rewind", "--to", "1"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let said = &out.stdout;
    assert!(
        said.contains("Rewound the files to before turn 1: 13 files put back: f01.txt (deleted)"),
        "{said}"
    );
    assert!(said.contains("f10.txt (deleted) and 3 more."), "{said}");
    assert!(!said.contains("f11.txt"), "{said}");
    assert!(
        said.contains("Rewound the conversation to just before turn 1"),
        "{said}"
    );
}

#[test]
fn sessions_show_last_is_the_session_resume_last_continues() {
    let env = Env::new();
    let mock = Mock::start(
        "responses:\n  - match: { last_user_contains: \"first\" }\n    text: \"First answer.\"\n  - match: { last_user_contains: \"second\" }\n    text: \"Second answer.\"\n",
    );
    // Nothing yet: said so, as `keel resume --last` says it.
    let out = run(env.keel_bare().args(["sessions", "show", "--last"]));
    assert_eq!(out.code, Some(2), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr.contains("no session to resume"),
        "{}",
        out.stderr
    );

    run_ok(&env, &mock, "first prompt");
    run_ok(&env, &mock, "second prompt");
    let second = env
        .session_files()
        .into_iter()
        .find(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .contains("second prompt")
        })
        .unwrap();
    empty_copy(&second);
    assert_eq!(env.session_files().len(), 3);

    let out = run(env.keel_bare().args(["sessions", "show", "--last"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert!(out.stdout.contains("second prompt"), "{}", out.stdout);
    assert!(out.stdout.contains("Second answer."), "{}", out.stdout);
    assert!(!out.stdout.contains("first prompt"), "{}", out.stdout);
    // The same as naming it.
    let named = run(env
        .keel_bare()
        .args(["sessions", "show", &session_id(&second)]));
    assert_eq!(named.stdout, out.stdout);
    // --json and --events work with it too.
    let out = run(env
        .keel_bare()
        .args(["sessions", "show", "--last", "--json"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert!(out.stdout.contains("Second answer."), "{}", out.stdout);

    // An id and --last conflict; neither is a usage error.
    let out = run(env
        .keel_bare()
        .args(["sessions", "show", "--last", &session_id(&second)]));
    assert_eq!(out.code, Some(2), "stderr:\n{}", out.stderr);
    assert!(out.stderr.contains("cannot be used with"), "{}", out.stderr);
    let out = run(env.keel_bare().args(["sessions", "show"]));
    assert_eq!(out.code, Some(2), "stderr:\n{}", out.stderr);
    assert!(out.stderr.contains("required"), "{}", out.stderr);
}

/// Three tasks for `keel batch`, the first two on `unpriced` (a model without a price), the
/// third on `third`.
fn batch_tasks(env: &Env, unpriced: &str, third: Option<&str>) -> PathBuf {
    let mut lines = Vec::new();
    for (i, model) in [Some(unpriced), Some(unpriced), third].iter().enumerate() {
        let mut t = json!({"id": format!("t{i}"), "prompt": format!("Task t{i}."), "workspace": "template"});
        if let Some(m) = model {
            t["model"] = json!(m);
        }
        lines.push(t.to_string());
    }
    std::fs::create_dir_all(env.outside.join("template")).unwrap();
    std::fs::write(env.outside.join("template/README.md"), "template\n").unwrap();
    let path = env.outside.join("tasks.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn batch(env: &Env, mock: &Mock, tasks: &Path) -> Output {
    let out = run(env
        .keel(&mock.base_url())
        .args(["--approval", "auto"])
        // A price for one model (keel knows none for the mock's).
        .args(["-c", "models.priced-model.input_price=2"])
        .args(["-c", "models.priced-model.output_price=8"])
        .args(["-c", "models.priced-model.cached_input_price=0.5"])
        .args(["batch", "--concurrency", "1"])
        .arg(tasks));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    out
}

#[test]
fn batch_totals_say_when_no_price_or_only_some_are_known() {
    let env = Env::new();
    let three = "responses:\n  - text: \"Done.\"\n  - text: \"Done.\"\n  - text: \"Done.\"\n";
    let mock = Mock::start(three);
    // Every task on a model without a price: the cost is unknown, not $0.0000.
    let tasks = batch_tasks(&env, "mystery-model", Some("mystery-model"));
    let out = batch(&env, &mock, &tasks);
    let total = out.stdout.lines().last().unwrap();
    assert!(
        total.ends_with("cost unknown (no price for mystery-model)"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("$0.0000"), "{}", out.stdout);

    // Some priced, some not: the total is partial.
    let env = Env::new();
    let mock = Mock::start(three);
    let tasks = batch_tasks(&env, "mystery-model", Some("priced-model"));
    let out = batch(&env, &mock, &tasks);
    let total = out.stdout.lines().last().unwrap();
    assert!(
        total.contains(" partial (no price for mystery-model"),
        "{}",
        out.stdout
    );
    assert!(total.contains(", $0.0"), "{}", out.stdout);
    assert!(!total.contains("$0.0000"), "{}", out.stdout);
}

/// The `OUTCOME` column of `keel sessions list`'s row for `id`.
fn listed_outcome(list: &str, id: &str) -> String {
    let header = list.lines().next().unwrap();
    let at = header.find("OUTCOME").expect("an OUTCOME column");
    let row = list
        .lines()
        .find(|l| l.starts_with(id))
        .unwrap_or_else(|| panic!("no row for {id}:\n{list}"));
    row[at..].split_whitespace().next().unwrap().to_owned()
}

#[test]
fn sessions_list_says_how_each_session_ended() {
    let env = Env::new();
    let ok = Mock::start("responses:\n  - text: \"Fine.\"\n");
    run_ok(&env, &ok, "all good");
    let done = env.only_session();
    let failing = Mock::start("responses:\n  - { behaviour: auth_error }\n");
    let out = run(env.keel(&failing.base_url()).args(["run", "will fail"]));
    assert_eq!(out.code, Some(1), "stderr:\n{}", out.stderr);
    let failed = env
        .session_files()
        .into_iter()
        .find(|p| *p != done)
        .unwrap();
    let empty = empty_copy(&done);
    // A turn left open: what a killed process leaves (crash repair closes it on resume).
    // Not the empty copy's last digit (0 or 1) either.
    let open_id = other_id(&session_id(&done), ['2', '3']);
    let text = std::fs::read_to_string(&done).unwrap();
    let cut: Vec<&str> = text
        .lines()
        .take_while(|l| !l.contains("\"turn/end\""))
        .collect();
    let open_dir = done.parent().unwrap().with_file_name(&open_id);
    std::fs::create_dir_all(&open_dir).unwrap();
    let open = open_dir.join(done.file_name().unwrap());
    std::fs::write(
        &open,
        cut.join("\n").replace(&session_id(&done), &open_id) + "\n",
    )
    .unwrap();

    let list = run(env.keel_bare().args(["sessions", "list"]));
    assert_eq!(list.code, Some(0), "stderr:\n{}", list.stderr);
    let table = &list.stdout;
    for (path, want) in [
        (&done, "done"),
        (&failed, "failed"),
        (&empty, "empty"),
        (&open, "interrupted"),
    ] {
        assert_eq!(listed_outcome(table, &session_id(path)), want, "{table}");
    }
    for line in table.lines() {
        assert!(line.chars().count() <= 140, "too wide: {line:?}");
    }

    // A writer's lock sidecar there: the open turn is running.
    let lock = keel_session::store::lock_path(&open);
    std::fs::write(&lock, "1").unwrap();
    let list = run(env.keel_bare().args(["sessions", "list", "--json"]));
    assert_eq!(list.code, Some(0), "stderr:\n{}", list.stderr);
    let rows: Vec<Value> = serde_json::from_str(&list.stdout).unwrap();
    let outcome = |path: &Path| {
        let id = session_id(path);
        rows.iter().find(|r| r["id"] == id.as_str()).unwrap()["outcome"].clone()
    };
    assert_eq!(outcome(&open), "running");
    assert_eq!(outcome(&done), "done");
    assert_eq!(outcome(&failed), "failed");
    assert_eq!(outcome(&empty), "empty");
    std::fs::remove_file(&lock).unwrap();
}
