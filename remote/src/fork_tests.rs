//! A forked child (a DataLoader worker) uses the locks of the objects it
//! inherits: each test holds another thread inside one of those locks when the
//! process forks, and checks that the child takes it. Were the lock's section
//! not one that forks wait for (`bcd::fork::excluding_forks`), the child would
//! find it held by a thread that does not exist there and wait forever: its
//! alarm then kills it, and the test fails.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::mpsc;

use crate::cache_files::ShardFiles;
use crate::cache_records::DataStamp;
use crate::store::Remote;
use crate::uri::{RemoteUri, Scheme};

thread_local! {
    /// What a thread does inside the next section it enters (tests only).
    static HOOK: RefCell<Option<Box<dyn FnOnce()>>> = const { RefCell::new(None) };
}

/// Called inside the sections under test, with their lock held.
pub(crate) fn inside_section() {
    if let Some(hook) = HOOK.with(|h| h.borrow_mut().take()) {
        hook();
    }
}

/// Runs `enter` on another thread and, once that thread is inside the section
/// `enter` reaches (lock held), forks; the child runs `child` under a 20 s alarm.
/// The thread stays inside until the fork is waiting for its section, or, were
/// the fork not to wait for it, has returned. Returns the child's exit status (a signal number
/// plus 128 if it was killed).
fn fork_while_inside(enter: impl FnOnce() + Send + 'static, child: impl FnOnce() -> bool) -> i32 {
    // One at a time: the tests run on parallel threads, and another test's
    // fork (or its FORKED) would let this thread out of its section early.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    static FORKED: AtomicBool = AtomicBool::new(false);
    FORKED.store(false, SeqCst);
    let (inside, entered) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        HOOK.with(|h| {
            *h.borrow_mut() = Some(Box::new(move || {
                inside.send(()).unwrap();
                // A fork waits for this thread only if it is in a section.
                while bcd::fork::fork_waiting() != (true, true) && !FORKED.load(SeqCst) {
                    std::thread::yield_now();
                }
            }))
        });
        enter();
    });
    entered.recv().unwrap();
    // SAFETY: the child runs `child` and exits with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: plain calls in the child; `_exit` skips the parent's exit code.
        unsafe {
            libc::alarm(20);
            libc::_exit(if child() { 0 } else { 1 });
        }
    }
    FORKED.store(true, SeqCst);
    thread.join().unwrap();
    let mut status = 0;
    // SAFETY: `pid` is this process's child, waited for once.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    match libc::WIFEXITED(status) {
        true => libc::WEXITSTATUS(status),
        false => 128 + libc::WTERMSIG(status),
    }
}

fn remote() -> Remote {
    let uri = RemoteUri {
        scheme: Scheme::S3,
        bucket: "bucket".into(),
        prefix: "forked".into(),
    };
    Remote::new(uri).unwrap()
}

#[test]
fn a_child_forked_while_another_thread_gets_the_clients_gets_its_own() {
    let remote = std::sync::Arc::new(remote());
    let theirs = remote.clone();
    let status = fork_while_inside(
        move || drop(theirs.clients().unwrap()),
        || remote.clients().is_ok(),
    );
    assert_eq!(status, 0, "the child could not get the clients");
}

#[test]
fn a_child_forked_while_another_thread_reads_the_stamps_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let files = std::sync::Arc::new(ShardFiles::new(remote(), dir.path().into(), None));
    let stamp = DataStamp {
        len: 7,
        ..DataStamp::default()
    };
    files.set_stamps([(0, stamp)].into_iter().collect());
    let theirs = files.clone();
    let status = fork_while_inside(
        move || drop(theirs.stamp(0)),
        || files.stamp(0).is_ok_and(|s| s.len == 7) && files.extent() == (1, 7),
    );
    assert_eq!(status, 0, "the child could not read the stamps");
}
