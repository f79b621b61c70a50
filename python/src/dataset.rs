//! `bcd.Dataset`: the Python face of [`bcd::Dataset`], mirroring the reference's
//! `BitcaskDataset` so that switching is a one-line import change.

use std::path::PathBuf;
use std::sync::{RwLock, TryLockError};

use pyo3::exceptions::{PyKeyError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::RwLockExt;
use pyo3::types::{PyBytes, PyInt, PyList, PyMemoryView, PyTuple, PyType};

use bcd::{Compression, CreateOptions, Dataset, Lz4Mode};

use crate::batch_read;
use crate::buffers::{self, Role};
use crate::errors::to_py;
use crate::extend_reads::{ExtendReads, Reader};
use crate::shard_views::ShardViews;

/// Records pulled from the Python iterable per compression round (the core's
/// extend batches are the same size).
const BATCH_RECORDS: usize = 1024;
/// Bytes (keys plus values) pulled per round, at most (or one record, if larger).
const BATCH_BYTES: usize = 16 << 20;
/// `get_batch` prefetches batches whose values average at least this many bytes.
const PREFETCH_MIN_AVERAGE: u64 = 16 << 10;
/// Compressed values at least this large, decompressed, are decompressed without
/// the GIL.
const DETACH_MIN_BYTES: u64 = 64 << 10;

/// An append-only, memory-mapped collection of byte blobs in the bitcask-dataset
/// format, optionally keyed and LZ4-compressed; mirrors the reference's
/// `BitcaskDataset`, plus `get_batch`.
///
/// Keys and values go in as any C-contiguous buffer (bytes, bytearray,
/// memoryview, NumPy arrays, ...) and come out as read-only memoryviews: for
/// uncompressed datasets, zero-copy views of the shard mapping that stay valid
/// while held. Pickles as its path, so worker processes reopen it.
#[pyclass(module = "bcd", name = "Dataset", subclass, frozen)]
pub struct PyDataset {
    /// The path as given, as a `pathlib.Path`.
    path: Py<PyAny>,
    store: RwLock<Dataset>,
    /// Set while an extend on some thread runs Python code to pull entries.
    extend_reads: ExtendReads,
    views: ShardViews,
    threads: usize,
}

/// `compression=`: `"lz4"` or `None`.
#[derive(Clone, Copy)]
pub struct CompressionArg(pub Compression);

impl<'a, 'py> FromPyObject<'a, 'py> for CompressionArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if obj.is_none() {
            return Ok(CompressionArg(Compression::None));
        }
        if let Ok(text) = obj.extract::<String>() {
            if text == "lz4" {
                return Ok(CompressionArg(Compression::Lz4));
            }
        }
        Err(PyValueError::new_err(format!(
            "unsupported compression: {}; use \"lz4\" or None",
            obj.repr()?
        )))
    }
}

/// A positive `max_shard_size=` that fits the format's u64.
pub fn shard_size_arg(value: &Bound<'_, PyAny>) -> PyResult<u64> {
    if !value.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "max_shard_size must be an int, not {}",
            value.get_type().name()?
        )));
    }
    if !value.gt(0)? {
        return Err(PyValueError::new_err("max_shard_size must be positive"));
    }
    value
        .extract::<u64>()
        .map_err(|_| PyValueError::new_err("max_shard_size must be below 2**64"))
}

/// `level=` of `extend`: a liblz4 high-compression level, 1..=12.
fn lz4_mode(level: Option<i32>) -> PyResult<Lz4Mode> {
    match level {
        None => Ok(Lz4Mode::default()),
        Some(level @ 1..=12) => Ok(Lz4Mode::High(level)),
        Some(level) => Err(PyValueError::new_err(format!(
            "level must be 1..12 (liblz4 high-compression levels; 9, the default, matches the reference), not {level}"
        ))),
    }
}

/// A signed Python index (any object with `__index__`); ints too large for i64
/// are out of range of every dataset.
fn index_arg(index: &Bound<'_, PyAny>, len: usize) -> PyResult<i64> {
    match index.extract::<i64>() {
        Ok(index) => Ok(index),
        Err(error) if error.is_instance_of::<pyo3::exceptions::PyOverflowError>(index.py()) => {
            Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "index {} out of range for a dataset of {len} records",
                index.repr()?
            )))
        }
        Err(error) => Err(error),
    }
}

impl PyDataset {
    fn open(py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<PyDataset> {
        let path = py.import("pathlib")?.getattr("Path")?.call1((path,))?;
        let dir: PathBuf = path.extract()?;
        let store = py.detach(|| Dataset::open(&dir)).map_err(to_py)?;
        Ok(PyDataset {
            path: path.unbind(),
            store: RwLock::new(store),
            extend_reads: ExtendReads::default(),
            views: ShardViews,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        })
    }

    /// The dataset for reading: its lock, or, for Python code that an extend on
    /// this thread is running (a generator checking `key in dataset`), the
    /// committed state that extend is adding to.
    fn read(&self, py: Python<'_>) -> PyResult<Reader<'_>> {
        match self.store.try_read() {
            Ok(guard) => return Ok(Reader::Locked(guard)),
            Err(TryLockError::Poisoned(poisoned)) => {
                return Ok(Reader::Locked(poisoned.into_inner()))
            }
            Err(TryLockError::WouldBlock) => {}
        }
        if let Some(reader) = self.extend_reads.on_this_thread() {
            return Ok(reader);
        }
        // Another thread is extending: wait for it without holding the GIL.
        let guard = self
            .store
            .read_py_attached(py)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Ok(Reader::Locked(guard))
    }

    /// The value at `index` (in range): a zero-copy view of the mapping when
    /// uncompressed, a view of a new `bytes` otherwise.
    fn value_at<'py>(
        &self,
        py: Python<'py>,
        dataset: &Dataset,
        index: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        match dataset.compression() {
            Compression::None => {
                let location = dataset.value_location(index).map_err(to_py)?;
                self.views.slice(py, dataset, location)
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
}

/// `memoryview(bytes)`: read-only, as the values of the reference.
fn read_only_view<'py>(bytes: &Bound<'py, PyBytes>) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyMemoryView::from(bytes)?.into_any())
}

#[pymethods]
impl PyDataset {
    /// Opens an existing dataset, checking every committed shard. Raises
    /// FileNotFoundError if there is none at `path`, ValueError if it is invalid.
    #[new]
    fn new(py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<PyDataset> {
        PyDataset::open(py, path)
    }

    /// Creates an empty dataset in a new or empty directory and opens it.
    ///
    /// `compression` is "lz4" or None; a new shard starts before a record would
    /// take the current one past `max_shard_size` bytes. Raises FileExistsError
    /// for a non-empty directory, ValueError for a bad compression or size.
    #[classmethod]
    #[pyo3(
        signature = (path, *, keyed = false, compression = CompressionArg(Compression::Lz4), max_shard_size = None),
        text_signature = "(path, *, keyed=False, compression='lz4', max_shard_size=1073741824)"
    )]
    fn create<'py>(
        cls: &Bound<'py, PyType>,
        path: &Bound<'py, PyAny>,
        keyed: bool,
        compression: CompressionArg,
        max_shard_size: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = cls.py();
        let max_shard_size = match max_shard_size {
            Some(size) => shard_size_arg(size)?,
            None => bcd::format::DEFAULT_MAX_SHARD_SIZE,
        };
        let dir: PathBuf = py
            .import("pathlib")?
            .getattr("Path")?
            .call1((path,))?
            .extract()?;
        let options = CreateOptions {
            keyed,
            compression: compression.0,
            max_shard_size,
        };
        py.detach(|| Dataset::create(&dir, options).map(drop))
            .map_err(to_py)?;
        cls.call1((path,))
    }

    /// The dataset's directory (a `pathlib.Path`, as given).
    #[getter]
    fn path(&self, py: Python<'_>) -> Py<PyAny> {
        self.path.clone_ref(py)
    }

    /// Whether records carry unique keys.
    #[getter]
    fn keyed(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.read(py)?.keyed())
    }

    /// `"lz4"` or `None`.
    #[getter]
    fn compression(&self, py: Python<'_>) -> PyResult<Option<&'static str>> {
        Ok(self.read(py)?.compression().as_manifest_str())
    }

    /// The shard size limit in bytes, fixed at creation (1 GiB for datasets of
    /// reference 0.2.0).
    #[getter]
    fn max_shard_size(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.read(py)?.manifest().max_shard_size)
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.read(py)?.len())
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let dataset = self.read(py)?;
        if !dataset.keyed() || !buffers::is_buffer(key) {
            return Ok(false);
        }
        let key = buffers::copy_bytes(key, Role::Key)?;
        Ok(dataset.contains(&key))
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let dataset = self.read(py)?;
        if !dataset.keyed() {
            return Err(PyTypeError::new_err(
                "key lookup is disabled for this dataset: it is keyless; read values by position with at(i)",
            ));
        }
        let key = buffers::copy_bytes(key, Role::Key)?;
        match dataset.position(&key).map_err(to_py)? {
            Some(index) => self.value_at(py, &dataset, index),
            None => Err(PyKeyError::new_err(PyBytes::new(py, &key).unbind())),
        }
    }

    /// Returns the value at insertion position `index` (negative counts from the
    /// end) as a read-only memoryview. Raises IndexError past either end.
    fn at<'py>(&self, py: Python<'py>, index: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let dataset = self.read(py)?;
        let index = index_arg(index, dataset.len())?;
        let index = dataset.resolve_index(index).map_err(to_py)?;
        self.value_at(py, &dataset, index)
    }

    /// Returns the key at insertion position `index` (negative counts from the
    /// end). Raises TypeError on a keyless dataset, IndexError past either end.
    fn key_at<'py>(
        &self,
        py: Python<'py>,
        index: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let dataset = self.read(py)?;
        if !dataset.keyed() {
            return Err(PyTypeError::new_err(
                "keys are disabled for this dataset: it is keyless",
            ));
        }
        let index = index_arg(index, dataset.len())?;
        let index = dataset.resolve_index(index).map_err(to_py)?;
        let key = dataset.key_at(index).map_err(to_py)?;
        read_only_view(&PyBytes::new(py, key))
    }

    /// Returns the values at `indices`, in order, as `at` would. Every index is
    /// checked first (IndexError names the bad one); compressed values are
    /// decompressed in parallel without the GIL, on threads started for the batch
    /// (safe in forked DataLoader workers).
    fn get_batch<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let dataset = self.read(py)?;
        let len = dataset.len();
        let mut resolved = Vec::with_capacity(indices.len().unwrap_or(0));
        for index in indices.try_iter()? {
            let index = index_arg(&index?, len)?;
            resolved.push(dataset.resolve_index(index).map_err(to_py)?);
        }
        // Large values may not be in memory: ask for all of them at once, so the
        // disk sees the whole batch rather than one page fault at a time.
        let mut stored = 0u64;
        for &index in &resolved {
            stored += dataset.value_location(index).map_err(to_py)?.len;
        }
        if stored >= PREFETCH_MIN_AVERAGE * resolved.len() as u64 {
            dataset.prefetch(resolved.iter().copied());
        }
        match dataset.compression() {
            Compression::None => {
                let values = resolved
                    .iter()
                    .map(|&index| self.value_at(py, &dataset, index))
                    .collect::<PyResult<Vec<_>>>()?;
                PyList::new(py, values)
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

    /// Adds values, or unique (key, value) pairs for a keyed dataset, as new
    /// shards, all or nothing: on any error, including one raised by `entries`,
    /// nothing is committed. `entries` may be any iterable, read lazily; batches
    /// are compressed and written without the GIL, and committed once at the end.
    /// `level` (1..12) is liblz4's high-compression level; the default, 9, writes
    /// the reference's bytes. Raises TypeError for entries that are not buffers
    /// (or pairs), ValueError for duplicate keys, BlockingIOError if another
    /// writer holds the dataset.
    #[pyo3(signature = (entries, *, level = None))]
    fn extend(
        &self,
        py: Python<'_>,
        entries: &Bound<'_, PyAny>,
        level: Option<i32>,
    ) -> PyResult<()> {
        let mode = lz4_mode(level)?;
        buffers::check_not_single_buffer(entries)?;
        let entries = entries.try_iter()?;

        let mut guard = match self.store.try_write() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                if self.extend_reads.on_this_thread().is_some() {
                    return Err(PyRuntimeError::new_err(
                        "extend called while an extend of the same Dataset is pulling its entries on this thread; extend once with all the entries",
                    ));
                }
                self.store
                    .write_py_attached(py)
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
            }
        };
        let dataset: &mut Dataset = &mut guard;
        dataset.set_lz4_mode(mode);
        let keyed = dataset.keyed();
        // Takes the writer lock and picks up shards other handles committed, so
        // they are never overwritten.
        let mut extend = py.detach(|| dataset.begin_extend()).map_err(to_py)?;

        let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut values: Vec<Vec<u8>> = Vec::new();
        let outcome = (|| -> PyResult<()> {
            let mut entries = entries;
            loop {
                // Pull one batch with the GIL held. Python code run by the
                // iterable may read this dataset: it sees the committed records.
                let mut bytes = 0;
                let mut exhausted = true;
                {
                    let _reads = self.extend_reads.publish(extend.dataset());
                    for entry in entries.by_ref() {
                        let entry = entry?;
                        if keyed {
                            let (key, value) = buffers::keyed_entry(&entry)?;
                            bytes += key.len() + value.len();
                            pairs.push((key, value));
                        } else {
                            let value = buffers::keyless_entry(&entry)?;
                            bytes += value.len();
                            values.push(value);
                        }
                        if pairs.len() + values.len() >= BATCH_RECORDS || bytes >= BATCH_BYTES {
                            exhausted = false;
                            break;
                        }
                    }
                }
                // Compress on all cores and write, without the GIL.
                let extend = &mut extend;
                let (pairs, values) = (&mut pairs, &mut values);
                py.detach(move || {
                    let pushed = if keyed {
                        extend.push_batch(pairs)
                    } else {
                        extend.push_value_batch(values)
                    };
                    pairs.clear();
                    values.clear();
                    pushed
                })
                .map_err(to_py)?;
                if exhausted {
                    return Ok(());
                }
                // Let Ctrl-C stop a long extend from a non-Python iterable.
                py.check_signals()?;
            }
        })();
        match outcome {
            Ok(()) => {
                py.detach(move || extend.commit()).map_err(to_py)?;
                Ok(())
            }
            Err(error) => {
                // Removes the uncommitted shard files.
                py.detach(move || drop(extend));
                Err(error)
            }
        }
    }

    /// Pickles as the path alone: worker processes reopen the dataset.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let path = slf.get().path.bind(slf.py()).str()?;
        PyTuple::new(
            slf.py(),
            [
                slf.get_type().into_any(),
                PyTuple::new(slf.py(), [path])?.into_any(),
            ],
        )
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "bcd.Dataset({})",
            self.path.bind(py).str()?.repr()?
        ))
    }
}
