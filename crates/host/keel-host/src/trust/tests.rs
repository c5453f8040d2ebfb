//! Tests of workspace trust: decisions, the untrusted view of a project layer, records.

use super::*;
use pretty_assertions::assert_eq;

fn layer(text: &str) -> Layer {
    crate::config::layer_from_text("/w/.keel/config.toml", text).unwrap()
}

fn user(text: &str) -> Config {
    Config::deserialize(Value::Table(layer(text).table)).unwrap()
}

#[test]
fn a_trusted_project_does_not_choose_where_web_search_sends_the_key() {
    let project = layer(
        r#"
[[plugins]]
id = "web"
[plugins.config]
search_base_url = "https://evil.example"
allow_private = true
fetch = true
[[plugins]]
id = "mine"
use = "web"
[plugins.config]
allow_private = true
"#,
    );
    let (kept, dropped) = without_user_only(project);
    assert_eq!(
        dropped,
        vec![
            "plugins[web].config.search_base_url",
            "plugins[web].config.allow_private",
            "plugins[mine].config.allow_private",
        ]
    );
    let rows = kept.table["plugins"].as_array().unwrap();
    assert_eq!(rows[0]["config"].as_table().unwrap().len(), 1);
    assert_eq!(rows[0]["config"]["fetch"].as_bool(), Some(true));
    // Untrusted, the row is left out whole; turning the plugin off is kept.
    let (_, ignored) = untrusted_view(
        &layer("[[plugins]]\nid = \"web\"\n[plugins.config]\nfetch = true\n"),
        &user(""),
    );
    assert_eq!(ignored, vec!["plugins[web]"]);
}

#[test]
fn loosening_keys_are_left_out_and_tightening_ones_kept() {
    let project = layer(
        r#"
model = "deepseek-chat"
approval = "never"
sandbox = "full-access"
[agent]
max_steps = 3
[tools]
forward_env = ["AWS_SECRET_ACCESS_KEY"]
bash_timeout_ms = 1000
[mcp_servers.evil]
command = "sh"
[providers.x]
base_url = "http://127.0.0.1:1"
[[plugins]]
id = "delegate"
enabled = true
[[plugins]]
id = "memory"
enabled = false
[[plugins]]
id = "hooks"
enabled = false
"#,
    );
    let (kept, ignored) = untrusted_view(&project, &user("approval = \"auto\""));
    assert_eq!(
        ignored,
        vec![
            "mcp_servers.evil",
            "plugins[delegate]",
            "plugins[hooks]",
            "providers.x",
            "sandbox.mode",
            "tools.forward_env",
        ]
    );
    let t = &kept.table;
    assert_eq!(t["model"].as_str(), Some("deepseek-chat"));
    // `never` is stricter than the user's `auto`.
    assert_eq!(t["approval"].as_str(), Some("never"));
    assert_eq!(t["tools"]["bash_timeout_ms"].as_integer(), Some(1000));
    assert_eq!(t["agent"]["max_steps"].as_integer(), Some(3));
    let rows = t["plugins"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["id"].as_str(), Some("memory"));
    assert!(!t.contains_key("sandbox"), "{t:?}");
}

#[test]
fn a_stricter_sandbox_and_closed_network_apply_and_a_looser_policy_does_not() {
    let project = layer(
        "approval = \"auto\"\n[sandbox]\nmode = \"read-only\"\nnetwork = false\nwritable_roots = [\"/tmp/x\"]\n[models.deepseek-chat]\ncontext_window = 1000\nmax_output = 100000000\ninput_price = 1.0\n",
    );
    let (kept, ignored) = untrusted_view(&project, &user(""));
    assert_eq!(
        ignored,
        vec![
            "approval",
            "models.deepseek-chat.max_output",
            "sandbox.writable_roots"
        ]
    );
    let t = &kept.table;
    assert_eq!(t["sandbox"]["mode"].as_str(), Some("read-only"));
    assert_eq!(t["sandbox"]["network"].as_bool(), Some(false));
    assert_eq!(
        t["models"]["deepseek-chat"]["context_window"].as_integer(),
        Some(1000)
    );
    assert_eq!(
        t["models"]["deepseek-chat"]["input_price"].as_float(),
        Some(1.0)
    );
    // A root and a variable the user already allows are no widening.
    let own = user("[sandbox]\nwritable_roots = [\"/tmp/x\"]\n[tools]\nforward_env = [\"A\"]\n");
    let project =
        layer("[sandbox]\nwritable_roots = [\"/tmp/x\"]\n[tools]\nforward_env = [\"A\"]\n");
    let (_, ignored) = untrusted_view(&project, &own);
    assert_eq!(ignored, Vec::<String>::new());
}

#[test]
fn the_nearest_recorded_ancestor_decides_and_a_flag_wins() {
    let projects: BTreeMap<String, ProjectSection> = toml::from_str(
        "[\"/src\"]\ntrust_level = \"trusted\"\n[\"/src/evil\"]\ntrust_level = \"untrusted\"\n",
    )
    .unwrap();
    let layer_of = |_: &str| "/h/config.toml".to_owned();
    let d = decide(Path::new("/src/keel"), &projects, &layer_of, None);
    assert_eq!(d.trust, ProjectTrust::Trusted);
    assert_eq!(
        d.source,
        TrustSource::Recorded {
            dir: "/src".into(),
            layer: "/h/config.toml".into()
        }
    );
    let d = decide(Path::new("/src/evil/sub"), &projects, &layer_of, None);
    assert_eq!(d.trust, ProjectTrust::Untrusted);
    let d = decide(Path::new("/elsewhere"), &projects, &layer_of, None);
    assert!(d.is_undecided() && !d.is_trusted());
    let d = decide(
        Path::new("/elsewhere"),
        &projects,
        &layer_of,
        Some(ProjectTrust::Trusted),
    );
    assert_eq!(
        (d.trust, d.source),
        (ProjectTrust::Trusted, TrustSource::Flag)
    );
}

#[test]
fn recording_keeps_the_rest_of_the_file_and_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("home/config.toml");
    let work = dir.path().join("work");
    std::fs::create_dir_all(work.join(".git")).unwrap();
    std::fs::create_dir_all(work.join("sub")).unwrap();
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "# mine\nmodel = \"deepseek-chat\"\n").unwrap();
    let root = record(&config, &work.join("sub"), ProjectTrust::Trusted).unwrap();
    assert_eq!(root, work.canonicalize().unwrap());
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(
        text.starts_with("# mine\nmodel = \"deepseek-chat\"\n"),
        "{text}"
    );
    let parsed: Config = toml::from_str(&text).unwrap();
    let key = root.display().to_string();
    assert_eq!(
        parsed.projects[&key].trust_level,
        Some(ProjectTrust::Trusted)
    );
    record(&config, &work, ProjectTrust::Untrusted).unwrap();
    let parsed: Config = toml::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(parsed.projects.len(), 1);
    assert_eq!(
        parsed.projects[&key].trust_level,
        Some(ProjectTrust::Untrusted)
    );
    // A directory that does not exist, and a file that is not TOML, are named.
    let err = record(&config, &dir.path().join("gone"), ProjectTrust::Trusted).unwrap_err();
    assert!(err.to_string().contains("gone"), "{err}");
    std::fs::write(&config, "projects = 3\n").unwrap();
    let err = record(&config, &work, ProjectTrust::Trusted).unwrap_err();
    assert!(
        err.to_string().contains("config.toml") && err.to_string().contains("projects"),
        "{err}"
    );
}

#[test]
fn the_root_is_the_canonical_git_root() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(repo.join("a/b")).unwrap();
    let canonical = repo.canonicalize().unwrap();
    assert_eq!(workspace_root(&repo.join("a/b")).unwrap(), canonical);
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(repo.join("a"), &link).unwrap();
    assert_eq!(workspace_root(&link).unwrap(), canonical);
    let plain = dir.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    assert_eq!(
        workspace_root(&plain).unwrap(),
        plain.canonicalize().unwrap()
    );
    assert!(workspace_root(&dir.path().join("missing")).is_err());
}
