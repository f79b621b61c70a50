//! Extending a dataset: an all-or-nothing transaction that writes new shards and
//! commits them with one manifest rename.

use std::borrow::Cow;
use std::mem::ManuallyDrop;

use hashbrown::HashTable;

use crate::commit::{write_manifest, ManifestWriteError, WriterLock};
use crate::dataset::Dataset;
use crate::error::{DisplayKey, Error, Result};
use crate::fork;
use crate::format::{
    commit_file_path, parse_commit_file_name, parse_merge_record_name, parse_sidecar_name,
    COMMIT_FILE_TMP_PREFIX, LZ4_MAX_INPUT_SIZE,
};
use crate::lz4_block;
use crate::manifest::{Compression, Manifest, ManifestVersion};
use crate::shard_writer::{ShardWriter, WrittenShard};

mod batch;
mod commit;
mod sidecar;

use batch::Batch;
pub use batch::{batch_limits, BATCH_BYTES_PER_THREAD, BATCH_RECORDS_PER_THREAD};
pub(crate) use commit::{write_durably, write_read_back};
pub use sidecar::SidecarWriter;

/// What a committed extend added.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExtendSummary {
    /// Records added.
    pub records: u64,
    /// Shards added.
    pub shards: u64,
    /// Bytes added to shard data files (keys plus stored values).
    pub bytes_stored: u64,
}

/// An extend in progress, from [`Dataset::begin_extend`]. Records pushed are written
/// to new shard files that no reader sees until [`Extend::commit`]. Dropping it
/// without committing, or any failed write, removes those files and leaves the
/// dataset exactly as it was.
///
/// It holds the dataset's writer lock from start to end. A copy of it inherited by
/// a forked child process is inert: it writes, commits and removes nothing, and
/// fails with [`Error::ForkedExtend`] (see [`crate::fork`]).
pub struct Extend<'d> {
    dataset: &'d mut Dataset,
    /// Not dropped by a forked child's copy: dropping flushes its buffers, which
    /// would write into the parent's files (the child shares their offsets).
    writer: ManuallyDrop<ShardWriter>,
    /// Keys pushed so far (the committed ones are in the dataset's index), hashed
    /// with the index's hasher.
    new_keys: HashTable<(u64, Box<[u8]>)>,
    /// Those hashes in push order, so the commit indexes the new shards without
    /// reading their keys back.
    new_hashes: Vec<u64>,
    scratch: Vec<u8>,
    /// The commit file to write with the commit ([`Extend::set_commit_file`]).
    commit_file: Option<Vec<u8>>,
    poisoned: bool,
    /// The fork generation it began in.
    generation: u64,
    _lock: WriterLock,
}

impl Dataset {
    /// Starts an extend: takes the writer lock, re-reads the manifest (picking up
    /// shards another handle committed, so they are never overwritten), and
    /// prepares to write the next shard number.
    pub fn begin_extend(&mut self) -> Result<Extend<'_>> {
        if self.data_files.is_some() {
            return Err(Error::InvalidOption(format!(
                "{} is a read-only mirror of a dataset elsewhere (object storage): extend the dataset itself",
                self.dir.display()
            )));
        }
        let lock = WriterLock::acquire(&self.dir)?;
        let manifest = Manifest::read(&self.dir)?;
        self.apply_manifest(manifest)?;
        self.remove_stale_files()?;
        let writer = ManuallyDrop::new(ShardWriter::new(
            &self.dir,
            self.storage.clone(),
            self.manifest.keyed,
            self.manifest.max_shard_size,
            self.manifest.shards,
        ));
        Ok(Extend {
            dataset: self,
            writer,
            new_keys: HashTable::new(),
            new_hashes: Vec::new(),
            scratch: Vec::new(),
            commit_file: None,
            poisoned: false,
            generation: fork::generation(),
            _lock: lock,
        })
    }

    /// Removes what writers that did not commit left beside the shards (sidecars of
    /// shards past the committed count, commit files of states past it, temporary
    /// commit files), so that this extend's shards never meet a stale sidecar.
    /// Called with the writer lock held. The shard files themselves are overwritten.
    pub(crate) fn remove_stale_files(&self) -> Result<()> {
        let shards = self.manifest.shards;
        let entries = std::fs::read_dir(&self.dir).map_err(|e| Error::io("list", &self.dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("list", &self.dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let stale = parse_sidecar_name(name).is_some_and(|(id, _)| id >= shards)
                || parse_commit_file_name(name).is_some_and(|n| n > shards)
                || parse_merge_record_name(name).is_some_and(|n| n > shards)
                || name.starts_with(COMMIT_FILE_TMP_PREFIX);
            if stale {
                let path = entry.path();
                self.storage
                    .remove(&path)
                    .map_err(|e| Error::io("remove stale file", &path, e))?;
            }
        }
        Ok(())
    }

    /// Adds `(key, value)` records to a keyed dataset, all or nothing: on any error
    /// (a duplicate key, an oversized value, an I/O failure) nothing is committed.
    pub fn extend<K, V>(
        &mut self,
        records: impl IntoIterator<Item = (K, V)>,
    ) -> Result<ExtendSummary>
    where
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let mut extend = self.begin_extend()?;
        let mut batch = Batch::new(extend.dataset().threads);
        for record in records {
            if batch.add(record.0.as_ref().len() + record.1.as_ref().len(), record) {
                extend.push_batch(&batch.take())?;
            }
        }
        extend.push_batch(&batch.take())?;
        extend.commit()
    }

    /// Adds values to a keyless dataset, all or nothing.
    pub fn extend_values<V: AsRef<[u8]>>(
        &mut self,
        values: impl IntoIterator<Item = V>,
    ) -> Result<ExtendSummary> {
        let mut extend = self.begin_extend()?;
        let mut batch = Batch::new(extend.dataset().threads);
        for value in values {
            if batch.add(value.as_ref().len(), value) {
                extend.push_value_batch(&batch.take())?;
            }
        }
        extend.push_value_batch(&batch.take())?;
        extend.commit()
    }
}

impl<'d> Extend<'d> {
    /// The dataset being extended (its committed state).
    pub fn dataset(&self) -> &Dataset {
        self.dataset
    }

    /// Fails with [`Error::ForkedExtend`] in a process forked from the one that
    /// began this extend, where every method that writes fails the same way: for
    /// callers that run code (which may fork) between pushes, to stop early.
    pub fn check_process(&self) -> Result<()> {
        if self.forked() {
            return Err(Error::ForkedExtend);
        }
        Ok(())
    }

    fn forked(&self) -> bool {
        self.generation != fork::generation()
    }

    /// The shards finished since the last call (full ones: the shard being written
    /// is not among them), in order, with their fingerprints: for writers of
    /// sidecars, which write a shard's sidecars once its records are known.
    pub fn take_finished_shards(&mut self) -> Vec<WrittenShard> {
        self.writer.take_finished()
    }

    /// Finishes the shard being written, so the next record starts a new one, and
    /// returns every finished shard not yet taken. Called before [`Extend::commit`]
    /// by writers of sidecars, whose last shard's sidecars must be written before
    /// the commit.
    pub fn close_shard(&mut self) -> Result<Vec<WrittenShard>> {
        self.check_process()?;
        if self.poisoned {
            return Err(Error::Poisoned);
        }
        if let Err(e) = self.writer.close_shard() {
            self.poison();
            return Err(e);
        }
        Ok(self.writer.take_finished())
    }

    /// The shard records are being written to, if one is open: the one the
    /// records pushed since the last finished shard are in.
    pub fn open_shard(&self) -> Option<u64> {
        self.writer.open_shard()
    }

    /// Sets the commit file to write with the commit: `commit.{shards:06}.json` of
    /// the new state, written and fsynced before the manifest. With no record
    /// pushed, the commit replaces the current state's commit file atomically (a
    /// metadata-only commit). The bytes are opaque to this crate.
    pub fn set_commit_file(&mut self, bytes: Vec<u8>) {
        self.commit_file = Some(bytes);
    }

    fn poison(&mut self) {
        self.poisoned = true;
        self.writer.abort();
    }

    /// Records pushed so far.
    pub fn records(&self) -> u64 {
        self.writer.records()
    }

    /// Bytes written so far (keys plus stored values).
    pub fn bytes_stored(&self) -> u64 {
        self.writer.bytes()
    }

    /// Whether `key` is committed or already pushed in this extend.
    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.contains_hashed(self.dataset.index.hash_key(key), key)
    }

    /// [`Extend::contains_key`] for a key whose index hash is `hash`.
    fn contains_hashed(&self, hash: u64, key: &[u8]) -> bool {
        self.dataset.index.position_hashed(hash, key).is_some()
            || self
                .new_keys
                .find(hash, |(h, k)| *h == hash && &**k == key)
                .is_some()
    }

    /// Each key's index hash (computed once per key, for the checks and the
    /// commit's index alike), and whether it is a duplicate: committed, pushed
    /// earlier in this extend, or earlier in `records`.
    fn classify<K: AsRef<[u8]>, V>(&self, records: &[(K, V)]) -> (Vec<u64>, Vec<bool>) {
        let mut batch_keys: HashTable<(u64, &[u8])> = HashTable::with_capacity(records.len());
        let mut hashes = Vec::with_capacity(records.len());
        let mut duplicate = Vec::with_capacity(records.len());
        for (key, _) in records {
            let key = key.as_ref();
            let hash = self.dataset.index.hash_key(key);
            let seen = self.contains_hashed(hash, key)
                || batch_keys
                    .find(hash, |(h, k)| *h == hash && *k == key)
                    .is_some();
            if !seen {
                batch_keys.insert_unique(hash, (hash, key), |(h, _)| *h);
            }
            hashes.push(hash);
            duplicate.push(seen);
        }
        (hashes, duplicate)
    }

    /// Adds a record to a keyed dataset, compressing the value if the dataset does.
    /// A duplicate key is an error that leaves the extend usable (nothing was written).
    pub fn push(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_usable(true)?;
        self.check_new_key(key)?;
        self.check_value(value)?;
        let stored = self.encode(value)?;
        self.write(key, &stored)?;
        self.scratch = stored;
        Ok(())
    }

    /// Adds a value to a keyless dataset.
    pub fn push_value(&mut self, value: &[u8]) -> Result<()> {
        self.check_usable(false)?;
        self.check_value(value)?;
        let stored = self.encode(value)?;
        self.write(&[], &stored)?;
        self.scratch = stored;
        Ok(())
    }

    /// Adds many records to a keyed dataset, compressing their values on all cores
    /// (see [`Dataset::set_threads`]). Every key is checked first, so a duplicate
    /// key writes none of the batch and leaves the extend usable.
    pub fn push_batch<K: AsRef<[u8]>, V: AsRef<[u8]>>(&mut self, records: &[(K, V)]) -> Result<()> {
        self.check_usable(true)?;
        let (hashes, duplicate) = self.classify(records);
        if let Some(at) = duplicate.iter().position(|&d| d) {
            return Err(Error::DuplicateKey {
                key: DisplayKey(records[at].0.as_ref().to_vec()),
            });
        }
        self.push_classified(records, &hashes, &duplicate)
    }

    /// Like [`Extend::push_batch`], but a record whose key is a duplicate
    /// (committed, pushed earlier in this extend, or earlier in `records`) is left
    /// out instead of failing the batch: the first occurrence wins. Returns the
    /// positions in `records` left out, in order. Each key is hashed once.
    pub fn push_batch_skipping_duplicates<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        records: &[(K, V)],
    ) -> Result<Vec<usize>> {
        self.check_usable(true)?;
        let (hashes, duplicate) = self.classify(records);
        self.push_classified(records, &hashes, &duplicate)?;
        Ok(duplicate
            .iter()
            .enumerate()
            .filter_map(|(at, &d)| d.then_some(at))
            .collect())
    }

    /// Writes the records of `records` not marked `skip`, with their `hashes`.
    fn push_classified<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        records: &[(K, V)],
        hashes: &[u64],
        skip: &[bool],
    ) -> Result<()> {
        let kept = || {
            records
                .iter()
                .zip(skip)
                .filter(|(_, &skip)| !skip)
                .map(|(record, _)| record)
        };
        for (key, value) in kept() {
            ShardWriter::check_sizes(key.as_ref(), &[])?;
            self.check_value(value.as_ref())?;
        }
        let values: Vec<&[u8]> = kept().map(|(_, v)| v.as_ref()).collect();
        let stored = self.encode_many(&values)?;
        let kept_hashes = hashes
            .iter()
            .zip(skip)
            .filter(|(_, &s)| !s)
            .map(|(h, _)| *h);
        for (((key, _), [head, tail]), hash) in kept().zip(&stored).zip(kept_hashes) {
            self.write_hashed(key.as_ref(), [head.as_ref(), tail.as_ref()], Some(hash))?;
        }
        Ok(())
    }

    /// Adds many values to a keyless dataset, compressing them on all cores.
    pub fn push_value_batch<V: AsRef<[u8]>>(&mut self, values: &[V]) -> Result<()> {
        self.check_usable(false)?;
        let values: Vec<&[u8]> = values.iter().map(AsRef::as_ref).collect();
        for value in &values {
            self.check_value(value)?;
        }
        let stored = self.encode_many(&values)?;
        for [head, tail] in &stored {
            self.write_hashed(&[], [head.as_ref(), tail.as_ref()], None)?;
        }
        Ok(())
    }

    /// Stored forms of `values`, compressed in parallel when the dataset
    /// compresses: each as the two parts written one after the other (see
    /// [`lz4_block::Encoded::parts`]; an uncompressed value, or the value of a
    /// literal-only block, is not copied).
    fn encode_many<'v>(&self, values: &[&'v [u8]]) -> Result<Vec<[Cow<'v, [u8]>; 2]>> {
        match self.dataset.compression() {
            Compression::None => Ok(values
                .iter()
                .map(|v| [Cow::Borrowed(*v), Cow::Borrowed(&[][..])])
                .collect()),
            Compression::Lz4 => {
                let encoded =
                    lz4_block::compress_many(values, self.dataset.lz4_mode, self.dataset.threads)
                        .map_err(|(_, e)| Error::InvalidOption(e.0))?;
                Ok(encoded
                    .into_iter()
                    .zip(values)
                    .map(|(encoded, value)| match encoded {
                        lz4_block::Encoded::Stored(stored) => {
                            [Cow::Owned(stored), Cow::Borrowed(&[][..])]
                        }
                        lz4_block::Encoded::LiteralHeader(header) => {
                            [Cow::Owned(header), Cow::Borrowed(*value)]
                        }
                    })
                    .collect())
            }
        }
    }

    /// Adds a record whose value is already in the dataset's stored form (an LZ4
    /// value with its size prefix, or raw): for pipelines that compress in
    /// parallel. `key` must be empty for keyless datasets.
    pub fn push_stored(&mut self, key: &[u8], stored: &[u8]) -> Result<()> {
        let keyed = self.dataset.keyed();
        self.check_usable(keyed)?;
        if keyed {
            self.check_new_key(key)?;
        } else if !key.is_empty() {
            return Err(Error::WrongKeying("keyless datasets take no keys"));
        }
        if self.dataset.compression() == Compression::Lz4 {
            lz4_block::declared_len(stored).map_err(|e| {
                Error::InvalidOption(format!("pushed value is not a stored LZ4 value: {}", e.0))
            })?;
        }
        self.write(key, stored)
    }

    fn check_usable(&self, keyed: bool) -> Result<()> {
        self.check_process()?;
        if self.poisoned {
            return Err(Error::Poisoned);
        }
        match (self.dataset.keyed(), keyed) {
            (true, false) => Err(Error::WrongKeying(
                "keyed datasets take (key, value) records, not bare values",
            )),
            (false, true) => Err(Error::WrongKeying(
                "keyless datasets take values, not (key, value) records",
            )),
            _ => Ok(()),
        }
    }

    fn check_new_key(&self, key: &[u8]) -> Result<()> {
        if self.contains_key(key) {
            return Err(Error::DuplicateKey {
                key: DisplayKey(key.to_vec()),
            });
        }
        Ok(())
    }

    fn check_value(&self, value: &[u8]) -> Result<()> {
        if self.dataset.compression() == Compression::Lz4 && value.len() > LZ4_MAX_INPUT_SIZE {
            return Err(Error::TooLarge {
                what: "value",
                size: value.len() as u64,
                limit: LZ4_MAX_INPUT_SIZE as u64,
            });
        }
        Ok(())
    }

    /// The stored form of `value`, in the reused scratch buffer.
    fn encode(&mut self, value: &[u8]) -> Result<Vec<u8>> {
        let mut stored = std::mem::take(&mut self.scratch);
        match self.dataset.compression() {
            Compression::None => {
                stored.clear();
                stored.extend_from_slice(value);
            }
            Compression::Lz4 => {
                lz4_block::compress_into(value, self.dataset.lz4_mode, &mut stored)
                    .map_err(|e| Error::InvalidOption(e.0))?;
            }
        }
        Ok(stored)
    }

    fn write(&mut self, key: &[u8], stored: &[u8]) -> Result<()> {
        self.write_hashed(key, [stored, &[]], None)
    }

    /// Writes one record whose stored value is `stored`'s two parts, one after
    /// the other; `hash` is the key's index hash when already computed.
    fn write_hashed(&mut self, key: &[u8], stored: [&[u8]; 2], hash: Option<u64>) -> Result<()> {
        // Refused before writing anything, so the extend stays usable.
        ShardWriter::check_lens(key.len(), stored[0].len() + stored[1].len())?;
        if let Err(e) = self.writer.append_parts(key, stored) {
            self.poison();
            return Err(e);
        }
        if self.dataset.keyed() {
            let hash = hash.unwrap_or_else(|| self.dataset.index.hash_key(key));
            self.new_keys
                .insert_unique(hash, (hash, key.into()), |(h, _)| *h);
            self.new_hashes.push(hash);
        }
        Ok(())
    }
}

impl Drop for Extend<'_> {
    /// An uncommitted extend removes the files it wrote (best effort: leftovers are
    /// ignored by readers and overwritten by the next extend anyway).
    fn drop(&mut self) {
        if self.forked() {
            // A child's copy: the files are the parent's. The writer (its buffers
            // and descriptors) is leaked, once per fork of an extend in progress.
            return;
        }
        self.writer.abort();
        // SAFETY: dropped once, here; the field is not used afterwards.
        unsafe { ManuallyDrop::drop(&mut self.writer) };
    }
}
