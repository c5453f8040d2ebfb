//! Claude Code judges keel's plugin marketplaces: the pinned `claude` CLI
//! (`@anthropic-ai/claude-code`, tests/claude/package-lock.json, installed by `.ci/run`) runs
//! `claude plugin validate` on the same marketplace repositories `keel plugin` reads. Where
//! Claude Code accepts a marketplace, keel adds it and installs its plugin; where Claude Code
//! refuses one (a source leaving the repository, a name no plugin id may carry, a manifest
//! that is not JSON), keel refuses to install that plugin too, naming what is wrong.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use support::{Env, commit_all, git, run, write_file};

/// The pinned `claude` binary (`npm ci --prefix crates/front/keel-cli/tests/claude`).
fn claude() -> PathBuf {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/claude/node_modules/.bin/claude");
    assert!(
        bin.exists(),
        "{} is missing: run `npm ci --prefix crates/front/keel-cli/tests/claude` (.ci/run does)",
        bin.display()
    );
    bin
}

/// `claude plugin validate PATH`: whether it passed, and what it printed. Claude Code runs with
/// a home of its own and no traffic beyond the validation.
fn validate(env: &Env, path: &Path) -> (bool, String) {
    let home = env.root().join("claude-home");
    std::fs::create_dir_all(&home).unwrap();
    let out = Command::new(claude())
        .args(["plugin", "validate"])
        .arg(path)
        .env("HOME", &home)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// A marketplace repository `judged` with one plugin `alpha` (a command, an agent, a skill and
/// a hook) under the name and source given; `plugin_json` is alpha's manifest.
fn market(env: &Env, dir: &str, name: &str, source: &str, plugin_json: &str) -> PathBuf {
    let repo = env.outside.join(dir);
    write_file(
        &repo.join(".claude-plugin/marketplace.json"),
        &format!(
            r#"{{"name": "judged", "description": "a marketplace keel's tests build",
                "owner": {{"name": "tests"}}, "plugins": [
                {{"name": "{name}", "source": "{source}", "description": "the alpha plugin"}}
            ]}}"#
        ),
    );
    let alpha = repo.join("plugins/alpha");
    write_file(&alpha.join(".claude-plugin/plugin.json"), plugin_json);
    write_file(
        &alpha.join("commands/review.md"),
        "---\ndescription: review things\n---\nReview $ARGUMENTS\n",
    );
    write_file(
        &alpha.join("agents/helper.md"),
        "---\nname: helper\ndescription: helps with things\ntools: read, grep\n---\nYou help.\n",
    );
    write_file(
        &alpha.join("skills/greet/SKILL.md"),
        "---\nname: greet\ndescription: greets\n---\nSay hello.\n",
    );
    write_file(
        &alpha.join("hooks/hooks.json"),
        r#"{"hooks": {"UserPromptSubmit": [{"hooks": [
            {"type": "command", "command": "echo ${CLAUDE_PLUGIN_ROOT}"}]}]}}"#,
    );
    git(&repo, &["init", "-q"]);
    commit_all(&repo, "market");
    repo
}

const MANIFEST: &str = r#"{"name": "alpha", "version": "1.0.0", "description": "alpha",
    "author": {"name": "tests"}}"#;

fn plugin(env: &Env, args: &[&str]) -> support::Output {
    run(env.keel_bare().arg("plugin").args(args))
}

#[test]
fn a_marketplace_claude_code_accepts_keel_adds_and_installs() {
    let env = Env::new();
    let repo = market(&env, "good", "alpha", "./plugins/alpha", MANIFEST);
    let (ok, said) = validate(&env, &repo);
    assert!(ok, "claude refused the marketplace:\n{said}");
    let (ok, said) = validate(&env, &repo.join("plugins/alpha"));
    assert!(ok, "claude refused the plugin:\n{said}");
    assert!(said.contains("alpha:review"), "{said}");

    let out = plugin(&env, &["marketplace", "add", repo.to_str().unwrap()]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(!out.stdout.contains("skipped"), "{out:?}");
    let out = plugin(&env, &["install", "alpha@judged"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let list: serde_json::Value =
        serde_json::from_str(&plugin(&env, &["list", "--json"]).stdout).unwrap();
    let names: Vec<&str> = list["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["alpha"], "{list}");
}

#[test]
fn what_claude_code_refuses_keel_does_not_install() {
    let env = Env::new();
    // A source that leaves the repository.
    let escape = market(&env, "escape", "alpha", "../../", MANIFEST);
    let (ok, said) = validate(&env, &escape);
    assert!(!ok && said.contains("source"), "{said}");
    let out = plugin(&env, &["marketplace", "add", escape.to_str().unwrap()]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let out = plugin(&env, &["install", "alpha@judged"]);
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains("outside the marketplace's repository"),
        "{out:?}"
    );
    plugin(&env, &["marketplace", "remove", "judged"]);

    // A name no plugin id may carry.
    let badname = market(&env, "badname", "Bad Name!", "./plugins/alpha", MANIFEST);
    let (ok, said) = validate(&env, &badname);
    assert!(!ok && said.contains("name"), "{said}");
    let out = plugin(&env, &["marketplace", "add", badname.to_str().unwrap()]);
    assert!(
        out.stdout.contains("skipped") || out.stderr.contains("skipped"),
        "{out:?}"
    );
    let out = plugin(&env, &["install", "Bad Name!@judged"]);
    assert_ne!(out.code, Some(0), "{out:?}");
    plugin(&env, &["marketplace", "remove", "judged"]);

    // A manifest that is not JSON.
    let broken = market(&env, "broken", "alpha", "./plugins/alpha", "not json");
    let (ok, said) = validate(&env, &broken.join("plugins/alpha"));
    assert!(!ok && said.contains("JSON"), "{said}");
    let out = plugin(&env, &["marketplace", "add", broken.to_str().unwrap()]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let out = plugin(&env, &["install", "alpha@judged"]);
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(out.stderr.contains("plugin.json"), "{out:?}");
    assert!(!env.home.join("plugins/installed/alpha@judged").exists());
}
