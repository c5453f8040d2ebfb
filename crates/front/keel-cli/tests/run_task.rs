//! End-to-end: `keel run` (the real binary) against the loopback mock model doing real work in
//! a temp workspace — a multi-step read/edit/run task, parallel reads, malformed tool
//! arguments, workspace escapes, and the credential scrub of `bash`'s environment.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use serde_json::Value;
use support::*;

#[test]
fn a_multi_step_task_reads_edits_and_runs_a_command() {
    let env = Env::new();
    env.write("greet.sh", "echo \"hello world\"\n");
    let mock = Mock::start(
        r#"
responses:
  - reasoning: "Look at the script first."
    text: "Reading greet.sh."
    tool_calls:
      - { id: call_read, name: read, arguments: { path: greet.sh } }
  - match: { last_tool_result_contains: "hello world" }
    tool_calls:
      - { id: call_edit, name: edit, arguments: { path: greet.sh, old_string: "world", new_string: "keel" } }
  - match: { last_tool_result_contains: "Edited greet.sh" }
    tool_calls:
      - { id: call_bash, name: bash, arguments: { command: "sh greet.sh > out.txt && cat out.txt", description: "run it" } }
  - match: { last_tool_result_contains: "hello keel" }
    text: "Done: greet.sh now prints hello keel."
"#,
    );
    let out = run(env.keel(&mock.base_url()).args([
        "--approval",
        "auto",
        "run",
        "make greet.sh greet keel",
    ]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout, "Done: greet.sh now prints hello keel.\n");

    // On disk.
    assert_eq!(env.read("greet.sh"), "echo \"hello keel\"\n");
    assert_eq!(env.read("out.txt"), "hello keel\n");

    // In the log.
    let events = load_consistent(&env.only_session());
    assert_eq!(
        tool_calls(&events),
        vec![
            ("call_read".into(), "read".into()),
            ("call_edit".into(), "edit".into()),
            ("call_bash".into(), "bash".into())
        ]
    );
    let results = tool_results(&events);
    assert_eq!(
        results
            .iter()
            .map(|r| (r.0.as_str(), r.2))
            .collect::<Vec<_>>(),
        vec![
            ("call_read", false),
            ("call_edit", false),
            ("call_bash", false)
        ]
    );
    assert!(results[0].1.contains("hello world"), "{results:?}");
    assert_eq!(results[2].1, "hello keel\n");
    assert_eq!(of_type(&events, "step/start").len(), 4);
    assert_eq!(
        turn_end_reasons(&events),
        vec![serde_json::json!({"kind": "completed"})]
    );
    assert_eq!(ty(last(&events)), "turn/end");
    let first = &of_type(&events, "assistant/message")[0]["data"]["message"]["content"];
    assert_eq!(
        first[0],
        serde_json::json!({"type": "reasoning", "text": "Look at the script first."})
    );

    // On the wire: four requests, each valid, the last carrying every result.
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(mock.remaining(), 0);
    let answered = assert_wire_valid(&requests[3]);
    assert_eq!(
        answered.iter().map(|a| a.0.as_str()).collect::<Vec<_>>(),
        vec!["call_read", "call_edit", "call_bash"]
    );
    assert!(requests[0]["messages"].as_array().unwrap().iter().any(|m| {
        m["role"] == "user"
            && m["content"]
                .as_str()
                .is_some_and(|c| c.ends_with("\n\nmake greet.sh greet keel"))
    }));
}

#[test]
fn parallel_reads_commit_results_in_model_order() {
    let env = Env::new();
    // The first file is by far the largest, so its read finishes last if reads overlap.
    let big: String = (1..=20_000).map(|i| format!("big line {i}\n")).collect();
    env.write("big.txt", &big);
    env.write("a.txt", "alpha\n");
    env.write("b.txt", "beta\n");
    let mock = Mock::start(
        r#"
responses:
  - tool_calls:
      - { id: r_big, name: read, arguments: { path: big.txt, limit: 5000 } }
      - { id: r_a, name: read, arguments: { path: a.txt } }
      - { id: r_missing, name: read, arguments: { path: missing.txt } }
      - { id: r_b, name: read, arguments: { path: b.txt } }
      - { id: g_txt, name: glob, arguments: { pattern: "*.txt" } }
  - text: "Read them."
"#,
    );
    let out = run(env.keel(&mock.base_url()).args(["run", "read everything"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);

    let order = ["r_big", "r_a", "r_missing", "r_b", "g_txt"];
    let events = load_consistent(&env.only_session());
    let calls: Vec<String> = tool_calls(&events).into_iter().map(|c| c.0).collect();
    assert_eq!(calls, order);
    let results = tool_results(&events);
    assert_eq!(
        results.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
        order,
        "results in model order"
    );
    assert!(
        results[0].1.contains("big line 1\n") || results[0].1.contains("big line 1"),
        "{}",
        &results[0].1[..200]
    );
    assert!(results[1].1.contains("alpha") && !results[1].2);
    assert!(
        results[2].2,
        "reading a missing file is an error result: {:?}",
        results[2]
    );
    assert!(results[3].1.contains("beta") && !results[3].2);
    assert!(results[4].1.contains("a.txt") && results[4].1.contains("big.txt"));

    // Each result cites its own call, and results follow the calls in the log.
    let call_seq = |id: &str| {
        of_type(&events, "tool/call")
            .iter()
            .find(|e| e["data"]["callId"] == id)
            .unwrap()["seq"]
            .as_u64()
            .unwrap()
    };
    for e in of_type(&events, "tool/result") {
        let (id, ..) = tool_result(e);
        assert_eq!(
            e["sourceEventSeqs"],
            serde_json::json!([call_seq(&id)]),
            "result of {id}"
        );
    }

    let requests = mock.requests();
    let answered = assert_wire_valid(&requests[1]);
    assert_eq!(
        answered.iter().map(|a| a.0.as_str()).collect::<Vec<_>>(),
        order
    );
}

#[test]
fn malformed_tool_arguments_become_error_results_and_the_loop_continues() {
    let env = Env::new();
    env.write("a.txt", "alpha\n");
    let mock = Mock::start(
        r#"
responses:
  - text: "Trying."
    tool_calls:
      - { id: bad_json, name: read, arguments: '{"path": "a.txt"' }
      - { id: bad_schema, name: read, arguments: { paht: a.txt } }
      - { id: bad_type, name: write, arguments: { path: x.txt, content: 5 } }
      - { id: bad_tool, name: no_such_tool, arguments: {} }
      - { id: not_object, name: read, arguments: '"a.txt"' }
  - match: { last_tool_result_contains: "expected object, got string" }
    tool_calls:
      - { id: good, name: read, arguments: { path: a.txt } }
  - match: { last_tool_result_contains: "alpha" }
    text: "Recovered."
"#,
    );
    let out = run(env
        .keel(&mock.base_url())
        .args(["--approval", "auto", "run", "read a.txt"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout, "Recovered.\n");
    assert!(
        !env.ws.join("x.txt").exists(),
        "a call with invalid arguments must not run"
    );

    let events = load_consistent(&env.only_session());
    let results = tool_results(&events);
    let codes: Vec<(&str, &str, bool)> = results
        .iter()
        .map(|(id, text, err)| {
            (
                id.as_str(),
                text.split(':').next().unwrap_or_default(),
                *err,
            )
        })
        .collect();
    assert_eq!(
        codes,
        vec![
            ("bad_json", "INVALID_ARGS", true),
            ("bad_schema", "INVALID_ARGS", true),
            ("bad_type", "INVALID_ARGS", true),
            ("bad_tool", "UNKNOWN_TOOL", true),
            ("not_object", "INVALID_ARGS", true),
            ("good", "<path>a.txt</path>\n<content>\n1", false),
        ]
    );
    assert!(results[3].1.contains("no_such_tool"), "{:?}", results[3]);
    assert_eq!(
        turn_end_reasons(&events),
        vec![serde_json::json!({"kind": "completed"})]
    );

    // The malformed call still goes back to the model, answered, so the next request is valid.
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    let answered = assert_wire_valid(&requests[1]);
    assert_eq!(answered.len(), 5);
    let sent_back = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .map(|m| m["tool_calls"][0]["function"]["arguments"].clone());
    assert_eq!(
        sent_back,
        Some(Value::from(r#"{"path": "a.txt""#)),
        "the model's own bytes are sent back"
    );
}

#[test]
fn workspace_escapes_are_refused_even_with_auto_approval() {
    let env = Env::new();
    std::fs::write(env.outside.join("secret.txt"), "TOP SECRET\n").unwrap();
    std::os::unix::fs::symlink(&env.outside, env.ws.join("link")).unwrap();
    std::os::unix::fs::symlink(
        env.outside.join("secret.txt"),
        env.ws.join("secret-link.txt"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        env.outside.join("dangling.txt"),
        env.ws.join("dangling-link.txt"),
    )
    .unwrap();
    let secret_abs = env.outside.join("secret.txt").display().to_string();
    let script = format!(
        r#"
responses:
  - tool_calls:
      - {{ id: dotdot, name: read, arguments: {{ path: ../outside/secret.txt }} }}
      - {{ id: absolute, name: read, arguments: {{ path: "{secret_abs}" }} }}
      - {{ id: dir_link, name: read, arguments: {{ path: link/secret.txt }} }}
      - {{ id: file_link, name: read, arguments: {{ path: secret-link.txt }} }}
      - {{ id: write_dotdot, name: write, arguments: {{ path: ../outside/new.txt, content: pwned }} }}
      - {{ id: write_link, name: write, arguments: {{ path: link/new.txt, content: pwned }} }}
      - {{ id: write_dangling, name: write, arguments: {{ path: dangling-link.txt, content: pwned }} }}
      - {{ id: edit_link, name: edit, arguments: {{ path: secret-link.txt, old_string: TOP, new_string: NOT }} }}
      - {{ id: glob_out, name: glob, arguments: {{ pattern: "*", path: ../outside }} }}
      - {{ id: grep_out, name: grep, arguments: {{ pattern: SECRET, path: link }} }}
  - text: "Refused, as expected."
"#
    );
    let mock = Mock::start(&script);
    let out = run(env
        .keel(&mock.base_url())
        .args(["--approval", "auto", "run", "try to escape"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);

    let events = load_consistent(&env.only_session());
    let results = tool_results(&events);
    assert_eq!(results.len(), 10);
    for (id, text, is_error) in &results {
        assert!(is_error, "{id} escaped the workspace: {text}");
        assert!(text.starts_with("DENIED"), "{id}: {text}");
        assert!(!text.contains("TOP SECRET"), "{id} leaked the file: {text}");
    }
    // Nothing outside changed.
    assert_eq!(
        std::fs::read_to_string(env.outside.join("secret.txt")).unwrap(),
        "TOP SECRET\n"
    );
    let mut outside: Vec<String> = std::fs::read_dir(&env.outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    outside.sort();
    assert_eq!(outside, vec!["secret.txt"]);
    // And the model never saw the secret.
    let wire = serde_json::to_string(&mock.requests()).unwrap();
    assert!(!wire.contains("TOP SECRET"));
}

#[test]
fn bash_sees_an_environment_scrubbed_of_credentials() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - tool_calls:
      - { id: env, name: bash, arguments: { command: "env | sort" } }
  - text: "Seen."
"#,
    );
    let out = run(env
        .keel(&mock.base_url())
        .env("MY_SECRET", "hush-secret")
        .env("GITHUB_TOKEN", "hush-token")
        .env("db_password", "hush-password")
        .env("OPENAI_API_KEY", "hush-key")
        .env("ForwardMe_Token", "forwarded-value")
        .env("KEEL_E2E_PLAIN", "plain-value")
        .args([
            "--approval",
            "auto",
            "-c",
            r#"tools.forward_env=["ForwardMe_Token"]"#,
            "run",
            "show env",
        ]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);

    let events = load_consistent(&env.only_session());
    let (_, text, is_error) = tool_results(&events).remove(0);
    assert!(!is_error, "{text}");
    assert!(
        text.contains("KEEL_E2E_PLAIN=plain-value"),
        "ordinary variables pass:\n{text}"
    );
    assert!(
        text.contains("ForwardMe_Token=forwarded-value"),
        "explicitly forwarded variables pass:\n{text}"
    );
    assert!(text.contains("PATH="), "{text}");
    for leaked in [
        "hush-secret",
        "hush-token",
        "hush-password",
        "hush-key",
        API_KEY,
    ] {
        assert!(!text.contains(leaked), "{leaked} leaked into bash:\n{text}");
    }
    let credential_names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .filter(|k| {
            let k = k.to_ascii_uppercase();
            ["KEY", "PASSWORD", "SECRET", "TOKEN"]
                .iter()
                .any(|w| k.contains(w))
        })
        .collect();
    assert_eq!(credential_names, vec!["ForwardMe_Token"]);
    // What the model was sent is that same scrubbed output.
    let answered = assert_wire_valid(&mock.requests()[1]);
    assert_eq!(answered[0].1, text);
}

/// An `AGENTS.md` below the working directory is not in the system prompt; the first file tool
/// that touches its directory gets it in its result (what the model reads next), once; a file
/// tool touching it again after the file changed gets it again, marked changed.
#[test]
fn a_nested_agents_md_is_announced_when_a_file_tool_first_touches_its_directory() {
    let env = Env::new();
    env.write("AGENTS.md", "root rule");
    env.write("pkg/AGENTS.md", "pkg rule: use tabs");
    env.write("pkg/lib.txt", "one\n");
    let mock = Mock::start(
        r#"
responses:
  - tool_calls: [{ id: r1, name: read, arguments: { file_path: pkg/lib.txt } }]
  - tool_calls: [{ id: r2, name: grep, arguments: { pattern: one, path: pkg } }]
  - tool_calls: [{ id: b1, name: bash, arguments: { command: "echo 'pkg rule: use spaces' > pkg/AGENTS.md" } }]
  - tool_calls: [{ id: r3, name: read, arguments: { file_path: pkg/lib.txt } }]
  - text: "done"
"#,
    );
    let out = run(env
        .keel(&mock.base_url())
        .args(["--approval", "auto", "run", "look at pkg"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let requests = mock.requests();
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("root rule") && !system.contains("pkg rule"),
        "{system}"
    );
    let results = tool_results(&load_consistent(&env.only_session()));
    let texts: Vec<&str> = results.iter().map(|r| r.1.as_str()).collect();
    assert!(
        texts[0].contains(
            "<instructions path=\"pkg/AGENTS.md\" applies-to=\"pkg/\">\npkg rule: use tabs\n</instructions>"
        ),
        "{}",
        texts[0]
    );
    assert!(!texts[1].contains("<instructions"), "{}", texts[1]);
    // A command changed the file: the next touch shows the new text.
    assert!(
        texts[3].contains("changed=\"true\">\npkg rule: use spaces"),
        "{}",
        texts[3]
    );
    // The model read it: the request after the first read carries it in the tool message.
    let tool_message = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()
        .to_string();
    assert!(
        tool_message.contains("pkg rule: use tabs"),
        "{tool_message}"
    );
}

/// `--preset minimal` gives the model dsh 0.2's minimal tools: one persistent shell (a `cd`
/// holds for the next call), read, write, edit and `working_directory` (whose `cd` moves where
/// relative paths start); `--preset code` gives `run_code`.
#[test]
fn a_preset_chooses_the_built_in_tools() {
    let env = Env::new();
    env.write("sub/notes.txt", "alpha\n");
    let mock = Mock::start(
        r#"
responses:
  - tool_calls: [{ id: s1, name: bash, arguments: { command: "cd sub" } }]
  - tool_calls: [{ id: s2, name: bash, arguments: { command: "pwd && cat notes.txt" } }]
  - tool_calls: [{ id: w1, name: working_directory, arguments: { cd: sub } }]
  - tool_calls: [{ id: e1, name: read, arguments: { file_path: notes.txt } }]
  - tool_calls: [{ id: e2, name: edit, arguments: { file_path: notes.txt, old_string: alpha, new_string: beta } }]
  - text: "done"
"#,
    );
    let out = run(env.keel(&mock.base_url()).args([
        "--approval",
        "auto",
        "--preset",
        "minimal",
        "run",
        "edit notes",
    ]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let names = tool_names(&mock.requests()[0]);
    for minimal in ["bash", "read", "write", "edit", "working_directory"] {
        assert!(names.contains(&minimal.to_owned()), "{names:?}");
    }
    for standard in ["glob", "grep", "todo_write", "str_replace_editor"] {
        assert!(!names.contains(&standard.to_owned()), "{names:?}");
    }
    let results = tool_results(&load_consistent(&env.only_session()));
    assert!(results[1].1.contains("/sub\nalpha"), "{}", results[1].1);
    assert!(results[2].1.ends_with("/sub"), "{}", results[2].1);
    assert!(!results[4].2, "{}", results[4].1);
    assert_eq!(env.read("sub/notes.txt"), "beta\n");

    let mock = Mock::start("responses:\n  - text: \"done\"\n");
    let out = run(env
        .keel(&mock.base_url())
        .args(["--preset", "code", "run", "hello"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let names = tool_names(&mock.requests()[0]);
    assert!(names.contains(&"run_code".to_owned()), "{names:?}");
    assert!(!names.contains(&"read".to_owned()), "{names:?}");
}

/// A session keeps the preset it started with: resumed without `--preset` it gets the same
/// tools; a resume with another preset switches, and the log says so.
#[test]
fn a_resumed_session_keeps_its_preset_unless_told_otherwise() {
    let env = Env::new();
    let turn = |flags: &[&str], command: &[&str]| {
        let mock = Mock::start("responses:\n  - text: \"ok\"\n");
        let out = run(env.keel(&mock.base_url()).args(flags).args(command));
        assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
        tool_names(&mock.requests()[0])
    };
    let first = turn(&["--preset", "minimal"], &["run", "hello"]);
    assert!(!first.contains(&"glob".to_owned()), "{first:?}");
    let resumed = turn(&[], &["resume", "--last", "again"]);
    assert!(
        resumed.contains(&"working_directory".to_owned()),
        "{resumed:?}"
    );
    assert!(!resumed.contains(&"glob".to_owned()), "{resumed:?}");
    let switched = turn(&["--preset", "standard"], &["resume", "--last", "more"]);
    assert!(switched.contains(&"glob".to_owned()), "{switched:?}");
    let events = load_consistent(&env.only_session());
    let presets: Vec<&str> = of_type(&events, "tools/preset")
        .iter()
        .map(|e| e["data"]["preset"].as_str().unwrap())
        .collect();
    assert_eq!(presets, ["minimal", "standard"]);
}

/// A resumed session goes on in the directory its `working_directory` calls moved it to; a
/// failed call, or a directory removed since, does not move it.
#[test]
fn a_resumed_session_keeps_its_working_directory() {
    let env = Env::new();
    env.write("sub/notes.txt", "in sub\n");
    env.write("notes.txt", "at the root\n");
    let mock = Mock::start(
        r#"
responses:
  - tool_calls: [{ id: w1, name: working_directory, arguments: { cd: sub } }]
  - tool_calls: [{ id: w2, name: working_directory, arguments: { cd: missing } }]
  - text: "moved"
"#,
    );
    let out = run(env
        .keel(&mock.base_url())
        .args(["--approval", "auto", "run", "go to sub"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let resume = |env: &Env| {
        let mock = Mock::start(
            r#"
responses:
  - tool_calls: [{ id: r1, name: read, arguments: { file_path: notes.txt } }]
  - text: "read"
"#,
        );
        let out = run(env.keel(&mock.base_url()).args([
            "--approval",
            "auto",
            "resume",
            "--last",
            "read the notes",
        ]));
        assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
        let results = tool_results(&load_consistent(&env.only_session()));
        results.last().unwrap().1.clone()
    };
    assert!(resume(&env).contains("in sub"));
    // Its directory gone, the next resume starts at the launch directory.
    std::fs::remove_dir_all(env.ws.join("sub")).unwrap();
    assert!(resume(&env).contains("at the root"));
}
