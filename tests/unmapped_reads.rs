//! Positional reads of values ([`Dataset::read_into_unmapped`],
//! [`Dataset::read_stored_unmapped`] + [`Dataset::decode_stored_into`],
//! [`Dataset::at_unmapped`]): the same
//! bytes as reads through the mapping for every record of uncompressed and LZ4
//! datasets (compressible values, incompressible ones stored as literal-only
//! blocks, empty ones) over many shards (which files stay open, and which are
//! closed past the bound: `src/unmapped.rs`'s unit tests); nothing of
//! the shard mapped into the process; a shard file replaced at its path is not
//! read (the mapping is); a shard cut short under the reader is an error naming
//! it, where a read through the mapping would be a SIGBUS; content checks apply.
//!
//! Positional batches ([`Dataset::plan_positional`] + [`Dataset::read_planned`]):
//! the same bytes as the mapped reads for every mix of values (small ones read
//! in runs of neighbours, large verbatim ones straight into place, large
//! compressed ones decoded), keyed and keyless, in sorted, shuffled and
//! repeated orders, across shards, around the gap bound and the run cap; the
//! same safety as the single reads.

use std::path::Path;

use bcd::{Compression, CreateOptions, Dataset, Dedup, Error, ExtendOptions, PositionalBatch};
use bcd_test_support::Rng;

/// `count` records: compressible text, random bytes (stored verbatim by LZ4) and
/// an empty value now and then, 2-6 KiB each.
fn records(count: usize, seed: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut rng = Rng::new(seed);
    (0..count)
        .map(|i| {
            let len = 2048 + rng.below(4096);
            let value = match i % 7 {
                0 => Vec::new(),
                1..=3 => rng.bytes(len),
                _ => format!("record {i} ").repeat(len / 10).into_bytes(),
            };
            (format!("key-{i:06}").into_bytes(), value)
        })
        .collect()
}

/// A dataset of `records` in shards of about 24 KiB (so mapped, not read into
/// memory), written with content hashes.
fn create(dir: &Path, compression: Compression, records: &[(Vec<u8>, Vec<u8>)]) -> Dataset {
    // `records` are keyed `key-N`, as `create_values` keys its values.
    let values: Vec<Vec<u8>> = records.iter().map(|(_, value)| value.clone()).collect();
    create_values(dir, compression, true, 24 << 10, &values)
}

/// The value at `index` by `read_into_unmapped`, its length found without the
/// mapping (an LZ4 value's is in its stored bytes, read positionally).
fn unmapped(dataset: &Dataset, index: usize) -> bcd::Result<Vec<u8>> {
    let len = match dataset.read_stored_unmapped(index, &mut Vec::new())? {
        Some(len) => len,
        None => dataset.value_len(index)?,
    };
    let mut out = vec![0; len];
    let mut scratch = Vec::new();
    dataset.read_into_unmapped(index, &mut out, &mut scratch)?;
    Ok(out)
}

/// The value at `index` by `read_stored_unmapped` and `decode_stored_into`; a
/// shard small enough to be read into memory rather than mapped is read the
/// usual way.
fn stored_then_decoded(dataset: &Dataset, index: usize) -> Vec<u8> {
    let mut stored = Vec::new();
    let Some(len) = dataset.read_stored_unmapped(index, &mut stored).unwrap() else {
        let shard = dataset.value_location(index).unwrap().shard;
        let len = std::fs::metadata(dataset.shard_data_path(shard))
            .unwrap()
            .len();
        assert!(len <= 16 << 10, "shard {shard} of {len} bytes is mapped");
        return dataset.at(index).unwrap().to_vec();
    };
    let mut out = vec![0; len];
    dataset
        .decode_stored_into(index, &stored, &mut out)
        .unwrap();
    out
}

#[test]
fn positional_reads_equal_the_mapped_ones_over_many_shards() {
    for compression in [Compression::None, Compression::Lz4] {
        let dir = tempfile::tempdir().unwrap();
        let records = records(900, 3);
        let dataset = create(dir.path(), compression, &records);
        // Many shards, each file opened on its first read.
        assert!(dataset.shards() > 40, "{}", dataset.shards());
        // Scattered order, twice over.
        let mut rng = Rng::new(9);
        for _ in 0..2 * records.len() {
            let index = rng.below(records.len());
            let expected = &records[index].1;
            assert_eq!(&dataset.at(index).unwrap()[..], &expected[..]);
            assert_eq!(
                &unmapped(&dataset, index).unwrap(),
                expected,
                "{compression:?} {index}"
            );
            assert_eq!(
                &stored_then_decoded(&dataset, index),
                expected,
                "{compression:?} {index}"
            );
            let mut stored = vec![7; 3];
            assert_eq!(
                &dataset.at_unmapped(index, &mut stored).unwrap()[..],
                &expected[..],
                "{compression:?} {index}"
            );
        }
        assert!(dataset.at_unmapped(records.len(), &mut Vec::new()).is_err());
        // A buffer of the wrong size is refused, not filled in part.
        let index = 1;
        let mut short = vec![0; records[index].1.len() - 1];
        assert!(matches!(
            dataset.read_into_unmapped(index, &mut short, &mut Vec::new()),
            Err(Error::InvalidOption(_))
        ));
        assert!(dataset
            .read_into_unmapped(records.len(), &mut [], &mut Vec::new())
            .is_err());
    }
}

/// The resident size, in KiB, of this process's mappings of `path`.
#[cfg(target_os = "linux")]
fn mapped_kib(path: &Path) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let name = path.canonicalize().unwrap();
    let name = name.to_string_lossy();
    let mut inside = false;
    let mut total = 0;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            inside = line.ends_with(&*name);
        } else if inside && first == "Rss:" {
            total += line
                .split_whitespace()
                .nth(1)
                .unwrap()
                .parse::<u64>()
                .unwrap();
        }
    }
    total
}

#[cfg(target_os = "linux")]
#[test]
fn positional_reads_map_no_page_of_the_shard() {
    for compression in [Compression::None, Compression::Lz4] {
        let dir = tempfile::tempdir().unwrap();
        let records = records(60, 4);
        let dataset = create(dir.path(), compression, &records);
        let path = dataset.shard_data_path(0);
        let in_first = dataset.shard_records(0) as usize;
        assert!(in_first > 3);
        // Opening a keyed dataset reads its keys, which lie between the values.
        let before = mapped_kib(&path);
        for (index, (_, value)) in records.iter().enumerate().take(in_first).skip(1) {
            assert_eq!(&unmapped(&dataset, index).unwrap(), value);
            assert_eq!(&stored_then_decoded(&dataset, index), value);
            assert_eq!(
                &dataset.at_unmapped(index, &mut Vec::new()).unwrap()[..],
                &value[..]
            );
        }
        assert_eq!(mapped_kib(&path), before, "{compression:?}");
        // Reads through the mapping do map the pages: the check above can fail.
        for index in 1..in_first {
            std::hint::black_box(dataset.at(index).unwrap().to_vec());
        }
        assert!(mapped_kib(&path) > before + 8, "{compression:?}");
    }
}

#[test]
fn a_shard_replaced_at_its_path_is_not_read() {
    for compression in [Compression::None, Compression::Lz4] {
        let dir = tempfile::tempdir().unwrap();
        let records = records(60, 5);
        let dataset = create(dir.path(), compression, &records);
        let path = dataset.shard_data_path(0);
        let index = 2;
        // Loads (maps) the shard without reading the value.
        dataset.value_location(index).unwrap();
        // Another file of the same length, renamed over the shard.
        let len = std::fs::metadata(&path).unwrap().len() as usize;
        let replacement = dir.path().join("replacement");
        std::fs::write(&replacement, vec![0x5a; len]).unwrap();
        std::fs::rename(&replacement, &path).unwrap();
        // The value the dataset was opened with, read through its mapping.
        assert_eq!(
            unmapped(&dataset, index).unwrap(),
            records[index].1,
            "{compression:?}"
        );
        let mut stored = Vec::new();
        assert_eq!(
            dataset.read_stored_unmapped(index, &mut stored).unwrap(),
            None
        );
    }
}

#[test]
fn a_shard_cut_short_under_the_reader_is_an_error_naming_it() {
    for compression in [Compression::None, Compression::Lz4] {
        let dir = tempfile::tempdir().unwrap();
        let records = records(60, 6);
        let dataset = create(dir.path(), compression, &records);
        let path = dataset.shard_data_path(0);
        let last = dataset.shard_records(0) as usize - 1;
        let index = (1..=last)
            .rev()
            .find(|&i| !records[i].1.is_empty())
            .unwrap();
        let location = dataset.value_location(index).unwrap();
        // Cut in place (the same file) before the value's last byte.
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(location.offset + location.len - 1).unwrap();
        drop(file);
        for error in [
            unmapped(&dataset, index).unwrap_err(),
            dataset
                .read_stored_unmapped(index, &mut Vec::new())
                .unwrap_err(),
            dataset.at_unmapped(index, &mut Vec::new()).unwrap_err(),
        ] {
            let message = error.to_string();
            assert!(matches!(error, Error::CorruptShard { .. }), "{message}");
            assert!(message.contains(&*path.to_string_lossy()), "{message}");
            assert!(
                message.contains(&format!("offset {}", location.offset)),
                "{message}"
            );
        }
    }
}

#[test]
fn positional_reads_check_content_hashes() {
    for compression in [Compression::None, Compression::Lz4] {
        let dir = tempfile::tempdir().unwrap();
        let records = records(60, 7);
        let dataset = create(dir.path(), compression, &records);
        // A random (so verbatim under LZ4 too) value: its last stored byte flipped.
        let index = 2;
        let location = dataset.value_location(index).unwrap();
        let path = dataset.shard_data_path(location.shard);
        drop(dataset);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[(location.offset + location.len - 1) as usize] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let mut dataset = Dataset::open(dir.path()).unwrap();
        assert!(unmapped(&dataset, index).is_ok());
        dataset.set_verify_content(true).unwrap();
        assert!(matches!(
            unmapped(&dataset, index),
            Err(Error::ContentMismatch { .. })
        ));
        let mut stored = Vec::new();
        let len = dataset
            .read_stored_unmapped(index, &mut stored)
            .unwrap()
            .unwrap();
        assert!(matches!(
            dataset.decode_stored_into(index, &stored, &mut vec![0; len]),
            Err(Error::ContentMismatch { .. })
        ));
        assert!(matches!(
            dataset.at_unmapped(index, &mut stored),
            Err(Error::ContentMismatch { .. })
        ));
        assert_eq!(unmapped(&dataset, index + 1).unwrap(), records[index + 1].1);
    }
}

/// The values at `indices` read as one positional batch, into one buffer as
/// the Python batches are, then split; planned both ways (reading ahead or
/// not), which must give the same values or the same error.
fn batch(
    dataset: &Dataset,
    plan: &mut PositionalBatch,
    indices: &[usize],
) -> bcd::Result<Vec<Vec<u8>>> {
    let plain = batch_planned(dataset, plan, indices, false);
    let ahead = batch_planned(dataset, plan, indices, true);
    match (&plain, &ahead) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "{indices:?}"),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{indices:?}"),
        _ => panic!("{indices:?}: {plain:?} planned plainly, {ahead:?} reading ahead"),
    }
    plain
}

fn batch_planned(
    dataset: &Dataset,
    plan: &mut PositionalBatch,
    indices: &[usize],
    ahead: bool,
) -> bcd::Result<Vec<Vec<u8>>> {
    match ahead {
        true => dataset.plan_positional_ahead(indices, plan)?,
        false => dataset.plan_positional(indices, plan)?,
    }
    let lens = plan.lens().to_vec();
    assert_eq!(lens.len(), indices.len());
    let mut out = vec![0xA5u8; lens.iter().sum()];
    let mut scratch = Vec::new();
    let mut rest = &mut out[..];
    for (position, &len) in lens.iter().enumerate() {
        let (mine, tail) = rest.split_at_mut(len);
        dataset.read_planned(plan, indices, position, mine, &mut scratch)?;
        rest = tail;
    }
    let mut values = Vec::new();
    let mut at = 0;
    for len in lens {
        values.push(out[at..at + len].to_vec());
        at += len;
    }
    Ok(values)
}

/// `count` values of every kind a batch plans differently: empty, small text
/// (compressible), small random (verbatim under LZ4), large random (read
/// straight into place), large half-random (compressed, over the direct bound).
fn mixed_values(count: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Rng::new(seed);
    (0..count)
        .map(|i| {
            let kind = rng.below(6);
            let n = rng.below(90_000);
            match kind {
                0 => Vec::new(),
                1 => format!("text {i} ").repeat(50 + n % 2000).into_bytes(),
                2 => rng.bytes(1 + n % 30_000),
                3 => rng.bytes(33_000 + n),
                4 => {
                    let mut value = rng.bytes(40_000 + n % 40_000);
                    value.extend(format!("tail {i} ").repeat(3000).into_bytes());
                    value
                }
                _ => rng.bytes(100 + n % 3000),
            }
        })
        .collect()
}

/// A dataset of `values` (keyed `key-N` or keyless) in shards of about
/// `shard_size` bytes, with content hashes.
fn create_values(
    dir: &Path,
    compression: Compression,
    keyed: bool,
    shard_size: u64,
    values: &[Vec<u8>],
) -> Dataset {
    let options = CreateOptions {
        keyed,
        compression,
        max_shard_size: shard_size,
    };
    let mut dataset = Dataset::create(dir, options).unwrap();
    let mut extend = dataset
        .begin_extend_with(ExtendOptions {
            dedup: Dedup::Keys,
            memory_limit: None,
            content_hashes: true,
        })
        .unwrap();
    if keyed {
        let pairs: Vec<(Vec<u8>, &[u8])> = values
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("key-{i:06}").into_bytes(), &v[..]))
            .collect();
        extend.push_batch(&pairs).unwrap();
    } else {
        extend.push_value_batch(values).unwrap();
    }
    extend.commit().unwrap();
    Dataset::open(dir).unwrap()
}

/// Every kind of value, keyed and keyless, uncompressed and LZ4, over more
/// shards than are kept open, in random batches (sorted, shuffled, repeats,
/// a whole shard in order): the bytes and lengths of the mapped reads.
#[test]
fn positional_batches_equal_the_mapped_reads_in_random_batches() {
    let values = mixed_values(400, 11);
    for compression in [Compression::None, Compression::Lz4] {
        for keyed in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let dataset = create_values(dir.path(), compression, keyed, 256 << 10, &values);
            assert!(dataset.shards() > 32, "{}", dataset.shards());
            let mut plan = PositionalBatch::new();
            let mut rng = Rng::new(21);
            let mut seen = bcd::PlanCounts::default();
            for round in 0..150 {
                let count = rng.below(96);
                let mut indices: Vec<usize> = match round % 4 {
                    // Consecutive records from a random start: runs of neighbours.
                    0 => {
                        let start = rng.below(values.len());
                        (start..(start + count).min(values.len())).collect()
                    }
                    // Random records, sorted.
                    1 => {
                        let mut picked: Vec<usize> =
                            (0..count).map(|_| rng.below(values.len())).collect();
                        picked.sort_unstable();
                        picked
                    }
                    // Random records with repeats, shuffled.
                    2 => (0..count).map(|_| rng.below(values.len())).collect(),
                    // Records of a narrow window, shuffled: gaps below the bound.
                    _ => {
                        let start = rng.below(values.len());
                        (0..count)
                            .map(|_| (start + rng.below(12)).min(values.len() - 1))
                            .collect()
                    }
                };
                if round % 4 == 0 {
                    // Shuffled consecutive records: the plan sorts them back.
                    for i in (1..indices.len()).rev() {
                        indices.swap(i, rng.below(i + 1));
                    }
                }
                let read = batch(&dataset, &mut plan, &indices).unwrap();
                let counts = plan.counts();
                seen.buffered += counts.buffered;
                seen.direct += counts.direct;
                seen.deferred += counts.deferred;
                seen.mapped += counts.mapped;
                for (position, &index) in indices.iter().enumerate() {
                    assert_eq!(
                        read[position],
                        dataset.at(index).unwrap().to_vec(),
                        "{compression:?} keyed={keyed} round {round} record {index}"
                    );
                    assert_eq!(read[position], values[index]);
                }
                plan.trim();
            }
            // Every way of reading was taken, none through the mappings.
            assert!(seen.buffered > 0 && seen.direct > 0, "{seen:?}");
            assert_eq!(seen.mapped, 0, "{seen:?}");
            if compression == Compression::Lz4 {
                assert!(seen.deferred > 0, "{seen:?}");
            } else {
                assert_eq!(seen.deferred, 0, "{seen:?}");
            }
        }
    }
}

/// Small values read in runs: neighbours closer than the gap bound share one
/// system call, farther ones do not, and a run stops at the cap.
#[test]
fn neighbours_are_read_in_runs_up_to_the_gap_bound_and_the_cap() {
    let gap = bcd::positional_batch::GAP_MAX as usize;
    let cap = bcd::positional_batch::RUN_MAX as usize;
    // 20 KB values (small): 3 of them (with their keys) less than the gap
    // bound, 4 more.
    let mut rng = Rng::new(31);
    let values: Vec<Vec<u8>> = (0..(cap / 20_000) + 40)
        .map(|_| rng.bytes(20_000))
        .collect();
    assert!(3 * 20_200 < gap && gap < 4 * 20_000);
    for compression in [Compression::None, Compression::Lz4] {
        for keyed in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let dataset = create_values(dir.path(), compression, keyed, 64 << 20, &values);
            assert_eq!(dataset.shards(), 1);
            let mut plan = PositionalBatch::new();
            let cases: [(&[usize], usize); 5] = [
                (&[10, 11, 12, 13], 1),
                (&[13, 10, 12, 11, 10], 1),
                // Gaps of three values (60 KB and the keys): under the bound.
                (&[10, 14, 18], 1),
                // Gaps of five values (100 KB): over it.
                (&[10, 16, 22], 3),
                (&[22, 10, 16, 17], 3),
            ];
            for (indices, runs) in cases {
                let read = batch(&dataset, &mut plan, indices).unwrap();
                for (position, &index) in indices.iter().enumerate() {
                    assert_eq!(read[position], values[index]);
                }
                assert_eq!(
                    plan.counts().runs,
                    runs,
                    "{compression:?} keyed={keyed} {indices:?}"
                );
            }
            // Every value of the shard, in order: over the cap, so two runs.
            let all: Vec<usize> = (0..values.len()).collect();
            let read = batch(&dataset, &mut plan, &all).unwrap();
            assert_eq!(read, values);
            assert_eq!(plan.counts().runs, 2, "{compression:?} keyed={keyed}");
            assert_eq!(plan.counts().buffered, values.len());
            // The run buffer of that batch (over the kept size) is freed.
            plan.trim();
            let read = batch(&dataset, &mut plan, &[3, 1]).unwrap();
            assert_eq!(read, vec![values[3].clone(), values[1].clone()]);
        }
    }
}

#[cfg(target_os = "linux")]
#[test]
fn positional_batches_map_no_page_of_the_shard() {
    let values = mixed_values(60, 41);
    for compression in [Compression::None, Compression::Lz4] {
        let dir = tempfile::tempdir().unwrap();
        let dataset = create_values(dir.path(), compression, true, 64 << 20, &values);
        let path = dataset.shard_data_path(0);
        let before = mapped_kib(&path);
        let mut plan = PositionalBatch::new();
        let indices: Vec<usize> = (1..values.len()).rev().collect();
        let read = batch(&dataset, &mut plan, &indices).unwrap();
        for (position, &index) in indices.iter().enumerate() {
            assert_eq!(read[position], values[index]);
        }
        assert_eq!(mapped_kib(&path), before, "{compression:?}");
    }
}

#[test]
fn a_positional_batch_of_a_replaced_shard_reads_the_mapping() {
    let values = mixed_values(60, 51);
    for compression in [Compression::None, Compression::Lz4] {
        let dir = tempfile::tempdir().unwrap();
        let dataset = create_values(dir.path(), compression, true, 64 << 20, &values);
        let path = dataset.shard_data_path(0);
        dataset.value_location(0).unwrap();
        let len = std::fs::metadata(&path).unwrap().len() as usize;
        let replacement = dir.path().join("replacement");
        std::fs::write(&replacement, vec![0x5a; len]).unwrap();
        std::fs::rename(&replacement, &path).unwrap();
        let mut plan = PositionalBatch::new();
        let indices: Vec<usize> = (0..values.len()).collect();
        assert_eq!(batch(&dataset, &mut plan, &indices).unwrap(), values);
        assert_eq!(plan.counts().mapped, values.len());
    }
}

/// A shard cut short under the reader: the batch is an error naming the file
/// and an offset, whichever way the cut value is read (in a run, straight
/// into place, or decoded).
#[test]
fn a_positional_batch_of_a_cut_shard_is_an_error_naming_it() {
    let mut rng = Rng::new(61);
    let text = |n: usize| format!("record {n} ").repeat(n).into_bytes();
    let half = |rng: &mut Rng| {
        let mut value = rng.bytes(50_000);
        value.extend(text(4000));
        value
    };
    let cases: Vec<(&str, Vec<Vec<u8>>)> = vec![
        ("small", (0..6).map(|_| rng.bytes(3000)).collect()),
        ("large", (0..6).map(|_| rng.bytes(60_000)).collect()),
        ("large compressed", (0..6).map(|_| half(&mut rng)).collect()),
    ];
    for (kind, values) in cases {
        for compression in [Compression::None, Compression::Lz4] {
            let dir = tempfile::tempdir().unwrap();
            let dataset = create_values(dir.path(), compression, false, 64 << 20, &values);
            let path = dataset.shard_data_path(0);
            let last = values.len() - 1;
            let location = dataset.value_location(last).unwrap();
            let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            file.set_len(location.offset + location.len - 1).unwrap();
            drop(file);
            let mut plan = PositionalBatch::new();
            let error = batch(&dataset, &mut plan, &[0, last]).unwrap_err();
            let message = error.to_string();
            assert!(
                matches!(error, Error::CorruptShard { .. }),
                "{kind} {message}"
            );
            assert!(
                message.contains(&*path.to_string_lossy()),
                "{kind} {message}"
            );
            assert!(message.contains("offset "), "{kind} {message}");
            // The values before the cut still read.
            assert_eq!(
                batch(&dataset, &mut plan, &[0, 1]).unwrap(),
                values[..2].to_vec()
            );
        }
    }
}

#[test]
fn positional_batches_check_content_hashes() {
    let mut rng = Rng::new(71);
    let values: Vec<Vec<u8>> = vec![rng.bytes(3000), rng.bytes(60_000), rng.bytes(3000)];
    for compression in [Compression::None, Compression::Lz4] {
        for flipped in [0, 1] {
            let dir = tempfile::tempdir().unwrap();
            let dataset = create_values(dir.path(), compression, false, 64 << 20, &values);
            let location = dataset.value_location(flipped).unwrap();
            let path = dataset.shard_data_path(location.shard);
            drop(dataset);
            let mut bytes = std::fs::read(&path).unwrap();
            bytes[(location.offset + location.len - 1) as usize] ^= 1;
            std::fs::write(&path, &bytes).unwrap();
            let mut dataset = Dataset::open(dir.path()).unwrap();
            let mut plan = PositionalBatch::new();
            assert!(batch(&dataset, &mut plan, &[0, 1, 2]).is_ok());
            dataset.set_verify_content(true).unwrap();
            assert!(matches!(
                batch(&dataset, &mut plan, &[2, flipped]),
                Err(Error::ContentMismatch { .. })
            ));
            assert_eq!(
                batch(&dataset, &mut plan, &[2]).unwrap(),
                vec![values[2].clone()]
            );
        }
    }
}

#[test]
fn read_planned_refuses_a_buffer_or_position_not_planned() {
    let values = mixed_values(20, 81);
    let dir = tempfile::tempdir().unwrap();
    let dataset = create_values(dir.path(), Compression::Lz4, false, 64 << 20, &values);
    let mut plan = PositionalBatch::new();
    let indices = [3, 5];
    dataset.plan_positional(&indices, &mut plan).unwrap();
    let len = plan.lens()[0];
    let mut scratch = Vec::new();
    for (position, size) in [(0, len + 1), (2, 0)] {
        assert!(matches!(
            dataset.read_planned(&plan, &indices, position, &mut vec![0; size], &mut scratch),
            Err(Error::InvalidOption(_))
        ));
    }
    assert!(dataset.plan_positional(&[values.len()], &mut plan).is_err());
    // Another record at a planned position is refused, even one stored in as
    // many bytes (the plan holds the bytes of the one it planned).
    // (Large enough a file to be read positionally, not read into memory.)
    let same: Vec<Vec<u8>> = (0..40)
        .map(|i| format!("value {i:02} ").repeat(500).into_bytes())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let dataset = create_values(dir.path(), Compression::None, false, 64 << 20, &same);
    dataset.plan_positional(&[0, 1], &mut plan).unwrap();
    assert_eq!(plan.counts().buffered, 2);
    let mut out = vec![0; same[2].len()];
    assert!(matches!(
        dataset.read_planned(&plan, &[2, 1], 0, &mut out, &mut scratch),
        Err(Error::InvalidOption(_))
    ));
    dataset
        .read_planned(&plan, &[0, 1], 0, &mut out, &mut scratch)
        .unwrap();
    assert_eq!(out, same[0]);
}

/// Drops `path`'s pages from the page cache (written back first); returns
/// whether every page is out of it after (a file system that keeps every page,
/// as tmpfs does, cannot drop them). A page being read (a read-ahead the
/// kernel started for an earlier read) is dropped only once read: the drop is
/// tried again until none is left, a bounded number of times.
#[cfg(target_os = "linux")]
fn evict(path: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path).unwrap();
    file.sync_all().unwrap();
    let len = file.metadata().unwrap().len() as usize;
    let pages = len.div_ceil(4096);
    // SAFETY: plain calls on an open descriptor; mincore writes one byte for
    // each page of the mapping, which `state` holds (pages of at least 4 KiB).
    unsafe {
        let map = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        );
        assert_ne!(map, libc::MAP_FAILED);
        let mut state = vec![0u8; pages];
        let dropped = (0..100).any(|_| {
            libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
            libc::mincore(map, len, state.as_mut_ptr()) == 0 && state.iter().all(|s| s & 1 == 0)
        });
        libc::munmap(map, len);
        dropped
    }
}

/// A batch planned reading ahead asks for its pages when they are not cached,
/// and not when they are; planned plainly it never asks. (Where the shard's
/// pages cannot be dropped, only the second half can be checked.)
#[cfg(target_os = "linux")]
#[test]
fn a_batch_read_ahead_asks_for_its_pages_only_when_they_are_not_cached() {
    let values: Vec<Vec<u8>> = (0..300u32)
        .map(|i| format!("{i:05}").repeat(600).into_bytes())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let dataset = create_values(dir.path(), Compression::None, false, 64 << 20, &values);
    let path = dataset.shard_data_path(0);
    // Scattered over the shard, as a sparse view's batch is.
    let indices: Vec<usize> = (0..64).map(|i| (i * 37) % 300).collect();
    let mut plan = PositionalBatch::new();
    let dropped = evict(&path);
    let read = batch_planned(&dataset, &mut plan, &indices, false).unwrap();
    assert!(!plan.counts().read_ahead, "planned plainly");
    for (value, &index) in read.iter().zip(&indices) {
        assert_eq!(value, &values[index]);
    }
    if dropped {
        assert!(evict(&path), "dropped again");
        let read = batch_planned(&dataset, &mut plan, &indices, true).unwrap();
        assert!(plan.counts().read_ahead, "its pages were not cached");
        for (value, &index) in read.iter().zip(&indices) {
            assert_eq!(value, &values[index]);
        }
    }
    // Read, so cached now.
    batch_planned(&dataset, &mut plan, &indices, true).unwrap();
    assert!(!plan.counts().read_ahead, "its pages are cached");
}
