//! Zero-copy values of uncompressed datasets: read-only memoryviews of the shard
//! bytes the core loaded (mapped, or read into memory when small).
//!
//! Each value is a `memoryview` of a small exporter object that holds the
//! shard's bytes ([`bcd::ShardData`], reference-counted in Rust). The view keeps
//! its exporter alive and the exporter keeps the bytes alive, so a value stays
//! valid for as long as anyone holds it, even after the `Dataset` is gone, and
//! Python code (NumPy's `frombuffer`, PyTorch's `frombuffer`) can use it without
//! copying. The core maps each shard once and closes its descriptor, so a
//! handle reading thousands of shards holds no descriptor for them. In a batch
//! ([`ShardViews::slices`]), the values of a shard read several times are slices
//! of one view of the whole shard, which share its exporter.
//!
//! There is no state here and so no lock: nothing can be held while Python code
//! runs (an object's allocation or release may run a garbage collection, and
//! with it any finalizer, which may release the GIL).
//!
//! As with any mapping (and the reference), truncating a committed shard file
//! under a reader makes reads of the lost pages fail with SIGBUS; committed shard
//! files never change.

use std::ffi::{c_int, c_void};

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyMemoryView;

use bcd::{Dataset, ShardData, ValueLocation, ViewIndices};

use crate::errors::to_py;

/// Hands out the values of uncompressed datasets as views of the shards.
#[derive(Default)]
pub struct ShardViews;

impl ShardViews {
    /// The stored bytes at `location` as a read-only memoryview into the shard.
    pub fn slice<'py>(
        &self,
        py: Python<'py>,
        dataset: &Dataset,
        location: ValueLocation,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.locate(dataset, location)?.into_view(py)
    }

    /// The values at `locations`, as [`ShardViews::slice`] would give them one by
    /// one, made for a batch: a shard with several of the batch's values gets one
    /// exporter and one view of all of it, and each of its values is a slice of
    /// that view (one object per value instead of two).
    pub fn slices<'py>(
        &self,
        py: Python<'py>,
        dataset: &Dataset,
        locations: &[ValueLocation],
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let mut shards: Vec<(u64, usize, Option<Bound<'py, PyAny>>)> = Vec::new();
        for location in locations {
            match shards
                .iter_mut()
                .find(|(shard, ..)| *shard == location.shard)
            {
                Some((_, count, _)) => *count += 1,
                None => shards.push((location.shard, 1, None)),
            }
        }
        let mut values = Vec::with_capacity(locations.len());
        for &location in locations {
            let entry = shards
                .iter_mut()
                .find(|(shard, ..)| *shard == location.shard)
                .expect("counted above");
            if entry.1 == 1 {
                values.push(self.slice(py, dataset, location)?);
                continue;
            }
            // Checks the value's range against the shard, as a single view would.
            let value = self.locate(dataset, location)?;
            let whole = match &entry.2 {
                Some(whole) => whole.clone(),
                None => {
                    let len = value.data.bytes().len();
                    let whole = ValueBuffer {
                        data: value.data,
                        start: 0,
                        len,
                    }
                    .into_view(py)?;
                    entry.2 = Some(whole.clone());
                    whole
                }
            };
            values.push(slice_view(py, &whole, value_range(location))?);
        }
        Ok(values)
    }

    /// The value at `location`, not yet a Python object: this runs no Python
    /// code, so a caller can hold the dataset's lock for it and release the lock
    /// before [`ValueBuffer::into_view`] allocates (an allocation may start a
    /// garbage collection, which runs finalizers).
    pub fn locate(&self, dataset: &Dataset, location: ValueLocation) -> PyResult<ValueBuffer> {
        let data = dataset.shard_data(location.shard).map_err(to_py)?;
        let range = usize::try_from(location.offset)
            .ok()
            .zip(usize::try_from(location.len).ok())
            .and_then(|(start, len)| Some(start..start.checked_add(len)?))
            .filter(|range| range.end <= data.len());
        match range {
            Some(range) => Ok(ValueBuffer {
                data: Exported::Shard(data),
                start: range.start,
                len: range.len(),
            }),
            None => Err(PyValueError::new_err(format!(
                "{}: the data file is {} bytes but its index puts a value at bytes {}..{}",
                dataset.shard_data_path(location.shard).display(),
                data.len(),
                location.offset,
                location.offset.saturating_add(location.len),
            ))),
        }
    }
}

/// The bytes an exporter holds: a shard's, or a view's indices (mapped from
/// its file, or in memory).
pub enum Exported {
    Shard(ShardData),
    View(ViewIndices),
}

impl Exported {
    fn bytes(&self) -> &[u8] {
        match self {
            Exported::Shard(data) => data,
            Exported::View(indices) => indices.as_bytes(),
        }
    }
}

/// A view's indices as a read-only memoryview of their little-endian bytes
/// (zero-copy: `numpy.frombuffer` reads the mapped file in place).
pub fn indices_view(py: Python<'_>, indices: ViewIndices) -> PyResult<Bound<'_, PyAny>> {
    let len = indices.as_bytes().len();
    ValueBuffer {
        data: Exported::View(indices),
        start: 0,
        len,
    }
    .into_view(py)
}

impl ValueBuffer {
    /// A read-only memoryview of the value (zero-copy).
    pub fn into_view(self, py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
        let exporter = Bound::new(py, self)?;
        Ok(PyMemoryView::from(&exporter)?.into_any())
    }
}

/// The exporter behind a value's memoryview: `len` bytes at `start` of a shard.
/// Not exposed by name; reachable only as the view's `obj`.
#[pyclass(module = "bcd", name = "_ShardValue", frozen)]
pub struct ValueBuffer {
    data: Exported,
    start: usize,
    len: usize,
}

#[pymethods]
impl ValueBuffer {
    /// Exports the bytes read-only; a request for a writable buffer is a
    /// `BufferError` (from `PyBuffer_FillInfo`).
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let this = slf.get();
        // An empty value of an empty shard has no address of its own: point at a
        // static byte rather than a dangling pointer.
        static EMPTY: u8 = 0;
        let (ptr, len) = match this.data.bytes().get(this.start..this.start + this.len) {
            Some(bytes) if !bytes.is_empty() => (bytes.as_ptr(), bytes.len()),
            // Empty (the range was checked when the exporter was made).
            _ => (&EMPTY as *const u8, 0),
        };
        // SAFETY: `view` is the caller's Py_buffer to fill. The bytes at `ptr`
        // are `len` bytes owned by `this.data` (a shard's or a view's, mapped
        // or in memory, never written while held), which lives as long as the
        // exporter, and PyBuffer_FillInfo stores a new reference to the exporter
        // in `view.obj`, so they outlive the view. They are exported read-only
        // (readonly = 1; a writable request fails), so nothing writes through
        // the `*mut` the struct requires.
        let filled = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                ptr.cast_mut().cast::<c_void>(),
                len as ffi::Py_ssize_t,
                1,
                flags,
            )
        };
        if filled != 0 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }
}

/// The byte range of a located value (checked against its shard by `locate`).
fn value_range(location: ValueLocation) -> std::ops::Range<usize> {
    let start = location.offset as usize;
    start..start + location.len as usize
}

/// `view[range]`, a read-only memoryview sharing `view`'s exporter. The slice
/// object is made here rather than with `PySlice::new`, which leaks its integer
/// arguments in pyo3 0.30.1.
fn slice_view<'py>(
    py: Python<'py>,
    view: &Bound<'py, PyAny>,
    range: std::ops::Range<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let start = range.start.into_pyobject(py)?;
    let stop = range.end.into_pyobject(py)?;
    // SAFETY: PySlice_New takes borrowed references to its arguments (alive
    // here) and returns a new reference, or NULL with an exception set, which
    // from_owned_ptr_or_err turns into the error.
    let slice = unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            ffi::PySlice_New(start.as_ptr(), stop.as_ptr(), std::ptr::null_mut()),
        )?
    };
    view.get_item(slice)
}
