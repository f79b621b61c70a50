//! (b) Mutated datasets, and arbitrary but consistent shards, checked against
//! the model.

use std::fs;
use std::path::Path;

use bcd::Dataset;
use proptest::prelude::*;

use crate::bases::{apply_mutation, bases, mutation, write_files};
use crate::edits::interesting_u32;
use crate::model::{check_open_error, check_reads, model_open, read_from_disk};
use crate::{config, shard_name, MANIFEST};

/// Opens `dir` and checks the outcome against the model, then reads everything.
fn check_open(dir: &Path, extra_keys: &[Vec<u8>]) {
    let model = model_open(&read_from_disk(dir));
    match (Dataset::open(dir), model) {
        (Ok(ds), Ok(model)) => check_reads(&ds, &model, extra_keys),
        (Err(err), Err(fault)) => check_open_error(dir, &fault, &err),
        (Ok(ds), Err(fault)) => panic!("model expects {fault:?}, but open succeeded: {ds:?}"),
        (Err(err), Ok(model)) => {
            panic!(
                "model reads {} records, but open failed: {err}",
                model.records.len()
            )
        }
    }
}

#[test]
fn directories_in_place_of_files_are_errors_naming_them() {
    let base = &bases()[0];
    for victim in [
        MANIFEST.to_owned(),
        shard_name(1, "idx"),
        shard_name(1, "bin"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ds");
        write_files(&dir, &base.files);
        let path = dir.join(&victim);
        fs::remove_file(&path).unwrap();
        fs::create_dir(&path).unwrap();
        if victim.ends_with(".bin") {
            // Make the index account for exactly the directory's reported length, so
            // open gets as far as mapping it.
            let len = fs::metadata(&path).unwrap().len();
            let mut idx = Vec::new();
            let mut left = len;
            while left > 0 {
                let value = left.min(u32::MAX as u64);
                idx.extend_from_slice(&[0u8; 4]); // an empty key...
                idx.extend_from_slice(&(value as u32).to_le_bytes());
                left -= value;
            }
            fs::write(dir.join(shard_name(1, "idx")), idx).unwrap();
        }
        match Dataset::open(&dir) {
            Ok(ds) => {
                // Only possible for a directory reported as 0 bytes long.
                assert!(victim.ends_with(".bin"));
                let _ = ds.verify();
            }
            Err(err) => {
                let message = err.to_string();
                assert!(message.contains(&path.display().to_string()), "{message}");
            }
        }
    }
}

proptest! {
    #![proptest_config(config(300))]

    #[test]
    fn mutated_dataset_never_panics_and_names_the_file(
        base in 0usize..7,
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let base = &bases()[base];
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ds");
        write_files(&dir, &base.files);
        let names: Vec<String> = base.files.iter().map(|(n, _)| n.clone()).collect();
        for m in &mutations {
            apply_mutation(&dir, &names, m);
        }
        check_open(&dir, &base.keys);
    }
}

proptest! {
    #![proptest_config(config(200))]

    /// Well-formed index and data files whose sizes and bytes are arbitrary: opens
    /// whenever sizes add up, and then every value is read (mostly corrupt LZ4).
    #[test]
    fn arbitrary_consistent_shards_read_without_panicking(
        keyed in any::<bool>(),
        lz4 in any::<bool>(),
        shards in prop::collection::vec(
            prop::collection::vec(
                (0usize..4, prop_oneof![
                    prop::collection::vec(any::<u8>(), 0..40),
                    (interesting_u32(), prop::collection::vec(any::<u8>(), 0..40))
                        .prop_map(|(prefix, block)| {
                            let mut v = prefix.to_le_bytes().to_vec();
                            v.extend(block);
                            v
                        }),
                ]),
                0..6,
            ),
            0..4,
        ),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let compression = if lz4 { "\"lz4\"" } else { "null" };
        let manifest = format!(
            "{{\"keyed\": {keyed}, \"compression\": {compression}, \
             \"max_shard_size\": 10, \"shards\": {}}}",
            shards.len()
        );
        fs::write(dir.join(MANIFEST), manifest).unwrap();
        let mut all_keys = Vec::new();
        for (id, records) in shards.iter().enumerate() {
            let (mut idx, mut bin) = (Vec::new(), Vec::new());
            for (key_size, stored) in records {
                let key_size = if keyed { (*key_size).min(stored.len()) } else { 0 };
                if keyed {
                    idx.extend_from_slice(&(key_size as u32).to_le_bytes());
                    all_keys.push(stored[..key_size].to_vec());
                }
                idx.extend_from_slice(&((stored.len() - key_size) as u32).to_le_bytes());
                bin.extend_from_slice(stored);
            }
            fs::write(dir.join(shard_name(id as u64, "idx")), idx).unwrap();
            fs::write(dir.join(shard_name(id as u64, "bin")), bin).unwrap();
        }
        check_open(dir, &all_keys);
    }
}
