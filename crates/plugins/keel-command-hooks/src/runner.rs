//! Running one event's matching commands through the subprocess service, with their
//! `hook/invoked` and `hook/result` events.
//!
//! A dispatch builds the JSON payload once, appends one `hook/invoked` per command, runs the
//! commands concurrently (as Claude Code does) as `/bin/sh -c COMMAND` in the project directory
//! with the payload on stdin, interprets each exit ([`super::output`]) and appends one
//! `hook/result` per command in configuration order, so the log does not depend on which
//! process finished first. Children get the subprocess service's scrubbed environment
//! (names containing KEY, PASSWORD, SECRET or TOKEN removed unless forwarded) plus
//! `CLAUDE_PROJECT_DIR` and `KEEL_PROJECT_DIR` (and `CLAUDE_PLUGIN_ROOT` for a plugin bundle's
//! command); a timeout or a cancelled turn stops the whole
//! process group (SIGTERM, grace, SIGKILL).

use crate::HooksOptions;
use crate::config::{HookCommand, HookEvent, HooksConfig};
use crate::output::{Effect, RunOutput, Status, interpret};
use keel_agent::{AgentHandle, AgentSlot};
use keel_protocol::sync::Locked;
use keel_protocol::{EventBody, HookInvoked, HookResult};
use keel_tools::subprocess::{CommandSpec, RunEnd, SubprocessService};
use serde_json::{Map, Value};
use std::sync::{Mutex, MutexGuard};
use tokio_util::sync::CancellationToken;

/// Bytes of each output stream kept (JSON decisions must fit).
const OUTPUT_CAP: usize = 1 << 20;

/// Loop-guard and halt state shared by the adapters.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// `SessionStart` ran (once per install).
    pub(crate) session_started: bool,
    /// A tool hook's `continue: false` waits to stop the next step of this turn, with this
    /// reason.
    pub(crate) halt: Option<(u32, String)>,
    /// Turn and count of `Stop` continuations in it.
    pub(crate) stop_continued: Option<(u32, u32)>,
}

/// Everything the adapters share.
pub(crate) struct Shared {
    pub(crate) config: HooksConfig,
    pub(crate) runner: SubprocessService,
    pub(crate) options: HooksOptions,
    agent: AgentSlot,
    state: Mutex<State>,
}

impl Shared {
    pub(crate) fn new(
        config: HooksConfig,
        runner: SubprocessService,
        options: HooksOptions,
    ) -> Shared {
        Shared {
            config,
            runner,
            options,
            agent: AgentSlot::new(),
            state: Mutex::new(State::default()),
        }
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        self.state.locked()
    }

    /// Bind the agent whose log receives tool hooks' events (first binding wins). Weak, so the
    /// agent's own hook registry holding these hooks does not keep it alive.
    pub(crate) fn bind(&self, agent: &AgentHandle) {
        self.agent.bind(agent);
    }

    /// True when `agent` is the bound agent (not, say, a child agent sharing these hooks).
    pub(crate) fn is_bound(&self, agent: &AgentHandle) -> bool {
        self.agent.holds(agent)
    }

    /// The bound agent, while it lives.
    pub(crate) fn agent(&self) -> Option<AgentHandle> {
        self.agent.get()
    }

    /// The fields every event's payload has.
    pub(crate) fn base_payload(
        &self,
        agent: Option<&AgentHandle>,
        event: HookEvent,
    ) -> Map<String, Value> {
        let (session_id, transcript) = match agent {
            Some(a) => (
                a.session_id().as_str().to_owned(),
                a.transcript_path().display().to_string(),
            ),
            None => (String::new(), String::new()),
        };
        let mut p = Map::new();
        p.insert("session_id".into(), Value::String(session_id));
        p.insert("transcript_path".into(), Value::String(transcript));
        p.insert(
            "cwd".into(),
            Value::String(self.options.cwd.display().to_string()),
        );
        p.insert(
            "hook_event_name".into(),
            Value::String(event.as_str().to_owned()),
        );
        p
    }

    /// Run `commands` for `event` with `payload`; one [`Effect`] per command, in order.
    pub(crate) async fn dispatch(
        &self,
        agent: Option<&AgentHandle>,
        event: HookEvent,
        tool: Option<&str>,
        commands: Vec<HookCommand>,
        payload: Map<String, Value>,
    ) -> Vec<Effect> {
        if commands.is_empty() {
            return Vec::new();
        }
        let stdin = Value::Object(payload).to_string().into_bytes();
        let cancel = match agent {
            Some(a) => a.turn_cancel_token(),
            None => CancellationToken::new(),
        };
        for cmd in &commands {
            log(
                agent,
                EventBody::HookInvoked(Box::new(HookInvoked {
                    hook_event: event.as_str().to_owned(),
                    command: cmd.command.clone(),
                    tool_name: tool.map(str::to_owned),
                })),
            );
        }
        let runs =
            futures::future::join_all(commands.iter().map(|c| self.run_one(c, &stdin, &cancel)))
                .await;
        let mut effects = Vec::with_capacity(runs.len());
        for out in runs {
            let effect = interpret(event, &out);
            log(
                agent,
                EventBody::HookResult(Box::new(HookResult {
                    hook_event: event.as_str().to_owned(),
                    command: out.command.clone(),
                    exit_code: match out.status {
                        Status::Exited(code) => Some(code),
                        _ => None,
                    },
                    decision: effect.label.to_owned(),
                    message: effect.message(),
                    duration_ms: u64::try_from(out.duration.as_millis()).unwrap_or(u64::MAX),
                })),
            );
            effects.push(effect);
        }
        effects
    }

    async fn run_one(
        &self,
        cmd: &HookCommand,
        stdin: &[u8],
        cancel: &CancellationToken,
    ) -> RunOutput {
        let limit = cmd.timeout.unwrap_or(self.options.default_timeout);
        let dir = &self.options.cwd;
        let mut spec = CommandSpec::new(["/bin/sh", "-c", cmd.command.as_str()])
            .cwd(dir)
            .stdin(stdin.to_vec())
            .env("CLAUDE_PROJECT_DIR", dir)
            .env("KEEL_PROJECT_DIR", dir)
            .timeout(limit)
            .cap(OUTPUT_CAP)
            .label("hook");
        if let Some(root) = &cmd.plugin_root {
            spec = spec.env("CLAUDE_PLUGIN_ROOT", root);
        }
        let started = std::time::Instant::now();
        match self.runner.run(spec, cancel).await {
            Ok(out) => RunOutput {
                command: cmd.command.clone(),
                status: match (out.end, out.code, out.signal) {
                    (RunEnd::TimedOut, _, _) => Status::TimedOut(limit),
                    (RunEnd::Cancelled, _, _) => Status::Cancelled,
                    (RunEnd::Exited, Some(code), _) => Status::Exited(code),
                    (RunEnd::Exited, None, sig) => Status::Signalled(sig.unwrap_or(0)),
                },
                stdout: out.stdout.text(),
                stderr: out.stderr.text(),
                duration: out.duration,
            },
            Err(e) => RunOutput {
                command: cmd.command.clone(),
                status: Status::NotStarted(e.to_string()),
                stdout: String::new(),
                stderr: String::new(),
                duration: started.elapsed(),
            },
        }
    }
}

/// Append `body` to the agent's log. A refused append is not reported here: the log is then
/// broken and the loop's own next append fails the turn with the error.
fn log(agent: Option<&AgentHandle>, body: EventBody) {
    if let Some(a) = agent {
        let _ = a.push(body);
    }
}
