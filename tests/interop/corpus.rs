//! The records written in both directions: binary keys, values around LZ4's
//! edges, and comparisons that report the first differing record.

use std::collections::HashSet;

use bcd_test_support::{hex, Record, Rng};

/// Value sizes around LZ4's edges (minimum match, last literals, 64 KiB window).
pub const VALUE_SIZES: [usize; 24] = [
    0, 1, 2, 3, 4, 5, 7, 12, 13, 15, 16, 17, 31, 64, 100, 255, 256, 257, 1000, 4096, 65_535,
    65_536, 65_537, 300_000,
];

/// Keys that stress binary handling: all 256 one-byte keys (so NUL and 0xFF), the
/// empty key, invalid UTF-8, all byte values in one key, a long key.
pub fn binary_keys(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    keys.extend([
        Vec::new(),
        b"\0\0".to_vec(),
        b"a\0b".to_vec(),
        b"\xff\xfe\xfd\xfc".to_vec(),
        b"\xc3\x28".to_vec(),     // invalid UTF-8: bad continuation byte
        b"\xed\xa0\x80".to_vec(), // a UTF-16 surrogate, invalid in UTF-8
        b"\xc0\xaf".to_vec(),     // an overlong encoding
        b"\x80\x80\x80".to_vec(), // lone continuation bytes
        "café/😀.jpg".as_bytes().to_vec(), // valid UTF-8, for contrast
        b"name with \"quotes\" and \\".to_vec(),
        (0..=255u8).collect(),
        (0..=255u8).rev().collect(),
        rng.bytes(5000),
    ]);
    keys
}

/// A corpus of records: binary keys prefixed with `tag` (so corpora with different
/// tags share no key), values of every size in [`VALUE_SIZES`], both compressible
/// and random, then many small values. Keys are empty when `!keyed`.
pub fn corpus(keyed: bool, tag: &str) -> Vec<Record> {
    let mut rng = Rng::from_tag(tag);
    let mut values = Vec::new();
    for size in VALUE_SIZES {
        values.push(rng.text(size));
        values.push(rng.bytes(size));
    }
    values.push(vec![0; 70_000]);
    values.push(b"\x10\0\0\0not an lz4 block, but it starts like one".to_vec());
    let keys = binary_keys(&mut rng);
    assert!(keys.len() > values.len());
    let records: Vec<Record> = keys
        .into_iter()
        .enumerate()
        .map(|(i, key)| {
            let value = match values.get(i) {
                Some(value) => value.clone(),
                None if i % 5 == 0 => Vec::new(),
                None if i % 2 == 0 => rng.bytes(i % 40),
                None => rng.text(i % 300),
            };
            let key = if keyed {
                [tag.as_bytes(), &key].concat()
            } else {
                Vec::new()
            };
            (key, value)
        })
        .collect();
    assert_unique_keys(keyed, &records);
    records
}

/// A smaller corpus for steps that run many times: 40 records up to 20 KB.
pub fn small_corpus(keyed: bool, tag: &str) -> Vec<Record> {
    let mut rng = Rng::from_tag(tag);
    let sizes = [0, 1, 13, 100, 3000, 9000, 20_000];
    let records: Vec<Record> = (0..40)
        .map(|i| {
            let size = sizes[i % sizes.len()];
            let value = if i % 2 == 0 {
                rng.text(size)
            } else {
                rng.bytes(size)
            };
            let key = if keyed {
                [tag.as_bytes(), &[i as u8, 0, 0xff, 0x80], &rng.bytes(i % 5)].concat()
            } else {
                Vec::new()
            };
            (key, value)
        })
        .collect();
    assert_unique_keys(keyed, &records);
    records
}

pub fn assert_unique_keys(keyed: bool, records: &[Record]) {
    if keyed {
        let keys: HashSet<&[u8]> = records.iter().map(|(k, _)| k.as_slice()).collect();
        assert_eq!(keys.len(), records.len(), "test corpus keys must be unique");
    }
}

pub fn describe(record: &Record) -> String {
    let (key, value) = record;
    format!(
        "key \"{}\" ({} bytes), value of {} bytes starting {}",
        key[..key.len().min(40)].escape_ascii(),
        key.len(),
        value.len(),
        hex(&value[..value.len().min(16)])
    )
}

/// Compares full record lists, reporting the first difference rather than
/// printing megabytes.
pub fn assert_records_eq(actual: &[Record], expected: &[Record], context: &str) {
    if actual == expected {
        return;
    }
    match actual.iter().zip(expected).position(|(a, e)| a != e) {
        Some(i) => panic!(
            "{context}: record {i} differs:\n  got      {}\n  expected {}\n({} records, expected {})",
            describe(&actual[i]),
            describe(&expected[i]),
            actual.len(),
            expected.len()
        ),
        None => panic!(
            "{context}: {} records, expected {} (the common prefix agrees)",
            actual.len(),
            expected.len()
        ),
    }
}
