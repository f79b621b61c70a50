//! [`RemoteDataset`]: a dataset under a prefix, read without downloading it whole.
//!
//! Opening reads the manifest, lists the prefix and fetches every `.idx` file
//! (4 or 8 bytes per record), checking each against its `.bin` size as a local
//! open does. Then:
//!
//! - one value is one ranged read (`get --index`);
//! - keys are ranged reads of the key bytes only, coalesced where they lie close
//!   together, a bounded window of a shard at a time (`ls`, `get KEY`);
//! - reading every record (`verify`, `export`) streams each `.bin` once, in
//!   order, holding one record at a time, and checks its bytes against the
//!   checksum stored with it (`verify` the `.idx` files' too).

use std::collections::HashSet;
use std::ops::Range;
use std::path::PathBuf;

use bytes::BytesMut;
use futures::{StreamExt, TryStreamExt};
use object_store::{ObjectStore, ObjectStoreExt};

use bcd::format::{record_sizes, shard_paths};
use bcd::{Compression, DisplayKey, Manifest};

use crate::error::{RemoteError, Result};
use crate::objects::{same_content, Stamp};
use crate::store::{block_on, Remote};

/// Key reads cover at most this many bytes of a shard per request batch, so
/// memory stays bounded when keys lie close together (small records).
const KEY_WINDOW: u64 = 64 << 20;

/// One shard's layout.
#[derive(Debug)]
struct ShardLayout {
    /// Dataset index of its first record.
    first: u64,
    /// Its `.idx` bytes.
    sizes: Vec<u8>,
    /// Byte offset of each record in the `.bin`.
    starts: Vec<u64>,
    /// The `.bin` length.
    data_len: u64,
    /// The checksum stored with the `.idx`.
    index_stamp: Stamp,
}

impl ShardLayout {
    fn records(&self) -> usize {
        self.starts.len()
    }
}

/// A record's place in its shard's data file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordSpan {
    /// The shard.
    pub shard: u64,
    /// Record number in the shard.
    pub record: u64,
    /// Where its key starts.
    pub start: u64,
    /// Key size (0 when keyless).
    pub key_len: u64,
    /// Stored value size.
    pub value_len: u64,
}

impl RecordSpan {
    fn key(&self) -> Range<u64> {
        self.start..self.start + self.key_len
    }

    fn value(&self) -> Range<u64> {
        let at = self.start + self.key_len;
        at..at + self.value_len
    }
}

/// A dataset in object storage, its record layout loaded.
#[derive(Debug)]
pub struct RemoteDataset {
    remote: Remote,
    manifest: Manifest,
    shards: Vec<ShardLayout>,
    len: u64,
}

impl RemoteDataset {
    /// Reads the manifest and every shard's `.idx`, checking them as a local open
    /// does (every committed shard present, sizes adding up to the data files).
    pub fn open(remote: Remote) -> Result<RemoteDataset> {
        block_on(async {
            let Some(manifest) = remote.manifest().await? else {
                return Err(RemoteError::NotADataset {
                    uri: remote.uri().to_string(),
                });
            };
            let manifest = manifest.manifest;
            let objects = remote.list().await?;
            let keyed = manifest.keyed;
            let store = remote.store()?;
            let loaded: Vec<(Vec<u8>, u64, Stamp)> = futures::stream::iter(0..manifest.shards)
                .map(|id| {
                    let store = store.clone();
                    let remote = &remote;
                    let objects = &objects;
                    async move {
                        let (data, index) = names(id);
                        let missing = |name: &str| {
                            RemoteError::Local(bcd::Error::MissingShard {
                                path: PathBuf::from(remote.object_uri(name)),
                                shards: manifest.shards,
                            })
                        };
                        let data_len = objects.get(&data).ok_or_else(|| missing(&data))?.size;
                        if !objects.contains_key(&index) {
                            return Err(missing(&index));
                        }
                        let read = store.get(&remote.path(&index)).await.map_err(|e| {
                            RemoteError::store(remote.object_uri(&index), "read", e)
                        })?;
                        let stamp = Stamp::from_attributes(&read.attributes);
                        let sizes = read.bytes().await.map_err(|e| {
                            RemoteError::store(remote.object_uri(&index), "read", e)
                        })?;
                        Ok::<_, RemoteError>((sizes.to_vec(), data_len, stamp))
                    }
                })
                .buffered(16)
                .try_collect()
                .await?;
            let mut shards = Vec::with_capacity(loaded.len());
            let mut len = 0u64;
            for (id, (sizes, data_len, index_stamp)) in loaded.into_iter().enumerate() {
                let (data_name, index_name) = names(id as u64);
                let mut starts = Vec::new();
                bcd::format::read_idx(
                    &sizes,
                    keyed,
                    data_len,
                    &PathBuf::from(remote.object_uri(&data_name)),
                    &PathBuf::from(remote.object_uri(&index_name)),
                    |start| starts.push(start),
                )?;
                let records = starts.len() as u64;
                shards.push(ShardLayout {
                    first: len,
                    sizes,
                    starts,
                    data_len,
                    index_stamp,
                });
                len += records;
            }
            Ok(RemoteDataset {
                remote,
                manifest,
                shards,
                len,
            })
        })
    }

    /// The fingerprint of shard `shard` (FORMAT.md section 9), as a local
    /// dataset computes it: from its index, read at open, and its data file's
    /// first and last 4 KiB (one or two ranged reads).
    pub fn shard_fingerprint(&self, shard: u64) -> Result<bcd::ShardFingerprint> {
        let layout = &self.shards[shard as usize];
        let edge = bcd::format::FINGERPRINT_EDGE_BYTES as u64;
        let data_len = layout.data_len;
        let edges = match data_len <= 2 * edge {
            true => block_on(self.read(shard, 0..data_len))?.to_vec(),
            false => {
                let mut edges = block_on(self.read(shard, 0..edge))?.to_vec();
                edges.extend_from_slice(&block_on(self.read(shard, data_len - edge..data_len))?);
                edges
            }
        };
        // The edges' hash is that of the first and last 4 KiB concatenated,
        // which is what `of` hashes for data of at most 8 KiB.
        let mut print =
            bcd::ShardFingerprint::of(layout.starts.len() as u64, &edges, &layout.sizes);
        print.data_len = data_len;
        Ok(print)
    }

    /// The numbers `M` of the commit files `commit.M.json` under the prefix that
    /// a state of this many shards may use (`M <= shards`), newest first.
    pub fn commit_files(&self) -> Result<Vec<u64>> {
        let objects = block_on(self.remote.list())?;
        let mut numbers: Vec<u64> = objects
            .keys()
            .filter_map(|name| bcd::format::parse_commit_file_name(name))
            .filter(|&m| m <= self.manifest.shards)
            .collect();
        numbers.sort_unstable_by(|a, b| b.cmp(a));
        Ok(numbers)
    }

    /// Object `name` under the prefix, read whole if it is at most `max` bytes;
    /// `None` when there is none, an error when it is larger.
    pub fn read_object(&self, name: &str, max: u64) -> Result<Option<Vec<u8>>> {
        let objects = block_on(self.remote.list())?;
        let Some(object) = objects.get(name) else {
            return Ok(None);
        };
        if object.size > max {
            return Err(RemoteError::Corrupt {
                uri: self.remote.object_uri(name),
                reason: format!(
                    "{} bytes, more than the {max} such a file may hold",
                    object.size
                ),
            });
        }
        Ok(Some(block_on(self.remote.read_all(name))?.to_vec()))
    }

    /// Dataset index of shard `shard`'s first record (the record count past
    /// the last shard).
    pub fn shard_first_record(&self, shard: u64) -> u64 {
        usize::try_from(shard)
            .ok()
            .and_then(|s| self.shards.get(s))
            .map_or(self.len, |s| s.first)
    }

    /// The names of the views under the prefix (`view.NAME`), sorted.
    pub fn view_names(&self) -> Result<Vec<String>> {
        let objects = block_on(self.remote.list())?;
        let mut names: Vec<String> = objects
            .keys()
            .filter_map(|name| bcd::format::parse_view_file_name(name))
            .map(str::to_owned)
            .collect();
        names.sort_unstable();
        Ok(names)
    }

    /// The view `name` (FORMAT.md, "Views"), read whole (no larger than a view
    /// of this many records can be), checked against itself and against this
    /// dataset as a local one is ([`bcd::Dataset::view`]).
    pub fn view(&self, name: &str) -> Result<bcd::View> {
        if !bcd::format::is_view_name(name) {
            return Err(bcd::Error::InvalidViewName {
                name: name.to_owned(),
            }
            .into());
        }
        let object = format!("{}{name}", bcd::format::VIEW_FILE_PREFIX);
        let uri = PathBuf::from(self.remote.object_uri(&object));
        let Some(bytes) = self.read_object(&object, bcd::max_view_file_len(self.len))? else {
            let names = self.view_names()?;
            return Err(bcd::Error::NoSuchView {
                dir: PathBuf::from(self.remote.uri().to_string()),
                name: name.to_owned(),
                available: match names.is_empty() {
                    true => "none".to_owned(),
                    false => names.join(", "),
                },
            }
            .into());
        };
        let view =
            bcd::View::decode(std::sync::Arc::new(bytes)).map_err(|e| bcd::Error::CorruptView {
                path: uri.clone(),
                reason: e.0,
            })?;
        let mismatch = view.binding.mismatch(
            self.len,
            self.manifest.shards,
            |shard| self.shard_first_record(shard),
            |shard| self.shard_fingerprint(shard),
        )?;
        match mismatch {
            None => Ok(view),
            Some(reason) => Err(bcd::Error::StaleView {
                path: uri,
                name: name.to_owned(),
                reason,
            }
            .into()),
        }
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The prefix.
    pub fn remote(&self) -> &Remote {
        &self.remote
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether there are no records.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether records carry keys.
    pub fn keyed(&self) -> bool {
        self.manifest.keyed
    }

    /// Total size of the shards' data files.
    pub fn stored_bytes(&self) -> u64 {
        self.shards.iter().map(|s| s.data_len).sum()
    }

    /// A signed index as a position (negative counts from the end).
    pub fn resolve_index(&self, index: i64) -> Result<usize> {
        let len = self.len as i64;
        let resolved = if index < 0 { index + len } else { index };
        match (0..len).contains(&resolved) {
            true => Ok(resolved as usize),
            false => Err(bcd::Error::IndexOutOfRange {
                index,
                len: self.len,
            }
            .into()),
        }
    }

    /// Where record `index` (< len) lies.
    pub fn span(&self, index: usize) -> RecordSpan {
        let index = index as u64;
        let shard = self.shards.partition_point(|s| s.first <= index) - 1;
        let layout = &self.shards[shard];
        let local = (index - layout.first) as usize;
        self.span_in(shard, local)
    }

    fn span_in(&self, shard: usize, local: usize) -> RecordSpan {
        let layout = &self.shards[shard];
        let (key_len, value_len) = record_sizes(&layout.sizes, self.keyed(), local);
        RecordSpan {
            shard: shard as u64,
            record: local as u64,
            start: layout.starts[local],
            key_len,
            value_len,
        }
    }

    fn data_uri(&self, shard: u64) -> String {
        self.remote.object_uri(&names(shard).0)
    }

    /// Decodes a stored value (decompresses LZ4 values), naming the record on
    /// failure.
    pub fn decode(&self, index: usize, span: &RecordSpan, stored: &[u8]) -> Result<Vec<u8>> {
        match self.manifest.compression {
            Compression::None => Ok(stored.to_vec()),
            Compression::Lz4 => bcd::lz4_block::decompress(stored).map_err(|e| {
                bcd::Error::CorruptValue {
                    path: PathBuf::from(self.data_uri(span.shard)),
                    record: span.record,
                    index: index as u64,
                    offset: span.value().start,
                    reason: e.0,
                }
                .into()
            }),
        }
    }

    /// The key of record `index` (< len): one ranged read (empty when keyless).
    pub fn key(&self, index: usize) -> Result<Vec<u8>> {
        let span = self.span(index);
        Ok(block_on(self.read(span.shard, span.key()))?.to_vec())
    }

    /// The value of record `index` (< len): one ranged read.
    pub fn value(&self, index: usize) -> Result<Vec<u8>> {
        let span = self.span(index);
        let stored = block_on(self.read(span.shard, span.value()))?;
        self.decode(index, &span, &stored)
    }

    async fn read(&self, shard: u64, range: Range<u64>) -> Result<bytes::Bytes> {
        if range.is_empty() {
            return Ok(bytes::Bytes::new());
        }
        let (data, _) = names(shard);
        let bytes = self.remote.read_range(&data, range.clone()).await?;
        if bytes.len() as u64 != range.end - range.start {
            return Err(RemoteError::Corrupt {
                uri: self.data_uri(shard),
                reason: format!("bytes {range:?} read as {} bytes", bytes.len()),
            });
        }
        Ok(bytes)
    }

    /// Calls `f` with every key, in order, until it returns `false`: ranged reads
    /// of the key bytes, coalesced. Keyed datasets only.
    pub fn for_each_key(&self, mut f: impl FnMut(usize, &[u8]) -> Result<bool>) -> Result<()> {
        if !self.keyed() {
            return Err(bcd::Error::WrongKeying(
                "keys are disabled for this dataset: it is keyless",
            )
            .into());
        }
        let store = self.remote.store()?;
        for (shard, layout) in self.shards.iter().enumerate() {
            let path = self.remote.path(&names(shard as u64).0);
            let mut local = 0;
            while local < layout.records() {
                // A window of records whose keys span at most KEY_WINDOW bytes.
                let window_start = layout.starts[local];
                let mut end = local;
                while end < layout.records()
                    && (end == local || layout.starts[end] - window_start < KEY_WINDOW)
                {
                    end += 1;
                }
                let spans: Vec<RecordSpan> = (local..end).map(|l| self.span_in(shard, l)).collect();
                let ranges: Vec<Range<u64>> = spans.iter().map(RecordSpan::key).collect();
                let keys = block_on(store.get_ranges(&path, &ranges))
                    .map_err(|e| RemoteError::store(self.data_uri(shard as u64), "read keys", e))?;
                for (span, key) in spans.iter().zip(&keys) {
                    if key.len() as u64 != span.key_len {
                        return Err(RemoteError::Corrupt {
                            uri: self.data_uri(shard as u64),
                            reason: format!("record {}: short key read", span.record),
                        });
                    }
                    if !f((layout.first + span.record) as usize, key)? {
                        return Ok(());
                    }
                }
                local = end;
            }
        }
        Ok(())
    }

    /// The position of `key`, reading keys in order until it is found.
    pub fn position(&self, key: &[u8]) -> Result<Option<usize>> {
        let mut found = None;
        self.for_each_key(|index, candidate| {
            if candidate == key {
                found = Some(index);
                return Ok(false);
            }
            Ok(true)
        })?;
        Ok(found)
    }

    /// Calls `f(index, key, stored value)` with every record in order, streaming
    /// each shard's data file once. A data file whose bytes do not match the
    /// checksum stored with it is an error naming it, at its end (after `f` saw
    /// its records).
    pub fn for_each_record(&self, f: impl FnMut(usize, &[u8], &[u8]) -> Result<()>) -> Result<()> {
        self.stream_records(f, Err)
    }

    /// [`RemoteDataset::for_each_record`], passing each data file's checksum
    /// mismatch to `mismatch` (which may note it and go on).
    fn stream_records(
        &self,
        mut f: impl FnMut(usize, &[u8], &[u8]) -> Result<()>,
        mut mismatch: impl FnMut(RemoteError) -> Result<()>,
    ) -> Result<()> {
        let store = self.remote.store()?;
        for (shard, layout) in self.shards.iter().enumerate() {
            if layout.records() == 0 {
                continue;
            }
            let uri = self.data_uri(shard as u64);
            let path = self.remote.path(&names(shard as u64).0);
            let read =
                block_on(store.get(&path)).map_err(|e| RemoteError::store(&uri, "read", e))?;
            let stamp = Stamp::from_attributes(&read.attributes);
            let mut hasher = xxhash_rust::xxh3::Xxh3::new();
            let mut stream = read.into_stream();
            let mut buffer = BytesMut::new();
            for local in 0..layout.records() {
                let span = self.span_in(shard, local);
                let need = (span.key_len + span.value_len) as usize;
                while buffer.len() < need {
                    match block_on(stream.next()) {
                        Some(chunk) => {
                            let chunk = chunk.map_err(|e| RemoteError::store(&uri, "read", e))?;
                            hasher.update(&chunk);
                            buffer.extend_from_slice(&chunk);
                        }
                        None => {
                            return Err(RemoteError::Corrupt {
                                uri,
                                reason: format!(
                                    "ends inside record {local}, before the {} bytes its index declares",
                                    layout.data_len
                                ),
                            })
                        }
                    }
                }
                let record = buffer.split_to(need);
                let (key, value) = record.split_at(span.key_len as usize);
                f((layout.first as usize) + local, key, value)?;
            }
            if !buffer.is_empty() || block_on(stream.next()).is_some() {
                return Err(RemoteError::Corrupt {
                    uri,
                    reason: "longer than its index declares: it changed while being read".into(),
                });
            }
            if let Some(problem) = checksum_problem(&uri, stamp, hasher.digest()) {
                mismatch(problem)?;
            }
        }
        Ok(())
    }

    /// Decodes every record and checks that no key occurs twice, like `bcd verify`
    /// of a local dataset; returns the problems found (empty when sound).
    pub fn verify(&self) -> Result<Vec<RemoteError>> {
        let mut problems = Vec::new();
        let mut keys: HashSet<Vec<u8>> = HashSet::new();
        let mut buffer = Vec::new();
        // The index files, read at open, against the checksums stored with them.
        for (shard, layout) in self.shards.iter().enumerate() {
            let uri = self.remote.object_uri(&names(shard as u64).1);
            let digest = xxhash_rust::xxh3::xxh3_64(&layout.sizes);
            problems.extend(checksum_problem(&uri, layout.index_stamp, digest));
        }
        let mut mismatches = Vec::new();
        self.stream_records(
            |index, key, stored| {
                let span = self.span(index);
                if self.keyed() && !keys.insert(key.to_vec()) {
                    problems.push(RemoteError::Local(bcd::Error::DuplicateKeyInDataset {
                        path: PathBuf::from(self.data_uri(span.shard)),
                        record: span.record,
                        key: DisplayKey(key.to_vec()),
                    }));
                }
                if self.manifest.compression == Compression::Lz4 {
                    if let Err(e) = bcd::lz4_block::decompress_into(stored, &mut buffer) {
                        problems.push(RemoteError::Local(bcd::Error::CorruptValue {
                            path: PathBuf::from(self.data_uri(span.shard)),
                            record: span.record,
                            index: index as u64,
                            offset: span.value().start,
                            reason: e.0,
                        }));
                    }
                }
                Ok(())
            },
            |problem| {
                mismatches.push(problem);
                Ok(())
            },
        )?;
        problems.extend(mismatches);
        Ok(problems)
    }
}

/// The problem of an object whose bytes (checksum `digest`) do not match the
/// checksum stored with it; an object without one (uploaded by another tool)
/// has nothing to check against.
fn checksum_problem(uri: &str, stamp: Stamp, digest: u64) -> Option<RemoteError> {
    let expected = stamp.xxh3?;
    (!same_content(stamp, digest)).then(|| RemoteError::Corrupt {
        uri: uri.to_owned(),
        reason: format!(
            "its bytes have checksum {digest:016x}, but it was uploaded with {expected:016x}: it changed after the upload"
        ),
    })
}

/// The object names of shard `id`'s data and index files.
fn names(id: u64) -> (String, String) {
    let (data, index) = shard_paths(std::path::Path::new(""), id);
    (
        data.to_string_lossy().into_owned(),
        index.to_string_lossy().into_owned(),
    )
}
