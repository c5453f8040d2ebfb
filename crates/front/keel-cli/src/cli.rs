//! Command-line syntax (clap). Every flag documented here shows in `--help`.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// keel — an agent harness for DeepSeek models (and any OpenAI-compatible endpoint).
///
/// `keel` in a terminal opens the interactive UI in the current directory (`keel "PROMPT"`
/// sends a first prompt; docs/tui.md). Without a terminal (a pipe, CI) `keel "PROMPT"` runs
/// headless like `keel run`.
#[derive(Debug, Parser)]
#[command(name = "keel", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub common: Common,
    /// The first prompt of an interactive session (headless without a terminal).
    #[arg(value_name = "PROMPT")]
    pub prompt: Option<String>,
    /// Plan mode or a permission mode for the session `keel` opens (as for `keel run`).
    #[command(flatten)]
    pub mode: ModeArgs,
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
    /// Base URL of an OpenAI-compatible server (`/chat/completions` is appended). No configured
    /// key follows it (DEEPSEEK_API_KEY included): it gets the key of --api-key-env, or none.
    /// (DEEPSEEK_BASE_URL, by contrast, moves the DeepSeek endpoint and its key with it.)
    #[arg(long, global = true, value_name = "URL")]
    pub base_url: Option<String>,
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
    /// What happens when an action needs approval: ask (default; refused when headless), never, auto.
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
    /// The built-in tools: minimal (a persistent bash shell and str_replace_editor, dsh's
    /// minimal preset), standard (the default) or code (the standard tools through run_code).
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
}

/// `keel rewind`.
#[derive(Debug, clap::Args)]
pub struct RewindArgs {
    /// Session id, id prefix or path (default: the latest of this directory).
    pub session: Option<String>,
    /// Where to: `N` is the state just before turn N's prompt; `seq:S` the state at event S.
    #[arg(long, required_unless_present = "undo", conflicts_with = "undo")]
    pub to: Option<String>,
    /// Undo the last rewind (return the files to what they were before it).
    #[arg(long)]
    pub undo: bool,
    /// Only the files (neither flag, or both: files and conversation).
    #[arg(long)]
    pub files: bool,
    /// Only the conversation: the model's history returns to that point (a `surface/rewind`
    /// event; the log keeps what was rewound).
    #[arg(long)]
    pub conversation: bool,
    /// Also overwrite files changed since the agent's last turn.
    #[arg(long)]
    pub force: bool,
    /// JSON output: `{to, from, after, written, removed, kept, notRestorable}` for the files,
    /// and `conversation: {seq, toSeq, turn}` (null when it was not rewound).
    #[arg(long)]
    pub json: bool,
}

/// `keel fork`.
#[derive(Debug, clap::Args)]
pub struct ForkArgs {
    /// Session id, id prefix or path (default: the latest of this directory).
    pub session: Option<String>,
    /// Where to branch: `N` keeps turns 1..N-1 (the state just before turn N's prompt, so
    /// turn N can go another way); `seq:S` branches at the start of the turn holding event S
    /// (a `keel sessions search` hit), or at S itself between turns. Default: after the last
    /// completed turn.
    #[arg(long)]
    pub at: Option<String>,
    /// Also return the workspace's files to that point (from the parent's checkpoints, as
    /// `keel rewind --files` would; files changed since the agent's last turn are kept unless
    /// --force). The rewind is logged in the new session, so `keel rewind NEW --undo` returns.
    #[arg(long)]
    pub files: bool,
    /// With --files: also overwrite files changed since the agent's last turn.
    #[arg(long, requires = "files")]
    pub force: bool,
    /// JSON output: `{session, path, parent, seedLength}` (and `files`, the rewind's record).
    #[arg(long)]
    pub json: bool,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one task headless: progress to stderr, the final answer to stdout.
    ///
    /// With --plan (or --permission-mode plan) the task starts in plan mode and, headless, ends
    /// with the model's plan as the answer; see `keel resume --approve-plan`.
    Run(RunArgs),
    /// A real agent loop driven by a scripted model in a fresh temp project: no key, no network.
    Demo(DemoArgs),
    /// Continue a session (cold resume with crash repair); no id = the latest of this directory.
    /// In a terminal without a prompt it continues in the interactive UI (no id: pick one).
    /// `keel resume --last "PROMPT"` continues the latest session with a new prompt;
    /// `--approve-plan` approves the plan a plan-mode session handed in.
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
    /// MCP servers: list, show, add, remove, test, and their prompts (docs/mcp.md).
    ///
    /// Servers come from `[mcp_servers.NAME]` tables of the configuration layers and from the
    /// project's `.mcp.json` (Claude Code's file); a TOML table wins over a `.mcp.json` entry of
    /// the same name.
    #[command(subcommand)]
    Mcp(McpCommand),
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

/// `keel batch`.
#[derive(Debug, Args)]
pub struct BatchArgs {
    /// The task file (JSON Lines).
    pub tasks: PathBuf,
    /// Sessions running at once (default: the number of cores).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub concurrency: Option<u32>,
    /// Where results.jsonl, state.json, the task workspaces and logs go (default:
    /// TASKS without its extension, plus `.batch`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Time limit of one task's check command; its process group is killed then.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    pub check_timeout: u64,
    /// Where the tasks run: `local` (child processes on this machine, the default) or `ray`
    /// (each task a job on a Ray cluster, through its Jobs REST API at --address; the sessions
    /// are rebuilt here from the jobs' output).
    #[arg(long, value_name = "ENGINE", default_value = "local", value_parser = ["local", "ray"])]
    pub engine: String,
    /// `--engine ray`: the Ray dashboard's address, e.g. `http://HEAD:8265` (default: the
    /// RAY_API_SERVER_ADDRESS environment variable, as Ray's own CLI reads it).
    #[arg(long, value_name = "URL", env = "RAY_API_SERVER_ADDRESS")]
    pub address: Option<String>,
    /// `--engine ray`: how many times a task whose job failed without keel failing (its node
    /// died, its job could not start) is submitted again; a retry resumes its session.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub retries: u32,
    /// `--engine ray`: CPUs Ray reserves for each task's job (`entrypoint_num_cpus`); with
    /// any reservation a job may run on any node, not only the head.
    #[arg(long, value_name = "CPUS", default_value_t = 1.0)]
    pub cpus_per_task: f64,
    /// `--engine ray`: a keel binary at this path on every node (default: this binary is
    /// shipped to the cluster once, as a package of the jobs' runtime environment).
    #[arg(long, value_name = "PATH")]
    pub keel_on_nodes: Option<String>,
    /// `--engine ray`: one more environment variable passed to every job (repeatable); the
    /// model's key variables (DEEPSEEK_API_KEY, --api-key-env, the providers' `api_key_env`)
    /// and DEEPSEEK_BASE_URL are passed when set.
    #[arg(long = "pass-env", value_name = "NAME")]
    pub pass_env: Vec<String>,
}

/// `keel batch-job SPEC` (hidden): a `keel batch --engine ray` task on a Ray node.
#[derive(Debug, Args)]
pub struct BatchJobArgs {
    /// The job's spec (`job/spec.json` in the job's working directory).
    pub spec: PathBuf,
}

/// `keel mcp-server`.
#[derive(Debug, Args)]
pub struct McpServerArgs {
    /// Replay a model script (JSON or YAML) instead of calling a model, in every call.
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
}

/// `keel acp`.
#[derive(Debug, Args)]
pub struct AcpArgs {
    /// Replay a model script (JSON or YAML) instead of calling a model, in every session.
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// Record every new session as delegated by SESSION: its header names SESSION as its
    /// parent (set by keel's `acp` delegation provider when the agent is keel).
    #[arg(long, value_name = "SESSION")]
    pub delegated_from: Option<String>,
    /// Delegation depth recorded with --delegated-from (default 1).
    #[arg(long, value_name = "N", requires = "delegated_from")]
    pub delegation_depth: Option<u32>,
}

/// `keel mcp …`.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Every configured server: transport (command line or URL), enabled, where it is configured
    /// (the layer file or the `.mcp.json` path) and any configuration problem.
    List {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// The resolved settings of one server. Environment values whose names look secret are
    /// not shown (their names are), nor the value of a bearer token (its variable's name is).
    Get {
        /// The server's name.
        name: String,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Add a server to the project's `.keel/config.toml` (`--global`: `$KEEL_HOME/config.toml`),
    /// keeping the file's other content and comments: `keel mcp add NAME -- CMD ARGS…` (stdio)
    /// or `keel mcp add NAME --url URL` (streamable HTTP).
    Add(McpAddArgs),
    /// Remove a server from the configuration file(s) that define it. `.mcp.json` servers are
    /// Claude Code's: edit that file.
    Remove {
        /// The server's name.
        name: String,
    },
    /// Start a server, list its tools with the keel name each gets and its schema size (and
    /// those that would be skipped, with why), then stop it. Exit 1 when it cannot start.
    Test {
        /// The server's name.
        name: String,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// The prompts of one server, or of every enabled one: name, description, arguments.
    /// Exit 1 when a server cannot start.
    Prompts {
        /// The server's name (every enabled server when absent).
        name: Option<String>,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Log in to a streamable HTTP server with OAuth (authorization code + PKCE): print the
    /// authorization URL (and open a browser), wait for the redirect on 127.0.0.1, store the
    /// token under $KEEL_HOME (0600), bound to the server's URL.
    Login {
        /// The server's name.
        name: String,
        /// Print the URL only; do not open a browser.
        #[arg(long)]
        no_browser: bool,
        /// How long to wait for the redirect, in seconds.
        #[arg(long, value_name = "SECS", default_value_t = 300)]
        timeout: u64,
    },
    /// Forget the stored OAuth token of a server.
    Logout {
        /// The server's name.
        name: String,
    },
}

/// `keel mcp add`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("transport").required(true).args(["url", "command"])))]
pub struct McpAddArgs {
    /// The server's name (letters, digits, `_` and `-`): its tools are `mcp__NAME__TOOL`.
    pub name: String,
    /// Streamable HTTP: the server's endpoint.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Streamable HTTP: the environment variable holding the bearer token (its name is
    /// written, never a value).
    #[arg(long, value_name = "VAR", requires = "url")]
    pub bearer_token_env_var: Option<String>,
    /// Streamable HTTP: an extra header (repeatable).
    #[arg(long = "header", value_name = "K=V", requires = "url")]
    pub headers: Vec<String>,
    /// stdio: a variable set on the server (repeatable).
    #[arg(long = "env", value_name = "K=V", conflicts_with = "url")]
    pub env: Vec<String>,
    /// Write to `$KEEL_HOME/config.toml` instead of the project's `.keel/config.toml`.
    #[arg(long)]
    pub global: bool,
    /// stdio: the command and its arguments, after `--`.
    #[arg(last = true, value_name = "CMD ARGS")]
    pub command: Vec<String>,
}

/// `keel chat`.
#[derive(Debug, Args)]
pub struct ChatArgs {
    /// What you say; read from stdin when absent.
    pub prompt: Option<String>,
    /// The character: a card file (imported first) or a stored card id.
    #[arg(long, value_name = "FILE_OR_ID")]
    pub card: String,
    /// Continue this session (id, id prefix or path) instead of starting one.
    #[arg(long, value_name = "SESSION", conflicts_with = "last")]
    pub resume: Option<String>,
    /// Continue the latest session of this directory.
    #[arg(long)]
    pub last: bool,
    /// Print the session's records as JSON lines on stdout as they are written: the header,
    /// then every event.
    #[arg(long)]
    pub json: bool,
    /// Replay a model script instead of calling a model.
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
}

/// `keel cards …`.
#[derive(Debug, Subcommand)]
pub enum CardsCommand {
    /// Import a card file (V2/V3 JSON, PNG with a `ccv3` or `chara` tEXt chunk, CHARX zip):
    /// store it normalised as $KEEL_HOME/cards/ID.json and print ID.
    Import {
        /// The card file.
        file: PathBuf,
    },
    /// Show a stored card: name, spec, persona fields, greeting, lorebook size.
    Show {
        /// The card id (see `keel cards list`).
        id: String,
        /// The stored card JSON.
        #[arg(long)]
        json: bool,
    },
    /// List stored cards: id, name, spec.
    List {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
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
    /// Ask nobody; whatever needs approval is refused: --approval never.
    #[value(name = "dontAsk")]
    DontAsk,
    /// Everything, without asking: --sandbox full-access --approval auto.
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
    /// "…"`. Under --approval auto the plan is approved at once and the model carries it out.
    #[arg(long, conflicts_with = "permission_mode")]
    pub plan: bool,
    /// Claude Code's permission modes: default (keel's settings), acceptEdits (--sandbox
    /// workspace-write), plan (--plan), dontAsk (--approval never), bypassPermissions
    /// (--sandbox full-access --approval auto). An explicit --sandbox or --approval wins.
    #[arg(long, value_enum, value_name = "MODE")]
    pub permission_mode: Option<PermissionMode>,
}

impl ModeArgs {
    /// Whether the run starts in plan mode.
    pub fn plan_mode(&self) -> bool {
        self.plan || self.permission_mode == Some(PermissionMode::Plan)
    }
}

/// `keel run`.
#[derive(Debug, Args, Default)]
pub struct RunArgs {
    /// The task; read from stdin when absent.
    pub prompt: Option<String>,
    /// Send an image with the prompt (PNG, JPEG, GIF or WebP, up to 20 MiB; repeatable). The
    /// model must read images: its catalogue entry has vision, or `vision = true` in its
    /// [models."NAME"] table; keel refuses before any request otherwise. Stored under
    /// $KEEL_HOME/attachments by content.
    #[arg(long = "image", value_name = "FILE")]
    pub image: Vec<PathBuf>,
    /// Print every session event as one JSON object per line on stdout.
    #[arg(long)]
    pub json: bool,
    /// Replay a model script (JSON or YAML) instead of calling a model (see docs/scripts.md).
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// Write the session file compressed (session.jsonl.zst).
    #[arg(long)]
    pub zstd: bool,
    /// While the run lasts, read inbox messages from stdin, one JSON object per line:
    /// {"steer": TEXT} joins the running turn at its next step, {"followup": TEXT} queues a turn
    /// after it, {"answer": {"call_id": ID, "answers": {QUESTION_ID: TEXT_OR_LABELS}}} answers
    /// the model's ask_user_question (printed as a question/asked event with --json), which
    /// waits for it until stdin closes. Needs the prompt as an argument. keel's delegation
    /// provider steers its delegates this way (their questions are not waited for).
    #[arg(long, requires = "prompt")]
    pub inbox_stdin: bool,
    /// Record this run as delegated by SESSION: the new session's header names SESSION as its
    /// parent, with origin "delegate" (set by keel's delegation provider).
    #[arg(long, value_name = "SESSION")]
    pub delegated_from: Option<String>,
    /// Delegation depth recorded with --delegated-from (default 1).
    #[arg(long, value_name = "N", requires = "delegated_from")]
    pub delegation_depth: Option<u32>,
    /// Set OBJECTIVE as the session's goal and keep starting rounds toward it until the model
    /// says it is complete (exit 0) or blocked (exit 3), or --max-rounds run out (exit 4); as
    /// `/goal` does in the UI. Takes the place of the prompt. See docs/goals.md.
    #[arg(long, value_name = "OBJECTIVE", conflicts_with = "prompt")]
    pub goal: Option<String>,
    /// Rounds the --goal may take (default 256).
    #[arg(long, value_name = "N", requires = "goal")]
    pub max_rounds: Option<u32>,
    #[command(flatten)]
    pub mode: ModeArgs,
}

/// `keel demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Print every session event as one JSON object per line on stdout.
    #[arg(long)]
    pub json: bool,
    /// Keep the demo project in this directory instead of a fresh temp directory.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// `keel resume`.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// Session id, id prefix or path; the latest session of this directory when absent. With
    /// `--last` the one argument is the new prompt instead.
    pub session: Option<String>,
    /// A new prompt to run after resuming.
    pub prompt: Option<String>,
    /// Resume the latest session of this directory (what plain `keel resume` picks); the only
    /// argument, if any, is the new prompt: `keel resume --last "Continue."`.
    #[arg(long)]
    pub last: bool,
    /// Print the session's header, then every event from now on, as JSON lines on stdout.
    #[arg(long)]
    pub json: bool,
    /// Replay a model script instead of calling a model.
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// Approve the plan the session's last turn handed in (plan mode): plan mode ends and a
    /// turn runs that carries the plan out, with PROMPT (if given) added to the approval.
    /// Without it, resuming a session in plan mode goes on planning: PROMPT is feedback on the
    /// plan.
    #[arg(long, conflicts_with = "plan")]
    pub approve_plan: bool,
    #[command(flatten)]
    pub mode: ModeArgs,
}

/// `keel review`.
#[derive(Debug, Args)]
pub struct ReviewArgs {
    /// Git ref the change is measured from (default HEAD: your uncommitted changes).
    #[arg(long, value_name = "REF", conflicts_with = "job")]
    pub base: Option<String>,
    /// Review the patch of this finished write-mode delegation (its provider job id).
    #[arg(long, value_name = "ID")]
    pub job: Option<String>,
    /// Inject the findings into this session (id, prefix or path) instead of a new one.
    #[arg(long, value_name = "SESSION", conflicts_with = "last")]
    pub resume: Option<String>,
    /// Inject the findings into the latest session of this directory.
    #[arg(long)]
    pub last: bool,
    /// Replay a model script instead of calling a model (the reviewer uses it too).
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
}

/// `keel compact`.
#[derive(Debug, Args)]
pub struct CompactArgs {
    /// Session id, id prefix or path; the latest session of this directory when absent.
    pub session: Option<String>,
    /// Replay a model script for the summary request instead of calling a model.
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
}

/// `keel sessions …`.
#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Sessions of this project (or of every project with --all), newest first.
    List {
        /// Every project.
        #[arg(long)]
        all: bool,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Find words in every session's log: what was typed, answered, called (file paths
    /// included) and returned, compacted history included. Searches this project's sessions
    /// (every project's with --all) through a derived index under $KEEL_HOME/index (a cache,
    /// rebuilt from the logs; safe to delete). Each hit names the session (an id `keel resume`
    /// takes), the turn, the seq and a snippet. See docs/sessions.md.
    Search {
        /// The words to find (all of them, each as a whole word, case-insensitive).
        #[arg(required = true, num_args = 1..)]
        query: Vec<String>,
        /// Every project.
        #[arg(long)]
        all: bool,
        /// JSON output: one hit per line.
        #[arg(long)]
        json: bool,
        /// Most hits shown.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// A readable transcript by turn and step (compacted history included).
    Show {
        /// Session id, id prefix or path.
        session: String,
        /// Raw events instead of a transcript.
        #[arg(long)]
        events: bool,
        /// The request bodies rebuilt from the log, one JSON line each (`{turn, step, seq,
        /// body}`): every request that logged a `context/projection` (managed context mode,
        /// docs/memory.md), shaped for the model as keel's catalogue knows it.
        #[arg(long, conflicts_with = "events")]
        requests: bool,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Load, validate, plan crash repair and derive messages without writing. Exit 0 valid,
    /// 1 repairable (torn tail or open turn), 2 corrupt.
    Check {
        /// Session id, id prefix or path.
        session: String,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Export a session: the log as JSONL, a Markdown transcript, or one self-contained HTML
    /// page (`--format html > s.html`: the transcript with tool calls expandable, compaction and
    /// interrupted-turn markers, todo and plan states, usage per step with its cache-hit share,
    /// and each tool result's provenance graph as SVG when the session has a journal; no
    /// network, no script: open it in any browser).
    Export {
        /// Session id, id prefix or path.
        session: String,
        /// Output format.
        #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl)]
        format: ExportFormat,
        /// Write to FILE instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// HTML: KiB of provenance graphs (SVG) the page embeds at most; later tool results
        /// name the `keel trace … --format svg` command instead (a graph is some 45 KB).
        #[arg(long, value_name = "KIB", default_value_t = 4096)]
        graph_budget: usize,
    },
    /// Validate a DeepSeek Harness (or keel) session file and copy it into keel's store.
    Import {
        /// A session.jsonl, session.jsonl.zst(d) file or a session directory.
        path: PathBuf,
    },
}

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// The session log as plain JSONL (header first).
    Jsonl,
    /// A Markdown transcript.
    Markdown,
    /// One self-contained HTML page (see docs/viewer.md).
    Html,
}

/// `keel trust [DIR]`.
#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The workspace (default: --cwd or the current directory); its git root is recorded.
    pub dir: Option<PathBuf>,
    /// Record it as untrusted instead: its files stay inert and the UI does not ask again.
    #[arg(long, conflicts_with = "list")]
    pub revoke: bool,
    /// List the recorded decisions (directory, level, the file that holds it; `missing` when
    /// the directory is gone).
    #[arg(long, conflicts_with = "dir")]
    pub list: bool,
}

/// `keel config …`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// The effective configuration with the layer that set each key, every MCP server with
    /// where it is configured (`mcp.NAME`: a layer file or the `.mcp.json` path), then the
    /// model endpoint of this run (`endpoint.*`): its URL and the environment variable whose
    /// key is sent there (the name, never the value).
    Dump,
}

/// `keel trace`.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// Node id, provider call id, tool-result event id (`<session id>:<seq>`) or `result:<call id>`.
    pub target: String,
    /// Session id, id prefix or path; the latest session of this directory with a journal when absent.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = TraceFormatArg::Text)]
    pub format: TraceFormatArg,
    /// Walk towards what formed the target (backward) or what it went on to form (forward).
    #[arg(long, value_enum, default_value_t = TraceDirection::Backward)]
    pub direction: TraceDirection,
    /// Formation steps to walk (0..=256).
    #[arg(long, default_value_t = 32)]
    pub max_depth: u32,
}

/// Formats of `keel trace`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TraceFormatArg {
    /// Indented lines.
    Text,
    /// The answer the `trace` tool gives, pretty-printed.
    Json,
    /// Graphviz DOT (`| dot -Tsvg > trace.svg`).
    Dot,
    /// SVG laid out by keel itself (no Graphviz needed): the same nodes and edges as `dot`.
    Svg,
}

/// Directions of `keel trace`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TraceDirection {
    /// Towards what formed the target.
    Backward,
    /// Towards what the target went on to form.
    Forward,
}

/// `keel provenance …`.
#[derive(Debug, Subcommand)]
pub enum ProvenanceCommand {
    /// Offline check of a session's provenance journal: receipt hashes, sequence and chain,
    /// references, and graph.json against the receipts. Exit 0 valid, 1 invalid (the first
    /// failure is named), 2 when the journal cannot be read.
    Verify {
        /// Session id, id prefix, session path or journal directory.
        session: String,
    },
}

/// `keel continuity …`.
#[derive(Debug, Subcommand)]
pub enum ContinuityCommand {
    /// What a projection of a session would carry now: the pending boundary, the projections
    /// already delivered, the anchored human messages (`$KEEL_HOME/continuity`) and the text.
    /// Reads only; writes neither the session nor the anchors.
    Show {
        /// Session id, id prefix or path; the latest session of this directory when absent.
        session: Option<String>,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
}
