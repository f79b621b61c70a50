//! Two writers at once: the second one is refused with `Error::Locked` until the
//! first finishes (in the same process) or dies (in another one).

use std::path::Path;

use bcd::{CreateOptions, Dataset, Error};

use crate::child_process::{completed, ChildProcess};
use crate::{assert_records, concat, extend, open, records, scratch_dir, LOCK};

fn assert_locked(err: &Error, dir: &Path, context: &str) {
    match err {
        Error::Locked { dir: d, lock } => {
            assert_eq!(d, dir, "{context}");
            assert_eq!(lock, &dir.join(LOCK), "{context}");
        }
        other => panic!("{context}: expected Error::Locked, got {other:?}"),
    }
    let message = err.to_string();
    for part in [
        &*dir.to_string_lossy(),
        &*dir.join(LOCK).to_string_lossy(),
        "another writer",
        "retry",
    ] {
        assert!(
            message.contains(part),
            "{context}: {message:?} lacks {part:?}"
        );
    }
}

#[test]
fn second_writer_in_the_same_process_gets_locked_until_the_first_finishes() {
    let _guard = crate::no_child_processes();
    let work = scratch_dir();
    let dir = work.path();
    let mut first = Dataset::create(
        dir,
        CreateOptions {
            keyed: true,
            ..Default::default()
        },
    )
    .unwrap();
    let old = records("old", 10, true, 1, 100, 100);
    extend(&mut first, &old).unwrap();
    let mut second = open(dir, "second");
    let one = records("one", 10, true, 2, 100, 100);
    let two = records("two", 10, true, 3, 100, 100);

    let mut in_progress = first.begin_extend().unwrap();
    for (key, value) in &one {
        in_progress.push(key, value).unwrap();
    }
    let err = extend(&mut second, &two).unwrap_err();
    assert_locked(&err, dir, "while the first extend runs");
    assert!(matches!(second.begin_extend(), Err(Error::Locked { .. })));
    // The refused writer disturbed nothing: the first one commits.
    in_progress.commit().unwrap();
    assert_records(&second, &old, "the refused handle is unchanged");

    // Now the second writer goes ahead, after the first one's records.
    extend(&mut second, &two).unwrap();
    assert_records(&open(dir, "after"), &concat(&[&old, &one, &two]), "after");
}

#[cfg(unix)]
#[test]
fn second_writer_in_another_process_gets_locked_until_the_first_dies() {
    let _guard = crate::alone_while_starting_processes();
    let work = scratch_dir();
    let dir = work.path();
    let mut dataset = Dataset::create(
        dir,
        CreateOptions {
            keyed: true,
            ..Default::default()
        },
    )
    .unwrap();
    let old = records("old", 10, true, 1, 100, 100);
    extend(&mut dataset, &old).unwrap();

    let mut child = ChildProcess::spawn(dir, "hold-lock");
    assert_eq!(child.progress(3), 3, "the child did not take the lock");
    let mine = records("mine", 10, true, 2, 100, 100);
    let err = extend(&mut dataset, &mine).unwrap_err();
    assert_locked(&err, dir, "while another process extends");

    assert!(!completed(child.kill(), "hold-lock child"));
    extend(&mut dataset, &mine).unwrap();
    assert_records(&open(dir, "after"), &concat(&[&old, &mine]), "after");
}
