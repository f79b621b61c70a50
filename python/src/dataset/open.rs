//! Opening and creating a `bcd.Dataset`: a local directory, or a dataset in
//! object storage read through the shard cache; reopening it in a forked
//! child; and `refresh`.

use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use bcd::{Compression, CreateOptions, Dataset};
use bcd_remote::cache::{CacheOptions, RemoteCache};
use bcd_remote::Location;

use super::PyDataset;
use crate::args::{fspath, location};
use crate::errors::{remote_to_py, to_py};
use crate::handle::Handle;
use crate::options::{shard_size_arg, size_arg};

/// A dataset in object storage, read through a local shard cache.
pub(super) struct RemoteSource {
    pub(super) options: CacheOptions,
    /// The cache, which every process uses as its own (a forked child builds its
    /// own client and runtime, and prefetches on its own): the same object as
    /// the open dataset's source of data files, so a refresh updates what that
    /// dataset reads.
    cache: Arc<RemoteCache>,
}

impl RemoteSource {
    /// The cache of the dataset.
    pub(super) fn cache(&self) -> Arc<RemoteCache> {
        Arc::clone(&self.cache)
    }

    /// Opens the dataset again through the cache (syncing its mirror).
    fn open(&self) -> Result<Dataset, bcd_remote::RemoteError> {
        bcd_remote::cache::open_cache(self.cache()).map(|(dataset, _)| dataset)
    }
}

/// The dataset `opened`, checking every value read against its content hash
/// when `verify`.
fn open_verifying(opened: bcd::Result<Dataset>, verify: bool) -> bcd::Result<Dataset> {
    let mut dataset = opened?;
    if verify {
        dataset.set_verify_content(true)?;
    }
    Ok(dataset)
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

impl PyDataset {
    pub(super) fn open(
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        cache_dir: Option<&Bound<'_, PyAny>>,
        cache_limit: Option<&Bound<'_, PyAny>>,
        prefetch: Option<usize>,
        verify: bool,
    ) -> PyResult<PyDataset> {
        let cache_dir = cache_dir.filter(|d| !d.is_none());
        let cache_limit = cache_limit.filter(|l| !l.is_none());
        let uri = match location(py, path)? {
            Location::Remote(uri) => uri,
            Location::Local(_) => {
                if cache_dir.is_some() || cache_limit.is_some() || prefetch.is_some() {
                    return Err(PyValueError::new_err(
                        "cache_dir, cache_limit and prefetch apply only to datasets in object storage (s3://, gs://, az://)",
                    ));
                }
                let path = py.import("pathlib")?.getattr("Path")?.call1((path,))?;
                let dir: PathBuf = path.extract()?;
                let store = py
                    .detach(|| open_verifying(Dataset::open(&dir), verify))
                    .map_err(to_py)?;
                return Ok(PyDataset::with_store(
                    path.unbind(),
                    std::path::absolute(&dir).unwrap_or(dir),
                    store,
                    None,
                    verify,
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
            prefetch: prefetch.unwrap_or(CacheOptions::DEFAULT_PREFETCH),
        };
        let cache = py
            .detach(|| RemoteCache::new(uri.clone(), &options))
            .map_err(remote_to_py)?;
        let source = RemoteSource {
            options,
            cache: Arc::new(cache),
        };
        let store = py.detach(|| source.open()).map_err(remote_to_py)?;
        let store = open_verifying(Ok(store), verify).map_err(to_py)?;
        let dir = store.path().to_owned();
        let text = pyo3::types::PyString::new(py, &uri.to_string()).into_any();
        Ok(PyDataset::with_store(
            text.unbind(),
            dir,
            store,
            Some(source),
            verify,
        ))
    }

    pub(super) fn with_store(
        path: Py<PyAny>,
        dir: PathBuf,
        store: Dataset,
        remote: Option<RemoteSource>,
        verify: bool,
    ) -> PyDataset {
        PyDataset {
            path,
            dir,
            keyed: store.keyed(),
            compression: store.compression(),
            max_shard_size: store.manifest().max_shard_size,
            current: Mutex::new(Arc::new(Handle::new(store))),
            threads: AtomicUsize::new(std::thread::available_parallelism().map_or(1, |n| n.get())),
            remote,
            verify,
            positional: Default::default(),
        }
    }

    /// Opens the dataset again (in a forked child): by path, or through the cache.
    pub(super) fn reopen(&self, py: Python<'_>) -> PyResult<Dataset> {
        let store = match &self.remote {
            None => py.detach(|| Dataset::open(&self.dir)).map_err(to_py)?,
            Some(remote) => py.detach(|| remote.open()).map_err(remote_to_py)?,
        };
        open_verifying(Ok(store), self.verify).map_err(to_py)
    }

    /// `refresh`: picks up records committed since; how many were added.
    pub(super) fn refresh_handle(&self, py: Python<'_>) -> PyResult<usize> {
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
                .detach(|| bcd_remote::cache::refresh(dataset, &remote.cache()))
                .map_err(remote_to_py)?,
        }
        Ok(dataset.len() - before)
    }

    /// `create`: creates the empty dataset at `path` (the caller opens it).
    pub(super) fn create_directory(
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        keyed: bool,
        compression: CompressionArg,
        max_shard_size: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
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
        Ok(())
    }
}
