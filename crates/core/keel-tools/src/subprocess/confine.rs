//! OS confinement of tool commands (Linux Landlock).
//!
//! File tools check every path against the workspace themselves; a command run by `bash` can
//! open any path, so the kernel has to say no. Under `workspace-write` a confined command (and
//! every process it starts: Landlock domains are inherited and cannot be left) may write only
//! beneath the workspace roots, the configured extra writable roots, the system temp directory
//! (keel's `$TMPDIR`, else `/tmp`, handed to commands as `TMPDIR`) and a few device files (`/dev/null`, `/dev/tty`, …); under
//! `read-only` only beneath temp and those devices; `full-access` is not confined. Writes cover
//! creating, writing, truncating, removing, renaming and linking files and directories.
//!
//! Reads stay open: compilers, interpreters, `git` and the shell read system directories, the
//! toolchain, the user's configuration and caches all over the file system, and no list of
//! readable places is both safe and complete. The threat the sandbox answers is a command that
//! changes or destroys things outside the project; the credential scrub of the environment
//! answers the other one. With `sandbox.network = false` TCP connects and binds are refused too
//! (Landlock ABI 4 and later; UDP and Unix sockets are not covered by Landlock).
//!
//! The ruleset is built once per workspace, in keel, before any command runs; the child
//! only calls `prctl(PR_SET_NO_NEW_PRIVS)` and `landlock_restrict_self` between spawn and exec,
//! both async-signal-safe, and a child that cannot restrict itself does not start. When the
//! kernel cannot enforce (no Landlock, Landlock disabled, an ABI without network rules when the
//! network is to be closed) the [`Enforcement`] says so; keel reports it and never claims a
//! confinement it does not have.
//!
//! Protected paths ([`crate::protected`]: `.git`, `.keel`, `.mcp.json` …) stay read-only to
//! commands under `workspace-write` although their root is writable: each command gets its own
//! mount namespace with the existing ones bind-mounted read-only, made in the child before
//! Landlock (which then forbids mounting): [`super::mountns`]. Where the machine cannot make a
//! mount namespace, commands are still confined by Landlock and the [`Enforcement`] says the
//! protected paths are not read-only to them.

use super::mountns::{MountPlan, NamespaceKind, namespace_support};
use crate::workspace::SandboxMode;
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr,
};
use std::fmt;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Device files a confined command may still write (`> /dev/null` is everywhere in scripts).
const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/random",
    "/dev/urandom",
];

/// What a confinement is asked to allow.
#[derive(Debug, Clone)]
pub struct ConfineSpec<'a> {
    /// The sandbox mode.
    pub mode: SandboxMode,
    /// Workspace roots (writable under `workspace-write`).
    pub roots: &'a [PathBuf],
    /// Extra writable roots from the configuration (under `workspace-write`).
    pub extra_writable: &'a [PathBuf],
    /// The temp directory (writable in every confined mode).
    pub temp: &'a Path,
    /// Whether commands may use the network.
    pub network: bool,
}

/// Whether the network restriction asked for is in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkRule {
    /// The network is open (as configured).
    Open,
    /// TCP connect and bind are refused.
    TcpClosed,
    /// A closed network was asked for but this kernel's Landlock cannot enforce it.
    NotEnforced,
}

/// Whether the protected paths ([`crate::protected`]) are read-only to commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtectedRule {
    /// They are: under `workspace-write` each command sees the existing ones through read-only
    /// bind mounts in a mount namespace of its own; under `read-only` nothing in the workspace
    /// is writable anyway.
    ReadOnly,
    /// Commands can write them (Landlock confines them to the roots, which hold them): this
    /// machine cannot give a command its own mount namespace.
    NotEnforced {
        /// Why, for the user.
        reason: String,
    },
}

/// How far the kernel enforces the sandbox for commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enforcement {
    /// `full-access`: commands are not confined.
    Unconfined,
    /// Landlock confines writes (and the network as [`NetworkRule`] says).
    Landlock {
        /// The kernel's Landlock ABI version.
        abi: i32,
        /// The network rule in force.
        network: NetworkRule,
        /// Whether the protected paths are read-only to commands.
        protected: ProtectedRule,
    },
    /// The kernel cannot enforce: commands run unconfined although the mode asks otherwise.
    Unavailable {
        /// Why, for the user.
        reason: String,
    },
}

impl Enforcement {
    /// True when everything the mode and the configuration ask for is enforced.
    pub fn is_complete(&self) -> bool {
        match self {
            Enforcement::Unconfined => true,
            Enforcement::Landlock {
                network, protected, ..
            } => *network != NetworkRule::NotEnforced && *protected == ProtectedRule::ReadOnly,
            Enforcement::Unavailable { .. } => false,
        }
    }
}

impl fmt::Display for Enforcement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Enforcement::Unconfined => f.write_str("none (full-access)"),
            Enforcement::Landlock {
                abi,
                network,
                protected,
            } => {
                write!(f, "landlock (ABI {abi}): writes confined")?;
                match protected {
                    ProtectedRule::ReadOnly => f.write_str(", protected paths read-only")?,
                    ProtectedRule::NotEnforced { reason } => {
                        write!(f, ", protected paths NOT read-only to commands ({reason})")?
                    }
                }
                match network {
                    NetworkRule::Open => f.write_str(", network open"),
                    NetworkRule::TcpClosed => f.write_str(", TCP closed"),
                    NetworkRule::NotEnforced => f.write_str(
                        ", network NOT closed (Landlock network rules need ABI 4 or later)",
                    ),
                }
            }
            Enforcement::Unavailable { reason } => {
                write!(f, "none: commands run unconfined ({reason})")
            }
        }
    }
}

/// A prepared confinement: the ruleset (when there is one), the protected paths' read-only
/// binds (when made) and what it enforces.
#[derive(Debug)]
pub struct Confinement {
    ruleset: Option<OwnedFd>,
    protect: Option<Protect>,
    enforcement: Enforcement,
}

/// Where to look for protected entries to bind read-only, and how to get a namespace.
#[derive(Debug)]
struct Protect {
    kind: NamespaceKind,
    /// The workspace roots and extra writable roots.
    writable: Vec<PathBuf>,
}

impl Confinement {
    /// No confinement (`full-access`, or tests of other things).
    pub fn none() -> Self {
        Confinement {
            ruleset: None,
            protect: None,
            enforcement: Enforcement::Unconfined,
        }
    }

    /// Build the ruleset `spec` asks for on this kernel.
    pub fn prepare(spec: &ConfineSpec<'_>) -> Self {
        if spec.mode == SandboxMode::FullAccess {
            return Confinement::none();
        }
        let abi = kernel_abi();
        if abi <= 0 {
            let reason = match -abi {
                libc::EOPNOTSUPP => "Landlock is disabled in this kernel".to_owned(),
                libc::ENOSYS => "this kernel has no Landlock".to_owned(),
                e => format!(
                    "Landlock is not usable: {}",
                    std::io::Error::from_raw_os_error(e)
                ),
            };
            return Confinement::unavailable(reason);
        }
        let mut writable: Vec<&Path> = Vec::new();
        if spec.mode == SandboxMode::WorkspaceWrite {
            writable.extend(spec.roots.iter().map(PathBuf::as_path));
            writable.extend(spec.extra_writable.iter().map(PathBuf::as_path));
        }
        writable.push(spec.temp);
        let close_tcp = !spec.network && abi >= 4;
        let (protect, protected) = if spec.mode == SandboxMode::WorkspaceWrite {
            match namespace_support() {
                Ok(kind) => (
                    Some(Protect {
                        kind,
                        writable: spec
                            .roots
                            .iter()
                            .chain(spec.extra_writable)
                            .cloned()
                            .collect(),
                    }),
                    ProtectedRule::ReadOnly,
                ),
                Err(why) => (
                    None,
                    ProtectedRule::NotEnforced {
                        reason: why.to_string(),
                    },
                ),
            }
        } else {
            (None, ProtectedRule::ReadOnly) // read-only: the roots are not writable at all
        };
        match build(abi, &writable, close_tcp) {
            Ok(None) => Confinement::unavailable("Landlock gave no ruleset".to_owned()),
            Ok(Some(fd)) => Confinement {
                ruleset: Some(fd),
                protect,
                enforcement: Enforcement::Landlock {
                    abi,
                    network: if spec.network {
                        NetworkRule::Open
                    } else if close_tcp {
                        NetworkRule::TcpClosed
                    } else {
                        NetworkRule::NotEnforced
                    },
                    protected,
                },
            },
            Err(e) => Confinement::unavailable(format!("Landlock setup failed: {e}")),
        }
    }

    fn unavailable(reason: String) -> Self {
        Confinement {
            ruleset: None,
            protect: None,
            enforcement: Enforcement::Unavailable { reason },
        }
    }

    /// What is enforced.
    pub fn enforcement(&self) -> &Enforcement {
        &self.enforcement
    }

    /// The Landlock ruleset descriptor, for keel's own `git` (`crate::git`) entering this
    /// confinement on a `std::process::Command`; `None` when nothing is enforced. It stays open
    /// while this value lives. Landlock alone: the protected paths' read-only binds of
    /// `workspace-write` are made by [`Confinement::apply`] only.
    pub(crate) fn ruleset_fd(&self) -> Option<std::os::fd::RawFd> {
        self.ruleset.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// What a child started in `cwd` does to enter this confinement before it execs: under
    /// `workspace-write` its own mount namespace with the protected entries that exist now
    /// read-only (then `cwd` entered again), then Landlock. `None` when nothing is enforced.
    /// The ruleset descriptor must stay open (this value alive) until the spawn returns. When
    /// the binds cannot be prepared (a protected entry's mount cannot be read) the child fails
    /// with that error: the command never runs with them writable.
    pub(crate) fn for_child(&self, cwd: Option<&Path>) -> Option<ChildConfinement> {
        let ruleset = self.ruleset.as_ref()?;
        let plan = match &self.protect {
            Some(p) => MountPlan::at_spawn(p.kind, &p.writable, cwd)
                .map(|plan| Some(plan).filter(|plan| !plan.is_empty()))
                // A raw code: the child returns it without allocating.
                .map_err(|e| e.raw_os_error().unwrap_or(libc::EINVAL)),
            None => Ok(None),
        };
        Some(ChildConfinement {
            plan,
            ruleset: ruleset.as_raw_fd(),
        })
    }

    /// [`Confinement::for_child`] on a `tokio::process::Command` (its working directory as set
    /// so far), entered between spawn and exec.
    pub(crate) fn apply(&self, cmd: &mut tokio::process::Command) {
        let Some(step) = self.for_child(cmd.as_std().get_current_dir()) else {
            return;
        };
        // SAFETY: `enter` makes only async-signal-safe system calls on buffers built above;
        // it allocates nothing.
        unsafe {
            cmd.pre_exec(move || step.enter());
        }
    }
}

/// A confinement prepared for one child ([`Confinement::for_child`]).
pub(crate) struct ChildConfinement {
    plan: Result<Option<MountPlan>, i32>,
    ruleset: std::os::fd::RawFd,
}

impl ChildConfinement {
    /// In the child before exec: the mount plan (before Landlock, which forbids mounting from
    /// then on), then Landlock. Only async-signal-safe system calls; no allocation.
    pub(crate) fn enter(&self) -> std::io::Result<()> {
        match &self.plan {
            Err(code) => return Err(std::io::Error::from_raw_os_error(*code)),
            Ok(Some(plan)) => plan.enter()?,
            Ok(None) => {}
        }
        restrict_self(self.ruleset)
    }
}

/// In the child before exec: `no_new_privs`, then enter the Landlock ruleset `fd` (which
/// the parent keeps open until the spawn returns). Two async-signal-safe system calls; no
/// allocation.
pub(crate) fn restrict_self(fd: std::os::fd::RawFd) -> std::io::Result<()> {
    // SAFETY: prctl(2) with PR_SET_NO_NEW_PRIVS takes plain integers.
    let rc = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: landlock_restrict_self(2) takes a descriptor this process holds open and plain
    // flags; it touches no memory of ours.
    let rc = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The kernel's Landlock ABI version, or a negated errno.
fn kernel_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the call only
    // returns a number.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v < 0 {
        -std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::ENOSYS)
    } else {
        i32::try_from(v).unwrap_or(i32::MAX)
    }
}

/// The write rights keel handles on a kernel of ABI `abi`: the classic write set, renames and
/// links across directories (ABI 2) and truncation (ABI 3). Device ioctls (ABI 5) stay open:
/// terminals need them.
fn write_rights(abi: i32) -> BitFlags<AccessFs> {
    AccessFs::from_write(ABI::from(abi.min(3)))
}

fn build(
    abi: i32,
    writable: &[&Path],
    close_tcp: bool,
) -> Result<Option<OwnedFd>, landlock::RulesetError> {
    let dir_rights = write_rights(abi);
    let file_rights = dir_rights & (AccessFs::WriteFile | AccessFs::Truncate);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(dir_rights)?;
    if close_tcp {
        ruleset = ruleset.handle_access(AccessNet::from_all(ABI::V4))?;
    }
    let mut created = ruleset.create()?;
    let devices = WRITABLE_DEVICES.iter().map(Path::new);
    for path in writable.iter().copied().chain(devices) {
        // A configured root that does not exist grants nothing; it is not an error.
        let Ok(fd) = PathFd::new(path) else {
            continue;
        };
        let rights = if path.is_dir() {
            dir_rights
        } else {
            file_rights
        };
        created = created.add_rule(PathBeneath::new(fd, rights))?;
    }
    Ok(created.into())
}
