//! End-to-end Code Mode: `keel run --tools-mode code` (the real binary) against the loopback
//! mock model. One `run_code` reads several files and greps them in one tool call, through the
//! real pipeline; the sub-calls are logged in order and never reach the model; a direct call in
//! `code` mode is refused with a hint; a failing program is a result, and the turn goes on;
//! `native` mode sends what keel sent before Code Mode existed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod support;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::*;

const READ_AND_GREP: &str = r#"
responses:
  - tool_calls:
      - id: call_code
        name: run_code
        arguments:
          description: "find the notes that mention the needle"
          code: |
            const files = ['notes/a.txt', 'notes/b.txt', 'notes/c.txt'];
            const texts = await Promise.all(files.map((file_path) => tools.read({ file_path })));
            const hits = await tools.grep({ pattern: 'needle', path: 'notes', output_mode: 'files_with_matches' });
            console.log('read', texts.length, 'files');
            return {
              lines: texts.map((t) => t.split('\n').filter((l) => /^\d+: /.test(l)).length),
              hits: hits.split('\n').filter(Boolean).map((p) => p.split('/').pop()).sort(),
            };
  - match: { last_tool_result_contains: "hits" }
    text: "a.txt and c.txt mention the needle."
"#;

fn write_notes(env: &Env) {
    env.write("notes/a.txt", "one\nthe needle is here\n");
    env.write("notes/b.txt", "nothing to see\n");
    env.write("notes/c.txt", "x\ny\nneedle again\n");
}

fn dispatches(events: &[Value]) -> Vec<(String, String, String)> {
    events
        .iter()
        .filter(|e| ty(e).starts_with("tool/code-dispatch"))
        .map(|e| {
            (
                ty(e).to_owned(),
                e["data"]["subCallId"].as_str().unwrap().to_owned(),
                e["data"]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn one_run_code_reads_and_greps_several_files_in_one_tool_call() {
    let env = Env::new();
    write_notes(&env);
    let mock = Mock::start(READ_AND_GREP);
    let out = run(env.keel(&mock.base_url()).args([
        "--tools-mode",
        "code",
        "run",
        "which notes mention the needle?",
    ]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout, "a.txt and c.txt mention the needle.\n");

    // Two model requests: the program and the answer.
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, vec!["run_code"], "code mode offers run_code alone");
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("declare const tools: {"), "{system}");
    assert!(system.contains("  read(args: {"), "{system}");
    assert!(!system.contains("  run_code(args"), "{system}");
    // The declaration, and everything but the history, is byte-stable across requests.
    assert_eq!(requests[1]["messages"][0], requests[0]["messages"][0]);
    assert_eq!(requests[1]["tools"], requests[0]["tools"]);

    // One tool call; its result is the program's, computed from real files.
    let events = load_consistent(&env.only_session());
    assert_eq!(
        tool_calls(&events),
        vec![("call_code".to_owned(), "run_code".to_owned())]
    );
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    assert!(!results[0].2, "{results:?}");
    let body: Value = serde_json::from_str(&results[0].1).unwrap();
    assert_eq!(
        body,
        json!({"logs": ["read 3 files"], "result": {"lines": [2, 1, 3], "hits": ["a.txt", "c.txt"]}})
    );

    // The sub-calls are logged in order, between the call and its result: each start before its
    // settle, the three parallel reads before the grep that awaited them.
    let d = dispatches(&events);
    assert_eq!(d.len(), 8, "{d:?}");
    let starts: Vec<&str> = d
        .iter()
        .filter(|x| x.0 == "tool/code-dispatch-start")
        .map(|x| x.1.as_str())
        .collect();
    assert_eq!(
        starts,
        vec![
            "call_code:code:1",
            "call_code:code:2",
            "call_code:code:3",
            "call_code:code:4"
        ]
    );
    for (_, id, _) in &d {
        let at = |t: &str| {
            d.iter()
                .position(|x| x.0 == t && &x.1 == id)
                .unwrap_or_else(|| panic!("no {t} for {id}"))
        };
        assert!(at("tool/code-dispatch-start") < at("tool/code-dispatch"));
    }
    let grep_start = d
        .iter()
        .position(|x| x.0 == "tool/code-dispatch-start" && x.2 == "grep")
        .unwrap();
    assert_eq!(
        d[..grep_start]
            .iter()
            .filter(|x| x.0 == "tool/code-dispatch")
            .count(),
        3
    );
    let seq_of = |pred: &dyn Fn(&Value) -> bool| {
        events
            .iter()
            .position(pred)
            .unwrap_or_else(|| panic!("missing event"))
    };
    let call_at = seq_of(&|e| ty(e) == "tool/call");
    let result_at = seq_of(&|e| ty(e) == "tool/result");
    let first_dispatch = seq_of(&|e| ty(e) == "tool/code-dispatch-start");
    let last_dispatch = events
        .iter()
        .rposition(|e| ty(e) == "tool/code-dispatch")
        .unwrap();
    assert!(call_at < first_dispatch && last_dispatch < result_at);
    let settled = events
        .iter()
        .find(|e| ty(e) == "tool/code-dispatch" && e["data"]["name"] == "read")
        .unwrap();
    assert_eq!(settled["data"]["rootCallId"], "call_code");
    assert_eq!(settled["data"]["parentCallId"], "call_code");
    assert_eq!(settled["data"]["isError"], false);
    assert!(settled["ignorable"].as_bool().unwrap_or(false), "{settled}");
    let started = events
        .iter()
        .find(|e| ty(e) == "tool/code-dispatch-start" && e["data"]["name"] == "grep")
        .unwrap();
    assert_eq!(started["data"]["arguments"]["pattern"], "needle");

    // Nothing of the sub-calls reaches the model.
    let second = serde_json::to_string(&requests[1]["messages"]).unwrap();
    assert!(!second.contains("code-dispatch"), "{second}");
    assert!(!second.contains("call_code:code:"), "{second}");
    assert!(second.contains("read 3 files"), "{second}");
}

#[test]
fn code_mode_refuses_direct_calls_with_a_hint_and_a_failing_program_is_a_result() {
    let env = Env::new();
    write_notes(&env);
    let mock = Mock::start(
        r#"
responses:
  - tool_calls:
      - { id: call_direct, name: read, arguments: { path: notes/a.txt } }
  - match: { last_tool_result_contains: "call it from inside run_code" }
    tool_calls:
      - id: call_bad
        name: run_code
        arguments:
          code: |
            const a = await tools.read({ path: 'notes/a.txt' });
            const b = await tools.read({ path: '../outside.txt' });
            return b;
  - match: { last_tool_result_contains: "CODE_RUN_FAILED" }
    tool_calls:
      - id: call_args
        name: run_code
        arguments:
          code: |
            try { await tools.read({ offset: 'x' }); } catch (e) { return [e.toolName, e.code]; }
  - match: { last_tool_result_contains: "INVALID_ARGS" }
    text: "Handled."
"#,
    );
    let out = run(env
        .keel(&mock.base_url())
        .args(["--tools-mode", "code", "run", "go"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout, "Handled.\n");
    let events = load_consistent(&env.only_session());
    let results = tool_results(&events);
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(results[0].2);
    assert!(
        results[0]
            .1
            .starts_with("UNKNOWN_TOOL: 'read' cannot be called directly"),
        "{results:?}"
    );
    assert!(results[1].2);
    assert!(
        results[1].1.starts_with("CODE_RUN_FAILED: Error: "),
        "{results:?}"
    );
    assert!(results[1].1.contains("at line 2"), "{results:?}");
    assert!(results[1].1.contains("tools.read (DENIED)"), "{results:?}");
    assert!(!results[2].2, "{results:?}");
    assert_eq!(
        serde_json::from_str::<Value>(&results[2].1).unwrap()["result"],
        json!(["read", "INVALID_ARGS"])
    );
}

#[test]
fn both_mode_offers_run_code_beside_the_tools_and_dsh_tools_mode_is_honoured() {
    let env = Env::new();
    write_notes(&env);
    let mock = Mock::start(
        r#"
responses:
  - tool_calls:
      - { id: call_direct, name: read, arguments: { path: notes/a.txt } }
  - match: { last_tool_result_contains: "needle" }
    text: "Read it."
"#,
    );
    let out = run(env
        .keel(&mock.base_url())
        .env("DSH_TOOLS_MODE", "both")
        .args(["run", "go"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let requests = mock.requests();
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        offered.contains(&"read") && offered.contains(&"run_code"),
        "{offered:?}"
    );
    let events = load_consistent(&env.only_session());
    assert!(!tool_results(&events)[0].2);
}

#[test]
fn native_mode_sends_the_same_bytes_as_keel_without_code_mode() {
    let script = r#"
responses:
  - tool_calls:
      - { id: call_read, name: read, arguments: { path: notes/a.txt } }
  - match: { last_tool_result_contains: "needle" }
    text: "Read it."
"#;
    let env = Env::new();
    write_notes(&env);
    let mut bodies = Vec::new();
    for args in [
        vec!["run", "go"],
        vec!["--tools-mode", "native", "run", "go"],
        // The plugin's row off: keel as it was before Code Mode.
        vec![
            "-c",
            "plugins=[{id = \"code_mode\", enabled = false}]",
            "run",
            "go",
        ],
    ] {
        let mock = Mock::start_tapped(script);
        let out = run(env.keel(&mock.base_url()).args(&args));
        assert_eq!(out.code, Some(0), "{args:?} stderr:\n{}", out.stderr);
        bodies.push(mock.raw_requests());
    }
    assert_eq!(bodies[0].len(), 2);
    assert!(
        bodies[0] == bodies[1],
        "--tools-mode native changed the requests"
    );
    assert!(
        bodies[0] == bodies[2],
        "the default differs from keel without Code Mode"
    );
    let first = String::from_utf8(bodies[0][0].clone()).unwrap();
    assert!(!first.contains("run_code"), "{first}");
}

/// The reason Code Mode exists, on a scripted task (read 20 files, report the ones containing a
/// word): the requests each mode needs and the bytes of input they carry. The figures are
/// printed (docs/code-mode.md quotes them); the test holds the request counts.
#[test]
fn twenty_files_take_fewer_requests_and_less_input_in_code_mode() {
    let env = Env::new();
    for i in 0..20 {
        let word = if i % 7 == 3 { "lantern" } else { "pebble" };
        env.write(
            &format!("docs/f{i:02}.txt"),
            &format!(
                "file {i}\n{}\nthe word is {word}\n",
                "filler text. ".repeat(40)
            ),
        );
    }
    let reads: String = (0..20)
        .map(|i| {
            format!(
                "      - {{ id: r{i:02}, name: read, arguments: {{ path: docs/f{i:02}.txt }} }}\n"
            )
        })
        .collect();
    let native = format!(
        "responses:\n  - tool_calls:\n      - {{ id: g1, name: glob, arguments: {{ pattern: \"docs/*.txt\" }} }}\n  - tool_calls:\n{reads}  - text: \"f03, f10 and f17 contain lantern.\"\n"
    );
    let code = r#"
responses:
  - tool_calls:
      - id: c1
        name: run_code
        arguments:
          code: |
            const list = (await tools.glob({ pattern: 'docs/*.txt' })).split('\n').filter(Boolean);
            const texts = await Promise.all(list.map((path) => tools.read({ path })));
            return list.filter((p, i) => texts[i].includes('lantern')).map((p) => p.split('/').pop());
  - match: { last_tool_result_contains: "f17" }
    text: "f03, f10 and f17 contain lantern."
"#;
    let mut figures = Vec::new();
    for (mode, script) in [("native", native.as_str()), ("code", code)] {
        let mock = Mock::start_tapped(script);
        let out = run(env.keel(&mock.base_url()).args([
            "--tools-mode",
            mode,
            "run",
            "which files contain lantern?",
        ]));
        assert_eq!(out.code, Some(0), "{mode} stderr:\n{}", out.stderr);
        assert_eq!(out.stdout, "f03, f10 and f17 contain lantern.\n", "{mode}");
        let bodies = mock.raw_requests();
        let bytes: usize = bodies.iter().map(Vec::len).sum();
        figures.push((mode, bodies.len(), bytes));
    }
    println!("mode     requests  input bytes (all requests)");
    for (mode, n, bytes) in &figures {
        println!("{mode:<8} {n:>8}  {bytes:>11}");
    }
    assert_eq!(
        figures[0].1, 3,
        "native: glob, then the reads, then the answer"
    );
    assert_eq!(figures[1].1, 2, "code: the program, then the answer");
    assert!(figures[1].2 < figures[0].2, "{figures:?}");
}

/// SIGKILL of keel while a program's `bash` sub-call runs, then `keel resume`: crash repair
/// answers `run_code` `TOOL_OUTCOME_UNKNOWN` and names the sub-calls that had started (the
/// finished `read`, the `bash` whose outcome is unknown); nothing runs again.
#[test]
fn sigkill_mid_program_then_resume_reports_the_started_sub_calls_and_reruns_none() {
    let env = Env::new();
    write_notes(&env);
    let mock = Mock::start(
        r#"
responses:
  - tool_calls:
      - id: call_code
        name: run_code
        arguments:
          code: |
            await tools.read({ path: 'notes/a.txt' });
            await tools.bash({ command: 'echo $$ >> runs.txt; sleep 300', description: 'wait' });
  - text: "not reached"
"#,
    );
    let keel = spawn(env.keel(&mock.base_url()).args([
        "--tools-mode",
        "code",
        "--approval",
        "auto",
        "run",
        "go",
    ]));
    let runs = env.wait_for_file("runs.txt");
    keel.signal(libc::SIGKILL);
    let out = keel.wait();
    assert_eq!(out.code, None, "killed by a signal");
    let pgid: i32 = runs.trim().parse().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while group_alive(pgid) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let survived = group_alive(pgid);
    kill_group(pgid);
    assert!(!survived, "the sub-call's command outlived keel");

    let path = env.only_session();
    let resumed = Mock::start("responses:\n  - text: \"Resumed.\"\n");
    let out = run(env.keel(&resumed.base_url()).args([
        "--tools-mode",
        "code",
        "resume",
        &session_id(&path),
        "next",
    ]));
    assert_eq!(out.code, Some(0), "resume stderr:\n{}", out.stderr);
    assert_eq!(env.read("runs.txt"), runs, "the command must not run again");
    let events = load_consistent(&path);
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    let (id, text, is_error) = &results[0];
    assert_eq!(id, "call_code");
    assert!(
        *is_error && text.starts_with("TOOL_OUTCOME_UNKNOWN"),
        "{text}"
    );
    assert!(
        text.contains(
            "had started: read (call_code:code:1, finished), bash (call_code:code:2, outcome \
             unknown). None will be run again."
        ),
        "{text}"
    );
}

/// An approval a sub-call needs is asked like any other; headless nobody can answer, so the
/// program sees the call rejected (`DENIED`, with the flag to use) and nothing ran.
#[test]
fn a_sub_call_needing_approval_is_refused_headless_and_the_program_sees_it() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - tool_calls:
      - id: call_code
        name: run_code
        arguments:
          code: |
            try {
              await tools.bash({ command: 'touch made.txt' });
              return 'ran';
            } catch (e) {
              return [e.toolName, e.code, e.message];
            }
  - match: { last_tool_result_contains: "DENIED" }
    text: "Refused."
"#,
    );
    let out = run(env.keel(&mock.base_url()).args([
        "--tools-mode",
        "code",
        "--sandbox",
        "read-only",
        "run",
        "go",
    ]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert!(!env.ws.join("made.txt").exists(), "the command ran");
    let events = load_consistent(&env.only_session());
    let results = tool_results(&events);
    let body: Value = serde_json::from_str(&results[0].1).unwrap();
    assert_eq!(body["result"][0], "bash");
    assert_eq!(body["result"][1], "DENIED");
    let message = body["result"][2].as_str().unwrap();
    assert!(message.contains("--approval allow"), "{message}");
    let asked = of_type(&events, "approval/asked");
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["data"]["callId"], "call_code:code:1");
}

/// With `--provenance`, each sub-call's formation is recorded nested in the `run_code`
/// dispatch: `keel trace` of a sub-call's result reaches the enclosing call and the assistant
/// message that proposed the program, and the trace of `run_code`'s result reaches every
/// sub-call.
#[test]
fn keel_trace_follows_a_sub_call_into_its_run_code() {
    let env = Env::new();
    write_notes(&env);
    let mock = Mock::start(READ_AND_GREP);
    let out = run(env.keel(&mock.base_url()).args([
        "--tools-mode",
        "code",
        "--provenance",
        "run",
        "which notes mention the needle?",
    ]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let id = session_id(&env.only_session());
    let mut cmd = env.keel("http://127.0.0.1:9");
    let out = run(cmd.args([
        "trace",
        "result:call_code:code:4",
        "--session",
        &id,
        "--format",
        "json",
    ]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("\"nested_in\""), "{}", out.stdout);
    let answer: Value = serde_json::from_str(&out.stdout).unwrap();
    let stages: Vec<&str> = answer["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["stage"].as_str())
        .collect();
    assert_eq!(stages.first(), Some(&"tool/result"));
    assert_eq!(stages.last(), Some(&"assistant/message"));
    // Two dispatches on the way: the sub-call's, nested in run_code's.
    assert_eq!(
        stages
            .iter()
            .filter(|s| **s == "tools/execute:enter")
            .count(),
        2,
        "{stages:?}"
    );

    // And the other way: the trace of run_code's own result reaches every sub-call.
    let mut cmd = env.keel("http://127.0.0.1:9");
    let out = run(cmd.args([
        "trace",
        "result:call_code",
        "--session",
        &id,
        "--format",
        "json",
        "--max-depth",
        "64",
    ]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout.contains("\"incorporates_nested\""),
        "{}",
        out.stdout
    );
    let answer: Value = serde_json::from_str(&out.stdout).unwrap();
    let enters = answer["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["stage"] == "tools/execute:enter")
        .count();
    assert_eq!(enters, 5, "run_code's dispatch and its four sub-calls'");

    // The journal with the sub-calls in it verifies offline.
    let mut cmd = env.keel("http://127.0.0.1:9");
    let out = run(cmd.args(["provenance", "verify", &id]));
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.starts_with("valid: "), "{}", out.stdout);
}

/// Explicit control's guard applies to a program's sub-calls as to direct calls: a program
/// cannot launder a write the guard would refuse.
#[test]
fn explicit_controls_guard_refuses_a_programs_unauthorized_write() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - tool_calls:
      - id: call_code
        name: run_code
        arguments:
          code: |
            try {
              await tools.write({ path: 'out.txt', content: 'x' });
              return 'written';
            } catch (e) {
              return [e.toolName, e.code];
            }
  - match: { last_tool_result_contains: "DENIED" }
    text: "Refused, as expected."
"#,
    );
    let out = run(env.keel(&mock.base_url()).args([
        "--tools-mode",
        "code",
        "--control",
        "contract",
        "--approval",
        "auto",
        "run",
        "write out.txt",
    ]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert!(!env.ws.join("out.txt").exists(), "the write ran");
    let events = load_consistent(&env.only_session());
    let body: Value = serde_json::from_str(&tool_results(&events)[0].1).unwrap();
    assert_eq!(body["result"], json!(["write", "DENIED"]));
}

/// Ctrl-C (SIGINT) while a program waits on a `bash` sub-call: the program is stopped, the
/// sub-call's process group is killed, `run_code` is answered `ABORTED` after its sub-call
/// settled (both recorded), and the turn ends aborted.
#[test]
fn sigint_mid_program_stops_the_program_and_its_sub_call() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - tool_calls:
      - id: call_code
        name: run_code
        arguments:
          code: |
            await tools.bash({ command: 'echo $$ > pid.txt; sleep 300; echo done > finished.txt' });
            return 'not reached';
  - text: "not reached"
"#,
    );
    let keel = spawn(env.keel(&mock.base_url()).args([
        "--tools-mode",
        "code",
        "--approval",
        "auto",
        "run",
        "run the slow thing",
    ]));
    let pgid: i32 = env.wait_for_file("pid.txt").trim().parse().unwrap();
    keel.signal(libc::SIGINT);
    let out = keel.wait();
    assert_eq!(out.code, Some(1), "stderr:\n{}", out.stderr);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while group_alive(pgid) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let survived = group_alive(pgid);
    kill_group(pgid);
    assert!(!survived, "the sub-call's command outlived the cancel");
    assert!(!env.ws.join("finished.txt").exists());

    let events = load_consistent(&env.only_session());
    assert_eq!(
        turn_end_reasons(&events),
        vec![json!({"kind": "aborted", "reason": "cancelled by the user"})]
    );
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    assert!(
        results[0].2 && results[0].1.starts_with("ABORTED"),
        "{results:?}"
    );
    let d = dispatches(&events);
    assert_eq!(
        d.iter().map(|x| x.0.as_str()).collect::<Vec<_>>(),
        vec!["tool/code-dispatch-start", "tool/code-dispatch"]
    );
    let settled = events
        .iter()
        .find(|e| ty(e) == "tool/code-dispatch")
        .unwrap();
    assert_eq!(settled["data"]["isError"], true);
    assert_eq!(mock.requests().len(), 1);
}

/// `run_code` takes TypeScript: its types are stripped before the engine runs it (lines kept,
/// so a later throw names the user's line), and a program using syntax that cannot be stripped
/// (`enum`) is a syntax failure at its line.
#[test]
fn a_typescript_program_runs_with_its_types_stripped() {
    let env = Env::new();
    write_notes(&env);
    let mock = Mock::start(
        r#"
responses:
  - tool_calls:
      - id: call_ts
        name: run_code
        arguments:
          description: "count lines, typed"
          code: |
            interface Count { file: string; lines: number }
            type Files = readonly string[];
            const files: Files = ['notes/a.txt', 'notes/c.txt'];
            function count(text: string, min?: number): number {
              return text.split('\n').filter((l: string): boolean => /^\d+: /.test(l)).length;
            }
            const counts: Count[] = [];
            for (const file_path of files) {
              const text = await tools.read({ file_path }) as string;
              counts.push({ file: file_path!, lines: count(text) } satisfies Count);
            }
            return counts;
  - match: { last_tool_result_contains: "lines" }
    tool_calls:
      - id: call_throw
        name: run_code
        arguments:
          code: |
            type T = { a: number };
            const t: T = { a: 1 };

            throw new Error(`bad ${t.a as number}`);
  - match: { last_tool_result_contains: "at line 4" }
    tool_calls:
      - id: call_enum
        name: run_code
        arguments:
          code: |
            const a: number = 1;
            enum Color { Red }
  - match: { last_tool_result_contains: "CODE_RUN_FAILED" }
    text: "Done."
"#,
    );
    let out = run(env
        .keel(&mock.base_url())
        .args(["--tools-mode", "code", "run", "go"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout, "Done.\n");
    let events = load_consistent(&env.only_session());
    let results = tool_results(&events);
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(!results[0].2, "{results:?}");
    assert_eq!(
        serde_json::from_str::<Value>(&results[0].1).unwrap()["result"],
        json!([{"file": "notes/a.txt", "lines": 2}, {"file": "notes/c.txt", "lines": 3}])
    );
    assert!(results[1].2);
    assert!(
        results[1]
            .1
            .starts_with("CODE_RUN_FAILED: Error: bad 1 (uncaught error) at line 4"),
        "{results:?}"
    );
    assert!(results[2].2);
    assert!(
        results[2]
            .1
            .starts_with("CODE_RUN_FAILED: SyntaxError: `enum` is not supported")
            && results[2].1.contains("at line 2"),
        "{results:?}"
    );
}
