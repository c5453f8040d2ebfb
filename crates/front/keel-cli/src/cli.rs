//! Command-line syntax (clap). Every flag documented here shows in `--help`, but those marked
//! `hide = true` (passed only by keel itself). [`help`] makes `keel -h` a one-screen overview and
//! keeps the agent flags out of the help of the commands that run no agent.
//!
//! Here: the top level ([`Cli`]), the global flags every command takes ([`Common`]), how a
//! run starts ([`ModeArgs`]) and the list of commands ([`Command`]). Each command's own
//! arguments are beside it: [`sessions`] for the commands that run or work on sessions (run,
//! resume, rewind, fork, sessions, trace, chat…), [`config`] for configuration, trust and MCP
//! servers, [`serve`] for the servers (mcp-server, acp) and batches.

mod config;
mod help;
mod plugin;
mod serve;
mod sessions;
mod typo;

use clap::{Args, Parser, Subcommand, ValueEnum};
pub use config::{ConfigCommand, LoginArgs, LogoutArgs, McpAddArgs, McpCommand, TrustArgs};
pub use plugin::{MarketplaceCommand, PluginCommand, PluginSwitch};
pub use serve::{AcpArgs, AttachArgs, BatchArgs, BatchJobArgs, McpServerArgs, ServeArgs, WebArgs};
pub use sessions::{
    CardsCommand, ChatArgs, CompactArgs, ContinuityCommand, DemoArgs, ExportFormat, ForkArgs,
    ProvenanceCommand, ResumeArgs, ReviewArgs, RewindArgs, RunArgs, SessionsCommand, TraceArgs,
    TraceDirection, TraceFormatArg,
};
use std::path::PathBuf;

/// keel — an agent harness for DeepSeek models (and any OpenAI-compatible endpoint).
///
/// `keel` in a terminal opens the interactive UI in the current directory (`keel "PROMPT"`
/// sends a first prompt; docs/tui.md). Without a terminal (a pipe, CI) `keel "PROMPT"` runs
/// headless like `keel run`. A lone word close to a command's name (`keel sesions`) is refused
/// as a mistyped command, not sent: `keel run WORD` sends it.
#[derive(Debug, Parser)]
#[command(name = "keel", version, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub common: Common,
    /// The first prompt of an interactive session (headless without a terminal).
    #[arg(value_name = "PROMPT")]
    pub prompt: Option<String>,
    /// Plan mode or a permission mode for the session `keel` opens (as for `keel run`).
    #[command(flatten)]
    pub mode: ModeArgs,
    /// Continue the latest session of this directory, as `keel resume --last [PROMPT]` (Claude
    /// Code's `--continue`; `-c` is keel's configuration override).
    #[arg(long = "continue")]
    pub continue_latest: bool,
    /// Draw the interactive UI on the alternate screen, scrolled with PgUp/PgDn, instead of
    /// printing the conversation into the terminal's own scrollback (where the terminal's
    /// scrolling, search and copy work on it). Also KEEL_ALT_SCREEN=1.
    #[arg(long, env = "KEEL_ALT_SCREEN", value_parser = clap::builder::FalseyValueParser::new())]
    pub alt_screen: bool,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Flags shared by every command.
#[derive(Debug, Clone, Args, Default)]
pub struct Common {
    /// Model name (e.g. deepseek-v4-flash, deepseek-chat).
    #[arg(long, global = true)]
    pub model: Option<String>,
    /// Provider name: a `[providers.<name>]` table of the configuration.
    #[arg(long, global = true)]
    pub provider: Option<String>,
    /// Base URL of a server of the run's own (the wire's path is appended:
    /// `/chat/completions`, `/v1/messages`, `/responses`). No configured key follows it
    /// (DEEPSEEK_API_KEY included): it gets the key of --api-key-env, or none.
    /// (DEEPSEEK_BASE_URL, by contrast, moves the DeepSeek endpoint and its key with it.)
    #[arg(long, global = true, value_name = "URL")]
    pub base_url: Option<String>,
    /// The wire format of this run's endpoint: chat (chat completions), messages (the Messages
    /// API) or responses (OpenAI's Responses API); default: the provider table's `api`
    /// (docs/providers.md).
    #[arg(long, global = true, value_name = "WIRE", value_parser = ["chat", "messages", "responses"])]
    pub api: Option<String>,
    /// Environment variable holding the API key for this run's endpoint (sent as the bearer
    /// token); without it a --base-url server gets no Authorization header.
    #[arg(long, global = true, value_name = "VAR")]
    pub api_key_env: Option<String>,
    /// Named profile: $KEEL_HOME/profiles/NAME.toml. `roleplay` is built in (when no such file
    /// exists): it turns on the `roleplay` row and the `memory` row in managed context mode with
    /// the `relevant` policy, with a role-play persona (docs/roleplay.md).
    #[arg(long, global = true)]
    pub profile: Option<String>,
    /// Extra configuration file, layered after the project's.
    #[arg(long = "config", global = true, value_name = "FILE")]
    pub config_file: Option<PathBuf>,
    /// Override one configuration key, e.g. -c agent.max_steps=50 (repeatable).
    #[arg(short = 'c', global = true, value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Working directory (the workspace root); defaults to the current directory.
    #[arg(long, global = true, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// How far tools reach: read-only, workspace-write (default) or full-access. Under
    /// workspace-write, bash and all it starts may write only inside the workspace and temp
    /// (Landlock); see docs/sandbox.md.
    #[arg(long, global = true, value_name = "MODE")]
    pub sandbox: Option<String>,
    /// What happens when an action needs approval (what runs unasked depends on --sandbox:
    /// under workspace-write, edits and commands inside the workspace never ask): ask
    /// (default; a person decides, refused when headless), deny (ask nobody: refused) or allow
    /// (approved at once; a call asking to leave the sandbox still asks a person). The old
    /// words never (= deny) and auto (= allow) still work.
    #[arg(long, global = true, value_name = "POLICY")]
    pub approval: Option<String>,
    /// Context window of the model for this run, in tokens (for local servers with small windows).
    #[arg(long, global = true, value_name = "N")]
    pub context_window: Option<u64>,
    /// Output token budget of the model for this run.
    #[arg(long, global = true, value_name = "N")]
    pub max_output: Option<u64>,
    /// Record provenance of every tool result (enables the `provenance` plugin for this run).
    #[arg(long, global = true)]
    pub provenance: bool,
    /// Explicit control for this task: a durable contract, and write/edit/bash admitted only
    /// with a one-use authorization (docs/continuity.md, "Explicit control").
    #[arg(long, global = true, value_name = "MODE", value_parser = ["contract"])]
    pub control: Option<String>,
    /// Memory, variable and history tools for this run (enables the `memory` plugin;
    /// docs/memory.md).
    #[arg(long, global = true)]
    pub memory: bool,
    /// Context mode from this turn on: native (the whole history), managed (a policy chooses
    /// the history each request carries; the rest stays findable with history_search),
    /// managed:recent or managed:relevant. Enables the `memory` plugin; a resumed session
    /// keeps its mode unless this is given (docs/memory.md).
    #[arg(long, global = true, value_name = "MODE", value_parser = ["native", "managed", "managed:recent", "managed:relevant"])]
    pub context: Option<String>,
    /// Delegation for this run (enables the `delegate` plugin): `--delegate` hands tasks to
    /// other keel processes; `--delegate=acp` to an Agent Client Protocol agent (`keel acp`
    /// by default, or the row's `acp_command`, e.g. codex-acp); `--delegate=consult` to the
    /// consult CLI (Claude Code, Codex…); `--delegate=inprocess` to the test provider. See
    /// docs/delegation.md.
    #[arg(long, global = true, value_name = "PROVIDER", num_args = 0..=1, require_equals = true, default_missing_value = "keel", value_parser = ["keel", "acp", "consult", "inprocess"])]
    pub delegate: Option<String>,
    /// How the model reaches its tools: native (one call per tool, the default), code (only
    /// run_code: the model writes a JavaScript program over its tools) or both. Sets the
    /// `tools_mode` key; also DSH_TOOLS_MODE. See docs/code-mode.md.
    #[arg(long, global = true, value_name = "MODE", env = "DSH_TOOLS_MODE", value_parser = ["native", "code", "both"])]
    pub tools_mode: Option<String>,
    /// The built-in tools: minimal (dsh 0.2's: a persistent bash shell, read, write, edit),
    /// standard (the default) or code (the standard tools through run_code).
    /// Sets the `preset` key. See docs/tools.md.
    #[arg(long, global = true, value_name = "PRESET", value_parser = ["minimal", "standard", "code"])]
    pub preset: Option<String>,
    /// Trust this workspace for this run only, without recording it: its hooks
    /// (.claude/settings.json), MCP servers (.mcp.json) and .keel/config.toml take effect (for
    /// CI in your own repository). `keel trust` records the decision (docs/trust.md).
    #[arg(long, global = true)]
    pub trust_project: bool,
    /// The workspace's trust as a supervisor decided it (a delegate inherits it, never decides
    /// on its own): trusted or untrusted, for this run only.
    #[arg(long, global = true, hide = true, value_name = "LEVEL", value_parser = ["trusted", "untrusted"], conflicts_with = "trust_project")]
    pub project_trust: Option<String>,
    /// The card `keel chat --card` names (set by that command, not a flag of its own).
    #[arg(skip)]
    pub card: Option<String>,
    /// The flag that set `approval` when it was not `--approval` itself (`--full-auto`).
    #[arg(skip)]
    pub approval_from: Option<String>,
}

/// Claude Code's permission modes (`--permission-mode`), mapped onto keel's settings. An
/// explicit --sandbox or --approval wins over what the mode implies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PermissionMode {
    /// The configured sandbox and approval policy, unchanged (out of the box:
    /// workspace-write, ask).
    Default,
    /// File edits inside the workspace without asking: --sandbox workspace-write.
    #[value(name = "acceptEdits")]
    AcceptEdits,
    /// Plan mode, as --plan.
    Plan,
    /// Ask nobody; whatever needs approval is refused: --approval deny.
    #[value(name = "dontAsk")]
    DontAsk,
    /// Everything, without asking: --sandbox full-access --approval allow.
    #[value(name = "bypassPermissions")]
    BypassPermissions,
}

/// How a run starts: plan mode, or one of Claude Code's permission modes.
#[derive(Debug, Clone, Args, Default)]
pub struct ModeArgs {
    /// Start in plan mode: the model may only read (write, edit, bash… are refused) until it
    /// hands in a plan with exit_plan_mode. Headless, nobody can approve it in the run: the
    /// plan is printed as the answer (exit 0) and plan mode stays on; approve it with
    /// `keel resume SESSION --approve-plan`, or ask for changes with `keel resume SESSION
    /// "…"`. Under --approval allow the plan is approved at once and the model carries it out.
    #[arg(long, conflicts_with = "permission_mode")]
    pub plan: bool,
    /// Claude Code's permission modes: default (keel's settings), acceptEdits (--sandbox
    /// workspace-write), plan (--plan), dontAsk (--approval deny), bypassPermissions
    /// (--sandbox full-access --approval allow). An explicit --sandbox or --approval wins.
    #[arg(long, value_enum, value_name = "MODE")]
    pub permission_mode: Option<PermissionMode>,
    /// Codex's `--full-auto`: work inside the workspace without asking, as --sandbox
    /// workspace-write --approval allow (bash stays confined to the workspace and temp; a call
    /// that asks to leave the sandbox is still refused headless). An explicit --sandbox or
    /// --approval wins.
    #[arg(long, conflicts_with = "permission_mode")]
    pub full_auto: bool,
}

impl ModeArgs {
    /// Whether the run starts in plan mode.
    pub fn plan_mode(&self) -> bool {
        self.plan || self.permission_mode == Some(PermissionMode::Plan)
    }
}

/// Parse the command line (exit 2 on a usage error, a mistyped subcommand included; see
/// [`typo`]) and fold `--full-auto` into the sandbox and approval flags.
pub fn parse() -> Cli {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let mut cli = typo::try_parse(&args).unwrap_or_else(|e| help::exit(&args, e));
    let full_auto = cli.mode.full_auto
        || match &cli.command {
            Some(Command::Run(args)) => args.mode.full_auto,
            Some(Command::Resume(args)) => args.mode.full_auto,
            _ => false,
        };
    if full_auto {
        let common = &mut cli.common;
        common
            .sandbox
            .get_or_insert_with(|| "workspace-write".into());
        if common.approval.is_none() {
            common.approval = Some("allow".into());
            common.approval_from = Some("--full-auto".into());
        }
    }
    cli
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one task headless: progress to stderr, the final answer to stdout.
    ///
    /// With --plan (or --permission-mode plan) the task starts in plan mode and, headless, ends
    /// with the model's plan as the answer; see `keel resume --approve-plan`.
    #[command(visible_alias = "exec")]
    Run(RunArgs),
    /// A real agent loop driven by a scripted model in a fresh temp project: no key, no network.
    Demo(DemoArgs),
    /// Continue a session (cold resume with crash repair); no id = the latest of this directory.
    /// In a terminal without a prompt it continues in the interactive UI (no id: pick one).
    /// `keel resume --last "PROMPT"` (or `keel --continue "PROMPT"`) continues the latest
    /// session with a new prompt; `--approve-plan` approves the plan a plan-mode session handed
    /// in.
    Resume(ResumeArgs),
    /// Return a session to an earlier point: the workspace's files, from the checkpoints keel
    /// took before each step that could change files (`bash` and what it started included),
    /// and the conversation (the model's history; the log keeps what was rewound). Files
    /// changed since the agent's last turn (by hand, by a job) are reported and kept unless
    /// --force. --files or --conversation narrows it. No SESSION: the latest of this
    /// directory. See docs/sessions.md.
    Rewind(RewindArgs),
    /// Branch a session: a new session seeded with its history up to a point (the lineage in
    /// its header and a `session/end-seed` event), which `keel resume NEW` continues. The
    /// original is not changed. No SESSION: the latest of this directory. See docs/sessions.md.
    Fork(ForkArgs),
    /// Compact a session now (between turns): prune oversized tool results and summarise old
    /// history with the model, appending the replacement (nothing is deleted).
    Compact(CompactArgs),
    /// A findings-first review of your change by a delegate (the `/review` command).
    ///
    /// Asks the delegation provider (`--delegate[=PROVIDER]`, else the `delegate` row, else
    /// keel) to review the working tree's change from --base (default HEAD), pinned to the
    /// commit it names now, or a finished write-mode delegation's patch (--job). The findings
    /// are printed and injected into a session: a new one, or the one --resume/--last names,
    /// so your next turn there sees them. Exit 1 when the provider cannot review.
    Review(ReviewArgs),
    /// List, show, check, export and import sessions.
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// Configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Provenance of a tool result (TARGET: node id, call id, tool-result event id or
    /// result:<call id>) as text, JSON, DOT or SVG (`--format svg > trace.svg`, drawn by keel,
    /// no Graphviz needed). Exit 1 when the query has no answer.
    Trace(TraceArgs),
    /// Provenance journals.
    #[command(subcommand)]
    Provenance(ProvenanceCommand),
    /// Continuity: the task's basis keel re-projects after compaction, resume and delegation.
    ///
    /// The continuity plugin keeps the human's exact words, the approved plan, the todo list and
    /// subagent results across lossy boundaries: when a summary replaced them, at a cold resume,
    /// or at a subagent's first request, it re-projects what left the visible history, once per
    /// boundary, checked against anchors (ids and SHA-256 digests) under `$KEEL_HOME/continuity`.
    #[command(subcommand)]
    Continuity(ContinuityCommand),
    /// Role-play with a character card: one turn like `keel run`, under the `roleplay` profile.
    ///
    /// FILE_OR_ID is a card file (Character Card V2/V3 JSON, a PNG with a `ccv3`/`chara`
    /// chunk, or a CHARX zip; imported into $KEEL_HOME/cards first) or the id of a stored card.
    /// A new session opens with the card's greeting (printed on stderr). Continue a chat with
    /// `--resume SESSION` or `--last` (the card is named again each time). See docs/roleplay.md.
    Chat(ChatArgs),
    /// Character cards stored under $KEEL_HOME/cards (import, show, list).
    #[command(subcommand)]
    Cards(CardsCommand),
    /// Serve keel as an MCP server on stdin/stdout: the `keel` tool runs a task in a new
    /// session, `keel_reply` continues one (docs/mcp.md).
    ///
    /// Add it to Claude Code with `claude mcp add keel -- keel mcp-server`. The global flags
    /// (--model, --base-url, --sandbox, --approval, -c…) set every call's defaults; a call's
    /// own `cwd`, `sandbox`, `approval` and `model` arguments override them. Stdout carries
    /// only the protocol; logs go to stderr.
    McpServer(McpServerArgs),
    /// Serve keel as an Agent Client Protocol agent on stdin/stdout, for editors such as Zed
    /// (docs/acp.md).
    ///
    /// Add it to Zed under `agent_servers` with `"command": "keel", "args": ["acp"]`. Each ACP
    /// session is a keel session: `session/new` starts one in the editor's project,
    /// `session/load` continues any keel session by id. Approvals are asked in the editor; the
    /// global flags (--model, --sandbox, --approval, -c…) apply to every session. Stdout carries
    /// only the protocol; logs go to stderr.
    Acp(AcpArgs),
    /// Serve sessions over a local HTTP API: one process hosting any number of sessions, in
    /// any workspaces, that scripts and browsers create, prompt and watch (docs/serve.md).
    ///
    /// The first line on stdout is `keel serve: http://127.0.0.1:PORT/?token=TOKEN`; the same
    /// URL, token and pid go to $KEEL_HOME/serve.json (mode 0600). Every request needs the
    /// token (`Authorization: Bearer TOKEN`, or the cookie that URL sets), a loopback `Host`
    /// and no foreign `Origin`. The global flags (--model, --sandbox, --approval, -c…) apply
    /// to every session. Ctrl-C or SIGTERM cancels running turns and exits.
    Serve(ServeArgs),
    /// The terminal UI on a session of a running `keel serve` (docs/serve.md, "keel attach").
    ///
    /// The session runs on the server: the UI streams its events (its history first), sends
    /// what you type as messages, and answers the approvals and questions the server asks
    /// (another client may answer them first: the modal then closes). Ctrl-D or /exit
    /// detaches and leaves the session running there; `keel attach SESSION` shows it again.
    /// The server's configuration, sandbox, approval policy and trust apply, not this
    /// command's flags.
    Attach(AttachArgs),
    /// The web app in your browser (docs/web-app.md): the running `keel serve`'s, else a
    /// server started now in the background (it keeps running, in a process group of its
    /// own; stop it with `kill PID`, the `pid` of $KEEL_HOME/serve.json).
    ///
    /// The browser ($BROWSER, else xdg-open or open) opens the server's URL with its token,
    /// on a new-session form for DIR. The URL is printed too (`keel web: URL`). A server
    /// started here runs with this command's global flags (--model, --sandbox, -c…) and logs
    /// to $KEEL_HOME/serve.log.
    Web(WebArgs),
    /// Workspace trust: whether a repository's own hooks, MCP servers and configuration may
    /// take effect (docs/trust.md).
    ///
    /// Until you trust a workspace (its git root, or the directory when there is none), keel
    /// leaves `.claude/settings*.json` hooks, `.mcp.json` servers and every key of
    /// `.keel/config.toml` that widens what runs or what leaks alone; keys that only tighten
    /// still apply. The decision is recorded in $KEEL_HOME/config.toml as
    /// `[projects."DIR"] trust_level = "trusted" | "untrusted"` and covers the directories
    /// below it.
    Trust(TrustArgs),
    /// Store the API key of a provider in $KEEL_HOME/credentials.toml (mode 600; docs/config.md
    /// "Stored keys").
    ///
    /// The key is read from the terminal without echo, or one line from stdin when stdin is
    /// not a terminal (or with --stdin); it is never printed. The provider's environment
    /// variable (`api_key_env`, e.g. DEEPSEEK_API_KEY) still wins over the stored key, and the
    /// stored key goes only to the provider's own URL: never to --base-url, nor to a URL a
    /// project's .keel/config.toml sets.
    Login(LoginArgs),
    /// Remove the stored API key of a provider from $KEEL_HOME/credentials.toml (the other
    /// providers' keys are kept).
    Logout(LogoutArgs),
    /// MCP servers: list, show, add, remove, test, and their prompts (docs/mcp.md).
    ///
    /// Servers come from `[mcp_servers.NAME]` tables of the configuration layers and from the
    /// project's `.mcp.json` (Claude Code's file); a TOML table wins over a `.mcp.json` entry of
    /// the same name.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// Claude Code plugin bundles (docs/plugins.md): add marketplaces, install, pin, list,
    /// enable, disable, update and remove plugins.
    ///
    /// A plugin's slash commands, subagent definitions, skills, hooks and MCP servers reach
    /// every agent while it is on, with ${CLAUDE_PLUGIN_ROOT} expanded. Files live under
    /// $KEEL_HOME/plugins; each plugin stays at the commit it was installed at until `keel
    /// plugin update`. A marketplace or plugin a project's `.claude/settings.json` declares is
    /// only shown (`keel plugin list`), never installed or run on its word.
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// Run many tasks as `keel run` sessions, N at a time, each in its own workspace copy or
    /// git worktree (docs/batch.md).
    ///
    /// TASKS is a JSON Lines file, one task a line: `{"id", "prompt", "workspace", "check"?,
    /// "model"?, "flags"?}`. Writes `results.jsonl` and `state.json` into --out and prints a
    /// summary table. Ctrl-C stops the running sessions (their turns end interrupted);
    /// running the same command again skips finished tasks and resumes interrupted ones.
    /// The global flags (--base-url, --model, --approval, -c…) apply to every task.
    Batch(BatchArgs),
    /// A `keel batch --engine ray` task on a Ray node: imports the session it resumes, runs
    /// it, then the check, printing one JSON line each (docs/batch.md). Not for people.
    #[command(hide = true)]
    BatchJob(BatchJobArgs),
}
