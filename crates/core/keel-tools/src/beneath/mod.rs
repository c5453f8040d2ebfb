//! Opening files *beneath* a directory: the one way keel reads and writes a file of the
//! workspace on its own (instruction files, the file tools, configuration, restores).
//!
//! A path checked first and opened later can be swapped for a symlink in between (a background
//! job looping `ln -sfn /outside r; rm r` while `write r` runs), and a file found by name can be
//! a symlink to `/proc/self/environ`. So nothing here resolves a path twice: a root directory is
//! opened once ([`Beneath::open`]) and every path is resolved *from that descriptor* by the
//! kernel, with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`: a symlink may point
//! elsewhere inside the root (`CLAUDE.md -> AGENTS.md` is common), but a link, a `..` or an
//! absolute path that would leave it fails with `EXDEV`, and `/proc` magic links fail with
//! `ELOOP`. Where the kernel has no `openat2` (Linux before 5.6, or a seccomp filter that
//! refuses it) the same rules are applied by [`walk`]: one component at a time from a directory
//! descriptor, each opened with `O_NOFOLLOW`, a symlink read with `readlinkat` and its target
//! resolved by the same rules (absolute targets refused), `..` never above the root.
//!
//! Writes never follow a link either: [`Beneath::replace`] creates a new file with a fresh name
//! in the parent directory's descriptor (`O_CREAT | O_EXCL | O_NOFOLLOW`), writes it, and
//! renames it over the target *within that descriptor* (`renameat`), which replaces a symlink
//! itself rather than the file it points to.
//!
//! Data flow: `Beneath::open(root)` → `read_regular(rel, cap)` (a regular file, size-capped)
//! or `open_dir(rel)` / `create_dir_all(rel)` → `replace(name, bytes)`.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

mod loader;
mod walk;
pub use loader::{Reader, read_user_file, read_user_text};
use std::sync::atomic::{AtomicU8, Ordering};
pub use walk::walk;

/// Symlinks followed in one resolution at most (the kernel's `MAXSYMLINKS`).
pub const MAX_LINKS: usize = 40;

/// Why a file beneath a root could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum BeneathError {
    /// The path, or a link on it, leads out of the root (`..`, an absolute path or link, a
    /// `/proc` magic link): nothing was opened. Callers skip the file with a notice.
    #[error("{path}: leads outside {root} (a symlink, '..' or an absolute path)")]
    Escapes {
        /// The path asked for, relative to the root.
        path: PathBuf,
        /// The root.
        root: PathBuf,
    },
    /// More than [`MAX_LINKS`] symlinks on the way, or a loop.
    #[error("{path}: too many levels of symbolic links (a loop?)")]
    Loop {
        /// The path asked for.
        path: PathBuf,
    },
    /// Not a regular file (a FIFO, a device, a socket, a directory).
    #[error("{path}: not a regular file (it is {kind})")]
    NotRegular {
        /// The path asked for.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// Larger than the caller's cap; nothing was read.
    #[error("{path}: {size} bytes, more than the {cap}-byte limit")]
    TooLarge {
        /// The path asked for.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The cap.
        cap: u64,
    },
    /// Any other failure (not found, permission, not a directory on the way …).
    #[error("{path}: {source}")]
    Io {
        /// The path asked for.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
}

impl BeneathError {
    /// True when the file simply is not there (callers looking for optional files skip these
    /// without a notice).
    pub fn is_not_found(&self) -> bool {
        matches!(self, BeneathError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }

    /// The underlying OS error, where there is one (`EXDEV` for an escape, `ELOOP` for a loop).
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            BeneathError::Escapes { .. } => Some(libc::EXDEV),
            BeneathError::Loop { .. } => Some(libc::ELOOP),
            BeneathError::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    fn from_io(path: &Path, root: &Path, e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::EXDEV) => BeneathError::Escapes {
                path: path.to_path_buf(),
                root: root.to_path_buf(),
            },
            Some(libc::ELOOP) => BeneathError::Loop {
                path: path.to_path_buf(),
            },
            _ => BeneathError::Io {
                path: path.to_path_buf(),
                source: e,
            },
        }
    }
}

/// How paths are resolved: by the kernel's `openat2`, or by [`walk`] where it has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolver {
    /// `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`.
    Openat2,
    /// The component-by-component `O_NOFOLLOW` walk.
    Walk,
}

/// 0: not probed yet; 1: openat2 works; 2: it does not.
static OPENAT2: AtomicU8 = AtomicU8::new(0);

impl Resolver {
    /// The resolver this kernel supports (probed on first use). `KEEL_BENEATH=walk` in the
    /// environment chooses the walk (as strict as the kernel's: tests run keel that way to
    /// stand for a kernel without `openat2`).
    pub fn detect() -> Resolver {
        match OPENAT2.load(Ordering::Relaxed) {
            1 => Resolver::Openat2,
            2 => Resolver::Walk,
            _ => {
                let forced = std::env::var_os("KEEL_BENEATH").is_some_and(|v| v == "walk");
                let works = !forced
                    && match openat2(cwd_fd(), c".", libc::O_PATH | libc::O_CLOEXEC, 0) {
                        Ok(_) => true,
                        Err(e) => !matches!(
                            e.raw_os_error(),
                            Some(libc::ENOSYS | libc::EPERM | libc::EINVAL)
                        ),
                    };
                OPENAT2.store(if works { 1 } else { 2 }, Ordering::Relaxed);
                if works {
                    Resolver::Openat2
                } else {
                    Resolver::Walk
                }
            }
        }
    }
}

/// A directory that paths are resolved beneath: a workspace root, or a directory in one.
pub struct Beneath {
    fd: OwnedFd,
    path: PathBuf,
    resolver: Resolver,
}

impl fmt::Debug for Beneath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Beneath")
            .field("path", &self.path)
            .field("resolver", &self.resolver)
            .finish()
    }
}

impl Beneath {
    /// Open `root` (which the caller trusts: the workspace the user chose, or a directory of
    /// theirs) as the directory everything else is resolved beneath.
    pub fn open(root: &Path) -> io::Result<Beneath> {
        Self::open_with(root, Resolver::detect())
    }

    /// [`Beneath::open`] with a chosen resolver (tests compare the two).
    pub fn open_with(root: &Path, resolver: Resolver) -> io::Result<Beneath> {
        let c = cstring(root.as_os_str())?;
        let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
        // SAFETY: `c` is a NUL-terminated path; open(2) returns a new descriptor or -1.
        let fd = unsafe { libc::open(c.as_ptr(), flags) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Beneath {
            // SAFETY: `fd` was just returned by open(2) and is owned by nothing else.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            path: root.to_path_buf(),
            resolver,
        })
    }

    /// The directory's path (as given to [`Beneath::open`], joined for subdirectories).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The resolver in use.
    pub fn resolver(&self) -> Resolver {
        self.resolver
    }

    /// Open `rel` (relative; `""` or `.` is the directory itself) with `flags` (`O_CLOEXEC`
    /// is added; `O_CREAT` is refused: create with [`Beneath::replace`]).
    pub fn open_raw(&self, rel: &Path, flags: i32) -> Result<OwnedFd, BeneathError> {
        if flags & libc::O_CREAT != 0 {
            return Err(BeneathError::Io {
                path: rel.to_path_buf(),
                source: io::Error::new(io::ErrorKind::InvalidInput, "O_CREAT is not resolved"),
            });
        }
        let flags = flags | libc::O_CLOEXEC;
        let got = match self.resolver {
            Resolver::Openat2 => match relative_cstring(rel) {
                Ok(c) => openat2_retrying(self.fd.as_fd(), &c, flags),
                Err(e) => Err(e),
            },
            Resolver::Walk => walk(self.fd.as_fd(), rel, flags),
        };
        got.map_err(|e| BeneathError::from_io(rel, &self.path, e))
    }

    /// The metadata of `rel` (a final symlink is followed within the root).
    pub fn metadata(&self, rel: &Path) -> Result<std::fs::Metadata, BeneathError> {
        let fd = self.open_raw(rel, libc::O_PATH)?;
        // `File` over an `O_PATH` descriptor supports `metadata` (fstat) only.
        File::from(fd).metadata().map_err(|e| BeneathError::Io {
            path: rel.to_path_buf(),
            source: e,
        })
    }

    /// Open `rel` for reading; it must be a regular file of at most `cap` bytes.
    pub fn open_regular(&self, rel: &Path, cap: u64) -> Result<(File, u64), BeneathError> {
        // O_NONBLOCK: opening a FIFO must not wait for a writer; cleared below for files.
        let fd = self.open_raw(rel, libc::O_RDONLY | libc::O_NOCTTY | libc::O_NONBLOCK)?;
        let file = File::from(fd);
        let md = file.metadata().map_err(|e| BeneathError::Io {
            path: rel.to_path_buf(),
            source: e,
        })?;
        if !md.is_file() {
            return Err(BeneathError::NotRegular {
                path: rel.to_path_buf(),
                kind: kind_of(&md),
            });
        }
        if md.len() > cap {
            return Err(BeneathError::TooLarge {
                path: rel.to_path_buf(),
                size: md.len(),
                cap,
            });
        }
        clear_nonblock(&file);
        Ok((file, md.len()))
    }

    /// The bytes of `rel`: a regular file of at most `cap` bytes (a file that grows past the
    /// cap while being read is cut at it).
    pub fn read_regular(&self, rel: &Path, cap: u64) -> Result<Vec<u8>, BeneathError> {
        let (file, len) = self.open_regular(rel, cap)?;
        let mut out = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        file.take(cap)
            .read_to_end(&mut out)
            .map_err(|e| BeneathError::Io {
                path: rel.to_path_buf(),
                source: e,
            })?;
        Ok(out)
    }

    /// [`Beneath::read_regular`] as text (invalid UTF-8 replaced).
    pub fn read_text(&self, rel: &Path, cap: u64) -> Result<String, BeneathError> {
        let bytes = self.read_regular(rel, cap)?;
        Ok(match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    /// The directory `rel` beneath this one, as a [`Beneath`] of its own.
    pub fn open_dir(&self, rel: &Path) -> Result<Beneath, BeneathError> {
        let fd = self.open_raw(rel, libc::O_PATH | libc::O_DIRECTORY)?;
        Ok(Beneath {
            fd,
            path: self.path.join(rel),
            resolver: self.resolver,
        })
    }

    /// The directory `rel`, made (mode 0777 less the umask) where missing, one component at a
    /// time and each made with `mkdirat` in its parent's descriptor.
    pub fn create_dir_all(&self, rel: &Path) -> Result<Beneath, BeneathError> {
        match self.open_dir(rel) {
            Ok(dir) => return Ok(dir),
            Err(e) if !e.is_not_found() => return Err(e),
            Err(_) => {}
        }
        let mut at = self.open_dir(Path::new(""))?;
        let mut sofar = PathBuf::new();
        for comp in rel.components() {
            let name = match comp {
                Component::Normal(n) => n,
                Component::CurDir => continue,
                _ => {
                    // `..` and roots are resolved by open_dir, which failed above for
                    // another reason than this; refuse rather than reason about it.
                    return Err(BeneathError::Escapes {
                        path: rel.to_path_buf(),
                        root: self.path.clone(),
                    });
                }
            };
            sofar.push(name);
            let c = cstring(name).map_err(|e| BeneathError::from_io(&sofar, &self.path, e))?;
            // SAFETY: `at.fd` is an open directory descriptor and `c` a NUL-terminated name.
            let rc = unsafe { libc::mkdirat(at.fd.as_raw_fd(), c.as_ptr(), 0o777) };
            if rc != 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EEXIST) {
                    return Err(BeneathError::from_io(&sofar, &self.path, e));
                }
            }
            // Whatever is there now (made by us or by someone else) is resolved beneath.
            at = self.open_dir(&sofar)?;
        }
        Ok(at)
    }

    /// Replace (or create) the file `name`, directly in this directory, with `bytes`: written
    /// to a fresh file in this directory's descriptor, then renamed over `name` within it. A
    /// symlink at `name` is replaced, never followed. The new file gets `mode` (else the old
    /// file's permission bits, else 0666 less the umask).
    pub fn replace(&self, name: &OsStr, bytes: &[u8], mode: Option<u32>) -> io::Result<()> {
        if name.is_empty() || name.as_bytes().contains(&b'/') || name == ".." || name == "." {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("not a file name: {}", name.to_string_lossy()),
            ));
        }
        let target = cstring(name)?;
        let old_mode = self.stat_name(&target).ok().and_then(|st| {
            (st.st_mode & libc::S_IFMT == libc::S_IFREG).then_some(st.st_mode & 0o7777)
        });
        let mode = mode.or(old_mode);
        let (tmp_name, mut file) = self.create_temp(name)?;
        let written = (|| {
            file.write_all(bytes)?;
            if let Some(mode) = mode {
                use std::os::unix::fs::PermissionsExt;
                file.set_permissions(std::fs::Permissions::from_mode(mode))?;
            }
            Ok(())
        })();
        let renamed = written.and_then(|()| {
            // SAFETY: both names are NUL-terminated and resolved in the same open directory.
            let rc = unsafe {
                libc::renameat(
                    self.fd.as_raw_fd(),
                    tmp_name.as_ptr(),
                    self.fd.as_raw_fd(),
                    target.as_ptr(),
                )
            };
            if rc == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        });
        if renamed.is_err() {
            // SAFETY: removes the temporary name this call created, in the same directory.
            unsafe { libc::unlinkat(self.fd.as_raw_fd(), tmp_name.as_ptr(), 0) };
        }
        renamed
    }

    /// Remove the file (or symlink) `name` directly in this directory (`unlinkat`): a link is
    /// removed itself, never followed.
    pub fn remove_file(&self, name: &OsStr) -> io::Result<()> {
        self.unlink(name, 0)
    }

    /// Remove the empty directory `name` directly in this directory.
    pub fn remove_dir(&self, name: &OsStr) -> io::Result<()> {
        self.unlink(name, libc::AT_REMOVEDIR)
    }

    fn unlink(&self, name: &OsStr, flags: i32) -> io::Result<()> {
        if name.is_empty() || name.as_bytes().contains(&b'/') || name == ".." || name == "." {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("not a file name: {}", name.to_string_lossy()),
            ));
        }
        let c = cstring(name)?;
        // SAFETY: the descriptor is an open directory and `c` a NUL-terminated name.
        let rc = unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), flags) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// `fstatat(name, AT_SYMLINK_NOFOLLOW)` of a name directly in this directory.
    fn stat_name(&self, name: &CStr) -> io::Result<libc::stat> {
        // SAFETY: an all-zero `stat` is a valid value for fstatat to overwrite.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: the descriptor is open, `name` NUL-terminated, `st` a valid out-pointer.
        let rc = unsafe {
            libc::fstatat(
                self.fd.as_raw_fd(),
                name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if rc == 0 {
            Ok(st)
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// A new empty file `.NAME.keel-XXXXXXXX` in this directory, created exclusively.
    fn create_temp(&self, name: &OsStr) -> io::Result<(CString, File)> {
        // O_PATH descriptors cannot be written through, but are a valid `dirfd`.
        for _ in 0..16 {
            let mut tmp = OsString::from(".");
            let short: Vec<u8> = name.as_bytes().iter().copied().take(64).collect();
            tmp.push(OsStr::from_bytes(&short));
            tmp.push(format!(".keel-{}", temp_suffix()));
            let c = cstring(&tmp)?;
            let flags =
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
            // SAFETY: the descriptor is an open directory, `c` NUL-terminated.
            let fd = unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), flags, 0o666) };
            if fd >= 0 {
                // SAFETY: `fd` was just returned by openat(2) and is owned by nothing else.
                return Ok((c, File::from(unsafe { OwnedFd::from_raw_fd(fd) })));
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(e);
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "no free temporary name",
        ))
    }
}

/// A name no other writer is likely to pick: the process id, a counter and the clock.
fn temp_suffix() -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{:x}-{n:x}-{nanos:08x}", std::process::id())
}

fn kind_of(md: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = md.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

fn clear_nonblock(file: &File) {
    let fd = file.as_raw_fd();
    // SAFETY: fcntl(2) on a descriptor `file` owns, with integer arguments only.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
    }
}

pub(crate) fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a NUL byte in {}", s.to_string_lossy()),
        )
    })
}

/// `rel` as a C string for openat2; an absolute path is an escape (`EXDEV`), as the kernel
/// would say; the empty path is `.`.
fn relative_cstring(rel: &Path) -> io::Result<CString> {
    if rel.is_absolute() {
        return Err(io::Error::from_raw_os_error(libc::EXDEV));
    }
    if rel.as_os_str().is_empty() {
        return Ok(c".".to_owned());
    }
    cstring(rel.as_os_str())
}

fn cwd_fd() -> BorrowedFd<'static> {
    // SAFETY: AT_FDCWD is a valid `dirfd` for the *at calls for the whole program.
    unsafe { BorrowedFd::borrow_raw(libc::AT_FDCWD) }
}

/// One `openat2` call with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`.
fn openat2(dir: BorrowedFd<'_>, path: &CStr, flags: i32, mode: u64) -> io::Result<OwnedFd> {
    // SAFETY: an all-zero open_how is valid; the fields are set below.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = u64::from(flags.cast_unsigned());
    how.mode = mode;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: the descriptor is open, `path` NUL-terminated and `how` a valid open_how of the
    // size passed; the call returns a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(fd).map_err(|_| io::Error::other("descriptor out of range"))?;
    // SAFETY: `fd` was just returned by openat2(2) and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `openat2`, retried while the kernel answers `EAGAIN` (a rename raced a `..`).
fn openat2_retrying(dir: BorrowedFd<'_>, path: &CStr, flags: i32) -> io::Result<OwnedFd> {
    let mut tries = 0;
    loop {
        match openat2(dir, path, flags, 0) {
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) && tries < 8 => tries += 1,
            other => return other,
        }
    }
}

/// The `(device, inode)` of an open descriptor: what tests compare resolvers by.
pub fn identity(fd: BorrowedFd<'_>) -> io::Result<(u64, u64)> {
    let md = File::from(fd.try_clone_to_owned()?).metadata()?;
    Ok((md.dev(), md.ino()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
