//! `Dataset.prefetch`: the shards an epoch's indices need, handed in the order
//! they first need them to the shard cache of a dataset in object storage.

use pyo3::buffer::{Element, PyBuffer};
use pyo3::prelude::*;

use bcd::Dataset;

use super::reads::resolve_all;
use super::PyDataset;
use crate::errors::{remote_to_py, to_py};

impl PyDataset {
    /// `prefetch`.
    pub(super) fn prefetch_indices(
        &self,
        py: Python<'_>,
        indices: &Bound<'_, PyAny>,
        wait: bool,
    ) -> PyResult<usize> {
        let Some(remote) = &self.remote else {
            // Every file is at hand: nothing to fetch.
            return Ok(0);
        };
        let order = match buffer_order(py, self, indices)? {
            Some(order) => order,
            None => {
                // Any iterable of ints, converted with no lock held.
                let wanted = self.collect_indices(py, indices)?;
                let handle = self.handle(py)?;
                let dataset = handle.read(py);
                let resolved = resolve_all(&dataset, &wanted)?;
                dataset.shard_order(resolved).map_err(to_py)?
            }
        };
        // The dataset's own cache (its source of data files), without holding
        // the dataset while waiting.
        let cache = remote.cache();
        py.detach(|| cache.prefetch(&order, wait))
            .map_err(remote_to_py)
    }
}

/// A buffer of integers: a NumPy array from a sampler.
enum Indices {
    I64(PyBuffer<i64>),
    U32(PyBuffer<u32>),
    U64(PyBuffer<u64>),
    I32(PyBuffer<i32>),
}

/// The shard order of `indices` when it is a buffer of integers, read in place
/// (an epoch of 10^8 entries makes no Python ints); `None` for anything else.
fn buffer_order(
    py: Python<'_>,
    dataset: &PyDataset,
    indices: &Bound<'_, PyAny>,
) -> PyResult<Option<Vec<u64>>> {
    fn order<T: Element + Copy + TryInto<i64>>(
        dataset: &Dataset,
        buffer: &PyBuffer<T>,
    ) -> PyResult<Option<Vec<u64>>> {
        let Some(data) = buffer.as_slice_ptr() else {
            return Ok(None);
        };
        // SAFETY: the exporter keeps the memory alive and in place while
        // `buffer` is held (a NumPy array cannot be resized while exported);
        // the documented contract is that nothing writes to it during the call.
        // An index changed anyway is checked again below: at worst an error.
        let values: &[T] = unsafe { data.as_ref() };
        let len = dataset.len();
        let resolve = |value: T| -> Result<usize, bcd::Error> {
            // Values past i64 are out of range of every dataset.
            dataset.resolve_index(value.try_into().unwrap_or(i64::MAX))
        };
        // Checked first, so that the error names the index as given.
        for &value in values {
            resolve(value).map_err(to_py)?;
        }
        let resolved = values.iter().map(|&value| resolve(value).unwrap_or(len));
        dataset.shard_order(resolved).map(Some).map_err(to_py)
    }
    // The buffer is taken (the exporter's code runs) before the dataset is.
    let buffer = if let Ok(buffer) = PyBuffer::<i64>::get(indices) {
        Indices::I64(buffer)
    } else if let Ok(buffer) = PyBuffer::<u32>::get(indices) {
        Indices::U32(buffer)
    } else if let Ok(buffer) = PyBuffer::<u64>::get(indices) {
        Indices::U64(buffer)
    } else if let Ok(buffer) = PyBuffer::<i32>::get(indices) {
        Indices::I32(buffer)
    } else {
        return Ok(None);
    };
    let handle = dataset.handle(py)?;
    let dataset = handle.read(py);
    match &buffer {
        Indices::I64(buffer) => order(&dataset, buffer),
        Indices::U32(buffer) => order(&dataset, buffer),
        Indices::U64(buffer) => order(&dataset, buffer),
        Indices::I32(buffer) => order(&dataset, buffer),
    }
}
