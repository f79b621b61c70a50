//! Reading values out of a `bcd.Dataset`: one (`at`, `[key]`), many
//! (`get_batch`), or many into one buffer (`get_batch_into`), with the index
//! arguments checked as the caller's code may run between them.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyIndexError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyMemoryView, PyTuple};

use bcd::{Compression, Dataset};

use super::PyDataset;
use crate::batch_read;
use crate::errors::to_py;
use crate::handle::Handle;

/// `get_batch` prefetches batches whose values average at least this many bytes.
const PREFETCH_MIN_AVERAGE: u64 = 16 << 10;
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
    fn collect_indices(&self, py: Python<'_>, indices: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
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

    /// The value at `index` (in range): a zero-copy view of the mapping when
    /// uncompressed, a view of a new `bytes` otherwise.
    pub(super) fn value_at<'py>(
        &self,
        py: Python<'py>,
        handle: &Handle,
        dataset: &Dataset,
        index: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        match dataset.compression() {
            Compression::None => {
                let location = dataset.value_location(index).map_err(to_py)?;
                check_stored(dataset, &[index])?;
                handle.views.slice(py, dataset, location)
            }
            Compression::Lz4 => {
                // Decompressed straight into the new bytes object, which nothing
                // else can see yet, so large ones are written without the GIL.
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
        }
    }

    /// `get_batch`.
    pub(super) fn read_batch<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let wanted = self.collect_indices(py, indices)?;
        let handle = self.handle(py)?;
        let dataset = handle.read(py);
        // Negative indices count from the end as it is now.
        let resolved = wanted
            .iter()
            .map(|&index| dataset.resolve_index(index))
            .collect::<Result<Vec<_>, _>>()
            .map_err(to_py)?;
        // Large values may not be in memory: ask for all of them at once, so the
        // disk sees the whole batch rather than one page fault at a time.
        // Each value located once: for the stored size here and, uncompressed, for
        // its view below.
        let locations = resolved
            .iter()
            .map(|&index| dataset.value_location(index))
            .collect::<Result<Vec<_>, _>>()
            .map_err(to_py)?;
        let stored = locations
            .iter()
            .fold(0u64, |sum, location| sum.saturating_add(location.len));
        if stored >= PREFETCH_MIN_AVERAGE.saturating_mul(resolved.len() as u64) {
            dataset.prefetch(resolved.iter().copied());
        }
        match dataset.compression() {
            Compression::None => {
                check_stored(&dataset, &resolved)?;
                PyList::new(py, handle.views.slices(py, &dataset, &locations)?)
            }
            Compression::Lz4 => {
                let values =
                    batch_read::decompress_many(py, &dataset, &resolved, stored, self.threads)?;
                let views = values
                    .iter()
                    .map(read_only_view)
                    .collect::<PyResult<Vec<_>>>()?;
                PyList::new(py, views)
            }
        }
    }

    /// `get_batch_into`.
    pub(super) fn read_batch_into<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
        allocate: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let wanted = self.collect_indices(py, indices)?;
        let (resolved, lens) = {
            let handle = self.handle(py)?;
            let dataset = handle.read(py);
            let resolved = wanted
                .iter()
                .map(|&index| dataset.resolve_index(index))
                .collect::<Result<Vec<_>, _>>()
                .map_err(to_py)?;
            let lens = resolved
                .iter()
                .map(|&index| dataset.value_len(index))
                .collect::<Result<Vec<_>, _>>()
                .map_err(to_py)?;
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
        let stored: u64 = lens.iter().map(|&len| len as u64).sum();
        if stored >= PREFETCH_MIN_AVERAGE.saturating_mul(resolved.len() as u64) {
            dataset.prefetch(resolved.iter().copied());
        }
        batch_read::read_contiguous(
            py,
            &dataset,
            &resolved,
            &lens,
            &mut out[..total],
            self.threads,
        )?;
        Ok(offsets)
    }
}

/// `memoryview(bytes)`: read-only, as the values of the reference.
/// With `verify=True`, checks the (uncompressed) values at `indices` against
/// their content hashes before views of them are handed out; the compressed
/// paths decode through `Dataset::read_into`, which checks.
fn check_stored(dataset: &Dataset, indices: &[usize]) -> PyResult<()> {
    if !dataset.verifies_content() {
        return Ok(());
    }
    for &index in indices {
        let stored = dataset.stored_at(index).map_err(to_py)?;
        dataset.check_content(index, stored).map_err(to_py)?;
    }
    Ok(())
}

pub(super) fn read_only_view<'py>(bytes: &Bound<'py, PyBytes>) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyMemoryView::from(bytes)?.into_any())
}
