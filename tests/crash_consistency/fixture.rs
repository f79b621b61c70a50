//! The dataset and the extend under test: committed records in several shards,
//! and an extend that adds several more, with its storage operations counted.

use std::collections::BTreeMap;
use std::path::Path;

use bcd::{Compression, CreateOptions, Dataset};
use bcd_test_support::sim_storage::{Config, Op, OpKind, Policy, SimStorage};
use bcd_test_support::{snapshot, Record};
use tempfile::TempDir;

use crate::{assert_records, concat, extend, open, records, scratch_dir, write_dir};

/// Shard limit of the fault-injection datasets: a few hundred records make 3+ shards.
pub(crate) const SMALL_SHARD: u64 = 4096;

#[derive(Clone, Copy, Debug)]
pub(crate) struct Scenario {
    pub(crate) keyed: bool,
    pub(crate) compression: Compression,
    /// Largest write call (see [`Config::max_write`]).
    pub(crate) max_write: usize,
    /// Whether removes fail too, so a failed extend cannot clean up.
    pub(crate) fail_removes: bool,
    /// The length of the one large value among the new records (the others are
    /// at most 150 bytes).
    pub(crate) big_len: usize,
}

pub(crate) const KEYED_LZ4: Scenario = Scenario {
    keyed: true,
    compression: Compression::Lz4,
    max_write: usize::MAX,
    fail_removes: false,
    big_len: 6000,
};

/// A dataset with committed records, and the records of the extend under test.
pub(crate) struct Fixture {
    pub(crate) scenario: Scenario,
    /// The dataset before the extend, every file with its bytes.
    pub(crate) base_files: BTreeMap<String, Vec<u8>>,
    pub(crate) old: Vec<Record>,
    pub(crate) old_shards: u64,
    /// The extend under test.
    pub(crate) new: Vec<Record>,
    /// A later extend.
    pub(crate) more: Vec<Record>,
    /// Operations of the extend when nothing fails.
    pub(crate) ops: Vec<Op>,
    /// Shards once the extend is committed.
    pub(crate) new_shards: u64,
}

impl Fixture {
    pub(crate) fn new(scenario: Scenario) -> Fixture {
        let keyed = scenario.keyed;
        let base = scratch_dir();
        let options = CreateOptions {
            keyed,
            compression: scenario.compression,
            max_shard_size: SMALL_SHARD,
        };
        let mut dataset = Dataset::create(base.path(), options).unwrap();
        let old = records("old", 40, keyed, 1, 200, 5000);
        extend(&mut dataset, &old).unwrap();
        let old_shards = dataset.shards();
        assert!(old_shards >= 2, "{old_shards} old shards");
        drop(dataset);

        let mut fixture = Fixture {
            scenario,
            base_files: snapshot(base.path()),
            old,
            old_shards,
            new: records("new", 240, keyed, 2, 150, scenario.big_len),
            more: records("more", 30, keyed, 3, 150, 6000),
            ops: Vec::new(),
            new_shards: 0,
        };

        // Count the operations of the extend when nothing fails.
        let work = fixture.copy();
        let storage = fixture.storage(work.path(), Policy::Pass, false);
        let mut dataset = storage.open(work.path());
        extend(&mut dataset, &fixture.new).unwrap();
        fixture.ops = storage.ops();
        fixture.new_shards = dataset.shards();
        assert_records(
            &open(work.path(), "counting run"),
            &concat(&[&fixture.old, &fixture.new]),
            "counting run",
        );
        let count = |kind| fixture.ops.iter().filter(|op| op.kind == kind).count();
        let new_shards = (fixture.new_shards - old_shards) as usize;
        assert!(new_shards >= 3, "only {new_shards} new shards");
        assert_eq!(
            count(OpKind::Create),
            2 * new_shards + 1,
            "{:?}",
            fixture.ops
        );
        assert_eq!(count(OpKind::SyncFile), 2 * new_shards + 1);
        assert_eq!(count(OpKind::SyncDir), 2);
        assert_eq!(count(OpKind::Rename), 1);
        assert_eq!(count(OpKind::Remove), 0);
        let last: Vec<OpKind> = fixture.ops.iter().rev().take(2).map(|op| op.kind).collect();
        assert_eq!(
            last,
            [OpKind::SyncDir, OpKind::Rename],
            "the commit ends with rename + fsync"
        );
        eprintln!(
            "{scenario:?}: {} operations, {new_shards} new shards",
            fixture.ops.len()
        );
        fixture
    }

    pub(crate) fn copy(&self) -> TempDir {
        write_dir(&self.base_files)
    }

    /// Storage for a copy in `dir`, failing as `policy` says.
    pub(crate) fn storage(&self, dir: &Path, policy: Policy, real_sync: bool) -> SimStorage {
        SimStorage::new(
            dir,
            Config {
                policy,
                fail_removes: self.scenario.fail_removes,
                max_write: self.scenario.max_write,
                real_sync,
                no_hard_links: false,
            },
        )
    }

    pub(crate) fn total_ops(&self) -> usize {
        self.ops.len()
    }

    /// 1-based number of the rename of the manifest.
    pub(crate) fn rename_op(&self) -> usize {
        1 + self
            .ops
            .iter()
            .position(|op| op.kind == OpKind::Rename)
            .unwrap()
    }

    pub(crate) fn old_and_new(&self) -> Vec<Record> {
        concat(&[&self.old, &self.new])
    }
}
