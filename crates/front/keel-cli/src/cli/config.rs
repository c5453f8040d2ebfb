//! The arguments of the commands that set keel up: `keel trust`, `config …` and `mcp …`
//! (MCP servers).

use clap::{Args, Subcommand};
use std::path::PathBuf;

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

/// `keel login PROVIDER [--stdin]`.
#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The provider: `deepseek`, or the NAME of a `[providers.NAME]` table.
    pub provider: String,
    /// Read the key as one line from stdin, even in a terminal (for scripts:
    /// `printf %s "$KEY" | keel login deepseek --stdin`).
    #[arg(long)]
    pub stdin: bool,
}

/// `keel logout PROVIDER`.
#[derive(Debug, Args)]
pub struct LogoutArgs {
    /// The provider whose stored key is removed.
    pub provider: String,
}

/// `keel config …`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// The effective configuration with the layer that set each key, every MCP server with
    /// where it is configured (`mcp.NAME`: a layer file or the `.mcp.json` path), then the
    /// model endpoint of this run (`endpoint.*`): its URL, the environment variable whose key
    /// is sent there and where the key comes from (that variable or `keel login`'s stored key;
    /// the name, never the value). The run's flags count, each shown as its layer
    /// (`model = "M"  # --model`; `--provider`, `--sandbox`, `--approval`, `--context-window`,
    /// `--max-output`), and `endpoint.*` is what the run would use under them (`--base-url`,
    /// `--api`, `--api-key-env`).
    Dump,
    /// The configuration file `keel config set` writes: `$KEEL_HOME/config.toml`, or with
    /// `--project` the project's `.keel/config.toml` (whether or not it exists yet).
    Path {
        /// The project's `.keel/config.toml`.
        #[arg(long)]
        project: bool,
    },
    /// The effective value of a dotted key (`model`, `sandbox.mode`, `providers.NAME.base_url`)
    /// as TOML, the run's flags included (`keel --model M config get model` prints "M"). Exit 1
    /// when the key is not set.
    Get {
        /// The dotted key.
        key: String,
    },
    /// Set a dotted key in `$KEEL_HOME/config.toml` (`--project`: the project's
    /// `.keel/config.toml`), keeping the file's other content and comments. VALUE is read as
    /// TOML (`true`, `3`, `"x"`, `["a", "b"]`), else as a string. A value the configuration
    /// does not accept is refused and the file left as it was.
    Set {
        /// The dotted key.
        key: String,
        /// The value: TOML, else a string.
        value: String,
        /// Write the project's `.keel/config.toml` instead (in an untrusted workspace the keys
        /// that widen what runs are ignored until `keel trust`; docs/trust.md).
        #[arg(long)]
        project: bool,
    },
}

/// `keel mcp …`.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Every configured server: transport (command line or URL), enabled, where it is configured
    /// (the layer file or the `.mcp.json` path) and any configuration problem; a server of the
    /// project's files that keel does not start (an untrusted workspace) with why.
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
    /// or `keel mcp add NAME --url URL` (streamable HTTP). In a workspace you have not trusted
    /// the project's servers do not start: keel says so at once (trust it with `keel trust`,
    /// or add the server with `--global`), and `list`, `get` and `test` show it as inert.
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
