//! keel's own `git`: every `git` process keel starts for itself (the delegate's isolated
//! worktree and its patch, `keel review`'s diff, the terminal UI's `/diff`, the checkpoint
//! shadow repository, batch worktrees and clones) is built here, hardened against the
//! repository it runs in.
//!
//! A repository is data that the model (or whoever it was cloned from) may have written, and
//! its `.git/config` and `.git/hooks/` name programs git runs by itself: hooks,
//! `core.fsmonitor`, filter, diff and merge drivers, pagers, editors, credential helpers, ssh
//! and proxy commands. keel's git runs none of them:
//!
//! ```text
//! Git::new(dir).args([...]) [.read_only()]
//!   ─► discovery: `git config --list --name-only --show-scope -z`, hardened the same way
//!        ─► the command keys the repository's own config defines under names it picks
//!           (filter.<d>.clean|smudge|process, diff.<d>.textconv|command, merge.<d>.driver, …)
//!   ─► git --no-pager [--git-dir --work-tree] [-c caller's] [-c FIXED]... SUBCOMMAND
//!          [--no-ext-diff --no-textconv for diff/show/log] ARGS
//!      environment: inherited GIT_* and SSH_ASKPASS removed, then the caller's variables, then
//!      GIT_CONFIG_NOSYSTEM=1, GIT_TERMINAL_PROMPT=0, pagers `cat`, editor `true`, and the
//!      discovered keys made inert through GIT_CONFIG_COUNT/KEY_n/VALUE_n
//!   ─► a std or tokio `Command`, or a `CommandSpec` for the subprocess service; with
//!      `read_only` the child enters the read-only Landlock confinement before it execs
//! ```
//!
//! The user's global configuration (`~/.gitconfig`) is the user's own and stays in force
//! except for the fixed keys; the system configuration is not read. Overrides are command-line
//! configuration, which git reads after every file, so they win over anything a repository
//! sets (includes and `config.worktree` too). A driver name may hold any character, `=`
//! included, which `-c` cannot carry: the discovered keys travel as `GIT_CONFIG_KEY_n`.
//! Commands that write (worktree add, stash create, add, clone, checkout) cannot be read-only
//! confined; the overrides are what protects them.
//!
//! Needs git 2.31 or later (`GIT_CONFIG_COUNT`).

use crate::subprocess::confine::{ConfineSpec, Confinement};
use crate::subprocess::{CommandSpec, SubprocessError, SubprocessService};
use crate::workspace::SandboxMode;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Configuration every keel git command gets on its command line, winning over the
/// repository's: no hooks, no fsmonitor, no pager, editor, askpass, credential helper, proxy,
/// external diff, alternate-refs command or signing program, ssh as `ssh`, the `ext::`
/// transport refused, no automatic gc or maintenance, no submodule recursion.
pub const FIXED_CONFIG: &[&str] = &[
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.sshCommand=ssh",
    "core.pager=cat",
    "core.editor=true",
    "sequence.editor=true",
    "core.askPass=",
    "credential.helper=",
    "core.gitProxy=",
    "core.alternateRefsCommand=",
    "core.attributesFile=/dev/null",
    "diff.external=",
    "protocol.ext.allow=never",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "log.showSignature=false",
    "gpg.program=",
    "gpg.openpgp.program=",
    "gpg.x509.program=",
    "gpg.ssh.program=",
    "gpg.ssh.defaultKeyCommand=",
    "submodule.recurse=false",
    "gc.auto=0",
    "maintenance.auto=false",
];

/// Subcommands that produce diffs: they get `--no-ext-diff --no-textconv`.
const DIFF_COMMANDS: &[&str] = &["diff", "show", "log"];

/// Keys a repository defines under a name of its own choosing (`<section>.<name>.<key>`) that
/// hold a command, and the inert value each is given: an empty filter command is skipped, an
/// empty diff or merge command fails the operation instead of running anything, a textconv
/// of `cat` shows the file as it is.
const NAMED_COMMAND_KEYS: &[(&str, &str, &str)] = &[
    ("filter", "clean", ""),
    ("filter", "smudge", ""),
    ("filter", "process", ""),
    ("diff", "textconv", "cat"),
    ("diff", "command", ""),
    ("merge", "driver", ""),
    ("remote", "uploadpack", "git-upload-pack"),
    ("remote", "receivepack", "git-receive-pack"),
    ("credential", "helper", ""),
    ("trailer", "command", ""),
    ("trailer", "cmd", ""),
];

/// Time a configuration read through the subprocess service may take.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a git command could not be prepared: the repository's configuration, which has to be
/// read first, could not be. The caller reports it like a failure of the command itself.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// git could not be started (not installed, or the directory does not exist).
    #[error("cannot run git in {}: {source}", dir.display())]
    Spawn {
        /// The directory git was to run in.
        dir: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The subprocess service could not run git.
    #[error("cannot run git in {}: {source}", dir.display())]
    Subprocess {
        /// The directory git was to run in.
        dir: PathBuf,
        /// What the service said.
        source: SubprocessError,
    },
    /// `git config --list` failed: the repository's configuration is unreadable (git would
    /// refuse the command too).
    #[error("cannot read the git configuration in {}: {stderr}", dir.display())]
    Config {
        /// The directory git ran in.
        dir: PathBuf,
        /// What git said.
        stderr: String,
    },
}

/// Whether a command may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// It writes (the default): protected by the overrides alone.
    Writes,
    /// It only reads: it also runs under the read-only OS confinement.
    ReadOnly,
}

/// One hardened `git` command. Build it, then take a [`Git::std_command`],
/// [`Git::tokio_command`] or [`Git::spec`] (each reads the repository's configuration first).
#[derive(Debug, Clone)]
pub struct Git {
    dir: PathBuf,
    git_dir: Option<PathBuf>,
    work_tree: Option<PathBuf>,
    config: Vec<OsString>,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    access: Access,
}

impl Git {
    /// `git` run in `dir` (its working directory; `"."` is keel's own).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Git {
            dir: dir.into(),
            git_dir: None,
            work_tree: None,
            config: Vec::new(),
            args: Vec::new(),
            env: Vec::new(),
            access: Access::Writes,
        }
    }

    /// `--git-dir`: the repository, when it is not found from the directory.
    pub fn git_dir(mut self, path: impl Into<PathBuf>) -> Self {
        self.git_dir = Some(path.into());
        self
    }

    /// `--work-tree`: the working tree, when it is not found from the directory.
    pub fn work_tree(mut self, path: impl Into<PathBuf>) -> Self {
        self.work_tree = Some(path.into());
        self
    }

    /// `-c key=value` for this command (identity, line endings, …). The fixed overrides
    /// ([`FIXED_CONFIG`]) come after and win.
    pub fn config(mut self, key: &str, value: impl AsRef<OsStr>) -> Self {
        let mut kv = OsString::from(key);
        kv.push("=");
        kv.push(value);
        self.config.push(kv);
        self
    }

    /// Append one argument (the first is the subcommand).
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Append arguments (the first is the subcommand).
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Set an environment variable explicitly: it survives the removal of inherited `GIT_*`
    /// variables; the hardening variables are set after it and win.
    pub fn env(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// The command only reads (rev-parse, diff, status, log, show, config): it runs under the
    /// read-only OS confinement, as `bash` does in `read-only` mode, where the kernel has one.
    pub fn read_only(mut self) -> Self {
        self.access = Access::ReadOnly;
        self
    }

    /// The arguments as given, joined by spaces (for messages).
    pub fn describe(&self) -> String {
        self.args
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// A `std::process::Command` (stdin `/dev/null`), after reading the repository's
    /// configuration with a blocking `git config`.
    pub fn std_command(&self) -> Result<std::process::Command, GitError> {
        let out = self
            .discovery()
            .build_std(&[])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .map_err(|source| self.spawn_error(source))?;
        let named = self.named_overrides(out.status.success(), &out.stdout, &out.stderr)?;
        Ok(self.build_std(&named))
    }

    /// A `tokio::process::Command` (stdin `/dev/null`), after reading the repository's
    /// configuration.
    pub async fn tokio_command(&self) -> Result<tokio::process::Command, GitError> {
        let out = self
            .discovery()
            .build_tokio(&[])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .await
            .map_err(|source| self.spawn_error(source))?;
        let named = self.named_overrides(out.status.success(), &out.stdout, &out.stderr)?;
        Ok(self.build_tokio(&named))
    }

    /// A [`CommandSpec`] for `service` (its argv, working directory, environment changes
    /// and confinement), after reading the repository's configuration through `service`.
    pub async fn spec(&self, service: &SubprocessService) -> Result<CommandSpec, GitError> {
        let probe = self
            .discovery()
            .build_spec(service, &[])
            .timeout(DISCOVERY_TIMEOUT)
            .cap(4 * 1024 * 1024)
            .spill(false)
            .label("git-config");
        let out = service
            .run(probe, &CancellationToken::new())
            .await
            .map_err(|source| GitError::Subprocess {
                dir: self.dir.clone(),
                source,
            })?;
        let complete = out.code == Some(0) && !out.stdout.truncated();
        let named = self.named_overrides(complete, &out.stdout.tail, &out.stderr.tail)?;
        Ok(self.build_spec(service, &named))
    }

    fn spawn_error(&self, source: std::io::Error) -> GitError {
        GitError::Spawn {
            dir: self.dir.clone(),
            source,
        }
    }

    /// The same git, listing the configuration (read-only).
    fn discovery(&self) -> Git {
        Git {
            args: ["config", "--list", "--name-only", "--show-scope", "-z"]
                .into_iter()
                .map(OsString::from)
                .collect(),
            access: Access::ReadOnly,
            ..self.clone()
        }
    }

    /// The inert values for the command keys the discovery's output names.
    fn named_overrides(
        &self,
        success: bool,
        stdout: &[u8],
        stderr: &[u8],
    ) -> Result<Vec<(String, &'static str)>, GitError> {
        if !success {
            return Err(GitError::Config {
                dir: self.dir.clone(),
                stderr: String::from_utf8_lossy(stderr).trim().to_owned(),
            });
        }
        Ok(named_overrides(stdout))
    }

    /// Everything after `git`.
    fn argv(&self) -> Vec<OsString> {
        let mut argv: Vec<OsString> = vec!["--no-pager".into()];
        if let Some(dir) = &self.git_dir {
            let mut a = OsString::from("--git-dir=");
            a.push(dir);
            argv.push(a);
        }
        if let Some(tree) = &self.work_tree {
            let mut a = OsString::from("--work-tree=");
            a.push(tree);
            argv.push(a);
        }
        for kv in self
            .config
            .iter()
            .cloned()
            .chain(FIXED_CONFIG.iter().map(OsString::from))
        {
            argv.push("-c".into());
            argv.push(kv);
        }
        let mut args = self.args.iter();
        if let Some(sub) = args.next() {
            argv.push(sub.clone());
            if DIFF_COMMANDS.iter().any(|d| OsStr::new(d) == sub) {
                argv.push("--no-ext-diff".into());
                argv.push("--no-textconv".into());
            }
        }
        argv.extend(args.cloned());
        argv
    }

    /// The variables set, in order: the caller's, then the hardening ones.
    fn env_set(&self, named: &[(String, &'static str)]) -> Vec<(OsString, OsString)> {
        let mut env = self.env.clone();
        for (k, v) in [
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_TERMINAL_PROMPT", "0"),
            ("GIT_PAGER", "cat"),
            ("PAGER", "cat"),
            ("GIT_EDITOR", "true"),
        ] {
            env.push((k.into(), v.into()));
        }
        if !named.is_empty() {
            env.push(("GIT_CONFIG_COUNT".into(), named.len().to_string().into()));
            for (i, (key, value)) in named.iter().enumerate() {
                env.push((format!("GIT_CONFIG_KEY_{i}").into(), key.into()));
                env.push((format!("GIT_CONFIG_VALUE_{i}").into(), value.into()));
            }
        }
        env
    }

    /// The command with its arguments, directory and environment, not confined yet.
    fn base_std(&self, named: &[(String, &'static str)]) -> std::process::Command {
        let mut cmd = std::process::Command::new("git");
        cmd.args(self.argv()).current_dir(&self.dir);
        for (name, _) in std::env::vars_os() {
            if is_inherited_danger(&name) {
                cmd.env_remove(name);
            }
        }
        cmd.envs(self.env_set(named)).stdin(Stdio::null());
        cmd
    }

    fn build_std(&self, named: &[(String, &'static str)]) -> std::process::Command {
        let mut cmd = self.base_std(named);
        if self.access == Access::ReadOnly {
            confine_std(&mut cmd, read_only_confinement());
        }
        cmd
    }

    fn build_tokio(&self, named: &[(String, &'static str)]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::from(self.base_std(named));
        if self.access == Access::ReadOnly {
            read_only_confinement().apply(&mut cmd);
        }
        cmd
    }

    fn build_spec(
        &self,
        service: &SubprocessService,
        named: &[(String, &'static str)],
    ) -> CommandSpec {
        let mut spec = CommandSpec::new(std::iter::once(OsString::from("git")).chain(self.argv()))
            .cwd(&self.dir);
        for (name, _) in &service.config().base_env {
            if is_inherited_danger(name) {
                spec = spec.env_remove(name);
            }
        }
        for (k, v) in self.env_set(named) {
            spec = spec.env(k, v);
        }
        if self.access == Access::ReadOnly {
            spec = spec.confine(Arc::clone(read_only_confinement()));
        }
        spec
    }
}

/// An inherited variable keel's git never sees unless set explicitly: every `GIT_*` (the
/// repository, work tree, index, external diff, ssh, proxy, askpass, config parameters, …)
/// and `SSH_ASKPASS`.
fn is_inherited_danger(name: &OsStr) -> bool {
    let name = name.to_string_lossy();
    name.starts_with("GIT_") || name == "SSH_ASKPASS"
}

/// The inert values for the repository's named command keys, from `git config --list
/// --name-only --show-scope -z` (scope and name, each NUL-terminated). Keys of the user's
/// global configuration are kept; every other scope's are overridden.
fn named_overrides(listing: &[u8]) -> Vec<(String, &'static str)> {
    let mut fields = listing
        .split(|b| *b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned());
    let mut out: Vec<(String, &'static str)> = Vec::new();
    let mut push = |key: String, value: &'static str| {
        if !out.iter().any(|(k, _)| *k == key) {
            out.push((key, value));
        }
    };
    while let (Some(scope), Some(name)) = (fields.next(), fields.next()) {
        if scope == "global" {
            continue;
        }
        // `section.subsection.key`: git lowercases section and key, never the subsection.
        let (Some((section, rest)), Some((_, key))) = (name.split_once('.'), name.rsplit_once('.'))
        else {
            continue;
        };
        let Some(sub) = rest.strip_suffix(key).and_then(|s| s.strip_suffix('.')) else {
            continue;
        };
        for (s, k, inert) in NAMED_COMMAND_KEYS {
            if section == *s && key == *k {
                push(format!("{section}.{sub}.{key}"), inert);
                if section == "filter" {
                    push(format!("filter.{sub}.required"), "false");
                }
            }
        }
    }
    out
}

/// The read-only confinement of keel's reading git commands (writes only to the temp
/// directory and the harmless devices; network open: a partial clone fetches missing objects).
fn read_only_confinement() -> &'static Arc<Confinement> {
    static CONFINEMENT: OnceLock<Arc<Confinement>> = OnceLock::new();
    CONFINEMENT.get_or_init(|| {
        let temp = std::env::temp_dir();
        Arc::new(Confinement::prepare(&ConfineSpec {
            mode: SandboxMode::ReadOnly,
            roots: &[],
            extra_writable: &[],
            temp: &temp,
            network: true,
        }))
    })
}

/// [`Confinement::apply`] for a `std::process::Command`: the child restricts itself between
/// fork and exec.
fn confine_std(cmd: &mut std::process::Command, confinement: &Confinement) {
    use std::os::unix::process::CommandExt;
    let Some(fd) = confinement.ruleset_fd() else {
        return;
    };
    // Keel's read-only confinement lives as long as the process: the descriptor stays open.
    let in_child = move || crate::subprocess::confine::restrict_self(fd);
    // SAFETY: `in_child` runs in the forked child before exec and makes only the two
    // async-signal-safe system calls above; it allocates nothing.
    unsafe {
        cmd.pre_exec(in_child);
    }
}

#[cfg(test)]
mod tests;
