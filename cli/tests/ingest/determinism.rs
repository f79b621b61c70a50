//! Determinism: the dataset's bytes do not depend on the number of jobs.

use bcd::Dataset;
use bcd_test_support::{read_all, snapshot_names, tree_snapshot};

use crate::common::*;
use crate::harness::{mixed_records, tar_of};
use crate::ingest;

#[test]
fn dataset_files_are_byte_identical_for_1_2_and_5_jobs() {
    let dir = tempfile::tempdir().unwrap();
    // 1600 records: 7 batches with one job, 2 with five.
    let source = mixed_records(1600, 42);
    let archive = dir.path().join("mixed.tar");
    std::fs::write(&archive, tar_of(&source)).unwrap();
    let mut snapshots = Vec::new();
    for jobs in ["1", "2", "5"] {
        let ds = dir.path().join(format!("jobs-{jobs}"));
        let summary = ingest(
            &[s(&archive)],
            &ds,
            &["--jobs", jobs, "--max-shard-size", "1M"],
        );
        assert_eq!(summary["records"], 1600);
        snapshots.push(tree_snapshot(&ds).unwrap());
    }
    let shards = snapshots[0]
        .keys()
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .count();
    assert!(shards >= 3, "only {shards} shards: not a multi-shard test");
    assert!(
        snapshots[0] == snapshots[1],
        "--jobs 1 and --jobs 2 differ: {:?} / {:?}",
        snapshot_names(&snapshots[0]),
        snapshot_names(&snapshots[1])
    );
    assert!(snapshots[0] == snapshots[2], "--jobs 1 and --jobs 5 differ");
    assert_eq!(
        read_all(&Dataset::open(dir.path().join("jobs-5")).unwrap()),
        source
    );
}
