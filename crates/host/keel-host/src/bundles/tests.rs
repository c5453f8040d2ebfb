#![allow(clippy::unwrap_used)]
use super::market::{PluginSource, read_market, resolve_source};
use super::*;
use pretty_assertions::assert_eq;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn names_are_folder_safe() {
    for good in ["alpha", "a.b-c_d", "A1"] {
        assert!(valid_name(good), "{good}");
    }
    for bad in ["", ".hidden", "a/b", "a b", "..", "x@y", &"n".repeat(65)] {
        assert!(!valid_name(bad), "{bad}");
    }
}

#[test]
fn sources_resolve_to_what_git_clones_and_others_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    assert_eq!(
        resolve_source("anthropics/claude-code", cwd).unwrap(),
        "https://github.com/anthropics/claude-code.git"
    );
    assert_eq!(
        resolve_source("https://example.com/m.git", cwd).unwrap(),
        "https://example.com/m.git"
    );
    assert_eq!(
        resolve_source("git@example.com:me/m.git", cwd).unwrap(),
        "git@example.com:me/m.git"
    );
    std::fs::create_dir_all(cwd.join("repo/.git")).unwrap();
    let local = resolve_source("repo", cwd).unwrap();
    assert!(
        local.ends_with("/repo") && local.starts_with('/'),
        "{local}"
    );
    for (source, said) in [
        ("ext::sh -c touch% /tmp/x", "neither a directory"),
        ("-u://x", "not a git URL"),
        ("a/b/c", "neither a directory"),
        ("./missing", "cannot open it"),
    ] {
        let e = resolve_source(source, cwd).unwrap_err().to_string();
        assert!(e.contains(source) && e.contains(said), "{source}: {e}");
    }
    std::fs::create_dir_all(cwd.join("plain")).unwrap();
    let e = resolve_source("plain", cwd).unwrap_err().to_string();
    assert!(e.contains("not a git repository"), "{e}");
}

#[test]
fn a_marketplace_lists_paths_repositories_and_names_bad_entries() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join(".claude-plugin/marketplace.json"),
        r#"{"name": "m", "metadata": {"pluginRoot": "./plugins"}, "plugins": [
            {"name": "a", "source": "./a", "version": "1"},
            {"name": "b", "source": "b", "description": "under pluginRoot"},
            {"name": "c", "source": {"source": "github", "repo": "o/c", "sha": "abc"}},
            {"name": "d", "source": {"source": "url", "url": "ext::sh"}},
            {"name": "e", "source": {"source": "npm", "package": "e"}},
            {"name": "a", "source": "./again"},
            {"source": "./nameless"}
        ]}"#,
    );
    let market = read_market(dir.path(), "m").unwrap();
    assert_eq!(market.name, "m");
    let sources: Vec<(&str, &PluginSource)> = market
        .plugins
        .iter()
        .map(|l| (l.name.as_str(), &l.source))
        .collect();
    assert_eq!(
        sources,
        vec![
            ("a", &PluginSource::Path("./a".into())),
            ("b", &PluginSource::Path("./plugins/b".into())),
            (
                "c",
                &PluginSource::Git {
                    url: "https://github.com/o/c.git".into(),
                    reference: Some("abc".into())
                }
            ),
        ]
    );
    let problems = market.problems.join("\n");
    for said in [
        "plugin d: \"ext::sh\" is not a git URL",
        "plugin e: source kind \"npm\" is not supported",
        "plugin a: listed twice",
        "plugins[6]: no `name`",
    ] {
        assert!(problems.contains(said), "{said}\n{problems}");
    }
}

#[test]
fn a_marketplace_file_that_is_missing_broken_or_a_link_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let e = read_market(dir.path(), "src").unwrap_err().to_string();
    assert!(
        e.contains("marketplace src") && e.contains("not a plugin marketplace"),
        "{e}"
    );
    write(&dir.path().join(".claude-plugin/marketplace.json"), "{");
    let e = read_market(dir.path(), "src").unwrap_err().to_string();
    assert!(e.contains("marketplace.json"), "{e}");
    let outside = tempfile::tempdir().unwrap();
    write(
        &outside.path().join("m.json"),
        r#"{"name": "x", "plugins": []}"#,
    );
    std::fs::remove_file(dir.path().join(".claude-plugin/marketplace.json")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("m.json"),
        dir.path().join(".claude-plugin/marketplace.json"),
    )
    .unwrap();
    assert!(read_market(dir.path(), "src").is_err());
}

#[test]
fn state_round_trips_and_a_corrupt_file_is_named() {
    let home = tempfile::tempdir().unwrap();
    let plugins = Plugins::new(home.path());
    assert_eq!(plugins.load().unwrap(), State::default());
    let mut state = State::default();
    state.plugins.insert(
        "a@m".into(),
        Installed {
            name: "a".into(),
            marketplace: "m".into(),
            version: None,
            description: None,
            commit: "c".repeat(40),
            enabled: true,
        },
    );
    state
        .projects
        .insert("/w".into(), [("a@m".to_owned(), false)].into());
    plugins.save(&state).unwrap();
    assert_eq!(plugins.load().unwrap(), state);
    let a = &state.plugins["a@m"];
    assert!(!is_on(&state, a, Some(Path::new("/w"))));
    assert!(is_on(&state, a, Some(Path::new("/other"))));
    assert!(is_on(&state, a, None));
    std::fs::write(plugins.state_path(), "[").unwrap();
    let e = plugins.load().unwrap_err().to_string();
    assert!(
        e.contains("installed.json") && e.contains("fix or remove it"),
        "{e}"
    );
    // An agent still starts: no bundles from a corrupt state.
    assert!(enabled(home.path(), home.path()).is_empty());
}

#[test]
fn contributions_are_listed_and_summarised() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(&d.join("commands/review.md"), "x");
    write(&d.join("commands/git/push.md"), "x");
    write(&d.join("agents/helper.md"), "x");
    write(&d.join("skills/greet/SKILL.md"), "x");
    write(&d.join("skills/notaskill/README.md"), "x");
    write(
        &d.join("hooks/hooks.json"),
        r#"{"hooks": {"Stop": [], "PreToolUse": []}}"#,
    );
    write(&d.join(".mcp.json"), r#"{"mcpServers": {"s": {}}}"#);
    let c = Contributes::of(d);
    assert_eq!(c.commands, vec!["git:push", "review"]);
    assert_eq!(c.skills, vec!["greet"]);
    assert_eq!(
        c.summary(),
        "2 commands (git:push, review) · 1 agent (helper) · 1 skill (greet) · 2 hook events (PreToolUse, Stop) · 1 MCP server (s)"
    );
    assert_eq!(Contributes::default().summary(), "nothing");
}

#[test]
fn a_manifest_is_optional_but_a_broken_one_is_named() {
    let dir = tempfile::tempdir().unwrap();
    assert!(read_manifest(dir.path()).unwrap().is_none());
    write(
        &dir.path().join(".claude-plugin/plugin.json"),
        r#"{"name": "../x"}"#,
    );
    assert!(
        read_manifest(dir.path())
            .unwrap_err()
            .contains("not a plugin name")
    );
    write(
        &dir.path().join(".claude-plugin/plugin.json"),
        r#"{"version": "1"}"#,
    );
    assert!(
        read_manifest(dir.path())
            .unwrap_err()
            .contains("not a plugin manifest")
    );
}
