//! Reading a dataset in object storage without downloading it: the layout from
//! the `.idx` files, values and keys by ranged reads, records by streaming.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bcd::{Compression, CreateOptions, Dataset};
use bcd_remote::RemoteDataset;
use common::*;
use object_store::memory::InMemory;

/// A keyed dataset of large values, pushed to a counting store.
fn pushed(compression: Compression) -> (tempfile::TempDir, Dataset, Arc<FaultStore>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d");
    let options = CreateOptions {
        keyed: true,
        compression,
        max_shard_size: 300_000,
    };
    let mut dataset = Dataset::create(&path, options).unwrap();
    let mut rng = bcd_test_support::Rng::new(7);
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..40)
        .map(|i| {
            (
                format!("img/{i:03}.jpg").into_bytes(),
                rng.bytes(50_000 + i * 10),
            )
        })
        .collect();
    dataset
        .extend(records.iter().map(|(k, v)| (&k[..], &v[..])))
        .unwrap();
    let store = pushed_to_store(&path);
    (dir, dataset, store)
}

#[test]
fn values_and_keys_are_read_by_ranges() {
    for compression in [Compression::None, Compression::Lz4] {
        let (_dir, local, store) = pushed(compression);
        let before = store.bytes_read.load(Ordering::SeqCst);
        let remote = RemoteDataset::open(remote_on(store.clone(), "p")).unwrap();
        assert_eq!(remote.len(), local.len());
        assert_eq!(remote.stored_bytes(), local.stored_bytes());
        assert_eq!(remote.manifest(), local.manifest());
        let opened = store.bytes_read.load(Ordering::SeqCst) - before;
        assert!(
            opened < 2000,
            "opening read only manifest and .idx files: {opened}"
        );

        let last = remote.resolve_index(-1).unwrap();
        assert_eq!(remote.value(last).unwrap(), &*local.at(last).unwrap());
        let read = store.bytes_read.load(Ordering::SeqCst) - before - opened;
        assert!(read < 60_000, "one value, not its shard: {read}");

        // Keys: far apart, so only their bytes travel.
        let before_keys = store.bytes_read.load(Ordering::SeqCst);
        let mut keys = Vec::new();
        remote
            .for_each_key(|_, key| {
                keys.push(key.to_vec());
                Ok(true)
            })
            .unwrap();
        let expected: Vec<Vec<u8>> = (0..local.len())
            .map(|i| local.key_at(i).unwrap().to_vec())
            .collect();
        assert_eq!(keys, expected);
        assert_eq!(remote.position(b"img/017.jpg").unwrap(), Some(17));
        assert_eq!(remote.position(b"nope").unwrap(), None);
        let key_bytes = store.bytes_read.load(Ordering::SeqCst) - before_keys;
        assert!(key_bytes < 20_000, "keys alone: {key_bytes}");

        let mut all = Vec::new();
        remote
            .for_each_record(|i, key, stored| {
                all.push((i, key.to_vec(), stored.to_vec()));
                Ok(())
            })
            .unwrap();
        assert_eq!(all.len(), local.len());
        for (i, key, stored) in all {
            assert_eq!(key, local.key_at(i).unwrap());
            assert_eq!(stored, local.stored_at(i).unwrap());
        }
        assert!(remote.verify().unwrap().is_empty());
    }
}

#[test]
fn damage_is_reported_naming_the_object() {
    let (_dir, _local, store) = pushed(Compression::Lz4);
    // A value whose LZ4 block is damaged: overwrite shard 0 with a flipped byte.
    let memory = store.inner.clone();
    let path = object_store::path::Path::from("p/000000.bin");
    let mut bytes = futures::executor::block_on(async {
        use object_store::ObjectStoreExt;
        memory
            .get(&path)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
            .to_vec()
    });
    // Record 0's value starts after its 11-byte key and 4-byte size prefix.
    bytes[11 + 4] ^= 0xff;
    bytes[11 + 5] ^= 0xff;
    futures::executor::block_on(async {
        use object_store::ObjectStoreExt;
        memory.put(&path, bytes.into()).await.unwrap()
    });
    let remote = RemoteDataset::open(memory_remote(memory.clone(), "p")).unwrap();
    let problems = remote.verify().unwrap();
    assert!(!problems.is_empty());
    assert!(
        problems[0]
            .to_string()
            .starts_with("s3://bucket/p/000000.bin: record 0"),
        "{}",
        problems[0]
    );

    // A missing shard file fails the open, naming it.
    futures::executor::block_on(async {
        use object_store::ObjectStoreExt;
        memory
            .delete(&object_store::path::Path::from("p/000001.idx"))
            .await
            .unwrap()
    });
    let error = RemoteDataset::open(memory_remote(memory, "p")).unwrap_err();
    assert!(
        error.to_string().contains("s3://bucket/p/000001.idx"),
        "{error}"
    );
}

/// Rewrites object `name` with `change` applied to its bytes, keeping the
/// metadata it was uploaded with (its checksum): bytes damaged in the store.
fn tamper(memory: &InMemory, name: &str, change: impl FnOnce(&mut Vec<u8>)) {
    use object_store::{ObjectStore, ObjectStoreExt};
    let path = object_store::path::Path::from(name);
    futures::executor::block_on(async {
        let read = memory.get(&path).await.unwrap();
        let attributes = read.attributes.clone();
        let mut bytes = read.bytes().await.unwrap().to_vec();
        change(&mut bytes);
        let options = object_store::PutOptions {
            attributes,
            ..Default::default()
        };
        memory.put_opts(&path, bytes.into(), options).await.unwrap();
    });
}

#[test]
fn verify_checks_each_file_against_its_stored_checksum_naming_it() {
    let (_dir, _local, store) = pushed(Compression::None);
    let memory = store.inner.clone();
    let remote = RemoteDataset::open(memory_remote(memory.clone(), "p")).unwrap();
    assert!(remote.verify().unwrap().is_empty());
    // A byte inside a stored value of shard 1: nothing but the checksum tells.
    tamper(&memory, "p/000001.bin", |bytes| bytes[100] ^= 0xff);
    // Two records' entries of shard 0's index swapped: the sizes still add up.
    tamper(&memory, "p/000000.idx", |bytes| {
        let (first, second) = bytes.split_at_mut(8);
        first.swap_with_slice(&mut second[..8]);
    });
    let remote = RemoteDataset::open(memory_remote(memory.clone(), "p")).unwrap();
    let problems: Vec<String> = remote
        .verify()
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    for name in ["000000.idx", "000001.bin"] {
        assert!(
            problems.iter().any(
                |p| p.starts_with(&format!("s3://bucket/p/{name}: ")) && p.contains("checksum")
            ),
            "{name}: {problems:?}"
        );
    }
    // Reading every record (an export) stops at the damaged data file.
    let error = remote.for_each_record(|_, _, _| Ok(())).unwrap_err();
    assert!(error.to_string().contains("000001.bin"), "{error}");
}

#[test]
fn a_damaged_index_fails_the_open_with_the_messages_of_a_local_open() {
    let (_dir, _local, store) = pushed(Compression::None);
    let memory = store.inner.clone();
    let open_error = |memory: &Arc<InMemory>| {
        RemoteDataset::open(memory_remote(memory.clone(), "p"))
            .unwrap_err()
            .to_string()
    };
    // A torn entry.
    tamper(&memory, "p/000000.idx", |bytes| {
        bytes.pop();
    });
    let error = open_error(&memory);
    assert!(
        error.starts_with("s3://bucket/p/000000.idx: ")
            && error.contains("is not a whole number of 8-byte index entries (keyed dataset)"),
        "{error}"
    );
    // A record said to end past the end of the data file.
    tamper(&memory, "p/000000.idx", |bytes| {
        bytes.push(0);
        bytes[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    });
    let error = open_error(&memory);
    assert!(
        error.starts_with("s3://bucket/p/000000.idx: ")
            && error.contains("record 0 ends at byte")
            && error.contains("past the end of s3://bucket/p/000000.bin"),
        "{error}"
    );
    // Sizes that fall short of the data file.
    tamper(&memory, "p/000000.idx", |bytes| {
        bytes[4..8].copy_from_slice(&0u32.to_le_bytes());
    });
    let error = open_error(&memory);
    assert!(
        error.starts_with("s3://bucket/p/000000.bin: ")
            && error.contains("but its index s3://bucket/p/000000.idx accounts for"),
        "{error}"
    );
}
