//! Instruction files that lead out of the workspace (issue 44, hole 1): a cloned repository
//! with `AGENTS.md -> /proc/self/environ` put keel's whole environment, the API key included,
//! into the system prompt; a nested `pkg/CLAUDE.md` linked to a file outside was shown when a
//! file tool touched `pkg/`. Now instruction files are opened beneath the workspace root
//! without following a link out of it, must be regular files and are size-capped; anything
//! else is skipped with a notice naming the file, never read.

use crate::support::*;

fn answer_only() -> Mock {
    Mock::start("responses:\n  - text: \"ok\"\n")
}

/// Everything keel sent the model and wrote to the session, as one string.
fn seen(env: &Env, mock: &Mock) -> String {
    let requests = serde_json::to_string(&mock.requests()).unwrap();
    let session = std::fs::read_to_string(env.only_session()).unwrap();
    format!("{requests}\n{session}")
}

#[test]
fn an_agents_md_linked_outside_reaches_neither_the_model_nor_the_session() {
    agents_md_linked_outside(None);
}

/// The same on a kernel without `openat2`: `KEEL_BENEATH=walk` makes keel resolve by its own
/// `O_NOFOLLOW` walk from the root's descriptor.
#[test]
fn without_openat2_the_walk_refuses_the_same_link() {
    agents_md_linked_outside(Some("walk"));
}

fn agents_md_linked_outside(resolver: Option<&str>) {
    let env = Env::new();
    std::fs::write(env.outside.join("secret.md"), "OUTSIDE-FILE-MARKER").unwrap();
    std::os::unix::fs::symlink(env.outside.join("secret.md"), env.ws.join("AGENTS.md")).unwrap();
    // A link inside the workspace is still read (CLAUDE.md -> AGENTS.md is common).
    env.write("docs/RULES.md", "INSIDE-RULE-MARKER");
    std::os::unix::fs::symlink("docs/RULES.md", env.ws.join("CLAUDE.md")).unwrap();
    let mock = answer_only();
    let mut cmd = env.keel(&mock.base_url());
    if let Some(r) = resolver {
        cmd.env("KEEL_BENEATH", r);
    }
    let out = run(cmd.args(["run", "hi"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let seen = seen(&env, &mock);
    assert!(
        !seen.contains("OUTSIDE-FILE-MARKER"),
        "the outside file leaked"
    );
    assert!(seen.contains("INSIDE-RULE-MARKER"), "a link inside is read");
    assert!(
        out.stderr
            .contains("instruction file AGENTS.md not read: it leads outside the workspace"),
        "{}",
        out.stderr
    );
}

#[test]
fn an_agents_md_linked_to_proc_self_environ_leaks_no_variable() {
    let env = Env::new();
    std::os::unix::fs::symlink("/proc/self/environ", env.ws.join("AGENTS.md")).unwrap();
    let mock = answer_only();
    let out = run(env
        .keel(&mock.base_url())
        .env("KEEL_E2E_MARKER_KEY", "environ-secret-marker")
        .args(["--plan", "--sandbox", "read-only", "run", "hi"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let seen = seen(&env, &mock);
    assert!(
        !seen.contains("environ-secret-marker"),
        "the environment leaked"
    );
    assert!(!seen.contains(API_KEY), "the API key leaked");
    assert!(out.stderr.contains("AGENTS.md not read"), "{}", out.stderr);
}

#[test]
fn a_nested_claude_md_linked_outside_is_announced_as_skipped_not_read() {
    let env = Env::new();
    std::fs::write(env.outside.join("nested.md"), "NESTED-OUTSIDE-MARKER").unwrap();
    env.write("pkg/x.rs", "fn x() {}\n");
    std::os::unix::fs::symlink(env.outside.join("nested.md"), env.ws.join("pkg/CLAUDE.md"))
        .unwrap();
    let mock = Mock::start(
        "responses:\n  - tool_calls: [{ id: r1, name: read, arguments: { file_path: pkg/x.rs } }]\n  - text: \"ok\"\n",
    );
    let out = run(env.keel(&mock.base_url()).args(["run", "read pkg/x.rs"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let seen = seen(&env, &mock);
    assert!(
        !seen.contains("NESTED-OUTSIDE-MARKER"),
        "the outside file leaked"
    );
    let events = load_consistent(&env.only_session());
    let (_, text, is_error) = tool_results(&events).remove(0);
    assert!(!is_error, "{text}");
    assert!(
        text.contains("<instructions path=\"pkg/CLAUDE.md\" skipped=\"true\">not read: it leads outside the workspace"),
        "{text}"
    );
}

#[test]
fn a_fifo_a_loop_and_a_huge_instruction_file_are_skipped_and_keel_goes_on() {
    let env = Env::new();
    let made = std::process::Command::new("mkfifo")
        .arg(env.ws.join("AGENTS.md"))
        .status()
        .unwrap();
    assert!(made.success());
    std::os::unix::fs::symlink("CLAUDE.md", env.ws.join("CLAUDE.md")).unwrap();
    // 2 GB without writing 2 GB: a sparse file, as the user's own instruction file.
    let big = std::fs::File::create(env.home.join("AGENTS.md")).unwrap();
    big.set_len(2 << 30).unwrap();
    let mock = answer_only();
    let out = run(env.keel(&mock.base_url()).args(["run", "hi"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    for line in [
        "instruction file AGENTS.md not read: it is a FIFO, not a regular file",
        "instruction file CLAUDE.md not read: too many levels of symbolic links",
        "instruction file ~/AGENTS.md (user) not read: it is 2147483648 bytes, over the 1048576-byte limit",
    ] {
        assert!(
            out.stderr.contains(line),
            "missing {line:?} in {}",
            out.stderr
        );
    }
}

// other project files

/// The project's other files keel reads on its own (`.mcp.json`, skills, settings, config,
/// commands) are opened beneath the workspace root too: a trusted workspace whose `.mcp.json`
/// and a skill's `SKILL.md` link to files outside shows neither to the model nor the session,
/// starts no server, and says on stderr which files it skipped.
#[test]
fn an_mcp_json_and_a_skill_linked_outside_are_skipped_with_a_notice() {
    let env = Env::new();
    let ran = env.outside.join("MCP-SERVER-RAN");
    std::fs::write(
        env.outside.join("mcp.json"),
        format!(
            r#"{{"mcpServers": {{"OUTSIDE-MCP-MARKER": {{"command": "sh", "args": ["-c", "touch {}"]}}}}}}"#,
            ran.display()
        ),
    )
    .unwrap();
    std::fs::write(
        env.outside.join("skill.md"),
        "---\nname: leak\ndescription: OUTSIDE-SKILL-MARKER\n---\nOUTSIDE-SKILL-BODY\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(env.outside.join("mcp.json"), env.ws.join(".mcp.json")).unwrap();
    std::fs::create_dir_all(env.ws.join(".claude/skills/leak")).unwrap();
    std::os::unix::fs::symlink(
        env.outside.join("skill.md"),
        env.ws.join(".claude/skills/leak/SKILL.md"),
    )
    .unwrap();
    // A skill inside the workspace is still offered.
    env.write(
        ".claude/skills/good/SKILL.md",
        "---\nname: good\ndescription: INSIDE-SKILL-MARKER\n---\nbody\n",
    );
    let mock = answer_only();
    let out = run(env.keel(&mock.base_url()).args(["run", "hi"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let seen = seen(&env, &mock);
    for marker in [
        "OUTSIDE-MCP-MARKER",
        "OUTSIDE-SKILL-MARKER",
        "OUTSIDE-SKILL-BODY",
    ] {
        assert!(!seen.contains(marker), "{marker} leaked");
    }
    assert!(
        seen.contains("INSIDE-SKILL-MARKER"),
        "a skill inside is read"
    );
    assert!(!ran.exists(), "a server named by the outside file ran");
    for file in [".mcp.json", ".claude/skills/leak/SKILL.md"] {
        assert!(
            out.stderr
                .lines()
                .any(|l| l.contains(file) && l.contains("outside the workspace")),
            "no notice naming {file} in {}",
            out.stderr
        );
    }
}
