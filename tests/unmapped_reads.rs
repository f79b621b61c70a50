//! Positional reads of values ([`Dataset::read_into_unmapped`],
//! [`Dataset::read_stored_unmapped`] + [`Dataset::decode_stored_into`]): the same
//! bytes as reads through the mapping for every record of uncompressed and LZ4
//! datasets (compressible values, incompressible ones stored as literal-only
//! blocks, empty ones) over many shards (which files stay open, and which are
//! closed past the bound: `src/unmapped.rs`'s unit tests); nothing of
//! the shard mapped into the process; a shard file replaced at its path is not
//! read (the mapping is); a shard cut short under the reader is an error naming
//! it, where a read through the mapping would be a SIGBUS; content checks apply.

use std::path::Path;

use bcd::{Compression, CreateOptions, Dataset, Dedup, Error, ExtendOptions};
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
    let options = CreateOptions {
        keyed: true,
        compression,
        max_shard_size: 24 << 10,
    };
    let mut dataset = Dataset::create(dir, options).unwrap();
    let mut extend = dataset
        .begin_extend_with(ExtendOptions {
            dedup: Dedup::Keys,
            memory_limit: None,
            content_hashes: true,
        })
        .unwrap();
    let pairs: Vec<(&[u8], &[u8])> = records.iter().map(|(k, v)| (&k[..], &v[..])).collect();
    extend.push_batch_deduplicated(&pairs).unwrap();
    extend.commit().unwrap();
    Dataset::open(dir).unwrap()
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
        }
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
        }
        assert_eq!(mapped_kib(&path), before, "{compression:?}");
        // Reads through the mapping do map the pages: the check above can fail.
        for index in 1..in_first {
            let _ = dataset.at(index).unwrap().to_vec();
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
        assert_eq!(unmapped(&dataset, index + 1).unwrap(), records[index + 1].1);
    }
}
