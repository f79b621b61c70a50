//! [`Dataset`]: create, open and read a dataset. Writing goes through
//! [`Dataset::begin_extend`] (see `extend.rs`).

use std::borrow::Cow;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::commit::{write_manifest, ManifestWriteError};
use crate::error::{Error, Result};
use crate::format::DEFAULT_MAX_SHARD_SIZE;
use crate::lz4_block::{self, Lz4Mode};
use crate::manifest::{Compression, Manifest, ManifestVersion};
use crate::mapping::ShardData;
use crate::reader::{FilePolicy, Index, Location, NewKeys};
use crate::shard::DataFiles;
use crate::storage::{FileSystem, Storage};

/// Settings of a new dataset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CreateOptions {
    /// Whether records carry unique keys. Default: `false`, as the reference.
    pub keyed: bool,
    /// How values are stored. Default: [`Compression::Lz4`], as the reference.
    pub compression: Compression,
    /// A new shard starts before a record that would take the current one past this
    /// many bytes. Default: 1 GiB, as the reference.
    pub max_shard_size: u64,
}

impl Default for CreateOptions {
    fn default() -> Self {
        CreateOptions {
            keyed: false,
            compression: Compression::Lz4,
            max_shard_size: DEFAULT_MAX_SHARD_SIZE,
        }
    }
}

/// Where a stored value lies on disk: see [`Dataset::value_location`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueLocation {
    /// Shard number: the value is in [`Dataset::shard_data_path`]`(shard)`.
    pub shard: u64,
    /// Byte offset of the value in the shard's data file.
    pub offset: u64,
    /// Stored size in bytes (an LZ4 block with its size prefix when compressed).
    pub len: u64,
}

/// An open dataset: its committed shards checked, its keys indexed. Shard files
/// are loaded (mapped, or read when small) when first read.
///
/// Reads take `&self` and the type is `Sync`, so threads can share one handle.
/// Extending takes `&mut self`.
#[derive(Debug)]
pub struct Dataset {
    pub(crate) dir: PathBuf,
    pub(crate) manifest: Manifest,
    pub(crate) index: Index,
    pub(crate) storage: Arc<dyn Storage>,
    /// Where data files come from, for a mirror of a remote dataset.
    pub(crate) data_files: Option<Arc<dyn DataFiles>>,
    pub(crate) lz4_mode: Lz4Mode,
    pub(crate) threads: usize,
    /// Memory for an extend's or merge's duplicate checks; `None`: the default.
    memory_limit: Option<u64>,
    /// Whether reads check values against their content hashes.
    pub(crate) verify_content_on_read: bool,
    options: OpenOptions,
    /// Shard files open for positional reads (`unmapped.rs`).
    pub(crate) open_shards: crate::unmapped::OpenShards,
}

/// How a dataset is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenOptions {
    /// Write the persisted index (`.bcd-index`) when the dataset has at least this
    /// many records and the file is missing or does not cover every shard, on open
    /// and after each extend. Default: 100,000 records, where building the index
    /// in memory starts to cost more than checking the file.
    pub index_file_min_records: Option<u64>,
    /// Also write it when the shards hold at least this many bytes. Default: 256
    /// MiB: reading the keys spread through that much data is what makes opening
    /// slow when it is not in the page cache.
    ///
    /// With both `None` the file is never written (a current one is still used).
    pub index_file_min_bytes: Option<u64>,
    /// An existing file is rewritten to cover records committed after it only
    /// once there are this many (or `index_file_min_bytes` of them); until then,
    /// opening indexes those from their shards. Rewriting writes the whole file
    /// (270 MB at 10M keys), so small appends to a large dataset do not each pay
    /// for it. Default: 65,536 records.
    pub index_file_min_tail: u64,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            index_file_min_records: Some(crate::format::DEFAULT_INDEX_FILE_MIN_RECORDS),
            index_file_min_bytes: Some(crate::format::DEFAULT_INDEX_FILE_MIN_BYTES),
            index_file_min_tail: crate::format::DEFAULT_INDEX_FILE_MIN_TAIL,
        }
    }
}

impl Dataset {
    /// Creates an empty dataset in `dir`, which must be missing or empty, or hold
    /// only the staging directory `_staging/` of a distributed job and what a
    /// writer killed while creating a dataset there left (the lock, a temporary
    /// manifest, shard files and sidecars: removed first). Another file is
    /// refused ([`Error::ForeignFile`]), a manifest too ([`Error::DirectoryNotEmpty`]).
    pub fn create(dir: impl AsRef<Path>, options: CreateOptions) -> Result<Dataset> {
        Self::create_with_storage(dir, options, Arc::new(FileSystem))
    }

    /// [`Dataset::create`] writing through `storage` (used to inject faults in tests).
    pub fn create_with_storage(
        dir: impl AsRef<Path>,
        options: CreateOptions,
        storage: Arc<dyn Storage>,
    ) -> Result<Dataset> {
        let dir = dir.as_ref();
        if options.max_shard_size == 0 {
            return Err(Error::InvalidOption(
                "max_shard_size must be positive".into(),
            ));
        }
        let existed = dir.is_dir();
        fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
        if !existed {
            // The new directory's own entry must be durable too.
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                storage
                    .sync_dir(parent)
                    .map_err(|e| Error::io("fsync directory", parent, e))?;
            }
        }
        let no_manifest = || match fs::symlink_metadata(dir.join(crate::format::MANIFEST_NAME)) {
            Ok(_) => Err(Error::DirectoryNotEmpty {
                path: dir.to_owned(),
            }),
            Err(_) => Ok(()),
        };
        no_manifest()?;
        // A distributed job stages its parts inside the dataset directory before
        // the dataset exists (FORMAT.md, "Staging"); a run killed while creating
        // a dataset here left files of ours (which a re-run replaces), and
        // anything else is refused, by name (before the lock file is made).
        let mut leftovers = crate::teardown::leftovers_without_manifest(dir)?;
        // Held while the leftovers go, so no writer still running loses its
        // files; they are listed again under it, as one that held it may have
        // committed meanwhile.
        let _lock = match leftovers.is_empty() {
            true => None,
            false => {
                let lock = crate::commit::WriterLock::acquire(dir)?;
                no_manifest()?;
                leftovers = crate::teardown::leftovers_without_manifest(dir)?;
                Some(lock)
            }
        };
        for leftover in leftovers
            .iter()
            .filter(|p| !p.ends_with(crate::format::LOCK_NAME))
        {
            storage
                .remove(leftover)
                .map_err(|e| Error::io("remove leftover", leftover, e))?;
        }
        let spill = dir.join(crate::format::SPILL_DIR);
        if spill.is_dir() {
            storage
                .remove_dir(&spill)
                .map_err(|e| Error::io("remove leftover", &spill, e))?;
        }
        let manifest = Manifest {
            keyed: options.keyed,
            compression: options.compression,
            max_shard_size: options.max_shard_size,
            shards: 0,
            version: ManifestVersion::V0_3,
        };
        if let Err(error) = write_manifest(storage.as_ref(), dir, &manifest) {
            // A dataset that could not be made is not left behind half made: an
            // empty one whose manifest may not survive a crash is removed again
            // (nothing else is in it), and so is a directory this call made.
            let error = match error {
                ManifestWriteError::NotCommitted(e) => e,
                ManifestWriteError::NotDurable(Error::CommittedNotDurable { path, source }) => {
                    let _ = storage.remove(&dir.join(crate::format::MANIFEST_NAME));
                    Error::io("fsync directory", &path, source)
                }
                ManifestWriteError::NotDurable(e) => e,
            };
            if !existed {
                let _ = fs::remove_dir(dir);
            }
            return Err(error);
        }
        Self::open_with_storage(dir, storage.clone()).inspect_err(|_| {
            // Nothing but the manifest was made: undo it, so a failed create
            // leaves no dataset behind for the caller to clean up.
            let _ = storage.remove(&dir.join(crate::format::MANIFEST_NAME));
            if !existed {
                let _ = fs::remove_dir(dir);
            }
        })
    }

    /// Opens an existing dataset, validating every committed shard: index lengths,
    /// sizes against data lengths, missing shards and duplicate keys.
    pub fn open(dir: impl AsRef<Path>) -> Result<Dataset> {
        Self::open_with_storage(dir, Arc::new(FileSystem))
    }

    /// [`Dataset::open`] with extends writing through `storage`.
    pub fn open_with_storage(dir: impl AsRef<Path>, storage: Arc<dyn Storage>) -> Result<Dataset> {
        let dir = dir.as_ref().to_owned();
        Self::open_with(dir, OpenOptions::default(), storage)
    }

    /// [`Dataset::open`] with options, extends writing through `storage`.
    pub fn open_with(
        dir: impl AsRef<Path>,
        options: OpenOptions,
        storage: Arc<dyn Storage>,
    ) -> Result<Dataset> {
        Self::open_inner(dir.as_ref(), options, storage, None)
    }

    /// Opens the dataset whose manifest and `.idx` files are in `dir` and whose data
    /// files come from `data_files`, on first read of each shard (a local cache of
    /// a dataset in object storage). Such a handle is for reading: `dir` is a
    /// mirror, not the dataset, so extending it is refused.
    pub fn open_with_data_files(
        dir: impl AsRef<Path>,
        options: OpenOptions,
        data_files: Arc<dyn DataFiles>,
    ) -> Result<Dataset> {
        Self::open_inner(
            dir.as_ref(),
            options,
            Arc::new(FileSystem),
            Some(data_files),
        )
    }

    fn open_inner(
        dir: &Path,
        options: OpenOptions,
        storage: Arc<dyn Storage>,
        data_files: Option<Arc<dyn DataFiles>>,
    ) -> Result<Dataset> {
        let dir = dir.to_owned();
        let manifest = Manifest::read(&dir)?;
        let index = Index::open(&dir, manifest.keyed, manifest.shards, data_files.clone())?;
        let mut dataset = Dataset {
            dir,
            manifest,
            index,
            storage,
            data_files,
            lz4_mode: Lz4Mode::default(),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_limit: None,
            verify_content_on_read: false,
            options,
            open_shards: Default::default(),
        };
        dataset.maybe_persist_index();
        Ok(dataset)
    }

    /// Writes the persisted index when records are not covered by it and the
    /// dataset is large enough. Best effort: a read-only directory, a full disk or
    /// a race with another writer of the file leave the in-memory index in use.
    fn maybe_persist_index(&mut self) {
        if self.index.wants_file(self.file_policy()) {
            let _ = self.index.persist(self.storage.as_ref(), &self.dir);
        }
    }

    /// When the persisted index is (re)written, from the open options.
    fn file_policy(&self) -> FilePolicy {
        FilePolicy {
            min_records: self.options.index_file_min_records,
            min_bytes: self.options.index_file_min_bytes,
            min_tail: self.options.index_file_min_tail,
        }
    }

    /// Whether records are located through the persisted index file
    /// (`.bcd-index`, see FORMAT.md) rather than an index built in memory.
    pub fn uses_index_file(&self) -> bool {
        self.index.uses_file()
    }

    /// Sets how values are compressed by later extends of an LZ4 dataset. The
    /// default, high compression at level 9, reproduces the reference's bytes.
    pub fn set_lz4_mode(&mut self, mode: Lz4Mode) {
        self.lz4_mode = mode;
    }

    /// Sets how many threads compress values in [`Dataset::extend`],
    /// [`Dataset::extend_values`] and the batch pushes of an extend. Default: the
    /// number of available cores. The bytes written do not depend on it.
    pub fn set_threads(&mut self, threads: usize) {
        self.threads = threads.max(1);
    }

    /// Sets how much memory the duplicate checks of later extends and merges may
    /// hold (the fingerprints of the keys, and with
    /// [`Dedup::Content`](crate::Dedup::Content) of the values, they have
    /// written): past it they spill sorted runs to the dataset's `.bcd-spill/`
    /// directory and keep a summary of them, so a check needs about this much
    /// memory whatever the number of records. `None` restores the default, a
    /// quarter of the machine's memory ([`default_memory_limit`]); values below
    /// 64 KiB count as 64 KiB.
    pub fn set_memory_limit(&mut self, bytes: Option<u64>) {
        self.memory_limit = bytes;
    }

    /// The memory limit of the duplicate checks (see [`Dataset::set_memory_limit`]).
    pub fn memory_limit(&self) -> u64 {
        self.memory_limit
            .unwrap_or_else(default_memory_limit)
            .max(crate::key_set::MIN_MEMORY_LIMIT)
    }

    /// Picks up shards committed since this handle was opened (by another handle or
    /// process). On error the handle is unchanged.
    pub fn refresh(&mut self) -> Result<()> {
        let manifest = Manifest::read(&self.dir)?;
        self.apply_manifest(manifest)
    }

    pub(crate) fn apply_manifest(&mut self, manifest: Manifest) -> Result<()> {
        self.apply_manifest_with(manifest, NewKeys::Read)
    }

    /// [`Dataset::apply_manifest`] for shards whose keys a writer already
    /// checked: their hashes are not read back (see [`Index::add_shards`]).
    pub(crate) fn apply_manifest_with(
        &mut self,
        manifest: Manifest,
        keys: NewKeys<'_>,
    ) -> Result<()> {
        let changed = |reason: String| Error::ChangedOnDisk {
            path: self.dir.join(crate::format::MANIFEST_NAME),
            reason,
        };
        if manifest.keyed != self.manifest.keyed
            || manifest.compression != self.manifest.compression
        {
            return Err(changed("its keyed or compression setting differs".into()));
        }
        if manifest.shards < self.index.shard_count() {
            return Err(changed(format!(
                "the manifest now counts {} shards, fewer than the {} loaded",
                manifest.shards,
                self.index.shard_count()
            )));
        }
        let file = (self.storage.as_ref(), self.file_policy());
        self.index
            .add_shards(&self.dir, manifest.shards, keys, Some(file))?;
        self.manifest = manifest;
        // Shards whose keys came sorted had the index file written with them if
        // the policy wanted it (once: a failure is not retried).
        if matches!(keys, NewKeys::Read) {
            self.maybe_persist_index();
        }
        Ok(())
    }

    /// The dataset's directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The manifest as last read or written.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Whether records carry keys.
    pub fn keyed(&self) -> bool {
        self.manifest.keyed
    }

    /// How values are stored.
    pub fn compression(&self) -> Compression {
        self.manifest.compression
    }

    /// Number of committed shards.
    pub fn shards(&self) -> u64 {
        self.manifest.shards
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether there are no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Turns a signed index into a position: negative indexes count from the end
    /// (`-1` is the last record), as in Python.
    pub fn resolve_index(&self, index: i64) -> Result<usize> {
        let len = self.len() as i64;
        let resolved = if index < 0 { index + len } else { index };
        if (0..len).contains(&resolved) {
            Ok(resolved as usize)
        } else {
            Err(Error::IndexOutOfRange {
                index,
                len: len as u64,
            })
        }
    }

    pub(crate) fn check_index(&self, index: usize) -> Result<()> {
        if index < self.len() {
            Ok(())
        } else {
            Err(Error::IndexOutOfRange {
                index: i64::try_from(index).unwrap_or(i64::MAX),
                len: self.len() as u64,
            })
        }
    }

    fn require_keyed(&self) -> Result<()> {
        if self.keyed() {
            Ok(())
        } else {
            Err(Error::WrongKeying(
                "key lookup on a keyless dataset: read records by index instead",
            ))
        }
    }

    /// Whether `key` is in the dataset; always `false` for a keyless dataset, as in
    /// the reference.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.keyed() && self.index.position(key).is_some()
    }

    /// The record number of `key`. Errors on a keyless dataset.
    pub fn position(&self, key: &[u8]) -> Result<Option<usize>> {
        self.require_keyed()?;
        Ok(self.index.position(key))
    }

    /// The value of `key`, or `None` if absent. Errors on a keyless dataset.
    pub fn get(&self, key: &[u8]) -> Result<Option<Cow<'_, [u8]>>> {
        match self.position(key)? {
            Some(index) => self.at(index).map(Some),
            None => Ok(None),
        }
    }

    /// The value at position `index`: borrowed from the mapping when uncompressed,
    /// decompressed into a new buffer otherwise.
    ///
    /// An LZ4 value stored as a literal-only block (the adaptive mode's form for
    /// incompressible values) is its own bytes in the mapping, and borrowed too.
    pub fn at(&self, index: usize) -> Result<Cow<'_, [u8]>> {
        self.check_index(index)?;
        let location = self.index.locate(index)?;
        let value = match self.compression() {
            Compression::None => Cow::Borrowed(location.stored),
            Compression::Lz4 => match lz4_block::literal_range(location.stored) {
                Some(range) => Cow::Borrowed(&location.stored[range]),
                None => lz4_block::decompress(location.stored)
                    .map(Cow::Owned)
                    .map_err(|e| Self::corrupt(index, &location, e))?,
            },
        };
        self.check_content(index, &value)?;
        Ok(value)
    }

    /// The value at `index`, decompressing into `buffer` when compressed (the buffer
    /// only ever grows, so a reused one stops allocating) and borrowing from the
    /// mapping when not.
    pub fn at_with_buffer<'a>(&'a self, index: usize, buffer: &'a mut Vec<u8>) -> Result<&'a [u8]> {
        let value = self.read_value(index, buffer)?;
        self.check_content(index, value)?;
        Ok(value)
    }

    /// [`Dataset::at_with_buffer`] without the content check.
    pub(crate) fn read_value<'a>(
        &'a self,
        index: usize,
        buffer: &'a mut Vec<u8>,
    ) -> Result<&'a [u8]> {
        self.check_index(index)?;
        let location = self.index.locate(index)?;
        match self.compression() {
            Compression::None => Ok(location.stored),
            Compression::Lz4 => {
                if let Some(range) = lz4_block::literal_range(location.stored) {
                    return Ok(&location.stored[range]);
                }
                let n = lz4_block::decompress_into(location.stored, buffer)
                    .map_err(|e| Self::corrupt(index, &location, e))?;
                Ok(&buffer[..n])
            }
        }
    }

    /// The size of the value at `index` once decompressed (its stored size when
    /// uncompressed): how long a buffer [`Dataset::read_into`] needs.
    pub fn value_len(&self, index: usize) -> Result<usize> {
        self.check_index(index)?;
        let location = self.index.locate(index)?;
        self.value_len_at(index, &location)
    }

    fn value_len_at(&self, index: usize, location: &Location<'_>) -> Result<usize> {
        match self.compression() {
            Compression::None => Ok(location.stored.len()),
            Compression::Lz4 => lz4_block::declared_len(location.stored)
                .map_err(|e| Self::corrupt(index, location, e)),
        }
    }

    /// Writes the value at `index` into `out`, which must be exactly
    /// [`Dataset::value_len`] bytes: for callers that own the destination (a
    /// Python `bytes` object, a pinned buffer) and want no intermediate copy.
    pub fn read_into(&self, index: usize, out: &mut [u8]) -> Result<()> {
        self.check_index(index)?;
        let location = self.index.locate(index)?;
        self.decode_stored(index, &location, location.stored, out)?;
        self.check_content(index, out)
    }

    /// The value of `key` via [`Dataset::at_with_buffer`].
    pub fn get_with_buffer<'a>(
        &'a self,
        key: &[u8],
        buffer: &'a mut Vec<u8>,
    ) -> Result<Option<&'a [u8]>> {
        match self.position(key)? {
            Some(index) => self.at_with_buffer(index, buffer).map(Some),
            None => Ok(None),
        }
    }

    /// The key at position `index`. Errors on a keyless dataset.
    pub fn key_at(&self, index: usize) -> Result<&[u8]> {
        if !self.keyed() {
            return Err(Error::WrongKeying(
                "keys are disabled for this dataset: it is keyless",
            ));
        }
        self.check_index(index)?;
        Ok(self.index.locate(index)?.key)
    }

    /// The value at `index` as stored on disk (an LZ4 block with its size prefix,
    /// for compressed datasets), borrowed from the mapping.
    pub fn stored_at(&self, index: usize) -> Result<&[u8]> {
        self.check_index(index)?;
        Ok(self.index.locate(index)?.stored)
    }

    /// Where the stored value at `index` lies: which shard's data file, and the byte
    /// range in it. Lets a caller map or read the bytes itself (the Python package
    /// hands out zero-copy views of uncompressed values this way).
    pub fn value_location(&self, index: usize) -> Result<ValueLocation> {
        self.check_index(index)?;
        let location = self.index.locate(index)?;
        Ok(ValueLocation {
            shard: location.shard_id,
            offset: location.value_offset,
            len: location.stored.len() as u64,
        })
    }

    /// Where the value at `index` itself lies, when the shard holds it verbatim:
    /// always for uncompressed datasets, and for LZ4 values stored as literal-only
    /// blocks (see [`lz4_block::literal_range`]); `None` when it must be
    /// decompressed. Lets a caller hand out a view of the bytes instead of a copy
    /// (the Python package's zero-copy values).
    ///
    /// The bytes are not checked against their content hash: a caller handing
    /// them out while [`Dataset::verifies_content`] checks them first
    /// ([`Dataset::at`] borrows such a value and checks it).
    pub fn verbatim_location(&self, index: usize) -> Result<Option<ValueLocation>> {
        self.check_index(index)?;
        let location = self.index.locate(index)?;
        let range = match self.compression() {
            Compression::None => 0..location.stored.len(),
            Compression::Lz4 => match lz4_block::literal_range(location.stored) {
                Some(range) => range,
                None => return Ok(None),
            },
        };
        Ok(Some(ValueLocation {
            shard: location.shard_id,
            offset: location.value_offset + range.start as u64,
            len: range.len() as u64,
        }))
    }
    /// The bytes of shard `shard`'s data file (the [`ValueLocation::shard`] of a
    /// value), held for as long as the caller keeps them, after this handle is
    /// dropped too: for zero-copy views whose lifetime the borrow checker cannot
    /// follow (the Python package's memoryviews). Shards are loaded on first use.
    pub fn shard_data(&self, shard: u64) -> Result<ShardData> {
        self.index.shard_data(shard)
    }

    /// The data file (`NNNNNN.bin`) of shard `shard`.
    pub fn shard_data_path(&self, shard: u64) -> PathBuf {
        crate::format::shard_paths(&self.dir, shard).0
    }

    /// Total size of the committed shard data files (keys plus stored values).
    pub fn stored_bytes(&self) -> u64 {
        self.index.shards().iter().map(|s| s.data_len()).sum()
    }

    pub(crate) fn corrupt(
        index: usize,
        location: &Location<'_>,
        error: lz4_block::BlockError,
    ) -> Error {
        Error::CorruptValue {
            path: location.shard.path.clone(),
            record: index as u64 - location.shard.first,
            index: index as u64,
            offset: location.value_offset,
            reason: error.0,
        }
    }
}

/// The default memory limit of the duplicate checks: a quarter of the
/// machine's physical memory (4 GiB where it cannot be read).
pub fn default_memory_limit() -> u64 {
    physical_memory().map_or(4 << 30, |bytes| bytes / 4)
}

#[cfg(unix)]
fn physical_memory() -> Option<u64> {
    // SAFETY: sysconf only reads its integer argument.
    let (pages, page_size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    match (u64::try_from(pages), u64::try_from(page_size)) {
        (Ok(pages), Ok(size)) if pages > 0 && size > 0 => pages.checked_mul(size),
        _ => None,
    }
}

#[cfg(not(unix))]
fn physical_memory() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_location_points_at_the_stored_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let options = CreateOptions {
            keyed: true,
            compression: Compression::None,
            max_shard_size: 10,
        };
        let mut dataset = Dataset::create(dir.path().join("d"), options).unwrap();
        dataset
            .extend([(b"ab".as_slice(), b"value-one".as_slice()), (b"c", b"v2")])
            .unwrap();
        let second = dataset.value_location(1).unwrap();
        assert_eq!(
            second,
            ValueLocation {
                shard: 1,
                offset: 1,
                len: 2
            }
        );
        let bytes = fs::read(dataset.shard_data_path(second.shard)).unwrap();
        assert_eq!(&bytes[1..3], b"v2");
        assert!(dataset.value_location(2).is_err());
    }

    #[test]
    fn read_into_fills_a_buffer_of_exactly_the_value_len() {
        let dir = tempfile::tempdir().unwrap();
        for compression in [Compression::None, Compression::Lz4] {
            let path = dir.path().join(format!("{compression:?}"));
            let options = CreateOptions {
                compression,
                ..Default::default()
            };
            let mut dataset = Dataset::create(&path, options).unwrap();
            let value = b"abcabcabcabcabcabcabcabc".repeat(10);
            dataset.extend_values([&value[..], b""]).unwrap();
            assert_eq!(dataset.value_len(0).unwrap(), value.len());
            let mut out = vec![0; value.len()];
            dataset.read_into(0, &mut out).unwrap();
            assert_eq!(out, value);
            assert_eq!(dataset.value_len(1).unwrap(), 0);
            dataset.read_into(1, &mut []).unwrap();
            let error = dataset.read_into(0, &mut [0; 3]).unwrap_err();
            assert!(matches!(error, Error::InvalidOption(_)), "{error}");
            assert!(dataset.read_into(2, &mut []).is_err());

            // Prefetching changes nothing read and ignores indexes out of range.
            dataset.prefetch([1, 0, 7, usize::MAX]);
            assert_eq!(&*dataset.at(0).unwrap(), &value[..]);
        }
    }

    #[test]
    fn literal_only_values_are_read_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let mut dataset = Dataset::create(dir.path().join("d"), CreateOptions::default()).unwrap();
        dataset.set_lz4_mode(Lz4Mode::Adaptive(9));
        // Noise is stored as a literal-only block, text is compressed.
        let noise = crate::test_bytes::noise(40_000, 0x9E37_79B9_7F4A_7C15);
        let text = b"lorem ipsum dolor sit amet ".repeat(2000);
        dataset.extend_values([&noise[..], &text[..], b""]).unwrap();
        let dataset = Dataset::open(dir.path().join("d")).unwrap();

        assert!(matches!(dataset.at(0).unwrap(), Cow::Borrowed(v) if v == &noise[..]));
        let location = dataset.verbatim_location(0).unwrap().unwrap();
        let stored = dataset.value_location(0).unwrap();
        assert_eq!(location.len, noise.len() as u64);
        assert!(location.offset > stored.offset);
        assert_eq!(location.offset + location.len, stored.offset + stored.len);
        let shard = fs::read(dataset.shard_data_path(location.shard)).unwrap();
        let start = location.offset as usize;
        assert_eq!(&shard[start..start + noise.len()], &noise[..]);
        let mut buffer = Vec::new();
        assert_eq!(dataset.at_with_buffer(0, &mut buffer).unwrap(), &noise[..]);
        assert!(buffer.is_empty(), "no copy into the buffer");

        assert_eq!(dataset.verbatim_location(1).unwrap(), None);
        assert!(matches!(dataset.at(1).unwrap(), Cow::Owned(v) if v == text));
        assert_eq!(dataset.verbatim_location(2).unwrap().unwrap().len, 0);
        assert!(dataset.verbatim_location(3).is_err());
    }
}
