//! Reading values out of a `bcd.Dataset`: one (`at`, `[key]`), many
//! (`get_batch`), or many into one buffer (`get_batch_into`), with the index
//! arguments checked as the caller's code may run between them.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyIndexError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyMemoryView, PyTuple};

use bcd::{Compression, Dataset};

use super::PyDataset;
use std::sync::atomic::Ordering;
use std::sync::PoisonError;

use crate::batch_read;
use crate::errors::to_py;
use crate::handle::Handle;

/// `get_batch` reads ahead (by default) batches whose values average at least
/// this many bytes.
const PREFETCH_MIN_AVERAGE: u64 = 16 << 10;

/// Whether a batch of `count` values of `stored` bytes in all is read ahead
/// ([`Dataset::prefetch`]): as `read_ahead` says, or by default when the values
/// are large (a small one's read-ahead costs a system call, and a fault on a
/// page of a dense epoch brings the next values with it).
fn reads_ahead(read_ahead: Option<bool>, stored: u64, count: usize) -> bool {
    read_ahead.unwrap_or_else(|| stored >= PREFETCH_MIN_AVERAGE.saturating_mul(count as u64))
}
/// Compressed values at least this large, decompressed, are decompressed without
/// the GIL.
const DETACH_MIN_BYTES: u64 = 64 << 10;
/// `get_batch` reserves room for at most this many indices up front; more are
/// appended as they come.
const MAX_RESERVED_INDICES: usize = 1 << 16;

/// Whether `index` (negative counts from the end) is in range of `len` records.
fn in_range(index: i64, len: usize) -> bool {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    if index < 0 {
        index >= -len
    } else {
        index < len
    }
}

impl PyDataset {
    /// A signed Python index (any object with `__index__`, which runs here, with no
    /// lock held); ints too large for i64 are out of range of every dataset.
    pub(super) fn index_arg(&self, py: Python<'_>, index: &Bound<'_, PyAny>) -> PyResult<i64> {
        match index.extract::<i64>() {
            Ok(index) => Ok(index),
            Err(error) if error.is_instance_of::<PyOverflowError>(py) => {
                let len = self.handle(py)?.read(py).len();
                Err(PyIndexError::new_err(format!(
                    "index {} out of range for a dataset of {len} records",
                    index.repr()?
                )))
            }
            Err(error) => Err(error),
        }
    }

    /// The indices `indices` yields, each checked to be in range, collected with
    /// no lock held: the iterable and `__index__` are the caller's code, which may
    /// read or extend this dataset, or wait for a thread that does. Only a list's
    /// or tuple's length sizes a first reservation: `__len__` may lie.
    pub(super) fn collect_indices(
        &self,
        py: Python<'_>,
        indices: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<i64>> {
        let hint = if let Ok(list) = indices.cast::<PyList>() {
            list.len()
        } else if let Ok(tuple) = indices.cast::<PyTuple>() {
            tuple.len()
        } else {
            0
        };
        let iterator = indices.try_iter()?;
        let mut wanted = Vec::with_capacity(hint.min(MAX_RESERVED_INDICES));
        let mut len = self.handle(py)?.read(py).len();
        for index in iterator {
            let index = self.index_arg(py, &index?)?;
            if !in_range(index, len) {
                // The dataset may have grown since (the iterable may extend it).
                let handle = self.handle(py)?;
                let checked = {
                    let dataset = handle.read(py);
                    len = dataset.len();
                    dataset.resolve_index(index).map(drop)
                };
                checked.map_err(to_py)?;
            }
            wanted.push(index);
        }
        Ok(wanted)
    }

    /// The value at `index` (in range): a zero-copy view of the mapping when the
    /// shard holds it verbatim (uncompressed, or an LZ4 literal-only block), a
    /// view of a new `bytes` otherwise.
    pub(super) fn value_at<'py>(
        &self,
        py: Python<'py>,
        handle: &Handle,
        dataset: &Dataset,
        index: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(location) = dataset.verbatim_location(index).map_err(to_py)? {
            check_verbatim(dataset, &[index])?;
            return handle.views.slice(py, dataset, location);
        }
        // Decompressed straight into the new bytes object, which nothing else can
        // see yet, so large ones are written without the GIL.
        let len = dataset.value_len(index).map_err(to_py)?;
        let bytes = PyBytes::new_with(py, len, |out| {
            if len as u64 >= DETACH_MIN_BYTES {
                py.detach(|| dataset.read_into(index, out))
            } else {
                dataset.read_into(index, out)
            }
            .map_err(to_py)
        })?;
        read_only_view(&bytes)
    }

    /// `get_batch`.
    pub(super) fn read_batch<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
        read_ahead: Option<bool>,
    ) -> PyResult<Bound<'py, PyList>> {
        let wanted = self.collect_indices(py, indices)?;
        let handle = self.handle(py)?;
        let dataset = handle.read(py);
        // Negative indices count from the end as it is now.
        let resolved = resolve_all(&dataset, &wanted)?;
        // Large values may not be in memory: ask for all of them at once, so the
        // disk sees the whole batch rather than one page fault at a time.
        // Each value located once: for the stored size here and, uncompressed, for
        // its view below (LZ4 values stored verbatim are located again, within
        // their block, once the prefetch is under way).
        let locations = resolved
            .iter()
            .map(|&index| dataset.value_location(index))
            .collect::<Result<Vec<_>, _>>()
            .map_err(to_py)?;
        let stored = locations
            .iter()
            .fold(0u64, |sum, location| sum.saturating_add(location.len));
        if reads_ahead(read_ahead, stored, resolved.len()) {
            dataset.prefetch(resolved.iter().copied());
        }
        match dataset.compression() {
            Compression::None => {
                check_verbatim(&dataset, &resolved)?;
                PyList::new(py, handle.views.slices(py, &dataset, &locations)?)
            }
            Compression::Lz4 => {
                // Values stored as literal-only blocks are views of the shard;
                // the others are decompressed in parallel.
                let verbatim = resolved
                    .iter()
                    .map(|&index| dataset.verbatim_location(index))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(to_py)?;
                let (mut compressed, mut compressed_stored) = (Vec::new(), 0u64);
                for ((&index, location), verbatim) in resolved.iter().zip(&locations).zip(&verbatim)
                {
                    if verbatim.is_none() {
                        compressed.push(index);
                        compressed_stored = compressed_stored.saturating_add(location.len);
                    }
                }
                let in_place: Vec<_> = verbatim.iter().flatten().copied().collect();
                let in_place_indices: Vec<usize> = resolved
                    .iter()
                    .zip(&verbatim)
                    .filter(|(_, verbatim)| verbatim.is_some())
                    .map(|(&index, _)| index)
                    .collect();
                check_verbatim(&dataset, &in_place_indices)?;
                let mut views = handle.views.slices(py, &dataset, &in_place)?.into_iter();
                let mut decoded = batch_read::decompress_many(
                    py,
                    &dataset,
                    &compressed,
                    compressed_stored,
                    self.threads.load(Ordering::Relaxed),
                )?
                .into_iter();
                let values = verbatim
                    .iter()
                    .map(|verbatim| match verbatim {
                        Some(_) => Ok(views.next().expect("one view per verbatim value")),
                        None => read_only_view(&decoded.next().expect("one per compressed value")),
                    })
                    .collect::<PyResult<Vec<_>>>()?;
                PyList::new(py, values)
            }
        }
    }

    /// `get_batch(positional=True)`: the values as new `bytes`, read as a
    /// planned positional batch (see `read_batch_into`).
    pub(super) fn read_batch_positional<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let wanted = self.collect_indices(py, indices)?;
        let mut plan = {
            let mut kept = self
                .positional
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            std::mem::take(&mut *kept)
        };
        let handle = self.handle(py)?;
        let dataset = handle.read(py);
        let resolved = resolve_all(&dataset, &wanted)?;
        let planned = {
            let dataset: &Dataset = &dataset;
            py.detach(|| dataset.plan_positional(&resolved, &mut plan))
        };
        let values = planned.map_err(to_py).and_then(|()| {
            batch_read::read_planned_bytes(
                py,
                &dataset,
                &resolved,
                &plan,
                self.threads.load(Ordering::Relaxed),
            )
        });
        plan.trim();
        *self
            .positional
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = plan;
        PyList::new(py, values?)
    }

    /// `get_batch_into`.
    pub(super) fn read_batch_into<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
        allocate: &Bound<'py, PyAny>,
        read_ahead: Option<bool>,
        positional: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let wanted = self.collect_indices(py, indices)?;
        // `read_ahead=True` says the values are scattered sparsely (a small
        // view's): their pages are asked for at once, then (unless told
        // otherwise by `positional`) the batch is read with positional reads of
        // its shard files, which map nothing into this process
        // (`bcd::Dataset::plan_positional`). A compressed value's length is in
        // its stored bytes, so the plan reads the small values (in runs of
        // neighbours) and the large ones' headers before the buffer is sized.
        let unmapped = positional.unwrap_or(read_ahead == Some(true));
        // Taken out for this batch and put back after it (a concurrent batch of
        // this object plans into a new one).
        let mut plan = if unmapped {
            let mut kept = self
                .positional
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            Some(std::mem::take(&mut *kept))
        } else {
            None
        };
        let (resolved, lens) = {
            let handle = self.handle(py)?;
            let dataset = handle.read(py);
            let resolved = resolve_all(&dataset, &wanted)?;
            let lens = match &mut plan {
                Some(plan) => {
                    // Positional reads may wait for the disk: without the GIL.
                    // Read ahead, the batch's pages are asked for at once
                    // unless they are found cached.
                    let dataset: &Dataset = &dataset;
                    py.detach(|| match read_ahead {
                        Some(true) => dataset.plan_positional_ahead(&resolved, plan),
                        _ => dataset.plan_positional(&resolved, plan),
                    })
                    .map_err(to_py)?;
                    plan.lens().to_vec()
                }
                None => resolved
                    .iter()
                    .map(|&index| dataset.value_len(index))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(to_py)?,
            };
            (resolved, lens)
        };
        let total: usize = lens.iter().sum();
        let offsets = py
            .import("numpy")?
            .call_method1("empty", (resolved.len() + 1, "int64"))?;
        {
            let offsets_buffer = PyBuffer::<i64>::get(&offsets)?;
            if let Some(mut slots) = offsets_buffer.as_slice_ptr() {
                // SAFETY: `offsets` was just made by numpy.empty and no Python code
                // has seen it; the buffer keeps it alive here.
                let slots = unsafe { slots.as_mut() };
                let mut at = 0i64;
                slots[0] = 0;
                for (slot, &len) in slots[1..].iter_mut().zip(&lens) {
                    at += len as i64;
                    *slot = at;
                }
            }
        }
        // The caller's code runs with no lock held.
        let destination = allocate.call1((total,))?;
        let buffer = PyBuffer::<u8>::get(&destination).map_err(|_| {
            PyTypeError::new_err("allocate() must return a writable, C-contiguous buffer of bytes")
        })?;
        let data = match buffer.as_slice_ptr() {
            Some(data) if !buffer.readonly() && data.len() >= total => data,
            _ => {
                return Err(PyValueError::new_err(format!(
                    "allocate({total}) must return a writable, C-contiguous buffer of at least {total} bytes"
                )))
            }
        };
        // SAFETY: the exporter keeps the memory alive and in place while `buffer`
        // is held; the documented contract is that nothing else uses it during
        // the call.
        let out = unsafe { &mut *data.as_ptr() };
        let handle = self.handle(py)?;
        let dataset = handle.read(py);
        let source = match &plan {
            Some(plan) => batch_read::Source::Positional(plan),
            None => {
                if reads_ahead(read_ahead, total as u64, resolved.len()) {
                    dataset.prefetch(resolved.iter().copied());
                }
                batch_read::Source::Mapped
            }
        };
        let read = batch_read::read_contiguous(
            py,
            &dataset,
            &resolved,
            &lens,
            &mut out[..total],
            self.threads.load(Ordering::Relaxed),
            source,
        );
        if let Some(mut plan) = plan {
            plan.trim();
            *self
                .positional
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = plan;
        }
        read?;
        Ok(offsets)
    }
}

impl PyDataset {
    /// `get_images_into` and `get_audio_into`: the records at `indices`
    /// decoded by `decode` into the caller's buffer, which `take` gets (for
    /// that many records) before the lock, as `crate::decode::from_dataset`
    /// reads them.
    pub(super) fn decode_records_into<'py, B, R>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
        positional: bool,
        take: impl FnOnce(usize) -> PyResult<B>,
        decode: impl FnOnce(&crate::decode::Values<'_>, B) -> PyResult<R>,
    ) -> PyResult<R> {
        let wanted = self.collect_indices(py, indices)?;
        // The caller's buffer is taken before the lock (its exporter is code).
        let buffer = take(wanted.len())?;
        let handle = self.handle(py)?;
        let dataset = handle.read(py);
        let resolved = resolve_all(&dataset, &wanted)?;
        dataset.prefetch(resolved.iter().copied());
        let threads = self.threads.load(Ordering::Relaxed);
        crate::decode::from_dataset(&dataset, &resolved, threads, positional, |values| {
            decode(values, buffer)
        })
    }
}

/// The records at `indices` (negative ones counting from the end as it is now),
/// every one checked to be in range.
pub(super) fn resolve_all(dataset: &Dataset, indices: &[i64]) -> PyResult<Vec<usize>> {
    indices
        .iter()
        .map(|&index| dataset.resolve_index(index))
        .collect::<Result<Vec<_>, _>>()
        .map_err(to_py)
}

/// With `verify=True`, checks the values at `indices`, which the shards hold
/// verbatim (uncompressed, or LZ4 literal-only blocks), against their content
/// hashes before views of them are handed out: `Dataset::at` borrows such a
/// value and checks it. The decompressed paths decode through
/// `Dataset::read_into`, which checks.
fn check_verbatim(dataset: &Dataset, indices: &[usize]) -> PyResult<()> {
    if !dataset.verifies_content() {
        return Ok(());
    }
    for &index in indices {
        dataset.at(index).map(drop).map_err(to_py)?;
    }
    Ok(())
}

/// `memoryview(bytes)`: read-only, as the values of the reference.
pub(super) fn read_only_view<'py>(bytes: &Bound<'py, PyBytes>) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyMemoryView::from(bytes)?.into_any())
}
