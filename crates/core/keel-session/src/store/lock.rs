//! One writer per session: a [`SessionLock`] is an exclusive advisory lock (`flock`, through
//! std's [`File::try_lock`]) on a sidecar file next to the session file, `<file>.lock`
//! (`session.jsonl.lock` in the store's layout), held for the writer's whole life.
//!
//! Taking it: the sidecar is opened (created 0600 when missing) without following a symlink in
//! its last component and must be a regular file; it is locked without waiting; the holder then
//! checks that the path still names the file it locked (a releasing holder unlinks it) and
//! writes its pid into it. A second writer, in another process or in this one, gets
//! [`StoreError::Busy`] naming the session and the holder's pid. Releasing (drop) unlinks the
//! sidecar, then closes it. The OS releases the lock when its holder dies: a sidecar left by a
//! SIGKILLed process blocks no one (its stale pid is overwritten by the next holder).
//!
//! Readers (load, list, export) never take it. Within one process, a registry of held sidecars
//! refuses a second lock even where `flock` is per process (NFS emulates it with POSIX locks).

use super::StoreError;
use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The sidecars this process holds, by (device, inode).
static HELD: Mutex<Option<HashSet<(u64, u64)>>> = Mutex::new(None);

/// How long a refused writer waits for a new holder to write its pid (it locks, then writes).
const PID_WAIT: Duration = Duration::from_millis(200);

/// An exclusive lock on one session file, released on drop (and by the OS when the process
/// dies). Obtained through [`super::Store::lock`]; a [`super::SessionWriter`] holds one.
#[derive(Debug)]
pub struct SessionLock {
    file: File,
    path: PathBuf,
    key: (u64, u64),
}

/// The sidecar lock file of `session_file`: `<session_file>.lock`.
pub fn lock_path(session_file: &Path) -> PathBuf {
    let mut name = session_file.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// How a session is named in errors: its directory's name (its id) in the store's layout,
/// else the file's path.
pub(crate) fn session_name(session_file: &Path) -> String {
    let standard = session_file
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| [super::PLAIN_FILE, super::ZSTD_FILE, super::DSH_ZSTD_FILE].contains(&n));
    match session_file.parent().and_then(|d| d.file_name()) {
        Some(dir) if standard => dir.to_string_lossy().into_owned(),
        _ => session_file.display().to_string(),
    }
}

impl SessionLock {
    /// Lock `session_file` (which need not exist yet) for writing, naming the session `name`
    /// in a refusal. Never waits: a held lock is [`StoreError::Busy`].
    pub fn acquire(session_file: &Path, name: &str) -> Result<SessionLock, StoreError> {
        let path = lock_path(session_file);
        // A releasing holder unlinks the sidecar after we opened it: then lock the new one.
        for _ in 0..16 {
            let mut file = open_sidecar(&path)?;
            let meta = file
                .metadata()
                .map_err(|e| StoreError::io("stat", &path, e))?;
            if !meta.is_file() {
                return Err(StoreError::io(
                    "lock",
                    &path,
                    std::io::Error::other("the lock file is not a regular file"),
                ));
            }
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    if !names(&path, &meta) {
                        // Its holder is releasing it.
                        continue;
                    }
                    return Err(busy(name, &path, read_pid(&mut file)));
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(StoreError::io("lock", &path, e));
                }
            }
            let key = (meta.dev(), meta.ino());
            if !names(&path, &meta) {
                continue;
            }
            if !register(key) {
                // Held by this process through another open file (where locks are per process).
                return Err(busy(name, &path, Some(std::process::id())));
            }
            let lock = SessionLock { file, path, key };
            lock.write_pid()?;
            return Ok(lock);
        }
        Err(StoreError::io(
            "lock",
            &path,
            std::io::Error::other("the lock file keeps being replaced"),
        ))
    }

    /// The sidecar file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn write_pid(&self) -> Result<(), StoreError> {
        let mut f = &self.file;
        f.set_len(0)
            .and_then(|()| f.seek(SeekFrom::Start(0)))
            .and_then(|_| f.write_all(format!("{}\n", std::process::id()).as_bytes()))
            .map_err(|e| StoreError::io("write the pid into", &self.path, e))
    }
}

impl Drop for SessionLock {
    /// Unlink the sidecar while still holding it, then close it (which releases the lock).
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        if let Ok(mut held) = HELD.lock()
            && let Some(set) = held.as_mut()
        {
            set.remove(&self.key);
        }
    }
}

fn open_sidecar(path: &Path) -> Result<File, StoreError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                StoreError::io(
                    "lock",
                    path,
                    std::io::Error::other("the lock file is a symbolic link"),
                )
            } else {
                StoreError::io("open the lock file", path, e)
            }
        })
}

/// Whether `path` still names the file whose metadata is `meta` (not unlinked or replaced).
fn names(path: &Path, meta: &std::fs::Metadata) -> bool {
    std::fs::symlink_metadata(path)
        .is_ok_and(|m| m.is_file() && (m.dev(), m.ino()) == (meta.dev(), meta.ino()))
}

/// Add `key` to this process's held sidecars; false when it is there already.
fn register(key: (u64, u64)) -> bool {
    match HELD.lock() {
        Ok(mut held) => held.get_or_insert_with(HashSet::new).insert(key),
        // A panic while the registry was held: rely on the OS lock alone.
        Err(_) => true,
    }
}

/// The holder's pid from its sidecar, waiting briefly for a holder that has just locked it.
fn read_pid(file: &mut File) -> Option<u32> {
    let until = Instant::now() + PID_WAIT;
    loop {
        let mut text = String::new();
        let read = file
            .seek(SeekFrom::Start(0))
            .and_then(|_| file.read_to_string(&mut text));
        if read.is_ok()
            && let Ok(pid) = text.trim().parse::<u32>()
        {
            return Some(pid);
        }
        if Instant::now() >= until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn busy(name: &str, path: &Path, pid: Option<u32>) -> StoreError {
    StoreError::Busy {
        session: name.to_owned(),
        pid,
        lock: path.to_owned(),
    }
}

/// The words of [`StoreError::Busy`].
pub(crate) fn busy_message(session: &str, pid: Option<u32>) -> String {
    match pid {
        Some(pid) if pid == std::process::id() => {
            format!(
                "session {session} is already open for writing in this keel process (pid {pid})"
            )
        }
        Some(pid) => format!("session {session} is open in another keel process (pid {pid})"),
        None => format!("session {session} is open in another keel process"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_in(dir: &tempfile::TempDir) -> PathBuf {
        dir.path().join("0193abc").join(super::super::PLAIN_FILE)
    }

    #[test]
    fn a_second_lock_is_refused_naming_the_session_and_the_pid() {
        let dir = tempfile::tempdir().unwrap();
        let file = file_in(&dir);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let held = SessionLock::acquire(&file, "0193abc").unwrap();
        let text = std::fs::read_to_string(held.path()).unwrap();
        assert_eq!(text.trim(), std::process::id().to_string());
        let e = SessionLock::acquire(&file, "0193abc").unwrap_err();
        match &e {
            StoreError::Busy { session, pid, .. } => {
                assert_eq!(session, "0193abc");
                assert_eq!(*pid, Some(std::process::id()));
            }
            other => panic!("not busy: {other}"),
        }
        let said = e.to_string();
        assert!(said.contains("session 0193abc is already open"), "{said}");
        assert!(
            said.contains(&format!("(pid {})", std::process::id())),
            "{said}"
        );
    }

    #[test]
    fn dropping_the_lock_releases_it_and_removes_the_sidecar() {
        let dir = tempfile::tempdir().unwrap();
        let file = file_in(&dir);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let held = SessionLock::acquire(&file, "s").unwrap();
        let sidecar = held.path().to_owned();
        drop(held);
        assert!(!sidecar.exists());
        let again = SessionLock::acquire(&file, "s").unwrap();
        drop(again);
    }

    #[test]
    fn a_sidecar_left_by_a_dead_process_does_not_block() {
        let dir = tempfile::tempdir().unwrap();
        let file = file_in(&dir);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        // A real pid that no longer runs.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        std::fs::write(lock_path(&file), format!("{dead}\n")).unwrap();
        let held = SessionLock::acquire(&file, "s").unwrap();
        let text = std::fs::read_to_string(held.path()).unwrap();
        assert_eq!(text.trim(), std::process::id().to_string());
    }

    #[test]
    fn a_symlinked_sidecar_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let file = file_in(&dir);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let target = dir.path().join("precious");
        std::fs::write(&target, "keep me").unwrap();
        std::os::unix::fs::symlink(&target, lock_path(&file)).unwrap();
        let e = SessionLock::acquire(&file, "s").unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
    }

    #[test]
    fn the_sidecar_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = file_in(&dir);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let held = SessionLock::acquire(&file, "s").unwrap();
        let mode = std::fs::metadata(held.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn names_are_ids_in_the_store_layout_and_paths_elsewhere() {
        assert_eq!(
            session_name(Path::new("/h/sessions/--p--/0193/session.jsonl")),
            "0193"
        );
        assert_eq!(
            session_name(Path::new("/h/sessions/--p--/0193/session.jsonl.zst")),
            "0193"
        );
        assert_eq!(session_name(Path::new("/tmp/x.jsonl")), "/tmp/x.jsonl");
    }
}
