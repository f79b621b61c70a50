//! The per-process state behind a `bcd.Dataset`, and the rules for reaching it
//! from Python code without deadlocking.
//!
//! A [`Handle`] holds the open [`Dataset`] behind a read/write lock: reads share
//! it, an extend holds it exclusively for its whole transaction. Three rules keep
//! that lock from hanging the interpreter:
//!
//! - Waiting for it always releases the GIL, so a thread that holds it can always
//!   get the GIL back to finish.
//! - Methods convert their Python arguments (indices, keys, iterables) before they
//!   take it, so the user's code (`__index__`, `__iter__`, a buffer exporter) does
//!   not run under it.
//! - Python code that still runs under it on the holding thread (a generator an
//!   extend pulls from, a `__del__` run by a garbage collection an allocation
//!   triggers) may read the same dataset: such nested reads reuse the access the
//!   outer call holds ([`held`]) instead of waiting for a lock the thread itself
//!   holds, or queueing behind a writer that waits for it. A nested extend is an
//!   error, not a hang.
//!
//! A process forked while some thread holds the lock would inherit it held by a
//! thread that does not exist there. So a handle belongs to one fork generation
//! ([`bcd::fork::generation`]); a child that finds an inherited one in use opens
//! the dataset again by path (see `PyDataset::handle`).

use std::cell::RefCell;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::RwLockExt;

use bcd::Dataset;

use crate::shard_views::ShardViews;

/// One process's open dataset.
pub struct Handle {
    /// The fork generation this handle's lock states belong to.
    generation: AtomicU64,
    store: RwLock<Dataset>,
    pub views: ShardViews,
}

impl Handle {
    pub fn new(dataset: Dataset) -> Handle {
        Handle {
            generation: AtomicU64::new(bcd::fork::generation()),
            store: RwLock::new(dataset),
            views: ShardViews::default(),
        }
    }

    /// Whether this handle was made in (or adopted by) the current process.
    pub fn is_current(&self, generation: u64) -> bool {
        self.generation.load(Ordering::Acquire) == generation
    }

    /// In a forked child: adopts this inherited handle if no thread held its lock
    /// at the fork (its dataset is then a consistent committed state, and its
    /// mappings are shared with the parent); false if one did.
    ///
    /// Everything else in the handle is only locked under the store lock or with
    /// the GIL held and not released (the forking thread held the GIL), so a free
    /// store lock means a free handle.
    pub fn adopt(&self, generation: u64) -> bool {
        let free = match self.store.try_write() {
            Ok(_) => true,
            Err(TryLockError::Poisoned(_)) => true,
            Err(TryLockError::WouldBlock) => false,
        };
        if free {
            self.generation.store(generation, Ordering::Release);
        }
        free
    }

    /// The dataset for reading: the access this thread already holds, if Python
    /// code run under it calls back in, or else the read lock, waited for without
    /// the GIL.
    pub fn read(&self, py: Python<'_>) -> Reader<'_> {
        if let Some(dataset) = held::find(self) {
            return Reader {
                _held: None,
                access: Access::Nested(dataset),
            };
        }
        let guard = match self.store.try_read() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => self
                .store
                .read_py_attached(py)
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        };
        // The guard is moved into the Reader, which unpublishes before dropping it.
        let held = held::publish(self, NonNull::from(&*guard));
        Reader {
            _held: Some(held),
            access: Access::Locked(guard),
        }
    }

    /// The dataset for an extend, waited for without the GIL. A RuntimeError if
    /// this thread already reads or extends it (from Python code called under that
    /// access): waiting would never end.
    pub fn write(&self, py: Python<'_>) -> PyResult<RwLockWriteGuard<'_, Dataset>> {
        if held::find(self).is_some() {
            return Err(PyRuntimeError::new_err(
                "extend called from Python code that a read or an extend of the same Dataset runs on this thread (an iterable, __index__, __del__, ...); extend once with all the entries, or after that call returns",
            ));
        }
        Ok(match self.store.try_write() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => self
                .store
                .write_py_attached(py)
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        })
    }

    /// Lets Python code an extend runs on this thread read `dataset` (the extend's
    /// committed state) until the guard is dropped. The caller must not use the
    /// extend mutably meanwhile.
    pub fn publish_for_extend<'a>(&'a self, dataset: &'a Dataset) -> held::Published<'a> {
        held::publish(self, NonNull::from(dataset))
    }
}

/// A dataset borrowed for one read.
pub struct Reader<'a> {
    // Declared first, so it is dropped (unpublished) before the guard.
    _held: Option<held::Published<'a>>,
    access: Access<'a>,
}

enum Access<'a> {
    /// Through the read lock.
    Locked(RwLockReadGuard<'a, Dataset>),
    /// Held by an outer call on this thread.
    Nested(&'a Dataset),
}

impl Deref for Reader<'_> {
    type Target = Dataset;

    fn deref(&self) -> &Dataset {
        match &self.access {
            Access::Locked(guard) => guard,
            Access::Nested(dataset) => dataset,
        }
    }
}

/// The datasets this thread holds (a read guard, or an extend pulling entries),
/// for the Python code run under them.
pub mod held {
    use super::*;
    use std::marker::PhantomData;

    struct Entry {
        handle: *const Handle,
        dataset: NonNull<Dataset>,
    }

    thread_local! {
        /// Innermost last. Only this thread reads it.
        static HELD: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
    }

    /// Unpublishes on drop (including on an error or a panic).
    pub struct Published<'a> {
        handle: *const Handle,
        _borrow: PhantomData<&'a Handle>,
    }

    /// The caller keeps `dataset` alive and unmutated until the guard is dropped.
    pub(super) fn publish(handle: &Handle, dataset: NonNull<Dataset>) -> Published<'_> {
        let handle: *const Handle = handle;
        HELD.with_borrow_mut(|held| held.push(Entry { handle, dataset }));
        Published {
            handle,
            _borrow: PhantomData,
        }
    }

    pub(super) fn find(handle: &Handle) -> Option<&Dataset> {
        let handle: *const Handle = handle;
        let dataset = HELD.with_borrow(|held| {
            held.iter()
                .rev()
                .find(|entry| entry.handle == handle)
                .map(|entry| entry.dataset)
        })?;
        // SAFETY: the entry was published by a call lower on this thread's stack,
        // which keeps the dataset alive and unmutated (a read guard, or an extend
        // suspended in its pull loop) until it unpublishes, after this nested call
        // has returned: the reference returned here is used only within the
        // current method call (a Reader is never returned to Python).
        // A child forked from inside such a call inherits these entries, but uses
        // a new handle (the inherited one stays alive, held by that frame).
        Some(unsafe { dataset.as_ref() })
    }

    impl Drop for Published<'_> {
        fn drop(&mut self) {
            HELD.with_borrow_mut(|held| {
                if let Some(at) = held.iter().rposition(|entry| entry.handle == self.handle) {
                    held.remove(at);
                }
            });
        }
    }
}
