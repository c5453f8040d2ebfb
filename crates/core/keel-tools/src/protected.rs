//! Protected paths: the places in a workspace whose contents keel, git or another agent later
//! *obeys* — git's hooks and config, keel's, Claude Code's, Codex's and dsh's configuration,
//! the MCP servers a project declares.
//!
//! A confined model that could write them could plant code that runs unconfined the next time
//! keel (or the user's own `git`) starts. So under every sandbox mode but `full-access` they are
//! read-only to the file tools (a write is refused with a message naming the path and what it
//! could change; the model may ask for that one call to run outside the sandbox, which only a
//! person can approve: [`crate::escalation`]) and to commands (`bash` runs with the existing
//! ones mounted read-only: [`crate::subprocess::confine`]).
//!
//! A name is protected at any depth of a workspace (`sub/.git` is a nested repository's git
//! directory), matched component by component, exactly (the file system is case-sensitive).

use std::path::{Component, Path};

/// One protected name and what a write there could change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Protected {
    /// The file or directory name (`.git`, `.mcp.json` …).
    pub name: &'static str,
    /// What writing there could change, for the person asked to approve it.
    pub controls: &'static str,
}

/// Every protected name, in the order they are reported.
pub const PROTECTED: &[Protected] = &[
    Protected {
        name: ".git",
        controls: "git's hooks and configuration, which run programs whenever git runs here",
    },
    Protected {
        name: ".keel",
        controls: "keel's project configuration (sandbox, approvals, hooks, MCP servers)",
    },
    Protected {
        name: ".claude",
        controls: "Claude Code's settings, hooks and commands, which keel also reads",
    },
    Protected {
        name: ".codex",
        controls: "Codex's project configuration",
    },
    Protected {
        name: ".dsh",
        controls: "DeepSeek Harness's project configuration",
    },
    Protected {
        name: ".agents",
        controls: "agent skills and configuration that keel reads",
    },
    Protected {
        name: ".mcp.json",
        controls: "the MCP servers started for this project (programs keel runs)",
    },
];

/// The protected entry `rel` (a path relative to a workspace root, or an absolute path under
/// it once the root is stripped) lies in or names, if any: the first protected component.
pub fn protected_component(rel: &Path) -> Option<&'static Protected> {
    rel.components().find_map(|c| match c {
        Component::Normal(name) => PROTECTED.iter().find(|p| name == p.name),
        _ => None,
    })
}

/// The model-facing (and person-facing) reason a write to `shown` (in protected entry `p`)
/// is refused.
pub fn refusal(shown: &str, p: &Protected) -> String {
    format!(
        "'{shown}' is a protected path: {} holds {}. The sandbox keeps it read-only; writing it \
         needs the user's approval: send the call again with sandbox_permissions = \
         \"danger-full-access\" and a one-sentence justification, or ask the user to make the \
         change",
        p.name, p.controls
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_components_match_whole_names_at_any_depth() {
        let hit = |s: &str| protected_component(Path::new(s)).map(|p| p.name);
        assert_eq!(hit(".git/hooks/post-checkout"), Some(".git"));
        assert_eq!(hit("sub/.git/config"), Some(".git"));
        assert_eq!(hit(".mcp.json"), Some(".mcp.json"));
        assert_eq!(hit(".claude/settings.json"), Some(".claude"));
        assert_eq!(hit("src/.keel"), Some(".keel"));
        assert_eq!(hit(".gitignore"), None);
        assert_eq!(hit(".github/workflows/ci.yml"), None);
        assert_eq!(hit("x.mcp.json"), None);
        assert_eq!(hit("src/main.rs"), None);
        assert_eq!(hit(".GIT/config"), None);
    }
}
