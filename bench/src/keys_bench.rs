//! The Rust side of bench/keys_bench.py: a keyed extend of N records made here
//! (12-byte keys in no particular order, 8-byte values, stored uncompressed),
//! as one extend through the store's batched path, the one `bcd ingest` takes.
//! Prints one JSON object: records, seconds (the extend and its commit,
//! index file included), records/s, and the most bytes the spill directory
//! held (sampled every 50 ms).
//!
//!     keys-bench extend DATASET N [MEMORY_LIMIT_BYTES]
//!
//! Built against today's main too (the driver removes the memory limit line
//! there, which main lacks), so both run the same code.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bcd::{Compression, CreateOptions, Dataset};

/// The key of record `i`: 12 hex digits of a bijective mix of `i` on 48 bits
/// (xor-shifts and multiplications by odd numbers modulo 2^48, each invertible),
/// so keys are distinct below 2^48 records and arrive in no order.
fn key(i: u64) -> [u8; 12] {
    const MASK: u64 = (1 << 48) - 1;
    let mut x = i & MASK;
    x ^= x >> 24;
    x = x.wrapping_mul(0x9E37_79B9_7F4B) & MASK;
    x ^= x >> 23;
    x = x.wrapping_mul(0xBF58_476D_1CE5) & MASK;
    x ^= x >> 24;
    let mut out = [0u8; 12];
    let digits = b"0123456789abcdef";
    for (at, byte) in out.iter_mut().enumerate() {
        *byte = digits[((x >> (4 * at)) & 15) as usize];
    }
    out
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) != Some("extend") || args.len() < 4 {
        return Err("usage: keys-bench extend DATASET N [MEMORY_LIMIT_BYTES]".into());
    }
    let path = PathBuf::from(&args[2]);
    let n: u64 = args[3].parse()?;
    if n > 1 << 48 {
        return Err("at most 2^48 records: the keys are 48 bits".into());
    }
    let limit: Option<u64> = args.get(4).map(|l| l.parse()).transpose()?;
    let mut dataset = Dataset::create(
        &path,
        CreateOptions {
            keyed: true,
            compression: Compression::None,
            ..Default::default()
        },
    )?;
    let _ = limit;
    dataset.set_memory_limit(limit); // MEMORY_LIMIT_LINE

    // The spill directory's size, sampled while the extend runs.
    let done = Arc::new(AtomicBool::new(false));
    let most = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (done, most) = (done.clone(), most.clone());
        let spill = path.join(".bcd-spill");
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                most.fetch_max(dir_bytes(&spill), Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        })
    };
    let value = *b"valueXYZ";
    let started = Instant::now();
    dataset.extend((0..n).map(|i| (key(i), value)))?;
    let seconds = started.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    sampler.join().map_err(|_| "the sampler panicked")?;
    if dataset.len() as u64 != n {
        return Err(format!("{} records after the extend, not {n}", dataset.len()).into());
    }
    // A lookup through whatever index the commit left.
    let probe = key(n / 2);
    if dataset.position(&probe)? != Some((n / 2) as usize) {
        return Err("a key lookup found the wrong record".into());
    }
    println!(
        "{{\"records\": {n}, \"seconds\": {seconds:.3}, \"records_per_s\": {:.0}, \"spill_bytes_max\": {}, \"index_file\": {}}}",
        n as f64 / seconds,
        most.load(Ordering::Relaxed),
        dataset.uses_index_file()
    );
    Ok(())
}
