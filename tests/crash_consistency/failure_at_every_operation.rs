//! Fault injection: each storage operation of an extend fails in turn, and the
//! process goes on. Nothing may be committed (except after the rename, where the
//! commit is visible and only its durability is in doubt), the directory must be
//! as before, and a retry must succeed.

use bcd::{Compression, Error};
use bcd_test_support::sim_storage::{Op, OpKind, Policy};
use bcd_test_support::snapshot;

use crate::fixture::{Fixture, Scenario, KEYED_LZ4};
use crate::{assert_files, assert_io_error_about, assert_records, concat, extend, open, records};

/// Fails operation N of the extend, for every N, and checks what is left.
fn check_failure_at_every_operation(scenario: Scenario) {
    let fx = Fixture::new(scenario);
    let total = fx.total_ops();
    for n in 1..=total {
        let failing = &fx.ops[n - 1];
        let context = format!("{scenario:?}, failing operation {n}/{total} ({failing})");
        let context = context.as_str();
        let work = fx.copy();
        let dir = work.path();
        // Every operation reaches the real file system here, fsyncs included.
        let storage = fx.storage(dir, Policy::FailOnce(n), true);
        let mut dataset = storage.open(dir);

        let err = extend(&mut dataset, &fx.new).expect_err(context);
        let ops = storage.ops();
        assert!(
            ops[..n]
                .iter()
                .map(Op::key)
                .eq(fx.ops[..n].iter().map(Op::key)),
            "{context}: the writer is not deterministic"
        );
        if n == total {
            match &err {
                Error::CommittedNotDurable { path, .. } => assert_eq!(path, dir, "{context}"),
                other => panic!("{context}: expected CommittedNotDurable, got {other:?}"),
            }
        } else {
            assert_io_error_about(&err, &ops[n - 1].path, context);
        }

        if n == total {
            // The documented exception: the manifest was renamed into place and only
            // its durability is in doubt, so the commit is visible, to this handle and
            // to readers, and nothing was cleaned up.
            assert_eq!(failing.kind, OpKind::SyncDir, "{context}");
            assert_eq!(dataset.shards(), fx.new_shards, "{context}");
            assert_records(&dataset, &fx.old_and_new(), context);
            assert_records(&open(dir, context), &fx.old_and_new(), context);
            assert_files(dir, fx.new_shards, |_| false, context);
            assert!(
                !ops[n..].iter().any(|op| op.kind == OpKind::Remove),
                "{context}: committed files were removed: {:?}",
                &ops[n..]
            );
            extend(&mut dataset, &fx.more)
                .unwrap_or_else(|e| panic!("{context}: later extend: {e}"));
            assert_records(
                &open(dir, context),
                &concat(&[&fx.old, &fx.new, &fx.more]),
                context,
            );
            continue;
        }

        // Nothing committed: the handle and a fresh reader see exactly the old records.
        assert_eq!(dataset.shards(), fx.old_shards, "{context}");
        assert_records(&dataset, &fx.old, context);
        assert_records(&open(dir, context), &fx.old, context);
        // The committed files are byte for byte as before.
        let files = snapshot(dir);
        for (name, bytes) in &fx.base_files {
            assert!(files.get(name) == Some(bytes), "{context}: {name} changed");
        }
        if scenario.fail_removes {
            // Cleanup could not delete anything: what is left must be files this
            // extend created (shards numbered from the old count, the temporary
            // manifest), all of which readers ignore.
            let created: Vec<String> = ops[..n]
                .iter()
                .filter(|op| op.kind == OpKind::Create)
                .map(|op| op.name.clone())
                .collect();
            assert_files(
                dir,
                fx.old_shards,
                |name| created.iter().any(|c| c == name),
                context,
            );
        } else {
            // Cleanup worked: the directory is exactly as before the extend.
            assert_eq!(
                files.keys().collect::<Vec<_>>(),
                fx.base_files.keys().collect::<Vec<_>>(),
                "{context}: files left behind"
            );
        }

        // The same handle retries (nothing fails any more) and commits.
        extend(&mut dataset, &fx.new).unwrap_or_else(|e| panic!("{context}: retry: {e}"));
        assert_records(&open(dir, context), &fx.old_and_new(), context);
        // The retry wrote the same shard numbers, so it overwrote every leftover.
        assert_files(dir, fx.new_shards, |_| false, context);
    }
}

#[test]
fn extend_failing_at_any_operation_commits_nothing_and_removes_its_files() {
    let _guard = crate::no_child_processes();
    check_failure_at_every_operation(KEYED_LZ4);
}

#[test]
fn extend_failing_at_any_operation_with_short_writes_and_failing_cleanup_leaves_only_ignored_leftovers(
) {
    let _guard = crate::no_child_processes();
    check_failure_at_every_operation(Scenario {
        max_write: 1000,
        fail_removes: true,
        ..KEYED_LZ4
    });
}

/// A value of 64 KiB or more is not copied into the shard writer's buffer but
/// written from where it is, in one vectored write with what is buffered
/// before it: a failure at any of those writes (also when the file takes a few
/// bytes at a time) commits nothing either. Stored as an LZ4 literal-only block
/// (its header buffered, the value written from the caller's memory) and
/// uncompressed (the value alone).
#[test]
fn extend_failing_at_any_operation_around_a_value_written_directly_commits_nothing() {
    let _guard = crate::no_child_processes();
    check_failure_at_every_operation(Scenario {
        big_len: 200_000,
        ..KEYED_LZ4
    });
    check_failure_at_every_operation(Scenario {
        big_len: 200_000,
        max_write: 7000,
        ..KEYED_LZ4
    });
    check_failure_at_every_operation(Scenario {
        keyed: false,
        compression: Compression::None,
        big_len: 200_000,
        ..KEYED_LZ4
    });
}

#[test]
fn keyless_uncompressed_extend_failing_at_any_operation_commits_nothing() {
    let _guard = crate::no_child_processes();
    check_failure_at_every_operation(Scenario {
        keyed: false,
        compression: Compression::None,
        ..KEYED_LZ4
    });
}

#[test]
fn failed_final_directory_fsync_after_the_rename_leaves_the_commit_visible() {
    let _guard = crate::no_child_processes();
    let fx = Fixture::new(KEYED_LZ4);
    let work = fx.copy();
    let dir = work.path();
    let storage = fx.storage(dir, Policy::FailOnce(fx.total_ops()), false);
    let mut dataset = storage.open(dir);
    let err = extend(&mut dataset, &fx.new).unwrap_err();
    match &err {
        Error::CommittedNotDurable { path, .. } => assert_eq!(path, dir),
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("committed"), "{err}");
    // Visible to the handle and to any reader; no file was removed.
    assert_eq!(dataset.len(), fx.old.len() + fx.new.len());
    assert_records(&open(dir, "after"), &fx.old_and_new(), "after");
    assert_files(dir, fx.new_shards, |_| false, "after");
    // Retrying the same keys is refused: they are committed.
    assert!(matches!(
        extend(&mut dataset, &fx.new),
        Err(Error::DuplicateKey { .. })
    ));
}

/// The error of a failed fsync of the directory *after* the rename (records
/// committed) must not read like that of the fsync *before* it (nothing committed):
/// a caller deciding whether to retry has to tell them apart, or a keyless retry
/// would append every record twice.
#[test]
fn final_fsync_error_is_distinguishable_from_an_uncommitted_one() {
    let _guard = crate::no_child_processes();
    let fx = Fixture::new(KEYED_LZ4);
    let fail = |n: usize| {
        let work = fx.copy();
        let storage = fx.storage(work.path(), Policy::FailOnce(n), false);
        let mut dataset = storage.open(work.path());
        let err = extend(&mut dataset, &fx.new).unwrap_err();
        let committed = dataset.len() > fx.old.len();
        (err.to_string(), committed, work)
    };
    let (before_rename, committed_before, work_before) = fail(fx.rename_op() - 1);
    let (after_rename, committed_after, work_after) = fail(fx.total_ops());
    assert!(!committed_before && committed_after);
    assert_ne!(
        before_rename.replace(&*work_before.path().to_string_lossy(), "DIR"),
        after_rename.replace(&*work_after.path().to_string_lossy(), "DIR"),
        "the caller cannot tell a committed extend from a rolled-back one"
    );
}

#[test]
fn extend_rejected_midway_commits_nothing_and_removes_its_shards() {
    let _guard = crate::no_child_processes();
    let fx = Fixture::new(KEYED_LZ4);
    let work = fx.copy();
    let dir = work.path();
    let mut dataset = open(dir, "open");

    // Dataset::extend compresses and writes in batches (bcd::batch_limits: 256
    // records per compression thread): the first batches are in new shard files
    // when the duplicate key in the last one is met.
    let mut bulk = records("bulk", 1100, true, 9, 150, 0);
    bulk.push(bulk[3].clone());
    let err = extend(&mut dataset, &bulk).unwrap_err();
    assert!(matches!(err, Error::DuplicateKey { .. }), "{err}");
    assert_records(&dataset, &fx.old, "handle");
    assert_records(&open(dir, "reopen"), &fx.old, "reopen");
    assert_eq!(snapshot(dir), fx.base_files, "files left behind");

    // An extend dropped without commit, after writing shards and refusing a
    // duplicate key, removes its files too.
    let mut in_progress = dataset.begin_extend().unwrap();
    for (key, value) in &fx.new {
        in_progress.push(key, value).unwrap();
    }
    let err = in_progress.push(&fx.new[3].0, b"again").unwrap_err();
    assert!(matches!(err, Error::DuplicateKey { .. }), "{err}");
    let written = assert_files(dir, fx.old_shards, |_| true, "in progress");
    assert!(written.len() >= 4, "{written:?}");
    drop(in_progress);
    assert_records(&open(dir, "after drop"), &fx.old, "after drop");
    assert_eq!(
        snapshot(dir),
        fx.base_files,
        "files left behind by a dropped extend"
    );
}
