//! A persisted index (`.bcd-index`) whose checksum is valid but whose contents lie,
//! as a hostile or buggy writer can make it: reads never present one record as
//! another, key lookups never return another key's record, and `verify` reports
//! the file. (Damage that breaks the checksum is in tests/index_file.rs.)

use std::fs;
use std::path::Path;
use std::sync::Arc;

use bcd::storage::FileSystem;
use bcd::{Compression, CreateOptions, Dataset, Error};
use bcd_test_support::{INDEX_FILE, INDEX_FILE_ALWAYS as ALWAYS, INDEX_FILE_NEVER as NEVER};
use proptest::prelude::*;
use xxhash_rust::xxh3::xxh3_64;

/// The layout of FORMAT.md's index file section.
const HEADER_SIZE: usize = 64;
const CHECKSUM_AT: usize = 40;
const SHARD_ENTRY_SIZE: usize = 40;
const TABLE_ENTRY_SIZE: usize = 16;

fn open(dir: &Path) -> Dataset {
    Dataset::open_with(dir, NEVER, Arc::new(FileSystem)).unwrap()
}

fn key(i: usize) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    format!("{i:06}").into_bytes()
}

/// A keyed (or keyless) dataset of `records` six-byte values over several shards,
/// with an index file covering all of them. Returns the file's bytes.
fn dataset_with_index_file(dir: &Path, records: usize, keyed: bool) -> Vec<u8> {
    let options = CreateOptions {
        keyed,
        compression: Compression::None,
        max_shard_size: 256,
    };
    let mut dataset = Dataset::create(dir, options).unwrap();
    if keyed {
        dataset
            .extend((0..records).map(|i| (key(i), value(i))))
            .unwrap();
    } else {
        dataset.extend_values((0..records).map(value)).unwrap();
    }
    drop(dataset);
    let dataset = Dataset::open_with(dir, ALWAYS, Arc::new(FileSystem)).unwrap();
    assert!(dataset.uses_index_file());
    assert!(dataset.shards() > 2);
    fs::read(dir.join(INDEX_FILE)).unwrap()
}

/// Writes `bytes` as the index file with its checksum recomputed, as a hostile
/// writer would.
fn write_with_checksum(dir: &Path, mut bytes: Vec<u8>) {
    bytes[CHECKSUM_AT..CHECKSUM_AT + 8].fill(0);
    let sum = xxh3_64(&bytes);
    bytes[CHECKSUM_AT..CHECKSUM_AT + 8].copy_from_slice(&sum.to_le_bytes());
    fs::write(dir.join(INDEX_FILE), bytes).unwrap();
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

/// Byte offset of record `record`'s start in the file.
fn start_at(bytes: &[u8], record: usize) -> usize {
    let shards = u64_at(bytes, 16) as usize;
    HEADER_SIZE + shards * SHARD_ENTRY_SIZE + record * 8
}

/// Byte offset of the key table's entries.
fn entries_at(bytes: &[u8]) -> usize {
    let records = u64_at(bytes, 24) as usize;
    let bucket_bits = u64_at(bytes, 32);
    start_at(bytes, records) + ((1usize << bucket_bits) + 1) * 8
}

fn assert_index_file_error(error: Error) {
    match &error {
        Error::CorruptIndexFile { path, .. } => assert!(path.ends_with(INDEX_FILE), "{error}"),
        other => panic!("expected CorruptIndexFile, got {other:?}"),
    }
    assert!(error.to_string().contains("delete it"), "{error}");
}

/// Every read of `dataset` is the right record or an error, never another record's
/// bytes; returns whether every read was right.
fn reads_are_right_or_errors(dataset: &Dataset, records: usize, keyed: bool) -> bool {
    let mut all_right = true;
    for i in 0..records {
        match dataset.at(i) {
            Ok(found) => assert_eq!(&*found, value(i), "record {i}"),
            Err(e) => {
                assert_index_file_error(e);
                all_right = false;
            }
        }
        if keyed {
            match dataset.key_at(i) {
                Ok(found) => assert_eq!(found, key(i), "key of record {i}"),
                Err(e) => {
                    assert_index_file_error(e);
                    all_right = false;
                }
            }
            // A lookup compares the key it finds: the right record, or none.
            match dataset.get(&key(i)) {
                Ok(Some(found)) => assert_eq!(&*found, value(i), "value of key {i}"),
                Ok(None) => all_right = false,
                Err(e) => {
                    assert_index_file_error(e);
                    all_right = false;
                }
            }
        }
    }
    all_right
}

#[test]
fn swapped_record_starts_are_an_error_and_verify_reports_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    let mut bytes = dataset_with_index_file(&path, 300, true);
    let (first, second) = (start_at(&bytes, 0), start_at(&bytes, 1));
    let (a, b) = (u64_at(&bytes, first), u64_at(&bytes, second));
    bytes[first..first + 8].copy_from_slice(&b.to_le_bytes());
    bytes[second..second + 8].copy_from_slice(&a.to_le_bytes());
    write_with_checksum(&path, bytes);

    let dataset = open(&path);
    assert!(dataset.uses_index_file(), "the checksum is valid");
    assert_index_file_error(dataset.at(0).unwrap_err());
    assert_index_file_error(dataset.key_at(1).unwrap_err());
    assert!(!reads_are_right_or_errors(&dataset, 300, true));
    let problems = dataset.verify();
    assert_eq!(problems.len(), 1, "{problems:?}");
    let message = problems[0].to_string();
    assert!(
        message.contains("record 0 of shard 0") && message.contains("delete it"),
        "{message}"
    );
    drop(dataset);

    // Deleting the file, as the message says, gives back every record.
    fs::remove_file(path.join(INDEX_FILE)).unwrap();
    let dataset = open(&path);
    assert!(reads_are_right_or_errors(&dataset, 300, true));
    assert!(dataset.verify().is_empty());
}

#[test]
fn every_start_pointing_at_one_record_is_an_error_for_every_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    let mut bytes = dataset_with_index_file(&path, 300, false);
    let fifth = u64_at(&bytes, start_at(&bytes, 5));
    for record in 0..300 {
        let at = start_at(&bytes, record);
        bytes[at..at + 8].copy_from_slice(&fifth.to_le_bytes());
    }
    write_with_checksum(&path, bytes);

    let dataset = open(&path);
    assert!(dataset.uses_index_file());
    for i in 0..300 {
        match dataset.at(i) {
            Ok(found) => panic!("record {i} read as {:?}", String::from_utf8_lossy(&found)),
            Err(e) => assert_index_file_error(e),
        }
    }
    assert_eq!(dataset.verify().len(), 1);
}

#[test]
fn a_key_table_entry_naming_another_record_leaves_the_key_unreachable_not_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    let mut bytes = dataset_with_index_file(&path, 300, true);
    // Point every entry at record 7: each key's lookup finds record 7, whose key
    // is not the one asked for.
    let entries = entries_at(&bytes);
    for entry in 0..300 {
        let at = entries + entry * TABLE_ENTRY_SIZE + 8;
        bytes[at..at + 8].copy_from_slice(&7u64.to_le_bytes());
    }
    write_with_checksum(&path, bytes);

    let dataset = open(&path);
    assert!(dataset.uses_index_file());
    for i in 0..300 {
        // Reads by position do not use the table.
        assert_eq!(&*dataset.at(i).unwrap(), value(i));
        let found = dataset.get(&key(i)).unwrap();
        assert!(
            found.is_none() || (i == 7 && found.as_deref() == Some(&value(7)[..])),
            "key {i} found {found:?}"
        );
    }
    let problems = dataset.verify();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].to_string().contains("key table entry"),
        "{}",
        problems[0]
    );
}

#[test]
fn verify_passes_a_sound_index_file() {
    for keyed in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ds");
        dataset_with_index_file(&path, 300, keyed);
        let dataset = open(&path);
        assert!(dataset.uses_index_file());
        assert!(dataset.verify().is_empty(), "keyed {keyed}");
        assert!(reads_are_right_or_errors(&dataset, 300, keyed));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: bcd_test_support::proptest_cases(48), ..ProptestConfig::default() })]

    /// Whatever a hostile writer puts in the starts or the key table (checksum
    /// fixed up), every read is right or an error, and `verify` reports the file
    /// whenever a read is not right.
    #[test]
    fn a_hostile_file_never_gives_another_records_bytes(
        keyed in any::<bool>(),
        changes in prop::collection::vec((any::<prop::sample::Index>(), any::<u64>()), 1..6),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ds");
        let mut bytes = dataset_with_index_file(&path, 120, keyed);
        let body = start_at(&bytes, 0);
        let words = (bytes.len() - body) / 8;
        for (at, word) in changes {
            // Small values are plausible offsets and record numbers.
            let word = if word % 2 == 0 { word % 2048 } else { word };
            let at = body + at.index(words) * 8;
            bytes[at..at + 8].copy_from_slice(&word.to_le_bytes());
        }
        write_with_checksum(&path, bytes);

        let dataset = open(&path);
        let all_right = reads_are_right_or_errors(&dataset, 120, keyed);
        let problems = dataset.verify();
        prop_assert!(problems.len() <= 1, "{:?}", problems);
        if !all_right {
            prop_assert_eq!(problems.len(), 1);
        }
        if let Some(problem) = problems.into_iter().next() {
            assert_index_file_error(problem);
        }
    }
}
