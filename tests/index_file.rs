//! The persisted index (`.bcd-index`): written when a dataset is opened or
//! extended, used by later opens, ignored when it does not describe the shards on
//! disk, and never a cause of wrong answers or panics whatever its bytes.
//! (The reference extending a dataset that has one is in tests/interop/index_file.rs.)

use std::fs;
use std::path::Path;
use std::sync::Arc;

use bcd::storage::FileSystem;
use bcd::{Compression, CreateOptions, Dataset, Error, OpenOptions};
use bcd_test_support::{INDEX_FILE, INDEX_FILE_ALWAYS as ALWAYS, INDEX_FILE_NEVER as NEVER};
use proptest::prelude::*;

fn open(dir: &Path, options: OpenOptions) -> Dataset {
    Dataset::open_with(dir, options, Arc::new(FileSystem)).unwrap()
}

fn key(i: usize) -> Vec<u8> {
    format!("key-{i:05}").into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    format!("value {i} ").repeat(i % 7).into_bytes()
}

/// A keyed dataset of `records` records over several shards, written without an
/// index file.
fn keyed_dataset(dir: &Path, records: usize, compression: Compression) {
    let options = CreateOptions {
        keyed: true,
        compression,
        max_shard_size: 4096,
    };
    drop(Dataset::create(dir, options).unwrap());
    open(dir, NEVER)
        .extend((0..records).map(|i| (key(i), value(i))))
        .unwrap();
}

fn assert_reads_every_record(dataset: &Dataset, records: usize) {
    assert_eq!(dataset.len(), records);
    for i in 0..records {
        assert_eq!(dataset.key_at(i).unwrap(), key(i), "key {i}");
        assert_eq!(&*dataset.at(i).unwrap(), value(i), "value {i}");
        assert_eq!(
            dataset.position(&key(i)).unwrap(),
            Some(i),
            "position of {i}"
        );
    }
    assert_eq!(dataset.position(b"absent").unwrap(), None);
    assert!(!dataset.contains(&key(records)));
}

#[test]
fn written_on_open_and_used_by_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    keyed_dataset(&path, 3000, Compression::Lz4);
    assert!(!path.join(INDEX_FILE).exists());

    let first = open(&path, ALWAYS);
    assert!(first.shards() > 10, "the corpus spans many shards");
    assert!(first.uses_index_file());
    assert_reads_every_record(&first, 3000);
    let written = fs::metadata(path.join(INDEX_FILE))
        .unwrap()
        .modified()
        .unwrap();

    let second = open(&path, ALWAYS);
    assert!(second.uses_index_file());
    assert_reads_every_record(&second, 3000);
    let after = fs::metadata(path.join(INDEX_FILE))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(written, after, "a current file is not rewritten");
    assert!(second.uncommitted_files().unwrap().is_empty());
    assert!(second.verify().is_empty());
}

#[test]
fn small_datasets_get_no_file_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    keyed_dataset(&path, 100, Compression::None);
    let dataset = Dataset::open(&path).unwrap();
    assert!(!dataset.uses_index_file());
    assert!(!path.join(INDEX_FILE).exists());
    assert_reads_every_record(&dataset, 100);
}

#[test]
fn large_shards_get_a_file_whatever_the_record_count() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    keyed_dataset(&path, 50, Compression::None);
    let by_bytes = |min_bytes| OpenOptions {
        index_file_min_records: None,
        index_file_min_bytes: Some(min_bytes),
        index_file_min_tail: 0,
    };
    let stored = open(&path, NEVER).stored_bytes();
    assert!(!open(&path, by_bytes(stored + 1)).uses_index_file());
    assert!(open(&path, by_bytes(stored)).uses_index_file());
}

#[test]
fn an_extend_folds_its_shards_into_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    keyed_dataset(&path, 1000, Compression::Lz4);
    let mut dataset = open(&path, ALWAYS);
    dataset
        .extend((1000..1500).map(|i| (key(i), value(i))))
        .unwrap();
    assert!(dataset.uses_index_file());
    assert_reads_every_record(&dataset, 1500);

    // Duplicates are still found against keys the file covers.
    let error = dataset.extend([(key(10), b"again".to_vec())]).unwrap_err();
    assert!(matches!(error, Error::DuplicateKey { .. }), "{error}");

    let written = fs::read(path.join(INDEX_FILE)).unwrap();
    let reopened = open(&path, ALWAYS);
    assert_reads_every_record(&reopened, 1500);
    assert_eq!(fs::read(path.join(INDEX_FILE)).unwrap(), written);
}

/// Small appends to a dataset with a file leave it as it is (the records after it
/// are indexed from their shards) until `index_file_min_tail` of them accumulate.
#[test]
fn the_file_is_rewritten_once_enough_records_follow_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    keyed_dataset(&path, 1000, Compression::None);
    let options = OpenOptions {
        index_file_min_tail: 300,
        ..ALWAYS
    };
    let mut dataset = open(&path, options);
    let first = fs::read(path.join(INDEX_FILE)).unwrap();

    dataset
        .extend((1000..1200).map(|i| (key(i), value(i))))
        .unwrap();
    assert_eq!(fs::read(path.join(INDEX_FILE)).unwrap(), first, "200 < 300");
    assert_reads_every_record(&dataset, 1200);
    let error = dataset
        .extend([(key(1100), b"again".to_vec())])
        .unwrap_err();
    assert!(matches!(error, Error::DuplicateKey { .. }), "{error}");
    let reopened = open(&path, options);
    assert!(reopened.uses_index_file());
    assert_reads_every_record(&reopened, 1200);
    assert_eq!(
        fs::read(path.join(INDEX_FILE)).unwrap(),
        first,
        "nor on open"
    );

    dataset
        .extend((1200..1300).map(|i| (key(i), value(i))))
        .unwrap();
    assert_ne!(
        fs::read(path.join(INDEX_FILE)).unwrap(),
        first,
        "300 reached"
    );
    assert_reads_every_record(&open(&path, NEVER), 1300);
}

#[test]
fn shards_committed_after_the_file_are_indexed_from_the_shards() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    keyed_dataset(&path, 1000, Compression::None);
    drop(open(&path, ALWAYS));
    let stale = fs::read(path.join(INDEX_FILE)).unwrap();

    // Another writer that keeps no index file (as the reference) extends it.
    let mut other = open(&path, NEVER);
    other
        .extend((1000..1200).map(|i| (key(i), value(i))))
        .unwrap();
    assert_eq!(fs::read(path.join(INDEX_FILE)).unwrap(), stale);

    let without_writing = open(&path, NEVER);
    assert!(
        without_writing.uses_index_file(),
        "the covered prefix is used"
    );
    assert_reads_every_record(&without_writing, 1200);

    let rewriting = open(&path, ALWAYS);
    assert_reads_every_record(&rewriting, 1200);
    assert_ne!(fs::read(path.join(INDEX_FILE)).unwrap(), stale);
}

/// A committed shard duplicating a key the file covers is refused on open, as when
/// there is no file.
#[test]
fn a_duplicate_key_in_a_new_shard_is_found_against_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    keyed_dataset(&path, 200, Compression::None);
    let shards = open(&path, ALWAYS).shards();

    // Write shard `shards` by hand, holding key(5) again, and commit it.
    let key = key(5);
    let mut data = key.clone();
    data.extend_from_slice(b"v");
    let mut index = (key.len() as u32).to_le_bytes().to_vec();
    index.extend_from_slice(&1u32.to_le_bytes());
    fs::write(path.join(format!("{shards:06}.bin")), data).unwrap();
    fs::write(path.join(format!("{shards:06}.idx")), index).unwrap();
    let manifest = fs::read_to_string(path.join("manifest.json")).unwrap();
    let manifest = manifest.replace(
        &format!("\"shards\": {shards}"),
        &format!("\"shards\": {}", shards + 1),
    );
    fs::write(path.join("manifest.json"), manifest).unwrap();

    let error = Dataset::open_with(&path, ALWAYS, Arc::new(FileSystem)).unwrap_err();
    assert!(
        matches!(error, Error::DuplicateKeyInDataset { .. }),
        "{error}"
    );
}

#[test]
fn a_file_describing_other_shards_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    keyed_dataset(&path, 500, Compression::None);
    drop(open(&path, ALWAYS));

    // Rewrite shard 0 in place with other keys of the same sizes (outside the
    // protocol: committed shards never change), then check nothing stale is used.
    let data_path = path.join("000000.bin");
    let data = fs::read(&data_path).unwrap();
    let renamed = String::from_utf8(data).unwrap().replace("key-", "KEY-");
    std::thread::sleep(std::time::Duration::from_millis(10));
    fs::write(&data_path, renamed).unwrap();

    let dataset = open(&path, NEVER);
    assert!(!dataset.uses_index_file());
    assert_eq!(dataset.position(&key(0)).unwrap(), None);
    assert_eq!(dataset.position(b"KEY-00000").unwrap(), Some(0));
}

#[test]
fn keyless_datasets_persist_their_starts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    let options = CreateOptions {
        keyed: false,
        compression: Compression::Lz4,
        max_shard_size: 2048,
    };
    drop(Dataset::create(&path, options).unwrap());
    let mut dataset = open(&path, ALWAYS);
    dataset.extend_values((0..800).map(value)).unwrap();
    assert!(dataset.uses_index_file());
    let reopened = open(&path, ALWAYS);
    assert!(reopened.uses_index_file());
    for i in 0..800 {
        assert_eq!(&*reopened.at(i).unwrap(), value(i));
    }
    assert!(!reopened.contains(b"anything"));
}

#[test]
fn an_unwritable_file_leaves_the_index_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    keyed_dataset(&path, 300, Compression::Lz4);
    // A directory where the file would go makes the rename fail.
    fs::create_dir(path.join(INDEX_FILE)).unwrap();
    let dataset = open(&path, ALWAYS);
    assert!(!dataset.uses_index_file());
    assert_reads_every_record(&dataset, 300);
    let leftovers: Vec<_> = fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.starts_with(".bcd-index.tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: bcd_test_support::proptest_cases(32), ..ProptestConfig::default() })]

    /// Any change to the file's bytes makes it ignored (its checksum covers all of
    /// it), so every read is still right.
    #[test]
    fn a_damaged_file_is_ignored(
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1..=255u8), 1..8)
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ds");
        keyed_dataset(&path, 300, Compression::None);
        drop(open(&path, ALWAYS));
        let file = path.join(INDEX_FILE);
        let mut bytes = fs::read(&file).unwrap();
        for (at, flip) in flips {
            let at = at.index(bytes.len());
            bytes[at] ^= flip;
        }
        let damaged = bytes != fs::read(&file).unwrap();
        fs::write(&file, &bytes).unwrap();

        let dataset = open(&path, NEVER);
        prop_assert_eq!(dataset.uses_index_file(), !damaged);
        assert_reads_every_record(&dataset, 300);
    }
}
