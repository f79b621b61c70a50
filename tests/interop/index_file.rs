//! The persisted index (`.bcd-index`), which the reference neither reads nor
//! updates.

use std::fs;

use bcd::{Compression, CreateOptions, Dataset};
use bcd_test_support::INDEX_FILE_ALWAYS;

use crate::checks::{assert_rust_reads, rust_extend};
use crate::corpus::corpus;
use crate::harness::{assert_dump, dump_step, extend_step, reference, KEYED_LZ4, SMALL_SHARDS, V3};

/// The reference extends a dataset that carries this project's persisted index
/// (`.bcd-index`), which it neither reads nor updates: the next open here finds the
/// file stale for the new shards, indexes them from the shards, sees every record,
/// and rewrites the file to cover them. The reference, for its part, reads the
/// dataset with the file in it.
#[test]
fn reference_extending_past_the_persisted_index() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let first = corpus(true, "");
    let second = corpus(true, "second/");
    let expected = [first.clone(), second.clone()].concat();
    let always = INDEX_FILE_ALWAYS;
    let storage = std::sync::Arc::new(bcd::storage::FileSystem);

    let options = CreateOptions {
        keyed: true,
        compression: Compression::Lz4,
        max_shard_size: SMALL_SHARDS,
    };
    drop(Dataset::create(&dir, options).unwrap());
    let mut dataset = Dataset::open_with(&dir, always, storage.clone()).unwrap();
    rust_extend(&mut dataset, &first);
    assert!(dataset.uses_index_file());
    let covered = dataset.shards();
    let stale = fs::read(dir.join(".bcd-index")).unwrap();
    drop(dataset);

    let results = reference(
        V3,
        &[extend_step(&dir, true, &second, None), dump_step(&dir)],
    );
    assert_eq!(fs::read(dir.join(".bcd-index")).unwrap(), stale);

    let dataset = Dataset::open_with(&dir, always, storage).unwrap();
    assert!(dataset.shards() > covered);
    let context = "reference with .bcd-index";
    assert_dump(&results[1], KEYED_LZ4, dataset.shards(), &expected, context);
    assert!(dataset.uses_index_file());
    assert_rust_reads(
        &dataset,
        KEYED_LZ4,
        &expected,
        "Rust after the reference extended",
    );
    assert_ne!(
        fs::read(dir.join(".bcd-index")).unwrap(),
        stale,
        "rewritten"
    );
    let reopened =
        Dataset::open_with(&dir, always, std::sync::Arc::new(bcd::storage::FileSystem)).unwrap();
    assert_rust_reads(
        &reopened,
        KEYED_LZ4,
        &expected,
        "Rust through the rewritten file",
    );
}
