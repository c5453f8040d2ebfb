//! What a newcomer meets first: the welcome of a new session (where you are: model, sandbox,
//! approval, trust; and the keys that matter), `/model`'s answer and confirmation, and the
//! commands the UI answers itself: `/status`, `/cost` and `/mcp`.

// The App's own module: its types and the imports they share.
use super::*;

/// The UI's own commands (beside keel's built-ins): name, description. A custom command of
/// the same name (a Markdown file) is the workspace's and wins. (`/init` is an agent command,
/// [`keel_host::commands::InitCommand`], offered by every front end.)
pub const UI_COMMANDS: [(&str, &str); 2] = [
    ("cost", "Show the session's token usage and cost"),
    ("mcp", "Show the MCP servers and their state"),
];

/// The keys that matter, as the welcome lists them.
const KEYS: &str = "/help commands and keys · Esc Esc rewind to an earlier message · \
Shift-Tab plan mode · Ctrl-C cancel the turn (twice: exit) · Ctrl-D exit";

impl App<'_> {
    /// The first lines of a new session: where you are and the keys that matter.
    pub(super) fn welcome(&mut self, attached: bool) {
        let model = self.model_name();
        let trust = if attached {
            "as the server decided".to_owned()
        } else {
            match self.source.trust(self.source.workspace()) {
                Ok(ws) => ws.decision.describe(),
                Err(e) => e.to_string(),
            }
        };
        let text = format!(
            "Welcome to keel · model {model} · sandbox {} · approval {}\nWorkspace {} · trust: {trust}\nKeys: {KEYS}",
            self.driver.sandbox(),
            self.approval_words(),
            self.cwd.display(),
        );
        self.cells.notice(Level::Info, text);
    }

    /// The approval word in force, what it lets run unasked under the sandbox, and where it
    /// came from when known: `ask (edits and commands in the workspace run unasked; keel's
    /// default)`.
    fn approval_words(&self) -> String {
        let (approval, sandbox) = (self.driver.approval(), self.driver.sandbox());
        let word = keel_agent::ApprovalPolicy::respell(&approval);
        let said: Vec<String> = [
            keel_agent::ApprovalPolicy::unasked_words(&approval, &sandbox).map(str::to_owned),
            self.driver.approval_source().map(|s| format!("from {s}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        match said.is_empty() {
            true => word.to_owned(),
            false => format!("{word} ({})", said.join("; ")),
        }
    }

    /// The model this agent runs on: the one `/model` chose, else the agent's configured
    /// route, else the last request's.
    pub(super) fn model_name(&self) -> String {
        if let Some(m) = &self.model {
            return m.clone();
        }
        let m = self.driver.model();
        if m.is_empty() {
            self.cells.usage.model.clone()
        } else {
            m
        }
    }

    /// The status line's model (and window) from the agent, before any request names it.
    pub(super) fn show_route(&mut self) {
        let model = self.model_name();
        if !model.is_empty() {
            self.cells.usage.model = model;
        }
        if let Some(window) = self.driver.context_window()
            && window > 0
        {
            self.cells.usage.context_window = window;
        }
    }

    /// `/model [NAME]`: show the model, or switch this session to NAME (from the next
    /// request) and confirm it.
    pub(super) fn model_command(&mut self, args: &str) {
        if args.is_empty() {
            let model = self.model_name();
            self.cells.notice(
                Level::Info,
                format!("Model: {model}. /model NAME switches."),
            );
            return;
        }
        let target = Target {
            resume: Some(self.driver.session_file()),
            model: Some(args.to_owned()),
        };
        if !self.switch(target, History::Printed) {
            return;
        }
        // Kept by the session: a later resume (here, `keel resume`, an editor) builds on it,
        // as an editor's model picker does.
        if let Err(e) = self.driver.keep_model(args) {
            self.cells.notice(
                Level::Error,
                format!("the model could not be kept in the session: {e}"),
            );
        }
        let model = self.model_name();
        self.cells.notice(
            Level::Info,
            format!("Model: {model} from the next request (this session keeps it)."),
        );
    }

    /// `/status`: the session, model, endpoint, modes, trust and usage.
    pub(super) fn status(&mut self) {
        let u = &self.cells.usage;
        let model = self.model_name();
        let endpoint = match self.source.endpoint() {
            Ok(e) => format!("{} at {}", e.provider, e.base_url),
            Err(_) => "as the server decided".to_owned(),
        };
        let trust = match self.source.trust(self.source.workspace()) {
            Ok(ws) => ws.decision.describe(),
            Err(e) => e.to_string(),
        };
        let text = format!(
            "Session {} ({})\nModel {} · provider {} · context {} / {} tokens ({}%)\nSandbox {} · approval {}{} · Trust {}\nRequests {} · input {} tokens, {}% from cache · output {} tokens",
            self.driver.session_id(),
            self.driver.session_file().display(),
            model,
            endpoint,
            u.last_prompt,
            u.context_window,
            u.context_percent(),
            self.cells.sandbox,
            self.approval_words(),
            if self.cells.plan_mode {
                " · plan mode"
            } else {
                ""
            },
            trust,
            u.requests,
            u.prompt,
            u.cache_percent(),
            u.output
        );
        let cost = self.cost_text(&model);
        self.cells.notice(Level::Info, format!("{text}\n{cost}"));
    }

    /// What the session's tokens cost so far at `model`'s prices.
    fn cost_text(&self, model: &str) -> String {
        let u = &self.cells.usage;
        match self.source.price(model) {
            Some(p) => format!(
                "Cost ${:.4} at {}'s prices (input ${} / cached ${} / output ${} per million tokens)",
                p.cost(u.prompt, u.cached, u.output),
                model,
                p.input,
                p.cached_input,
                p.output
            ),
            None => format!(
                "Cost unknown: no price for {model} (set input_price, cached_input_price and output_price, dollars per million tokens, in [models.\"{model}\"])"
            ),
        }
    }

    /// `/cost`: the session's token usage and what it cost.
    pub(super) fn cost(&mut self) {
        let u = &self.cells.usage;
        let usage = format!(
            "Requests {} · input {} tokens ({} from cache) · output {} tokens",
            u.requests, u.prompt, u.cached, u.output
        );
        let model = self.model_name();
        let cost = self.cost_text(&model);
        self.cells.notice(Level::Info, format!("{usage}\n{cost}"));
    }

    /// `/mcp`: the workspace's MCP servers as its agents get them (configured, on or off, and
    /// why one is left out), and the tools of those this agent connected.
    pub(super) fn mcp(&mut self) {
        let text = match self.source.extensions(self.source.workspace()) {
            Err(e) => format!("MCP servers cannot be listed here: {e}"),
            Ok(ext) if ext.mcp_servers.is_empty() => {
                "No MCP servers are configured for this workspace (add them under [mcp_servers] \
                 in the configuration, or in .mcp.json of a trusted workspace)."
                    .to_owned()
            }
            Ok(ext) => {
                let tools = self.driver.tool_names();
                let mut s = "MCP servers:".to_owned();
                for server in &ext.mcp_servers {
                    let state = match (&server.problem, server.enabled) {
                        (Some(p), _) => format!("left out: {p}"),
                        (None, false) => "off".to_owned(),
                        (None, true) => {
                            let prefix = format!("mcp__{}__", server.name);
                            let n = tools.iter().filter(|t| t.starts_with(&prefix)).count();
                            format!("on, {n} tools")
                        }
                    };
                    s.push_str(&format!(
                        "\n  {}  {state}  ({}; {})",
                        server.name, server.what, server.layer
                    ));
                }
                s
            }
        };
        self.cells.notice(Level::Info, text);
    }

    /// Run the UI's own command `name` (one of [`UI_COMMANDS`]).
    pub(super) fn ui_command(&mut self, name: &str) {
        match name {
            "cost" => self.cost(),
            "mcp" => self.mcp(),
            _ => self
                .cells
                .notice(Level::Error, format!("/{name} is not available here")),
        }
    }
}
