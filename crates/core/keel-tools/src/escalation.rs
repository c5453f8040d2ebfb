//! Running one call outside the sandbox: dsh's `sandbox_permissions` + `justification` on
//! `bash`, `write` and `edit` ([`crate::Tool::escalates`]).
//!
//! A call the sandbox refused may be sent again with `sandbox_permissions` (the wider mode it
//! needs: `workspace-write` or `danger-full-access`) and a one-sentence `justification`. The
//! pipeline takes both out of the arguments before any hook sees them, and when the mode is
//! wider than the one in force it asks a person ([`crate::ToolCaller::ask_escalation`]): the
//! `auto` approval policy does not answer for them, and a run with nobody to ask refuses the
//! call naming the flag. Approved, that one call runs in a workspace of the wider mode (its
//! file checks and its OS confinement); plan mode refuses the request.

use crate::workspace::SandboxMode;
use serde_json::{Map, Value, json};

/// The parameter naming the wider sandbox mode a call asks for.
pub const SANDBOX_PERMISSIONS: &str = "sandbox_permissions";
/// The parameter saying why, in one sentence, shown to the person asked.
pub const JUSTIFICATION: &str = "justification";

/// dsh's names of the modes a call may ask for.
const MODES: [&str; 2] = ["workspace-write", "danger-full-access"];

/// A tool's object schema with the two parameters added (`described`: with a short
/// description, for the one tool whose description carries the rule; the others share it).
pub fn with_escalation(mut parameters: Value, described: bool) -> Value {
    let Some(props) = parameters
        .get_mut("properties")
        .and_then(Value::as_object_mut)
    else {
        return parameters;
    };
    let mut mode = json!({"type": "string", "enum": MODES});
    let mut why = json!({"type": "string"});
    if described {
        mode["description"] = json!("After a sandbox denial: run in this mode if the user agrees.");
        why["description"] = json!("Why, in one sentence.");
    }
    props.insert(SANDBOX_PERMISSIONS.into(), mode);
    props.insert(JUSTIFICATION.into(), why);
    parameters
}

/// A call's request to run outside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Escalation {
    /// The mode asked for.
    pub mode: SandboxMode,
    /// Why, as the model put it (shown to the person asked).
    pub justification: String,
}

/// Why a call's escalation parameters are refused (model-facing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EscalationError {
    /// `sandbox_permissions` names no mode a call may ask for.
    #[error("'{}' must be one of {}", SANDBOX_PERMISSIONS, MODES.join(", "))]
    UnknownMode,
    /// `sandbox_permissions` came without a `justification`.
    #[error(
        "'{}' needs a '{}': one sentence, shown to the user, saying why this call must run \
         outside the sandbox",
        SANDBOX_PERMISSIONS,
        JUSTIFICATION
    )]
    NoJustification,
}

impl Escalation {
    /// Take the escalation parameters out of schema-valid `args` (they never reach hooks or the
    /// tool body). `Ok(None)` when the call asks for nothing; an `Err` is the model-facing
    /// reason the arguments are refused.
    pub fn take(args: &mut Value) -> Result<Option<Escalation>, EscalationError> {
        let Some(map) = args.as_object_mut() else {
            return Ok(None);
        };
        let mode = map.remove(SANDBOX_PERMISSIONS);
        let why = map.remove(JUSTIFICATION);
        let Some(mode) = mode else {
            return Ok(None);
        };
        let mode = match mode.as_str() {
            Some("workspace-write") => SandboxMode::WorkspaceWrite,
            Some("danger-full-access") => SandboxMode::FullAccess,
            _ => return Err(EscalationError::UnknownMode),
        };
        let justification = why
            .as_ref()
            .and_then(Value::as_str)
            .map(str::trim)
            .unwrap_or_default();
        if justification.is_empty() {
            return Err(EscalationError::NoJustification);
        }
        Ok(Some(Escalation {
            mode,
            justification: justification.to_owned(),
        }))
    }

    /// Whether this asks for more than `current` allows.
    pub fn widens(&self, current: SandboxMode) -> bool {
        current.stricter(self.mode) == current && current != self.mode
    }

    /// The mode's name as the model sent it.
    pub fn mode_name(&self) -> &'static str {
        match self.mode {
            SandboxMode::FullAccess => "danger-full-access",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::ReadOnly => "read-only",
        }
    }

    /// The approval reason the person reads.
    pub fn reason(&self, tool: &str, current: SandboxMode) -> String {
        format!(
            "'{tool}' asks to run outside the {current} sandbox, with {}; the model says: \"{}\"",
            self.mode_name(),
            self.justification
        )
    }
}

/// Whether `args` (a call's raw arguments, parsed) ask for a wider sandbox: what an approver's
/// "allow for the session" must not cover with a plain approval of the tool.
pub fn requested(args: &Map<String, Value>) -> bool {
    args.contains_key(SANDBOX_PERMISSIONS)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn takes_both_parameters_out_and_reads_the_mode() {
        let mut args = json!({"command": "ls", "sandbox_permissions": "danger-full-access",
                              "justification": " needs /etc "});
        let e = Escalation::take(&mut args).unwrap().unwrap();
        assert_eq!(e.mode, SandboxMode::FullAccess);
        assert_eq!(e.justification, "needs /etc");
        assert_eq!(args, json!({"command": "ls"}));
        assert!(e.widens(SandboxMode::WorkspaceWrite));
        assert!(e.widens(SandboxMode::ReadOnly));
        assert!(!e.widens(SandboxMode::FullAccess));
    }

    #[test]
    fn a_justification_alone_is_dropped_and_a_mode_alone_is_refused() {
        let mut args = json!({"command": "ls", "justification": "why"});
        assert_eq!(Escalation::take(&mut args).unwrap(), None);
        assert_eq!(args, json!({"command": "ls"}));
        let mut args = json!({"command": "ls", "sandbox_permissions": "workspace-write"});
        let err = Escalation::take(&mut args).unwrap_err();
        assert_eq!(err, EscalationError::NoJustification);
        assert_eq!(
            err.to_string(),
            "'sandbox_permissions' needs a 'justification': one sentence, shown to the user, \
             saying why this call must run outside the sandbox"
        );
        let mut args = json!({"sandbox_permissions": "sudo", "justification": "why"});
        assert_eq!(
            Escalation::take(&mut args).unwrap_err().to_string(),
            "'sandbox_permissions' must be one of workspace-write, danger-full-access"
        );
        let e = Escalation::take(
            &mut json!({"sandbox_permissions": "workspace-write", "justification": "w"}),
        )
        .unwrap()
        .unwrap();
        assert!(e.widens(SandboxMode::ReadOnly));
        assert!(!e.widens(SandboxMode::WorkspaceWrite));
        assert!(!e.widens(SandboxMode::FullAccess));
    }
}
