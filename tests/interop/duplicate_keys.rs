//! Duplicate keys: a Rust extend that repeats a key the reference wrote.

use bcd::{Dataset, Error};
use bcd_test_support::{snapshot, Record, Rng};

use crate::checks::{assert_rust_reads, snapshot_without_lock};
use crate::corpus::corpus;
use crate::harness::{
    create_step, extend_step, reference, KEYED_LZ4, LOCK_NAME, SMALL_SHARDS, V2, V3,
};

/// A Rust extend of a reference-written dataset that repeats a key the reference
/// wrote (or repeats a key within itself) fails with `DuplicateKey`, even after
/// new shard files were written, and leaves every file byte-identical; Rust adds
/// only its empty lock file.
#[test]
fn rust_extend_repeating_a_reference_key_fails_and_changes_no_file() {
    let tmp = tempfile::tempdir().unwrap();
    let records = corpus(true, "");
    let mut rng = Rng::from_tag("fresh");
    // New records: enough data for several new shards, and more records than one
    // of `Dataset::extend`'s compression batches (1024), so that shard files are
    // written before the duplicate arrives.
    let mut fresh: Vec<Record> = (0..4)
        .map(|i| (format!("fresh {i}").into_bytes(), rng.bytes(100_000)))
        .collect();
    fresh.extend((0..1100).map(|i| (format!("small {i}").into_bytes(), rng.text(i % 200))));

    for version in [V3, V2] {
        let dir = tmp.path().join(version);
        let (at_create, per_extend) = match version {
            V3 => (Some(SMALL_SHARDS), None),
            _ => (None, Some(SMALL_SHARDS)),
        };
        reference(
            version,
            &[
                create_step(&dir, KEYED_LZ4, at_create),
                extend_step(&dir, true, &records, per_extend),
            ],
        );
        let before = snapshot(&dir);
        assert!(!before.contains_key(LOCK_NAME));
        let mut dataset = Dataset::open(&dir).unwrap();
        let shards = dataset.shards();
        let next_shard = format!("{shards:06}.bin");

        let repeated_keys: [&[u8]; 5] =
            [b"", b"\0", b"\xff", b"\xc3\x28", &records.last().unwrap().0];
        for duplicate in repeated_keys {
            let context = format!(
                "reference {version}, duplicate key \"{}\" ({} bytes)",
                duplicate[..duplicate.len().min(40)].escape_ascii(),
                duplicate.len()
            );
            // Through a transaction: new shard files exist when the duplicate is refused.
            let mut extend = dataset.begin_extend().unwrap();
            for (key, value) in &fresh {
                extend.push(key, value).unwrap();
            }
            assert!(
                dir.join(&next_shard).exists(),
                "{context}: nothing was written yet"
            );
            match extend.push(duplicate, b"another value") {
                Err(Error::DuplicateKey { key }) => assert_eq!(key.0, duplicate, "{context}"),
                other => panic!("{context}: expected DuplicateKey, got {other:?}"),
            }
            drop(extend);
            assert_eq!(
                snapshot_without_lock(&dir),
                before,
                "{context}: files changed"
            );

            // Through `extend`, all or nothing.
            let batch = fresh
                .iter()
                .map(|(k, v)| (k.as_slice(), v.as_slice()))
                .chain([(duplicate, b"another value".as_slice())]);
            match dataset.extend(batch) {
                Err(Error::DuplicateKey { key }) => assert_eq!(key.0, duplicate, "{context}"),
                other => panic!("{context}: expected DuplicateKey, got {other:?}"),
            }
            assert_eq!(
                snapshot_without_lock(&dir),
                before,
                "{context}: files changed"
            );
            assert_eq!((dataset.len(), dataset.shards()), (records.len(), shards));
        }

        // A key repeated within the extend itself, in a later batch.
        let batch = [&fresh[..], &fresh[..1]].concat();
        match dataset.extend(batch.iter().map(|(k, v)| (k, v))) {
            Err(Error::DuplicateKey { key }) => assert_eq!(key.0, fresh[0].0),
            other => panic!("reference {version}: expected DuplicateKey, got {other:?}"),
        }
        assert_eq!(
            snapshot_without_lock(&dir),
            before,
            "reference {version}: files changed"
        );

        let context = format!("reference {version}'s dataset after refused extends");
        assert_rust_reads(&dataset, KEYED_LZ4, &records, &context);
        assert_rust_reads(&Dataset::open(&dir).unwrap(), KEYED_LZ4, &records, &context);
    }
}
