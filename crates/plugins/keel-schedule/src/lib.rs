//! keel's schedule and present plugins (dsh's `schedule_*` tools and `present`), both off by
//! default (their schemas would not fit the default request budget); a user turns them on
//! with `[[plugins]] id = "schedule"` / `id = "present"` in `$KEEL_HOME/config.toml`.
//!
//! - **State** lives in the session log ([`state`]): ignorable `schedule/created`,
//!   `schedule/deleted`, `schedule/fired` and `schedule/missed` events, folded back when the
//!   agent is bound ([`state::Fold`]). Ids are `sched-N` and never reused.
//! - **Tools** ([`tools`]): `schedule_create {prompt, after_seconds | every_seconds | at}`
//!   (exactly one; `every_seconds` at least 300, or what [`service::MIN_EVERY_ENV`] says in
//!   tests), `schedule_list`, `schedule_delete {id}`.
//! - **Firing** ([`service`]): a timer task per agent (on the tokio runtime the agent runs
//!   on) logs `schedule/fired`, then delivers the prompt as a `keel/schedule` user message: a
//!   follow-up turn when the agent is idle, into the running turn otherwise. A recurring
//!   schedule moves to its next time. A front end that keeps the session open (the TUI, ACP)
//!   runs the follow-up turn; `keel run` runs it only while the run is still going (it does not
//!   wait for schedules; `docs/schedules.md`).
//! - **Missed**: when the agent is bound, every schedule whose time passed while keel was not
//!   running is logged `schedule/missed` (once, with how many times it came due) and the model
//!   is told at its next turn, never run silently.
//! - **`present`** ([`present`]): its own plugin in this crate.
//! - **How their events show** ([`presenter`]): firings as markers, misses as notices,
//!   presented files listed at the turn's end, in every front end.
#![deny(missing_docs)]

pub mod command;
pub mod present;
pub mod presenter;
pub mod service;
pub mod state;
pub mod tools;

pub use present::{PRESENT_EVENT, PRESENT_ID, PresentPlugin, presented};
pub use service::{MIN_EVERY_ENV, MIN_EVERY_SECONDS, Shared};
pub use state::{CREATED_EVENT, DELETED_EVENT, FIRED_EVENT, Fold, MISSED_EVENT, Schedule};
pub use tools::SCHEDULE_TOOL_NAMES;

use keel_agent::plugin::{InstallContext, Plugin, PluginError, PluginId, plugin_config};
use keel_agent::seams::{ChildBuild, ChildSetup};
use serde_json::Value;
use std::sync::Arc;

/// The schedule plugin's id (`[[plugins]] id = "schedule"`; its messages' source is
/// `keel/schedule`).
pub const ID: PluginId = keel_agent::plugin_id!("schedule");

/// Neither plugin takes settings.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NoConfig {}

/// The `schedule` plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct SchedulePlugin;

impl Plugin for SchedulePlugin {
    fn id(&self) -> PluginId {
        ID
    }
    fn description(&self) -> &'static str {
        "schedules: schedule_create/list/update/delete; prompts sent to the agent later, durable in the session"
    }
    fn enabled_by_default(&self) -> bool {
        false
    }

    fn presenter(&self) -> Option<keel_protocol::present::MakePresenter> {
        Some(crate::presenter::schedule())
    }
    fn install(&self, ctx: &mut InstallContext, config: Value) -> Result<(), PluginError> {
        let _: NoConfig = plugin_config(ID, config)?;
        let shared = Shared::new();
        ctx.tools.push(Arc::new(tools::ScheduleCreateTool {
            shared: shared.clone(),
        }));
        ctx.tools.push(Arc::new(tools::ScheduleListTool {
            shared: shared.clone(),
        }));
        ctx.tools.push(Arc::new(tools::ScheduleUpdateTool {
            shared: shared.clone(),
        }));
        ctx.tools.push(Arc::new(tools::ScheduleDeleteTool {
            shared: shared.clone(),
        }));
        // A child's schedule would outlive it (and write into a log nobody resumes).
        ctx.hooks
            .subagent_build
            .push(Arc::new(|_: &ChildBuild, setup: &mut ChildSetup| {
                setup
                    .withheld
                    .extend(SCHEDULE_TOOL_NAMES.iter().map(|n| (*n).to_owned()));
            }));
        // The agent may be built outside the runtime it runs on: the timer starts with its
        // first event logged on a runtime, if not before.
        let starter = shared.clone();
        ctx.agent_hooks
            .session_event
            .push(Arc::new(move |_: &keel_protocol::SessionEvent| {
                starter.ensure_timer();
            }));
        ctx.commands.push(Arc::new(command::ScheduleCommand {
            shared: shared.clone(),
        }));
        ctx.on_agent.push(Box::new(move |agent| shared.bind(agent)));
        Ok(())
    }
}
