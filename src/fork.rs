//! What a process forked in the middle of an extend inherits, and how it is kept
//! from acting on it.
//!
//! A child forked while some thread of the parent extends a dataset inherits the
//! open file description that holds the `flock` on `.bcd.lock`: the lock would
//! stay held until the child exits, although the parent has long committed and
//! let go (a persistent DataLoader worker holds it for the whole training run).
//! If the forking thread is the extending one (a generator that forks), the child
//! also inherits the extend itself, which could go on to write into the parent's
//! shard files, commit them, or roll back and remove them under the parent.
//!
//! So the first writer lock registers fork handlers (`pthread_atfork`). In the
//! child they close every inherited lock descriptor (closing, not unlocking: an
//! unlock would release the parent's lock too) and advance the fork
//! [`generation`]. An [`Extend`](crate::Extend) remembers the generation it began
//! in, and a copy of it in another process writes, commits and removes nothing.
//!
//! [`FileLock`] is such a lock for other uses (the shard locks of the cache of a
//! remote dataset, which DataLoader workers forked mid-download share).
//!
//! A child also inherits every mutex as it was at the fork, and has only the
//! forking thread: a mutex another thread held then stays locked in the child
//! forever, and the child's first use of it never returns (a DataLoader worker
//! forked while the parent's prefetch task was starting a download hung so).
//! [`excluding_forks`] runs a critical section that no fork lands inside: code
//! whose locks a child uses takes them only there.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::mem::ManuallyDrop;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many forks separate this process from the one that first used this crate's
/// fork handlers: 0 in that process, and different in every child forked since.
/// State made in one generation and found in another was inherited across a fork
/// (and may be in the middle of something a thread that no longer exists was
/// doing).
///
/// The first call registers the fork handlers, so call it before the process can
/// fork if you rely on it (the Python package does, when it is imported).
pub fn generation() -> u64 {
    handlers::register();
    GENERATION.load(Ordering::Acquire)
}

static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Runs `f` so that no fork of this process lands inside it: a fork waits until
/// every such section running in other threads has returned, and none starts
/// while a fork is under way. So a lock taken and released within `f` is never
/// found held in a child by a thread that does not exist there.
///
/// `f` must be short and must not wait for another process or thread that may
/// be forking (it holds up every fork of the process meanwhile). Sections nest;
/// a thread that forks from inside one forks at once (its own section is its
/// own business).
pub fn excluding_forks<R>(f: impl FnOnce() -> R) -> R {
    handlers::register();
    gate::within(f)
}

/// Whether a fork of this process is waiting for sections of
/// [`excluding_forks`] running in other threads to end, and whether this thread
/// is inside one: for tests of code that uses them.
#[doc(hidden)]
pub fn fork_waiting() -> (bool, bool) {
    gate::waiting()
}

/// Runs `f` with the registry of lock descriptors held, so that no fork happens
/// in between: a lock opened and registered in `f` is closed in every child, and
/// a lock released in `f` is closed in the parent before any child can copy it.
pub(crate) fn with_lock_registry<R>(f: impl FnOnce(&mut LockRegistry) -> R) -> R {
    handlers::register();
    registry::with(f)
}

pub(crate) use registry::LockRegistry;

/// Whether a [`FileLock`] keeps out every other holder or only exclusive ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    /// One holder at a time (`LOCK_EX`).
    Exclusive,
    /// Any number of shared holders, no exclusive one (`LOCK_SH`).
    Shared,
}

/// An `flock` on a file that belongs to this process alone.
///
/// A `flock` belongs to the open file description, which a forked child shares:
/// the lock would stay held as long as the child lives, after this process has
/// let go or died. So the descriptor is registered with the fork handlers, which
/// close it in every child (a child's copy of the `FileLock` then does nothing
/// when dropped), and it is unlocked before it is closed, so a process spawned
/// meanwhile by another thread (`posix_spawn` runs no fork handlers) does not keep
/// it until its exec. Released when dropped; the kernel releases it when the
/// process dies.
#[derive(Debug)]
pub struct FileLock {
    file: ManuallyDrop<File>,
    /// The fork generation it was taken in.
    generation: u64,
}

impl FileLock {
    /// Takes the lock on `path` (created when missing) if no other holder, in
    /// this process or another, is in the way; `Ok(None)` if one is.
    pub fn try_acquire(path: &Path, kind: LockKind) -> io::Result<Option<FileLock>> {
        // Opened, locked and registered with no fork in between, so no child can
        // inherit an unregistered hold.
        with_lock_registry(|registry| {
            let file = open_lock_file(path)?;
            let locked = match kind {
                LockKind::Exclusive => file.try_lock(),
                LockKind::Shared => file.try_lock_shared(),
            };
            match locked {
                Ok(()) => {
                    registry.hold(descriptor(&file));
                    Ok(Some(FileLock {
                        file: ManuallyDrop::new(file),
                        generation: generation(),
                    }))
                }
                Err(TryLockError::WouldBlock) => Ok(None),
                Err(TryLockError::Error(e)) => Err(e),
            }
        })
    }

    /// Waits for the lock on `path` (created when missing).
    pub fn acquire(path: &Path, kind: LockKind) -> io::Result<FileLock> {
        // Registered before the wait, which runs without the registry (forks go
        // on meanwhile): a child forked before or after the lock is granted closes
        // its copy of the descriptor either way.
        let lock = with_lock_registry(|registry| {
            let file = open_lock_file(path)?;
            registry.hold(descriptor(&file));
            Ok::<_, io::Error>(FileLock {
                file: ManuallyDrop::new(file),
                generation: generation(),
            })
        })?;
        match kind {
            LockKind::Exclusive => lock.file.lock()?,
            LockKind::Shared => lock.file.lock_shared()?,
        }
        Ok(lock)
    }
}

#[cfg(test)]
impl FileLock {
    /// A copy of the lock's descriptor: what a child forked, or a process
    /// spawned, while it is held has.
    pub(crate) fn duplicate_descriptor(&self) -> File {
        self.file.try_clone().unwrap()
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        with_lock_registry(|registry| {
            if self.generation == generation() && registry.release(descriptor(&self.file)) {
                // Unlocked before it is closed: see the type's documentation.
                let _ = self.file.unlock();
                // SAFETY: dropped once, here; the field is not used afterwards.
                unsafe { ManuallyDrop::drop(&mut self.file) };
            }
            // Otherwise this is a forked child's copy, whose descriptor the fork
            // handler closed (its number may belong to another file by now).
        });
    }
}

fn open_lock_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

#[cfg(unix)]
fn descriptor(file: &File) -> std::os::fd::RawFd {
    std::os::fd::AsRawFd::as_raw_fd(file)
}

#[cfg(not(unix))]
fn descriptor(_file: &File) {}

#[cfg(unix)]
mod registry {
    use std::cell::UnsafeCell;
    use std::os::fd::RawFd;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// The descriptors of the writer locks this process holds.
    pub(crate) struct LockRegistry {
        fds: Vec<RawFd>,
    }

    impl LockRegistry {
        /// Records a descriptor holding a lock.
        pub(crate) fn hold(&mut self, fd: RawFd) {
            self.fds.push(fd);
        }

        /// Forgets `fd`; false if it is not registered (a child's handler closed
        /// it already).
        pub(crate) fn release(&mut self, fd: RawFd) -> bool {
            match self.fds.iter().position(|&held| held == fd) {
                Some(at) => {
                    self.fds.swap_remove(at);
                    true
                }
                None => false,
            }
        }
    }

    /// A spin lock rather than a Mutex: the fork handlers take it in the parent
    /// and release it in both processes, which a Mutex guard cannot express, and
    /// the child's handler must be async-signal-safe. It is held only to open or
    /// close one file.
    struct Registry {
        busy: AtomicBool,
        locks: UnsafeCell<LockRegistry>,
    }

    // SAFETY: `locks` is only reached through `with` (or the fork handlers), with
    // `busy` held, which makes the access exclusive.
    unsafe impl Sync for Registry {}

    static REGISTRY: Registry = Registry {
        busy: AtomicBool::new(false),
        locks: UnsafeCell::new(LockRegistry { fds: Vec::new() }),
    };

    fn acquire() {
        while REGISTRY
            .busy
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::thread::yield_now();
        }
    }

    fn release() {
        REGISTRY.busy.store(false, Ordering::Release);
    }

    pub(super) fn with<R>(f: impl FnOnce(&mut LockRegistry) -> R) -> R {
        acquire();
        // Released on unwind too, so a panic in `f` cannot wedge every later fork.
        struct Release;
        impl Drop for Release {
            fn drop(&mut self) {
                release();
            }
        }
        let _release = Release;
        // SAFETY: `busy` is held (see `Registry`).
        f(unsafe { &mut *REGISTRY.locks.get() })
    }

    /// Before a fork: hold the registry, so the child sees no half-done update.
    pub(super) extern "C" fn prepare() {
        acquire();
    }

    /// After a fork, in the parent.
    pub(super) extern "C" fn parent() {
        release();
    }

    /// After a fork, in the child: close the inherited lock descriptors. Only
    /// async-signal-safe calls: close(2), and a Vec cleared without freeing.
    pub(super) extern "C" fn child() {
        // SAFETY: `prepare` took `busy` in the forking thread, the only thread the
        // child has.
        let locks = unsafe { &mut *REGISTRY.locks.get() };
        for &fd in &locks.fds {
            // SAFETY: `fd` is a lock descriptor this process inherited; its owner
            // (a FileLock) finds it unregistered and will not close it again.
            unsafe { libc::close(fd) };
        }
        locks.fds.clear();
        super::GENERATION.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        release();
    }
}

#[cfg(not(unix))]
mod registry {
    /// No fork on this platform: nothing to track.
    pub(crate) struct LockRegistry;

    impl LockRegistry {
        pub(crate) fn hold<T>(&mut self, _handle: T) {}

        pub(crate) fn release<T>(&mut self, _handle: T) -> bool {
            true
        }
    }

    pub(super) fn with<R>(f: impl FnOnce(&mut LockRegistry) -> R) -> R {
        f(&mut LockRegistry)
    }
}

/// The sections of `excluding_forks` and the forks waiting for them: one word,
/// the forks under way in its high half, the sections running in its low half.
mod gate {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU64, Ordering};

    static GATE: AtomicU64 = AtomicU64::new(0);
    const FORK: u64 = 1 << 32;
    const SECTIONS: u64 = FORK - 1;

    thread_local! {
        /// The sections this thread is inside.
        static DEPTH: Cell<u64> = const { Cell::new(0) };
    }

    pub(super) fn within<R>(f: impl FnOnce() -> R) -> R {
        if DEPTH.get() == 0 {
            enter();
        }
        DEPTH.set(DEPTH.get() + 1);
        // Left on unwind too: a panicking section must not hold up every fork.
        struct Leave;
        impl Drop for Leave {
            fn drop(&mut self) {
                DEPTH.set(DEPTH.get() - 1);
                if DEPTH.get() == 0 {
                    GATE.fetch_sub(1, Ordering::Release);
                }
            }
        }
        let _leave = Leave;
        f()
    }

    fn enter() {
        loop {
            let now = GATE.load(Ordering::Acquire);
            if now < FORK {
                if GATE
                    .compare_exchange_weak(now, now + 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return;
                }
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Forks waiting for sections to end (tests only look).
    static WAITING: AtomicU64 = AtomicU64::new(0);

    pub(super) fn waiting() -> (bool, bool) {
        (WAITING.load(Ordering::Acquire) > 0, DEPTH.get() > 0)
    }

    /// No new section starts; returns once only the forking thread's own are
    /// left.
    pub(super) fn close() {
        GATE.fetch_add(FORK, Ordering::AcqRel);
        let own = DEPTH.get().min(1);
        if GATE.load(Ordering::Acquire) & SECTIONS != own {
            WAITING.fetch_add(1, Ordering::AcqRel);
            while GATE.load(Ordering::Acquire) & SECTIONS != own {
                std::thread::yield_now();
            }
            WAITING.fetch_sub(1, Ordering::AcqRel);
        }
    }

    pub(super) fn open() {
        GATE.fetch_sub(FORK, Ordering::AcqRel);
    }

    /// The child has one thread: its sections are the forking thread's, and the
    /// forks other threads of the parent were preparing are not its own.
    pub(super) fn reset_in_child() {
        GATE.store(DEPTH.get().min(1), Ordering::Release);
        WAITING.store(0, Ordering::Release);
    }
}

#[cfg(unix)]
mod handlers {
    use std::sync::Once;

    /// Before a fork: no section of `excluding_forks` running in another
    /// thread, then the lock registry held. In this order, since a section may
    /// take a `FileLock` (the registry) and the registry is never held while
    /// waiting for a section.
    extern "C" fn prepare() {
        super::gate::close();
        super::registry::prepare();
    }

    /// After a fork, in the parent.
    extern "C" fn parent() {
        super::registry::parent();
        super::gate::open();
    }

    /// After a fork, in the child (async-signal-safe: atomics and close(2)).
    extern "C" fn child() {
        super::registry::child();
        super::gate::reset_in_child();
    }

    pub(super) fn register() {
        static REGISTER: Once = Once::new();
        REGISTER.call_once(|| {
            // SAFETY: the handlers are plain functions of this crate, which is
            // never unloaded while the process runs (a Python extension module
            // stays loaded); see `registry` for what each does.
            let status = unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
            // ENOMEM is the only failure: children then keep inherited locks, as
            // before these handlers existed.
            let _ = status;
        });
    }
}

#[cfg(not(unix))]
mod handlers {
    pub(super) fn register() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy of a lock's descriptor (a worker forked, or a process spawned,
    /// while it was held) does not keep the lock from the next holder.
    #[test]
    fn a_released_lock_is_free_although_a_copy_of_its_descriptor_lives_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000000.bin.lock");
        let held = FileLock::try_acquire(&path, LockKind::Exclusive)
            .unwrap()
            .unwrap();
        let copy = held.duplicate_descriptor();
        drop(held);
        assert!(FileLock::try_acquire(&path, LockKind::Exclusive)
            .unwrap()
            .is_some());
        drop(copy);
    }

    /// Held by each test that forks: another test's fork waiting for sections
    /// would let a test's thread out of its section early.
    #[cfg(unix)]
    fn one_fork_test_at_a_time() -> std::sync::MutexGuard<'static, ()> {
        static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
        SERIAL
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The exit status of a child forked now that runs `child` alone.
    #[cfg(unix)]
    fn fork_running(child: impl FnOnce() -> bool) -> (libc::pid_t, impl FnOnce() -> i32) {
        // SAFETY: the child calls only `child` (atomics, `excluding_forks`) and
        // `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let ok = child();
            // SAFETY: ends the child without running the parent's exit code.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        (pid, move || {
            let mut status = 0;
            // SAFETY: `pid` is this process's child, waited for once.
            assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
            assert!(libc::WIFEXITED(status), "the child died: {status}");
            libc::WEXITSTATUS(status)
        })
    }

    /// A fork waits for another thread's section to end: the child never has
    /// the section half done. Were the fork not to wait, the section would end
    /// only after the fork returned, and the child would see it unfinished.
    #[cfg(unix)]
    #[test]
    fn a_fork_waits_for_the_sections_of_other_threads() {
        use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
        let _serial = one_fork_test_at_a_time();
        static ENDED: AtomicBool = AtomicBool::new(false);
        static FORKED: AtomicBool = AtomicBool::new(false);
        let (entered, inside) = std::sync::mpsc::channel();
        let section = std::thread::spawn(move || {
            excluding_forks(|| {
                entered.send(()).unwrap();
                while !fork_waiting().0 && !FORKED.load(SeqCst) {
                    std::thread::yield_now();
                }
                ENDED.store(true, SeqCst);
            })
        });
        inside.recv().unwrap();
        let (_, status) = fork_running(|| ENDED.load(SeqCst));
        FORKED.store(true, SeqCst);
        section.join().unwrap();
        assert_eq!(
            status(),
            0,
            "the child was forked inside another thread's section"
        );
    }

    /// Sections nest, and a thread may fork from inside its own: the fork does
    /// not wait for it, and in the child the thread goes on (sections included).
    #[cfg(unix)]
    #[test]
    fn a_thread_forks_from_inside_its_own_sections() {
        let _serial = one_fork_test_at_a_time();
        let status = excluding_forks(|| {
            excluding_forks(|| {
                let (_, status) = fork_running(|| excluding_forks(|| true));
                status
            })
        });
        assert_eq!(status(), 0);
        assert_eq!(excluding_forks(|| 7), 7);
    }

    #[test]
    fn shared_holders_keep_out_exclusive_ones_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("order.lock");
        let one = FileLock::acquire(&path, LockKind::Shared).unwrap();
        let two = FileLock::try_acquire(&path, LockKind::Shared).unwrap();
        assert!(two.is_some());
        assert!(FileLock::try_acquire(&path, LockKind::Exclusive)
            .unwrap()
            .is_none());
        drop((one, two));
        let exclusive = FileLock::acquire(&path, LockKind::Exclusive).unwrap();
        assert!(FileLock::try_acquire(&path, LockKind::Shared)
            .unwrap()
            .is_none());
        drop(exclusive);
    }
}
