//! Locks that survive a panicked holder: keel's shared state (a session's log, a job table, a
//! UI feed) stays usable after a thread panicked while holding its lock, because every writer
//! leaves it consistent between statements. [`Locked`] is the one place that recovers the
//! guard from a poisoned lock, instead of the same `unwrap_or_else` at every call site.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Take a lock whatever a panicked holder left behind.
pub trait Locked {
    /// What the lock guards.
    type Target;
    /// The lock's guard; a poisoned lock's guard is recovered, never a panic.
    fn locked(&self) -> MutexGuard<'_, Self::Target>;
}

impl<T> Locked for Mutex<T> {
    type Target = T;
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// [`Locked`] for readers-writer locks.
pub trait RwLocked {
    /// What the lock guards.
    type Target;
    /// A read guard, recovered from a poisoned lock.
    fn read_locked(&self) -> RwLockReadGuard<'_, Self::Target>;
    /// A write guard, recovered from a poisoned lock.
    fn write_locked(&self) -> RwLockWriteGuard<'_, Self::Target>;
}

impl<T> RwLocked for RwLock<T> {
    type Target = T;
    fn read_locked(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(PoisonError::into_inner)
    }
    fn write_locked(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_poisoned_lock_is_still_taken() {
        let m = Arc::new(Mutex::new(1));
        let r = Arc::new(RwLock::new(1));
        let (m2, r2) = (m.clone(), r.clone());
        let _ = std::thread::spawn(move || {
            let _g = m2.lock();
            let _w = r2.write();
            panic!("poison both");
        })
        .join();
        assert!(m.is_poisoned() && r.is_poisoned());
        *m.locked() += 1;
        *r.write_locked() += 1;
        assert_eq!((*m.locked(), *r.read_locked()), (2, 2));
    }
}
