//! The component walk: what `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` does, done by
//! hand from a directory descriptor for kernels without `openat2`.

use super::{MAX_LINKS, cstring};
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// One step of a path still to resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// `.` (or a trailing `/`): stay, but what came before must be a directory.
    Here,
    /// `..`.
    Up,
    /// A name.
    Name(OsString),
}

/// The steps of `path` as the kernel reads it: split at `/`, empty parts skipped, `.` kept
/// (`f/.` is `ENOTDIR` for a file `f`), a trailing `/` read as `.`; an absolute path is an
/// escape (`EXDEV`).
fn steps(path: &Path) -> io::Result<Vec<Step>> {
    let bytes = path.as_os_str().as_bytes();
    if bytes.first() == Some(&b'/') {
        return Err(io::Error::from_raw_os_error(libc::EXDEV));
    }
    let mut out = Vec::new();
    for part in bytes.split(|b| *b == b'/') {
        match part {
            b"" => {}
            b"." => out.push(Step::Here),
            b".." => out.push(Step::Up),
            name => out.push(Step::Name(OsStr::from_bytes(name).to_os_string())),
        }
    }
    if bytes.len() > 1 && bytes.last() == Some(&b'/') {
        out.push(Step::Here);
    }
    Ok(out)
}

/// The resolution `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` performs, done by hand
/// from `root`: each component opened `O_PATH | O_NOFOLLOW` from its parent's descriptor; a
/// symlink's target (read from the link's own descriptor, so it cannot be swapped) is spliced
/// in front of the rest; an absolute target, or a `..` at the root, is `EXDEV`; more than
/// [`MAX_LINKS`] links is `ELOOP`. The final component is opened with `flags | O_NOFOLLOW`
/// once it is known not to be a link (a link swapped in after that fails with `ELOOP`), unless
/// `flags` has `O_NOFOLLOW` itself, when a final link is not followed (as the kernel does).
pub fn walk(root: BorrowedFd<'_>, rel: &Path, flags: i32) -> io::Result<OwnedFd> {
    let mut pending: std::collections::VecDeque<Step> = steps(rel)?.into();
    // The directories entered below the root, innermost last.
    let mut stack: Vec<OwnedFd> = Vec::new();
    let mut links = 0usize;
    let nofollow_final = flags & libc::O_NOFOLLOW != 0;
    loop {
        let Some(step) = pending.pop_front() else {
            // Nothing left: the directory we are in is the answer.
            return openat_nofollow(
                dir_of(root, &stack),
                OsStr::new("."),
                flags & !libc::O_NOFOLLOW,
            );
        };
        let last = pending.is_empty();
        let name = match step {
            Step::Here => continue,
            Step::Up => {
                if stack.pop().is_none() {
                    return Err(io::Error::from_raw_os_error(libc::EXDEV));
                }
                continue;
            }
            Step::Name(name) => name,
        };
        let here = dir_of(root, &stack);
        let probe = openat_nofollow(here, &name, libc::O_PATH)?;
        // SAFETY: an all-zero `stat` is a valid value for fstat to overwrite.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `probe` is an open descriptor and `st` a valid out-pointer.
        if unsafe { libc::fstat(probe.as_raw_fd(), &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let is_link = st.st_mode & libc::S_IFMT == libc::S_IFLNK;
        if is_link && !(last && nofollow_final) {
            links += 1;
            if links > MAX_LINKS {
                return Err(io::Error::from_raw_os_error(libc::ELOOP));
            }
            let target = read_link_fd(probe.as_fd())?;
            if target.is_empty() {
                return Err(io::Error::from_raw_os_error(libc::ENOENT));
            }
            for step in steps(Path::new(&target))?.into_iter().rev() {
                pending.push_front(step);
            }
            continue;
        }
        if last {
            if flags & libc::O_PATH != 0 && flags & !(libc::O_PATH | libc::O_NOFOLLOW) == 0 {
                return Ok(probe);
            }
            return openat_nofollow(here, &name, flags);
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
        }
        stack.push(probe);
    }
}

/// The directory a walk is in: the innermost entered, else the root.
fn dir_of<'a>(root: BorrowedFd<'a>, stack: &'a [OwnedFd]) -> BorrowedFd<'a> {
    stack.last().map_or(root, |fd| fd.as_fd())
}

/// `openat(dir, name, flags | O_NOFOLLOW)` of one component.
fn openat_nofollow(dir: BorrowedFd<'_>, name: &OsStr, flags: i32) -> io::Result<OwnedFd> {
    let c = cstring(name)?;
    let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: the descriptor is open and `c` NUL-terminated; returns a new descriptor or -1.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by openat(2) and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The target of the symlink `fd` (an `O_PATH | O_NOFOLLOW` descriptor of the link).
fn read_link_fd(fd: BorrowedFd<'_>) -> io::Result<OsString> {
    let mut buf = vec![0u8; 256];
    loop {
        // SAFETY: `buf` is writable for its length; the empty path names `fd` itself.
        let n = unsafe {
            libc::readlinkat(
                fd.as_raw_fd(),
                c"".as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
        if n < buf.len() {
            buf.truncate(n);
            return Ok(OsString::from_vec_compat(buf));
        }
        if buf.len() >= 1 << 16 {
            return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
        }
        buf.resize(buf.len() * 2, 0);
    }
}

trait FromVec {
    fn from_vec_compat(v: Vec<u8>) -> OsString;
}

impl FromVec for OsString {
    fn from_vec_compat(v: Vec<u8>) -> OsString {
        use std::os::unix::ffi::OsStringExt;
        OsString::from_vec(v)
    }
}
