//! Zero-copy values of uncompressed datasets: each shard's data file mapped with
//! Python's own `mmap` module (lazily, on first read), values handed out as
//! slices of a read-only `memoryview` of it.
//!
//! A slice keeps its mmap alive, so a value stays valid for as long as anyone
//! holds it, even after the `Dataset` is gone, and Python code (NumPy's
//! `frombuffer`, PyTorch's `frombuffer`) can use it without copying. No Rust
//! `unsafe` is involved: Python owns the mapping. As with any mapping (and the
//! reference), truncating a committed shard file under a reader makes reads of the
//! lost pages fail with SIGBUS; committed shard files never change.

use std::path::Path;
use std::sync::{Mutex, PoisonError};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyMemoryView, PySlice};

use bcd::{Dataset, ValueLocation};

/// A shard's data file mapped: a read-only memoryview of all of it, and its length.
type Mapped = (Py<PyMemoryView>, u64);

/// The mapped shards of one dataset handle.
#[derive(Default)]
pub struct ShardViews {
    /// Per shard number, once mapped. Never locked across a call into Python.
    mapped: Mutex<Vec<Option<Mapped>>>,
}

impl ShardViews {
    /// The stored bytes at `location` as a read-only memoryview into the mapping.
    pub fn slice<'py>(
        &self,
        py: Python<'py>,
        dataset: &Dataset,
        location: ValueLocation,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (view, mapped_len) = self.shard(py, dataset, location.shard)?;
        let end = location.offset.checked_add(location.len);
        if end.is_none_or(|end| end > mapped_len) {
            return Err(PyValueError::new_err(format!(
                "{}: the data file is {mapped_len} bytes but its index puts a value at bytes {}..{}; it changed on disk after the dataset was opened",
                dataset.shard_data_path(location.shard).display(),
                location.offset,
                location.offset.saturating_add(location.len),
            )));
        }
        // Both bounds are at most the mapping's length, which fits in isize.
        let (start, end) = (
            location.offset as isize,
            (location.offset + location.len) as isize,
        );
        view.get_item(PySlice::new(py, start, end, 1))
    }

    /// The memoryview of shard `shard`'s data file, mapping it on first use.
    fn shard<'py>(
        &self,
        py: Python<'py>,
        dataset: &Dataset,
        shard: u64,
    ) -> PyResult<(Bound<'py, PyMemoryView>, u64)> {
        let slot = usize::try_from(shard).unwrap_or(usize::MAX);
        if let Some(Some((view, len))) = self.lock().get(slot) {
            return Ok((view.bind(py).clone(), *len));
        }
        // Mapped without the lock held: mapping calls into Python, which may run
        // other threads' reads of this dataset.
        let (view, len) = map_read_only(py, &dataset.shard_data_path(shard))?;
        let mut mapped = self.lock();
        if mapped.len() <= slot {
            mapped.resize_with(slot + 1, || None);
        }
        // Another thread may have mapped it meanwhile: keep the first mapping.
        let (view, len) = mapped[slot].get_or_insert_with(|| (view.unbind(), len));
        Ok((view.bind(py).clone(), *len))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Option<Mapped>>> {
        self.mapped.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `memoryview(mmap.mmap(fd, 0, access=mmap.ACCESS_READ))` of the file at
/// `path`, and its length; an empty file (which cannot be mapped) gives
/// `memoryview(b"")`.
fn map_read_only<'py>(py: Python<'py>, path: &Path) -> PyResult<(Bound<'py, PyMemoryView>, u64)> {
    let builtins = py.import("builtins")?;
    let file = builtins.getattr("open")?.call1((path, "rb"))?;
    let mapped = (|| {
        let fileno = file.call_method0("fileno")?;
        let size = py
            .import("os")?
            .call_method1("fstat", (&fileno,))?
            .getattr("st_size")?;
        let size: u64 = size.extract()?;
        if size == 0 {
            return Ok((PyMemoryView::from(&PyBytes::new(py, b""))?, 0));
        }
        let mmap = py.import("mmap")?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("access", mmap.getattr("ACCESS_READ")?)?;
        // mmap duplicates the descriptor, so the file can be closed right away.
        let map = mmap.getattr("mmap")?.call((fileno, 0), Some(&kwargs))?;
        let len: u64 = map.len()? as u64;
        Ok((PyMemoryView::from(&map)?, len))
    })();
    file.call_method0("close")?;
    mapped
}
