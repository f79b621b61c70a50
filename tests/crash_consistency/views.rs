//! Writing a view (`Dataset::write_view`) through the simulated storage: a
//! temporary `.view.NAME.tmp-*`, its fsync, its read-back, then a hard link to
//! `view.NAME` (a new view) or a rename over it (a replaced one), and the
//! directory's fsync. Whatever operation fails and wherever power is lost, the
//! view reads back as exactly the old list or exactly the new one (or, for a
//! new view, is absent or exactly the new one), never damaged or of other
//! records; the records are untouched; a failure (not a crash) leaves no
//! temporary; and a later write succeeds.

use std::collections::BTreeMap;
use std::path::Path;

use bcd::{Compression, CreateOptions, Dataset, View, ViewRecords};
use bcd_test_support::sim_storage::{Config, Op, OpKind, Policy, SimStorage, ALL_SURVIVORS};
use bcd_test_support::{read_all, snapshot, Record};

use crate::fixture::SMALL_SHARD;
use crate::{extend, records, scratch_dir, write_dir};

const TMP: &str = ".view.";

/// The view of `dataset` holding `indices`, with `expression`.
fn view_of(dataset: &Dataset, indices: &[u64], expression: &str) -> View {
    let binding = dataset.view_binding().unwrap();
    let mut list = ViewRecords::new(binding.records);
    for &index in indices {
        list.push(index).unwrap();
    }
    View {
        expression: Some(expression.to_owned()),
        binding,
        indices: list.finish(),
    }
}

struct ViewFixture {
    /// The dataset, with the view "kept" holding `OLD`.
    files: BTreeMap<String, Vec<u8>>,
    records: Vec<Record>,
    old: Vec<u64>,
    new: Vec<u64>,
}

impl ViewFixture {
    fn new() -> ViewFixture {
        let dir = scratch_dir();
        let options = CreateOptions {
            keyed: true,
            compression: Compression::Lz4,
            max_shard_size: SMALL_SHARD,
        };
        let mut dataset = Dataset::create(dir.path(), options).unwrap();
        let records = records("v", 60, true, 21, 200, 3000);
        extend(&mut dataset, &records).unwrap();
        let old: Vec<u64> = (0..60).step_by(7).collect();
        // Large enough to take several short writes.
        let new: Vec<u64> = (0..60).filter(|i| i % 3 != 1).collect();
        dataset
            .write_view("kept", &view_of(&dataset, &old, "old"), false)
            .unwrap();
        ViewFixture {
            files: snapshot(dir.path()),
            records,
            old,
            new,
        }
    }

    /// Writes `name` (replacing "kept", or creating "fresh") through storage
    /// failing as `policy` says; returns the operations and the result.
    fn run(&self, name: &str, policy: Policy, dir: &Path) -> (SimStorage, bcd::Result<()>) {
        let storage = SimStorage::new(
            dir,
            Config {
                policy,
                max_write: 100,
                ..Config::pass()
            },
        );
        let dataset = storage.open(dir);
        let view = view_of(&dataset, &self.new, "new");
        let result = dataset.write_view(name, &view, name == "kept");
        (storage, result)
    }

    /// Checks `dir` after a failed or crashed write of view `name`: the records
    /// are the fixture's, "kept" reads as the old or (if written) the new list,
    /// "fresh" is absent or the new list. Returns which list `name` holds.
    fn check(&self, dir: &Path, name: &str, context: &str) -> Option<Vec<u64>> {
        let dataset = Dataset::open(dir).unwrap_or_else(|e| panic!("{context}: open: {e}"));
        assert!(
            read_all(&dataset) == self.records,
            "{context}: records changed"
        );
        let read = |view: &str| -> Option<Vec<u64>> {
            match dataset.view(view) {
                Ok(v) => Some(v.indices.iter().collect()),
                Err(bcd::Error::NoSuchView { .. }) => None,
                Err(e) => panic!("{context}: view {view}: {e}"),
            }
        };
        let kept = read("kept");
        let fresh = read("fresh");
        match name {
            "kept" => {
                let kept = kept.unwrap_or_else(|| panic!("{context}: the replaced view is gone"));
                assert!(
                    kept == self.old || kept == self.new,
                    "{context}: kept is {kept:?}"
                );
                assert_eq!(fresh, None, "{context}");
                Some(kept)
            }
            _ => {
                assert_eq!(kept.as_deref(), Some(&self.old[..]), "{context}");
                if let Some(fresh) = &fresh {
                    assert_eq!(fresh, &self.new, "{context}: fresh");
                }
                fresh
            }
        }
    }
}

fn temporaries(dir: &Path) -> Vec<String> {
    snapshot(dir)
        .into_keys()
        .filter(|n| n.starts_with(TMP))
        .collect()
}

/// Every operation of a view write fails in turn, for a replaced view and a
/// new one: the old state or the new one, and no temporary left.
#[test]
fn a_view_write_failing_at_any_operation_leaves_the_old_or_the_new_view() {
    let _guard = crate::no_child_processes();
    let fixture = ViewFixture::new();
    for name in ["kept", "fresh"] {
        let work = write_dir(&fixture.files);
        let (storage, result) = fixture.run(name, Policy::Pass, work.path());
        result.unwrap();
        let ops: Vec<Op> = storage.ops();
        let kinds: Vec<OpKind> = ops.iter().map(|op| op.kind).collect();
        let last = match name {
            "kept" => OpKind::Rename,
            _ => OpKind::HardLink,
        };
        // The name last, then the temporary's removal and the directory's fsync.
        assert!(
            kinds.ends_with(&[last, OpKind::Remove, OpKind::SyncDir]),
            "{name}: {ops:?}"
        );
        assert!(
            ops.iter().all(|op| op.name.starts_with(TMP)
                || op.name == "."
                || op.name.starts_with("view.")),
            "{ops:?}"
        );
        for n in 1..=ops.len() {
            let context = format!(
                "{name}: operation {n} of {} ({}) fails",
                ops.len(),
                ops[n - 1]
            );
            let work = write_dir(&fixture.files);
            let (_, result) = fixture.run(name, Policy::FailOnce(n), work.path());
            let holds = fixture.check(work.path(), name, &context);
            match result {
                Ok(()) => assert_eq!(
                    holds.as_deref(),
                    Some(&fixture.new[..]),
                    "{context}: Ok but not written"
                ),
                // Only the final directory fsync fails after the view has its name.
                Err(_) if ops[n - 1].kind == OpKind::SyncDir => {}
                Err(_) => {
                    let expected = (name == "kept").then(|| fixture.old.clone());
                    assert_eq!(holds, expected, "{context}: failed, yet the view changed");
                }
            }
            // A temporary stays only where removing it is what failed (gc
            // removes it).
            if ops[n - 1].kind != OpKind::Remove {
                assert_eq!(temporaries(work.path()), Vec::<String>::new(), "{context}");
            }
            // A later write goes through.
            let dataset = Dataset::open(work.path()).unwrap();
            let again = view_of(&dataset, &fixture.new, "again");
            dataset
                .write_view(name, &again, true)
                .unwrap_or_else(|e| panic!("{context}: rewrite: {e}"));
        }
    }
}

/// Power lost after every operation of a view write, for every kind of crash
/// the storage models: the view is the old or the new list, never damaged.
#[test]
fn a_view_write_cut_by_a_crash_leaves_the_old_or_the_new_view() {
    let _guard = crate::no_child_processes();
    let fixture = ViewFixture::new();
    for name in ["kept", "fresh"] {
        let work = write_dir(&fixture.files);
        let (storage, result) = fixture.run(name, Policy::Pass, work.path());
        result.unwrap();
        let total = storage.ops().len();
        let mut saw_new = false;
        for n in 0..=total {
            let work = write_dir(&fixture.files);
            let (storage, _) = fixture.run(name, Policy::CrashAfter(n), work.path());
            for survivors in ALL_SURVIVORS {
                let context =
                    format!("{name}: crash after {n} of {total} operations, {survivors:?}");
                let image = write_dir(&storage.files(survivors));
                let holds = fixture.check(image.path(), name, &context);
                saw_new |= holds.as_deref() == Some(&fixture.new[..]);
                if n == total {
                    // Everything done, the directory fsynced: durable.
                    assert_eq!(holds.as_deref(), Some(&fixture.new[..]), "{context}");
                }
            }
        }
        assert!(saw_new, "{name}: no crash point kept the new view");
    }
}
