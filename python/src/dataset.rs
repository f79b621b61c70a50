//! `bcd.Dataset`: the Python face of [`bcd::Dataset`], mirroring the reference's
//! `BitcaskDataset` so that switching is a one-line import change.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyIndexError, PyKeyError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyIterator, PyList, PyMemoryView, PyTuple, PyType};

use bcd::{Compression, CreateOptions, Dataset, Lz4Mode};
use bcd_fields::Fields;
use bcd_pipeline::{FieldsExtend, NewRecord, Numbered, OnDuplicate};

use crate::batch_read;
use crate::buffers::{self, Role};
use crate::errors::{fields_to_py, remote_to_py, to_py};
use crate::field_values;
use crate::fields_read;
use crate::handle::Handle;
use crate::options::{lz4_mode_arg, shard_size_arg, size_arg};
use bcd_remote::cache::{CacheOptions, RemoteCache};
use bcd_remote::{Location, RemoteUri};

/// `get_batch` prefetches batches whose values average at least this many bytes.
const PREFETCH_MIN_AVERAGE: u64 = 16 << 10;
/// Compressed values at least this large, decompressed, are decompressed without
/// the GIL.
const DETACH_MIN_BYTES: u64 = 64 << 10;
/// `get_batch` reserves room for at most this many indices up front; more are
/// appended as they come.
const MAX_RESERVED_INDICES: usize = 1 << 16;

/// An append-only, memory-mapped collection of byte blobs in the bitcask-dataset
/// format, optionally keyed and LZ4-compressed; mirrors the reference's
/// `BitcaskDataset`, plus `get_batch`.
///
/// Keys and values go in as any C-contiguous buffer (bytes, bytearray,
/// memoryview, NumPy arrays, ...) and come out as read-only memoryviews: for
/// uncompressed datasets, zero-copy views of the shard mapping that stay valid
/// while held. Pickles as its path, so worker processes reopen it.
///
/// Safe to share between threads, and to use in processes forked from one using
/// it, even in the middle of an extend (see `handle.rs`).
#[pyclass(module = "bcd", name = "Dataset", subclass, frozen)]
pub struct PyDataset {
    /// The path as given, as a `pathlib.Path`.
    path: Py<PyAny>,
    /// The directory, made absolute: a forked child may open it again.
    dir: PathBuf,
    // Fixed when the dataset was created, so read without any lock.
    keyed: bool,
    compression: Compression,
    max_shard_size: u64,
    /// This process's handle. Locked only briefly with the GIL held (never
    /// across a call into Python or a wait), so never held at a fork.
    current: Mutex<Arc<Handle>>,
    threads: usize,
    /// For a dataset in object storage: where it is and its local cache.
    remote: Option<RemoteSource>,
}

/// A dataset in object storage, read through a local shard cache.
struct RemoteSource {
    uri: RemoteUri,
    options: CacheOptions,
    /// This process's cache client (a forked child makes its own).
    cache: Mutex<(u32, Arc<RemoteCache>)>,
}

impl RemoteSource {
    /// This process's cache of the dataset; a forked child builds its own client.
    fn cache(&self) -> Result<Arc<RemoteCache>, bcd_remote::RemoteError> {
        let mut slot = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let pid = std::process::id();
        if slot.0 != pid {
            *slot = (
                pid,
                Arc::new(RemoteCache::new(self.uri.clone(), &self.options)?),
            );
        }
        Ok(Arc::clone(&slot.1))
    }

    /// Opens the dataset again through the cache (syncing its mirror).
    fn open(&self) -> Result<Dataset, bcd_remote::RemoteError> {
        bcd_remote::cache::open_cache(self.cache()?).map(|(dataset, _)| dataset)
    }
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

/// Whether `index` (negative counts from the end) is in range of `len` records.
fn in_range(index: i64, len: usize) -> bool {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    if index < 0 {
        index >= -len
    } else {
        index < len
    }
}

/// A path argument as the OS names it (`os.fspath`): a str, bytes or path-like.
pub fn fspath(py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<std::ffi::OsString> {
    let text = py.import("os")?.getattr("fspath")?.call1((path,))?;
    if let Ok(bytes) = text.cast::<PyBytes>() {
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            return Ok(std::ffi::OsStr::from_bytes(bytes.as_bytes()).to_owned());
        }
        #[cfg(not(unix))]
        return Ok(String::from_utf8_lossy(bytes.as_bytes())
            .into_owned()
            .into());
    }
    text.extract()
}

/// Where a path argument points: a local path, or a URI of a store; an
/// unsupported `scheme://` is a ValueError, never a local path.
pub fn location(py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<Location> {
    Location::parse(&fspath(py, path)?).map_err(remote_to_py)
}

impl PyDataset {
    fn open(
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        cache_dir: Option<&Bound<'_, PyAny>>,
        cache_limit: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyDataset> {
        let cache_dir = cache_dir.filter(|d| !d.is_none());
        let cache_limit = cache_limit.filter(|l| !l.is_none());
        let uri = match location(py, path)? {
            Location::Remote(uri) => uri,
            Location::Local(_) => {
                if cache_dir.is_some() || cache_limit.is_some() {
                    return Err(PyValueError::new_err(
                        "cache_dir and cache_limit apply only to datasets in object storage (s3://, gs://, az://)",
                    ));
                }
                let path = py.import("pathlib")?.getattr("Path")?.call1((path,))?;
                let dir: PathBuf = path.extract()?;
                let store = py.detach(|| Dataset::open(&dir)).map_err(to_py)?;
                return Ok(PyDataset::with_store(
                    path.unbind(),
                    std::path::absolute(&dir).unwrap_or(dir),
                    store,
                    None,
                ));
            }
        };
        let options = CacheOptions {
            dir: match cache_dir {
                Some(dir) => PathBuf::from(fspath(py, dir)?),
                None => CacheOptions::default_dir(),
            },
            limit: cache_limit
                .map(|limit| size_arg(limit, "cache_limit"))
                .transpose()?,
        };
        let cache = py
            .detach(|| RemoteCache::new(uri.clone(), &options))
            .map_err(remote_to_py)?;
        let source = RemoteSource {
            uri: uri.clone(),
            options,
            cache: Mutex::new((std::process::id(), Arc::new(cache))),
        };
        let store = py.detach(|| source.open()).map_err(remote_to_py)?;
        let dir = store.path().to_owned();
        let text = pyo3::types::PyString::new(py, &uri.to_string()).into_any();
        Ok(PyDataset::with_store(
            text.unbind(),
            dir,
            store,
            Some(source),
        ))
    }

    fn with_store(
        path: Py<PyAny>,
        dir: PathBuf,
        store: Dataset,
        remote: Option<RemoteSource>,
    ) -> PyDataset {
        PyDataset {
            path,
            dir,
            keyed: store.keyed(),
            compression: store.compression(),
            max_shard_size: store.manifest().max_shard_size,
            current: Mutex::new(Arc::new(Handle::new(store))),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            remote,
        }
    }

    /// Opens the dataset again (in a forked child): by path, or through the cache.
    fn reopen(&self, py: Python<'_>) -> PyResult<Dataset> {
        match &self.remote {
            None => py.detach(|| Dataset::open(&self.dir)).map_err(to_py),
            Some(remote) => py.detach(|| remote.open()).map_err(remote_to_py),
        }
    }

    /// This process's handle. In a child forked while some thread used the
    /// inherited one (its lock is held by a thread the child does not have, and
    /// its dataset may be half-updated), the dataset is opened again by path: the
    /// child sees the committed state.
    fn handle(&self, py: Python<'_>) -> PyResult<Arc<Handle>> {
        let generation = bcd::fork::generation();
        let current = Arc::clone(&self.lock_current());
        if current.is_current(generation) || current.adopt(generation) {
            return Ok(current);
        }
        let dataset = self.reopen(py)?;
        let fresh = Arc::new(Handle::new(dataset));
        let mut slot = self.lock_current();
        if !slot.is_current(generation) {
            *slot = Arc::clone(&fresh);
        }
        let handle = Arc::clone(&slot);
        drop(slot);
        // The handles not kept (the inherited one, unless a frame of the forking
        // thread still uses it) are dropped here, with no lock held.
        drop((current, fresh));
        Ok(handle)
    }

    fn lock_current(&self) -> std::sync::MutexGuard<'_, Arc<Handle>> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A signed Python index (any object with `__index__`, which runs here, with no
    /// lock held); ints too large for i64 are out of range of every dataset.
    fn index_arg(&self, py: Python<'_>, index: &Bound<'_, PyAny>) -> PyResult<i64> {
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

    /// `extend` with the entries' iterator: takes the write lock and runs the
    /// transaction.
    fn extend_locked(
        &self,
        py: Python<'_>,
        handle: &Handle,
        entries: &mut Bound<'_, PyIterator>,
        mode: Lz4Mode,
        metadata: serde_json::Map<String, serde_json::Value>,
    ) -> PyResult<()> {
        let mut guard = handle.write(py)?;
        let dataset: &mut Dataset = &mut guard;
        dataset.set_lz4_mode(mode);
        let keyed = self.keyed;
        // Takes the writer lock and picks up shards other handles committed, so
        // they are never overwritten. Records go in whole through the one extend
        // with fields (a duplicate key fails it).
        let mut extend = py
            .detach(|| FieldsExtend::begin(dataset, OnDuplicate::Error))
            .map_err(fields_to_py)?;
        if let Err(error) = extend.add_metadata(metadata) {
            py.detach(move || drop(extend));
            return Err(fields_to_py(error));
        }
        let mut rows: Vec<Fields> = Vec::new();

        // Pulled from the iterable per compression round: the store's one policy.
        let (batch_records, batch_bytes) = bcd::batch_limits(self.threads);
        let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut values: Vec<Vec<u8>> = Vec::new();
        // Entries pulled before this batch: errors name an entry by its number.
        let mut pulled: u64 = 0;
        let outcome = (|| -> PyResult<()> {
            loop {
                // Pull one batch with the GIL held. Meanwhile every thread, and
                // Python code run by the iterable (or by a signal handler), may
                // read this dataset: it sees the committed records. That code may
                // also fork: a child's copy of this extend stops here, and writes
                // nothing.
                let mut bytes = 0;
                let mut exhausted = true;
                {
                    let _reads = handle.share(extend.dataset());
                    for entry in entries.by_ref() {
                        let entry = entry?;
                        extend.check_process().map_err(fields_to_py)?;
                        if let Ok(dict) = entry.cast::<PyDict>() {
                            let (key, value, record) = field_values::dict_entry(dict, keyed)?;
                            bytes += value.len();
                            match key {
                                Some(key) => {
                                    bytes += key.len();
                                    pairs.push((key, value));
                                }
                                None => values.push(value),
                            }
                            rows.push(record);
                        } else if keyed {
                            let (key, value) = buffers::keyed_entry(&entry)?;
                            bytes += key.len() + value.len();
                            pairs.push((key, value));
                            rows.push(Fields::new());
                        } else {
                            let value = buffers::keyless_entry(&entry)?;
                            bytes += value.len();
                            values.push(value);
                            rows.push(Fields::new());
                        }
                        if pairs.len() + values.len() >= batch_records || bytes >= batch_bytes {
                            exhausted = false;
                            break;
                        }
                    }
                    extend.check_process().map_err(fields_to_py)?;
                    if !exhausted {
                        // Let Ctrl-C stop a long extend from a non-Python iterable.
                        py.check_signals()?;
                    }
                }
                // Compress on all cores and write, without the GIL.
                let extend = &mut extend;
                let (pairs, values, rows) = (&mut pairs, &mut values, &mut rows);
                let first = pulled;
                pulled += rows.len() as u64;
                py.detach(move || -> PyResult<()> {
                    let origins: Vec<Numbered> = (0..rows.len() as u64)
                        .map(|at| Numbered {
                            what: "entry",
                            number: first + at,
                        })
                        .collect();
                    // Only one of the two is used: a keyed dataset takes pairs.
                    let entries = pairs
                        .iter()
                        .map(|(k, v)| (&k[..], &v[..]))
                        .chain(values.iter().map(|v| (&[][..], &v[..])));
                    let records: Vec<NewRecord<'_>> = entries
                        .zip(rows.iter())
                        .zip(&origins)
                        .map(|(((key, value), fields), origin)| NewRecord {
                            key,
                            value,
                            fields: Cow::Borrowed(fields),
                            origin,
                        })
                        .collect();
                    extend.push_batch(&records).map_err(fields_to_py)?;
                    drop(records);
                    pairs.clear();
                    values.clear();
                    rows.clear();
                    Ok(())
                })?;
                if exhausted {
                    return Ok(());
                }
            }
        })();
        match outcome {
            Ok(()) => {
                py.detach(move || extend.commit()).map_err(fields_to_py)?;
                Ok(())
            }
            Err(error) => {
                // Removes the uncommitted shard files (a forked child's copy
                // removes nothing).
                py.detach(move || drop(extend));
                Err(error)
            }
        }
    }

    /// The value at `index` (in range): a zero-copy view of the mapping when
    /// uncompressed, a view of a new `bytes` otherwise.
    fn value_at<'py>(
        &self,
        py: Python<'py>,
        handle: &Handle,
        dataset: &Dataset,
        index: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        match dataset.compression() {
            Compression::None => {
                let location = dataset.value_location(index).map_err(to_py)?;
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
}

/// `memoryview(bytes)`: read-only, as the values of the reference.
fn read_only_view<'py>(bytes: &Bound<'py, PyBytes>) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyMemoryView::from(bytes)?.into_any())
}

#[pymethods]
impl PyDataset {
    /// Opens an existing dataset, checking every committed shard. Raises
    /// FileNotFoundError if there is none at `path`, ValueError if it is invalid.
    ///
    /// `path` may be an `s3://`, `gs://` or `az://` URI: the dataset is then read
    /// through a local cache in `cache_dir` (default `$BCD_CACHE_DIR`, else
    /// `~/.cache/bcd`) shared by every process on the machine, holding at most
    /// `cache_limit` bytes of shards (an int or a size such as "20G"; default no
    /// bound): a shard is downloaded whole on its first read, once however many
    /// workers read it, and the least recently used ones are evicted.
    #[new]
    #[pyo3(signature = (path, cache_dir = None, cache_limit = None))]
    fn new(
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        cache_dir: Option<&Bound<'_, PyAny>>,
        cache_limit: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyDataset> {
        PyDataset::open(py, path, cache_dir, cache_limit)
    }

    /// Picks up records committed since this object opened the dataset (or last
    /// refreshed), by this process or another (a nightly `bcd ingest`, the
    /// reference's `extend`; for a dataset in object storage, a newer remote
    /// manifest), and returns how many were added. Cheap when nothing changed:
    /// one read of `manifest.json`. Raises RuntimeError if the dataset was
    /// replaced by an incompatible one (other settings, fewer shards); on error
    /// nothing changes.
    fn refresh(&self, py: Python<'_>) -> PyResult<usize> {
        let handle = self.handle(py)?;
        if self.remote.is_none() {
            let (dir, shards) = {
                let dataset = handle.read(py);
                (dataset.path().to_owned(), dataset.shards())
            };
            let manifest = py.detach(|| bcd::Manifest::read(&dir)).map_err(to_py)?;
            if manifest.shards == shards {
                return Ok(0);
            }
        }
        let mut guard = handle.write(py)?;
        let dataset: &mut Dataset = &mut guard;
        let before = dataset.len();
        match &self.remote {
            None => py.detach(|| dataset.refresh()).map_err(to_py)?,
            Some(remote) => py
                .detach(|| {
                    let cache = remote.cache()?;
                    bcd_remote::cache::refresh(dataset, &cache)
                })
                .map_err(remote_to_py)?,
        }
        Ok(dataset.len() - before)
    }

    /// Creates an empty dataset in a new or empty directory and opens it.
    ///
    /// `compression` is "lz4" or None; a new shard starts before a record would
    /// take the current one past `max_shard_size` bytes (an int, or a size string
    /// such as "64M": K/M/G/T are powers of 1024). Raises FileExistsError
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
        if let Location::Remote(uri) = location(py, path)? {
            return Err(PyValueError::new_err(format!(
                "{uri}: create a dataset locally and `bcd push` it to object storage"
            )));
        }
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
    fn keyed(&self) -> bool {
        self.keyed
    }

    /// `"lz4"` or `None`.
    #[getter]
    fn compression(&self) -> Option<&'static str> {
        self.compression.as_manifest_str()
    }

    /// The shard size limit in bytes, fixed at creation (1 GiB for datasets of
    /// reference 0.2.0).
    #[getter]
    fn max_shard_size(&self) -> u64 {
        self.max_shard_size
    }

    /// `(first record, end record, stored bytes)` of each committed shard, in
    /// order: for readers that split a dataset by shard (``bcd.ray.read``).
    fn shard_ranges(&self, py: Python<'_>) -> PyResult<Vec<(u64, u64, u64)>> {
        let handle = self.handle(py)?;
        let dataset = handle.read(py);
        (0..dataset.shards())
            .map(|shard| {
                let first = dataset.shard_first_record(shard);
                let path = dataset.shard_data_path(shard);
                let bytes = std::fs::metadata(&path)
                    .map_err(|e| {
                        to_py(bcd::Error::Io {
                            op: "stat",
                            path,
                            source: e,
                        })
                    })?
                    .len();
                Ok((first, first + dataset.shard_records(shard), bytes))
            })
            .collect()
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.handle(py)?.read(py).len())
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        if !self.keyed || !buffers::is_buffer(key) {
            return Ok(false);
        }
        let key = buffers::copy_bytes(key, Role::Key)?;
        let handle = self.handle(py)?;
        let found = handle.read(py).contains(&key);
        Ok(found)
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if !self.keyed {
            return Err(PyTypeError::new_err(
                "key lookup is disabled for this dataset: it is keyless; read values by position with at(i)",
            ));
        }
        let key = buffers::copy_bytes(key, Role::Key)?;
        let handle = self.handle(py)?;
        let value = {
            let dataset = handle.read(py);
            match dataset.position(&key).map_err(to_py)? {
                Some(index) => Some(self.value_at(py, &handle, &dataset, index)?),
                None => None,
            }
        };
        value.ok_or_else(|| PyKeyError::new_err(PyBytes::new(py, &key).unbind()))
    }

    /// Returns the value at insertion position `index` (negative counts from the
    /// end) as a read-only memoryview. Raises IndexError past either end.
    fn at<'py>(&self, py: Python<'py>, index: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let index = self.index_arg(py, index)?;
        let handle = self.handle(py)?;
        let dataset = handle.read(py);
        let index = dataset.resolve_index(index).map_err(to_py)?;
        self.value_at(py, &handle, &dataset, index)
    }

    /// Returns the key at insertion position `index` (negative counts from the
    /// end). Raises TypeError on a keyless dataset, IndexError past either end.
    fn key_at<'py>(
        &self,
        py: Python<'py>,
        index: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if !self.keyed {
            return Err(PyTypeError::new_err(
                "keys are disabled for this dataset: it is keyless",
            ));
        }
        let index = self.index_arg(py, index)?;
        let handle = self.handle(py)?;
        let key = {
            let dataset = handle.read(py);
            let index = dataset.resolve_index(index).map_err(to_py)?;
            PyBytes::new(py, dataset.key_at(index).map_err(to_py)?)
        };
        read_only_view(&key)
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
            Compression::None => PyList::new(py, handle.views.slices(py, &dataset, &locations)?),
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
    /// `level` is as `bcd.ingest`'s: 1..12 is liblz4's high-compression level with
    /// values that do not compress stored as literal-only LZ4 blocks, `"fast"` is
    /// liblz4's fast mode, `"reference"` level 9 on every value; without it, the
    /// reference's exact bytes (`"reference"`). Raises ValueError for another
    /// level, TypeError for entries that are not buffers
    /// (or pairs), ValueError for duplicate keys, BlockingIOError if another
    /// writer holds the dataset, RuntimeError in a process forked while this
    /// extend pulled its entries (only the parent commits it).
    #[pyo3(signature = (entries, *, level = None, metadata = None))]
    fn extend(
        &self,
        py: Python<'_>,
        entries: &Bound<'_, PyAny>,
        level: Option<&Bound<'_, PyAny>>,
        metadata: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let metadata = field_values::metadata_arg(metadata)?;
        // Without `level`, the reference's bytes: level 9 on every value.
        let mode = lz4_mode_arg(level, Lz4Mode::default())?;
        buffers::check_not_single_buffer(entries)?;
        let mut entries = entries.try_iter()?;
        let handle = self.handle(py)?;
        // The iterator outlives the lock: dropping a generator runs its cleanup
        // code, which may use this dataset.
        self.extend_locked(py, &handle, &mut entries, mode, metadata)
    }

    /// The dataset schema: a `pyarrow.Schema` of the fields stored beside the
    /// records (empty for a dataset without fields). Imports pyarrow.
    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.handle(py)?;
        let dataset = handle.read(py);
        fields_read::schema(py, &dataset)
    }

    /// The dataset metadata (class names, description, sources, ...) as of the
    /// state this handle reads: a dict.
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.handle(py)?;
        let text = {
            let dataset = handle.read(py);
            fields_read::metadata_json(&dataset)?
        };
        py.import("json")?.call_method1("loads", (text,))
    }

    /// The fields of every record, in record order, as a `pyarrow.Table` (one
    /// row per record; `columns`: only those). Columns are read from each shard's
    /// memory-mapped fields file without copying where their type allows; shards
    /// without fields read as nulls. Imports pyarrow.
    #[pyo3(signature = (columns = None))]
    fn fields<'py>(
        &self,
        py: Python<'py>,
        columns: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.handle(py)?;
        let (schema, batches) = {
            let dataset = handle.read(py);
            let dataset: &Dataset = &dataset;
            py.detach(|| fields_read::batches(dataset, columns.as_deref(), None))
                .map_err(fields_to_py)?
        };
        fields_read::to_pyarrow(py, schema, batches)
    }

    /// Record `index` (negative counts from the end) as a dict: `"key"` (keyed
    /// datasets), `"value"` (as `at` returns it) and every field by its name
    /// (as pyarrow converts it to Python). Imports pyarrow.
    fn sample<'py>(
        &self,
        py: Python<'py>,
        index: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let index = self.index_arg(py, index)?;
        let handle = self.handle(py)?;
        let (index, schema, batches) = {
            let dataset = handle.read(py);
            let index = dataset.resolve_index(index).map_err(to_py)?;
            let (schema, batches) =
                fields_read::batches(&dataset, None, Some(index)).map_err(fields_to_py)?;
            (index, schema, batches)
        };
        let table = fields_read::to_pyarrow(py, schema, batches)?;
        let rows = table.call_method0("to_pylist")?;
        let row = rows.get_item(0)?;
        let out = PyDict::new(py);
        {
            let dataset = handle.read(py);
            if self.keyed {
                out.set_item(
                    "key",
                    PyBytes::new(py, dataset.key_at(index).map_err(to_py)?),
                )?;
            }
            out.set_item("value", self.value_at(py, &handle, &dataset, index)?)?;
        }
        out.call_method1("update", (row,))?;
        Ok(out.into_any())
    }

    /// The statistics kept at write time, as `bcd stats --json` prints them: a
    /// dict (per-shard figures under `"per_shard"` with `shards=True`). Reads no
    /// record of shards written by this package.
    #[pyo3(signature = (*, shards = false))]
    fn stats<'py>(&self, py: Python<'py>, shards: bool) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.handle(py)?;
        let text = {
            let dataset = handle.read(py);
            let dataset: &Dataset = &dataset;
            py.detach(|| bcd_pipeline::fields::stats_report(dataset, shards))
                .map_err(fields_to_py)?
                .to_string()
        };
        py.import("json")?.call_method1("loads", (text,))
    }

    /// Adds the rows of Arrow data (anything with `__arrow_c_stream__` or
    /// `__arrow_c_array__`: a pyarrow Table, RecordBatch or RecordBatchReader) in
    /// one commit: values from `value_column`, keys from `key_column` (required
    /// for keyed datasets), and the other columns as fields beside the records
    /// (`fields`: `"all"`, the default, `"none"`, or names). Returns
    /// `{"records", "skipped", "shards", "bytes_stored"}`.
    #[pyo3(signature = (data, value_column = "value", key_column = None, *, on_duplicate = "error", level = None, fields = None))]
    #[allow(clippy::too_many_arguments)]
    fn extend_arrow<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        value_column: &str,
        key_column: Option<&str>,
        on_duplicate: &str,
        level: Option<&Bound<'py, PyAny>>,
        fields: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let options = crate::arrow_extend::ArrowExtend {
            value_column,
            key_column,
            on_duplicate: on_duplicate
                .parse()
                .map_err(|error| crate::options::invalid("on_duplicate", error))?,
            mode: lz4_mode_arg(level, Lz4Mode::default())?,
            threads: self.threads,
            fields: crate::ingest::fields_arg(fields)?.unwrap_or_default(),
        };
        let handle = self.handle(py)?;
        crate::arrow_extend::extend_arrow(py, &handle, data, &options)
    }

    /// Reads the values at `indices` back to back into one buffer: calls
    /// `allocate(total_bytes)` once (with no lock held), which must return a
    /// writable, C-contiguous buffer of at least that many bytes (a NumPy array,
    /// a bytearray, a tensor in shared memory), fills it on all cores without the
    /// GIL, and returns the offsets as a NumPy int64 array of `len(indices) + 1`:
    /// value `i` is `buffer[offsets[i]:offsets[i + 1]]`. Indices are checked as by
    /// `get_batch`. Nothing else may use the buffer during the call.
    fn get_batch_into<'py>(
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

    /// Pickles as the path alone (with the cache settings, for a dataset in object
    /// storage): worker processes reopen the dataset.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let path = slf.get().path.bind(py).str()?;
        let arguments = match &slf.get().remote {
            None => PyTuple::new(py, [path.into_any()])?,
            Some(remote) => PyTuple::new(
                py,
                [
                    path.into_any(),
                    remote.options.dir.clone().into_pyobject(py)?.into_any(),
                    remote.options.limit.into_pyobject(py)?.into_any(),
                ],
            )?,
        };
        PyTuple::new(py, [slf.get_type().into_any(), arguments.into_any()])
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "bcd.Dataset({})",
            self.path.bind(py).str()?.repr()?
        ))
    }
}
