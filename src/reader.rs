//! The index of a dataset's committed shards: where each record starts, its sizes
//! and a table from key to record number. Keys are never copied.
//!
//! Sizes are read from the `.idx` files. Starts and the key table come from
//! the persisted index file (`index_file.rs`) for the shards it covers, and from
//! memory for the shards after those (all of them when there is no usable file):
//! the "tail", which [`Index::persist`] folds into a new file.
//!
//! Files are loaded (mapped, or read when small: `mapping.rs`) on first use, not
//! on open: opening checks their sizes, and a shard nobody reads costs neither a
//! mapping nor a descriptor.

use std::path::{Path, PathBuf};

use crate::error::{DisplayKey, Error, Result};
use crate::format::{
    idx_records, index_fields, read_idx, record_sizes, shard_paths, INDEX_FIELD_SIZE,
};
use crate::index_file::{self, Each, IndexFile, ShardStamp};
use crate::key_table::KeyTable;
use crate::mapping::{open_regular, Mapping, ShardData};
use crate::shard::{open_error, stat_shard, Shard};
use crate::storage::Storage;

mod persist;

/// Bytes of a mapped file read through in order after which its pages are given
/// back ([`Mapping::release`]): reading a large file costs no more memory than
/// this.
const RELEASE_EVERY: u64 = 32 << 20;

/// Where records are, without the key table (split out so the table can be
/// updated while keys are read through the layout).
#[derive(Debug)]
struct Layout {
    keyed: bool,
    /// Where data files come from when not from the directory.
    data_files: Option<std::sync::Arc<dyn crate::shard::DataFiles>>,
    shards: Vec<Shard>,
    len: usize,
    /// Covers records `0..file.records()` and shards `0..file.shards()`.
    file: Option<IndexFile>,
    /// Starts of the records after the file's.
    tail_starts: Vec<u64>,
}

/// Record locations across all loaded shards.
#[derive(Debug)]
pub(crate) struct Index {
    layout: Layout,
    /// `(hash, record number)` of the tail's keys: the stored hash lets the table
    /// grow, and the file be written, without reading keys back from the shards.
    tail_keys: KeyTable,
}

/// Where a record lives.
pub(crate) struct Location<'a> {
    pub(crate) shard: &'a Shard,
    /// The shard's data file.
    pub(crate) data: &'a Mapping,
    /// The shard's number.
    pub(crate) shard_id: u64,
    pub(crate) key: &'a [u8],
    pub(crate) stored: &'a [u8],
    /// Byte offset of the stored value in the shard's data file.
    pub(crate) value_offset: u64,
}

/// Records at least this large on average have their keys read page by page,
/// without read-ahead (see `Index::read_keys`).
const SPARSE_KEYS_RECORD_SIZE: u64 = 16 * 1024;

impl Layout {
    fn file_records(&self) -> usize {
        self.file.as_ref().map_or(0, |f| f.records() as usize)
    }

    /// The record at `index`, which must be `< len`. Errors only if the index file
    /// was tampered with (tail locations were checked when their shards were
    /// added), or if loading the shard's files fails.
    fn locate(&self, index: usize) -> Result<Location<'_>> {
        let shard_id = self
            .shards
            .partition_point(|s| s.first <= index as u64)
            .saturating_sub(1);
        let shard = &self.shards[shard_id];
        let local = index - shard.first as usize;
        let (key_size, value_size) = record_sizes(shard.sizes()?, self.keyed, local);
        let file_records = self.file_records();
        let start = match &self.file {
            Some(file) if index < file_records => {
                self.check_covered(file, shard_id)?;
                file.start(index)
            }
            _ => self.tail_starts[index - file_records],
        };
        let key_end = start.checked_add(key_size);
        let value_end = key_end.and_then(|k| k.checked_add(value_size));
        let (Some(key_end), Some(value_end)) = (key_end, value_end) else {
            return Err(self.bad_location(shard, local));
        };
        let (start, key_end, value_end) = (start as usize, key_end as usize, value_end as usize);
        let data = shard.data()?;
        match (data.get(start..key_end), data.get(key_end..value_end)) {
            (Some(key), Some(stored)) => Ok(Location {
                shard,
                data,
                shard_id: shard_id as u64,
                key,
                stored,
                value_offset: key_end as u64,
            }),
            _ => Err(self.bad_location(shard, local)),
        }
    }

    /// Checks, once per shard, that the index file locates shard `id`'s records
    /// where its sizes do, so that a damaged or hostile file can never present one
    /// record as another.
    fn check_covered(&self, file: &IndexFile, id: usize) -> Result<()> {
        let shard = &self.shards[id];
        let checked = match shard.starts_checked.get() {
            Some(checked) => checked,
            None => {
                let sizes = shard.sizes()?;
                shard.starts_checked.get_or_init(|| {
                    file.check_starts(id as u64, sizes, self.keyed, shard.data_len())
                })
            }
        };
        checked.clone().map_err(|reason| Error::CorruptIndexFile {
            path: IndexFile::path(shard.path.parent().unwrap_or(Path::new("."))),
            reason,
        })
    }

    fn bad_location(&self, shard: &Shard, local: usize) -> Error {
        Error::CorruptShard {
            path: shard.path.clone(),
            reason: format!(
                "record {local} lies outside the data file according to the persisted index {}; delete that file to rebuild it",
                IndexFile::path(shard.path.parent().unwrap_or(Path::new("."))).display()
            ),
        }
    }

    fn key(&self, index: usize) -> Option<&[u8]> {
        self.locate(index).ok().map(|l| l.key)
    }
}

impl Index {
    pub(crate) fn new(keyed: bool) -> Index {
        Index {
            layout: Layout {
                keyed,
                data_files: None,
                shards: Vec::new(),
                len: 0,
                file: None,
                tail_starts: Vec::new(),
            },
            tail_keys: KeyTable::default(),
        }
    }

    /// Indexes shards `0..count` of `dir`, through its index file where that is
    /// usable.
    pub(crate) fn open(
        dir: &Path,
        keyed: bool,
        count: u64,
        data_files: Option<std::sync::Arc<dyn crate::shard::DataFiles>>,
    ) -> Result<Index> {
        if let Some(file) = IndexFile::open(dir, keyed, count) {
            let mut index = Index::new(keyed);
            index.layout.data_files = data_files.clone();
            if index.adopt(dir, file).is_ok() {
                index.add_shards(dir, count, NewKeys::Read, None)?;
                return Ok(index);
            }
        }
        let mut index = Index::new(keyed);
        index.layout.data_files = data_files;
        index.add_shards(dir, count, NewKeys::Read, None)?;
        Ok(index)
    }

    /// The shard `id` whose files are `data_path` (and a stamp taken), with the
    /// dataset's source of data files.
    fn shard(
        &self,
        id: u64,
        data_path: PathBuf,
        first: u64,
        stamp: ShardStamp,
        sizes: Option<Mapping>,
    ) -> Shard {
        let mut shard = Shard::new(data_path, first, stamp, sizes);
        shard.source = self.layout.data_files.clone().map(|files| (id, files));
        shard
    }

    /// The stamp of shard `id`: the data file's from the source of data files when
    /// there is one, else from the directory.
    fn stamp(
        &self,
        id: u64,
        data_path: &Path,
        index: &std::fs::Metadata,
        shards: u64,
    ) -> Result<ShardStamp> {
        match &self.layout.data_files {
            Some(files) => crate::shard::stamp_from(files.as_ref(), id, data_path, index, shards),
            None => Ok(ShardStamp::of(&stat_shard(data_path, shards)?, index)),
        }
    }

    /// Adds the shards `file` covers, if they are the files it describes.
    fn adopt(&mut self, dir: &Path, file: IndexFile) -> Result<()> {
        for id in 0..file.shards() {
            let (data_path, index_path) = shard_paths(dir, id);
            let index_meta = stat_shard(&index_path, file.shards())?;
            let stamp = self.stamp(id, &data_path, &index_meta, file.shards())?;
            if file.stamp(id) != Some(stamp) {
                return Err(Error::ChangedOnDisk {
                    path: IndexFile::path(dir),
                    reason: format!("shard {id} is not the one it describes"),
                });
            }
            let shard = self.shard(id, data_path, file.first(id), stamp, None);
            self.layout.shards.push(shard);
        }
        self.layout.len = file.records() as usize;
        self.layout.file = Some(file);
        Ok(())
    }

    pub(crate) fn len(&self) -> usize {
        self.layout.len
    }

    pub(crate) fn shard_count(&self) -> u64 {
        self.layout.shards.len() as u64
    }

    pub(crate) fn shards(&self) -> &[Shard] {
        &self.layout.shards
    }

    /// The data file of shard `id`, loaded if it was not, for views that outlive
    /// the borrow of the dataset.
    pub(crate) fn shard_data(&self, id: u64) -> Result<ShardData> {
        let shard = usize::try_from(id)
            .ok()
            .and_then(|id| self.layout.shards.get(id))
            .ok_or_else(|| {
                Error::InvalidOption(format!(
                    "shard {id} out of range for a dataset of {} shards",
                    self.layout.shards.len()
                ))
            })?;
        Ok(ShardData(shard.data()?.clone()))
    }

    /// Whether the records are located through a persisted index file.
    pub(crate) fn uses_file(&self) -> bool {
        self.layout.file.is_some()
    }

    /// Records not covered by the index file.
    pub(crate) fn tail_len(&self) -> usize {
        self.layout.len - self.layout.file_records()
    }

    /// Bytes of the data files of the shards the index file does not cover.
    pub(crate) fn tail_stored_bytes(&self) -> u64 {
        let covered = self.layout.file.as_ref().map_or(0, |f| f.shards() as usize);
        self.layout.shards[covered..]
            .iter()
            .map(Shard::data_len)
            .sum()
    }

    /// The record at `index`, which must be `< len()`.
    pub(crate) fn locate(&self, index: usize) -> Result<Location<'_>> {
        self.layout.locate(index)
    }

    /// The hash the key table uses for `key`.
    pub(crate) fn hash_key(&self, key: &[u8]) -> u64 {
        index_file::hash_key(key)
    }

    /// Record number of `key`, if present.
    pub(crate) fn position(&self, key: &[u8]) -> Option<usize> {
        self.position_hashed(self.hash_key(key), key)
    }

    /// [`Index::position`] of `key`, whose [`Index::hash_key`] is `hash`.
    pub(crate) fn position_hashed(&self, hash: u64, key: &[u8]) -> Option<usize> {
        find(&self.layout, &self.tail_keys, hash, key)
    }

    /// The records whose key hashes to `hash` (candidates: compare the keys).
    pub(crate) fn candidates(&self, hash: u64) -> impl Iterator<Item = u64> + '_ {
        let file = self
            .layout
            .file
            .iter()
            .flat_map(move |f| f.candidates(hash));
        file.chain(self.tail_keys.candidates(hash))
    }

    /// Every `(hash, record)` of a keyed dataset, sorted by hash then record: the
    /// index file's table merged with the tail's, without reading a key.
    pub(crate) fn key_entries(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let file = self.layout.file.iter().flat_map(|f| f.entries()).peekable();
        let tail = self.tail_keys.entries().iter().copied().peekable();
        MergeSorted { a: file, b: tail }
    }

    /// Indexes shards `self.shard_count()..count` of `dir`. On error the
    /// index is left exactly as it was.
    ///
    /// `keys` says where the new keys' hashes come from: read back from the new
    /// shards (which pages in the values around them), or given by a writer that
    /// already checked them for duplicates. With [`NewKeys::Sorted`] and a
    /// `file` policy that wants the persisted index written now, the new index
    /// file is written straight from the sorted stream, the old file and the new
    /// shards' sizes, holding nothing per record; otherwise (or should writing it
    /// fail) the new records are indexed in memory.
    pub(crate) fn add_shards(
        &mut self,
        dir: &Path,
        count: u64,
        keys: NewKeys<'_>,
        file: Option<(&dyn Storage, FilePolicy)>,
    ) -> Result<()> {
        let before = (self.layout.shards.len(), self.layout.len);
        let result = self.try_add_shards(dir, count, keys, file);
        if result.is_err() {
            let layout = &mut self.layout;
            layout.shards.truncate(before.0);
            layout.len = before.1;
            layout
                .tail_starts
                .truncate(before.1 - layout.file_records());
            self.tail_keys.truncate_records(before.1 as u64);
        }
        result
    }

    fn try_add_shards(
        &mut self,
        dir: &Path,
        count: u64,
        keys: NewKeys<'_>,
        file: Option<(&dyn Storage, FilePolicy)>,
    ) -> Result<()> {
        if let NewKeys::Sorted(sorted) = keys {
            return self.add_shards_sorted(dir, count, sorted, file);
        }
        // (hash, record) of the new keys, read from the shards.
        let mut read = Vec::new();
        let added = self.add_shard_files(dir, count, Some(&mut read), true);
        // The keys read are all in shards before any that failed, so a duplicate
        // among them is the first problem in shard order.
        read.sort_unstable();
        self.check_new_keys(&read)?;
        added?;
        self.tail_keys.add_sorted(read);
        Ok(())
    }

    /// Adds shards `self.shard_count()..count`, checking each `.idx` against
    /// its data file; keeps their record starts when `keep_starts`, and reads
    /// their keys' `(hash, record)` into `read` when given.
    fn add_shard_files(
        &mut self,
        dir: &Path,
        count: u64,
        mut read: Option<&mut Vec<(u64, u64)>>,
        keep_starts: bool,
    ) -> Result<()> {
        let keyed = self.layout.keyed;
        for id in self.shard_count()..count {
            let (data_path, index_path) = shard_paths(dir, id);
            let (sizes_file, sizes_meta) =
                open_regular(&index_path).map_err(|e| open_error(&index_path, count, e))?;
            let sizes = Mapping::load(sizes_file, sizes_meta.len())
                .map_err(|e| Error::io("read", &index_path, e))?;
            let records = idx_records(sizes.len() as u64, keyed, &index_path)?;
            // The data file is loaded when first read (or its keys are).
            let stamp = self.stamp(id, &data_path, &sizes_meta, count)?;
            let first = self.len() as u64;
            let tail_starts = &mut self.layout.tail_starts;
            if keep_starts {
                tail_starts.reserve(records as usize);
            }
            // Read once to check; the pages go back as it goes (a later read maps
            // them again), so a large shard's `.idx` is never all resident.
            let entry = (INDEX_FIELD_SIZE * index_fields(keyed)) as u64;
            let (mut checked, mut released) = (0u64, 0u64);
            let records = read_idx(
                &sizes,
                keyed,
                stamp.data_len,
                &data_path,
                &index_path,
                |start| {
                    if keep_starts {
                        tail_starts.push(start)
                    }
                    if checked >= released + RELEASE_EVERY {
                        sizes.release(released as usize, (checked - released) as usize);
                        released = checked;
                    }
                    checked += entry;
                },
            )? as usize;
            sizes.release(0, sizes.len());
            let shard = self.shard(id, data_path, first, stamp, Some(sizes));
            self.layout.shards.push(shard);
            self.layout.len += records;
            if keyed {
                if let Some(read) = read.as_deref_mut() {
                    self.read_keys(first as usize, read)?;
                }
            }
        }
        Ok(())
    }

    /// Checks the persisted index file, if one is used, against every shard it
    /// covers: record starts and, for keyed datasets, the key table. Reads every
    /// covered key.
    pub(crate) fn verify_file(&self, dir: &Path) -> Result<()> {
        let layout = &self.layout;
        let Some(file) = &layout.file else {
            return Ok(());
        };
        for id in 0..file.shards() as usize {
            layout.check_covered(file, id)?;
        }
        if layout.keyed {
            file.check_table(|record| layout.key(record as usize).map(index_file::hash_key))
                .map_err(|reason| Error::CorruptIndexFile {
                    path: IndexFile::path(dir),
                    reason,
                })?;
        }
        Ok(())
    }

    /// Hashes the keys of records `from..len()` (all in the last shard) into `out`.
    fn read_keys(&self, from: usize, out: &mut Vec<(u64, u64)>) -> Result<()> {
        let layout = &self.layout;
        let Some(shard) = layout.shards.last() else {
            return Ok(());
        };
        let data = shard.data()?;
        // Keys sit between values. Where records are large, reading each key would
        // read ahead through the values around it: read only the keys' pages.
        // Where they are small, nearly every page holds keys: read ahead, which
        // from a cold cache is several times faster than a page at a time.
        let records = (layout.len - from).max(1) as u64;
        if data.len() as u64 / records >= SPARSE_KEYS_RECORD_SIZE {
            data.advise_random();
        } else {
            data.advise_sequential();
        }
        out.reserve(layout.len - from);
        // Reading the keys maps pages (and the kernel maps neighbours with them);
        // give them back every RELEASE_EVERY bytes so opening a large keyed dataset
        // does not make its whole size resident.
        let mut released = 0u64;
        let file_records = layout.file_records();
        for i in from..layout.len {
            let start = layout.tail_starts[i - file_records];
            if start >= released + RELEASE_EVERY {
                data.release(released as usize, (start - released) as usize);
                released = start;
            }
            let key = layout.key(i).unwrap_or_default();
            out.push((index_file::hash_key(key), i as u64));
        }
        data.release(released as usize, data.len() - released as usize);
        data.advise_normal();
        Ok(())
    }

    /// Rejects the first of `new` (sorted `(hash, record)` of keys read from new
    /// shards) in record order whose key is already in the dataset or earlier
    /// among them.
    fn check_new_keys(&self, new: &[(u64, u64)]) -> Result<()> {
        let layout = &self.layout;
        let existing = layout.file.is_some() || !self.tail_keys.is_empty();
        let mut first_duplicate: Option<u64> = None;
        for group in new.chunk_by(|a, b| a.0 == b.0) {
            let hash = group[0].0;
            // Within a group the records are in order: compare each key with the
            // earlier ones (a group is one key, or a rare hash collision).
            for (j, &(_, record)) in group.iter().enumerate() {
                if first_duplicate.is_some_and(|d| d <= record) {
                    break;
                }
                let key = || layout.key(record as usize);
                let earlier = group[..j]
                    .iter()
                    .any(|&(_, other)| layout.key(other as usize) == key());
                let stored = existing
                    && (layout.file.as_ref().is_some_and(|f| {
                        f.candidates(hash).any(|r| layout.key(r as usize) == key())
                    }) || self
                        .tail_keys
                        .candidates(hash)
                        .any(|r| layout.key(r as usize) == key()));
                if earlier || stored {
                    first_duplicate = Some(record);
                }
            }
        }
        let Some(record) = first_duplicate else {
            return Ok(());
        };
        let shard_id = layout
            .shards
            .partition_point(|s| s.first <= record)
            .saturating_sub(1);
        let shard = &layout.shards[shard_id];
        Err(Error::DuplicateKeyInDataset {
            path: shard.path.clone(),
            record: record - shard.first,
            key: DisplayKey(layout.key(record as usize).unwrap_or_default().to_vec()),
        })
    }
}

/// Where the key hashes of shards being added come from ([`Index::add_shards`]).
#[derive(Clone, Copy)]
pub(crate) enum NewKeys<'a> {
    /// Read back from the shards, and checked for duplicates.
    Read,
    /// Every new record's `(hash, dataset record number)`, sorted, from a writer
    /// that checked them.
    Sorted(Each<'a, (u64, u64)>),
}

/// When the persisted index is written: [`crate::OpenOptions`]' thresholds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FilePolicy {
    pub(crate) min_records: Option<u64>,
    pub(crate) min_bytes: Option<u64>,
    pub(crate) min_tail: u64,
}

/// Two sorted iterators merged into one.
struct MergeSorted<A: Iterator, B: Iterator> {
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
}

impl<A, B> Iterator for MergeSorted<A, B>
where
    A: Iterator<Item = (u64, u64)>,
    B: Iterator<Item = (u64, u64)>,
{
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        match (self.a.peek(), self.b.peek()) {
            (Some(a), Some(b)) if b < a => self.b.next(),
            (Some(_), _) => self.a.next(),
            (None, _) => self.b.next(),
        }
    }
}

fn find(layout: &Layout, tail_keys: &KeyTable, hash: u64, key: &[u8]) -> Option<usize> {
    if let Some(file) = &layout.file {
        if let Some(record) = file
            .candidates(hash)
            .find(|&r| layout.key(r as usize) == Some(key))
        {
            return Some(record as usize);
        }
    }
    tail_keys
        .candidates(hash)
        .find(|&r| layout.key(r as usize) == Some(key))
        .map(|r| r as usize)
}
