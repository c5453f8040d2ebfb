//! Plan mode: a shared flag ([`PlanState`]), the policy section the system prompt carries while
//! it is active ([`PlanModeSection`]), and [`enter_plan_mode`] for the loop's `/plan`.
//!
//! While plan mode is active the pipeline's built-in pre-execute policy denies every tool whose
//! effect is not read-only (write, edit, bash…). The model leaves plan mode by calling
//! `exit_plan_mode{plan}` (see [`crate::builtins::plan`]), which asks the caller for approval
//! and, once approved, clears the flag and emits `plan/mode{active:false, plan, approved:true}`.
//! When nobody can answer now (headless), the plan is handed to the user instead: plan mode
//! stays on, `plan/mode{active:true, plan, approved:false}` is emitted and the turn ends after
//! the step with [`PLAN_AWAITS_APPROVAL`]; the user approves later, between turns.

use crate::caller::ToolCaller;
use keel_protocol::{EventBody, PlanModeEvent};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether plan mode is active. Shared (`Arc`) between the loop, the pipeline and the
/// `exit_plan_mode` tool.
#[derive(Debug, Default)]
pub struct PlanState {
    active: AtomicBool,
}

impl PlanState {
    /// Inactive plan mode.
    pub fn new() -> Self {
        Self::default()
    }

    /// True while plan mode is active.
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// Set the flag (no event: use [`enter_plan_mode`] or `exit_plan_mode` to log changes).
    pub fn set_active(&self, active: bool) {
        self.active.store(active, Ordering::Release);
    }

    /// The system-prompt section to include while plan mode is active.
    pub fn prompt_section(&self) -> Option<PlanModeSection> {
        self.is_active().then_some(PlanModeSection)
    }
}

/// The `prompt/section` text injected while plan mode is active.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanModeSection;

impl PlanModeSection {
    /// The model-visible text (under 600 bytes).
    pub const TEXT: &'static str = "# Plan mode is active\n\
Do not change anything yet: tools that write files or run commands are refused. Explore with \
read, glob and grep, then call exit_plan_mode with a concise, step-by-step plan (files to \
change, how, and how to verify). The user approves or rejects it; only after approval may you \
make changes. Ask open questions with ask_user_question.";

    /// The text.
    pub fn text(&self) -> &'static str {
        Self::TEXT
    }
}

/// Why a turn ends when `exit_plan_mode` handed its plan to the user (the `turn/end` reason,
/// kind `blocked`).
pub const PLAN_AWAITS_APPROVAL: &str =
    "the plan awaits the user's approval (plan mode stays on until it is approved)";

/// The policy message shown to the model when plan mode refuses a call.
pub(crate) fn plan_mode_denial(tool: &str) -> String {
    format!(
        "plan mode is active: '{tool}' could change the workspace and is not allowed until the \
         user approves a plan. Keep exploring with read-only tools, then call exit_plan_mode \
         with your plan."
    )
}

/// Enter plan mode (the loop's `/plan`): set the flag and emit `plan/mode{active:true}`.
/// Does nothing when already active.
pub async fn enter_plan_mode(state: &PlanState, caller: &dyn ToolCaller) {
    if state.is_active() {
        return;
    }
    state.set_active(true);
    caller
        .emit(EventBody::PlanMode(Box::new(PlanModeEvent {
            active: true,
            plan: None,
            approved: None,
        })))
        .await;
}
