//! Decompressing many values at once, on all cores, without the GIL, straight
//! into the `bytes` objects handed back.
//!
//! DataLoader workers are often forked from a parent that has already read (and
//! so would have started a global thread pool): pool threads do not survive a
//! `fork`, and a pool created before it hangs in the child. So every batch uses
//! its own scoped threads, which exist only while the batch is decoded.

use std::thread;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use bcd::Dataset;

use crate::errors::to_py;

/// Batches with less stored data than this are decoded on the calling thread:
/// starting threads costs more than it saves.
const PARALLEL_MIN_BYTES: u64 = 256 << 10;

/// The destination of one value: a `bytes` object's buffer.
struct Destination {
    /// The value's index (`decompress_many`) or position in its batch
    /// (`read_planned_bytes`).
    index: usize,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: each Destination is the sole handle to the buffer of a bytes object
// this module just created and has not yet given to Python code; the objects are
// kept alive by `decompress_many` until the threads using these have joined, and
// the buffers are disjoint, so sending each to one thread is sound.
unsafe impl Send for Destination {}

/// The values at `indices` (each already checked to be in range), in order, as
/// `bytes`, decompressed on up to `threads` threads with the GIL released.
/// `stored` is their total stored size, which the caller has summed already.
pub fn decompress_many<'py>(
    py: Python<'py>,
    dataset: &Dataset,
    indices: &[usize],
    stored: u64,
    threads: usize,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let threads = threads.clamp(1, indices.len().max(1));
    if threads == 1 || stored < PARALLEL_MIN_BYTES {
        return indices
            .iter()
            .map(|&index| {
                let len = dataset.value_len(index).map_err(to_py)?;
                PyBytes::new_with(py, len, |out| dataset.read_into(index, out).map_err(to_py))
            })
            .collect();
    }

    // Every object is allocated first (that needs the GIL), then filled in
    // parallel without it.
    let mut objects = Vec::with_capacity(indices.len());
    let mut destinations = Vec::with_capacity(indices.len());
    for &index in indices {
        let len = dataset.value_len(index).map_err(to_py)?;
        let object = PyBytes::new_with(py, len, |_| Ok(()))?;
        // SAFETY: PyBytes_AsString returns the object's buffer (`len` bytes,
        // zero-filled by new_with) as a raw pointer, with no Rust reference to it.
        let ptr = unsafe { pyo3::ffi::PyBytes_AsString(object.as_ptr()) }.cast::<u8>();
        if ptr.is_null() {
            return Err(PyErr::fetch(py));
        }
        destinations.push(Destination { index, ptr, len });
        objects.push(object);
    }
    let chunk = destinations.len().div_ceil(threads);
    py.detach(|| {
        thread::scope(|scope| {
            let workers: Vec<_> = destinations
                .chunks_mut(chunk)
                .map(|run| {
                    scope.spawn(move || {
                        for destination in run {
                            // SAFETY: see `Destination`: this thread is the only user
                            // of this buffer, which stays alive (held in `objects`)
                            // until the scope ends, and is `len` initialized bytes.
                            let out = unsafe {
                                std::slice::from_raw_parts_mut(destination.ptr, destination.len)
                            };
                            dataset.read_into(destination.index, out)?;
                        }
                        Ok::<(), bcd::Error>(())
                    })
                })
                .collect();
            workers.into_iter().try_for_each(|worker| {
                // A panic in a worker is a bug; re-raise it here, where PyO3 turns
                // it into an exception rather than aborting.
                worker
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
        })
    })
    .map_err(to_py)?;
    Ok(objects)
}

/// The values at `indices` (each checked to be in range), planned in `plan`
/// ([`Dataset::plan_positional`]), in order, as new `bytes`, each read straight
/// into its object on up to `threads` threads with the GIL released.
pub fn read_planned_bytes<'py>(
    py: Python<'py>,
    dataset: &Dataset,
    indices: &[usize],
    plan: &bcd::PositionalBatch,
    threads: usize,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let lens = plan.lens();
    let total: usize = lens.iter().sum();
    // Every object is allocated first (that needs the GIL), then filled without it.
    let mut objects = Vec::with_capacity(indices.len());
    let mut destinations = Vec::with_capacity(indices.len());
    for (position, &len) in lens.iter().enumerate() {
        let size = pyo3::ffi::Py_ssize_t::try_from(len)
            .map_err(|_| pyo3::exceptions::PyOverflowError::new_err("value too large"))?;
        // SAFETY: PyBytes_FromStringAndSize with a null pointer returns a new
        // bytes object of `len` uninitialised bytes (not zeroed: every byte is
        // written below, before any Python code can see the object), or null
        // with an exception set.
        let object = unsafe {
            Bound::from_owned_ptr_or_err(
                py,
                pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), size),
            )?
            .cast_into_unchecked::<PyBytes>()
        };
        // SAFETY: as in `decompress_many`: the object's buffer, `len` bytes,
        // with no Rust reference to it.
        let ptr = unsafe { pyo3::ffi::PyBytes_AsString(object.as_ptr()) }.cast::<u8>();
        if ptr.is_null() {
            return Err(PyErr::fetch(py));
        }
        destinations.push(Destination {
            index: position,
            ptr,
            len,
        });
        objects.push(object);
    }
    let threads = if (total as u64) < PARALLEL_MIN_BYTES {
        1
    } else {
        threads.clamp(1, indices.len().max(1))
    };
    let chunk = destinations.len().div_ceil(threads).max(1);
    let fill = |run: &mut [Destination]| {
        let mut scratch = Vec::new();
        for destination in run {
            // SAFETY: see `Destination`: this thread is the only user of this
            // buffer, which stays alive (held in `objects`) until the fill ends.
            // Its bytes may be uninitialised: `read_planned` only writes them
            // (a `pread`, a copy, the LZ4 decoder's output), never reads them.
            let out = unsafe { std::slice::from_raw_parts_mut(destination.ptr, destination.len) };
            dataset.read_planned(plan, indices, destination.index, out, &mut scratch)?;
        }
        Ok::<(), bcd::Error>(())
    };
    py.detach(|| {
        if threads == 1 {
            return fill(&mut destinations);
        }
        thread::scope(|scope| {
            let workers: Vec<_> = destinations
                .chunks_mut(chunk)
                .map(|run| {
                    let fill = &fill;
                    scope.spawn(move || fill(run))
                })
                .collect();
            workers.into_iter().try_for_each(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
        })
    })
    .map_err(to_py)?;
    Ok(objects)
}

/// Writes the values at `indices` (each checked to be in range, `lens` their
/// sizes) back to back into `out`, on up to `threads` threads without the GIL:
/// one contiguous batch, for callers that own the destination (a tensor in shared
/// memory a DataLoader worker hands to the main process without pickling).
/// `source` says how each value is read.
pub fn read_contiguous(
    py: Python<'_>,
    dataset: &Dataset,
    indices: &[usize],
    lens: &[usize],
    out: &mut [u8],
    threads: usize,
    source: Source<'_>,
) -> PyResult<()> {
    // Each value's position in the batch and destination, split off `out` in order.
    let mut destinations: Vec<(usize, &mut [u8])> = Vec::with_capacity(indices.len());
    let mut rest = out;
    for (position, &len) in lens.iter().enumerate() {
        let (mine, tail) = rest.split_at_mut(len);
        destinations.push((position, mine));
        rest = tail;
    }
    let total: usize = lens.iter().sum();
    let threads = if (total as u64) < PARALLEL_MIN_BYTES {
        1
    } else {
        threads.clamp(1, indices.len().max(1))
    };
    let read = |position: usize, out: &mut [u8], scratch: &mut Vec<u8>| match source {
        Source::Mapped => dataset.read_into(indices[position], out),
        Source::Positional(batch) => dataset.read_planned(batch, indices, position, out, scratch),
    };
    py.detach(|| {
        if threads == 1 {
            let mut scratch = Vec::new();
            return destinations
                .iter_mut()
                .try_for_each(|(position, out)| read(*position, out, &mut scratch));
        }
        // Runs of about equal bytes, one per thread.
        let per_thread = total.div_ceil(threads);
        let mut runs: Vec<&mut [(usize, &mut [u8])]> = Vec::with_capacity(threads);
        let mut rest = &mut destinations[..];
        while !rest.is_empty() {
            let mut bytes = 0;
            let mut take = 0;
            while take < rest.len() && (take == 0 || bytes < per_thread) {
                bytes += rest[take].1.len();
                take += 1;
            }
            let (run, tail) = rest.split_at_mut(take);
            runs.push(run);
            rest = tail;
        }
        thread::scope(|scope| {
            let workers: Vec<_> = runs
                .into_iter()
                .map(|run| {
                    let read = &read;
                    scope.spawn(move || {
                        let mut scratch = Vec::new();
                        run.iter_mut()
                            .try_for_each(|(position, out)| read(*position, out, &mut scratch))
                    })
                })
                .collect();
            workers.into_iter().try_for_each(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
        })
    })
    .map_err(to_py)
}

/// How [`read_contiguous`] reads each value.
#[derive(Clone, Copy)]
pub enum Source<'a> {
    /// Through the shard's mapping ([`Dataset::read_into`]).
    Mapped,
    /// With positional reads of the shard files, as planned
    /// ([`Dataset::plan_positional`] of the same indices): nothing mapped.
    Positional(&'a bcd::PositionalBatch),
}
