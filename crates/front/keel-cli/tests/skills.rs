//! Skills end to end (docs/skills.md) through the real `keel` binary and the loopback mock
//! model: a skill from each root is listed in the system prompt, the first root of a name wins
//! (the others are reported shadowed, in the documented order), the `skill` tool's result
//! reaches the next request, an untrusted workspace's skills are not offered (and the trust
//! notice and `keel trust` name them), a broken skill is a warning naming its file while the
//! turn goes on, no skill means no tool and no prompt text, and a skill added during a turn is
//! offered from the next turn's start (never in the middle of a turn).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use support::{Env, Mock, load_consistent, of_type, run, tool_names};

fn skill(dir: &Path, name: &str, description: &str) {
    std::fs::create_dir_all(dir.join(name)).unwrap();
    std::fs::write(
        dir.join(name).join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n---\nBODY of {name}.\n"),
    )
    .unwrap();
}

fn system_prompt(request: &Value) -> String {
    request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Every root in rank order (label, directory), for `env`: the project's five, the configured
/// one, the five home roots.
fn all_roots(env: &Env) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for rel in [
        ".dsh/skills",
        ".agents/skills",
        ".keel/skills",
        ".claude/skills",
        ".codex/skills",
    ] {
        out.push((format!("project {rel}"), env.ws.join(rel)));
    }
    out.push(("config".into(), env.outside.join("extra")));
    for (label, dir) in [
        ("home .dsh", env.root().join(".dsh/skills")),
        ("home .agents", env.root().join(".agents/skills")),
        ("keel home", env.home.join("skills")),
        ("home .claude", env.root().join(".claude/skills")),
        ("home .codex", env.root().join(".codex/skills")),
    ] {
        out.push((label.into(), dir));
    }
    out
}

#[test]
fn every_root_is_listed_the_first_wins_and_a_loaded_skill_reaches_the_model() {
    let env = Env::new();
    let roots = all_roots(&env);
    for (i, (label, dir)) in roots.iter().enumerate() {
        skill(
            dir,
            &format!("own-{i:02}"),
            &format!("the skill of {label}"),
        );
        skill(dir, "chain", &format!("chain from {label}"));
    }
    std::fs::write(
        env.home.join("config.toml"),
        format!(
            "[[plugins]]\nid = \"skills\"\n[plugins.config]\ndirs = [{:?}]\n",
            roots[5].1.display().to_string()
        ),
    )
    .unwrap();
    std::fs::write(roots[2].1.join("own-02/helper.py"), "print(1)\n").unwrap();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "GO" }
    tool_calls:
      - { id: c1, name: skill, arguments: { name: "own-2" } }
      - { id: c2, name: skill, arguments: { name: "own-02" } }
  - match: { last_tool_result_contains: "BODY of own-02" }
    text: "DONE"
"#,
    );
    let out = run(env.keel(&mock.base_url()).args(["run", "GO"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("DONE"), "{out:?}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let prompt = system_prompt(&requests[0]);
    for (i, (label, _)) in roots.iter().enumerate() {
        assert!(
            prompt.contains(&format!("- own-{i:02}: the skill of {label}")),
            "{label} missing from the catalog:\n{prompt}"
        );
    }
    assert!(
        prompt.contains("- chain: chain from project .dsh/skills"),
        "{prompt}"
    );
    assert_eq!(prompt.matches("- chain:").count(), 1);
    assert!(tool_names(&requests[0]).contains(&"skill".to_owned()));

    // The loaded skill's body and folder reach the next request; a near-miss name is an
    // error naming the close one.
    let messages = requests[1]["messages"].as_array().unwrap();
    let tool_text = |id: &str| -> String {
        messages
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
            .map(|m| m["content"].to_string())
            .unwrap_or_else(|| panic!("no result {id} in {messages:?}"))
    };
    let loaded = tool_text("c2");
    assert!(loaded.contains("BODY of own-02."), "{loaded}");
    assert!(loaded.contains("helper.py"), "{loaded}");
    assert!(!loaded.contains("description:"), "{loaded}");
    let missed = tool_text("c1");
    assert!(missed.contains("no skill named 'own-2'"), "{missed}");
    assert!(missed.contains("own-02"), "{missed}");

    // The listing reports each shadowed `chain`, in rank order, won by the first root's.
    let events = load_consistent(&env.only_session());
    let listing = of_type(&events, "skills/catalog");
    assert_eq!(listing.len(), 1);
    let shadowed: Vec<String> = listing[0]["data"]["shadowed"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] == "chain")
        .map(|s| s["file"].as_str().unwrap().to_owned())
        .collect();
    let expected: Vec<String> = roots[1..]
        .iter()
        .map(|(_, d)| d.join("chain/SKILL.md").display().to_string())
        .collect();
    assert_eq!(shadowed, expected);
    assert!(of_type(&events, "skills/warning").is_empty());
}

#[test]
fn an_untrusted_workspace_s_skills_are_not_offered_and_trust_names_them() {
    let env = Env::untrusted();
    skill(
        &env.ws.join(".claude/skills"),
        "project-skill",
        "from the project",
    );
    skill(&env.home.join("skills"), "home-skill", "from home");
    let mock = Mock::start("responses:\n  - text: \"done\"\n");
    let out = run(env.keel(&mock.base_url()).args(["run", "GO"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    let prompt = system_prompt(&mock.requests()[0]);
    assert!(prompt.contains("- home-skill: from home"), "{prompt}");
    assert!(!prompt.contains("project-skill"), "{prompt}");
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("is not trusted"))
        .unwrap_or_else(|| panic!("no notice: {}", out.stderr));
    assert!(
        line.contains(".claude/skills (skills.project-skill)"),
        "{line}"
    );

    // `keel trust` says what now takes effect; the next run offers the project's skill.
    let trusted = run(env.keel_bare().arg("trust"));
    assert_eq!(trusted.code, Some(0), "{trusted:?}");
    assert!(
        trusted.stdout.contains("skills.project-skill"),
        "{}",
        trusted.stdout
    );
    let mock = Mock::start("responses:\n  - text: \"done\"\n");
    let out = run(env.keel(&mock.base_url()).args(["run", "GO"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    let prompt = system_prompt(&mock.requests()[0]);
    assert!(
        prompt.contains("- project-skill: from the project"),
        "{prompt}"
    );
}

#[test]
fn a_broken_skill_is_a_warning_naming_the_file_and_the_turn_goes_on() {
    let env = Env::new();
    let dir = env.home.join("skills");
    skill(&dir, "good", "works");
    std::fs::create_dir_all(dir.join("broken")).unwrap();
    std::fs::write(
        dir.join("broken/SKILL.md"),
        "---\nname: broken\nthis is not yaml\n---\n",
    )
    .unwrap();
    std::fs::write(dir.join("huge.md"), "x".repeat(300 * 1024)).unwrap();
    let mock = Mock::start("responses:\n  - text: \"DONE\"\n");
    let out = run(env.keel(&mock.base_url()).args(["run", "GO"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("DONE"), "{out:?}");
    let broken = dir.join("broken/SKILL.md").display().to_string();
    assert!(
        out.stderr.contains(&format!(
            "keel: Skill file {broken} skipped: front matter line 3"
        )),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("huge.md skipped"), "{}", out.stderr);
    let events = load_consistent(&env.only_session());
    let warnings = of_type(&events, "skills/warning");
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert_eq!(warnings[0]["data"]["file"], broken.as_str());
    let prompt = system_prompt(&mock.requests()[0]);
    assert!(prompt.contains("- good: works"), "{prompt}");
}

#[test]
fn without_skills_there_is_no_tool_no_prompt_text_and_no_event() {
    let env = Env::new();
    let mock = Mock::start("responses:\n  - text: \"done\"\n");
    let out = run(env.keel(&mock.base_url()).args(["run", "GO"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    let request = &mock.requests()[0];
    assert!(!tool_names(request).contains(&"skill".to_owned()));
    assert!(!system_prompt(request).contains("Skills:"));
    let events = load_consistent(&env.only_session());
    assert!(of_type(&events, "skills/catalog").is_empty());
}

#[test]
fn a_skill_added_during_a_turn_is_offered_from_the_next_turn() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "FIRST" }
    text: "turn one done"
    behaviour: stall
    stall_ms: 1500
  - match: { last_user_contains: "SECOND" }
    tool_calls:
      - { id: l1, name: skill, arguments: { name: "late" } }
  - match: { last_tool_result_contains: "BODY of late" }
    text: "DONE"
"#,
    );
    let mut running = support::spawn(
        env.keel(&mock.base_url())
            .args(["run", "--inbox-stdin", "FIRST"])
            .stdin(std::process::Stdio::piped()),
    );
    let mut stdin = running.take_stdin();
    // Added while turn one runs (its model call stalls): turn one's requests do not change,
    // the next turn's start sees it.
    env.wait_for_log("the first turn's start", |events| {
        !of_type(events, "turn/start").is_empty()
    });
    skill(
        &env.ws.join(".claude/skills"),
        "late",
        "added between turns",
    );
    {
        use std::io::Write;
        writeln!(stdin, r#"{{"followup": "SECOND"}}"#).unwrap();
    }
    drop(stdin);
    let out = running.wait();
    assert_eq!(out.code, Some(0), "{out:?}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "{out:?}");
    assert!(!system_prompt(&requests[0]).contains("late"));
    assert!(!tool_names(&requests[0]).contains(&"skill".to_owned()));
    for r in &requests[1..] {
        assert!(
            system_prompt(r).contains("- late: added between turns"),
            "{}",
            system_prompt(r)
        );
        assert!(tool_names(r).contains(&"skill".to_owned()));
    }
    let events = load_consistent(&env.only_session());
    assert_eq!(of_type(&events, "skills/catalog").len(), 1);
}
