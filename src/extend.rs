//! Extending a dataset: an all-or-nothing transaction that writes new shards and
//! commits them with one manifest rename.

use std::borrow::Cow;
use std::mem::ManuallyDrop;

use crate::commit::{write_manifest, ManifestWriteError, WriterLock};
use crate::dataset::Dataset;
use crate::error::{DisplayKey, Error, Result};
use crate::fork;
use crate::format::{
    commit_file_path, parse_commit_file_name, parse_merge_record_name, parse_sidecar_name,
    COMMIT_FILE_TMP_PREFIX, CONTENT_HASH_TMP_PREFIX, LZ4_MAX_INPUT_SIZE,
};
use crate::key_set::{KeySet, SpillDir};
use crate::lz4_block;
use crate::manifest::{Compression, Manifest, ManifestVersion};
use crate::reader::NewKeys;
use crate::shard_writer::{ShardWriter, WrittenShard};

mod batch;
mod check;
mod commit;
mod sidecar;

use batch::Batch;
pub use batch::{batch_limits, BATCH_BYTES_PER_THREAD, BATCH_RECORDS_PER_THREAD};
use check::Verdict;
pub(crate) use commit::{write_durably, write_read_back};
use sidecar::OpenSidecar;
pub use sidecar::{OpenSidecarWriter, SidecarWriter};

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

/// Which records an extend leaves out as duplicates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Dedup {
    /// Records whose key is already in the dataset (keyed datasets: the
    /// format's rule; keyless datasets take every record).
    #[default]
    Keys,
    /// Also records whose value equals an earlier record's (committed, or pushed
    /// earlier in this extend), keyed or keyless: the value's content hash
    /// (XXH3-128) is looked up among every earlier record's, and a value whose
    /// hash matches is compared byte for byte before it is called a duplicate.
    /// Content hashes are kept beside the shards (`NNNNNN.xxh128`); every
    /// committed shard must have them (see [`Dataset::build_content_hashes`]).
    Content,
}

/// How an extend checks and writes records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExtendOptions {
    /// Which records are duplicates. Default: [`Dedup::Keys`].
    pub dedup: Dedup,
    /// Memory the duplicate checks may hold before they spill to disk. Default
    /// (`None`): the dataset's ([`Dataset::set_memory_limit`]).
    pub memory_limit: Option<u64>,
    /// Writes each new record's content hash beside its shard
    /// (`NNNNNN.xxh128`) whatever `dedup` says: for a copy of records from a
    /// dataset that has them (`export --into`). Default (`false`): content
    /// hashes are written with [`Dedup::Content`] or when a committed shard
    /// has them.
    pub content_hashes: bool,
}

/// A record a batch push left out because its value equals an earlier record's
/// ([`Dedup::Content`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueDuplicate {
    /// Its position in the batch.
    pub position: usize,
    /// The dataset index of the record whose value it repeats: a committed
    /// record, or one this extend added (its index once committed).
    pub of: u64,
    /// That record's key (empty for a keyless dataset).
    pub of_key: Vec<u8>,
}

/// The records a batch push left out: [`Extend::push_batch_deduplicated`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Positions in the batch of the records whose key was seen before, in order.
    pub keys: Vec<usize>,
    /// The records whose value repeats an earlier record's, in order.
    pub values: Vec<ValueDuplicate>,
}

/// An extend in progress, from [`Dataset::begin_extend`]. Records pushed are written
/// to new shard files that no reader sees until [`Extend::commit`]. Dropping it
/// without committing, or any failed write, removes those files and leaves the
/// dataset exactly as it was.
///
/// It holds the dataset's writer lock from start to end. A copy of it inherited by
/// a forked child process is inert: it writes, commits and removes nothing, and
/// fails with [`Error::ForkedExtend`] (see [`crate::fork`]).
///
/// Its duplicate checks hold no key and no value: fingerprints (a 64-bit hash and
/// a record number, 12 to 16 bytes each) of the keys, and with [`Dedup::Content`]
/// of the values, in a set that spills to the dataset's `.bcd-spill/` directory
/// past the dataset's memory limit ([`Dataset::set_memory_limit`]); a hash that
/// matches is confirmed against the bytes written.
pub struct Extend<'d> {
    dataset: &'d mut Dataset,
    /// Not dropped by a forked child's copy: dropping flushes its buffers, which
    /// would write into the parent's files (the child shares their offsets).
    writer: ManuallyDrop<ShardWriter>,
    /// The keys pushed so far (the committed ones are in the dataset's index),
    /// by dataset record number, hashed with the index's hasher; keyed datasets.
    keys: Option<ManuallyDrop<KeySet>>,
    /// With [`Dedup::Content`]: the content hash fingerprints of every record,
    /// committed and pushed.
    values: Option<ManuallyDrop<KeySet>>,
    /// The committed shards' content hashes, loaded as lookups need them.
    committed_hashes: std::collections::HashMap<u64, crate::ShardData>,
    /// The commit file to write with the commit ([`Extend::set_commit_file`]).
    commit_file: Option<Vec<u8>>,
    /// Records left out for their value.
    skipped_values: u64,
    /// Sidecars kept open between calls ([`Extend::open_sidecar`]).
    open_sidecars: Vec<OpenSidecar>,
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
        self.begin_extend_with(ExtendOptions::default())
    }

    /// [`Dataset::begin_extend`] with `options`. With [`Dedup::Content`], every
    /// committed record's content hash is read first (16 bytes per record), and
    /// a committed shard without them is an error
    /// ([`Error::NoContentHashes`]).
    pub fn begin_extend_with(&mut self, options: ExtendOptions) -> Result<Extend<'_>> {
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
        let dedup_values = options.dedup == Dedup::Content;
        let keep_hashes = dedup_values || options.content_hashes || self.keeps_content_hashes()?;
        let mut writer = ShardWriter::new(
            &self.dir,
            self.storage.clone(),
            self.manifest.keyed,
            self.manifest.max_shard_size,
            self.manifest.shards,
        );
        if keep_hashes {
            writer.keep_content_hashes();
        }
        let spill = SpillDir::new(&self.dir, self.storage.clone());
        let budget = options.memory_limit.map_or_else(
            || self.memory_limit(),
            |limit| limit.max(crate::key_set::MIN_MEMORY_LIMIT),
        );
        let sets = usize::from(self.keyed()) + usize::from(dedup_values);
        let share = budget / sets.max(1) as u64;
        let keys = self
            .keyed()
            .then(|| ManuallyDrop::new(KeySet::new(spill.clone(), "keys", share)));
        let values = match dedup_values {
            true => Some(ManuallyDrop::new(self.committed_value_set(spill, share)?)),
            false => None,
        };
        Ok(Extend {
            dataset: self,
            writer: ManuallyDrop::new(writer),
            keys,
            values,
            committed_hashes: std::collections::HashMap::new(),
            commit_file: None,
            skipped_values: 0,
            open_sidecars: Vec::new(),
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
                || name.starts_with(COMMIT_FILE_TMP_PREFIX)
                || name.starts_with(CONTENT_HASH_TMP_PREFIX);
            if stale {
                let path = entry.path();
                self.storage
                    .remove(&path)
                    .map_err(|e| Error::io("remove stale file", &path, e))?;
            }
        }
        // The runs a writer that died while spilling left.
        crate::key_set::remove_spill_leftovers(self.storage.as_ref(), &self.dir)
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

    /// Records left out so far because their value repeats an earlier record's.
    pub fn skipped_values(&self) -> u64 {
        self.skipped_values
    }

    /// Whether `key` is committed or already pushed in this extend.
    pub fn contains_key(&mut self, key: &[u8]) -> Result<bool> {
        let hash = self.dataset.index.hash_key(key);
        self.key_seen(hash, key)
    }

    /// Adds a record to a keyed dataset, compressing the value if the dataset does.
    /// A duplicate key is an error that leaves the extend usable (nothing was
    /// written); with [`Dedup::Content`] a duplicate value is left out (see
    /// [`Extend::skipped_values`]).
    pub fn push(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_usable(true)?;
        self.push_batch(&[(key, value)])
    }

    /// Adds a value to a keyless dataset.
    pub fn push_value(&mut self, value: &[u8]) -> Result<()> {
        self.check_usable(false)?;
        self.push_value_batch(&[value])
    }

    /// Adds many records to a keyed dataset, compressing their values on all cores
    /// (see [`Dataset::set_threads`]). Every key is checked first, so a duplicate
    /// key writes none of the batch and leaves the extend usable.
    pub fn push_batch<K: AsRef<[u8]>, V: AsRef<[u8]>>(&mut self, records: &[(K, V)]) -> Result<()> {
        self.check_usable(true)?;
        let (hashes, verdicts) = self.classify(records)?;
        if let Some(at) = verdicts.iter().position(|v| *v == Verdict::DuplicateKey) {
            return Err(Error::DuplicateKey {
                key: DisplayKey(records[at].0.as_ref().to_vec()),
            });
        }
        self.push_classified(records, &hashes, &verdicts)?;
        Ok(())
    }

    /// Like [`Extend::push_batch`], but a record whose key is a duplicate
    /// (committed, pushed earlier in this extend, or earlier in `records`) is left
    /// out instead of failing the batch: the first occurrence wins. Returns the
    /// positions in `records` left out for their key, in order. Each key is
    /// hashed once.
    pub fn push_batch_skipping_duplicates<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        records: &[(K, V)],
    ) -> Result<Vec<usize>> {
        self.check_usable(true)?;
        Ok(self.push_batch_deduplicated(records)?.keys)
    }

    /// Adds many records (keys empty for a keyless dataset), leaving out those
    /// whose key was seen before (keyed datasets) and, with [`Dedup::Content`],
    /// those whose value repeats an earlier record's; the first occurrence wins.
    /// Returns what was left out.
    pub fn push_batch_deduplicated<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        records: &[(K, V)],
    ) -> Result<Skipped> {
        self.check_process()?;
        if self.poisoned {
            return Err(Error::Poisoned);
        }
        if !self.dataset.keyed() && records.iter().any(|(k, _)| !k.as_ref().is_empty()) {
            return Err(Error::WrongKeying("keyless datasets take no keys"));
        }
        let (hashes, verdicts) = self.classify(records)?;
        self.push_classified(records, &hashes, &verdicts)
    }

    /// Writes the records `verdicts` calls new, with their key `hashes`; returns
    /// the others.
    fn push_classified<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        records: &[(K, V)],
        hashes: &[check::Hashes],
        verdicts: &[Verdict],
    ) -> Result<Skipped> {
        let kept = || {
            records
                .iter()
                .zip(hashes)
                .zip(verdicts)
                .filter(|(_, v)| **v == Verdict::New)
                .map(|(record, _)| record)
        };
        for ((key, value), _) in kept() {
            ShardWriter::check_sizes(key.as_ref(), &[])?;
            self.check_value(value.as_ref())?;
        }
        let values: Vec<&[u8]> = kept().map(|((_, v), _)| v.as_ref()).collect();
        let stored = self.encode_many(&values)?;
        for (((key, _), hashes), [head, tail]) in kept().zip(&stored) {
            self.write_hashed(key.as_ref(), [head.as_ref(), tail.as_ref()], hashes)?;
        }
        let mut skipped = Skipped::default();
        for (position, verdict) in verdicts.iter().enumerate() {
            match verdict {
                Verdict::New => {}
                Verdict::DuplicateKey => skipped.keys.push(position),
                Verdict::DuplicateValue { of, of_key } => {
                    skipped.values.push(ValueDuplicate {
                        position,
                        of: *of,
                        of_key: of_key.clone(),
                    });
                }
            }
        }
        self.skipped_values += skipped.values.len() as u64;
        Ok(skipped)
    }

    /// Adds many values to a keyless dataset, compressing them on all cores.
    pub fn push_value_batch<V: AsRef<[u8]>>(&mut self, values: &[V]) -> Result<()> {
        self.check_usable(false)?;
        let records: Vec<(&[u8], &[u8])> = values.iter().map(|v| (&[][..], v.as_ref())).collect();
        self.push_batch_deduplicated(&records)?;
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
        match self.push_stored_deduplicated(key, stored)? {
            Some(LeftOut::Key) => Err(Error::DuplicateKey {
                key: DisplayKey(key.to_vec()),
            }),
            _ => Ok(()),
        }
    }

    /// [`Extend::push_stored`], leaving the record out (and saying why) when its
    /// key was seen before or, with [`Dedup::Content`], its value was.
    pub fn push_stored_deduplicated(
        &mut self,
        key: &[u8],
        stored: &[u8],
    ) -> Result<Option<LeftOut>> {
        let keyed = self.dataset.keyed();
        self.check_usable(keyed)?;
        if !keyed && !key.is_empty() {
            return Err(Error::WrongKeying("keyless datasets take no keys"));
        }
        if self.dataset.compression() == Compression::Lz4 {
            lz4_block::declared_len(stored).map_err(|e| {
                Error::InvalidOption(format!("pushed value is not a stored LZ4 value: {}", e.0))
            })?;
        }
        // The value, for its content hash and comparisons.
        let needs_value = self.writer.keeps_content_hashes();
        let value = match (needs_value, self.dataset.compression()) {
            (false, _) | (true, Compression::None) => Cow::Borrowed(stored),
            (true, Compression::Lz4) => Cow::Owned(
                lz4_block::decompress(stored)
                    .map_err(|e| Error::InvalidOption(format!("pushed value: {}", e.0)))?,
            ),
        };
        let (hashes, verdicts) = self.classify(&[(key, &*value)])?;
        match verdicts.into_iter().next() {
            Some(Verdict::New) | None => {
                self.write_hashed(key, [stored, &[]], &hashes[0])?;
                Ok(None)
            }
            Some(Verdict::DuplicateKey) => Ok(Some(LeftOut::Key)),
            Some(Verdict::DuplicateValue { of, of_key }) => {
                self.skipped_values += 1;
                Ok(Some(LeftOut::Value { of, of_key }))
            }
        }
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

    /// Writes one record whose stored value is `stored`'s two parts, one after
    /// the other, with its key hash and content hash (computed before), and adds
    /// their fingerprints to the sets.
    fn write_hashed(
        &mut self,
        key: &[u8],
        stored: [&[u8]; 2],
        hashes: &check::Hashes,
    ) -> Result<()> {
        // Refused before writing anything, so the extend stays usable.
        ShardWriter::check_lens(key.len(), stored[0].len() + stored[1].len())?;
        let record = self.dataset.len() as u64 + self.writer.records();
        let content = hashes.content.as_ref();
        if let Err(e) = self.writer.append_hashed(key, stored, content) {
            self.poison();
            return Err(e);
        }
        let mut added = Ok(());
        if let Some(keys) = &mut self.keys {
            added = keys.insert(hashes.key, record);
        }
        if let (Some(values), Some(content), Ok(())) = (&mut self.values, content, &added) {
            added = values.insert(crate::content::fingerprint(content), record);
        }
        if let Err(e) = added {
            self.poison();
            return Err(e);
        }
        Ok(())
    }
}

/// Why [`Extend::push_stored_deduplicated`] left a record out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeftOut {
    /// Its key was seen before.
    Key,
    /// Its value equals that of the record at dataset index `of`, whose key is
    /// `of_key` (empty when keyless).
    Value {
        /// The dataset index of the record it repeats.
        of: u64,
        /// That record's key.
        of_key: Vec<u8>,
    },
}

impl Drop for Extend<'_> {
    /// An uncommitted extend removes the files it wrote (best effort: leftovers are
    /// ignored by readers and overwritten by the next extend anyway).
    fn drop(&mut self) {
        if self.forked() {
            // A child's copy: the files are the parent's. The writer (its buffers
            // and descriptors) and the key sets (whose runs are the parent's) are
            // leaked, once per fork of an extend in progress.
            return;
        }
        self.writer.abort();
        // SAFETY: dropped once, here; the fields are not used afterwards.
        unsafe {
            ManuallyDrop::drop(&mut self.writer);
            if let Some(keys) = &mut self.keys {
                ManuallyDrop::drop(keys);
            }
            if let Some(values) = &mut self.values {
                ManuallyDrop::drop(values);
            }
        }
    }
}
