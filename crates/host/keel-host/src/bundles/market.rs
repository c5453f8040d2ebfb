//! Marketplaces: a git repository with `.claude-plugin/marketplace.json`, cloned (hardened) under
//! `$KEEL_HOME/plugins/marketplaces/NAME`.

use super::{BundleError, Marketplace, Plugins, valid_name};
use keel_tools::git::Git;
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The largest marketplace.json read (1 MiB).
const MAX_MARKETPLACE_BYTES: u64 = 1024 * 1024;

/// Where a plugin's files come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginSource {
    /// A folder of the marketplace's repository, relative to its root.
    Path(String),
    /// A repository of its own, at a branch, tag or commit when given.
    Git {
        /// What git clones.
        url: String,
        /// `ref` or `sha`, when given.
        reference: Option<String>,
    },
}

/// One plugin a marketplace lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    /// Its name.
    pub name: String,
    /// Where its files are.
    pub source: PluginSource,
    /// One line about it.
    pub description: Option<String>,
    /// Its version, as listed.
    pub version: Option<String>,
}

/// A marketplace.json, read.
#[derive(Debug, Clone)]
pub(super) struct MarketFile {
    pub(super) name: String,
    pub(super) plugins: Vec<Listing>,
    /// Entries that cannot be used, each with why.
    pub(super) problems: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawMarket {
    name: String,
    #[serde(default)]
    plugins: Vec<Value>,
    #[serde(default)]
    metadata: Option<RawMetadata>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawMetadata {
    #[serde(default)]
    plugin_root: Option<String>,
}

/// Read `dir/.claude-plugin/marketplace.json` (beneath `dir`: a link out of it is not read).
pub(super) fn read_market(dir: &Path, source: &str) -> Result<MarketFile, BundleError> {
    let bad = |reason: String| BundleError::Marketplace {
        origin: source.to_owned(),
        reason,
    };
    let path = dir.join(".claude-plugin").join("marketplace.json");
    let reader = keel_tools::beneath::Reader::beneath(dir).map_err(|e| bad(e.reason()))?;
    let text = reader
        .read_text(&path, MAX_MARKETPLACE_BYTES)
        .map_err(|e| {
            if e.is_not_found() {
                bad(
                    "holds no .claude-plugin/marketplace.json: it is not a plugin marketplace"
                        .into(),
                )
            } else {
                bad(format!(".claude-plugin/marketplace.json: {}", e.reason()))
            }
        })?;
    let raw: RawMarket = serde_json::from_str(&text)
        .map_err(|e| bad(format!(".claude-plugin/marketplace.json: {e}")))?;
    if !valid_name(&raw.name) {
        return Err(bad(format!(
            ".claude-plugin/marketplace.json: `name` {:?} is not a marketplace name (letters, digits, `-`, `_`, `.`)",
            raw.name
        )));
    }
    let root = raw.metadata.and_then(|m| m.plugin_root).unwrap_or_default();
    let mut plugins: Vec<Listing> = Vec::new();
    let mut problems = Vec::new();
    for (i, entry) in raw.plugins.iter().enumerate() {
        match listing(entry, &root) {
            Ok(l) if plugins.iter().any(|p| p.name == l.name) => {
                problems.push(format!(
                    "plugin {}: listed twice; the first is kept",
                    l.name
                ));
            }
            Ok(l) => plugins.push(l),
            Err(why) => {
                let name = entry.get("name").and_then(Value::as_str);
                problems.push(match name {
                    Some(n) => format!("plugin {n}: {why}"),
                    None => format!("plugins[{i}]: {why}"),
                });
            }
        }
    }
    Ok(MarketFile {
        name: raw.name,
        plugins,
        problems,
    })
}

/// One `plugins[]` entry.
fn listing(entry: &Value, plugin_root: &str) -> Result<Listing, String> {
    let name = entry
        .get("name")
        .and_then(Value::as_str)
        .ok_or("no `name`")?;
    if !valid_name(name) {
        return Err("`name` is not a plugin name (letters, digits, `-`, `_`, `.`)".into());
    }
    let text = |key: &str| entry.get(key).and_then(Value::as_str).map(str::to_owned);
    let source = match entry.get("source") {
        Some(Value::String(rel)) => {
            let rel = if rel.starts_with("./") || plugin_root.is_empty() {
                rel.clone()
            } else {
                format!("{}/{rel}", plugin_root.trim_end_matches('/'))
            };
            PluginSource::Path(rel)
        }
        Some(Value::Object(o)) => {
            let kind = o.get("source").and_then(Value::as_str).unwrap_or_default();
            let field = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_owned);
            let url = match kind {
                "github" => field("repo").map(|r| github_url(&r)),
                "url" | "git" => field("url"),
                other => return Err(format!("source kind {other:?} is not supported")),
            }
            .ok_or("`source` names no repository")?;
            check_url(&url)?;
            PluginSource::Git {
                url,
                reference: field("sha").or_else(|| field("ref")),
            }
        }
        _ => return Err("no `source`".into()),
    };
    Ok(Listing {
        name: name.to_owned(),
        source,
        description: text("description"),
        version: text("version"),
    })
}

fn github_url(repo: &str) -> String {
    format!("https://github.com/{repo}.git")
}

/// Only the transports a user expects: https, http, ssh, git, file, and `user@host:path`.
fn check_url(url: &str) -> Result<(), String> {
    let scheme_ok = ["https://", "http://", "ssh://", "git://", "file://"]
        .iter()
        .any(|s| url.starts_with(s));
    let scp_like = !url.contains("://")
        && url
            .split_once(':')
            .is_some_and(|(host, _)| host.contains('@'));
    if (scheme_ok || scp_like) && !url.starts_with('-') {
        Ok(())
    } else {
        Err(format!(
            "{url:?} is not a git URL keel clones (https, ssh, git or file)"
        ))
    }
}

/// What git clones for SOURCE: a local directory (must be a git repository), a URL, or
/// GitHub's `owner/repo`.
pub(super) fn resolve_source(source: &str, cwd: &Path) -> Result<String, BundleError> {
    let bad = |reason: String| BundleError::Marketplace {
        origin: source.to_owned(),
        reason,
    };
    let local = cwd.join(source);
    if source.starts_with('/') || source.starts_with('.') || local.is_dir() {
        let dir = local
            .canonicalize()
            .map_err(|e| bad(format!("cannot open it: {e}")))?;
        if !dir.join(".git").exists() {
            return Err(bad(
                "is not a git repository (keel pins plugins to commits; `git init` and commit it first)"
                    .into(),
            ));
        }
        return Ok(dir.to_string_lossy().into_owned());
    }
    if source.contains("://") || source.contains('@') {
        check_url(source).map_err(bad)?;
        return Ok(source.to_owned());
    }
    let parts: Vec<&str> = source.split('/').collect();
    if parts.len() == 2 && parts.iter().all(|p| valid_name(p)) {
        return Ok(github_url(source));
    }
    Err(bad(
        "is neither a directory, a git URL nor GitHub's owner/repo".into(),
    ))
}

/// Run a hardened git in `dir`; its stdout, or what it said on failure.
pub(super) fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Git::new(dir)
        .args(args)
        .std_command()
        .map_err(|e| e.to_string())?
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        let said = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        Err(format!(
            "git {} failed: {said}",
            args.first().unwrap_or(&"")
        ))
    }
}

/// Clone `url` (at `reference` when given) into `dest`, which must not exist; its commit.
pub(super) fn clone(url: &str, reference: Option<&str>, dest: &Path) -> Result<String, String> {
    let parent = dest.parent().unwrap_or(Path::new("."));
    let dest_text = dest.to_string_lossy();
    git(
        parent,
        &[
            "clone",
            "--quiet",
            "--no-recurse-submodules",
            "--",
            url,
            &dest_text,
        ],
    )?;
    if let Some(reference) = reference {
        git(dest, &["checkout", "--quiet", "--detach", reference])?;
    }
    git(dest, &["rev-parse", "HEAD"])
}

/// A staging folder under `$KEEL_HOME/plugins`, removed when dropped unless kept.
pub(super) struct Staging(pub(super) PathBuf);

impl Staging {
    pub(super) fn new(plugins: &Plugins, what: &str) -> Result<Staging, BundleError> {
        std::fs::create_dir_all(plugins.dir()).map_err(BundleError::io(plugins.dir()))?;
        let path = plugins
            .dir()
            .join(format!(".staging-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        Ok(Staging(path))
    }

    /// Move it to `dest` (replacing what is there); nothing is left behind on failure.
    pub(super) fn commit(self, dest: &Path) -> Result<(), BundleError> {
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(BundleError::io(parent))?;
        }
        let old = dest.with_extension(format!("old-{}", std::process::id()));
        let had = dest.exists();
        if had {
            std::fs::rename(dest, &old).map_err(BundleError::io(dest))?;
        }
        if let Err(e) = std::fs::rename(&self.0, dest) {
            if had {
                let _ = std::fs::rename(&old, dest);
            }
            return Err(BundleError::io(dest)(e));
        }
        if had {
            let _ = std::fs::remove_dir_all(&old);
        }
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `keel plugin marketplace add SOURCE`: clone it, read its marketplace.json, record it.
/// Returns its name, its plugins and the entries that cannot be used.
pub fn add_marketplace(
    keel_home: &Path,
    source: &str,
    cwd: &Path,
) -> Result<(String, Vec<Listing>, Vec<String>), BundleError> {
    let plugins = Plugins::new(keel_home);
    let mut state = plugins.load()?;
    let url = resolve_source(source, cwd)?;
    if let Some((name, _)) = state.marketplaces.iter().find(|(_, m)| m.url == url) {
        return Err(BundleError::Marketplace {
            origin: source.to_owned(),
            reason: format!(
                "already added as {name} (`keel plugin marketplace update {name}` fetches it)"
            ),
        });
    }
    let staging = Staging::new(&plugins, "marketplace")?;
    let commit = clone(&url, None, &staging.0).map_err(|reason| BundleError::Marketplace {
        origin: source.to_owned(),
        reason,
    })?;
    let market = read_market(&staging.0, source)?;
    if state.marketplaces.contains_key(&market.name) {
        return Err(BundleError::Marketplace {
            origin: source.to_owned(),
            reason: format!(
                "a marketplace named {} is already added (from {})",
                market.name, state.marketplaces[&market.name].source
            ),
        });
    }
    staging.commit(&plugins.market_dir(&market.name))?;
    state.marketplaces.insert(
        market.name.clone(),
        Marketplace {
            source: source.to_owned(),
            url,
            commit,
        },
    );
    plugins.save(&state)?;
    Ok((market.name, market.plugins, market.problems))
}

/// The plugins marketplace NAME lists now, with the entries that cannot be used.
pub fn listings(keel_home: &Path, name: &str) -> Result<(Vec<Listing>, Vec<String>), BundleError> {
    let plugins = Plugins::new(keel_home);
    let market = read_market(&plugins.market_dir(name), name)?;
    Ok((market.plugins, market.problems))
}

/// `keel plugin marketplace update NAME`: fetch its default branch and move its clone there
/// (installed plugins stay at their pins). Returns the old and new commit.
pub fn update_marketplace(keel_home: &Path, name: &str) -> Result<(String, String), BundleError> {
    let plugins = Plugins::new(keel_home);
    let mut state = plugins.load()?;
    let bad = |reason: String| BundleError::Marketplace {
        origin: name.to_owned(),
        reason,
    };
    let Some(entry) = state.marketplaces.get(name).cloned() else {
        return Err(bad(unknown_market(&state)));
    };
    let dir = plugins.market_dir(name);
    git(&dir, &["fetch", "--quiet", "--", &entry.url, "HEAD"]).map_err(&bad)?;
    git(&dir, &["reset", "--quiet", "--hard", "FETCH_HEAD"]).map_err(&bad)?;
    let commit = git(&dir, &["rev-parse", "HEAD"]).map_err(&bad)?;
    if let Err(e) = read_market(&dir, name) {
        // A broken new commit: back to the one that worked.
        let _ = git(&dir, &["reset", "--quiet", "--hard", &entry.commit]);
        return Err(e);
    }
    let old = entry.commit.clone();
    if let Some(m) = state.marketplaces.get_mut(name) {
        m.commit = commit.clone();
    }
    plugins.save(&state)?;
    Ok((old, commit))
}

/// `keel plugin marketplace remove NAME`: its clone, and the plugins installed from it (their
/// keys are returned).
pub fn remove_marketplace(keel_home: &Path, name: &str) -> Result<Vec<String>, BundleError> {
    let plugins = Plugins::new(keel_home);
    let mut state = plugins.load()?;
    if state.marketplaces.remove(name).is_none() {
        return Err(BundleError::Marketplace {
            origin: name.to_owned(),
            reason: unknown_market(&state),
        });
    }
    let keys: Vec<String> = state
        .plugins
        .values()
        .filter(|p| p.marketplace == name)
        .map(|p| p.key())
        .collect();
    for key in &keys {
        state.plugins.remove(key);
        for switches in state.projects.values_mut() {
            switches.remove(key);
        }
    }
    state.projects.retain(|_, s| !s.is_empty());
    plugins.save(&state)?;
    for key in &keys {
        let _ = std::fs::remove_dir_all(plugins.plugin_dir(key));
    }
    let _ = std::fs::remove_dir_all(plugins.market_dir(name));
    Ok(keys)
}

/// "no such marketplace; added: a, b" (or how to add one).
pub(super) fn unknown_market(state: &super::State) -> String {
    if state.marketplaces.is_empty() {
        "no such marketplace; none is added (`keel plugin marketplace add SOURCE`)".into()
    } else {
        let names: Vec<&str> = state.marketplaces.keys().map(String::as_str).collect();
        format!("no such marketplace; added: {}", names.join(", "))
    }
}
