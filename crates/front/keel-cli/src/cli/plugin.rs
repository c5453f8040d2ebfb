//! `keel plugin …`: Claude Code plugin bundles and their marketplaces.

use clap::{Args, Subcommand};

/// `keel plugin SUBCOMMAND`.
#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Marketplaces: git repositories holding `.claude-plugin/marketplace.json`.
    #[command(subcommand)]
    Marketplace(MarketplaceCommand),
    /// Install a plugin a marketplace lists, pinned to the marketplace's current commit, and
    /// turn it on; or, with --from-project, what this trusted workspace's
    /// `.claude/settings.json` offers.
    Install(InstallArgs),
    /// The installed plugins: pin, on or off here, and what each gives an agent; then what
    /// this workspace's `.claude/settings.json` offers (never installed on its word).
    List(PluginListArgs),
    /// Turn an installed plugin on (everywhere, or with --project for this workspace only).
    Enable(PluginSwitch),
    /// Turn an installed plugin off (everywhere, or with --project for this workspace only).
    Disable(PluginSwitch),
    /// Fetch the marketplaces and move the installed plugins (or PLUGIN) to their commit.
    Update(PluginUpdateArgs),
    /// Remove an installed plugin and its files.
    Remove(PluginSpec),
}

/// `keel plugin marketplace SUBCOMMAND`.
#[derive(Debug, Subcommand)]
pub enum MarketplaceCommand {
    /// Add a marketplace: GitHub's `owner/repo`, a git URL, or a local git repository.
    Add(MarketplaceSource),
    /// The marketplaces, their commit and the plugins they list.
    List,
    /// Fetch a marketplace (or every one) and move its clone to the newest commit; installed
    /// plugins stay at their pins until `keel plugin update`.
    Update(MarketplaceName),
    /// Remove a marketplace and the plugins installed from it.
    Remove(MarketplaceName),
}

/// A marketplace source.
#[derive(Debug, Args)]
pub struct MarketplaceSource {
    /// `owner/repo` (GitHub), a git URL (https, ssh, git, file), or a local git repository.
    pub source: String,
}

/// A marketplace by name.
#[derive(Debug, Args)]
pub struct MarketplaceName {
    /// The marketplace's name (its marketplace.json `name`); `update` without one updates all.
    pub name: Option<String>,
}

/// A plugin.
#[derive(Debug, Args)]
pub struct PluginSpec {
    /// `NAME@MARKETPLACE`, or `NAME` when only one marketplace lists it (or one installed
    /// plugin has it).
    pub plugin: String,
}

/// `keel plugin install PLUGIN | --from-project`.
#[derive(Debug, Args)]
pub struct InstallArgs {
    /// `NAME@MARKETPLACE`, or `NAME` when only one marketplace lists it.
    #[arg(required_unless_present = "from_project")]
    pub plugin: Option<String>,
    /// Add the marketplaces and install the plugins this workspace's `.claude/settings.json`
    /// declares (`extraKnownMarketplaces`, `enabledPlugins`): your yes to its offer. Refused
    /// in a workspace you have not trusted (`keel trust`).
    #[arg(long, conflicts_with = "plugin")]
    pub from_project: bool,
}

/// `keel plugin enable|disable PLUGIN [--project]`.
#[derive(Debug, Args)]
pub struct PluginSwitch {
    /// `NAME@MARKETPLACE`, or an installed plugin's `NAME`.
    pub plugin: String,
    /// For this workspace only (its git root), over the plugin's own switch.
    #[arg(long)]
    pub project: bool,
}

/// `keel plugin list [--json]`.
#[derive(Debug, Args)]
pub struct PluginListArgs {
    /// One JSON document: `{"plugins": [...], "offered": {...}}`.
    #[arg(long)]
    pub json: bool,
}

/// `keel plugin update [PLUGIN]`.
#[derive(Debug, Args)]
pub struct PluginUpdateArgs {
    /// `NAME@MARKETPLACE` or `NAME`; none: every installed plugin.
    pub plugin: Option<String>,
}
