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
