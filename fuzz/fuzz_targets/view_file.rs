//! A view file (FORMAT.md, "Views"): `View::decode` of arbitrary bytes, then
//! the binding check against a made-up dataset.
//!
//! The first byte is a flag: bit 0 overwrites the checksum field (bytes 80..88)
//! of the rest with the right checksum, as a hostile writer could, so that the
//! checks behind the checksum are reached. A decode must never panic nor
//! allocate what the header claims; an accepted file must hold strictly
//! increasing indices below its record count, be exactly as long as its header
//! says, and encode back to the same bytes.
#![no_main]

use std::sync::Arc;

use bcd::{ShardFingerprint, View};
use libfuzzer_sys::fuzz_target;
use xxhash_rust::xxh3::xxh3_64;

const CHECKSUM: std::ops::Range<usize> = 80..88;

fuzz_target!(|input: &[u8]| {
    let Some((&flag, rest)) = input.split_first() else {
        return;
    };
    let mut bytes = rest.to_vec();
    if flag & 1 == 1 && bytes.len() >= CHECKSUM.end {
        bytes[CHECKSUM].fill(0);
        let sum = xxh3_64(&bytes);
        bytes[CHECKSUM].copy_from_slice(&sum.to_le_bytes());
    }
    let Ok(view) = View::decode(Arc::new(bytes.clone())) else {
        return;
    };
    let records = view.binding.records;
    let indices: Vec<u64> = view.indices.iter().collect();
    assert!(indices.windows(2).all(|w| w[0] < w[1]));
    assert!(indices.last().is_none_or(|&last| last < records));
    assert_eq!(indices.len(), view.indices.len());
    for (position, &index) in indices.iter().enumerate() {
        assert_eq!(view.indices.position_of(index), Some(position));
    }
    assert_eq!(view.encode(), bytes, "an accepted file encodes back to itself");
    // The binding against a dataset of 3 shards of 10 records: never a panic.
    let _ = view.binding.mismatch(
        30,
        3,
        |shard| (shard * 10).min(30),
        |_| Ok::<_, ()>(ShardFingerprint::default()),
    );
});
