//! Writes records into new, uncommitted shard files, starting a new shard where the
//! reference would. Committing them (the manifest) is the caller's job.

use std::io::{self, BufWriter, IoSlice, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fingerprint::{FingerprintBuilder, ShardFingerprint};
use crate::format::{
    index_fields, record_sizes, shard_paths, sidecar_path, CONTENT_HASH_SIZE, CONTENT_HASH_SUFFIX,
    INDEX_FIELD_SIZE, MAX_FIELD_SIZE,
};
use crate::storage::{Storage, StorageFile};

const BUFFER: usize = 1 << 20;
/// A part of a record at least this long is not copied into the buffer: it is
/// written from where it is, in one call with what is buffered before it (an
/// image or a long token sequence would otherwise cross memory twice).
const DIRECT_WRITE: usize = 64 << 10;
/// The byte offset of every this many records is kept, so a record written
/// earlier is found by reading at most this many `.idx` entries.
const CHECKPOINT_EVERY: u64 = 64;

struct OpenShard {
    data: DataFile,
    index: BufWriter<Box<dyn StorageFile>>,
    /// The content hashes (`NNNNNN.xxh128`), when the writer keeps them.
    content: Option<BufWriter<Box<dyn StorageFile>>>,
    data_path: PathBuf,
    index_path: PathBuf,
    size: u64,
    id: u64,
    fingerprint: FingerprintBuilder,
}

/// A shard this writer started: where its records are, to read them back.
struct Started {
    id: u64,
    /// The writer's number of its first record.
    first: u64,
}

/// A record this writer wrote, read back.
pub(crate) struct ReadBack {
    pub(crate) key: Vec<u8>,
    pub(crate) stored: Vec<u8>,
}

/// A shard a writer finished: flushed and fsynced, not yet committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WrittenShard {
    /// Its number.
    pub id: u64,
    /// Its content's fingerprint.
    pub fingerprint: ShardFingerprint,
}

/// Appends records to shards `first_id, first_id + 1, ...` of a directory.
pub struct ShardWriter {
    dir: PathBuf,
    storage: Arc<dyn Storage>,
    keyed: bool,
    max_shard_size: u64,
    next_id: u64,
    current: Option<OpenShard>,
    /// Every file created, so an abort can remove them.
    created: Vec<PathBuf>,
    records: u64,
    bytes: u64,
    /// Shards finished and not yet taken by [`ShardWriter::take_finished`].
    finished: Vec<WrittenShard>,
    /// Whether each record's content hash is written beside it.
    content_hashes: bool,
    /// Every shard started, in order.
    started: Vec<Started>,
    /// Byte offset in its shard of every [`CHECKPOINT_EVERY`]th record.
    checkpoints: Vec<u64>,
}

impl ShardWriter {
    /// A writer whose first shard will be `first_id`.
    pub fn new(
        dir: &Path,
        storage: Arc<dyn Storage>,
        keyed: bool,
        max_shard_size: u64,
        first_id: u64,
    ) -> ShardWriter {
        ShardWriter {
            dir: dir.to_owned(),
            storage,
            keyed,
            max_shard_size,
            next_id: first_id,
            current: None,
            created: Vec::new(),
            records: 0,
            bytes: 0,
            finished: Vec::new(),
            content_hashes: false,
            started: Vec::new(),
            checkpoints: Vec::new(),
        }
    }

    /// Writes each record's content hash (given to [`ShardWriter::append`]) to
    /// its shard's sidecar `NNNNNN.xxh128` too, flushed and fsynced with it.
    /// Set before the first record.
    pub(crate) fn keep_content_hashes(&mut self) {
        debug_assert_eq!(self.records, 0);
        self.content_hashes = true;
    }

    /// Whether content hashes are written.
    pub(crate) fn keeps_content_hashes(&self) -> bool {
        self.content_hashes
    }

    /// The number the next new shard gets (one past the last shard written).
    pub fn next_shard(&self) -> u64 {
        self.next_id
    }

    /// The shard records are being appended to, if one is open.
    pub fn open_shard(&self) -> Option<u64> {
        self.current.as_ref().map(|s| s.id)
    }

    /// Records appended so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Bytes (keys and stored values) appended so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Checks that a record fits the format, without writing anything.
    pub fn check_sizes(key: &[u8], stored: &[u8]) -> Result<()> {
        Self::check_lens(key.len(), stored.len())
    }

    /// [`check_sizes`](Self::check_sizes) by the lengths.
    pub(crate) fn check_lens(key: usize, stored: usize) -> Result<()> {
        for (what, len) in [("key", key), ("stored value", stored)] {
            if len as u64 > MAX_FIELD_SIZE {
                return Err(Error::TooLarge {
                    what,
                    size: len as u64,
                    limit: MAX_FIELD_SIZE,
                });
            }
        }
        Ok(())
    }

    /// Appends one record (`key` empty for keyless datasets). A new shard starts
    /// when the current one is non-empty and this record would take it past
    /// `max_shard_size`; a record larger than that gets a shard of its own.
    pub fn append(&mut self, key: &[u8], stored: &[u8]) -> Result<()> {
        self.append_hashed(key, [stored, &[]], None)
    }

    /// [`ShardWriter::append`] of a stored value given as two parts written one
    /// after the other (a literal-only LZ4 block's header, then the value
    /// itself, without copying them together), with the value's content hash
    /// (the XXH3-128 of its uncompressed bytes, in the sidecar's byte order),
    /// written when the writer keeps content hashes (and required then).
    pub(crate) fn append_hashed(
        &mut self,
        key: &[u8],
        stored: [&[u8]; 2],
        content_hash: Option<&[u8; CONTENT_HASH_SIZE]>,
    ) -> Result<()> {
        if self.content_hashes != content_hash.is_some() {
            return Err(Error::InvalidOption(
                "a record's content hash is written exactly when the writer keeps them".into(),
            ));
        }
        let stored_len = stored[0].len() + stored[1].len();
        Self::check_lens(key.len(), stored_len)?;
        let record_size = (key.len() + stored_len) as u64;
        let full = self
            .current
            .as_ref()
            .is_some_and(|s| s.size > 0 && s.size + record_size > self.max_shard_size);
        if full {
            self.finish_current()?;
        }
        if self.current.is_none() {
            self.open_next()?;
        }
        let shard = self.current.as_mut().expect("a shard was just opened");
        if self.records.is_multiple_of(CHECKPOINT_EVERY) {
            self.checkpoints.push(shard.size);
        }
        if let (Some(out), Some(hash)) = (&mut shard.content, content_hash) {
            out.write_all(hash).map_err(|e| {
                Error::io(
                    "write",
                    sidecar_path(&self.dir, shard.id, CONTENT_HASH_SUFFIX),
                    e,
                )
            })?;
        }
        shard
            .data
            .append([key, stored[0], stored[1]])
            .map_err(|e| Error::io("write", &shard.data_path, e))?;
        let mut entry = [0u8; 8];
        entry[..4].copy_from_slice(&(key.len() as u32).to_le_bytes());
        entry[4..].copy_from_slice(&(stored_len as u32).to_le_bytes());
        let entry = if self.keyed { &entry[..] } else { &entry[4..] };
        shard
            .index
            .write_all(entry)
            .map_err(|e| Error::io("write", &shard.index_path, e))?;
        shard.fingerprint.data(key);
        shard.fingerprint.data(stored[0]);
        shard.fingerprint.data(stored[1]);
        shard.fingerprint.index(entry, 1);
        shard.size += record_size;
        self.records += 1;
        self.bytes += record_size;
        Ok(())
    }

    fn open_next(&mut self) -> Result<()> {
        let (data_path, index_path) = shard_paths(&self.dir, self.next_id);
        // Register before creating, so an abort removes even a half-created file.
        self.created.push(data_path.clone());
        let data = self
            .storage
            .create(&data_path)
            .map_err(|e| Error::io("create", &data_path, e))?;
        self.created.push(index_path.clone());
        let index = self
            .storage
            .create(&index_path)
            .map_err(|e| Error::io("create", &index_path, e))?;
        let content = match self.content_hashes {
            false => None,
            true => {
                let path = sidecar_path(&self.dir, self.next_id, CONTENT_HASH_SUFFIX);
                self.created.push(path.clone());
                let file = self
                    .storage
                    .create(&path)
                    .map_err(|e| Error::io("create", &path, e))?;
                Some(BufWriter::with_capacity(BUFFER / 4, file))
            }
        };
        self.started.push(Started {
            id: self.next_id,
            first: self.records,
        });
        self.current = Some(OpenShard {
            data: DataFile::new(data),
            index: BufWriter::with_capacity(BUFFER / 8, index),
            content,
            data_path,
            index_path,
            size: 0,
            id: self.next_id,
            fingerprint: FingerprintBuilder::default(),
        });
        self.next_id += 1;
        Ok(())
    }

    fn finish_current(&mut self) -> Result<()> {
        if let Some(shard) = self.current.take() {
            let written = WrittenShard {
                id: shard.id,
                fingerprint: shard.fingerprint.finish(),
            };
            let content = shard.content.map(|writer| {
                let path = sidecar_path(&self.dir, shard.id, CONTENT_HASH_SUFFIX);
                (writer, path)
            });
            let mut data = shard
                .data
                .into_inner()
                .map_err(|e| Error::io("write", &shard.data_path, e))?;
            data.sync()
                .map_err(|e| Error::io("fsync", &shard.data_path, e))?;
            let files = [(shard.index, shard.index_path)];
            for (writer, path) in files.into_iter().chain(content) {
                let mut file = writer
                    .into_inner()
                    .map_err(|e| Error::io("write", &path, e.into_error()))?;
                file.sync().map_err(|e| Error::io("fsync", &path, e))?;
            }
            self.finished.push(written);
        }
        Ok(())
    }

    /// Closes the current shard, if any, so that the next record starts a new one.
    pub fn close_shard(&mut self) -> Result<()> {
        self.finish_current()
    }

    /// The shards finished (flushed and fsynced) since the last call, in order.
    pub fn take_finished(&mut self) -> Vec<WrittenShard> {
        std::mem::take(&mut self.finished)
    }

    /// Registers a file written beside the shards, so an abort removes it too.
    pub fn register(&mut self, path: PathBuf) {
        self.created.push(path);
    }

    /// Flushes and fsyncs the last shard and returns the shard count the manifest
    /// should commit (unchanged if nothing was appended). The directory itself is
    /// not synced here.
    pub fn finish(&mut self) -> Result<u64> {
        self.finish_current()?;
        Ok(self.next_id)
    }

    /// Forgets the files written so far, once they are committed, so that a later
    /// [`ShardWriter::abort`] leaves them alone.
    pub fn keep(&mut self) {
        self.created.clear();
    }

    /// Record `record` (the writer's number: 0 for its first) as written, for a
    /// check against a new record. A record of the shard being written is
    /// flushed to its file first.
    pub(crate) fn read_back(&mut self, record: u64) -> Result<ReadBack> {
        let (shard_at, entry) = self.locate(record)?;
        let Started { id, .. } = self.started[shard_at];
        let (key_len, stored_len, offset) = entry;
        let (data_path, _) = shard_paths(&self.dir, id);
        let file = std::fs::File::open(&data_path).map_err(|e| Error::io("open", &data_path, e))?;
        let mut bytes = vec![0u8; (key_len + stored_len) as usize];
        crate::key_set::read_at(&file, &mut bytes, offset)
            .map_err(|e| Error::io("read back", &data_path, e))?;
        let stored = bytes.split_off(key_len as usize);
        Ok(ReadBack { key: bytes, stored })
    }

    /// The content hash of record `record`, as written.
    pub(crate) fn read_back_content_hash(
        &mut self,
        record: u64,
    ) -> Result<[u8; CONTENT_HASH_SIZE]> {
        let shard_at = self.shard_of(record)?;
        let Started { id, first } = self.started[shard_at];
        self.flush_if_current(id)?;
        let path = sidecar_path(&self.dir, id, CONTENT_HASH_SUFFIX);
        let file = std::fs::File::open(&path).map_err(|e| Error::io("open", &path, e))?;
        let mut hash = [0u8; CONTENT_HASH_SIZE];
        let at = (record - first) * CONTENT_HASH_SIZE as u64;
        crate::key_set::read_at(&file, &mut hash, at)
            .map_err(|e| Error::io("read back", &path, e))?;
        Ok(hash)
    }

    fn shard_of(&self, record: u64) -> Result<usize> {
        if record >= self.records {
            return Err(Error::InvalidOption(format!(
                "record {record} was not written by this writer ({} were)",
                self.records
            )));
        }
        Ok(self.started.partition_point(|s| s.first <= record) - 1)
    }

    /// Flushes the buffers of the shard being written if it is shard `id`.
    fn flush_if_current(&mut self, id: u64) -> Result<()> {
        let Some(shard) = self.current.as_mut().filter(|s| s.id == id) else {
            return Ok(());
        };
        shard
            .data
            .flush()
            .map_err(|e| Error::io("write", &shard.data_path, e))?;
        shard
            .index
            .flush()
            .map_err(|e| Error::io("write", &shard.index_path, e))?;
        if let Some(content) = &mut shard.content {
            let path = sidecar_path(&self.dir, id, CONTENT_HASH_SUFFIX);
            content.flush().map_err(|e| Error::io("write", path, e))?;
        }
        Ok(())
    }

    /// The shard (its place in `started`) of record `record`, and its key size,
    /// stored value size and byte offset in the shard's data file, from the
    /// checkpoint before it and the `.idx` entries after that.
    fn locate(&mut self, record: u64) -> Result<(usize, (u64, u64, u64))> {
        let shard_at = self.shard_of(record)?;
        let Started { id, first } = self.started[shard_at];
        self.flush_if_current(id)?;
        let checkpoint = record / CHECKPOINT_EVERY * CHECKPOINT_EVERY;
        let (from, mut offset) = match checkpoint >= first {
            true => (
                checkpoint,
                self.checkpoints[(record / CHECKPOINT_EVERY) as usize],
            ),
            false => (first, 0),
        };
        let (_, index_path) = shard_paths(&self.dir, id);
        let entry = INDEX_FIELD_SIZE * index_fields(self.keyed);
        let mut sizes = vec![0u8; (record - from + 1) as usize * entry];
        let file =
            std::fs::File::open(&index_path).map_err(|e| Error::io("open", &index_path, e))?;
        crate::key_set::read_at(&file, &mut sizes, (from - first) * entry as u64)
            .map_err(|e| Error::io("read back", &index_path, e))?;
        let last = (record - from) as usize;
        for local in 0..last {
            let (key, value) = record_sizes(&sizes, self.keyed, local);
            offset += key + value;
        }
        let (key, value) = record_sizes(&sizes, self.keyed, last);
        Ok((shard_at, (key, value, offset)))
    }

    /// Removes every file this writer created. Best effort: files left behind are
    /// uncommitted leftovers, which readers ignore and the next extend overwrites.
    pub fn abort(&mut self) {
        self.current = None;
        self.finished.clear();
        for path in self.created.drain(..) {
            let _ = self.storage.remove(&path);
        }
    }
}

/// A shard's data file behind a buffer of [`BUFFER`] bytes that large parts of
/// records bypass: a part of [`DIRECT_WRITE`] bytes or more goes to the file in
/// one vectored write with what is buffered before it, so the bytes reach the
/// file in order and the part is never copied in user space.
struct DataFile {
    file: Box<dyn StorageFile>,
    buffer: Vec<u8>,
}

impl DataFile {
    fn new(file: Box<dyn StorageFile>) -> DataFile {
        DataFile {
            file,
            buffer: Vec::with_capacity(BUFFER),
        }
    }

    /// Appends the parts of one record, in order.
    fn append(&mut self, parts: [&[u8]; 3]) -> io::Result<()> {
        for part in parts {
            if part.len() >= DIRECT_WRITE {
                write_all_vectored(&mut *self.file, [&self.buffer, part])?;
                self.buffer.clear();
            } else {
                if self.buffer.len() + part.len() > BUFFER {
                    self.flush()?;
                }
                self.buffer.extend_from_slice(part);
            }
        }
        Ok(())
    }

    /// Writes out what is buffered.
    fn flush(&mut self) -> io::Result<()> {
        self.file.write_all(&self.buffer)?;
        self.buffer.clear();
        self.file.flush()
    }

    /// The file, once what is buffered is written.
    fn into_inner(mut self) -> io::Result<Box<dyn StorageFile>> {
        self.flush()?;
        Ok(self.file)
    }
}

/// Writes both `parts`, in order, in as few calls as the file takes.
fn write_all_vectored(file: &mut dyn StorageFile, parts: [&[u8]; 2]) -> io::Result<()> {
    let mut slices = parts.map(IoSlice::new);
    let mut left = &mut slices[..];
    IoSlice::advance_slices(&mut left, 0);
    while !left.is_empty() {
        match file.write_vectored(left) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut left, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
