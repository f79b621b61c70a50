//! The per-process state behind a `bcd.Dataset`, and the rules for reaching it
//! from Python code without deadlocking.
//!
//! A [`Handle`] holds the open [`Dataset`] behind a read/write lock: reads share
//! it, an extend holds it exclusively for its whole transaction. Four rules keep
//! that lock from hanging the interpreter:
//!
//! - Waiting for it always releases the GIL, so a thread that holds it can always
//!   get the GIL back to finish.
//! - While an extend runs Python code (pulls entries from its iterable), it shares
//!   the committed state it is adding to with every thread ([`Shared`]): readers
//!   wait only while it writes a batch or commits, never for the caller's code,
//!   which may itself wait for a thread that reads.
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
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{
    Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
    TryLockError,
};

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
    shared: Mutex<Shared>,
    /// Signalled when `shared` changes.
    shared_changed: Condvar,
    pub views: ShardViews,
}

/// The committed state of an extend that is running Python code, readable by
/// every thread meanwhile.
#[derive(Default)]
struct Shared {
    dataset: Option<SharedDataset>,
    /// Threads reading it; the extend goes on only once they are done.
    readers: usize,
    /// Advanced when an extend lets go of the store lock, so a reader that found
    /// neither the lock nor a shared dataset knows to try the lock again.
    releases: u64,
}

/// A pointer to the dataset an extend borrows, valid while it is in `Shared`.
#[derive(Clone, Copy)]
struct SharedDataset(NonNull<Dataset>);

// SAFETY: the pointer is a shared borrow of a Dataset, which is Sync (it lives in
// an RwLock shared by threads); `Sharing` keeps the borrow alive until no reader
// uses it (see `Handle::share`).
unsafe impl Send for SharedDataset {}

impl Handle {
    pub fn new(dataset: Dataset) -> Handle {
        Handle {
            generation: AtomicU64::new(bcd::fork::generation()),
            store: RwLock::new(dataset),
            shared: Mutex::default(),
            shared_changed: Condvar::new(),
            views: ShardViews,
        }
    }

    fn lock_shared(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether this handle was made in (or adopted by) the current process.
    pub fn is_current(&self, generation: u64) -> bool {
        self.generation.load(Ordering::Acquire) == generation
    }

    /// Whether this process inherited the handle in use from its parent: its
    /// `shared` may then be locked, or count readers, by threads that no longer
    /// exist, so the guards below leave it alone (the child uses a new handle).
    fn inherited_in_use(&self) -> bool {
        !self.is_current(bcd::fork::generation())
    }

    /// In a forked child: adopts this inherited handle if no thread held its lock
    /// at the fork (its dataset is then a consistent committed state, and its
    /// mappings are shared with the parent); false if one did.
    ///
    /// The views hold no state of their own, so a free store lock and a free,
    /// empty `shared` mean a free handle.
    pub fn adopt(&self, generation: u64) -> bool {
        let free = match self.store.try_write() {
            Ok(_) => true,
            Err(TryLockError::Poisoned(_)) => true,
            Err(TryLockError::WouldBlock) => false,
        } && match self.shared.try_lock() {
            Ok(shared) => shared.dataset.is_none() && shared.readers == 0,
            Err(_) => false,
        };
        if free {
            self.generation.store(generation, Ordering::Release);
        }
        free
    }

    /// The dataset for reading: the access this thread already holds, if Python
    /// code run under it calls back in; else the read lock, or, while an extend
    /// holds it and runs Python code, the committed state it shares; waited for
    /// without the GIL.
    pub fn read(&self, py: Python<'_>) -> Reader<'_> {
        if let Some(dataset) = held::find(self) {
            return Reader {
                _held: None,
                access: Access::Nested(dataset),
            };
        }
        if let Some(reader) = self.try_read() {
            return reader;
        }
        loop {
            // Noted before trying again, so a release after the try is not missed.
            let releases = self.lock_shared().releases;
            if let Some(reader) = self.try_read() {
                return reader;
            }
            // An extend holds the lock (or waits for it): wait, without the GIL,
            // until it shares its committed state or lets go.
            let shared = py.detach(|| {
                let mut shared = self.lock_shared();
                loop {
                    if let Some(dataset) = shared.dataset {
                        shared.readers += 1;
                        return Some(dataset);
                    }
                    if shared.releases != releases {
                        return None;
                    }
                    shared = self
                        .shared_changed
                        .wait(shared)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            });
            if let Some(SharedDataset(dataset)) = shared {
                let held = held::publish(self, dataset);
                // SAFETY: counted in `readers`, so the extend keeps the borrow
                // alive and unmutated until this Reader is dropped (`Sharing`).
                let dataset = unsafe { dataset.as_ref() };
                return Reader {
                    _held: Some(held),
                    access: Access::Shared(SharedRead {
                        handle: self,
                        dataset,
                    }),
                };
            }
        }
    }

    /// The read lock, if it is free.
    fn try_read(&self) -> Option<Reader<'_>> {
        let guard = match self.store.try_read() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        // The guard is moved into the Reader, which unpublishes first.
        let held = held::publish(self, NonNull::from(&*guard));
        Some(Reader {
            _held: Some(held),
            access: Access::Locked(guard),
        })
    }

    /// The dataset for an extend, waited for without the GIL. A RuntimeError if
    /// this thread already reads or extends it (from Python code called under that
    /// access): waiting would never end.
    pub fn write(&self, py: Python<'_>) -> PyResult<Writer<'_>> {
        if held::find(self).is_some() {
            return Err(PyRuntimeError::new_err(
                "extend called from Python code that a read or an extend of the same Dataset runs on this thread (an iterable, __index__, __del__, ...); extend once with all the entries, or after that call returns",
            ));
        }
        let guard = match self.store.try_write() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => self
                .store
                .write_py_attached(py)
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        };
        Ok(Writer {
            guard: Some(guard),
            handle: self,
        })
    }

    /// Lets every thread read `dataset` (the committed state of the extend this
    /// thread runs) while the extend runs Python code, until the returned guard
    /// is dropped, which waits for those reads to end. The borrow keeps the
    /// extend from being used mutably meanwhile.
    pub fn share<'a>(&'a self, dataset: &'a Dataset) -> Sharing<'a> {
        let held = held::publish(self, NonNull::from(dataset));
        self.lock_shared().dataset = Some(SharedDataset(NonNull::from(dataset)));
        self.shared_changed.notify_all();
        Sharing {
            _held: held,
            handle: self,
        }
    }
}

/// The store lock held by an extend; tells waiting readers when it is let go.
pub struct Writer<'a> {
    guard: Option<RwLockWriteGuard<'a, Dataset>>,
    handle: &'a Handle,
}

impl Deref for Writer<'_> {
    type Target = Dataset;

    fn deref(&self) -> &Dataset {
        self.guard.as_ref().expect("held until dropped")
    }
}

impl DerefMut for Writer<'_> {
    fn deref_mut(&mut self) -> &mut Dataset {
        self.guard.as_mut().expect("held until dropped")
    }
}

impl Drop for Writer<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        if self.handle.inherited_in_use() {
            return;
        }
        self.handle.lock_shared().releases += 1;
        self.handle.shared_changed.notify_all();
    }
}

/// An extend's committed state shared with every thread (see [`Handle::share`]).
pub struct Sharing<'a> {
    _held: held::Published<'a>,
    handle: &'a Handle,
}

impl Drop for Sharing<'_> {
    /// Stops sharing, and waits (without the GIL, which the readers may need to
    /// finish) until no thread reads the shared state any more: the extend may
    /// then use it mutably.
    fn drop(&mut self) {
        if self.handle.inherited_in_use() {
            // A forked child's copy of the extend, which stops here: its readers
            // were threads of the parent.
            return;
        }
        self.handle.lock_shared().dataset = None;
        let wait = || {
            let mut shared = self.handle.lock_shared();
            while shared.readers > 0 {
                shared = self
                    .handle
                    .shared_changed
                    .wait(shared)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        };
        if self.handle.lock_shared().readers > 0 {
            Python::attach(|py| py.detach(wait));
        }
    }
}

/// A read of an extend's shared committed state; ends the read on drop.
struct SharedRead<'a> {
    handle: &'a Handle,
    dataset: &'a Dataset,
}

impl Drop for SharedRead<'_> {
    fn drop(&mut self) {
        if self.handle.inherited_in_use() {
            return;
        }
        let mut shared = self.handle.lock_shared();
        shared.readers -= 1;
        if shared.readers == 0 {
            self.handle.shared_changed.notify_all();
        }
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
    /// Shared by an extend on another thread.
    Shared(SharedRead<'a>),
}

impl Deref for Reader<'_> {
    type Target = Dataset;

    fn deref(&self) -> &Dataset {
        match &self.access {
            Access::Locked(guard) => guard,
            Access::Nested(dataset) => dataset,
            Access::Shared(read) => read.dataset,
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
