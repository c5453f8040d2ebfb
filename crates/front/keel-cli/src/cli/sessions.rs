//! The arguments of the commands that run or work on sessions: `keel run`, `demo`,
//! `resume`, `review`, `compact`, `rewind`, `fork`, `sessions …`, `trace`, `provenance …`,
//! `continuity …`, `chat` and `cards …`.

use super::ModeArgs;
use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

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
    /// parent, with origin "delegate" (set by keel's delegation provider; hidden from help).
    #[arg(long, value_name = "SESSION", hide = true)]
    pub delegated_from: Option<String>,
    /// Delegation depth recorded with --delegated-from (default 1).
    #[arg(long, value_name = "N", requires = "delegated_from", hide = true)]
    pub delegation_depth: Option<u32>,
    /// Set OBJECTIVE as the session's goal and keep starting rounds toward it until the model
    /// says it is complete (exit 0) or blocked (exit 3), or --max-rounds run out (exit 4); as
    /// `/goal` does in the UI. Takes the place of the prompt. See docs/goals.md.
    #[arg(long, value_name = "OBJECTIVE", conflicts_with = "prompt")]
    pub goal: Option<String>,
    /// Rounds the --goal may take (default 256).
    #[arg(long, value_name = "N", requires = "goal")]
    pub max_rounds: Option<u32>,
    /// Run the task through a running `keel serve` instead of in this process: a session is
    /// created on the server in this working directory (with --model if given), its events
    /// are streamed back and printed as a local run prints them (the same --json lines and exit
    /// codes); Ctrl-C cancels the turn on the server, where the session stays. URL is what the
    /// server printed (`http://127.0.0.1:PORT/?token=TOKEN`) or `http://127.0.0.1:PORT`, the
    /// token then coming from KEEL_SERVE_TOKEN or from $KEEL_HOME/serve.json when it names the
    /// same address. The session runs under the server's settings: the flags that configure a
    /// local agent (--script, --zstd, --goal, --inbox-stdin, --plan, --permission-mode,
    /// --full-auto, --sandbox, --approval, -c…) are refused. An approval or question the server
    /// puts to its clients is not answered here: another client (the API, a browser) answers
    /// it. An https:// server's own certificate is trusted when KEEL_SERVE_CA names its PEM
    /// file. See docs/serve.md.
    #[arg(
        long,
        value_name = "URL",
        conflicts_with_all = [
            "script", "zstd", "goal", "max_rounds", "inbox_stdin", "delegated_from",
            "delegation_depth", "plan", "permission_mode", "full_auto",
        ]
    )]
    pub server: Option<String>,
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
        #[arg(required_unless_present = "last")]
        session: Option<String>,
        /// The latest session of this directory, the one `keel resume --last` continues
        /// (sessions without a turn are skipped).
        #[arg(long, conflicts_with = "session")]
        last: bool,
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
