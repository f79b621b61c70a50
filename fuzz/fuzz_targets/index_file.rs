//! A persisted index (`.bcd-index`) with arbitrary content beside a sound keyed
//! dataset, then every read API.
//!
//! The input is the file; its checksum field (bytes 40..48) is overwritten with the
//! right checksum, as a hostile writer could, so the parser and the lookups behind
//! it are reached rather than stopped at the checksum. The dataset (3 shards, 60
//! records) is written once per process with writing of the index file turned off.
//!
//! Seed: `BCD_FUZZ_WRITE_SEED=fuzz/corpus/index_file cargo fuzz run index_file --
//! -runs=1` writes the dataset's real index file there as `valid`, for the fuzzer
//! to mutate.
//!
//! Open must succeed (the index file is a cache: when unusable it is ignored), no
//! read may panic, and a lookup must find each key's own record or nothing: a
//! damaged index may make a key unreachable but never return another's value.
#![no_main]

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use bcd::storage::FileSystem;
use bcd::{Compression, CreateOptions, Dataset, OpenOptions};
use libfuzzer_sys::fuzz_target;
use xxhash_rust::xxh3::xxh3_64;

const RECORDS: usize = 60;
const NEVER_WRITE: OpenOptions = OpenOptions {
    index_file_min_records: None,
    index_file_min_bytes: None,
    index_file_min_tail: 0,
};

fn key(i: usize) -> Vec<u8> {
    format!("key-{i}").into_bytes()
}

fn dataset_dir() -> &'static Path {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &DIR.get_or_init(|| {
        let tmp = tempfile::tempdir().expect("temporary directory");
        let path = tmp.path().join("ds");
        let options = CreateOptions {
            keyed: true,
            compression: Compression::Lz4,
            max_shard_size: 400,
        };
        drop(Dataset::create(&path, options).expect("create"));
        let mut dataset =
            Dataset::open_with(&path, NEVER_WRITE, Arc::new(FileSystem)).expect("open");
        dataset
            .extend((0..RECORDS).map(|i| (key(i), vec![i as u8; i])))
            .expect("extend");
        if let Some(seeds) = std::env::var_os("BCD_FUZZ_WRITE_SEED") {
            let always = OpenOptions {
                index_file_min_records: Some(0),
                index_file_min_bytes: None,
                index_file_min_tail: 0,
            };
            drop(Dataset::open_with(&path, always, Arc::new(FileSystem)).expect("open"));
            fs::create_dir_all(&seeds).expect("seed directory");
            fs::copy(path.join(".bcd-index"), Path::new(&seeds).join("valid")).expect("seed");
            fs::remove_file(path.join(".bcd-index")).expect("remove");
        }
        (tmp, path)
    })
    .1
}

fuzz_target!(|data: &[u8]| {
    let dir = dataset_dir();
    let mut file = data.to_vec();
    if file.len() >= 48 {
        file[40..48].fill(0);
        let sum = xxh3_64(&file);
        file[40..48].copy_from_slice(&sum.to_le_bytes());
    }
    fs::write(dir.join(".bcd-index"), &file).expect("write the index file");

    let dataset = Dataset::open_with(dir, NEVER_WRITE, Arc::new(FileSystem))
        .expect("a dataset opens whatever its index file holds");
    assert_eq!(dataset.len(), RECORDS);
    for i in 0..RECORDS {
        if let Some(found) = dataset.position(&key(i)).expect("keyed") {
            assert_eq!(found, i, "a lookup returned another key's record");
        }
        let _ = dataset.at(i);
        let _ = dataset.key_at(i);
        let _ = dataset.value_location(i);
    }
    let _ = dataset.position(b"absent");
});
