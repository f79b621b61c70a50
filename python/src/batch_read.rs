//! Decompressing many values at once, on all cores, without the GIL.
//!
//! DataLoader workers are often forked from a parent that has already read (and
//! so would have started a global thread pool): pool threads do not survive a
//! `fork`, and a pool created before it hangs in the child. So every batch uses
//! its own scoped threads, which exist only while the batch is decoded.

use std::thread;

use bcd::Dataset;

/// Batches with less stored data than this are decoded on the calling thread:
/// starting threads costs more than it saves.
const PARALLEL_MIN_BYTES: u64 = 256 << 10;

/// The values at `indices` (each already checked to be in range), in order,
/// decompressed on up to `threads` threads.
pub fn decompress_many(
    dataset: &Dataset,
    indices: &[usize],
    threads: usize,
) -> bcd::Result<Vec<Vec<u8>>> {
    let stored: u64 = indices
        .iter()
        .map(|&i| dataset.value_location(i).map(|l| l.len))
        .sum::<bcd::Result<u64>>()?;
    let threads = threads.clamp(1, indices.len().max(1));
    if threads == 1 || stored < PARALLEL_MIN_BYTES {
        return decompress_run(dataset, indices);
    }
    let chunk = indices.len().div_ceil(threads);
    thread::scope(|scope| {
        let workers: Vec<_> = indices
            .chunks(chunk)
            .map(|run| scope.spawn(move || decompress_run(dataset, run)))
            .collect();
        let mut values = Vec::with_capacity(indices.len());
        for worker in workers {
            // A panic in a worker is a bug; re-raise it here, where PyO3 turns it
            // into an exception rather than aborting.
            let run = worker
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
            values.extend(run);
        }
        Ok(values)
    })
}

fn decompress_run(dataset: &Dataset, indices: &[usize]) -> bcd::Result<Vec<Vec<u8>>> {
    indices
        .iter()
        .map(|&i| dataset.at(i).map(|value| value.into_owned()))
        .collect()
}
