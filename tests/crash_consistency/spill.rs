//! An extend whose duplicate check spills its key fingerprints to
//! `.bcd-spill/` (a memory limit of 64 KiB: a run every few hundred keys, runs
//! merged past four): each storage operation fails in turn, and the process dies
//! after each. Nothing is committed before the rename; the spill directory is
//! gone when the extend ends, or is removed by the next extend (a writer that
//! died) or by `gc`; and a duplicate key whose first copy was spilled long before
//! is still found.

use std::path::Path;

use bcd::{CreateOptions, Dataset, Error, GcOptions};
use bcd_test_support::sim_storage::{Config, OpKind, Policy};
use bcd_test_support::SimStorage;

use crate::{assert_records, concat, copy_dir, records, scratch_dir};

const LIMIT: u64 = 64 << 10;
const SPILL: &str = ".bcd-spill";

fn dataset_with_old_records(dir: &Path, old: &[bcd_test_support::Record]) {
    let options = CreateOptions {
        keyed: true,
        max_shard_size: 64 << 10,
        ..Default::default()
    };
    let mut dataset = Dataset::create(dir, options).unwrap();
    dataset.extend(old.iter().map(|(k, v)| (k, v))).unwrap();
}

fn spill_files(dir: &Path) -> Vec<String> {
    match std::fs::read_dir(dir.join(SPILL)) {
        Ok(entries) => entries
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn extend_spilling(dataset: &mut Dataset, records: &[bcd_test_support::Record]) -> bcd::Result<()> {
    dataset.set_memory_limit(Some(LIMIT));
    dataset
        .extend(records.iter().map(|(k, v)| (k, v)))
        .map(drop)
}

#[test]
fn a_spilling_extend_failing_at_any_operation_commits_nothing_and_leaves_no_runs() {
    let _guard = crate::no_child_processes();
    let old = records("old", 50, true, 1, 40, 100);
    let new = records("new", 3500, true, 2, 8, 20);
    let base = scratch_dir();
    dataset_with_old_records(base.path(), &old);

    // The operations of an extend that succeeds: it spills and merges runs.
    let work = scratch_dir();
    copy_dir(base.path(), work.path());
    let storage = SimStorage::new(work.path(), Config::pass());
    let mut dataset = storage.open(work.path());
    extend_spilling(&mut dataset, &new).unwrap();
    let ops = storage.ops();
    let runs = ops
        .iter()
        .filter(|op| op.kind == OpKind::Create && op.name.contains(SPILL))
        .count();
    assert!(
        runs > 5,
        "{runs} runs were spilled: more than four, so merged"
    );
    assert!(spill_files(work.path()).is_empty() && !work.path().join(SPILL).exists());
    assert_records(&dataset, &concat(&[&old, &new]), "the extend that passes");
    let rename = ops.iter().position(|op| op.kind == OpKind::Rename).unwrap() + 1;

    for n in 1..=ops.len() {
        let context = format!("failing operation {n}/{} ({})", ops.len(), ops[n - 1]);
        let context = context.as_str();
        let work = scratch_dir();
        copy_dir(base.path(), work.path());
        let storage = SimStorage::new(
            work.path(),
            Config {
                real_sync: true,
                ..Config {
                    policy: Policy::FailOnce(n),
                    ..Config::pass()
                }
            },
        );
        let mut dataset = storage.open(work.path());
        let result = extend_spilling(&mut dataset, &new);
        // Removing a merged-away run is best effort: the extend goes on, and the
        // next writer removes the run.
        let run_removal = ops[n - 1].kind == OpKind::Remove && ops[n - 1].name.contains(SPILL);
        if run_removal {
            result.unwrap_or_else(|e| panic!("{context}: {e}"));
            assert_records(
                &crate::open(work.path(), context),
                &concat(&[&old, &new]),
                context,
            );
        } else if n <= rename {
            result.expect_err(context);
            assert_records(&crate::open(work.path(), context), &old, context);
        } else if n == rename + 1 {
            assert!(
                matches!(result, Err(Error::CommittedNotDurable { .. })),
                "{context}: {result:?}"
            );
            assert_records(
                &crate::open(work.path(), context),
                &concat(&[&old, &new]),
                context,
            );
        } else {
            // Past the commit only the removal of the runs can fail, which is
            // not the extend's failure: the records are committed.
            result.unwrap_or_else(|e| panic!("{context}: {e}"));
            assert_records(
                &crate::open(work.path(), context),
                &concat(&[&old, &new]),
                context,
            );
        }
        // A run whose removal failed may be left: the next writer removes it.
        let left = spill_files(work.path());
        assert!(
            left.is_empty() || run_removal,
            "{context}: runs left: {left:?}"
        );
        drop(dataset);
        let mut dataset = Dataset::open(work.path()).unwrap();
        if dataset.len() == old.len() {
            extend_spilling(&mut dataset, &new).unwrap_or_else(|e| panic!("{context}: retry: {e}"));
        } else {
            dataset.extend([(b"later", b"x")]).unwrap();
        }
        assert!(
            !work.path().join(SPILL).exists(),
            "{context}: the spill directory is left"
        );
    }
}

#[test]
fn runs_a_dead_writer_left_are_removed_by_the_next_writer_and_by_gc() {
    let _guard = crate::no_child_processes();
    let old = records("old", 10, true, 3, 40, 100);
    let new = records("new", 4000, true, 4, 8, 20);
    for cleaner in ["extend", "gc"] {
        let work = scratch_dir();
        dataset_with_old_records(work.path(), &old);
        // The process "dies" once it has spilled twice: every later operation
        // fails, so nothing is removed.
        let storage = SimStorage::new(work.path(), Config::pass());
        let mut dataset = storage.open(work.path());
        let probe = extend_spilling(&mut dataset, &new);
        probe.unwrap();
        let ops = storage.ops();
        let second_run = ops
            .iter()
            .enumerate()
            .filter(|(_, op)| op.kind == OpKind::Create && op.name.contains(SPILL))
            .nth(1)
            .map(|(at, _)| at + 2)
            .unwrap();
        let work = scratch_dir();
        dataset_with_old_records(work.path(), &old);
        let storage = SimStorage::new(
            work.path(),
            Config {
                policy: Policy::CrashAfter(second_run),
                ..Config::pass()
            },
        );
        let mut dataset = storage.open(work.path());
        extend_spilling(&mut dataset, &new).expect_err("the writer died");
        drop(dataset);
        assert!(
            !spill_files(work.path()).is_empty(),
            "{cleaner}: runs are left"
        );
        assert_records(&crate::open(work.path(), cleaner), &old, cleaner);
        match cleaner {
            "extend" => {
                let mut dataset = Dataset::open(work.path()).unwrap();
                dataset.extend([(b"later", b"x")]).unwrap();
            }
            _ => {
                let report = Dataset::gc(work.path(), &GcOptions::default()).unwrap();
                assert!(
                    report
                        .files
                        .iter()
                        .any(|f| f.to_string_lossy().contains(SPILL)),
                    "{report:?}"
                );
            }
        }
        assert!(
            !work.path().join(SPILL).exists(),
            "{cleaner}: the spill directory is left"
        );
    }
}

#[test]
fn a_duplicate_of_a_spilled_key_is_found() {
    let _guard = crate::no_child_processes();
    let work = scratch_dir();
    dataset_with_old_records(work.path(), &records("old", 3, true, 5, 10, 10));
    let mut dataset = Dataset::open(work.path()).unwrap();
    let mut new = records("new", 5000, true, 6, 8, 20);
    // The first key again, thousands of keys (several runs) later.
    new.push((new[0].0.clone(), b"again".to_vec()));
    match extend_spilling(&mut dataset, &new) {
        Err(Error::DuplicateKey { key }) => assert_eq!(key.0, new[0].0),
        other => panic!("expected the duplicate key, got {other:?}"),
    }
    assert_eq!(dataset.len(), 3);
    assert!(!work.path().join(SPILL).exists());
}
