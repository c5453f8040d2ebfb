//! Protected paths read-only to commands: a private mount namespace per confined command.
//!
//! Landlock only grants, and a right granted on a directory reaches everything beneath it, so
//! it cannot keep `root/.git` read-only while `root` is writable. Under `workspace-write` each
//! confined command therefore gets its own mount namespace in which every protected entry
//! ([`crate::protected::PROTECTED`]) that exists directly under a writable root is bind-mounted
//! onto itself read-only. The child does this between spawn and exec, *before*
//! `landlock_restrict_self`: a Landlock-restricted process may not mount, unmount or remount,
//! so neither the command nor anything it starts can undo it, and the mounts exist only in the
//! command's namespace (gone with its last process; keel's own view never changes). Landlock
//! does not cover `mount_setattr(2)`, so the child also gives up CAP_SYS_ADMIN for good before
//! exec: a root command could otherwise clear the binds' read-only flag.
//!
//! Data flow: [`MountPlan::at_spawn`] runs in keel, at each spawn (an approved escalation may
//! have created `.keel` since the last one). It picks the existing entries (lstat), reads
//! each one's mount flags (`statvfs`: a remount in a user namespace must keep the locked
//! nosuid/nodev/noexec/atime flags) and builds every C string and uid/gid map line. The forked
//! child only makes system calls on those buffers ([`MountPlan::enter`]): no allocation, no
//! formatting.
//!
//! Whether this machine lets keel make a mount namespace at all is probed once per process
//! ([`namespace_support`]): as root, `unshare(CLONE_NEWNS)`; otherwise (or when that is
//! refused) a user namespace too, mapping only keel's own uid and gid (files of other users
//! then show as `nobody` inside; permission checks are unchanged). Where neither works (e.g.
//! unprivileged user namespaces disabled) the probe's reason reaches
//! [`super::confine::Enforcement`]. Where the probe succeeded but a child's setup fails anyway,
//! that child does not start.

use crate::protected::PROTECTED;
use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// How a child gets a mount namespace of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NamespaceKind {
    /// `unshare(CLONE_NEWNS)`: keel holds CAP_SYS_ADMIN (root).
    Mount,
    /// `unshare(CLONE_NEWUSER | CLONE_NEWNS)` with keel's own uid and gid mapped.
    UserAndMount,
}

/// Why this process cannot give a child a mount namespace of its own (for the user).
#[derive(Debug, thiserror::Error)]
pub(crate) enum NamespaceUnavailable {
    /// The probe's plan could not be built: its target could not be read.
    #[error("cannot read {}: {source}", .path.display())]
    Unreadable {
        /// The directory the probe binds.
        path: PathBuf,
        /// What reading it gave.
        source: io::Error,
    },
    /// The probe ran and was refused (the user-namespace attempt's failure).
    #[error("no mount namespace: {0}")]
    Refused(ProbeFailure),
}

/// How the probe child failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProbeFailure {
    /// It ran and exited unsuccessfully (its setup failed).
    #[error("probe exited with {0}")]
    Exited(std::process::ExitStatus),
    /// It could not be started.
    #[error(transparent)]
    Spawn(io::Error),
}

/// Whether this process can give a child its own mount namespace with read-only binds, and
/// how; `Err` carries the reason it cannot, for the user. Probed once per process.
pub(crate) fn namespace_support() -> Result<NamespaceKind, &'static NamespaceUnavailable> {
    static PROBED: OnceLock<Result<NamespaceKind, NamespaceUnavailable>> = OnceLock::new();
    PROBED.get_or_init(probe).as_ref().copied()
}

/// Try the whole sequence (namespace, private propagation, a read-only bind of the temp
/// directory) in a child running `/bin/true`: first as root would, then with a user namespace.
fn probe() -> Result<NamespaceKind, NamespaceUnavailable> {
    let temp = std::env::temp_dir();
    let target = if temp.is_dir() {
        temp
    } else {
        PathBuf::from("/")
    };
    // The user-namespace attempt's error is the one that tells (the first is EPERM for
    // anyone but root).
    match probe_kind(NamespaceKind::Mount, &target) {
        Err(NamespaceUnavailable::Refused(_)) => probe_kind(NamespaceKind::UserAndMount, &target),
        done => done,
    }
}

/// One attempt of [`probe`], as `kind` would enter a namespace.
fn probe_kind(kind: NamespaceKind, target: &Path) -> Result<NamespaceKind, NamespaceUnavailable> {
    let plan = MountPlan::for_paths(kind, vec![target.to_path_buf()], None).map_err(|source| {
        NamespaceUnavailable::Unreadable {
            path: target.to_path_buf(),
            source,
        }
    })?;
    let mut cmd = std::process::Command::new("/bin/true");
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: `enter` makes only async-signal-safe system calls on buffers built above.
    unsafe {
        cmd.pre_exec(move || plan.enter());
    }
    match cmd.status() {
        Ok(status) if status.success() => Ok(kind),
        Ok(status) => Err(NamespaceUnavailable::Refused(ProbeFailure::Exited(status))),
        Err(e) => Err(NamespaceUnavailable::Refused(ProbeFailure::Spawn(e))),
    }
}

/// `statvfs(3)` `f_flag` bits (the kernel's `ST_*`, the same in every libc) and the mount
/// flags they stand for: the ones a remount must keep (locked in a user namespace), and
/// nosymfollow, kept so a read-only bind loosens nothing.
const KEPT_FLAGS: &[(libc::c_ulong, libc::c_ulong)] = &[
    (0x0002, libc::MS_NOSUID),
    (0x0004, libc::MS_NODEV),
    (0x0008, libc::MS_NOEXEC),
    (0x0400, libc::MS_NOATIME),
    (0x0800, libc::MS_NODIRATIME),
    (0x1000, libc::MS_RELATIME),
    (0x2000, libc::MS_NOSYMFOLLOW),
];

/// One read-only bind: the path (bound onto itself) and the flags of its remount.
#[derive(Debug)]
struct Bind {
    path: CString,
    remount: libc::c_ulong,
}

/// Everything a child does to enter its namespace, built before the fork.
#[derive(Debug)]
pub(crate) struct MountPlan {
    kind: NamespaceKind,
    /// `"<euid> <euid> 1"`, `"<egid> <egid> 1"` (user namespaces only).
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    binds: Vec<Bind>,
    /// The command's working directory, entered again once the binds are made (a cwd inside
    /// a protected directory would otherwise still be the writable directory underneath).
    cwd: Option<CString>,
}

impl MountPlan {
    /// The plan for a command about to start: every protected entry that exists now directly
    /// under one of `writable` (the roots a command may write), `cwd` entered again afterwards.
    /// A protected entry that is a symlink is followed when it leads to a place under one of
    /// `writable` (that place is made read-only) and skipped otherwise (Landlock already keeps
    /// writes away from everything outside them).
    pub(crate) fn at_spawn(
        kind: NamespaceKind,
        writable: &[PathBuf],
        cwd: Option<&Path>,
    ) -> io::Result<MountPlan> {
        let mut paths: Vec<PathBuf> = Vec::new();
        for root in writable {
            for p in PROTECTED {
                let entry = root.join(p.name);
                let Ok(meta) = entry.symlink_metadata() else {
                    continue; // not there (yet): nothing to bind
                };
                let path = if meta.file_type().is_symlink() {
                    match std::fs::canonicalize(&entry) {
                        Ok(target) if writable.iter().any(|w| target.starts_with(w)) => target,
                        _ => continue, // dangling, or leading outside: not writable anyway
                    }
                } else {
                    entry
                };
                if !paths.contains(&path) {
                    paths.push(path);
                }
            }
        }
        let cwd = match cwd {
            Some(dir) => Some(std::path::absolute(dir)?),
            None => std::env::current_dir().ok(), // the child inherits keel's
        };
        MountPlan::for_paths(kind, paths, cwd)
    }

    /// The plan binding each of `paths` (which exist) read-only.
    fn for_paths(
        kind: NamespaceKind,
        paths: Vec<PathBuf>,
        cwd: Option<PathBuf>,
    ) -> io::Result<MountPlan> {
        let binds = paths
            .into_iter()
            .map(|path| {
                let path = c_path(&path)?;
                Ok(Bind {
                    remount: libc::MS_BIND
                        | libc::MS_REMOUNT
                        | libc::MS_RDONLY
                        | kept_flags(&path)?,
                    path,
                })
            })
            .collect::<io::Result<Vec<_>>>()?;
        let cwd = cwd.as_deref().map(c_path).transpose()?;
        // SAFETY: geteuid(2) and getegid(2) cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        Ok(MountPlan {
            kind,
            uid_map: format!("{uid} {uid} 1").into_bytes(),
            gid_map: format!("{gid} {gid} 1").into_bytes(),
            binds,
            cwd,
        })
    }

    /// True when the plan binds nothing (no protected entry exists).
    pub(crate) fn is_empty(&self) -> bool {
        self.binds.is_empty()
    }

    /// In the child, before exec and before Landlock: enter the namespace and make the
    /// binds. Only async-signal-safe system calls on the plan's own buffers; any failure is
    /// returned (the child then does not start).
    pub(crate) fn enter(&self) -> io::Result<()> {
        let flags = match self.kind {
            NamespaceKind::Mount => libc::CLONE_NEWNS,
            NamespaceKind::UserAndMount => libc::CLONE_NEWUSER | libc::CLONE_NEWNS,
        };
        // SAFETY: unshare(2) takes plain flags.
        check(unsafe { libc::unshare(flags) })?;
        if self.kind == NamespaceKind::UserAndMount {
            write_proc(c"/proc/self/setgroups", b"deny")?;
            write_proc(c"/proc/self/uid_map", &self.uid_map)?;
            write_proc(c"/proc/self/gid_map", &self.gid_map)?;
        }
        // Nothing mounted here may propagate back to keel's namespace.
        mount(None, c"/", libc::MS_REC | libc::MS_PRIVATE)?;
        for bind in &self.binds {
            mount(Some(&bind.path), &bind.path, libc::MS_BIND | libc::MS_REC)?;
            mount(None, &bind.path, bind.remount)?;
        }
        if let Some(cwd) = &self.cwd {
            // SAFETY: chdir(2) reads a NUL-terminated path we own.
            check(unsafe { libc::chdir(cwd.as_ptr()) })?;
        }
        drop_sys_admin()
    }
}

/// `CAP_SYS_ADMIN`'s number (linux/capability.h).
const CAP_SYS_ADMIN: u32 = 21;

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Take CAP_SYS_ADMIN away from the child and every program it execs: from the bounding set
/// and from the sets it holds now. Landlock refuses mount, umount, remount and move_mount to a
/// restricted process, but not `mount_setattr(2)`, with which a command holding CAP_SYS_ADMIN
/// over its mount namespace (keel run as root; uid 0 mapped in a user namespace) could clear
/// the binds' read-only flag. Without the capability it cannot, and a namespace it makes of its
/// own holds them locked read-only.
fn drop_sys_admin() -> io::Result<()> {
    // SAFETY: prctl(2) with PR_CAPBSET_DROP takes plain integers.
    check(unsafe {
        libc::prctl(
            libc::PR_CAPBSET_DROP,
            libc::c_ulong::from(CAP_SYS_ADMIN),
            0,
            0,
            0,
        )
    })?;
    let header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut sets = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capget(2) reads the header and writes the two data words we own.
    let rc = unsafe { libc::syscall(libc::SYS_capget, &header, sets.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let (word, bit) = ((CAP_SYS_ADMIN / 32) as usize, 1u32 << (CAP_SYS_ADMIN % 32));
    sets[word].effective &= !bit;
    sets[word].permitted &= !bit;
    sets[word].inheritable &= !bit;
    // SAFETY: capset(2) reads the header and the two data words we own.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &header, sets.as_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `path` as a C string (a path from the file system has no NUL).
fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// The flags of the mount holding `path` that a read-only remount of a bind of it must keep.
fn kept_flags(path: &CStr) -> io::Result<libc::c_ulong> {
    // SAFETY: an all-zero statvfs is a valid value of the plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs(3) reads a NUL-terminated path we own and writes only `st`.
    check(unsafe { libc::statvfs(path.as_ptr(), &mut st) })?;
    Ok(KEPT_FLAGS
        .iter()
        .filter(|(st_flag, _)| st.f_flag & st_flag != 0)
        .fold(0, |acc, (_, ms_flag)| acc | ms_flag))
}

/// An error for a failed system call's return value.
fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `mount(2)` with no file system type and no data (bind and propagation changes).
fn mount(source: Option<&CStr>, target: &CStr, flags: libc::c_ulong) -> io::Result<()> {
    let source = source.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: mount(2) reads the NUL-terminated strings we own (or null) and plain flags.
    check(unsafe {
        libc::mount(
            source,
            target.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    })
}

/// Write `bytes` whole to the `/proc` file `path` (open, one write, close).
fn write_proc(path: &CStr, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: open(2) reads a NUL-terminated path; the descriptor is closed below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: write(2) reads `bytes.len()` bytes of a slice we own.
    let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    let result = if n < 0 {
        Err(io::Error::last_os_error())
    } else if n as usize != bytes.len() {
        Err(io::Error::from_raw_os_error(libc::EIO))
    } else {
        Ok(())
    };
    // SAFETY: `fd` was opened above and is closed once.
    unsafe {
        libc::close(fd);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(plan: &MountPlan) -> Vec<String> {
        plan.binds
            .iter()
            .map(|b| b.path.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_plan_binds_the_existing_entries_and_the_symlinks_leading_inside() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap().join("ws");
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(root.join("shared/claude")).unwrap();
        std::fs::write(root.join(".mcp.json"), "{}").unwrap();
        std::os::unix::fs::symlink("shared/claude", root.join(".claude")).unwrap();
        std::os::unix::fs::symlink(dir.path(), root.join(".agents")).unwrap(); // leads out
        std::os::unix::fs::symlink("missing", root.join(".codex")).unwrap(); // dangling
        let plan =
            MountPlan::at_spawn(NamespaceKind::Mount, std::slice::from_ref(&root), None).unwrap();
        let at = |rel: &str| root.join(rel).display().to_string();
        assert_eq!(
            bound(&plan),
            vec![at(".git"), at("shared/claude"), at(".mcp.json")]
        );
        for bind in &plan.binds {
            assert_ne!(bind.remount & libc::MS_RDONLY, 0);
            assert_ne!(bind.remount & libc::MS_BIND, 0);
        }
        let empty = MountPlan::at_spawn(
            NamespaceKind::Mount,
            &[root.join("shared")],
            Some(Path::new("/")),
        )
        .unwrap();
        assert!(empty.is_empty());
    }

    #[test]
    fn a_child_whose_bind_fails_does_not_start() {
        let Ok(kind) = namespace_support() else {
            return; // nothing to fail here
        };
        let mut plan = MountPlan::for_paths(kind, Vec::new(), None).unwrap();
        plan.binds.push(Bind {
            path: c"/nonexistent/keel-mountns-test".to_owned(),
            remount: libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
        });
        let mut cmd = std::process::Command::new("/bin/true");
        // SAFETY: `enter` makes only async-signal-safe system calls.
        unsafe {
            cmd.pre_exec(move || plan.enter());
        }
        let err = cmd.status().unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT), "{err}");
    }
}
