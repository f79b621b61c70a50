//! Duplicate keys in an extend: `push_batch` refuses a batch with one and writes
//! none of it; `push_batch_skipping_duplicates` leaves duplicates out, the first
//! occurrence winning, whether the earlier copy is committed, pushed earlier in the
//! extend, or earlier in the same batch.

use bcd::{CreateOptions, Dataset, Error};

fn dataset(dir: &std::path::Path) -> Dataset {
    let options = CreateOptions {
        keyed: true,
        ..Default::default()
    };
    let mut dataset = Dataset::create(dir, options).unwrap();
    dataset.extend([(b"committed", b"old")]).unwrap();
    dataset
}

#[test]
fn skipping_keeps_the_first_occurrence_wherever_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let mut dataset = dataset(dir.path());
    let mut extend = dataset.begin_extend().unwrap();
    extend.push(b"pushed", b"first").unwrap();
    let batch: [(&[u8], &[u8]); 6] = [
        (b"a", b"a1"),
        (b"committed", b"new"),
        (b"pushed", b"second"),
        (b"b", b"b1"),
        (b"a", b"a2"),
        (b"c", b"c1"),
    ];
    let skipped = extend.push_batch_skipping_duplicates(&batch).unwrap();
    assert_eq!(skipped, [1, 2, 4]);
    assert_eq!(extend.records(), 4);
    extend.commit().unwrap();

    let reopened = Dataset::open(dir.path()).unwrap();
    let all: Vec<(Vec<u8>, Vec<u8>)> = (0..reopened.len())
        .map(|i| {
            (
                reopened.key_at(i).unwrap().to_vec(),
                reopened.at(i).unwrap().into_owned(),
            )
        })
        .collect();
    let expected: Vec<(Vec<u8>, Vec<u8>)> = [
        ("committed", "old"),
        ("pushed", "first"),
        ("a", "a1"),
        ("b", "b1"),
        ("c", "c1"),
    ]
    .iter()
    .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
    .collect();
    assert_eq!(all, expected);
}

#[test]
fn a_duplicate_fails_the_whole_batch_and_leaves_the_extend_usable() {
    let dir = tempfile::tempdir().unwrap();
    let mut dataset = dataset(dir.path());
    let mut extend = dataset.begin_extend().unwrap();
    let batch: [(&[u8], &[u8]); 3] = [(b"x", b"1"), (b"y", b"2"), (b"x", b"3")];
    match extend.push_batch(&batch) {
        Err(Error::DuplicateKey { key }) => assert_eq!(key.0, b"x"),
        other => panic!("expected DuplicateKey, got {other:?}"),
    }
    assert_eq!(extend.records(), 0, "none of the batch was written");
    extend.push_batch(&batch[..2]).unwrap();
    extend.commit().unwrap();
    assert_eq!(Dataset::open(dir.path()).unwrap().len(), 3);
}

mod model {
    //! The extend's checks against a plain model: any batches of records whose
    //! keys and values repeat, pushed with keys or content checked, under memory
    //! limits that spill every few hundred records or never, in shards of a few
    //! records: what is kept, and what each left-out record names, is what a
    //! map of keys and a list of values say.

    use std::collections::HashMap;

    use bcd::{CreateOptions, Dataset, Dedup, ExtendOptions};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: bcd_test_support::proptest_cases(12),
            ..ProptestConfig::default()
        })]

        #[test]
        fn kept_records_and_reports_agree_with_a_model(
            batches in proptest::collection::vec(
                proptest::collection::vec((0u16..400, 0u16..300), 1..250),
                1..5,
            ),
            content in any::<bool>(),
            limit in prop_oneof![Just(Some(64u64 << 10)), Just(None)],
            committed in 0usize..60,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let options = CreateOptions {
                keyed: true,
                max_shard_size: 300,
                ..Default::default()
            };
            let mut dataset = Dataset::create(dir.path(), options).unwrap();
            let value = |v: u16| format!("value-{v}").repeat(1 + usize::from(v % 5)).into_bytes();
            // Committed before: keys c-i, values of the first `committed` kinds.
            let before: Vec<(Vec<u8>, Vec<u8>)> = (0..committed)
                .map(|i| (format!("c-{i}").into_bytes(), value(i as u16)))
                .collect();
            let mut content_before = dataset
                .begin_extend_with(ExtendOptions { dedup: Dedup::Content, ..ExtendOptions::default() })
                .unwrap();
            content_before.push_batch(&before).unwrap();
            content_before.commit().unwrap();

            let mut keys: HashMap<Vec<u8>, u64> =
                before.iter().enumerate().map(|(i, (k, _))| (k.clone(), i as u64)).collect();
            let mut values: HashMap<Vec<u8>, (u64, Vec<u8>)> = HashMap::new();
            for (i, (k, v)) in before.iter().enumerate() {
                values.entry(v.clone()).or_insert((i as u64, k.clone()));
            }
            let mut kept: Vec<(Vec<u8>, Vec<u8>)> = before.clone();
            let dedup = if content { Dedup::Content } else { Dedup::Keys };
            let mut extend = dataset
                .begin_extend_with(ExtendOptions { dedup, memory_limit: limit, ..ExtendOptions::default() })
                .unwrap();
            for batch in &batches {
                let records: Vec<(Vec<u8>, Vec<u8>)> = batch
                    .iter()
                    .map(|&(k, v)| (format!("k-{k}").into_bytes(), value(v)))
                    .collect();
                let skipped = extend.push_batch_deduplicated(&records).unwrap();
                let mut expected_keys = Vec::new();
                let mut expected_values = Vec::new();
                for (at, (k, v)) in records.iter().enumerate() {
                    if keys.contains_key(k) {
                        expected_keys.push(at);
                    } else if let (true, Some((of, of_key))) = (content, values.get(v)) {
                        expected_values.push((at, *of, of_key.clone()));
                    } else {
                        let index = kept.len() as u64;
                        keys.insert(k.clone(), index);
                        values.entry(v.clone()).or_insert((index, k.clone()));
                        kept.push((k.clone(), v.clone()));
                    }
                }
                prop_assert_eq!(&skipped.keys, &expected_keys);
                let got: Vec<(usize, u64, Vec<u8>)> = skipped
                    .values
                    .iter()
                    .map(|d| (d.position, d.of, d.of_key.clone()))
                    .collect();
                prop_assert_eq!(got, expected_values);
            }
            extend.commit().unwrap();
            let stored: Vec<(Vec<u8>, Vec<u8>)> = (0..dataset.len())
                .map(|i| (dataset.key_at(i).unwrap().to_vec(), dataset.at(i).unwrap().into_owned()))
                .collect();
            prop_assert_eq!(stored, kept);
            prop_assert!(dataset.verify_content().is_empty());
            prop_assert!(!dir.path().join(".bcd-spill").exists());
        }
    }
}
