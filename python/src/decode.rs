//! What the batch decodes of images (`images.rs`) and of audio clips
//! (`audio.rs`) share: where the values come from (buffers given from Python,
//! or a dataset's records read by the decoding threads) and how a failure
//! names one, the crop keys, and the caller's output buffer, taken before any
//! lock and filled without the GIL.

use pyo3::buffer::{Element, PyBuffer};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use bcd::Dataset;
use bcd_images::{CropKey, ValueFn};

/// The values of one batch decode.
pub struct Values<'a> {
    /// How many.
    pub count: usize,
    /// Value `i`, handed to its decoder (`bcd_images::ValueFn`).
    pub value: &'a ValueFn<'a, String>,
    /// The record each value's random crop is keyed by.
    pub records: &'a [u64],
    /// How a failure names value `i`.
    pub name: &'a dyn Fn(usize) -> String,
    /// Threads to decode on.
    pub threads: usize,
}

impl Values<'_> {
    /// Each value's crop key under `seed` and `epoch`.
    pub fn keys(&self, seed: u64, epoch: u64) -> Vec<CropKey> {
        self.records
            .iter()
            .map(|&record| CropKey {
                seed,
                epoch,
                record,
            })
            .collect()
    }

    /// The failure of value `i`, `why`, as the caller gets it: `(i, "NAME: why")`.
    pub fn failure(&self, i: usize, why: String) -> (usize, String) {
        (i, format!("{}: {why}", (self.name)(i)))
    }
}

/// Decodes `values` (buffers given from Python), value `i` keyed by
/// `records[i]` (`0..len(values)` by default), on `threads` threads (every
/// core by default).
pub fn from_python<R>(
    values: &[PyBuffer<u8>],
    records: Option<Vec<u64>>,
    threads: Option<usize>,
    decode: impl FnOnce(&Values<'_>) -> PyResult<R>,
) -> PyResult<R> {
    let records = checked_records(records, values.len())?;
    let slices = value_slices(values)?;
    let value = |i: usize, _: &mut Vec<u8>, with: &mut dyn FnMut(&[u8])| {
        with(slices[i]);
        Ok::<_, String>(())
    };
    let name = |i: usize| format!("values[{i}] (record {})", records[i]);
    decode(&Values {
        count: values.len(),
        value: &value,
        records: &records,
        name: &name,
        threads: threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
    })
}

/// Decodes the records at `indices` (in range) of `dataset`, each keyed by
/// its index and read by the thread that decodes it: through the mapping (LZ4
/// values stored verbatim are not copied), or with `positional` by a
/// positional read of the shard's file into the thread's scratch space
/// (nothing mapped: a DataLoader worker's memory does not grow with the
/// shards it reads). A failure names the dataset, the record and its key.
pub fn from_dataset<R>(
    dataset: &Dataset,
    indices: &[usize],
    threads: usize,
    positional: bool,
    decode: impl FnOnce(&Values<'_>) -> PyResult<R>,
) -> PyResult<R> {
    let records: Vec<u64> = indices.iter().map(|&i| i as u64).collect();
    let value = |i: usize, stored: &mut Vec<u8>, with: &mut dyn FnMut(&[u8])| {
        let read = if positional {
            dataset.at_unmapped(indices[i], stored)
        } else {
            dataset.at(indices[i])
        };
        with(&read.map_err(|e| crate::errors::message(&e))?);
        Ok::<_, String>(())
    };
    let path = dataset.path().display().to_string();
    let name = |i: usize| record_name(dataset, &path, indices[i]);
    decode(&Values {
        count: indices.len(),
        value: &value,
        records: &records,
        name: &name,
        threads,
    })
}

/// `PATH: record N (key K)`, how a failure names a dataset's record.
fn record_name(dataset: &Dataset, path: &str, index: usize) -> String {
    match dataset
        .keyed()
        .then(|| dataset.key_at(index).ok())
        .flatten()
    {
        Some(key) => format!(
            "{path}: record {index} (key {:?})",
            String::from_utf8_lossy(key)
        ),
        None => format!("{path}: record {index}"),
    }
}

/// The records values are keyed by: `records`, one per value, or `0..count`.
fn checked_records(records: Option<Vec<u64>>, count: usize) -> PyResult<Vec<u64>> {
    let records = records.unwrap_or_else(|| (0..count as u64).collect());
    if records.len() != count {
        return Err(PyValueError::new_err(format!(
            "records: {} for {count} values: expected one per value",
            records.len()
        )));
    }
    Ok(records)
}

/// The bytes of each buffer of `values` (held by the caller while the slices
/// are used), each checked to be contiguous.
fn value_slices(values: &[PyBuffer<u8>]) -> PyResult<Vec<&[u8]>> {
    let mut slices = Vec::with_capacity(values.len());
    for (i, value) in values.iter().enumerate() {
        if !value.is_c_contiguous() {
            return Err(PyValueError::new_err(format!(
                "values[{i}]: expected a C-contiguous buffer"
            )));
        }
        // SAFETY: each buffer is held by the caller (in `values`, borrowed for
        // the slices' lifetime), contiguous, and only read.
        slices.push(unsafe {
            std::slice::from_raw_parts(value.buf_ptr().cast::<u8>(), value.len_bytes())
        });
    }
    Ok(slices)
}

/// The writable, C-contiguous buffer `out` of `T` items (`kind` says which,
/// for the errors: "bytes (a uint8 array or tensor)"), at least `len` of them.
/// Taken before any lock: an exporter is the caller's code.
pub fn output<T: Element>(out: &Bound<'_, PyAny>, len: usize, kind: &str) -> PyResult<PyBuffer<T>> {
    let buffer = PyBuffer::<T>::get(out).map_err(|_| {
        PyTypeError::new_err(format!(
            "out: expected a writable, C-contiguous buffer of {kind}"
        ))
    })?;
    if buffer.readonly() || !buffer.is_c_contiguous() || buffer.item_count() < len {
        return Err(PyValueError::new_err(format!(
            "out: expected a writable, C-contiguous buffer of {kind}, at least {len} items; got {}{}",
            buffer.item_count(),
            if buffer.readonly() { ", read-only" } else { "" }
        )));
    }
    Ok(buffer)
}

/// Runs `fill` on the first `len` items of `buffer` (from [`output`]) without
/// the GIL, then lets the buffer go.
pub fn fill_detached<T: Element + Send, R: Send>(
    py: Python<'_>,
    buffer: PyBuffer<T>,
    len: usize,
    fill: impl FnOnce(&mut [T]) -> R + Send,
) -> PyResult<R> {
    if buffer.item_count() < len {
        return Err(PyValueError::new_err(format!(
            "out: {} items for {len}",
            buffer.item_count()
        )));
    }
    // SAFETY: the exporter keeps the memory alive and in place while `buffer`
    // is held (to the end of this function); it is writable and C-contiguous
    // (checked by `output`), of `T` items (checked by `PyBuffer::<T>::get`,
    // which also checks their alignment), at least `len` of them (checked
    // above), and the documented contract is that nothing else uses it during
    // the call.
    let data = unsafe { std::slice::from_raw_parts_mut(buffer.buf_ptr().cast::<T>(), len) };
    let outcome = py.detach(|| fill(data));
    drop(buffer);
    Ok(outcome)
}
