//! Hooks of the Claude Code plugin bundles the user installed and enabled
//! ([`keel_agent::plugin::Bundle`]).
//!
//! A bundle's hooks are in `ROOT/hooks/hooks.json`, Claude Code's plugin shape:
//!
//! ```json
//! {"description": "…", "hooks": {"PostToolUse": [{"matcher": "Write|Edit",
//!     "hooks": [{"type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/scripts/fmt.sh"}]}]}}
//! ```
//!
//! A file without the `hooks` key whose other keys are events is read as the events
//! themselves. The file is opened beneath the bundle's folder (a link out of it is never
//! followed) and must be a regular file of at most [`MAX_SETTINGS_FILE_BYTES`]. Every command
//! has `${CLAUDE_PLUGIN_ROOT}` replaced by the folder and runs with the variable
//! `CLAUDE_PLUGIN_ROOT` set to it. A bundle's file that cannot be used is one
//! [`BundleProblem`]; the other bundles still load.

use crate::config::{HooksConfig, HooksConfigError, MAX_SETTINGS_FILE_BYTES, parse_settings};
use keel_agent::plugin::Bundle;
use keel_tools::beneath::{BeneathError, Reader};
use serde_json::Value;
use std::path::PathBuf;

/// Where a bundle's hooks are, relative to its folder.
pub const BUNDLE_HOOKS_FILE: &str = "hooks/hooks.json";

/// A bundle whose hooks were not loaded, and why.
#[derive(Debug, thiserror::Error)]
#[error("plugin {bundle}: hooks not loaded: {error}")]
pub struct BundleProblem {
    /// The bundle's name.
    pub bundle: String,
    /// Its hooks file.
    pub file: PathBuf,
    /// What is wrong (names the file).
    pub error: HooksConfigError,
}

/// The hooks of `bundle` (`Ok(None)`: it has no hooks file, or the file has none), its
/// commands expanded and bound to the bundle's folder.
pub fn load_bundle_hooks(bundle: &Bundle) -> Result<Option<HooksConfig>, HooksConfigError> {
    let path = bundle.root.join(BUNDLE_HOOKS_FILE);
    let reader = match Reader::beneath(&bundle.root) {
        Ok(reader) => reader,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(refused) => return Err(HooksConfigError::NotRead { path, refused }),
    };
    let text = match reader.read_text(&path, MAX_SETTINGS_FILE_BYTES) {
        Ok(text) => text,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(BeneathError::Io { source, .. }) => {
            return Err(HooksConfigError::Read { path, source });
        }
        Err(refused) => return Err(HooksConfigError::NotRead { path, refused }),
    };
    let mut config = match parse_settings(&path, &text)? {
        Some(config) => config,
        None => match bare_events(&text) {
            // No `hooks` key: the events at the top level.
            Some(events) => HooksConfig::from_value(events, &path.display().to_string())?,
            None => return Ok(None),
        },
    };
    config.each_command(|c| {
        c.command = bundle.expand(&c.command);
        c.plugin_root = Some(bundle.root.clone());
    });
    Ok(Some(config))
}

/// The top-level object without `description`, when it holds anything else (read as events);
/// `None` for an object with nothing but a description.
fn bare_events(text: &str) -> Option<Value> {
    let Ok(Value::Object(mut top)) = serde_json::from_str::<Value>(text) else {
        return None;
    };
    top.remove("description");
    (!top.is_empty()).then_some(Value::Object(top))
}

/// The hooks of every bundle, merged in order, and the bundles left out with why.
pub fn load_bundles(bundles: &[Bundle]) -> (HooksConfig, Vec<BundleProblem>) {
    let mut merged = HooksConfig::default();
    let mut problems = Vec::new();
    for bundle in bundles {
        match load_bundle_hooks(bundle) {
            Ok(Some(config)) => merged.merge(config),
            Ok(None) => {}
            Err(error) => problems.push(BundleProblem {
                bundle: bundle.name.clone(),
                file: bundle.root.join(BUNDLE_HOOKS_FILE),
                error,
            }),
        }
    }
    (merged, problems)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::HookEvent;

    fn bundle(dir: &std::path::Path, name: &str, hooks: Option<&str>) -> Bundle {
        let root = dir.join(name);
        std::fs::create_dir_all(root.join("hooks")).unwrap();
        if let Some(text) = hooks {
            std::fs::write(root.join(BUNDLE_HOOKS_FILE), text).unwrap();
        }
        Bundle {
            name: name.to_owned(),
            root,
        }
    }

    #[test]
    fn commands_are_expanded_and_bound_and_a_bare_event_object_is_accepted() {
        let t = tempfile::tempdir().unwrap();
        let a = bundle(
            t.path(),
            "fmt",
            Some(
                r#"{"description": "formats", "hooks": {"PostToolUse": [{"matcher": "Write",
                    "hooks": [{"type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/fmt.sh"}]}]}}"#,
            ),
        );
        let b = bundle(
            t.path(),
            "bare",
            Some(r#"{"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}"#),
        );
        let c = bundle(t.path(), "none", None);
        let d = bundle(t.path(), "described", Some(r#"{"description": "nothing"}"#));
        let (config, problems) = load_bundles(&[a.clone(), b, c, d]);
        assert!(problems.is_empty(), "{problems:?}");
        let post = config.commands(HookEvent::PostToolUse, &["write"]);
        assert_eq!(
            post[0].command,
            format!("{}/fmt.sh", a.root.display()),
            "expanded"
        );
        assert_eq!(post[0].plugin_root.as_deref(), Some(a.root.as_path()));
        assert_eq!(config.commands(HookEvent::Stop, &[]).len(), 1);
    }

    #[test]
    fn a_broken_or_linked_out_file_is_a_problem_naming_the_bundle_and_the_others_load() {
        let t = tempfile::tempdir().unwrap();
        let broken = bundle(t.path(), "broken", Some("{\"hooks\": {\"Stop\": [,]}}"));
        let unknown = bundle(t.path(), "unknown", Some(r#"{"hooks": {"Nope": []}}"#));
        let linked = bundle(t.path(), "linked", None);
        std::fs::write(
            t.path().join("outside.json"),
            r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "touch MARKER"}]}]}}"#,
        )
        .unwrap();
        std::os::unix::fs::symlink("../../outside.json", linked.root.join(BUNDLE_HOOKS_FILE))
            .unwrap();
        let good = bundle(
            t.path(),
            "good",
            Some(r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "ok"}]}]}}"#),
        );
        let (config, problems) = load_bundles(&[broken, unknown, linked, good]);
        let said: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(said.len(), 3, "{said:?}");
        assert!(
            said[0].starts_with("plugin broken: hooks not loaded: "),
            "{said:?}"
        );
        assert!(said[0].contains("broken/hooks/hooks.json:1:"), "{said:?}");
        assert!(said[1].contains("unknown hook event \"Nope\""), "{said:?}");
        assert!(said[2].starts_with("plugin linked:"), "{said:?}");
        assert!(said[2].contains("not read"), "{said:?}");
        let stop: Vec<String> = config
            .commands(HookEvent::Stop, &[])
            .into_iter()
            .map(|c| c.command)
            .collect();
        assert_eq!(stop, ["ok"]);
    }
}
