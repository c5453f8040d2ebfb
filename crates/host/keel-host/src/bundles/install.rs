//! Installing, updating, switching and removing plugins.

use super::market::{PluginSource, Staging, clone, read_market, unknown_market};
use super::{BundleError, Installed, Listing, Plugins, State, read_manifest};
use std::path::Path;

/// The most a plugin's folder may hold: 100 MiB in 20,000 files.
const MAX_PLUGIN_BYTES: u64 = 100 * 1024 * 1024;
const MAX_PLUGIN_FILES: usize = 20_000;
/// The deepest folder copied.
const MAX_DEPTH: usize = 32;

fn plugin_error(name: &str, reason: impl Into<String>) -> BundleError {
    BundleError::Plugin {
        name: name.to_owned(),
        reason: reason.into(),
    }
}

/// The marketplace and listing `spec` (`NAME@MARKETPLACE`, or a `NAME` one marketplace lists).
fn find_listing(
    plugins: &Plugins,
    state: &State,
    spec: &str,
) -> Result<(String, Listing), BundleError> {
    let (name, market) = match spec.split_once('@') {
        Some((n, m)) => (n, Some(m)),
        None => (spec, None),
    };
    let markets: Vec<&String> = match market {
        Some(m) => match state.marketplaces.get_key_value(m) {
            Some((k, _)) => vec![k],
            None => return Err(plugin_error(spec, unknown_market(state))),
        },
        None => state.marketplaces.keys().collect(),
    };
    let mut found = Vec::new();
    let mut lists = Vec::new();
    for m in markets {
        let market = read_market(&plugins.market_dir(m), m)?;
        lists.extend(market.plugins.iter().map(|l| format!("{}@{m}", l.name)));
        if let Some(l) = market.plugins.into_iter().find(|l| l.name == name) {
            found.push((m.clone(), l));
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 if lists.is_empty() => Err(plugin_error(
            spec,
            "no marketplace lists it (`keel plugin marketplace add SOURCE` first)",
        )),
        0 => Err(plugin_error(
            spec,
            format!("no marketplace lists it; listed: {}", lists.join(", ")),
        )),
        _ => {
            let keys: Vec<String> = found.iter().map(|(m, _)| format!("{name}@{m}")).collect();
            Err(plugin_error(
                spec,
                format!(
                    "listed by more than one marketplace: say which ({})",
                    keys.join(", ")
                ),
            ))
        }
    }
}

/// The key of the installed plugin `spec` names (`NAME@MARKETPLACE`, or a unique `NAME`).
fn find_installed(state: &State, spec: &str) -> Result<String, BundleError> {
    if state.plugins.contains_key(spec) {
        return Ok(spec.to_owned());
    }
    let keys: Vec<&String> = state
        .plugins
        .iter()
        .filter(|(_, p)| p.name == spec)
        .map(|(k, _)| k)
        .collect();
    match keys.as_slice() {
        [one] => Ok((*one).clone()),
        [] if state.plugins.is_empty() => Err(plugin_error(spec, "not installed; none is")),
        [] => {
            let all: Vec<&str> = state.plugins.keys().map(String::as_str).collect();
            Err(plugin_error(
                spec,
                format!("not installed; installed: {}", all.join(", ")),
            ))
        }
        many => {
            let all: Vec<&str> = many.iter().map(|k| k.as_str()).collect();
            Err(plugin_error(
                spec,
                format!("more than one is installed: say which ({})", all.join(", ")),
            ))
        }
    }
}

/// Copy the plugin of `listing` into a staging folder; the staging folder and the commit.
fn stage(
    plugins: &Plugins,
    state: &State,
    market: &str,
    listing: &Listing,
) -> Result<(Staging, String, Installed), BundleError> {
    let key = format!("{}@{market}", listing.name);
    let fail = |reason: String| plugin_error(&key, reason);
    let market_dir = plugins.market_dir(market);
    let mut fetched = None;
    let (src, commit) = match &listing.source {
        PluginSource::Path(rel) => {
            let root = market_dir.canonicalize().map_err(|e| fail(e.to_string()))?;
            let src = root
                .join(rel)
                .canonicalize()
                .map_err(|e| fail(format!("its source {rel}: {e}")))?;
            if !src.starts_with(&root) {
                return Err(fail(format!(
                    "its source {rel} is outside the marketplace's repository"
                )));
            }
            let commit = state
                .marketplaces
                .get(market)
                .map(|m| m.commit.clone())
                .unwrap_or_default();
            (src, commit)
        }
        PluginSource::Git { url, reference } => {
            let staging = Staging::new(plugins, "source")?;
            let commit = clone(url, reference.as_deref(), &staging.0).map_err(&fail)?;
            let src = staging.0.clone();
            fetched = Some(staging);
            (src, commit)
        }
    };
    if !src.is_dir() {
        return Err(fail(format!(
            "its source {} is not a folder",
            src.display()
        )));
    }
    let staging = Staging::new(plugins, "plugin")?;
    let mut budget = (MAX_PLUGIN_BYTES, MAX_PLUGIN_FILES);
    copy_tree(&src, &src, &staging.0, 0, &mut budget).map_err(fail)?;
    drop(fetched);
    let manifest = read_manifest(&staging.0).map_err(&fail)?;
    let installed = Installed {
        name: listing.name.clone(),
        marketplace: market.to_owned(),
        version: manifest
            .as_ref()
            .and_then(|m| m.version.clone())
            .or_else(|| listing.version.clone()),
        description: manifest
            .and_then(|m| m.description)
            .or_else(|| listing.description.clone()),
        commit,
        enabled: true,
    };
    Ok((staging, installed.commit.clone(), installed))
}

/// Copy `dir` (below `root`) into `dest`: regular files and folders; a link is replaced by
/// what it points to when that is inside `root`, and refused otherwise; `.git` is left out.
fn copy_tree(
    root: &Path,
    dir: &Path,
    dest: &Path,
    depth: usize,
    budget: &mut (u64, usize),
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("{} is nested too deep", dir.display()));
    }
    std::fs::create_dir_all(dest).map_err(|e| format!("{}: {e}", dest.display()))?;
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        let name = entry.file_name();
        if name == ".git" {
            continue;
        }
        let path = entry.path();
        let rel = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .display()
            .to_string();
        let to = dest.join(&name);
        let meta = std::fs::symlink_metadata(&path).map_err(|e| format!("{rel}: {e}"))?;
        let (from, meta) = if meta.file_type().is_symlink() {
            let target = path
                .canonicalize()
                .map_err(|e| format!("{rel} is a link that leads nowhere ({e})"))?;
            if !target.starts_with(root) {
                return Err(format!(
                    "{rel} links outside the plugin's folder (to {}): refused",
                    target.display()
                ));
            }
            let meta = std::fs::metadata(&target).map_err(|e| format!("{rel}: {e}"))?;
            (target, meta)
        } else {
            (path.clone(), meta)
        };
        if meta.is_dir() {
            copy_tree(root, &from, &to, depth + 1, budget)?;
        } else if meta.is_file() {
            budget.1 = budget.1.checked_sub(1).ok_or("it holds too many files")?;
            budget.0 = budget
                .0
                .checked_sub(meta.len())
                .ok_or("it is larger than 100 MiB")?;
            std::fs::copy(&from, &to).map_err(|e| format!("{rel}: {e}"))?;
        }
        // FIFOs, sockets and devices are not a plugin's files: left out.
    }
    Ok(())
}

/// `keel plugin install SPEC`: copy the plugin at its marketplace's commit and turn it on.
pub fn install(keel_home: &Path, spec: &str) -> Result<Installed, BundleError> {
    let plugins = Plugins::new(keel_home);
    let mut state = plugins.load()?;
    let (market, listing) = find_listing(&plugins, &state, spec)?;
    let key = format!("{}@{market}", listing.name);
    if let Some(p) = state.plugins.get(&key) {
        return Err(plugin_error(
            &key,
            format!(
                "already installed at {} (`keel plugin update {key}` moves it to the marketplace's commit)",
                short(&p.commit)
            ),
        ));
    }
    let (staging, _, installed) = stage(&plugins, &state, &market, &listing)?;
    staging.commit(&plugins.plugin_dir(&key))?;
    state.plugins.insert(key, installed.clone());
    plugins.save(&state)?;
    Ok(installed)
}

/// One plugin moved by [`update`]: its key, the commit it was at and the one it is at now.
pub type Moved = (String, String, String);

/// `keel plugin update [SPEC]`: fetch the marketplaces, then move each plugin (or the one
/// SPEC names) to its marketplace's commit. Plugins already there are left as they are.
pub fn update(keel_home: &Path, spec: Option<&str>) -> Result<Vec<Moved>, BundleError> {
    let plugins = Plugins::new(keel_home);
    let state = plugins.load()?;
    let keys: Vec<String> = match spec {
        Some(spec) => vec![find_installed(&state, spec)?],
        None => state.plugins.keys().cloned().collect(),
    };
    let mut markets: Vec<String> = keys
        .iter()
        .filter_map(|k| state.plugins.get(k).map(|p| p.marketplace.clone()))
        .collect();
    markets.dedup();
    for m in &markets {
        super::update_marketplace(keel_home, m)?;
    }
    let mut state = plugins.load()?;
    let mut moved = Vec::new();
    for key in keys {
        let Some(old) = state.plugins.get(&key).cloned() else {
            continue;
        };
        let (market, listing) = find_listing(&plugins, &state, &key)?;
        let (staging, commit, mut installed) = stage(&plugins, &state, &market, &listing)?;
        if commit == old.commit {
            continue;
        }
        staging.commit(&plugins.plugin_dir(&key))?;
        installed.enabled = old.enabled;
        state.plugins.insert(key.clone(), installed);
        plugins.save(&state)?;
        moved.push((key, old.commit, commit));
    }
    Ok(moved)
}

/// `keel plugin remove SPEC`: its folder and its switches. Returns its key.
pub fn remove(keel_home: &Path, spec: &str) -> Result<String, BundleError> {
    let plugins = Plugins::new(keel_home);
    let mut state = plugins.load()?;
    let key = find_installed(&state, spec)?;
    state.plugins.remove(&key);
    for switches in state.projects.values_mut() {
        switches.remove(&key);
    }
    state.projects.retain(|_, s| !s.is_empty());
    plugins.save(&state)?;
    let dir = plugins.plugin_dir(&key);
    std::fs::remove_dir_all(&dir)
        .or_else(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Ok(())
            } else {
                Err(e)
            }
        })
        .map_err(BundleError::io(&dir))?;
    Ok(key)
}

/// `keel plugin enable|disable SPEC [--project]`: on or off everywhere, or for the workspace
/// whose root is `project`. Returns its key.
pub fn set_enabled(
    keel_home: &Path,
    spec: &str,
    on: bool,
    project: Option<&Path>,
) -> Result<String, BundleError> {
    let plugins = Plugins::new(keel_home);
    let mut state = plugins.load()?;
    let key = find_installed(&state, spec)?;
    match project {
        Some(root) => {
            state
                .projects
                .entry(root.to_string_lossy().into_owned())
                .or_default()
                .insert(key.clone(), on);
        }
        None => {
            if let Some(p) = state.plugins.get_mut(&key) {
                p.enabled = on;
            }
        }
    }
    plugins.save(&state)?;
    Ok(key)
}

/// The first 12 characters of a commit.
pub fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}
