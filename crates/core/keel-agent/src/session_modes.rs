//! The modes a resumed session keeps: the sandbox narrowing and the approval policy changed
//! during the session (an editor's `session/set_mode`), read back from its log when an agent is
//! built over it — as plan mode is, from its last `plan/mode`. Every front end that resumes a
//! session (`keel resume`, the terminal UI, `keel acp`'s `session/load`, `keel mcp-server`'s
//! `keel_reply`) gets them from [`crate::AgentBuilder::build`].
//!
//! A session's first `sandbox/mode` and first `approval/policy` events record the
//! configuration it was started with (keel and dsh write them first thing); they are not
//! restored: a resumed session starts from the configuration of the process that resumes it
//! (the user's own flags and config). Each later one is a change made during the session; the
//! last change is kept only where it is stricter than that configuration. A resume never
//! loosens: a log is data anyone who can write the session file (or hand over one to import)
//! controls, so a looser mode in it is reported, not applied.
//!
//! | last change logged | kept |
//! |---|---|
//! | `sandbox/mode` `read-only` | the sandbox narrowed to read-only |
//! | `sandbox/mode` a known mode stricter than the configured sandbox | the configured sandbox, narrowed to read-only (keel narrows to nothing else at run time) |
//! | `sandbox/mode` a known mode looser than the configured sandbox | the configured sandbox; the logged mode is noted as not restored |
//! | `approval/policy` stricter than the configured policy (`ask` or `deny` under `allow`, `deny` under `ask`) | the logged policy |
//! | `approval/policy` looser than the configured policy (`allow` under `ask` or `deny`, `ask` under `deny`) | the configured policy; the logged one is noted as not restored |
//! | the same mode or policy as configured | the configured one, nothing to say |
//! | a mode or policy keel does not know | fail closed: the sandbox narrowed to read-only; the configured policy, `ask` where that is `allow` |
//!
//! So a restore never gives a session a looser setting than its log holds, nor than the
//! configuration of the process resuming it. Nothing is logged when modes are kept or refused
//! (the log already says what was set); [`KeptModes::notes`] says what was kept and what was
//! not restored, for the front end to tell the person. A `sandbox/mode` or `approval/policy`
//! record whose payload does not parse makes the whole log unreadable: the session is not
//! loaded at all.

use crate::agent::ApprovalPolicy;
use keel_protocol::{EventBody, Seq};
use keel_tools::SandboxMode;
use std::fmt;

/// What a resumed session keeps of the modes changed during it ([`kept_modes`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeptModes {
    /// The sandbox is narrowed to read-only.
    pub read_only: bool,
    /// The approval policy in force; `None`: the configured one (no change was logged).
    pub approval: Option<ApprovalPolicy>,
    /// What was kept and why, in log order; empty when the session runs as configured.
    pub notes: Vec<ModeNote>,
}

/// One thing [`kept_modes`] kept, for the person resuming the session to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModeNote {
    /// The session's last `sandbox/mode` change (at `seq`) narrowed the sandbox to read-only.
    ReadOnly {
        /// The change.
        seq: Seq,
    },
    /// The configured sandbox is looser than the mode the session's last change (at `seq`)
    /// went back to: the sandbox is narrowed to read-only.
    Tightened {
        /// The change.
        seq: Seq,
        /// The mode it logged.
        logged: SandboxMode,
        /// The configured mode, looser.
        configured: SandboxMode,
    },
    /// The approval policy the session's last change (at `seq`) left, other than the
    /// configured one.
    Approval {
        /// The change.
        seq: Seq,
        /// The policy kept.
        policy: ApprovalPolicy,
    },
    /// The session's last `sandbox/mode` change (at `seq`) logged a mode looser than the
    /// configured one: not restored, the configured sandbox is kept.
    SandboxNotRestored {
        /// The change.
        seq: Seq,
        /// The mode it logged, looser.
        logged: SandboxMode,
        /// The configured mode, in force.
        kept: SandboxMode,
    },
    /// The session's last `approval/policy` change (at `seq`) logged a policy looser than the
    /// configured one (`allow` under `ask`, say): not restored, the configured policy is kept.
    ApprovalNotRestored {
        /// The change.
        seq: Seq,
        /// The policy it logged, looser.
        logged: ApprovalPolicy,
        /// The configured policy, in force.
        kept: ApprovalPolicy,
    },
    /// The session's last `sandbox/mode` change (at `seq`) names a mode keel does not know:
    /// the sandbox is narrowed to read-only (fail closed).
    UnknownSandbox {
        /// The change.
        seq: Seq,
        /// Its mode, as logged.
        mode: String,
    },
    /// The session's last `approval/policy` change (at `seq`) names a policy keel does not
    /// know: `kept` is in force (the configured one, `ask` where that is `auto`).
    UnknownApproval {
        /// The change.
        seq: Seq,
        /// Its policy, as logged.
        policy: String,
        /// The policy in force.
        kept: ApprovalPolicy,
    },
}

impl ModeNote {
    /// True when the log held something keel could not read and it failed closed (a looser
    /// mode that was not restored is no problem: the log is read, the configuration holds).
    pub fn is_problem(&self) -> bool {
        matches!(
            self,
            ModeNote::UnknownSandbox { .. } | ModeNote::UnknownApproval { .. }
        )
    }
}

/// Each note reads after "session ID " (`keel: session 0193… keeps the read-only sandbox …`).
impl fmt::Display for ModeNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModeNote::ReadOnly { seq } => write!(
                f,
                "keeps the read-only sandbox set during it (sandbox/mode at seq {})",
                seq.0
            ),
            ModeNote::Tightened {
                seq,
                logged,
                configured,
            } => write!(
                f,
                "was last in the {logged} sandbox (sandbox/mode at seq {}), stricter than the \
                 configured {configured}: its sandbox is narrowed to read-only",
                seq.0
            ),
            ModeNote::Approval { seq, policy } => write!(
                f,
                "keeps the approval policy {} set during it (approval/policy at seq {})",
                policy.as_str(),
                seq.0
            ),
            ModeNote::SandboxNotRestored { seq, logged, kept } => write!(
                f,
                "logged sandbox {logged} at seq {}; not restored: a resumed session keeps the \
                 configured {kept}",
                seq.0
            ),
            ModeNote::ApprovalNotRestored { seq, logged, kept } => write!(
                f,
                "logged approval policy {} at seq {}; not restored: a resumed session keeps the \
                 configured {}",
                logged.as_str(),
                seq.0,
                kept.as_str()
            ),
            ModeNote::UnknownSandbox { seq, mode } => write!(
                f,
                "has a sandbox/mode keel does not know at seq {} ({mode:?}): failing closed, its \
                 sandbox is narrowed to read-only",
                seq.0
            ),
            ModeNote::UnknownApproval { seq, policy, kept } => write!(
                f,
                "has an approval/policy keel does not know at seq {} ({policy:?}): failing \
                 closed, its approval policy is {}",
                seq.0,
                kept.as_str()
            ),
        }
    }
}

/// The modes a session whose log holds `events` keeps when resumed under the `configured`
/// sandbox and approval policy (see the module's table).
pub fn kept_modes<'a>(
    events: impl IntoIterator<Item = &'a keel_protocol::SessionEvent>,
    sandbox: SandboxMode,
    approval: ApprovalPolicy,
) -> KeptModes {
    let mut sandboxes = 0u32;
    let mut policies = 0u32;
    let mut last_sandbox: Option<(Seq, &str)> = None;
    let mut last_policy: Option<(Seq, &str)> = None;
    for ev in events {
        match &ev.body {
            EventBody::SandboxMode(m) => {
                sandboxes += 1;
                if sandboxes > 1 {
                    last_sandbox = Some((ev.seq, m.mode.as_str()));
                }
            }
            EventBody::ApprovalPolicy(p) => {
                policies += 1;
                if policies > 1 {
                    last_policy = Some((ev.seq, p.policy.as_str()));
                }
            }
            _ => {}
        }
    }
    let mut kept = KeptModes::default();
    if let Some((seq, mode)) = last_sandbox {
        match mode.parse::<SandboxMode>() {
            Ok(SandboxMode::ReadOnly) => {
                kept.read_only = sandbox != SandboxMode::ReadOnly;
                if kept.read_only {
                    kept.notes.push(ModeNote::ReadOnly { seq });
                }
            }
            Ok(logged) if logged == sandbox => {}
            Ok(logged) if sandbox.stricter(logged) == logged => {
                kept.read_only = true;
                kept.notes.push(ModeNote::Tightened {
                    seq,
                    logged,
                    configured: sandbox,
                });
            }
            Ok(logged) => kept.notes.push(ModeNote::SandboxNotRestored {
                seq,
                logged,
                kept: sandbox,
            }),
            Err(_) => {
                kept.read_only = sandbox != SandboxMode::ReadOnly;
                kept.notes.push(ModeNote::UnknownSandbox {
                    seq,
                    mode: mode.to_owned(),
                });
            }
        }
    }
    if let Some((seq, policy)) = last_policy {
        let restored = match ApprovalPolicy::parse(policy) {
            Some(logged) if logged == approval => approval,
            Some(logged) if approval.stricter(logged) == logged => {
                kept.notes.push(ModeNote::Approval {
                    seq,
                    policy: logged,
                });
                logged
            }
            Some(logged) => {
                kept.notes.push(ModeNote::ApprovalNotRestored {
                    seq,
                    logged,
                    kept: approval,
                });
                approval
            }
            None => {
                let closed = approval.stricter(ApprovalPolicy::Ask);
                kept.notes.push(ModeNote::UnknownApproval {
                    seq,
                    policy: policy.to_owned(),
                    kept: closed,
                });
                closed
            }
        };
        kept.approval = Some(restored);
    }
    kept
}

/// The last `plan/mode` event of `session` (what plan mode it was left in).
pub fn last_plan_mode(session: &keel_session::Session) -> Option<keel_protocol::PlanModeEvent> {
    session
        .whole_event_iter()
        .filter_map(|ev| match &ev.body {
            EventBody::PlanMode(p) => Some(p),
            _ => None,
        })
        .last()
        .map(|p| (**p).clone())
}

/// The event a model chosen during a session is logged as (ignorable, `{"model": NAME}`, with
/// `"effort": EFFORT` when a reasoning effort was chosen too): an editor's model selector
/// (`keel acp`'s `session/set_config_option`), the UI's `/model`, `keel serve`'s model route.
/// The last one is the session's model when an agent is built over it again ([`last_model`]);
/// the last effort chosen stays the session's through later model switches ([`last_effort`]).
pub const MODEL_EVENT: &str = "model/selected";

/// The model the session's last [`MODEL_EVENT`] chose, if any (a record without a string
/// `model` is skipped).
pub fn last_model(session: &keel_session::Session) -> Option<String> {
    session
        .whole_event_iter()
        .filter_map(|ev| match &ev.body {
            EventBody::Other(o) if o.type_name == MODEL_EVENT => o
                .data
                .get("model")
                .and_then(serde_json::Value::as_str)
                .filter(|m| !m.is_empty())
                .map(str::to_owned),
            _ => None,
        })
        .last()
}

/// The reasoning effort the session's last [`MODEL_EVENT`] with a string `effort` chose.
pub fn last_effort(session: &keel_session::Session) -> Option<String> {
    session
        .whole_event_iter()
        .filter_map(|ev| match &ev.body {
            EventBody::Other(o) if o.type_name == MODEL_EVENT => o
                .data
                .get("effort")
                .and_then(serde_json::Value::as_str)
                .filter(|m| !m.is_empty())
                .map(str::to_owned),
            _ => None,
        })
        .last()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use keel_protocol::{
        ApprovalPolicyEvent, PlanModeEvent, SandboxModeEvent, SessionHeader, SessionId,
    };
    use keel_session::Session;
    use pretty_assertions::assert_eq;

    fn sandbox(mode: &str) -> EventBody {
        EventBody::SandboxMode(Box::new(SandboxModeEvent {
            mode: mode.to_owned(),
            enforcement: None,
        }))
    }

    fn policy(policy: &str) -> EventBody {
        EventBody::ApprovalPolicy(Box::new(ApprovalPolicyEvent {
            policy: policy.to_owned(),
        }))
    }

    /// A session whose log holds `bodies` (the start records first, as keel writes them).
    fn session(bodies: Vec<EventBody>) -> Session {
        let mut s = Session::new(SessionHeader::new(SessionId("s".into()), 0, None));
        for b in bodies {
            s.push(b).unwrap();
        }
        s
    }

    fn kept(bodies: Vec<EventBody>, sb: SandboxMode, ap: ApprovalPolicy) -> KeptModes {
        kept_modes(session(bodies).whole_event_iter(), sb, ap)
    }

    const WW: SandboxMode = SandboxMode::WorkspaceWrite;
    const ASK: ApprovalPolicy = ApprovalPolicy::Ask;

    #[test]
    fn the_last_model_logged_is_the_session_s() {
        let chosen = |m: serde_json::Value| {
            EventBody::Other(Box::new(keel_protocol::OtherEvent {
                type_name: MODEL_EVENT.to_owned(),
                data: m,
            }))
        };
        assert_eq!(last_model(&session(vec![sandbox("read-only")])), None);
        let mut s = session(vec![]);
        for m in [
            serde_json::json!({"model": "deepseek-chat"}),
            serde_json::json!({"model": "deepseek-reasoner"}),
            // A record without a model name is skipped.
            serde_json::json!({"model": 7}),
        ] {
            let mut event = s.stamp(chosen(m), None);
            event.ignorable = true;
            s.append(event).unwrap();
        }
        assert_eq!(last_model(&s).as_deref(), Some("deepseek-reasoner"));
        assert_eq!(last_effort(&s), None);
        for m in [
            serde_json::json!({"model": "deepseek-reasoner", "effort": "low"}),
            // A later switch of model alone keeps the effort chosen.
            serde_json::json!({"model": "deepseek-chat"}),
        ] {
            let mut event = s.stamp(chosen(m), None);
            event.ignorable = true;
            s.append(event).unwrap();
        }
        assert_eq!(last_model(&s).as_deref(), Some("deepseek-chat"));
        assert_eq!(last_effort(&s).as_deref(), Some("low"));
    }

    #[test]
    fn the_start_records_are_configuration_not_modes() {
        // Started read-only with auto approvals, resumed as configured now.
        let got = kept(vec![sandbox("read-only"), policy("auto")], WW, ASK);
        assert_eq!(got, KeptModes::default());
        // dsh's spellings at the start are not read at all.
        let got = kept(
            vec![sandbox("danger-full-access"), policy("never")],
            WW,
            ASK,
        );
        assert_eq!(got, KeptModes::default());
    }

    #[test]
    fn the_last_change_is_kept() {
        let start = || vec![sandbox("workspace-write"), policy("ask")];
        let mut read_only = start();
        read_only.push(sandbox("read-only"));
        assert_eq!(
            kept(read_only.clone(), WW, ASK),
            KeptModes {
                read_only: true,
                approval: None,
                notes: vec![ModeNote::ReadOnly { seq: Seq(2) }],
            }
        );
        // Already read-only by configuration: nothing to narrow, nothing to say.
        assert_eq!(
            kept(read_only, SandboxMode::ReadOnly, ASK),
            KeptModes::default()
        );
        // A stricter policy logged during the session is kept.
        let mut never = start();
        never.extend([
            sandbox("read-only"),
            sandbox("workspace-write"),
            policy("never"),
        ]);
        assert_eq!(
            kept(never, WW, ASK),
            KeptModes {
                read_only: false,
                approval: Some(ApprovalPolicy::Deny),
                notes: vec![ModeNote::Approval {
                    seq: Seq(4),
                    policy: ApprovalPolicy::Deny
                }],
            }
        );
        // Back to the default: the configured policy, or the logged one when that is
        // stricter (the configured auto is looser than the logged ask, so ask).
        let mut back = start();
        back.extend([policy("auto"), policy("ask")]);
        assert_eq!(
            kept(back.clone(), WW, ASK),
            KeptModes {
                read_only: false,
                approval: Some(ASK),
                notes: vec![],
            }
        );
        assert_eq!(
            kept(back, WW, ApprovalPolicy::Allow),
            KeptModes {
                read_only: false,
                approval: Some(ASK),
                notes: vec![ModeNote::Approval {
                    seq: Seq(3),
                    policy: ASK
                }],
            }
        );
    }

    #[test]
    fn a_resume_never_loosens_a_looser_logged_mode_is_noted_not_restored() {
        let start = || vec![sandbox("workspace-write"), policy("ask")];
        // auto set during the session (an editor's session/set_mode, or a crafted log): the
        // configured ask or never holds.
        let mut auto = start();
        auto.extend([
            sandbox("read-only"),
            sandbox("workspace-write"),
            policy("auto"),
        ]);
        for configured in [ASK, ApprovalPolicy::Deny] {
            assert_eq!(
                kept(auto.clone(), WW, configured),
                KeptModes {
                    read_only: false,
                    approval: Some(configured),
                    notes: vec![ModeNote::ApprovalNotRestored {
                        seq: Seq(4),
                        logged: ApprovalPolicy::Allow,
                        kept: configured,
                    }],
                }
            );
        }
        // Configured auto: the logged auto is no change.
        assert_eq!(
            kept(auto, WW, ApprovalPolicy::Allow),
            KeptModes {
                read_only: false,
                approval: Some(ApprovalPolicy::Allow),
                notes: vec![],
            }
        );
        // ask is looser than a configured never.
        let mut ask = start();
        ask.push(policy("ask"));
        assert_eq!(
            kept(ask, WW, ApprovalPolicy::Deny).notes,
            vec![ModeNote::ApprovalNotRestored {
                seq: Seq(2),
                logged: ASK,
                kept: ApprovalPolicy::Deny,
            }]
        );
        // A looser sandbox logged: the configured one holds.
        let got = kept(
            vec![
                sandbox("read-only"),
                policy("ask"),
                sandbox("workspace-write"),
            ],
            SandboxMode::ReadOnly,
            ASK,
        );
        assert_eq!(
            got,
            KeptModes {
                read_only: false,
                approval: None,
                notes: vec![ModeNote::SandboxNotRestored {
                    seq: Seq(2),
                    logged: WW,
                    kept: SandboxMode::ReadOnly,
                }],
            }
        );
        let got = kept(
            vec![sandbox("workspace-write"), sandbox("full-access")],
            WW,
            ASK,
        );
        assert_eq!(
            got.notes,
            vec![ModeNote::SandboxNotRestored {
                seq: Seq(1),
                logged: SandboxMode::FullAccess,
                kept: WW,
            }]
        );
        assert!(!got.read_only);
        // Not a problem: the log was read, the configuration holds.
        let auto_note = ModeNote::ApprovalNotRestored {
            seq: Seq(4),
            logged: ApprovalPolicy::Allow,
            kept: ASK,
        };
        assert!(!auto_note.is_problem() && !got.notes[0].is_problem());
        assert_eq!(
            auto_note.to_string(),
            "logged approval policy allow at seq 4; not restored: a resumed session keeps the \
             configured ask"
        );
        assert_eq!(
            got.notes[0].to_string(),
            "logged sandbox full-access at seq 1; not restored: a resumed session keeps the \
             configured workspace-write"
        );
    }

    #[test]
    fn plan_mode_events_do_not_count() {
        let plan = EventBody::PlanMode(Box::new(PlanModeEvent {
            active: true,
            plan: None,
            approved: None,
        }));
        let got = kept(
            vec![sandbox("workspace-write"), plan, policy("ask")],
            WW,
            ASK,
        );
        assert_eq!(got, KeptModes::default());
    }

    #[test]
    fn a_restore_is_never_looser_than_the_log() {
        let got = kept(
            vec![
                sandbox("workspace-write"),
                sandbox("read-only"),
                sandbox("workspace-write"),
            ],
            SandboxMode::FullAccess,
            ASK,
        );
        assert_eq!(
            got,
            KeptModes {
                read_only: true,
                approval: None,
                notes: vec![ModeNote::Tightened {
                    seq: Seq(2),
                    logged: WW,
                    configured: SandboxMode::FullAccess
                }],
            }
        );
        assert!(
            got.notes[0].to_string().contains("narrowed to read-only"),
            "{}",
            got.notes[0]
        );
    }

    #[test]
    fn unknown_modes_and_policies_fail_closed() {
        let got = kept(
            vec![
                sandbox("workspace-write"),
                policy("ask"),
                sandbox("read-0nly"),
                policy("yolo"),
            ],
            WW,
            ApprovalPolicy::Allow,
        );
        assert_eq!(
            got,
            KeptModes {
                read_only: true,
                approval: Some(ASK),
                notes: vec![
                    ModeNote::UnknownSandbox {
                        seq: Seq(2),
                        mode: "read-0nly".into()
                    },
                    ModeNote::UnknownApproval {
                        seq: Seq(3),
                        policy: "yolo".into(),
                        kept: ASK
                    },
                ],
            }
        );
        assert!(got.notes.iter().all(ModeNote::is_problem));
        assert_eq!(
            got.notes[0].to_string(),
            "has a sandbox/mode keel does not know at seq 2 (\"read-0nly\"): failing closed, \
             its sandbox is narrowed to read-only"
        );
        // An unknown policy under a stricter configuration keeps the configuration.
        let got = kept(
            vec![policy("ask"), policy("yolo")],
            WW,
            ApprovalPolicy::Deny,
        );
        assert_eq!(got.approval, Some(ApprovalPolicy::Deny));
    }
}
