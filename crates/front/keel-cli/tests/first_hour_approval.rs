//! Approval words no peer reads the other way (issue 50, item 3), through the real binary: keel's
//! policies are `ask`, `deny` and `allow`; the old `never` and `auto` still work and mean what
//! they meant (`never` with a note, since Codex users read it as "never ask"); and a call the
//! policy refuses names where the policy came from: the flag, or the file and key.

mod support;

use support::*;

/// Under the read-only sandbox a command needs approval: the model asks for one `touch`.
fn touch_mock(env: &Env) -> (Mock, std::path::PathBuf) {
    let marker = env.root().join("tmp").join("ran");
    let mock = Mock::start(&format!(
        r#"
responses:
  - tool_calls:
      - {{ id: b1, name: bash, arguments: {{ command: "touch '{}'" }} }}
  - text: "Done."
"#,
        marker.display()
    ));
    (mock, marker)
}

/// `keel --sandbox read-only ARGS run [--permission-mode MODE] "touch it"` (a permission
/// mode is a flag of `run`): the refusal text of the one call, the policies logged, and
/// stderr.
fn refused(env: &Env, args: &[&str]) -> (String, Vec<String>, String) {
    let (mock, marker) = touch_mock(env);
    let (run_args, global): (Vec<&str>, Vec<&str>) = match args {
        ["--permission-mode", _] => (args.to_vec(), Vec::new()),
        _ => (Vec::new(), args.to_vec()),
    };
    let out = run(env
        .keel(&mock.base_url())
        .args(["--sandbox", "read-only"])
        .args(&global)
        .arg("run")
        .args(&run_args)
        .arg("touch it"));
    assert_eq!(out.code, Some(0), "keel {args:?}\n{}", out.stderr);
    assert!(!marker.exists(), "keel {args:?}: the command ran");
    let events = load_consistent(&env.only_session());
    let results = tool_results(&events);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].2, "{results:?}");
    let policies = of_type(&events, "approval/policy")
        .iter()
        .map(|e| e["data"]["policy"].as_str().unwrap_or_default().to_owned())
        .collect();
    (results[0].1.clone(), policies, out.stderr)
}

#[test]
fn a_refusal_by_the_projects_old_never_names_the_file_and_says_what_the_word_means() {
    // An untrusted project may still tighten: its `approval = "never"` applies.
    let env = Env::untrusted();
    env.write(".keel/config.toml", "approval = \"never\"\n");
    let (text, policies, stderr) = refused(&env, &[]);
    let file = env.ws.join(".keel/config.toml");
    let source = format!("approval = \"never\" in {}", file.display());
    assert!(
        text.contains(&format!("approval prompts are disabled by {source}")),
        "{text}"
    );
    assert!(
        !text.contains("--approval"),
        "blames a flag never passed: {text}"
    );
    // Logged with the new word; the old one is read as it always was.
    assert_eq!(policies, ["deny"]);
    assert!(
        stderr.contains("keel: note: approval \"never\" is keel's old word for \"deny\"")
            && stderr.contains(&source),
        "{stderr}"
    );
}

#[test]
fn a_refusal_names_the_flag_that_set_the_policy() {
    for (args, source) in [
        (&["--approval", "deny"][..], "--approval deny"),
        (
            &["--permission-mode", "dontAsk"][..],
            "--permission-mode dontAsk",
        ),
        (&["-c", "approval=deny"][..], "-c approval=deny"),
    ] {
        let env = Env::new();
        let (text, policies, stderr) = refused(&env, args);
        assert!(
            text.contains(&format!("approval prompts are disabled by {source};")),
            "keel {args:?}: {text}"
        );
        assert_eq!(policies, ["deny"], "keel {args:?}");
        assert!(!stderr.contains("old word"), "keel {args:?}: {stderr}");
    }
    // The old word on the command line: the same policy, and the note.
    let env = Env::new();
    let (text, policies, stderr) = refused(&env, &["--approval", "never"]);
    assert!(text.contains("disabled by --approval never;"), "{text}");
    assert_eq!(policies, ["deny"]);
    assert!(stderr.contains("old word for \"deny\""), "{stderr}");
}

#[test]
fn a_headless_ask_names_its_source_and_points_to_allow() {
    let env = Env::new();
    let (text, policies, _) = refused(&env, &[]);
    assert!(
        text.contains("--approval allow") && text.contains("(approval ask: keel's default)"),
        "{text}"
    );
    assert_eq!(policies, ["ask"]);
}

#[test]
fn allow_and_the_old_auto_approve_and_log_allow() {
    for word in ["allow", "auto"] {
        let env = Env::new();
        let (mock, marker) = touch_mock(&env);
        let out = run(env.keel(&mock.base_url()).args([
            "--sandbox",
            "read-only",
            "--approval",
            word,
            "run",
            "touch it",
        ]));
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        assert!(
            marker.exists(),
            "--approval {word}: the command did not run"
        );
        let events = load_consistent(&env.only_session());
        let policy = &of_type(&events, "approval/policy")[0]["data"]["policy"];
        assert_eq!(policy, "allow", "--approval {word}");
        assert!(!out.stderr.contains("old word"), "{}", out.stderr);
    }
}

#[test]
fn an_unknown_word_lists_the_words() {
    let env = Env::new();
    let out = run(env.keel_bare().args(["--approval", "yolo", "run", "hi"]));
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains("unknown policy \"yolo\"") && out.stderr.contains("ask, deny or allow"),
        "{}",
        out.stderr
    );
}
