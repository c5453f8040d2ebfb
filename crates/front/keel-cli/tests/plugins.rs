//! Claude Code plugin bundles end to end (docs/plugins.md), through the real `keel` binary,
//! real git repositories (a marketplace on disk, cloned by path), the loopback mock model and
//! the real `@modelcontextprotocol/server-everything` as a plugin's MCP server: add a
//! marketplace, install two plugins, pin, list, use a plugin's slash command, subagent, skill,
//! hook and MCP server in one run, disable, update to a new commit, remove; a project-declared
//! marketplace in an untrusted workspace installs and runs nothing; bad sources, names,
//! manifests and links are refused naming them, leaving nothing half-installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;
use std::path::PathBuf;
use support::{Env, Mock, commit_all, git, node_bin, run, write_file};

/// A marketplace repository `demo-market` beside the workspace, listing `alpha` (a command, an
/// agent, a skill, a hook and an MCP server), `beta` (a command named like alpha's) and
/// `broken` (a manifest that is not JSON).
fn marketplace(env: &Env) -> (PathBuf, String) {
    let repo = env.outside.join("market");
    write_file(
        &repo.join(".claude-plugin/marketplace.json"),
        r#"{"name": "demo-market", "owner": {"name": "tests"}, "plugins": [
            {"name": "alpha", "source": "./plugins/alpha", "description": "the alpha plugin"},
            {"name": "beta", "source": "./plugins/beta"},
            {"name": "broken", "source": "./plugins/broken"}
        ]}"#,
    );
    let alpha = repo.join("plugins/alpha");
    write_file(
        &alpha.join(".claude-plugin/plugin.json"),
        r#"{"name": "alpha", "version": "1.0.0", "description": "alpha, all five parts"}"#,
    );
    write_file(
        &alpha.join("commands/review.md"),
        "---\ndescription: review things\n---\nREVIEW-BODY-V1 of $ARGUMENTS\n",
    );
    write_file(
        &alpha.join("agents/helper.md"),
        "---\nname: helper\ndescription: helps with things\ntools: read, grep\n---\nHELPER-PERSONA: you are the helper.\n",
    );
    write_file(
        &alpha.join("skills/greet/SKILL.md"),
        "---\nname: greet\ndescription: greets from the alpha plugin\n---\nSay hello.\n",
    );
    write_file(
        &alpha.join("hooks/context.sh"),
        "echo PLUGIN-HOOK-SAYS-HI\n",
    );
    write_file(
        &alpha.join("hooks/hooks.json"),
        r#"{"hooks": {"UserPromptSubmit": [{"hooks": [
            {"type": "command", "command": "sh ${CLAUDE_PLUGIN_ROOT}/hooks/context.sh"}]}]}}"#,
    );
    write_file(
        &alpha.join("bin/everything.sh"),
        &format!(
            "exec {} \"$@\"\n",
            node_bin("mcp-server-everything").display()
        ),
    );
    write_file(
        &alpha.join(".mcp.json"),
        r#"{"mcpServers": {"everything": {"command": "sh", "args": ["${CLAUDE_PLUGIN_ROOT}/bin/everything.sh", "stdio"]}}}"#,
    );
    let beta = repo.join("plugins/beta");
    write_file(
        &beta.join(".claude-plugin/plugin.json"),
        r#"{"name": "beta"}"#,
    );
    write_file(&beta.join("commands/review.md"), "BETA-REVIEW\n");
    write_file(
        &repo.join("plugins/broken/.claude-plugin/plugin.json"),
        "{not json",
    );
    git(&repo, &["init", "-q"]);
    let head = commit_all(&repo, "one");
    (repo, head)
}

fn plugin(env: &Env, args: &[&str]) -> support::Output {
    run(env.keel_bare().arg("plugin").args(args))
}

fn user_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn tools(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| {
                    t["function"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Nothing but the state, the marketplaces and the installed plugins under `plugins/`: no
/// staging folder left by a failed step.
fn assert_clean(env: &Env) {
    let left: Vec<String> = std::fs::read_dir(env.home.join("plugins"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_marketplace_s_plugins_install_pin_run_switch_update_and_go() {
    let env = Env::new();
    let (repo, first) = marketplace(&env);

    let out = plugin(&env, &["marketplace", "add", repo.to_str().unwrap()]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.contains("added marketplace demo-market from")
            && out.stdout.contains("3 plugins (alpha, beta, broken)"),
        "{out:?}"
    );

    // A broken manifest is named, and nothing of it stays.
    let out = plugin(&env, &["install", "broken@demo-market"]);
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains("plugin broken@demo-market")
            && out.stderr.contains("plugin.json is not a plugin manifest"),
        "{out:?}"
    );
    assert!(
        !env.home
            .join("plugins/installed/broken@demo-market")
            .exists()
    );
    assert_clean(&env);

    let out = plugin(&env, &["install", "alpha"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.contains(&format!(
            "installed alpha@demo-market 1.0.0 at {}",
            &first[..12]
        )),
        "{out:?}"
    );
    for part in [
        "1 command (review)",
        "1 agent (helper)",
        "1 skill (greet)",
        "1 hook event (UserPromptSubmit)",
        "1 MCP server (everything)",
    ] {
        assert!(out.stdout.contains(part), "{part}: {out:?}");
    }
    // Two plugins with the same command: both kept, namespaced, and said.
    let out = plugin(&env, &["install", "beta@demo-market"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.contains("/alpha:review and /beta:review"),
        "{out:?}"
    );

    let out = plugin(&env, &["list", "--json"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let listed: Value = serde_json::from_str(&out.stdout).unwrap();
    let alpha = &listed["plugins"][0];
    assert_eq!(alpha["plugin"], "alpha@demo-market");
    assert_eq!(alpha["commit"], first.as_str());
    assert_eq!(alpha["enabled"], true);
    assert_eq!(alpha["contributes"]["mcpServers"][0], "everything");

    // keel mcp list shows the plugin's server, and where it comes from.
    let out = run(env.keel_bare().args(["mcp", "list"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.contains("everything") && out.stdout.contains("plugin alpha"),
        "{out:?}"
    );

    // One run uses the command, the hook, the skill, the subagent and the MCP server.
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "CHILD-TASK" }
    text: "child done"
  - match: { last_user_contains: "REVIEW-BODY-V1" }
    tool_calls:
      - { id: c1, name: mcp__everything__echo, arguments: { message: "ping" } }
      - { id: c2, name: subagent, arguments: { description: "help", prompt: "CHILD-TASK", agent: "alpha:helper" } }
  - match: { last_tool_result_contains: "child done" }
    text: "ALL DONE"
"#,
    );
    let out = run(env
        .keel(&mock.base_url())
        .args(["run", "/alpha:review the parser"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("ALL DONE"), "{out:?}");
    let requests = mock.requests();
    let first_request = requests
        .iter()
        .find(|r| user_text(r).contains("REVIEW-BODY-V1 of the parser"))
        .expect("the command's prompt reached the model");
    assert!(
        user_text(first_request).contains("PLUGIN-HOOK-SAYS-HI"),
        "the plugin's hook ran: {first_request}"
    );
    let system = first_request["messages"][0]["content"].to_string();
    assert!(
        system.contains("greet"),
        "the plugin's skill is offered: {system}"
    );
    let offered = tools(first_request);
    assert!(
        offered.contains(&"mcp__everything__echo".to_owned()),
        "{offered:?}"
    );
    let child = requests
        .iter()
        .find(|r| user_text(r).contains("CHILD-TASK"))
        .expect("the child asked the model");
    assert!(
        child.to_string().contains("HELPER-PERSONA"),
        "the agent definition reached the child: {child}"
    );
    let last = requests.last().unwrap().to_string();
    assert!(
        last.contains("Echo: ping"),
        "the MCP server answered: {last}"
    );

    // Off: nothing of alpha reaches the next run.
    let out = plugin(&env, &["disable", "alpha"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let mock = Mock::start("responses:\n  - text: \"quiet\"\n");
    let out = run(env
        .keel(&mock.base_url())
        .args(["run", "/alpha:review again"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    let request = &mock.requests()[0];
    assert!(!request.to_string().contains("PLUGIN-HOOK-SAYS-HI"));
    assert!(!request.to_string().contains("REVIEW-BODY"));
    assert!(
        !tools(request)
            .iter()
            .any(|t| t.starts_with("mcp__everything"))
    );
    assert!(user_text(request).contains("/alpha:review again"));
    let out = plugin(&env, &["enable", "alpha"]);
    assert_eq!(out.code, Some(0), "{out:?}");

    // A new commit: the marketplace moves, the plugin stays pinned until updated.
    write_file(
        &repo.join("plugins/alpha/commands/review.md"),
        "REVIEW-BODY-V2 of $ARGUMENTS\n",
    );
    let second = commit_all(&repo, "two");
    let out = plugin(&env, &["marketplace", "update", "demo-market"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let installed = env
        .home
        .join("plugins/installed/alpha@demo-market/commands/review.md");
    assert!(std::fs::read_to_string(&installed).unwrap().contains("V1"));
    let out = plugin(&env, &["update", "alpha"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.contains(&format!(
            "updated alpha@demo-market {} -> {}",
            &first[..12],
            &second[..12]
        )),
        "{out:?}"
    );
    assert!(std::fs::read_to_string(&installed).unwrap().contains("V2"));
    assert_clean(&env);

    let out = plugin(&env, &["remove", "alpha"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        !env.home
            .join("plugins/installed/alpha@demo-market")
            .exists()
    );
    let out = plugin(&env, &["list"]);
    assert!(!out.stdout.contains("alpha@"), "{out:?}");
    assert!(out.stdout.contains("beta@demo-market"), "{out:?}");
}

#[test]
fn a_marketplace_an_untrusted_project_declares_installs_and_runs_nothing() {
    let env = Env::untrusted();
    let (repo, _) = marketplace(&env);
    env.write(
        ".claude/settings.json",
        &serde_json::json!({
            "extraKnownMarketplaces": {"demo-market": {"source": {"source": "directory", "path": repo}}},
            "enabledPlugins": {"alpha@demo-market": true},
        })
        .to_string(),
    );
    let mock = Mock::start("responses:\n  - text: \"done\"\n");
    let out = run(env.keel(&mock.base_url()).args(["run", "/alpha:review x"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        !env.home.join("plugins").exists(),
        "nothing was cloned or installed"
    );
    let request = mock.requests()[0].to_string();
    assert!(!request.contains("PLUGIN-HOOK-SAYS-HI"));
    assert!(!request.contains("mcp__everything"));
    assert!(!request.contains("REVIEW-BODY"));

    let out = plugin(&env, &["list"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("no plugin installed"), "{out:?}");
    assert!(
        out.stdout.contains("marketplace demo-market")
            && out.stdout.contains("keel plugin install alpha@demo-market"),
        "the project's offer is shown: {out:?}"
    );
    // Asked to install what the project offers: refused until the workspace is trusted.
    let out = plugin(&env, &["install", "--from-project"]);
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(out.stderr.contains("is not trusted"), "{out:?}");
    assert!(!env.home.join("plugins").exists());

    // Trusted, and the user says yes: the marketplace is added and alpha installed and used.
    let out = run(env.keel_bare().arg("trust"));
    assert_eq!(out.code, Some(0), "{out:?}");
    let out = plugin(&env, &["install", "--from-project"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.contains("added marketplace demo-market")
            && out.stdout.contains("installed alpha@demo-market"),
        "{out:?}"
    );
    let mock = Mock::start("responses:\n  - text: \"done\"\n");
    let out = run(env.keel(&mock.base_url()).args(["run", "/alpha:review x"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    let request = mock.requests()[0].to_string();
    assert!(request.contains("PLUGIN-HOOK-SAYS-HI"), "{request}");
    assert!(request.contains("REVIEW-BODY-V1 of x"), "{request}");
}

#[test]
fn bad_sources_names_and_links_are_refused_naming_them_and_leave_nothing() {
    let env = Env::new();
    // Not a repository.
    let plain = env.outside.join("plain");
    write_file(
        &plain.join(".claude-plugin/marketplace.json"),
        r#"{"name": "x"}"#,
    );
    let out = plugin(&env, &["marketplace", "add", plain.to_str().unwrap()]);
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr
            .contains(&format!("marketplace {}", plain.display()))
            && out.stderr.contains("not a git repository"),
        "{out:?}"
    );
    // A repository that is not a marketplace.
    let other = env.outside.join("other");
    write_file(&other.join("README"), "hi");
    git(&other, &["init", "-q"]);
    commit_all(&other, "one");
    let out = plugin(&env, &["marketplace", "add", other.to_str().unwrap()]);
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains("not a plugin marketplace"), "{out:?}");
    assert_clean(&env);

    let (repo, _) = marketplace(&env);
    // A plugin that links outside its folder, and one whose source leaves the repository.
    let evil = repo.join("plugins/evil");
    write_file(
        &evil.join(".claude-plugin/plugin.json"),
        r#"{"name": "evil"}"#,
    );
    std::os::unix::fs::symlink("/etc/passwd", evil.join("passwd")).unwrap();
    write_file(
        &repo.join(".claude-plugin/marketplace.json"),
        r#"{"name": "demo-market", "plugins": [
            {"name": "evil", "source": "./plugins/evil"},
            {"name": "escape", "source": "../../"}
        ]}"#,
    );
    commit_all(&repo, "evil");
    let out = plugin(&env, &["marketplace", "add", repo.to_str().unwrap()]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let out = plugin(&env, &["install", "evil@demo-market"]);
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains("plugin evil@demo-market")
            && out
                .stderr
                .contains("passwd links outside the plugin's folder"),
        "{out:?}"
    );
    let out = plugin(&env, &["install", "escape"]);
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains("outside the marketplace's repository"),
        "{out:?}"
    );
    let out = plugin(&env, &["install", "nosuch@demo-market"]);
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains("plugin nosuch@demo-market")
            && out
                .stderr
                .contains("listed: evil@demo-market, escape@demo-market"),
        "{out:?}"
    );
    assert!(!env.home.join("plugins/installed/evil@demo-market").exists());
    assert_clean(&env);
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(env.home.join("plugins/installed.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(state["plugins"], serde_json::json!({}));
}
