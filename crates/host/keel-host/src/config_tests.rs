//! Configuration tests: layering, origins, errors naming the layer, and the untrusted view of
//! a project's layer.

use super::*;

fn sources(home: &Path, project: &Path) -> Sources {
    Sources {
        home: home.to_path_buf(),
        project: project.to_path_buf(),
        ..Sources::default()
    }
}

#[test]
fn a_models_prices_come_from_the_list_with_the_configuration_over_it() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let mut s = sources(home.path(), project.path());
    s.overrides = vec![
        "models.deepseek-chat.output_price=0.5".into(),
        "models.my-model.input_price=1".into(),
        "models.my-model.cached_input_price=0.1".into(),
    ];
    let c = load(&s, &crate::plugins::builtin()).unwrap().config;
    let chat = c.price("deepseek-chat").unwrap();
    assert_eq!(
        (chat.input, chat.cached_input, chat.output),
        (0.28, 0.028, 0.5)
    );
    // Two of three prices is no price.
    assert_eq!(c.price("my-model"), None);
    assert_eq!(c.price("deepseek-v4-flash"), None);
}

#[test]
fn layers_merge_with_origins_and_plugin_rows_replace_config_by_id() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "model = \"deepseek-chat\"\n[[plugins]]\nid = \"provenance\"\nenabled = true\n[plugins.config]\nmode = \"journal\"\nextra = 1\n",
    )
    .unwrap();
    std::fs::create_dir_all(project.path().join(".keel")).unwrap();
    std::fs::write(
        project.path().join(".keel/config.toml"),
        "[[plugins]]\nid = \"provenance\"\n[plugins.config]\nmode = \"memory\"\n",
    )
    .unwrap();
    let mut s = sources(home.path(), project.path());
    s.overrides = vec!["agent.max_steps=7".into(), "sandbox=read-only".into()];
    s.trust = Some(ProjectTrust::Trusted);
    let loaded = load(&s, &crate::plugins::builtin()).unwrap();
    assert_eq!(loaded.config.model.as_deref(), Some("deepseek-chat"));
    assert_eq!(loaded.config.agent.max_steps, Some(7));
    assert_eq!(loaded.config.sandbox.mode, Some(SandboxMode::ReadOnly));
    let row = loaded
        .config
        .plugins
        .iter()
        .find(|r| r.id == "provenance")
        .unwrap();
    assert_eq!(row.enabled, Some(true));
    let cfg = row.config.as_ref().unwrap();
    assert_eq!(cfg.get("mode").and_then(Value::as_str), Some("memory"));
    assert!(
        cfg.get("extra").is_none(),
        "a later layer replaces the whole row config"
    );
    let dump = dump(&loaded);
    assert!(dump.contains("model = \"deepseek-chat\"  # "), "{dump}");
    assert!(
        dump.contains("agent.max_steps = 7  # -c agent.max_steps=7"),
        "{dump}"
    );
    assert!(
        dump.contains("provider = \"deepseek\"  # defaults"),
        "{dump}"
    );
    assert!(dump.contains(".keel/config.toml"), "{dump}");
}

#[test]
fn an_untrusted_project_layer_only_tightens_and_the_rest_is_listed() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(project.path().join(".keel")).unwrap();
    std::fs::write(
        project.path().join(".keel/config.toml"),
        "approval = \"never\"\n[sandbox]\nmode = \"full-access\"\nnetwork = false\n[agent]\nmax_steps = 9\n[mcp_servers.evil]\ncommand = \"sh\"\n",
    )
    .unwrap();
    let s = sources(home.path(), project.path());
    let loaded = load(&s, &crate::plugins::builtin()).unwrap();
    assert!(loaded.trust.is_undecided() && !loaded.trust.is_trusted());
    assert_eq!(
        loaded.trust.root,
        project.path().canonicalize().unwrap(),
        "the workspace is the root when there is no git root"
    );
    let c = &loaded.config;
    assert_eq!(c.sandbox.mode, Some(SandboxMode::WorkspaceWrite));
    assert_eq!(c.sandbox.network, Some(false));
    assert_eq!(c.approval, Some(ApprovalPolicy::Deny), "stricter than ask");
    assert_eq!(c.agent.max_steps, Some(9));
    assert!(c.mcp_servers.is_empty());
    assert_eq!(loaded.ignored.len(), 1);
    assert_eq!(
        loaded.ignored[0].what,
        vec!["mcp_servers.evil", "sandbox.mode"]
    );
    assert!(loaded.ignored[0].file.ends_with(".keel/config.toml"));

    // Recorded as trusted in the user's file: the whole layer applies.
    let root = loaded.trust.root.display().to_string();
    std::fs::write(
        home.path().join("config.toml"),
        format!("[projects.{root:?}]\ntrust_level = \"trusted\"\n"),
    )
    .unwrap();
    let loaded = load(&s, &crate::plugins::builtin()).unwrap();
    assert!(loaded.trust.is_trusted(), "{:?}", loaded.trust);
    assert_eq!(loaded.config.sandbox.mode, Some(SandboxMode::FullAccess));
    assert!(loaded.config.mcp_servers.contains_key("evil"));
    assert!(loaded.ignored.is_empty());
    assert!(dump(&loaded).contains("trust_level = \"trusted\""));

    // The project may not decide for itself.
    std::fs::write(
        project.path().join(".keel/config.toml"),
        format!("[projects.{root:?}]\ntrust_level = \"trusted\"\n"),
    )
    .unwrap();
    let err = load(&s, &crate::plugins::builtin())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(".keel/config.toml") && err.contains("projects"),
        "{err}"
    );

    // A malformed table or a relative directory names the user's file.
    std::fs::remove_file(project.path().join(".keel/config.toml")).unwrap();
    for bad in [
        "[projects.\"/x\"]\ntrust_level = \"yes\"\n",
        "[projects.\"rel/dir\"]\ntrust_level = \"trusted\"\n",
        "projects = 1\n",
        "[projects.\"/x\"]\ntrust = \"trusted\"\n",
    ] {
        std::fs::write(home.path().join("config.toml"), bad).unwrap();
        let err = load(&s, &crate::plugins::builtin())
            .unwrap_err()
            .to_string();
        assert!(err.contains("config.toml"), "{bad}: {err}");
    }
}

#[test]
fn unknown_keys_and_bad_toml_name_the_file() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), "[agent]\nmax_stepz = 3\n").unwrap();
    let err = format!(
        "{:#}",
        load(
            &sources(home.path(), project.path()),
            &crate::plugins::builtin()
        )
        .unwrap_err()
    );
    assert!(
        err.contains("config.toml") && err.contains("max_stepz"),
        "{err}"
    );
    std::fs::write(home.path().join("config.toml"), "model = \n").unwrap();
    let err = format!(
        "{:#}",
        load(
            &sources(home.path(), project.path()),
            &crate::plugins::builtin()
        )
        .unwrap_err()
    );
    assert!(err.contains("config.toml"), "{err}");
    let mut s = sources(tempfile::tempdir().unwrap().path(), project.path());
    s.profile = Some("nope".into());
    let err = format!("{:#}", load(&s, &crate::plugins::builtin()).unwrap_err());
    assert!(err.contains("profile \"nope\" not found"), "{err}");
}

#[test]
fn a_project_config_linked_out_of_the_workspace_or_a_fifo_is_never_read() {
    let home = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("ws");
    std::fs::create_dir_all(project.join(".keel")).unwrap();
    std::fs::write(tmp.path().join("outside.toml"), "model = \"MARKER\"\n").unwrap();
    std::os::unix::fs::symlink("../../outside.toml", project.join(".keel/config.toml")).unwrap();
    let err = load(&sources(home.path(), &project), &crate::plugins::builtin()).unwrap_err();
    let said = err.to_string();
    assert!(matches!(err, ConfigError::NotRead { .. }), "{said}");
    assert!(said.contains(".keel/config.toml") && said.contains("outside the workspace"));
    assert!(!said.contains("MARKER"), "{said}");

    std::fs::remove_file(project.join(".keel/config.toml")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(project.join(".keel/config.toml"))
        .status()
        .unwrap();
    assert!(made.success());
    let err = load(&sources(home.path(), &project), &crate::plugins::builtin()).unwrap_err();
    assert!(err.to_string().contains("a FIFO"), "{err}");

    // The user's own file may be a link (dotfiles), but must be a regular file.
    std::fs::remove_file(project.join(".keel/config.toml")).unwrap();
    std::os::unix::fs::symlink(
        tmp.path().join("outside.toml"),
        home.path().join("config.toml"),
    )
    .unwrap();
    let loaded = load(&sources(home.path(), &project), &crate::plugins::builtin()).unwrap();
    assert_eq!(loaded.config.model.as_deref(), Some("MARKER"));
}

#[test]
fn a_workspaces_switches_turn_rows_and_servers_on_or_off_there_alone_under_flags() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let root = project.path().canonicalize().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[mcp_servers.docs]\ncommand = \"docs-server\"\n",
    )
    .unwrap();
    let config = home.path().join("config.toml");
    // Recorded as the plugins page does; a switch naming nothing is kept but applies to nothing.
    for (kind, name, on) in [
        (crate::switches::SwitchKind::Plugin, "provenance", true),
        (crate::switches::SwitchKind::Plugin, "web", false),
        (crate::switches::SwitchKind::Plugin, "no-such-row", true),
        (crate::switches::SwitchKind::McpServer, "docs", false),
        (
            crate::switches::SwitchKind::McpServer,
            "from-mcp-json",
            false,
        ),
    ] {
        let recorded = crate::switches::record(&config, project.path(), kind, name, on).unwrap();
        assert_eq!(recorded, root);
    }
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.starts_with("[mcp_servers.docs]"), "{text}");
    let enabled = |loaded: &Loaded, id: &str| {
        loaded
            .config
            .plugins
            .iter()
            .find(|r| r.id == id)
            .and_then(|r| r.enabled)
    };
    let loaded = load(&sources(home.path(), &root), &crate::plugins::builtin()).unwrap();
    assert_eq!(enabled(&loaded, "provenance"), Some(true));
    assert_eq!(enabled(&loaded, "web"), Some(false));
    assert!(!loaded.config.plugins.iter().any(|r| r.id == "no-such-row"));
    assert_eq!(loaded.config.mcp_servers["docs"].enabled, Some(false));
    assert!(!loaded.config.mcp_servers.contains_key("from-mcp-json"));
    let layer = crate::switches::layer_name(&config, &root);
    assert_eq!(loaded.origin.get("plugins[provenance]"), Some(&layer));
    // Another workspace keeps the defaults.
    let elsewhere = load(
        &sources(home.path(), other.path()),
        &crate::plugins::builtin(),
    )
    .unwrap();
    assert_eq!(enabled(&elsewhere, "provenance"), Some(false));
    assert_eq!(elsewhere.config.mcp_servers["docs"].enabled, None);
    // `-c` still wins.
    let mut s = sources(home.path(), &root);
    s.overrides = vec!["mcp_servers.docs.enabled=true".into()];
    let flagged = load(&s, &crate::plugins::builtin()).unwrap();
    assert_eq!(flagged.config.mcp_servers["docs"].enabled, Some(true));
}
