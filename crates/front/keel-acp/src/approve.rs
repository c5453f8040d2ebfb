//! Approvals as `session/request_permission`: every call keel's policy asks about (and the plan
//! `exit_plan_mode` hands in) is put to the client with three options — allow once, allow
//! always (this command for `bash`, the tool otherwise, for the rest of the session), reject —
//! and the answer becomes keel's [`ApprovalOutcome`], which the loop logs as
//! `approval/decided` exactly as for the terminal UI.

use crate::map;
use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    SessionId,
};
use futures::FutureExt;
use futures::future::BoxFuture;
use keel_agent::{Approver, allow_key};
use keel_protocol::ToolCallBlock;
use keel_protocol::sync::Locked;
use keel_tools::ApprovalOutcome;
use keel_tools::escalation;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

/// Option id: allow this call.
pub const ALLOW_ONCE: &str = "allow_once";
/// Option id: allow this command (`bash`) or tool for the rest of the session.
pub const ALLOW_ALWAYS: &str = "allow_always";
/// Option id: refuse this call.
pub const REJECT: &str = "reject";

/// Asks the ACP client.
pub struct AcpApprover {
    cx: ConnectionTo<Client>,
    session: Arc<OnceLock<SessionId>>,
    cwd: PathBuf,
    allowed: Mutex<HashSet<String>>,
}

impl AcpApprover {
    /// An approver asking over `cx` for the session whose id is set in `session` once known.
    pub fn new(cx: ConnectionTo<Client>, session: Arc<OnceLock<SessionId>>, cwd: PathBuf) -> Self {
        Self {
            cx,
            session,
            cwd,
            allowed: Mutex::new(HashSet::new()),
        }
    }

    fn allowed(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.allowed.locked()
    }
}

impl Approver for AcpApprover {
    fn decide<'a>(
        &'a self,
        call: &'a ToolCallBlock,
        reason: &'a str,
    ) -> BoxFuture<'a, ApprovalOutcome> {
        let plan = call.name == "exit_plan_mode";
        // A call asking to leave the sandbox: the person reads why, and may allow it once only.
        let escalates = serde_json::from_str::<serde_json::Value>(&call.arguments)
            .ok()
            .and_then(|args| args.as_object().map(escalation::requested))
            .unwrap_or(false);
        if !plan && self.allowed().contains(&allow_key(call)) {
            return futures::future::ready(ApprovalOutcome::Approved).boxed();
        }
        async move {
            let Some(session) = self.session.get().cloned() else {
                return ApprovalOutcome::Denied {
                    reason: Some("the ACP session is not open yet".into()),
                };
            };
            let mut subject =
                map::permission_subject(&self.cwd, &call.id, &call.name, &call.arguments);
            if plan {
                subject.fields.title = Some("Approve the plan and start working".into());
                let args: serde_json::Value =
                    serde_json::from_str(&call.arguments).unwrap_or_default();
                let text = args
                    .get("plan")
                    .and_then(|p| p.as_str())
                    .unwrap_or_default();
                subject.fields.content = Some(vec![map::text_content(text.to_owned())]);
            }
            if escalates {
                let title = subject.fields.title.take().unwrap_or_default();
                subject.fields.title = Some(format!("Outside the sandbox: {title}"));
                let mut content = subject.fields.content.take().unwrap_or_default();
                content.insert(0, map::text_content(reason.to_owned()));
                subject.fields.content = Some(content);
            }
            let mut options = vec![PermissionOption::new(
                ALLOW_ONCE,
                if plan { "Approve" } else { "Allow once" },
                PermissionOptionKind::AllowOnce,
            )];
            if !plan && !escalates {
                options.push(PermissionOption::new(
                    ALLOW_ALWAYS,
                    "Allow always",
                    PermissionOptionKind::AllowAlways,
                ));
            }
            options.push(PermissionOption::new(
                REJECT,
                "Reject",
                PermissionOptionKind::RejectOnce,
            ));
            let asked = self
                .cx
                .send_request(RequestPermissionRequest::new(session, subject, options))
                .block_task()
                .await;
            match asked {
                Ok(answer) => match answer.outcome {
                    RequestPermissionOutcome::Selected(s) => match &*s.option_id.0 {
                        ALLOW_ONCE => ApprovalOutcome::Approved,
                        ALLOW_ALWAYS => {
                            self.allowed().insert(allow_key(call));
                            ApprovalOutcome::Approved
                        }
                        _ => ApprovalOutcome::Denied {
                            reason: Some("the user rejected this call".into()),
                        },
                    },
                    RequestPermissionOutcome::Cancelled => ApprovalOutcome::Denied {
                        reason: Some("the turn was cancelled".into()),
                    },
                    _ => ApprovalOutcome::Denied {
                        reason: Some("the client gave no answer keel knows".into()),
                    },
                },
                Err(e) => ApprovalOutcome::Denied {
                    reason: Some(format!("the client could not be asked: {}", e.message)),
                },
            }
        }
        .boxed()
    }
}
