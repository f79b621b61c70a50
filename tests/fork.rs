//! A process forked while an extend runs: the child's copy of the extend writes,
//! commits and removes nothing, and the child does not keep the parent's writer
//! lock (src/fork.rs).
#![cfg(unix)]

use std::path::Path;

use bcd::{CreateOptions, Dataset, Error};

/// Forks; 0 in the child, which must leave through [`exit_child`].
/// Held by each test for its whole run: a fork copies every thread's descriptors,
/// so the tests of this binary run one at a time, and a child forked by one test
/// never holds descriptors (pipes, locks) of another test's dataset. (Seen once
/// under heavy load: the second writer of
/// `a_child_does_not_keep_the_writer_lock_once_the_parent_lets_go` got `Locked`
/// while the other test ran beside it.)
static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn fork() -> libc::pid_t {
    // SAFETY: the children of these tests touch only files and their own copies
    // of the test's values (the allocator is fork-safe), then _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    pid
}

/// Ends a child without unwinding into the test harness or running destructors.
fn exit_child(ok: bool) -> ! {
    // SAFETY: _exit ends the process at once.
    unsafe { libc::_exit(if ok { 0 } else { 1 }) }
}

/// The exit status of child `pid`.
fn wait(pid: libc::pid_t) -> i32 {
    let mut status = 0;
    // SAFETY: waits for a child of this process.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "child died: {status}");
    libc::WEXITSTATUS(status)
}

fn shard_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".bin") || name.ends_with(".idx"))
        .collect();
    names.sort();
    names
}

fn small_shards() -> CreateOptions {
    CreateOptions {
        keyed: true,
        max_shard_size: 64,
        ..Default::default()
    }
}

#[test]
fn a_forked_copy_of_an_extend_writes_commits_and_removes_nothing() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d");
    let mut dataset = Dataset::create(&path, small_shards()).unwrap();
    dataset.extend([(b"a", b"committed")]).unwrap();
    let mut extend = dataset.begin_extend().unwrap();
    extend.push(b"b", &[7; 100]).unwrap();
    extend.push(b"c", &[8; 100]).unwrap();
    let written = shard_files(&path);
    assert!(written.len() > 2, "{written:?}");

    let pid = fork();
    if pid == 0 {
        let refused = |result: Result<(), Error>| matches!(result, Err(Error::ForkedExtend));
        let ok = refused(extend.check_process())
            && refused(extend.push(b"d", b"child"))
            && refused(extend.push_batch(&[(b"e", b"child")]))
            && matches!(extend.commit(), Err(Error::ForkedExtend));
        // The commit attempt dropped the copy: nothing removed, nothing added.
        exit_child(
            ok && shard_files(&path) == written
                && Dataset::open(&path).is_ok_and(|reopened| reopened.len() == 1),
        );
    }
    let status = wait(pid);
    assert_eq!(status, 0);
    assert_eq!(shard_files(&path), written);
    extend.push(b"f", b"parent").unwrap();
    extend.commit().unwrap();
    let reopened = Dataset::open(&path).unwrap();
    assert_eq!(reopened.len(), 4);
    assert_eq!(reopened.get(b"c").unwrap().as_deref(), Some(&[8; 100][..]));
    assert_eq!(reopened.get(b"f").unwrap().as_deref(), Some(&b"parent"[..]));
    assert!(reopened.verify().is_empty());
}

#[test]
fn a_child_does_not_keep_the_writer_lock_once_the_parent_lets_go() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d");
    let mut dataset = Dataset::create(&path, small_shards()).unwrap();
    let mut extend = dataset.begin_extend().unwrap();
    extend.push(b"a", b"1").unwrap();

    // The child outlives the parent's extend: it waits on a pipe.
    let mut fds = [0; 2];
    // SAFETY: a pipe for the child to wait on.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let pid = fork();
    if pid == 0 {
        let mut byte = 0u8;
        // SAFETY: reads one byte from the pipe.
        unsafe {
            libc::close(fds[1]);
            libc::read(fds[0], (&mut byte as *mut u8).cast(), 1);
        }
        exit_child(true);
    }
    // SAFETY: the parent's copy of the read end is not needed.
    unsafe { libc::close(fds[0]) };
    extend.commit().unwrap();
    // With the child still alive, another writer gets the lock.
    let second = Dataset::open(&path).unwrap().extend([(b"b", b"2")]);
    // SAFETY: wakes the child.
    unsafe {
        libc::write(fds[1], [1u8].as_ptr().cast(), 1);
        libc::close(fds[1]);
    }
    assert_eq!(wait(pid), 0);
    second.unwrap();
    assert_eq!(Dataset::open(&path).unwrap().len(), 2);
}
