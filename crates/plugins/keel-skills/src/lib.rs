//! keel-skills: Agent Skills, the format DeepSeek Harness, Codex and Claude Code share.
//!
//! A skill is a folder `<root>/<name>/SKILL.md` (or a single file `<root>/<name>.md`) whose
//! YAML front matter names it and says when it applies; the body is the instructions.
//!
//! | piece | where |
//! |---|---|
//! | the front matter (a small, careful subset of YAML) | [`front`] |
//! | the roots in rank order (project, configured, plugin bundles, home) | [`roots`] |
//! | a scan of the roots: skills, shadowed ones, warnings; the prompt's skill list | [`scan`] |
//! | the `skill` tool the model loads a skill with | [`tool`] |
//! | `/name [args]` for people | [`commands`] |
//! | the `skills` plugin row, hot reload between turns | [`plugin`] |
//!
//! Design: `docs/skills.md`.
#![deny(missing_docs)]

pub mod commands;
pub mod front;
pub mod plugin;
pub mod presenter;
pub mod roots;
pub mod scan;
pub mod tool;

pub use plugin::{ID, LISTING_EVENT, SkillsConfig, SkillsPlugin, WARNING_EVENT};
pub use roots::{PROJECT_DIRS, Root, Scope, project_root, project_skill_dirs, roots_with_bundles};
pub use scan::{Skill, SkillSet};
