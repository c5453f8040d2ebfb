//! `keel plugin …`: Claude Code plugin bundles ([`keel_host::bundles`]).

use super::Ctx;
use crate::cli::{MarketplaceCommand, PluginCommand, PluginSwitch};
use anyhow::Result;
use keel_host::bundles::{self, Contributes, Plugins, short};
use keel_host::commands::{CommandSet, ProblemKind};
use serde_json::json;
use std::io::Write;
use std::process::ExitCode;

/// Run `keel plugin …`.
pub fn run(ctx: &Ctx, cmd: PluginCommand) -> Result<ExitCode> {
    let home = &ctx.home;
    let mut out = std::io::stdout().lock();
    match cmd {
        PluginCommand::Marketplace(cmd) => return marketplace(ctx, cmd),
        PluginCommand::Install(args) => {
            match args.plugin {
                Some(spec) => install(ctx, &spec, &mut out)?,
                None => from_project(ctx, &mut out)?,
            }
            clashes(ctx, &mut out)?;
        }
        PluginCommand::List(args) => return list(ctx, args.json),
        PluginCommand::Enable(s) => switch(ctx, &s, true, &mut out)?,
        PluginCommand::Disable(s) => switch(ctx, &s, false, &mut out)?,
        PluginCommand::Update(args) => {
            let moved = bundles::update(home, args.plugin.as_deref())?;
            if moved.is_empty() {
                writeln!(out, "every plugin is at its marketplace's commit")?;
            }
            for (key, old, new) in moved {
                writeln!(out, "updated {key} {} -> {}", short(&old), short(&new))?;
            }
        }
        PluginCommand::Remove(spec) => {
            let key = bundles::remove(home, &spec.plugin)?;
            writeln!(out, "removed {key}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Install one plugin and say what it gives.
fn install(ctx: &Ctx, spec: &str, out: &mut impl Write) -> Result<()> {
    let p = bundles::install(&ctx.home, spec)?;
    let dir = Plugins::new(&ctx.home).plugin_dir(&p.key());
    let version = p
        .version
        .as_deref()
        .map(|v| format!(" {v}"))
        .unwrap_or_default();
    writeln!(
        out,
        "installed {}{version} at {}: {}",
        p.key(),
        short(&p.commit),
        Contributes::of(&dir).summary()
    )?;
    Ok(())
}

/// `keel plugin install --from-project`: the user's yes to what a trusted workspace offers.
fn from_project(ctx: &Ctx, out: &mut impl Write) -> Result<()> {
    let host = ctx.host()?;
    let trust = &host.config().trust;
    if !trust.is_trusted() {
        anyhow::bail!(
            "workspace {} is not trusted: what its .claude/settings.json offers is only shown \
             (keel plugin list); trust it first (keel trust), or add what you want yourself",
            trust.root.display()
        );
    }
    let offered = bundles::offered(&ctx.cwd);
    if offered.marketplaces.is_empty() && offered.plugins.is_empty() {
        writeln!(
            out,
            "this workspace's .claude/settings.json offers no plugins"
        )?;
        return Ok(());
    }
    let state = Plugins::new(&ctx.home).load()?;
    for (name, source) in &offered.marketplaces {
        if state.marketplaces.contains_key(name) {
            continue;
        }
        let (added, listed, _) = bundles::add_marketplace(&ctx.home, source, &trust.root)?;
        writeln!(
            out,
            "added marketplace {added} from {source}: {} plugins",
            listed.len()
        )?;
    }
    for key in &offered.plugins {
        if state.plugins.contains_key(key) {
            writeln!(out, "{key} is installed already")?;
            continue;
        }
        install(ctx, key, out)?;
    }
    Ok(())
}

/// `keel plugin enable|disable PLUGIN [--project]`.
fn switch(ctx: &Ctx, s: &PluginSwitch, on: bool, out: &mut impl Write) -> Result<()> {
    let word = if on { "enabled" } else { "disabled" };
    if s.project {
        let root = keel_host::trust::workspace_root(&ctx.cwd)?;
        let key = bundles::set_enabled(&ctx.home, &s.plugin, on, Some(&root))?;
        writeln!(out, "{word} {key} in {}", root.display())?;
    } else {
        let key = bundles::set_enabled(&ctx.home, &s.plugin, on, None)?;
        writeln!(out, "{word} {key}")?;
    }
    if on {
        clashes(ctx, out)?;
    }
    Ok(())
}

/// Say which plugin commands share a name (each is kept under its namespaced name).
fn clashes(ctx: &Ctx, out: &mut impl Write) -> Result<()> {
    let set = CommandSet::load_for(&ctx.cwd, Some(&ctx.home));
    for p in set.problems() {
        if let ProblemKind::Namespaced { .. } = &p.kind {
            writeln!(
                out,
                "note: /{}: {}",
                p.name.as_deref().unwrap_or_default(),
                p.kind
            )?;
        }
    }
    Ok(())
}

fn marketplace(ctx: &Ctx, cmd: MarketplaceCommand) -> Result<ExitCode> {
    let home = &ctx.home;
    let mut out = std::io::stdout().lock();
    match cmd {
        MarketplaceCommand::Add(args) => {
            let (name, listed, problems) = bundles::add_marketplace(home, &args.source, &ctx.cwd)?;
            let names: Vec<&str> = listed.iter().map(|l| l.name.as_str()).collect();
            writeln!(
                out,
                "added marketplace {name} from {}: {} plugin{} ({})",
                args.source,
                names.len(),
                if names.len() == 1 { "" } else { "s" },
                names.join(", ")
            )?;
            for p in problems {
                writeln!(out, "skipped {p}")?;
            }
        }
        MarketplaceCommand::List => {
            let state = Plugins::new(home).load()?;
            if state.marketplaces.is_empty() {
                writeln!(
                    out,
                    "no marketplace added (keel plugin marketplace add SOURCE adds one)"
                )?;
            }
            for (name, m) in &state.marketplaces {
                let listed = match bundles::listings(home, name) {
                    Ok((l, _)) => l
                        .iter()
                        .map(|l| l.name.clone())
                        .collect::<Vec<_>>()
                        .join(", "),
                    Err(e) => format!("unreadable: {e}"),
                };
                writeln!(
                    out,
                    "{name}  {}  {}  [{listed}]",
                    short(&m.commit),
                    m.source
                )?;
            }
        }
        MarketplaceCommand::Update(args) => {
            let names: Vec<String> = match args.name {
                Some(n) => vec![n],
                None => Plugins::new(home)
                    .load()?
                    .marketplaces
                    .into_keys()
                    .collect(),
            };
            for name in names {
                let (old, new) = bundles::update_marketplace(home, &name)?;
                if old == new {
                    writeln!(out, "{name} is up to date at {}", short(&new))?;
                } else {
                    writeln!(
                        out,
                        "updated marketplace {name} {} -> {}",
                        short(&old),
                        short(&new)
                    )?;
                }
            }
        }
        MarketplaceCommand::Remove(args) => {
            let Some(name) = args.name else {
                anyhow::bail!("keel plugin marketplace remove: name the marketplace");
            };
            let removed = bundles::remove_marketplace(home, &name)?;
            writeln!(out, "removed marketplace {name}")?;
            if !removed.is_empty() {
                writeln!(
                    out,
                    "and the plugins installed from it: {}",
                    removed.join(", ")
                )?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn list(ctx: &Ctx, as_json: bool) -> Result<ExitCode> {
    let plugins = Plugins::new(&ctx.home);
    let state = plugins.load()?;
    let root = keel_host::trust::workspace_root(&ctx.cwd).ok();
    let offered = bundles::offered(&ctx.cwd);
    let mut rows = Vec::new();
    for p in state.plugins.values() {
        let dir = plugins.plugin_dir(&p.key());
        let problem = if !dir.is_dir() {
            Some(format!(
                "its folder {} is missing: remove and install it again",
                dir.display()
            ))
        } else {
            bundles::read_manifest(&dir).err()
        };
        let project_switch = root
            .as_ref()
            .and_then(|r| state.projects.get(&r.to_string_lossy().into_owned()))
            .and_then(|s| s.get(&p.key()))
            .is_some();
        rows.push(json!({
            "plugin": p.key(),
            "name": p.name,
            "marketplace": p.marketplace,
            "version": p.version,
            "description": p.description,
            "commit": p.commit,
            "enabled": bundles::is_on(&state, p, root.as_deref()),
            "projectSwitch": project_switch,
            "contributes": Contributes::of(&dir),
            "problem": problem,
        }));
    }
    let mut out = std::io::stdout().lock();
    if as_json {
        let doc = json!({
            "plugins": rows,
            "offered": {
                "marketplaces": offered.marketplaces.iter()
                    .map(|(n, s)| json!({"name": n, "source": s})).collect::<Vec<_>>(),
                "plugins": offered.plugins,
            },
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        writeln!(
            out,
            "no plugin installed (keel plugin marketplace add SOURCE, then keel plugin install NAME@MARKETPLACE)"
        )?;
    }
    for (row, p) in rows.iter().zip(state.plugins.values()) {
        let on = if row["enabled"] == true { "on" } else { "off" };
        let here = if row["projectSwitch"] == true {
            " (this workspace)"
        } else {
            ""
        };
        let version = p.version.as_deref().unwrap_or("-");
        writeln!(
            out,
            "{}  {version}  {}  {on}{here}",
            p.key(),
            short(&p.commit)
        )?;
        if let Some(d) = &p.description {
            writeln!(out, "    {d}")?;
        }
        let dir = plugins.plugin_dir(&p.key());
        writeln!(out, "    gives: {}", Contributes::of(&dir).summary())?;
        if let Some(problem) = row["problem"].as_str() {
            writeln!(out, "    problem: {problem} (skipped)")?;
        }
    }
    if !offered.marketplaces.is_empty() || !offered.plugins.is_empty() {
        writeln!(
            out,
            "\nthis workspace's .claude/settings.json offers (nothing of it is installed or run by keel on its word):"
        )?;
        for (name, source) in &offered.marketplaces {
            let added = state.marketplaces.contains_key(name);
            let how = if added {
                "added".into()
            } else {
                format!("keel plugin marketplace add {source}")
            };
            writeln!(out, "    marketplace {name} ({source}): {how}")?;
        }
        for key in &offered.plugins {
            let how = if state.plugins.contains_key(key) {
                "installed".into()
            } else {
                format!("keel plugin install {key}")
            };
            writeln!(out, "    plugin {key}: {how}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
