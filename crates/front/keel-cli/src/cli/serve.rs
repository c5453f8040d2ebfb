//! The arguments of the commands that serve keel to other programs (`keel mcp-server`,
//! `keel acp`, `keel serve`) and run many tasks (`keel batch`, and `keel batch-job` on a Ray node).

use clap::Args;
use std::path::PathBuf;

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
    /// parent (set by keel's `acp` delegation provider when the agent is keel; hidden from
    /// help).
    #[arg(long, value_name = "SESSION", hide = true)]
    pub delegated_from: Option<String>,
    /// Delegation depth recorded with --delegated-from (default 1).
    #[arg(long, value_name = "N", requires = "delegated_from", hide = true)]
    pub delegation_depth: Option<u32>,
}

/// `keel attach`.
#[derive(Debug, Args)]
pub struct AttachArgs {
    /// The session to attach to: the id of a session the server hosts or stores (default: the
    /// newest session of this directory the server lists, else a new session here).
    #[arg(value_name = "SESSION")]
    pub session: Option<String>,
    /// The server: what `keel serve` printed (`http://127.0.0.1:PORT/?token=TOKEN`). Without
    /// it, the URL in $KEEL_HOME/serve.json (the running server's). Without `?token=`, the token
    /// comes from KEEL_SERVE_TOKEN or serve.json.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
}

/// `keel web`.
#[derive(Debug, Args)]
pub struct WebArgs {
    /// The workspace to open a new session in (default: the working directory).
    #[arg(value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
    /// Where a server started here listens (0: a free port); a server already running is
    /// used wherever it listens.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7878")]
    pub listen: std::net::SocketAddr,
    /// Print the URL without opening a browser.
    #[arg(long)]
    pub no_open: bool,
}

/// `keel serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on and a port (0: a free port). An address beyond loopback needs
    /// --tls-cert and --tls-key, or --insecure-no-tls; a wildcard address (0.0.0.0, [::]) is
    /// refused.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7878")]
    pub listen: std::net::SocketAddr,
    /// Speak HTTPS with this certificate chain (PEM, the server's certificate first).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve plain HTTP on an address beyond loopback: the token and every session cross the
    /// network in clear. Only for a network you trust completely.
    #[arg(long, conflicts_with = "tls_cert")]
    pub insecure_no_tls: bool,
    /// Accept this host name (a name of this machine, such as `keel.local`) in `Host` and
    /// `Origin` besides 127.0.0.1, localhost and [::1], with the server's port (repeatable).
    #[arg(long = "trusted-host", value_name = "HOST")]
    pub trusted_hosts: Vec<String>,
    /// Replay a model script (JSON or YAML) instead of calling a model, in every session.
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// A server for one program (the Python SDK starts its own so): no $KEEL_HOME/serve.json
    /// is written (a running server's stays as it is, for `keel web` and `keel attach`), and
    /// the server stops, as on SIGTERM, when its stdin closes (its program ended).
    #[arg(long)]
    pub private: bool,
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
