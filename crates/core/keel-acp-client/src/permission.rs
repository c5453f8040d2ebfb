//! The authority grant ([`Grant`]) as answers to `session/request_permission`.
//!
//! | authority | tool kinds allowed (allow-once) | rejected (reject-once) |
//! |---|---|---|
//! | `read-only` | `read`, `search`, `fetch`, `think` | `edit`, `delete`, `move`, `execute`, `switch_mode`, `other` (and any kind this build does not know) |
//! | `write` | every kind: the agent works in an isolated worktree | none |
//!
//! `execute` is rejected in read-only authority because a command's effect cannot be told from
//! its kind; `switch_mode` because a mode switch can turn off the agent's own asking (an
//! "accept edits" mode); `other` because what cannot be classified is not known to read only.
//! The kind is the request's own, else the one the agent announced for the same tool call in a
//! `tool_call` update, else `other`.
//!
//! The option answered is picked by its kind, never by position or name: allow-once (else
//! allow-always), reject-once (else reject-always); when the request offers no option of the
//! wanted side, the answer is `cancelled` (which the protocol counts as not allowed).

use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, SelectedPermissionOutcome,
    ToolKind,
};

/// The authority the agent runs under (a delegation's mode).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Grant {
    /// It may read but not change the workspace.
    #[default]
    ReadOnly,
    /// It may change files (the caller confines it, e.g. to an isolated worktree).
    Write,
}

impl Grant {
    /// Spelling in log lines (`read-only`, `write`).
    pub fn as_str(self) -> &'static str {
        match self {
            Grant::ReadOnly => "read-only",
            Grant::Write => "write",
        }
    }
}

/// What the grant says about one tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Let it run.
    Allow,
    /// Refuse it.
    Reject,
}

/// The verdict of `grant` on a call of `kind` (see the module table).
pub fn verdict(grant: Grant, kind: &ToolKind) -> Verdict {
    match grant {
        Grant::Write => Verdict::Allow,
        Grant::ReadOnly => match kind {
            ToolKind::Read | ToolKind::Search | ToolKind::Fetch | ToolKind::Think => Verdict::Allow,
            _ => Verdict::Reject,
        },
    }
}

/// The answer carrying `verdict`, chosen among `options` by kind.
pub fn answer(verdict: Verdict, options: &[PermissionOption]) -> RequestPermissionOutcome {
    let wanted: &[PermissionOptionKind] = match verdict {
        Verdict::Allow => &[
            PermissionOptionKind::AllowOnce,
            PermissionOptionKind::AllowAlways,
        ],
        Verdict::Reject => &[
            PermissionOptionKind::RejectOnce,
            PermissionOptionKind::RejectAlways,
        ],
    };
    wanted
        .iter()
        .find_map(|kind| options.iter().find(|o| o.kind == *kind))
        .map_or(RequestPermissionOutcome::Cancelled, |o| {
            RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(o.option_id.clone()))
        })
}

/// The kind's spelling on the wire (`edit`, `switch_mode`…), for log lines.
pub fn kind_name(kind: &ToolKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "other".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const ALL: [ToolKind; 10] = [
        ToolKind::Read,
        ToolKind::Edit,
        ToolKind::Delete,
        ToolKind::Move,
        ToolKind::Search,
        ToolKind::Execute,
        ToolKind::Think,
        ToolKind::Fetch,
        ToolKind::SwitchMode,
        ToolKind::Other,
    ];

    #[test]
    fn read_only_allows_only_reading_kinds_and_write_allows_all() {
        let table: Vec<(String, Verdict, Verdict)> = ALL
            .iter()
            .map(|k| {
                (
                    kind_name(k),
                    verdict(Grant::ReadOnly, k),
                    verdict(Grant::Write, k),
                )
            })
            .collect();
        use Verdict::{Allow, Reject};
        let expected: Vec<(String, Verdict, Verdict)> = [
            ("read", Allow, Allow),
            ("edit", Reject, Allow),
            ("delete", Reject, Allow),
            ("move", Reject, Allow),
            ("search", Allow, Allow),
            ("execute", Reject, Allow),
            ("think", Allow, Allow),
            ("fetch", Allow, Allow),
            ("switch_mode", Reject, Allow),
            ("other", Reject, Allow),
        ]
        .into_iter()
        .map(|(k, r, w)| (k.to_owned(), r, w))
        .collect();
        assert_eq!(table, expected);
    }

    #[test]
    fn an_unknown_wire_kind_is_other_and_rejected_read_only() {
        let kind: ToolKind = serde_json::from_value(serde_json::json!("teleport")).unwrap();
        assert_eq!(verdict(Grant::ReadOnly, &kind), Verdict::Reject);
    }

    fn options(kinds: &[(&str, PermissionOptionKind)]) -> Vec<PermissionOption> {
        kinds
            .iter()
            .map(|(id, k)| PermissionOption::new(id.to_string(), id.to_string(), *k))
            .collect()
    }

    fn picked(outcome: RequestPermissionOutcome) -> Option<String> {
        match outcome {
            RequestPermissionOutcome::Selected(s) => Some(s.option_id.0.to_string()),
            _ => None,
        }
    }

    #[test]
    fn options_are_picked_by_kind_once_before_always() {
        // keel acp's options, in its order.
        let keel = options(&[
            ("allow_once", PermissionOptionKind::AllowOnce),
            ("allow_always", PermissionOptionKind::AllowAlways),
            ("reject", PermissionOptionKind::RejectOnce),
        ]);
        assert_eq!(
            picked(answer(Verdict::Allow, &keel)).as_deref(),
            Some("allow_once")
        );
        assert_eq!(
            picked(answer(Verdict::Reject, &keel)).as_deref(),
            Some("reject")
        );
        // Another agent's, in another order and with other ids.
        let other = options(&[
            ("no-never", PermissionOptionKind::RejectAlways),
            ("yes-always", PermissionOptionKind::AllowAlways),
        ]);
        assert_eq!(
            picked(answer(Verdict::Allow, &other)).as_deref(),
            Some("yes-always")
        );
        assert_eq!(
            picked(answer(Verdict::Reject, &other)).as_deref(),
            Some("no-never")
        );
        // Nothing to reject with: cancelled (not allowed).
        let allow_only = options(&[("ok", PermissionOptionKind::AllowOnce)]);
        assert_eq!(picked(answer(Verdict::Reject, &allow_only)), None);
        assert!(matches!(
            answer(Verdict::Reject, &allow_only),
            RequestPermissionOutcome::Cancelled
        ));
    }
}
