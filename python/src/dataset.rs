//! `bcd.Dataset`: the Python face of [`bcd::Dataset`], mirroring the reference's
//! `BitcaskDataset` so that switching is a one-line import change.

//!
//! Split along its seams: `dataset/open.rs` (opening, creating, reopening in a
//! forked child, `refresh`), `dataset/reads.rs` (values by position, key and
//! batch), `dataset/extend.rs` (`extend`); the `#[pymethods]` block here holds
//! every method Python sees (with its docstring) and delegates to them.

mod extend;
mod open;
mod prefetch;
mod reads;
mod views;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::exceptions::{PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple, PyType};

use bcd::{Compression, Dataset, Lz4Mode};

use crate::args::fields_arg;
use crate::buffers::{self, Role};
use crate::errors::{fields_to_py, to_py};
use crate::fields_read;
use crate::handle::Handle;
use crate::options::lz4_mode_arg;

pub use open::CompressionArg;
use open::RemoteSource;
use reads::read_only_view;

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
    /// Threads a batch read or decode may use (`Dataset.threads`): all cores
    /// by default; 1 in a DataLoader worker (bcd.torch sets it as torch does
    /// its own), where the workers are the parallelism.
    threads: AtomicUsize,
    /// For a dataset in object storage: where it is and its local cache.
    remote: Option<RemoteSource>,
    /// Whether every value read is checked against its content hash.
    verify: bool,
    /// The plan and run buffer of positional batch reads, kept from batch to
    /// batch (taken out while a batch is read, so a second thread reading at
    /// the same time uses its own).
    positional: Mutex<bcd::PositionalBatch>,
}

impl PyDataset {
    /// This process's handle. In a child forked while some thread used the
    /// inherited one (its lock is held by a thread the child does not have, and
    /// its dataset may be half-updated), the dataset is opened again by path: the
    /// child sees the committed state.
    pub(crate) fn handle(&self, py: Python<'_>) -> PyResult<Arc<Handle>> {
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
    /// workers read it, and the least recently used ones are evicted. Up to
    /// `prefetch` shards (default 8; 0: none) are fetched ahead of the readers
    /// at once: see `prefetch`.
    ///
    /// With `verify=True` every value read (by key, index, `get_batch`,
    /// `get_batch_into`, the torch datasets) is checked against the XXH3-128
    /// written with it (`NNNNNN.xxh128` beside each shard: `bcd dedup-index`
    /// builds them for a dataset that has none): a value whose bytes changed on
    /// disk raises ValueError naming the shard file and the record instead of
    /// being returned. The cost is one hash of each value read (XXH3-128 runs
    /// at several GB/s per core, a few percent of a read from the page cache,
    /// less than decompressing it) and 16 bytes of page cache per record of
    /// each shard read. Raises ValueError at open if a shard has no content
    /// hashes.
    #[new]
    #[pyo3(signature = (path, cache_dir = None, cache_limit = None, prefetch = None, verify = false))]
    fn new(
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        cache_dir: Option<&Bound<'_, PyAny>>,
        cache_limit: Option<&Bound<'_, PyAny>>,
        prefetch: Option<usize>,
        verify: bool,
    ) -> PyResult<PyDataset> {
        PyDataset::open(py, path, cache_dir, cache_limit, prefetch, verify)
    }

    /// Picks up records committed since this object opened the dataset (or last
    /// refreshed), by this process or another (a nightly `bcd ingest`, the
    /// reference's `extend`; for a dataset in object storage, a newer remote
    /// manifest), and returns how many were added. Cheap when nothing changed:
    /// one read of `manifest.json`. Raises RuntimeError if the dataset was
    /// replaced by an incompatible one (other settings, fewer shards); on error
    /// nothing changes.
    fn refresh(&self, py: Python<'_>) -> PyResult<usize> {
        self.refresh_handle(py)
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
        PyDataset::create_directory(py, path, keyed, compression, max_shard_size)?;
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
    ///
    /// `read_ahead` asks the kernel for every value's pages at once before the
    /// reads (one request each, only those pages): `None` (the default) does it
    /// for values of 16 KiB or more on average, `True` always (for indices
    /// scattered sparsely over the files, as a small view's are), `False` never.
    ///
    /// `positional=True` reads the values as `get_batch_into(positional=True)`
    /// does (nothing mapped), each into a new `bytes`.
    #[pyo3(signature = (indices, *, read_ahead = None, positional = false))]
    fn get_batch<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
        read_ahead: Option<bool>,
        positional: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        if positional {
            return self.read_batch_positional(py, indices);
        }
        self.read_batch(py, indices, read_ahead)
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
    ///
    /// With `dedup="content"`, an entry whose value is byte for byte that of an
    /// earlier record (committed, or earlier in `entries`) is left out (the
    /// first wins), found by its content hash (XXH3-128, kept beside the shards)
    /// and confirmed by comparing the bytes; every committed shard needs content
    /// hashes (`bcd dedup-index`). The call then returns
    /// `{"records", "skipped_values", "content_duplicates"}`, each duplicate a
    /// dict naming its `key` (or `index`, its entry number) and `duplicate_of`
    /// (`index` and `key` of the record kept); without it, None.
    /// `memory_limit` (an int or a size such as `"4G"`) bounds the memory of
    /// the duplicate checks, which spill to disk past it (default: a quarter of
    /// the machine's memory).
    #[pyo3(signature = (entries, *, level = None, metadata = None, dedup = None, memory_limit = None))]
    fn extend<'py>(
        &self,
        py: Python<'py>,
        entries: &Bound<'py, PyAny>,
        level: Option<&Bound<'py, PyAny>>,
        metadata: Option<&Bound<'py, PyAny>>,
        dedup: Option<&str>,
        memory_limit: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let checks = extend::Checks {
            dedup: crate::options::dedup_arg(dedup)?,
            memory_limit: crate::options::memory_limit_arg(memory_limit)?,
        };
        self.extend_entries(py, entries, level, metadata, checks)
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
    /// `{"records", "skipped", "shards", "bytes_stored"}`; with
    /// `dedup="content"` (as `extend`'s) also `"skipped_values"` and
    /// `"content_duplicates"` (each naming its `key`, or `index`: its row).
    #[pyo3(signature = (data, value_column = "value", key_column = None, *, on_duplicate = "error", level = None, fields = None, dedup = None, memory_limit = None))]
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
        dedup: Option<&str>,
        memory_limit: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let options = crate::arrow_extend::ArrowExtend {
            value_column,
            key_column,
            on_duplicate: on_duplicate
                .parse()
                .map_err(|error| crate::options::invalid("on_duplicate", error))?,
            dedup: crate::options::dedup_arg(dedup)?,
            memory_limit: crate::options::memory_limit_arg(memory_limit)?,
            mode: lz4_mode_arg(level, Lz4Mode::default())?,
            threads: self.threads.load(Ordering::Relaxed),
            fields: fields_arg(fields)?.unwrap_or_default(),
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
    /// `get_batch`, and `read_ahead` is as there. `positional` reads each value
    /// with a positional read of its shard file instead of through the
    /// mapping (`None`: when `read_ahead` is `True`). Nothing else may use the
    /// buffer during the call.
    #[pyo3(signature = (indices, allocate, *, read_ahead = None, positional = None))]
    fn get_batch_into<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
        allocate: &Bound<'py, PyAny>,
        read_ahead: Option<bool>,
        positional: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.read_batch_into(py, indices, allocate, read_ahead, positional)
    }

    /// Decodes the images (JPEG or PNG values) at `indices` into `out` as
    /// `options` (a `bcd.ImageOptions`) says, one after another
    /// (`len(indices) * options.image_bytes` bytes), on all cores without the
    /// GIL; record `i`'s random crop and flip come from `(seed, epoch, i)`.
    /// Returns the images that failed as `(position in indices, message naming
    /// the record)`; their slots are left as they were. Indices are checked as
    /// by `get_batch`. Nothing else may use `out` during the call. With
    /// `positional=True` each value is read with a positional read of its
    /// shard's file rather than through the mapping (nothing of the shards is
    /// mapped into the process: what a DataLoader worker wants).
    #[pyo3(signature = (indices, out, options, *, seed = 0, epoch = 0, positional = false))]
    #[allow(clippy::too_many_arguments)]
    fn get_images_into<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
        out: &Bound<'py, PyAny>,
        options: &Bound<'py, crate::images::PyImageOptions>,
        seed: u64,
        epoch: u64,
        positional: bool,
    ) -> PyResult<Vec<(usize, String)>> {
        let options = &options.get().options;
        self.decode_records_into(
            py,
            indices,
            positional,
            |count| crate::images::output(out, count * options.image_bytes()),
            |values, buffer| crate::images::decode_into(py, values, options, seed, epoch, buffer),
        )
    }

    /// Decodes the audio clips (WAV values) at `indices` into `out` as
    /// `options` (a `bcd.AudioOptions`) says, one after another
    /// (`len(indices) * options.clip_floats` float32s), on all cores without
    /// the GIL; record `i`'s random crop comes from `(seed, epoch, i)`.
    /// Returns `(frames, failures)`: the frames each clip kept (the rest of
    /// its slot is zeros; 0 for a failure) and the clips that failed as
    /// `(position in indices, message naming the record)`, their slots left as
    /// they were. Indices are checked as by `get_batch`. Nothing else may use
    /// `out` during the call. `positional` as for `get_images_into`.
    #[pyo3(signature = (indices, out, options, *, seed = 0, epoch = 0, positional = false))]
    #[allow(clippy::too_many_arguments)]
    fn get_audio_into<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
        out: &Bound<'py, PyAny>,
        options: &Bound<'py, crate::audio::PyAudioOptions>,
        seed: u64,
        epoch: u64,
        positional: bool,
    ) -> PyResult<crate::audio::Decoded> {
        let options = &options.get().options;
        self.decode_records_into(
            py,
            indices,
            positional,
            |count| crate::audio::output(out, count * options.clip_floats()),
            |values, buffer| crate::audio::decode_into(py, values, options, seed, epoch, buffer),
        )
    }

    /// The view `name` (`bcd view create`, `create_view`): a read-only
    /// ``bcd.View`` of its records. Raises KeyError if there is none,
    /// ValueError if it was evaluated over another state of this dataset (fewer
    /// records, or other ones) or its file is damaged.
    fn view<'py>(slf: &Bound<'py, Self>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let parts = slf.get().open_view(slf.py(), name)?;
        PyDataset::make_view(slf, parts)
    }

    /// Every view of the dataset, by name: a list of dicts with ``name``,
    /// ``records``, ``expression`` (None for one made from indices),
    /// ``evaluated_over`` (records of the dataset it was evaluated over) and
    /// ``problem`` (why it cannot be read, else None).
    fn views<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let text = self.list_views(py)?;
        py.import("json")?.call_method1("loads", (text,))
    }

    /// Creates the view `name` and returns it: the records the SQL expression
    /// `where` selects now (``"label = 'cat' AND width >= 256"``; fields, and
    /// the pseudo-columns ``index``, ``key``, ``size``), or the records
    /// `indices` (any one-dimensional integer array, e.g. computed with polars
    /// or DuckDB over ``fields()``; order and repeats do not matter). Raises
    /// FileExistsError if there is a view of that name (unless `replace`),
    /// ValueError for an expression naming a missing field or comparing
    /// incompatible types, IndexError for an index past the end.
    #[pyo3(signature = (name, *, r#where = None, indices = None, replace = false))]
    fn create_view<'py>(
        slf: &Bound<'py, Self>,
        name: &str,
        r#where: Option<&str>,
        indices: Option<&Bound<'py, PyAny>>,
        replace: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let parts = slf
            .get()
            .new_view(slf.py(), Some(name), r#where, indices, replace)?;
        PyDataset::make_view(slf, parts)
    }

    /// The records `indices` selects, or the SQL expression `where`, as a
    /// ``bcd.View`` that is not persisted.
    #[pyo3(signature = (indices = None, *, r#where = None))]
    fn select<'py>(
        slf: &Bound<'py, Self>,
        indices: Option<&Bound<'py, PyAny>>,
        r#where: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let parts = slf
            .get()
            .new_view(slf.py(), None, r#where, indices, false)?;
        PyDataset::make_view(slf, parts)
    }

    /// Extends the view `name` over the records appended since it was
    /// evaluated (only those are evaluated) and returns it.
    fn refresh_view<'py>(slf: &Bound<'py, Self>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let parts = slf.get().refresh_one_view(slf.py(), name)?;
        PyDataset::make_view(slf, parts)
    }

    /// Removes the view `name` (the records are not touched).
    fn drop_view(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        self.drop_one_view(py, name)
    }

    /// The index of the record holding `key`, or None (None too for a keyless
    /// dataset or a key that is not a buffer).
    fn _position(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
        if !self.keyed || !buffers::is_buffer(key) {
            return Ok(None);
        }
        let key = buffers::copy_bytes(key, Role::Key)?;
        let handle = self.handle(py)?;
        let found = handle.read(py).position(&key).map_err(to_py)?;
        Ok(found)
    }

    /// The statistics report of the records at `indices` (increasing): what
    /// ``View.stats()`` returns, as JSON text.
    fn _records_stats(&self, py: Python<'_>, indices: &Bound<'_, PyAny>) -> PyResult<String> {
        self.records_stats(py, indices)
    }

    /// Fetches the shards holding the records at `indices` (an epoch's order,
    /// such as a sampler's NumPy array) ahead of the reads, in the order the
    /// indices first reach them, in the background, and returns at once: how
    /// many of those shards were not cached yet. For a dataset in object
    /// storage; a local one has nothing to fetch (0, and the indices are not
    /// looked at).
    ///
    /// Up to `prefetch` shards (of `bcd.Dataset(uri, prefetch=8)`) are in
    /// flight at once in the whole cache; a read that needs a shard meanwhile
    /// goes first. With a `cache_limit`, shards fetched ahead and not read yet
    /// stay within half of it. A new call replaces the order this process was
    /// working on. Without any call, the first read that has to wait for a
    /// shard starts fetching the other shards in shard order (unless another
    /// process sharing the cache works on an order given to it, as a
    /// `bcd.torch.Sampler`'s epoch in the main process of a DataLoader).
    ///
    /// `wait=True` returns once every shard is in the cache (ValueError if they
    /// cannot all fit within `cache_limit`), raising the error that stopped
    /// them if one did. IndexError for an index out of range. An array of
    /// indices is read in place: it must not change during the call.
    #[pyo3(signature = (indices, *, wait = false))]
    fn prefetch(&self, py: Python<'_>, indices: &Bound<'_, PyAny>, wait: bool) -> PyResult<usize> {
        self.prefetch_indices(py, indices, wait)
    }

    /// Pickles as the path alone (with the cache settings, for a dataset in object
    /// storage): worker processes reopen the dataset.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let path = slf.get().path.bind(py).str()?;
        let verify = slf.get().verify;
        let arguments = match &slf.get().remote {
            None if !verify => PyTuple::new(py, [path.into_any()])?,
            None => PyTuple::new(
                py,
                [
                    path.into_any(),
                    py.None().into_bound(py),
                    py.None().into_bound(py),
                    py.None().into_bound(py),
                    verify.into_pyobject(py)?.to_owned().into_any(),
                ],
            )?,
            Some(remote) => PyTuple::new(
                py,
                [
                    path.into_any(),
                    remote.options.dir.clone().into_pyobject(py)?.into_any(),
                    remote.options.limit.into_pyobject(py)?.into_any(),
                    remote.options.prefetch.into_pyobject(py)?.into_any(),
                    verify.into_pyobject(py)?.to_owned().into_any(),
                ],
            )?,
        };
        PyTuple::new(py, [slf.get_type().into_any(), arguments.into_any()])
    }

    /// Threads a batch read (`get_batch`, `get_batch_into`) or an image decode
    /// (`get_images_into`) may use in this process: every core by default.
    /// `bcd.torch` sets 1 in each DataLoader worker (what torch sets for its own
    /// threads there), where the workers share the cores. At least 1.
    #[getter]
    fn threads(&self) -> usize {
        self.threads.load(Ordering::Relaxed)
    }

    #[setter]
    fn set_threads(&self, threads: usize) -> PyResult<()> {
        if threads == 0 {
            return Err(PyValueError::new_err("threads must be at least 1"));
        }
        self.threads.store(threads, Ordering::Relaxed);
        Ok(())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "bcd.Dataset({})",
            self.path.bind(py).str()?.repr()?
        ))
    }
}
