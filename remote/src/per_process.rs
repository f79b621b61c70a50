//! [`PerProcess`]: a value that belongs to the process that made it, as the
//! clients, the runtime and the prefetcher of this crate do. A forked child
//! (a DataLoader worker) makes its own on first use.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// A value of this process, made on first use. A forked child makes its own
/// and leaks the one it inherited, never dropping it: that value's state may be
/// mid-change (a thread of the parent was using it), and what it holds is the
/// parent's (threads the child does not have, sockets registered in the epoll
/// instance both share, which a drop here would unregister).
///
/// Its lock is taken only inside [`bcd::fork::excluding_forks`], so no child
/// finds it held by a thread that does not exist there, and the value is made
/// outside the lock.
#[derive(Debug)]
pub(crate) struct PerProcess<T> {
    slot: Mutex<Option<(u32, T)>>,
}

impl<T: Clone> PerProcess<T> {
    pub(crate) const fn new() -> PerProcess<T> {
        PerProcess {
            slot: Mutex::new(None),
        }
    }

    /// This process's value, if it has made one.
    pub(crate) fn get(&self) -> Option<T> {
        let pid = std::process::id();
        bcd::fork::excluding_forks(|| {
            let slot = self.lock();
            #[cfg(test)]
            crate::fork_tests::inside_section();
            mine(&slot, pid)
        })
    }

    /// This process's value, made by `make` when it has none. Threads making
    /// one at once each make theirs; the first one stored is kept, and the
    /// others are dropped.
    pub(crate) fn get_or_try_make<E>(&self, make: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        if let Some(value) = self.get() {
            return Ok(value);
        }
        let made = make()?;
        let pid = std::process::id();
        let (value, unused) = bcd::fork::excluding_forks(|| {
            let mut slot = self.lock();
            if let Some(theirs) = mine(&slot, pid) {
                return (theirs, Some(made));
            }
            if let Some((_, inherited)) = slot.replace((pid, made.clone())) {
                // Another process's (see the type's documentation).
                std::mem::forget(inherited);
            }
            (made, None)
        });
        // Dropped outside the lock.
        drop(unused);
        Ok(value)
    }

    /// [`PerProcess::get_or_try_make`] of a value that is always made.
    pub(crate) fn get_or_make(&self, make: impl FnOnce() -> T) -> T {
        match self.get_or_try_make(|| Ok::<T, std::convert::Infallible>(make())) {
            Ok(value) => value,
            Err(never) => match never {},
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<(u32, T)>> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn mine<T: Clone>(slot: &Option<(u32, T)>, pid: u32) -> Option<T> {
    match slot {
        Some((owner, value)) if *owner == pid => Some(value.clone()),
        _ => None,
    }
}

impl<T> Drop for PerProcess<T> {
    fn drop(&mut self) {
        let slot = self.slot.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some((owner, value)) = slot.take() {
            match owner == std::process::id() {
                true => drop(value),
                false => std::mem::forget(value),
            }
        }
    }
}
