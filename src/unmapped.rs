//! Values read with positional reads (`pread`) of their shard's data file
//! instead of through its mapping: for values scattered sparsely over a large
//! dataset (a small view's batches).
//!
//! A read through the mapping costs the reading process a page fault, and the
//! fault maps every cached page around the value (a whole large folio of the
//! page cache on current kernels: 147 KiB a 2 KB value, measured on 6.18), each
//! page table entry set on the fault and cleared again when the process unmaps
//! the shard or exits. Read densely, those pages hold the next values; read
//! sparsely, they are pure cost: a DataLoader worker that read 10,000 values of
//! a 1% view had 1.5 GB of the shards mapped and took 65-270 ms to exit. A
//! positional read copies the value's bytes out of the page cache and maps
//! nothing.
//!
//! The mapping stays the authority on what was opened: a file is read this way
//! only when it is the very file the shard's data was loaded from (same device
//! and inode), otherwise the value is read through the mapping as usual.

use std::borrow::Cow;
use std::fs::File;
use std::sync::{Arc, Mutex, PoisonError};

use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::lz4_block;
use crate::manifest::Compression;
use crate::mapping::{open_regular, Mapping};
use crate::reader::Location;
use crate::shard::Shard;

/// The shard files open for positional reads. Every dataset of the process
/// together keeps at most [`open_max`] open ([`OPEN_FILES`]): past it, a
/// dataset closes its least recently used one first (or, holding none, keeps
/// none), so datasets of many shards, or many datasets (a mixture's sources in
/// each DataLoader worker), never take the descriptors the rest of the process
/// needs.
#[derive(Debug, Default)]
pub(crate) struct OpenShards {
    open: Mutex<OpenFiles>,
}

#[derive(Debug)]
struct OpenFiles {
    /// Shard id to its file and when it was last used.
    files: hashbrown::HashMap<u64, (Arc<File>, u64)>,
    /// Uses so far: the clock of `files`' last uses.
    uses: u64,
    /// The count of files open that the bound applies to: [`OPEN_FILES`].
    counted: &'static std::sync::atomic::AtomicUsize,
}

impl Default for OpenFiles {
    fn default() -> Self {
        OpenFiles {
            files: Default::default(),
            uses: 0,
            counted: &OPEN_FILES,
        }
    }
}

/// How many shard files the process's datasets keep open for positional reads:
/// a quarter of the process's descriptor limit (the soft `RLIMIT_NOFILE`), between 32 and
/// 4,096. Read in random order, a dataset of more shards than this reopens a
/// file per value (an `open`, two `statx` and a `close`: measured 3x the cost of
/// the read itself); 1,024 descriptors (the usual default) keep 256 shards
/// open, 256 GiB of 1 GiB shards.
fn open_max() -> usize {
    static MAX: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| {
        descriptor_limit().map_or(OPEN_MIN, |limit| (limit / 4).clamp(OPEN_MIN, OPEN_CAP))
    })
}

/// Shard files kept open for positional reads by every dataset of the process.
static OPEN_FILES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

const OPEN_MIN: usize = 32;
const OPEN_CAP: usize = 4096;

#[cfg(unix)]
fn descriptor_limit() -> Option<usize> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given, which lives here.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    usize::try_from(limit.rlim_cur).ok()
}

#[cfg(not(unix))]
fn descriptor_limit() -> Option<usize> {
    None
}

impl OpenShards {
    /// Shard `id`'s data file, opened (or reused) for positional reads; `None`
    /// when it cannot be read that way: not a mapped file, or the file now at its
    /// path is not the one the mapping was made from.
    fn file(&self, id: u64, shard: &Shard, data: &Mapping) -> Option<Arc<File>> {
        if !matches!(data, Mapping::Mapped(_)) {
            return None;
        }
        let identity = shard.data_identity()?;
        if let Some(file) = self
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
        {
            return Some(file);
        }
        // Opened without the lock held: another thread may open it too, and the
        // second one kept replaces nothing but its own entry.
        let file = open_data_file(shard)?;
        if file_identity(&file)? != identity {
            return None;
        }
        let file = Arc::new(file);
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, Arc::clone(&file), open_max());
        Some(file)
    }
}

impl OpenFiles {
    /// Shard `id`'s file if it is open, marked as used now.
    fn get(&mut self, id: u64) -> Option<Arc<File>> {
        self.uses += 1;
        let (file, used) = self.files.get_mut(&id)?;
        *used = self.uses;
        Some(Arc::clone(file))
    }

    /// Keeps `file` open as shard `id`'s (unless another thread kept one
    /// meanwhile), closing this dataset's least recently used one when the
    /// process's datasets hold `max` (and keeping none if it holds none).
    fn insert(&mut self, id: u64, file: Arc<File>, max: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        if self.files.contains_key(&id) {
            return;
        }
        let taken = self
            .counted
            .fetch_update(Relaxed, Relaxed, |open| (open < max).then_some(open + 1));
        if taken.is_err() {
            // A scan, on a miss with every place taken: the place is reused.
            let oldest = self.files.iter().min_by_key(|(_, (_, used))| *used);
            let Some(&oldest) = oldest.map(|(id, _)| id) else {
                return;
            };
            self.files.remove(&oldest);
        }
        self.uses += 1;
        self.files.insert(id, (file, self.uses));
    }
}

impl Drop for OpenFiles {
    fn drop(&mut self) {
        self.counted
            .fetch_sub(self.files.len(), std::sync::atomic::Ordering::Relaxed);
    }
}

/// Opens `shard`'s data file where it is read from: its path, or its source.
fn open_data_file(shard: &Shard) -> Option<File> {
    match &shard.source {
        None => open_regular(&shard.path).ok().map(|(file, _)| file),
        Some((id, files)) => files.open(*id).ok(),
    }
}

/// The device and inode of `file`.
#[cfg(unix)]
pub(crate) fn file_identity(file: &File) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    file.metadata().ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(not(unix))]
pub(crate) fn file_identity(_: &File) -> Option<(u64, u64)> {
    None
}

/// Reads exactly `out.len()` bytes at `offset` of `file`.
#[cfg(unix)]
fn read_exact_at(file: &File, out: &mut [u8], offset: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.read_exact_at(out, offset)
}

#[cfg(not(unix))]
fn read_exact_at(_: &File, _: &mut [u8], _: u64) -> std::io::Result<()> {
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}

/// What a read that must not wait for the disk did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NoWait {
    /// Every byte was read: they were all in the page cache.
    Read,
    /// Some byte was not in the page cache (or the read failed): nothing can be
    /// assumed of `out`.
    Missing,
    /// The system cannot read without waiting.
    Unsupported,
}

/// Reads exactly `out.len()` bytes at `offset` of `file` if they are all in the
/// page cache, without waiting for the disk (`preadv2` with `RWF_NOWAIT`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn read_at_nowait(file: &File, out: &mut [u8], offset: u64) -> NoWait {
    use std::os::fd::AsRawFd;
    let Ok(at) = libc::off_t::try_from(offset) else {
        return NoWait::Missing;
    };
    let iov = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: out.len(),
    };
    // SAFETY: the iovec describes `out`, which is valid for writes of its
    // length for the call; the descriptor is `file`'s, open for the call.
    let read = unsafe { libc::preadv2(file.as_raw_fd(), &iov, 1, at, libc::RWF_NOWAIT) };
    match usize::try_from(read) {
        Ok(n) if n == out.len() => NoWait::Read,
        Ok(_) => NoWait::Missing,
        Err(_) => match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EAGAIN) => NoWait::Missing,
            Some(libc::EOPNOTSUPP | libc::ENOSYS | libc::EINVAL) => NoWait::Unsupported,
            _ => NoWait::Missing,
        },
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn read_at_nowait(_: &File, _: &mut [u8], _: u64) -> NoWait {
    NoWait::Unsupported
}

impl Dataset {
    /// Writes the value at `index` into `out` exactly as [`Dataset::read_into`]
    /// does, reading its stored bytes with a positional read of the shard's data
    /// file rather than through the mapping (see the module's notes): for
    /// values read sparsely. `stored` is scratch space for a compressed value's
    /// stored bytes. Values of shards read into memory, or whose file cannot be
    /// read this way, are read through the mapping.
    pub fn read_into_unmapped(
        &self,
        index: usize,
        out: &mut [u8],
        stored: &mut Vec<u8>,
    ) -> Result<()> {
        self.check_index(index)?;
        let location = self.index.locate(index)?;
        let Some(file) = self.unmapped_file(&location) else {
            return self.read_into(index, out);
        };
        match self.compression() {
            Compression::None => {
                if out.len() != location.stored.len() {
                    return Err(wrong_buffer(out.len(), location.stored.len()));
                }
                read_at(&file, &location, out)?;
            }
            Compression::Lz4 => {
                stored.clear();
                stored.resize(location.stored.len(), 0);
                read_at(&file, &location, stored)?;
                self.decode_stored(index, &location, stored, out)?;
            }
        }
        self.check_content(index, out)
    }

    /// The value at `index` as [`Dataset::at`] gives it, its stored bytes read
    /// with a positional read of the shard's data file into `stored` (scratch,
    /// reused from value to value) rather than through the mapping: a value
    /// stored verbatim (uncompressed, or a literal-only LZ4 block) is a slice
    /// of `stored`, another is decoded into a vector of its own. For a reader
    /// of many values that should not map them (a DataLoader worker decoding
    /// images). Values of shards whose file cannot be read this way are read
    /// through the mapping.
    pub fn at_unmapped<'a>(
        &'a self,
        index: usize,
        stored: &'a mut Vec<u8>,
    ) -> Result<Cow<'a, [u8]>> {
        self.check_index(index)?;
        let location = self.index.locate(index)?;
        let Some(file) = self.unmapped_file(&location) else {
            return self.at(index);
        };
        // Grown, never shrunk nor cleared: zeroing a value's worth of scratch
        // before every read would cost a third of the read.
        let len = location.stored.len();
        if stored.len() < len {
            stored.resize(len, 0);
        }
        let stored = &mut stored[..len];
        read_at(&file, &location, stored)?;
        let stored = &*stored;
        let value = match self.compression() {
            Compression::None => Cow::Borrowed(stored),
            Compression::Lz4 => match lz4_block::literal_range(stored) {
                Some(range) => Cow::Borrowed(&stored[range]),
                None => lz4_block::decompress(stored)
                    .map(Cow::Owned)
                    .map_err(|e| Self::corrupt(index, &location, e))?,
            },
        };
        self.check_content(index, &value)?;
        Ok(value)
    }

    /// The length of the value at `index`, reading (for a compressed dataset) its
    /// stored bytes into `stored` with a positional read rather than touching the
    /// mapping, as [`Dataset::value_len`] would; `stored` then holds them for
    /// [`Dataset::decode_stored_into`]. `None` when the shard's file cannot be
    /// read that way (use [`Dataset::read_into`]).
    pub fn read_stored_unmapped(
        &self,
        index: usize,
        stored: &mut Vec<u8>,
    ) -> Result<Option<usize>> {
        self.check_index(index)?;
        let location = self.index.locate(index)?;
        let Some(file) = self.unmapped_file(&location) else {
            return Ok(None);
        };
        stored.clear();
        stored.resize(location.stored.len(), 0);
        read_at(&file, &location, stored)?;
        let len = match self.compression() {
            Compression::None => stored.len(),
            Compression::Lz4 => {
                lz4_block::declared_len(stored).map_err(|e| Self::corrupt(index, &location, e))?
            }
        };
        Ok(Some(len))
    }

    /// Writes the value at `index`, whose stored bytes [`Dataset::read_stored_unmapped`]
    /// read into `stored`, into `out` (exactly its length), checked as
    /// [`Dataset::read_into`] checks.
    pub fn decode_stored_into(&self, index: usize, stored: &[u8], out: &mut [u8]) -> Result<()> {
        self.check_index(index)?;
        let location = self.index.locate(index)?;
        if stored.len() != location.stored.len() {
            return Err(Error::InvalidOption(format!(
                "decode_stored_into: {} stored bytes for a value stored in {}",
                stored.len(),
                location.stored.len()
            )));
        }
        self.decode_stored(index, &location, stored, out)?;
        self.check_content(index, out)
    }

    /// `stored` (the value at `index`, stored at `location`: read from its
    /// mapping or positionally) into `out`, which must be exactly the value's
    /// length; the one decoder of [`Dataset::read_into`] and the positional reads.
    pub(crate) fn decode_stored(
        &self,
        index: usize,
        location: &Location<'_>,
        stored: &[u8],
        out: &mut [u8],
    ) -> Result<()> {
        self.decode_stored_with(stored, out, |e| Self::corrupt(index, location, e))
    }

    /// [`Dataset::decode_stored`], with `corrupt` making the error for stored
    /// bytes that are not a valid block.
    pub(crate) fn decode_stored_with(
        &self,
        stored: &[u8],
        out: &mut [u8],
        corrupt: impl Fn(lz4_block::BlockError) -> Error,
    ) -> Result<()> {
        match self.compression() {
            Compression::None => {
                if out.len() != stored.len() {
                    return Err(wrong_buffer(out.len(), stored.len()));
                }
                out.copy_from_slice(stored);
            }
            Compression::Lz4 => {
                let len = lz4_block::declared_len(stored).map_err(&corrupt)?;
                if out.len() != len {
                    return Err(wrong_buffer(out.len(), len));
                }
                match lz4_block::literal_range(stored) {
                    Some(range) => out.copy_from_slice(&stored[range]),
                    None => lz4_block::decompress_to_slice(stored, out).map_err(&corrupt)?,
                }
            }
        }
        Ok(())
    }

    /// The open file to read `location`'s value from positionally, if any.
    pub(crate) fn unmapped_file(&self, location: &Location<'_>) -> Option<Arc<File>> {
        self.open_shards
            .file(location.shard_id, location.shard, location.data)
    }
}

/// Reads `location`'s stored bytes from `file` into `out` (their length).
fn read_at(file: &File, location: &Location<'_>, out: &mut [u8]) -> Result<()> {
    read_exact_at_or_corrupt(file, out, location.value_offset, &location.shard.path)
}

/// Reads exactly `out.len()` bytes at `offset` of `file`, the data file of the
/// shard at `path`; a short read is [`Error::CorruptShard`] naming both.
pub(crate) fn read_exact_at_or_corrupt(
    file: &File,
    out: &mut [u8],
    offset: u64,
    path: &std::path::Path,
) -> Result<()> {
    read_exact_at(file, out, offset).map_err(|e| Error::CorruptShard {
        path: path.to_path_buf(),
        reason: format!(
            "reading {} bytes at offset {offset}: {e} (the data file changed after the dataset was opened)",
            out.len(),
        ),
    })
}

fn wrong_buffer(buffer: usize, value: usize) -> Error {
    Error::InvalidOption(format!(
        "read_into: a buffer of {buffer} bytes for a value of {value}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> Arc<File> {
        Arc::new(tempfile::tempfile().unwrap())
    }

    #[test]
    fn a_read_that_must_not_wait_reads_cached_bytes_and_nothing_past_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let file = File::open(&path).unwrap();
        // Just written, so in the page cache (where the system reads so at all).
        let mut out = vec![0u8; 5000];
        match read_at_nowait(&file, &mut out, 9000) {
            NoWait::Read => assert_eq!(out, bytes[9000..14_000]),
            NoWait::Unsupported => {}
            NoWait::Missing => panic!("cached bytes reported missing"),
        }
        // Bytes past the end are never all read.
        let mut past = vec![0u8; 100];
        assert_ne!(read_at_nowait(&file, &mut past, 19_950), NoWait::Read);
    }

    /// The bound is the process's: past it, a dataset closes its least
    /// recently used file (the one not asked for longest, whether it was opened
    /// first or not), and one holding none keeps none; a dataset dropped gives
    /// its places back. (Counted apart from the process's own count, which
    /// other tests' reads move.)
    #[test]
    fn the_least_recently_used_file_is_closed_past_the_process_bound() {
        use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
        static COUNTED: AtomicUsize = AtomicUsize::new(0);
        let dataset = || OpenFiles {
            files: Default::default(),
            uses: 0,
            counted: &COUNTED,
        };
        let max = 3;
        let mut open = dataset();
        for id in 0..3 {
            open.insert(id, file(), max);
        }
        assert!(open.get(0).is_some()); // 1 is now the least recently used
        open.insert(3, file(), max);
        assert_eq!(open.files.len(), 3);
        assert_eq!(COUNTED.load(Relaxed), max);
        assert!(open.get(1).is_none());
        for id in [0, 2, 3] {
            assert!(open.get(id).is_some(), "{id}");
        }
        // A file kept by another thread meanwhile is not replaced.
        let kept = open.get(2).unwrap();
        open.insert(2, file(), max);
        assert!(Arc::ptr_eq(&kept, &open.get(2).unwrap()));
        // Another dataset, with every place taken by the first: keeps nothing.
        let mut other = dataset();
        other.insert(7, file(), max);
        assert!(other.get(7).is_none());
        drop(open);
        assert_eq!(COUNTED.load(Relaxed), 0);
        other.insert(7, file(), max);
        assert!(other.get(7).is_some());
        drop(other);
        assert_eq!(COUNTED.load(Relaxed), 0);
    }

    #[test]
    fn the_bound_follows_the_descriptor_limit() {
        let max = open_max();
        assert!((OPEN_MIN..=OPEN_CAP).contains(&max));
        if let Some(limit) = descriptor_limit() {
            assert_eq!(max, (limit / 4).clamp(OPEN_MIN, OPEN_CAP));
        }
    }
}
