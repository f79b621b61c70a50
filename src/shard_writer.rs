//! Writes records into new, uncommitted shard files, starting a new shard where the
//! reference would. Committing them (the manifest) is the caller's job.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fingerprint::{FingerprintBuilder, ShardFingerprint};
use crate::format::{shard_paths, MAX_FIELD_SIZE};
use crate::storage::{Storage, StorageFile};

const BUFFER: usize = 1 << 20;

struct OpenShard {
    data: BufWriter<Box<dyn StorageFile>>,
    index: BufWriter<Box<dyn StorageFile>>,
    data_path: PathBuf,
    index_path: PathBuf,
    size: u64,
    id: u64,
    fingerprint: FingerprintBuilder,
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
        }
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
        self.append_parts(key, [stored, &[]])
    }

    /// [`append`](Self::append) of a stored value given as two parts written
    /// one after the other (a literal-only LZ4 block's header, then the value
    /// itself, without copying them together).
    pub fn append_parts(&mut self, key: &[u8], stored: [&[u8]; 2]) -> Result<()> {
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
        shard
            .data
            .write_all(key)
            .and_then(|()| shard.data.write_all(stored[0]))
            .and_then(|()| shard.data.write_all(stored[1]))
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
        self.current = Some(OpenShard {
            data: BufWriter::with_capacity(BUFFER, data),
            index: BufWriter::with_capacity(BUFFER / 8, index),
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
            for (writer, path) in [
                (shard.data, shard.data_path),
                (shard.index, shard.index_path),
            ] {
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
