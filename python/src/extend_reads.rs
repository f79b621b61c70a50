//! Reads made by the Python code an extend runs.
//!
//! `extend` holds the dataset's write lock for the whole transaction, and pulls
//! entries from the caller's iterable in between batches. That iterable may read
//! the same `Dataset` object, as it may with the reference (a generator that
//! skips keys already stored: `(k, v) for k, v in items if k not in dataset`).
//! Waiting for the lock there would deadlock the thread on itself, so while the
//! extend pulls entries it publishes the committed dataset it is adding to, and
//! reads on that same thread use it.

use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard, PoisonError, RwLockReadGuard};
use std::thread::{self, ThreadId};

use bcd::Dataset;

/// A dataset borrowed for one read.
pub enum Reader<'a> {
    /// Through the read lock.
    Locked(RwLockReadGuard<'a, Dataset>),
    /// The committed state of the dataset an extend on this thread is adding to.
    DuringExtend(&'a Dataset),
}

impl Deref for Reader<'_> {
    type Target = Dataset;

    fn deref(&self) -> &Dataset {
        match self {
            Reader::Locked(guard) => guard,
            Reader::DuringExtend(dataset) => dataset,
        }
    }
}

/// Which thread is pulling entries for an extend, and the dataset it extends.
#[derive(Default)]
pub struct ExtendReads {
    pulling: Mutex<Option<(ThreadId, Published)>>,
}

/// A pointer to the dataset an extend borrows mutably, published only while that
/// extend runs Python code and does not use it.
#[derive(Clone, Copy)]
struct Published(NonNull<Dataset>);

// SAFETY: the pointer is only dereferenced by the thread that published it
// (`on_this_thread` checks the thread id), so it never actually crosses threads;
// the Mutex holding it must be Send and Sync for the Python class to be.
unsafe impl Send for Published {}
// SAFETY: as above.
unsafe impl Sync for Published {}

impl ExtendReads {
    /// Publishes `dataset` (the extend's committed state) for reads on this thread
    /// until the returned guard is dropped.
    ///
    /// The caller must not use the extend mutably while the guard lives: the
    /// published pointer is a shared borrow of it.
    pub fn publish(&self, dataset: &Dataset) -> PublishGuard<'_> {
        *self.lock() = Some((thread::current().id(), Published(NonNull::from(dataset))));
        PublishGuard { reads: self }
    }

    /// The published dataset if this thread published it, that is if this call
    /// comes from Python code run by an extend on this thread.
    pub fn on_this_thread(&self) -> Option<Reader<'_>> {
        let (thread, published) = (*self.lock())?;
        if thread != thread::current().id() {
            return None;
        }
        // SAFETY: this thread published the pointer and is now running Python code
        // called from inside the extend's pull loop (lower on this same stack), so
        // the extend is suspended: the dataset it borrows is alive and nothing
        // mutates it until this call returns and the loop goes on. The Reader is
        // used only within the current method call (it borrows `self`, and no
        // method returns it); the guard unpublishes before the extend writes.
        Some(Reader::DuringExtend(unsafe { published.0.as_ref() }))
    }

    fn lock(&self) -> MutexGuard<'_, Option<(ThreadId, Published)>> {
        self.pulling.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Unpublishes on drop, including when pulling an entry raised.
pub struct PublishGuard<'a> {
    reads: &'a ExtendReads,
}

impl Drop for PublishGuard<'_> {
    fn drop(&mut self) {
        *self.reads.lock() = None;
    }
}
