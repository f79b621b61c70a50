//! (d) Round trips, and the shards an independent model of the sharding rule
//! predicts.

use std::collections::HashSet;
use std::fs;
use std::path::Path;

use bcd::lz4_block::{self, Lz4Mode};
use bcd::{Compression, CreateOptions, Dataset, Manifest};
use proptest::prelude::*;

use crate::lz4::value;
use crate::model::{check_reads, ModelDataset, ModelRecord};
use crate::{config, shard_name, MANIFEST};

#[derive(Clone, Debug)]
struct RoundTrip {
    keyed: bool,
    lz4: bool,
    max_shard_size: u64,
    /// Each inner vector is one extend (keys ignored when keyless).
    batches: Vec<Vec<(Vec<u8>, Vec<u8>)>>,
    /// Reopen the dataset between extends instead of reusing the handle.
    reopen_between: bool,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop::collection::vec(any::<u8>(), 0..6),
        2 => prop::collection::vec(0u8..3, 0..4),
        1 => Just(Vec::new()),
    ]
}

fn round_trip() -> impl Strategy<Value = RoundTrip> {
    (
        any::<bool>(),
        any::<bool>(),
        prop_oneof![1u64..8, 8u64..64, 64u64..300],
        prop::collection::vec(prop::collection::vec((key(), value()), 0..10), 1..4),
        any::<bool>(),
    )
        .prop_map(
            |(keyed, lz4, max_shard_size, mut batches, reopen_between)| {
                if keyed {
                    // Keys are unique across the whole dataset.
                    let mut seen = HashSet::new();
                    for batch in &mut batches {
                        batch.retain(|(k, _)| seen.insert(k.clone()));
                    }
                }
                RoundTrip {
                    keyed,
                    lz4,
                    max_shard_size,
                    batches,
                    reopen_between,
                }
            },
        )
}

/// Where each record should land: the sharding rule, restated. Every extend starts a
/// new shard; within one, a new shard starts when the current one is non-empty and
/// the record (key + stored value) would take it past `max_shard_size`.
fn model_sharding(
    batches: &[Vec<(Vec<u8>, Vec<u8>)>],
    max_shard_size: u64,
) -> (Vec<u64>, Vec<Vec<u64>>) {
    let mut shard_of = Vec::new();
    let mut per_batch_shards = Vec::new();
    let mut next: u64 = 0;
    for batch in batches {
        let mut current: Option<(u64, u64)> = None; // (id, size)
        let first = next;
        for (key, stored) in batch {
            let size = (key.len() + stored.len()) as u64;
            let start_new = match current {
                None => true,
                Some((_, used)) => used > 0 && used + size > max_shard_size,
            };
            if start_new {
                current = Some((next, 0));
                next += 1;
            }
            let (id, used) = current.as_mut().unwrap();
            *used += size;
            shard_of.push(*id);
        }
        per_batch_shards.push((first..next).collect());
    }
    (shard_of, per_batch_shards)
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn round_trip_matches_the_sharding_model(case in round_trip()) {
        let RoundTrip { keyed, lz4, max_shard_size, batches, reopen_between } = case;
        let compression = if lz4 { Compression::Lz4 } else { Compression::None };
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("ds");
        let mut ds = Dataset::create(&path, CreateOptions { keyed, compression, max_shard_size })
            .unwrap();

        // The stored form of every record, computed outside the dataset.
        let stored_batches: Vec<Vec<(Vec<u8>, Vec<u8>)>> = batches
            .iter()
            .map(|batch| {
                batch
                    .iter()
                    .map(|(k, v)| {
                        let key = if keyed { k.clone() } else { Vec::new() };
                        let stored = if lz4 {
                            let mut out = Vec::new();
                            lz4_block::compress_into(v, Lz4Mode::default(), &mut out).unwrap();
                            out
                        } else {
                            v.clone()
                        };
                        (key, stored)
                    })
                    .collect()
            })
            .collect();
        let (shard_of, per_batch) = model_sharding(&stored_batches, max_shard_size);

        for (b, batch) in batches.iter().enumerate() {
            if reopen_between {
                ds = Dataset::open(&path).unwrap();
            }
            let summary = if keyed {
                ds.extend(batch.iter().map(|(k, v)| (k, v))).unwrap()
            } else {
                ds.extend_values(batch.iter().map(|(_, v)| v)).unwrap()
            };
            prop_assert_eq!(summary.records, batch.len() as u64);
            prop_assert_eq!(summary.shards, per_batch[b].len() as u64);
            let bytes: usize = stored_batches[b].iter().map(|(k, s)| k.len() + s.len()).sum();
            prop_assert_eq!(summary.bytes_stored, bytes as u64);
        }
        let shards = per_batch.iter().flatten().max().map_or(0, |s| s + 1);

        // Byte for byte: the manifest, and each shard's .idx and .bin.
        let compression_json = if lz4 { "\"lz4\"" } else { "null" };
        prop_assert_eq!(
            fs::read_to_string(path.join(MANIFEST)).unwrap(),
            format!(
                "{{\"keyed\": {keyed}, \"compression\": {compression_json}, \
                 \"max_shard_size\": {max_shard_size}, \"shards\": {shards}}}"
            )
        );
        let stored: Vec<&(Vec<u8>, Vec<u8>)> = stored_batches.iter().flatten().collect();
        let mut expected_records = Vec::new();
        for id in 0..shards {
            let (mut idx, mut bin) = (Vec::new(), Vec::new());
            for (i, (key, value)) in stored.iter().enumerate() {
                if shard_of[i] != id {
                    continue;
                }
                if keyed {
                    idx.extend_from_slice(&(key.len() as u32).to_le_bytes());
                }
                idx.extend_from_slice(&(value.len() as u32).to_le_bytes());
                bin.extend_from_slice(key);
                bin.extend_from_slice(value);
                expected_records.push(ModelRecord {
                    shard: id,
                    record: shard_of[..i].iter().filter(|&&s| s == id).count() as u64,
                    key: key.clone(),
                    stored: value.clone(),
                });
            }
            prop_assert!(!bin.is_empty() || !idx.is_empty(), "shard {} is empty", id);
            let on_disk = |ext| fs::read(path.join(shard_name(id, ext))).unwrap();
            prop_assert_eq!(on_disk("idx"), idx, "shard {}", id);
            prop_assert_eq!(on_disk("bin"), bin, "shard {}", id);
        }
        prop_assert!(!path.join(shard_name(shards, "idx")).exists());
        prop_assert!(!path.join(shard_name(shards, "bin")).exists());

        // The same records, in order, through both the writing handle and a fresh one.
        let values: Vec<&Vec<u8>> = batches.iter().flatten().map(|(_, v)| v).collect();
        let model = ModelDataset {
            manifest: Manifest::parse(&fs::read(path.join(MANIFEST)).unwrap(), Path::new(MANIFEST))
                .unwrap(),
            records: expected_records,
        };
        let keys: Vec<Vec<u8>> = batches.iter().flatten().map(|(k, _)| k.clone()).collect();
        for handle in [&ds, &Dataset::open(&path).unwrap()] {
            prop_assert_eq!(handle.len(), values.len());
            for (i, v) in values.iter().enumerate() {
                prop_assert_eq!(&handle.at(i).unwrap()[..], &v[..]);
                if keyed {
                    let got = handle.get(&keys[i]).unwrap();
                    prop_assert_eq!(got.as_deref(), Some(&v[..]));
                }
            }
            prop_assert!(handle.verify().is_empty());
            check_reads(handle, &model, &keys);
        }
    }
}

#[test]
fn model_sharding_examples() {
    let rec = |k: usize, v: usize| (vec![b'k'; k], vec![b'v'; v]);
    // Empty records never open a shard past an empty one; oversized ones get their own.
    let (shards, per_batch) = model_sharding(
        &[
            vec![
                rec(0, 0),
                rec(0, 0),
                rec(3, 3),
                rec(0, 10),
                rec(0, 0),
                rec(1, 1),
            ],
            vec![],
            vec![rec(1, 0)],
        ],
        6,
    );
    assert_eq!(shards, vec![0, 0, 0, 1, 2, 2, 3]);
    assert_eq!(per_batch, vec![vec![0, 1, 2], vec![], vec![3]]);
}
