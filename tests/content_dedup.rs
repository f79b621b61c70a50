//! Duplicates by content ([`Dedup::Content`]): a value equal to an earlier
//! record's is left out, whether the earlier record is committed, pushed
//! earlier in the extend (spilled to disk or not), earlier in the batch, or in
//! an earlier part of a merge; the content hashes beside the shards stay one
//! per record (16 bytes each); `verify_content` and reads with
//! `set_verify_content` find a flipped byte; `build_content_hashes` gives an
//! old dataset its hashes. (The forced-collision hook is process-wide: its test
//! is `content_collisions.rs`.)

use std::path::Path;

use bcd::{
    Compression, CreateOptions, Dataset, Dedup, Error, ExtendOptions, MergeOptions, PartSource,
};
use bcd_test_support::{read_all, Rng};

const CONTENT: ExtendOptions = ExtendOptions {
    dedup: Dedup::Content,
    memory_limit: None,
    content_hashes: false,
};

fn create(dir: &Path, keyed: bool, compression: Compression) -> Dataset {
    let options = CreateOptions {
        keyed,
        compression,
        max_shard_size: 4096,
    };
    Dataset::create(dir, options).unwrap()
}

/// Pushes `records` in batches of `batch` through one extend with content
/// dedup; returns what it left out as (position in `records`, index of the
/// record kept).
fn extend_dedup(
    dataset: &mut Dataset,
    records: &[(Vec<u8>, Vec<u8>)],
    batch: usize,
    options: ExtendOptions,
) -> Vec<(usize, u64)> {
    let keyed = dataset.keyed();
    let mut extend = dataset.begin_extend_with(options).unwrap();
    let mut left = Vec::new();
    for (at, chunk) in records.chunks(batch).enumerate() {
        let pairs: Vec<(&[u8], &[u8])> = chunk
            .iter()
            .map(|(k, v)| (if keyed { &k[..] } else { &[][..] }, &v[..]))
            .collect();
        let skipped = extend.push_batch_deduplicated(&pairs).unwrap();
        assert!(skipped.keys.is_empty());
        for duplicate in skipped.values {
            left.push((at * batch + duplicate.position, duplicate.of));
            if keyed {
                let kept = &duplicate.of_key;
                assert!(!kept.is_empty());
            }
        }
    }
    extend.commit().unwrap();
    left
}

/// `count` records whose values repeat: value `i % distinct` (some empty).
fn repeating(count: usize, distinct: usize, seed: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut rng = Rng::new(seed);
    let values: Vec<Vec<u8>> = (0..distinct)
        .map(|i| match i {
            0 => Vec::new(),
            _ => {
                let len = 1 + rng.below(300);
                rng.bytes(len)
            }
        })
        .collect();
    (0..count)
        .map(|i| {
            (
                format!("key-{i:05}").into_bytes(),
                values[(i * 7) % distinct].clone(),
            )
        })
        .collect()
}

/// The records a plain model keeps: each value's first occurrence.
fn model(records: &[(Vec<u8>, Vec<u8>)], seen: &mut Vec<Vec<u8>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut kept = Vec::new();
    for (key, value) in records {
        if !seen.contains(value) {
            seen.push(value.clone());
            kept.push((key.clone(), value.clone()));
        }
    }
    kept
}

fn stored(dataset: &Dataset, keyed: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    read_all(dataset)
        .into_iter()
        .map(|(k, v)| (if keyed { k } else { Vec::new() }, v))
        .collect()
}

#[test]
fn repeated_values_are_left_out_within_a_run_and_across_appends() {
    for keyed in [true, false] {
        for compression in [Compression::Lz4, Compression::None] {
            for (batch, limit) in [(7, None), (1000, None), (50, Some(64 << 10))] {
                let context =
                    format!("keyed {keyed}, {compression:?}, batch {batch}, limit {limit:?}");
                let dir = tempfile::tempdir().unwrap();
                let mut dataset = create(dir.path(), keyed, compression);
                let options = ExtendOptions {
                    memory_limit: limit,
                    ..CONTENT
                };
                let first = repeating(600, 40, 1);
                let left = extend_dedup(&mut dataset, &first, batch, options);
                let mut seen = Vec::new();
                let mut expected = model(&first, &mut seen);
                assert_eq!(left.len(), first.len() - expected.len(), "{context}");
                // Each names the index of the kept record with its value.
                for &(position, of) in &left {
                    assert_eq!(
                        dataset.at(of as usize).unwrap().as_ref(),
                        &first[position].1[..],
                        "{context}"
                    );
                }
                let second: Vec<(Vec<u8>, Vec<u8>)> = repeating(300, 60, 1)
                    .into_iter()
                    .map(|(k, v)| ([b"second-".as_slice(), &k].concat(), v))
                    .collect();
                extend_dedup(&mut dataset, &second, batch, options);
                expected.extend(model(&second, &mut seen));
                let want: Vec<_> = expected
                    .into_iter()
                    .map(|(k, v)| (if keyed { k } else { Vec::new() }, v))
                    .collect();
                let reopened = Dataset::open(dir.path()).unwrap();
                assert_eq!(stored(&reopened, keyed), want, "{context}");
                assert!(reopened.verify_content().is_empty(), "{context}");
                // One 16-byte hash per record, nothing else.
                for shard in 0..reopened.shards() {
                    let path = reopened.sidecar_path(shard, "xxh128");
                    assert_eq!(
                        std::fs::metadata(&path).unwrap().len(),
                        16 * reopened.shard_records(shard),
                        "{context}"
                    );
                }
                assert!(!dir.path().join(".bcd-spill").exists(), "{context}");
            }
        }
    }
}

#[test]
fn dedup_needs_content_hashes_for_every_committed_shard_which_build_content_hashes_gives() {
    let dir = tempfile::tempdir().unwrap();
    let mut dataset = create(dir.path(), true, Compression::Lz4);
    let old = repeating(200, 200, 2);
    dataset
        .extend(old.iter().map(|(k, v)| (&k[..], &v[..])))
        .unwrap();
    assert!(!dataset.keeps_content_hashes().unwrap());
    match dataset.begin_extend_with(CONTENT) {
        Err(Error::NoContentHashes { shard, .. }) => assert_eq!(shard, 0),
        Err(other) => panic!("expected NoContentHashes, got {other:?}"),
        Ok(_) => panic!("an extend with content dedup began without content hashes"),
    }
    let summary = dataset.build_content_hashes().unwrap();
    assert_eq!(summary.shards_built, dataset.shards());
    assert_eq!(summary.records, 200);
    assert!(dataset.verify_content().is_empty());
    // Again: every shard has them.
    let again = dataset.build_content_hashes().unwrap();
    assert_eq!(
        (again.shards_built, again.shards_present),
        (0, dataset.shards())
    );
    // New records repeating old values are left out.
    let new: Vec<(Vec<u8>, Vec<u8>)> = old
        .iter()
        .take(50)
        .map(|(k, v)| ([b"new-".as_slice(), k].concat(), v.clone()))
        .chain(std::iter::once((b"fresh".to_vec(), b"never seen".to_vec())))
        .collect();
    let left = extend_dedup(&mut dataset, &new, 10, CONTENT);
    assert_eq!(left.len(), 50);
    assert_eq!(dataset.len(), 201);
    // An extend without dedup keeps writing content hashes once they exist.
    dataset.extend([(b"plain", b"plain")]).unwrap();
    assert!(dataset.verify_content().is_empty());
    let last = dataset.shards() - 1;
    assert_eq!(
        std::fs::metadata(dataset.sidecar_path(last, "xxh128"))
            .unwrap()
            .len(),
        16 * dataset.shard_records(last)
    );
}

#[test]
fn a_flipped_byte_is_found_by_verify_content_and_by_verifying_reads() {
    for compression in [Compression::None, Compression::Lz4] {
        let dir = tempfile::tempdir().unwrap();
        let mut dataset = create(dir.path(), true, compression);
        let records = repeating(100, 100, 3);
        extend_dedup(&mut dataset, &records, 25, CONTENT);
        let target = 37usize;
        let location = dataset.value_location(target).unwrap();
        let shard = location.shard;
        let path = dataset.shard_data_path(shard);
        drop(dataset);
        let mut bytes = std::fs::read(&path).unwrap();
        // The last byte of the stored value: for LZ4, a literal.
        let at = (location.offset + location.len - 1) as usize;
        bytes[at] ^= 0x01;
        std::fs::write(&path, &bytes).unwrap();

        let mut dataset = Dataset::open(dir.path()).unwrap();
        let problems = dataset.verify_content();
        assert_eq!(problems.len(), 1, "{compression:?}: {problems:?}");
        match &problems[0] {
            Error::ContentMismatch {
                path: named, index, ..
            } => {
                assert_eq!(named, &path);
                assert_eq!(*index, target as u64);
            }
            other => panic!("{compression:?}: expected ContentMismatch, got {other:?}"),
        }
        let message = problems[0].to_string();
        assert!(message.contains(&*path.to_string_lossy()), "{message}");
        // Unchecked reads return the changed bytes; checked ones refuse them.
        assert!(dataset.at(target).is_ok());
        dataset.set_verify_content(true).unwrap();
        assert!(matches!(
            dataset.at(target),
            Err(Error::ContentMismatch { .. })
        ));
        let mut buffer = Vec::new();
        assert!(dataset.at_with_buffer(target, &mut buffer).is_err());
        assert!(dataset.at(target - 1).is_ok() && dataset.at(target + 1).is_ok());
    }
}

#[test]
fn verifying_reads_need_content_hashes() {
    let dir = tempfile::tempdir().unwrap();
    let mut dataset = create(dir.path(), false, Compression::Lz4);
    dataset.extend_values([b"a", b"b"]).unwrap();
    assert!(matches!(
        dataset.set_verify_content(true),
        Err(Error::NoContentHashes { .. })
    ));
    assert!(!dataset.verifies_content());
    assert!(matches!(
        dataset.verify_content().as_slice(),
        [Error::NoContentHashes { .. }]
    ));
}

/// Parts of a merge holding values of the target and of each other: the
/// repeats are left out (their shards rewritten, the content hashes of the
/// rewritten shards filtered), a part without content hashes gets them.
#[test]
fn a_merge_leaves_out_values_of_the_target_and_of_earlier_parts() {
    for keyed in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        let mut dataset = create(&target, keyed, Compression::Lz4);
        let base = repeating(80, 80, 4);
        extend_dedup(&mut dataset, &base, 10, CONTENT);
        let mut parts = Vec::new();
        let mut in_parts = 0usize;
        let mut expected = {
            let mut seen = Vec::new();
            let kept = model(&base, &mut seen);
            (kept, seen)
        };
        for p in 0..3u64 {
            let path = dir.path().join(format!("part-{p}"));
            let mut part = create(&path, keyed, Compression::Lz4);
            let records: Vec<(Vec<u8>, Vec<u8>)> = repeating(120, 150, 4 + p)
                .into_iter()
                .map(|(k, v)| {
                    (
                        format!("p{p}-").into_bytes().into_iter().chain(k).collect(),
                        v,
                    )
                })
                .collect();
            if p == 1 {
                // Without content hashes: the merge computes them.
                let pairs = records.iter().map(|(k, v)| (&k[..], &v[..]));
                match keyed {
                    true => part.extend(pairs).map(drop).unwrap(),
                    false => part.extend_values(pairs.map(|(_, v)| v)).map(drop).unwrap(),
                }
                in_parts += records.len();
                let (kept, seen) = &mut expected;
                kept.extend(model(&records, seen));
            } else {
                // Deduplicated within the part already.
                let mut own = Vec::new();
                let part_kept = model(&records, &mut own);
                extend_dedup(&mut part, &records, 30, CONTENT);
                in_parts += part_kept.len();
                let (kept, seen) = &mut expected;
                kept.extend(model(&part_kept, seen));
            }
            parts.push(PartSource::new(path));
        }
        let options = MergeOptions {
            dedup: Dedup::Content,
            ..MergeOptions::default()
        };
        let before = dataset.len();
        let summary = dataset.merge(&parts, &options).unwrap();
        let (kept, _) = expected;
        let want: Vec<_> = kept
            .into_iter()
            .map(|(k, v)| (if keyed { k } else { Vec::new() }, v))
            .collect();
        let reopened = Dataset::open(&target).unwrap();
        assert_eq!(stored(&reopened, keyed), want, "keyed {keyed}");
        assert!(summary.rewritten_shards > 0);
        let added = want.len() - before;
        assert_eq!(summary.value_duplicates.len(), in_parts - added);
        for duplicate in &summary.value_duplicates {
            assert!((duplicate.of as usize) < reopened.len());
            if keyed {
                assert_eq!(
                    reopened.key_at(duplicate.of as usize).unwrap(),
                    &duplicate.of_key[..]
                );
            }
        }
        assert!(reopened.verify_content().is_empty(), "keyed {keyed}");
        assert!(reopened.verify().is_empty());
    }
}
