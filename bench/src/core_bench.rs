//! The Rust side of bench/core_bench.py. Prints the seconds the operation took
//! (excluding process start-up), so the driver compares like with like.
//!
//!     core-bench write DATASET RECORDS_FILE KEYED(0|1) COMPRESSION(lz4|none)
//!     core-bench read DATASET ORDER_FILE        # prints open and read seconds, checksum
//!     core-bench make-keyed DATASET N VALUE_SIZE # keys `{i:012}`, uncompressed values
//!     core-bench open DATASET                   # prints open seconds, anonymous RSS added (KiB)
//!     core-bench read-pread DATASET ORDER_FILE  # as read, but values read with pread, not the mapping
//!     core-bench first-touch DATASET [ROUNDS]   # what reading a shard first costs a process
//!
//! RECORDS_FILE holds records as `u32 key_len, key, u32 value_len, value` (LE).
//! ORDER_FILE holds `u32` record indexes (LE) in the order to read them.

use std::time::Instant;

use bcd::{Compression, CreateOptions, Dataset};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("write") => {
            let input = std::fs::read(&args[3])?;
            let keyed = args[4] == "1";
            let compression = if args[5] == "lz4" {
                Compression::Lz4
            } else {
                Compression::None
            };
            let records = parse_records(&input);
            let start = Instant::now();
            let mut ds = Dataset::create(
                &args[2],
                CreateOptions {
                    keyed,
                    compression,
                    ..Default::default()
                },
            )?;
            if keyed {
                ds.extend(records)?;
            } else {
                ds.extend_values(records.into_iter().map(|(_, v)| v))?;
            }
            println!("{:.6}", start.elapsed().as_secs_f64());
        }
        Some("first-touch") => first_touch(&args[2], args.get(3).map_or(Ok(1), |r| r.parse())?)?,
        Some("read") => {
            let order = std::fs::read(&args[3])?;
            let start = Instant::now();
            let ds = Dataset::open(&args[2])?;
            let opened = start.elapsed().as_secs_f64();
            let start = Instant::now();
            let mut buffer = Vec::new();
            let mut checksum = 0u64;
            // PREFETCH=N: prefetch each batch of N indices before reading it.
            let batch: usize = std::env::var("PREFETCH").map_or(Ok(1), |n| n.parse())?;
            let order: Vec<usize> = order
                .chunks_exact(4)
                .map(|i| u32::from_le_bytes([i[0], i[1], i[2], i[3]]) as usize)
                .collect();
            for indices in order.chunks(batch.max(1)) {
                if batch > 1 {
                    ds.prefetch(indices.iter().copied());
                }
                for &index in indices {
                    let value = ds.at_with_buffer(index, &mut buffer)?;
                    checksum = checksum.wrapping_add(value.iter().map(|&b| b as u64).sum::<u64>());
                }
            }
            println!(
                "{opened:.6} {:.6} {checksum}",
                start.elapsed().as_secs_f64()
            );
        }
        Some("read-pread") => {
            use std::os::unix::fs::FileExt;
            let order = std::fs::read(&args[3])?;
            let start = Instant::now();
            let ds = Dataset::open(&args[2])?;
            let files: Vec<std::fs::File> = (0..ds.shards())
                .map(|s| std::fs::File::open(ds.shard_data_path(s)))
                .collect::<Result<_, _>>()?;
            let opened = start.elapsed().as_secs_f64();
            let start = Instant::now();
            let (mut stored, mut buffer) = (Vec::new(), Vec::new());
            let mut checksum = 0u64;
            for index in order.chunks_exact(4) {
                let index = u32::from_le_bytes([index[0], index[1], index[2], index[3]]);
                let at = ds.value_location(index as usize)?;
                stored.resize(at.len as usize, 0);
                files[at.shard as usize].read_exact_at(&mut stored, at.offset)?;
                let value = if ds.compression() == Compression::Lz4 {
                    let n =
                        bcd::lz4_block::decompress_into(&stored, &mut buffer).map_err(|e| e.0)?;
                    &buffer[..n]
                } else {
                    &stored[..]
                };
                checksum = checksum.wrapping_add(value.iter().map(|&b| b as u64).sum::<u64>());
            }
            println!(
                "{opened:.6} {:.6} {checksum}",
                start.elapsed().as_secs_f64()
            );
        }
        Some("make-keyed") => {
            let n: usize = args[3].parse()?;
            let value_size: usize = args[4].parse()?;
            let mut ds = Dataset::create(
                &args[2],
                CreateOptions {
                    keyed: true,
                    compression: Compression::None,
                    ..Default::default()
                },
            )?;
            let value = vec![b'v'; value_size];
            ds.extend((0..n).map(|i| (format!("{i:012}").into_bytes(), &value)))?;
        }
        Some("open") => {
            let before = rss_anon_kib();
            let start = Instant::now();
            let ds = Dataset::open(&args[2])?;
            let opened = start.elapsed().as_secs_f64();
            let added = rss_anon_kib() - before;
            if ds.keyed() && !ds.is_empty() {
                let probe = ds.key_at(ds.len() / 2)?;
                if ds.position(probe)? != Some(ds.len() / 2) {
                    return Err("a key lookup found the wrong record".into());
                }
            }
            println!("{opened:.6} {added} {}", ds.uses_index_file());
        }
        _ => return Err("usage: core-bench write|read|make-keyed|open ...".into()),
    }
    Ok(())
}

fn parse_records(input: &[u8]) -> Vec<(&[u8], &[u8])> {
    let mut records = Vec::new();
    let mut rest = input;
    while !rest.is_empty() {
        let key = take_field(&mut rest);
        let value = take_field(&mut rest);
        records.push((key, value));
    }
    records
}

fn take_field<'a>(rest: &mut &'a [u8]) -> &'a [u8] {
    let (len, tail) = rest.split_at(4);
    let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    let (field, tail) = tail.split_at(len);
    *rest = tail;
    field
}

/// RssAnon of this process in KiB: its private, anonymous memory (file-backed
/// mapped pages, shared through the page cache, are not counted).
fn rss_anon_kib() -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("RssAnon:"))
                .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// What a new reader process (a DataLoader worker started for an epoch) pays
/// the first time it reads from each shard: the dataset opened, then one
/// positional read of a record in every shard (the first touch: its `.idx`
/// loaded, the persisted index's starts checked against it, its data file
/// opened), then one of another record of each (what any later read costs).
/// Prints the open, the first touches' and the later reads' milliseconds in
/// all, medians over `rounds` openings (each new, as in a new process: the
/// shards' state lives in the `Dataset`).
fn first_touch(path: &str, rounds: usize) -> Result<(), Box<dyn std::error::Error>> {
    let mut open_ms = Vec::new();
    let mut first_ms = Vec::new();
    let mut later_ms = Vec::new();
    for _ in 0..rounds.max(1) {
        let start = Instant::now();
        let ds = Dataset::open(path)?;
        open_ms.push(start.elapsed().as_secs_f64() * 1e3);
        let ranges: Vec<(u64, u64)> = (0..ds.shards())
            .map(|shard| (ds.shard_first_record(shard), ds.shard_records(shard)))
            .filter(|&(_, records)| records > 0)
            .collect();
        let mut plan = bcd::PositionalBatch::new();
        for (offset, times) in [(0u64, &mut first_ms), (1, &mut later_ms)] {
            let start = Instant::now();
            for &(first, records) in &ranges {
                let index = first + offset.min(records - 1);
                ds.plan_positional(&[index as usize], &mut plan)?;
            }
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "shards {} open_ms {:.3} first_touch_ms {:.3} later_ms {:.3}",
        Dataset::open(path)?.shards(),
        median(&mut open_ms),
        median(&mut first_ms),
        median(&mut later_ms)
    );
    Ok(())
}
