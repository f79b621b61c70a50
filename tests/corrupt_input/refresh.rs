//! (b') `Dataset::refresh` picking up damaged shards another writer committed.

use std::collections::HashSet;

use bcd::{Dataset, Manifest};
use proptest::prelude::*;

use crate::bases::{apply_mutation, bases, mutation, write_files};
use crate::model::{
    check_open_error, check_reads, model_manifest, model_open, model_shards, read_from_disk, Fault,
    ModelDataset,
};
use crate::{config, shard_name, MANIFEST};

proptest! {
    #![proptest_config(config(80))]

    #[test]
    fn refresh_of_mutated_new_shards_never_panics(
        base in 0usize..4,
        mutations in prop::collection::vec(mutation(), 1..3),
    ) {
        let base = &bases()[base];
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ds");
        // The handle first sees only shard 0; the rest are then "committed" by
        // another writer, and damaged.
        let shards = base.files.iter().filter(|(n, _)| n.ends_with(".bin")).count() as u64;
        let original = |name: &str| {
            base.files.iter().find(|(n, _)| n == name).map(|(_, b)| b.clone())
        };
        let first = model_manifest(&original).unwrap();
        prop_assume!(shards >= 2);
        let mut prefix: Vec<(String, Vec<u8>)> = base
            .files
            .iter()
            .filter(|(n, _)| n.starts_with(&shard_name(0, "")))
            .cloned()
            .collect();
        prefix.push((MANIFEST.to_owned(), Manifest { shards: 1, ..first }.to_bytes()));
        write_files(&dir, &prefix);
        let mut ds = Dataset::open(&dir).unwrap();
        let before = model_open(&read_from_disk(&dir)).unwrap();
        check_reads(&ds, &before, &base.keys);

        // Shard 0 is mapped: leave its files alone.
        let rest: Vec<(String, Vec<u8>)> = base
            .files
            .iter()
            .filter(|(n, _)| !n.starts_with(&shard_name(0, "")))
            .cloned()
            .collect();
        write_files(&dir, &rest);
        // Damage only what the handle has not mapped (the view the model reads).
        let names: Vec<String> = base
            .files
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|n| !n.starts_with(&shard_name(0, "")))
            .collect();
        for m in &mutations {
            apply_mutation(&dir, &names, m);
        }

        let on_disk = read_from_disk(&dir);
        let view = |name: &str| {
            if name.starts_with(&shard_name(0, "")) {
                original(name)
            } else {
                on_disk(name)
            }
        };
        let expected = model_manifest(&view).and_then(|manifest| {
            if manifest.keyed != first.keyed
                || manifest.compression != first.compression
                || manifest.shards < 1
            {
                return Err(Fault::Changed);
            }
            let mut records = before.records.clone();
            let mut seen: HashSet<Vec<u8>> = records.iter().map(|r| r.key.clone()).collect();
            model_shards(&view, &manifest, 1, &mut records, &mut seen)?;
            Ok(ModelDataset { manifest, records })
        });
        match (ds.refresh(), expected) {
            (Ok(()), Ok(model)) => check_reads(&ds, &model, &base.keys),
            (Err(err), Err(fault)) => {
                check_open_error(&dir, &fault, &err);
                // A failed refresh leaves the handle as it was.
                check_reads(&ds, &before, &base.keys);
            }
            (Ok(()), Err(fault)) => panic!("model expects {fault:?}, but refresh succeeded"),
            (Err(err), Ok(_)) => panic!("model expects success, refresh failed: {err}"),
        }
    }
}
