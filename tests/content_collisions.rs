//! With every content hash forced equal (the test hook), values are told apart
//! by their bytes: a collision keeps both records, only equal bytes are left
//! out. In a binary of its own: the hook is process-wide.

use bcd::{CreateOptions, Dataset, Dedup, ExtendOptions, MergeOptions, PartSource};

#[test]
fn a_forced_hash_collision_keeps_both_records() {
    bcd::force_content_collisions(true);
    let dir = tempfile::tempdir().unwrap();
    let options = CreateOptions {
        keyed: true,
        max_shard_size: 64,
        ..Default::default()
    };
    let mut dataset = Dataset::create(dir.path().join("d"), options).unwrap();
    let content = ExtendOptions {
        dedup: Dedup::Content,
        ..ExtendOptions::default()
    };
    let mut extend = dataset.begin_extend_with(content).unwrap();
    let batch: [(&[u8], &[u8]); 5] = [
        (b"a", b"apple"),
        (b"b", b"banana"),
        (b"c", b"apple"),
        (b"d", b"cherry"),
        (b"e", b"banana"),
    ];
    let skipped = extend.push_batch_deduplicated(&batch).unwrap();
    let left: Vec<(usize, u64)> = skipped.values.iter().map(|v| (v.position, v.of)).collect();
    assert_eq!(left, [(2, 0), (4, 1)]);
    // Later batches: every earlier record is a candidate; only bytes decide.
    let later: [(&[u8], &[u8]); 3] = [(b"f", b"cherry"), (b"g", b"date"), (b"h", b"apple")];
    let skipped = extend.push_batch_deduplicated(&later).unwrap();
    let left: Vec<(usize, u64)> = skipped.values.iter().map(|v| (v.position, v.of)).collect();
    assert_eq!(left, [(0, 2), (2, 0)]);
    extend.commit().unwrap();
    assert_eq!(dataset.len(), 4);

    // Across appends (committed candidates) and merges.
    let mut extend = dataset.begin_extend_with(content).unwrap();
    let again: [(&[u8], &[u8]); 2] = [(b"i", b"date"), (b"j", b"elderberry")];
    let skipped = extend.push_batch_deduplicated(&again).unwrap();
    assert_eq!(skipped.values.len(), 1);
    extend.commit().unwrap();
    assert_eq!(dataset.len(), 5);

    let part = dir.path().join("part");
    let mut part_dataset = Dataset::create(&part, options).unwrap();
    part_dataset
        .extend([(&b"k"[..], &b"fig"[..]), (b"l", b"banana"), (b"m", b"fig")])
        .unwrap();
    let merge = MergeOptions {
        dedup: Dedup::Content,
        ..MergeOptions::default()
    };
    let summary = dataset.merge(&[PartSource::new(&part)], &merge).unwrap();
    assert_eq!(summary.value_duplicates.len(), 2);
    let values: Vec<Vec<u8>> = (0..dataset.len())
        .map(|i| dataset.at(i).unwrap().into_owned())
        .collect();
    let expected: [&[u8]; 6] = [
        b"apple",
        b"banana",
        b"cherry",
        b"date",
        b"elderberry",
        b"fig",
    ];
    assert_eq!(values, expected);
    bcd::force_content_collisions(false);
}
