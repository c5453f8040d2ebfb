//! The `skills` plugin (on by default; without a skill it adds nothing to requests).
//!
//! At install it scans the roots ([`crate::roots`]; the project's only in a trusted
//! workspace) and offers:
//!
//! - a prompt section `skills`, the bounded list of the skills the model may load, when
//!   there is one;
//! - the `skill` tool, through a tool source whose set is re-read at each turn start, so it
//!   appears and goes with the skills;
//! - the user-invocable skills as slash commands.
//!
//! **Hot reload.** At each turn start the registry asks the tool source for its generation;
//! that is when the plugin stats the roots and the skill files it knows (never the other files
//! of a skill's folder) and scans again only when one of them changed. The skill set, the
//! tool's presence and the commands follow at that boundary, never in the middle of a turn.
//!
//! **Events.** Each file skipped is logged once as an ignorable `skills/warning`
//! `{file, error}` (front ends show it; the turn goes on), and the listing as
//! `skills/catalog` `{skills: [{name, file, scope, model, user}], shadowed: [{name, file,
//! by}]}` when there is anything to list, and again when a reload changes it.

use crate::commands::SkillCommands;
pub use crate::presenter::{LISTING_EVENT, WARNING_EVENT};
use crate::roots::{Root, expand, project_root, roots_with_bundles};
use crate::scan::{Fingerprint, SkillSet, Warning};
use crate::tool::SkillTool;
use keel_agent::AgentSlot;
use keel_agent::plugin::{InstallContext, Plugin, PluginError, PluginId, plugin_config};
use keel_agent::prompt::PromptSection;
use keel_tools::{Tool, ToolSource};
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The plugin id.
pub const ID: PluginId = keel_agent::plugin_id!("skills");

/// `[plugins.config]` of the `skills` row.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillsConfig {
    /// More roots, ranked after the project's and before the home roots (`~/` is `$HOME`; a
    /// relative path is under `$KEEL_HOME`).
    #[serde(default)]
    pub dirs: Vec<String>,
}

/// The `skills` plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct SkillsPlugin;

/// What the tool, the commands, the prompt section and the reload share.
pub struct Shared {
    roots: Vec<Root>,
    state: Mutex<State>,
    generation: AtomicU64,
    slot: AgentSlot,
}

struct State {
    skill_set: Arc<SkillSet>,
    fingerprint: Fingerprint,
    /// Events not logged yet (the agent is not bound, or they came from a reload).
    pending: Vec<(&'static str, Value)>,
}

fn listing(c: &SkillSet) -> Value {
    let skills: Vec<Value> = c
        .skills
        .iter()
        .map(|s| {
            json!({"name": s.name, "file": s.file, "scope": s.scope,
                   "model": s.model_invocable, "user": s.user_invocable})
        })
        .collect();
    let shadowed: Vec<Value> = c
        .shadowed
        .iter()
        .map(|s| json!({"name": s.name, "file": s.file, "by": s.by}))
        .collect();
    json!({"skills": skills, "shadowed": shadowed})
}

fn warning_event(w: &Warning) -> (&'static str, Value) {
    (WARNING_EVENT, json!({"file": w.file, "error": w.why}))
}

impl Shared {
    /// Scan `roots` now.
    pub fn new(roots: Vec<Root>) -> Arc<Shared> {
        let set = SkillSet::scan(&roots);
        let mut pending: Vec<(&'static str, Value)> =
            set.warnings.iter().map(warning_event).collect();
        if !set.skills.is_empty() || !set.shadowed.is_empty() {
            pending.push((LISTING_EVENT, listing(&set)));
        }
        Arc::new(Shared {
            roots,
            state: Mutex::new(State {
                fingerprint: set.fingerprint(),
                skill_set: Arc::new(set),
                pending,
            }),
            generation: AtomicU64::new(0),
            slot: AgentSlot::new(),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The skill set as of the last scan.
    pub fn skill_set(&self) -> Arc<SkillSet> {
        self.state().skill_set.clone()
    }

    /// The roots, in rank order.
    pub fn roots(&self) -> &[Root] {
        &self.roots
    }

    /// Scan again when a watched path changed; returns whether the skill set changed. Events of
    /// the new scan are logged when the agent is bound.
    pub fn refresh(&self) -> bool {
        let changed = {
            let mut state = self.state();
            let old = state.skill_set.clone();
            if old.fingerprint() == state.fingerprint {
                false
            } else {
                let next = SkillSet::scan(&self.roots);
                state.fingerprint = next.fingerprint();
                for w in next.warnings.iter().filter(|w| !old.warnings.contains(w)) {
                    state.pending.push(warning_event(w));
                }
                let changed = next.skills != old.skills || next.shadowed != old.shadowed;
                if changed {
                    state.pending.push((LISTING_EVENT, listing(&next)));
                }
                let offered = |c: &SkillSet| c.model_skills().next().is_some();
                if offered(&next) != offered(&old) {
                    self.generation.fetch_add(1, Ordering::AcqRel);
                }
                state.skill_set = Arc::new(next);
                changed
            }
        };
        self.flush();
        changed
    }

    /// Log the pending events, if the agent is bound (outside the state's lock).
    fn flush(&self) {
        let Some(agent) = self.slot.get() else {
            return;
        };
        let pending = std::mem::take(&mut self.state().pending);
        for (kind, data) in pending {
            let _ = agent.push_ignorable(kind, data);
        }
    }
}

/// The `skill` tool while there is a skill the model may load.
struct SkillSource {
    shared: Arc<Shared>,
    tool: Arc<dyn Tool>,
}

impl ToolSource for SkillSource {
    fn generation(&self) -> u64 {
        // Asked at each turn start: the reload's cheap check happens here.
        self.shared.refresh();
        self.shared.generation.load(Ordering::Acquire)
    }

    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        if self.shared.skill_set().model_skills().next().is_some() {
            vec![self.tool.clone()]
        } else {
            Vec::new()
        }
    }
}

impl Plugin for SkillsPlugin {
    fn id(&self) -> PluginId {
        ID
    }

    fn description(&self) -> &'static str {
        "Agent Skills: SKILL.md folders from the project (when trusted) and home roots, listed for the model, loaded with the skill tool, run as /name"
    }

    fn enabled_by_default(&self) -> bool {
        true
    }

    fn presenter(&self) -> Option<keel_protocol::present::MakePresenter> {
        Some(crate::presenter::presenter())
    }

    fn install(&self, ctx: &mut InstallContext, config: Value) -> Result<(), PluginError> {
        let config: SkillsConfig = plugin_config(ID, config)?;
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        let dirs: Vec<PathBuf> = config
            .dirs
            .iter()
            .map(|d| expand(d, home.as_deref(), &ctx.keel_home))
            .collect();
        // A workspace's own skills are read only once the user trusts it.
        let project = ctx
            .project_trust
            .is_trusted()
            .then(|| project_root(&ctx.cwd));
        // The user's installed plugin bundles' skills are read whatever the workspace's trust.
        let shared = Shared::new(roots_with_bundles(
            project.as_deref(),
            &dirs,
            &ctx.bundles,
            home.as_deref(),
            &ctx.keel_home,
        ));
        ctx.tool_sources.push(Arc::new(SkillSource {
            shared: shared.clone(),
            tool: Arc::new(SkillTool {
                shared: shared.clone(),
            }),
        }));
        ctx.commands.push(Arc::new(SkillCommands {
            shared: shared.clone(),
        }));
        let prompt = shared.clone();
        ctx.hooks.prompt_sections.push(Arc::new(move |_| {
            prompt
                .skill_set()
                .prompt()
                .map(|text| PromptSection::new("skills", text))
                .into_iter()
                .collect()
        }));
        ctx.on_agent.push(Box::new(move |agent| {
            shared.slot.bind(agent);
            shared.flush();
        }));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::roots::Scope;

    #[test]
    fn a_reload_happens_only_when_a_watched_path_changed() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("skills");
        let shared = Shared::new(vec![Root {
            dir: dir.clone(),
            scope: Scope::Home,
            bundle: None,
        }]);
        assert!(shared.skill_set().skills.is_empty());
        assert!(!shared.refresh());
        std::fs::create_dir_all(dir.join("a")).unwrap();
        std::fs::write(
            dir.join("a/SKILL.md"),
            "---\nname: a\ndescription: one\n---\n",
        )
        .unwrap();
        assert!(shared.refresh());
        assert_eq!(shared.generation.load(Ordering::Acquire), 1);
        assert_eq!(shared.skill_set().skills[0].description, "one");
        assert!(!shared.refresh());
        // Broken later: a warning, the skill is gone, the tool with it.
        std::fs::write(dir.join("a/SKILL.md"), "---\nname: a\n---\n").unwrap();
        assert!(shared.refresh());
        assert!(shared.skill_set().skills.is_empty());
        assert_eq!(shared.generation.load(Ordering::Acquire), 2);
        let pending = &shared.state().pending;
        let kinds: Vec<&str> = pending.iter().map(|p| p.0).collect();
        assert_eq!(kinds, [LISTING_EVENT, WARNING_EVENT, LISTING_EVENT]);
        assert!(
            pending[1].1["file"]
                .as_str()
                .unwrap()
                .ends_with("a/SKILL.md")
        );
    }
}
