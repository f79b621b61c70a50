//! A spilled run: sorted `(hash, record)` entries in a temporary file, 16 bytes
//! each (the hash, then the record, little-endian), with what stays in memory to
//! look a hash up in it: the first hash of every 4 KiB block (8 bytes per 256
//! entries) and a Bloom filter. A lookup the filter lets through reads one block,
//! rarely two.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use super::filter::Filter;
use crate::storage::{Storage, StorageFile};

/// Bytes of one entry on disk.
pub(crate) const ENTRY_BYTES: usize = 16;
/// Entries per block: one block is 4 KiB.
const BLOCK: usize = 256;

/// A run being written.
pub(super) struct RunWriter {
    out: BufWriter<Box<dyn StorageFile>>,
    path: PathBuf,
    len: u64,
    firsts: Vec<u64>,
    filter: Filter,
    last: Option<(u64, u64)>,
}

impl RunWriter {
    /// Creates the run file `path` for `entries` entries, with a filter of
    /// `bits_per_entry` bits per entry.
    pub(super) fn create(
        storage: &dyn Storage,
        path: PathBuf,
        entries: u64,
        bits_per_entry: u64,
    ) -> io::Result<RunWriter> {
        let file = storage.create(&path)?;
        Ok(RunWriter {
            out: BufWriter::with_capacity(1 << 20, file),
            path,
            len: 0,
            firsts: Vec::with_capacity((entries as usize).div_ceil(BLOCK)),
            filter: Filter::new(entries, bits_per_entry),
            last: None,
        })
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends an entry; entries come sorted by `(hash, record)`.
    pub(super) fn push(&mut self, hash: u64, record: u64) -> crate::Result<()> {
        self.push_entry(hash, record)
            .map_err(|e| crate::Error::io("write spilled keys", &self.path, e))
    }

    fn push_entry(&mut self, hash: u64, record: u64) -> io::Result<()> {
        debug_assert!(self.last.is_none_or(|last| last < (hash, record)));
        self.last = Some((hash, record));
        if self.len.is_multiple_of(BLOCK as u64) {
            self.firsts.push(hash);
        }
        self.filter.insert(hash);
        let mut entry = [0u8; ENTRY_BYTES];
        entry[..8].copy_from_slice(&hash.to_le_bytes());
        entry[8..].copy_from_slice(&record.to_le_bytes());
        self.out.write_all(&entry)?;
        self.len += 1;
        Ok(())
    }

    /// Flushes the file (a temporary: not fsynced) and opens it for reading.
    pub(super) fn finish(self) -> io::Result<Run> {
        let RunWriter {
            out,
            path,
            len,
            firsts,
            filter,
            ..
        } = self;
        drop(out.into_inner().map_err(|e| e.into_error())?);
        let file = File::open(&path)?;
        let on_disk = file.metadata()?.len();
        if on_disk != len * ENTRY_BYTES as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} holds {on_disk} bytes after {len} entries were written",
                    path.display()
                ),
            ));
        }
        Ok(Run {
            path,
            file,
            len,
            firsts,
            filter,
        })
    }
}

/// A run on disk.
#[derive(Debug)]
pub(super) struct Run {
    path: PathBuf,
    file: File,
    len: u64,
    firsts: Vec<u64>,
    filter: Filter,
}

impl Run {
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// Bytes it keeps in memory.
    pub(super) fn memory(&self) -> usize {
        self.firsts.capacity() * 8 + self.filter.bytes()
    }

    /// Bytes of its filter.
    pub(super) fn filter_bytes(&self) -> usize {
        self.filter.bytes()
    }

    /// Appends the records whose hash is `hash` to `out`.
    pub(super) fn find(&self, hash: u64, out: &mut Vec<u64>) -> io::Result<()> {
        if self.len == 0 || !self.filter.may_contain(hash) {
            return Ok(());
        }
        // The block before the first that starts at `hash` or later holds the
        // first entry at `hash`, if any does not start a block.
        let mut block = self.firsts.partition_point(|&f| f < hash).saturating_sub(1);
        let mut buffer = [0u8; BLOCK * ENTRY_BYTES];
        loop {
            let first = (block * BLOCK) as u64;
            if first >= self.len {
                return Ok(());
            }
            let entries = (self.len - first).min(BLOCK as u64) as usize;
            let bytes = &mut buffer[..entries * ENTRY_BYTES];
            read_at(&self.file, bytes, first * ENTRY_BYTES as u64)
                .map_err(|e| annotate(&self.path, e))?;
            for entry in bytes.chunks_exact(ENTRY_BYTES) {
                let (entry_hash, record) = decode(entry);
                if entry_hash > hash {
                    return Ok(());
                }
                if entry_hash == hash {
                    out.push(record);
                }
            }
            block += 1;
        }
    }

    /// Reads the run in order.
    pub(super) fn cursor(&self) -> io::Result<RunCursor> {
        let file = File::open(&self.path)?;
        Ok(RunCursor {
            reader: BufReader::with_capacity(1 << 18, file),
            left: self.len,
            path: self.path.clone(),
        })
    }
}

/// A run read in order.
pub(super) struct RunCursor {
    reader: BufReader<File>,
    left: u64,
    path: PathBuf,
}

impl Iterator for RunCursor {
    type Item = io::Result<(u64, u64)>;

    fn next(&mut self) -> Option<io::Result<(u64, u64)>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let mut entry = [0u8; ENTRY_BYTES];
        Some(match self.reader.read_exact(&mut entry) {
            Ok(()) => Ok(decode(&entry)),
            Err(e) => {
                self.left = 0;
                Err(annotate(&self.path, e))
            }
        })
    }
}

fn decode(entry: &[u8]) -> (u64, u64) {
    let word = |at: usize| {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&entry[at..at + 8]);
        u64::from_le_bytes(bytes)
    };
    (word(0), word(8))
}

fn annotate(path: &Path, error: io::Error) -> io::Error {
    io::Error::new(
        error.kind(),
        format!("reading the spilled keys {}: {error}", path.display()),
    )
}

#[cfg(unix)]
pub(crate) fn read_at(file: &File, buffer: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buffer, offset)
}

#[cfg(not(unix))]
pub(crate) fn read_at(mut file: &File, buffer: &mut [u8], offset: u64) -> io::Result<()> {
    use std::io::{Seek, SeekFrom};
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(buffer)
}
