//! The one place dataset files are opened for reading and memory-mapped.
//!
//! Files are opened without blocking and must be regular files: a FIFO or a
//! device in place of a shard, an index or the manifest is an error naming it,
//! never a read that waits forever. Small files are read into memory instead of
//! mapped, so a dataset of many tiny shards costs neither a mapping each (the
//! kernel allows about 65,000 per process) nor a descriptor (every file is closed
//! once loaded; positional reads of sparse values keep at most 32 open, see
//! `unmapped.rs`).

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

use memmap2::Mmap;

/// Files up to this size are read into memory rather than mapped. Measured on
/// files in the page cache: reading 4 KiB costs less than mapping it and taking
/// the one page fault a read of a value needs (5 against 7.5 us), 16 KiB about
/// the same as mapping and touching every page; past that mapping wins, and large
/// shards keep zero-copy reads through the page cache.
pub(crate) const READ_MAX: u64 = 16 << 10;

/// Opens `path` for reading without blocking, and returns it with its metadata
/// if it is a regular file. Anything else (a FIFO, a socket, a device, a
/// directory) is an error of kind `InvalidInput` saying what it is: opening a
/// FIFO for reading would otherwise wait for a writer, and reading a device
/// might never end.
pub(crate) fn open_regular(path: &Path) -> io::Result<(File, Metadata)> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // O_NONBLOCK only matters for the special files refused below: for
        // regular files reads and mappings ignore it.
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not a regular file but {}", file_kind(&metadata)),
        ));
    }
    Ok((file, metadata))
}

/// `a FIFO`, `a directory`, ... for messages.
fn file_kind(metadata: &Metadata) -> &'static str {
    let kind = metadata.file_type();
    if kind.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
    }
    "a special file"
}

/// A read-only view of a whole file.
pub(crate) enum Mapping {
    /// A zero-length file: mmap cannot map nothing.
    Empty,
    Mapped(Mmap),
    /// A small file, read into memory (see [`READ_MAX`]).
    Read(Box<[u8]>),
}

impl Mapping {
    /// Maps `file`, whose length the caller has already read and validated as `len`.
    pub(crate) fn map(file: &File, len: u64) -> io::Result<Mapping> {
        if len == 0 {
            return Ok(Mapping::Empty);
        }
        // SAFETY: the mapping is read-only and shard files are never modified once
        // committed: writers only create new shard numbers and truncate files beyond
        // the manifest's count, which readers never map. The assumption that breaks
        // this is a process outside the protocol truncating or rewriting a committed
        // shard while it is mapped; reads of the lost pages then fault (SIGBUS), as
        // with any mmap-based reader, including the Python reference.
        let map = unsafe { Mmap::map(file)? };
        Ok(Mapping::Mapped(map))
    }

    /// Reads `file` into memory if it is at most [`READ_MAX`] bytes, or maps it;
    /// `len` is its length as the caller validated it. A file that is not exactly
    /// `len` bytes long is an error.
    pub(crate) fn load(mut file: File, len: u64) -> io::Result<Mapping> {
        if len > READ_MAX {
            let mapping = Mapping::map(&file, len)?;
            return match mapping.len() as u64 == len {
                true => Ok(mapping),
                false => Err(changed_size(len, mapping.len() as u64)),
            };
        }
        if len == 0 {
            return Ok(Mapping::Empty);
        }
        // One byte more than expected, to notice a file that grew.
        let mut bytes = Vec::with_capacity(len as usize + 1);
        (&mut file).take(len + 1).read_to_end(&mut bytes)?;
        if bytes.len() as u64 != len {
            return Err(changed_size(len, bytes.len() as u64));
        }
        Ok(Mapping::Read(bytes.into_boxed_slice()))
    }
}

fn changed_size(expected: u64, found: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("changed size while being read ({expected} then {found} bytes)"),
    )
}

impl Mapping {
    /// Hints that pages will be read in no particular order (no read-ahead).
    pub(crate) fn advise_random(&self) {
        #[cfg(unix)]
        if let Mapping::Mapped(map) = self {
            let _ = map.advise(memmap2::Advice::Random);
        }
    }

    /// Hints that pages will be read in order (aggressive read-ahead).
    pub(crate) fn advise_sequential(&self) {
        #[cfg(unix)]
        if let Mapping::Mapped(map) = self {
            let _ = map.advise(memmap2::Advice::Sequential);
        }
    }

    /// Drops this process's mapping of the pages in `offset..offset + len`
    /// (rounded inwards to whole pages), so they stop counting in its resident
    /// memory; they stay in the page cache and are mapped again on the next read.
    pub(crate) fn release(&self, offset: usize, len: usize) {
        #[cfg(unix)]
        if let Mapping::Mapped(map) = self {
            const PAGE: usize = 4096;
            let start = offset.div_ceil(PAGE) * PAGE;
            let end = ((offset + len) / PAGE * PAGE).min(map.len());
            if end > start {
                // SAFETY: MADV_DONTNEED discards pages of a *private writable* mapping
                // (memmap2 marks it unsafe for that reason). This mapping is read-only
                // and file-backed, so the pages are simply re-read from the file.
                let _ = unsafe {
                    map.unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        start,
                        end - start,
                    )
                };
            }
        }
    }

    /// Asks the kernel to start reading `offset..offset + len` in the background
    /// (`MADV_WILLNEED`) and returns at once.
    pub(crate) fn will_need(&self, offset: usize, len: usize) {
        #[cfg(unix)]
        if let Mapping::Mapped(map) = self {
            let _ = map.advise_range(memmap2::Advice::WillNeed, offset, len);
        }
    }

    /// Whether the page holding byte `offset` is in the page cache (`mincore`;
    /// it need not be mapped in this process yet). Bytes read into memory are;
    /// a failed call says not.
    pub(crate) fn cached(&self, offset: usize) -> bool {
        match self {
            #[cfg(unix)]
            Mapping::Mapped(map) => {
                if offset >= map.len() {
                    return false;
                }
                // SAFETY: sysconf only reads its integer argument.
                let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
                    .unwrap_or(4096)
                    .max(1);
                let address = map.as_ptr() as usize + offset;
                let start = address / page * page;
                let mut state = 0u8;
                // SAFETY: `start` is page-aligned and its page lies within the live
                // mapping (the mapping starts on a page boundary and holds `offset`);
                // mincore writes one byte for the one page asked about.
                let status = unsafe { libc::mincore(start as *mut libc::c_void, 1, &mut state) };
                status == 0 && state & 1 == 1
            }
            #[cfg(not(unix))]
            Mapping::Mapped(_) => false,
            Mapping::Empty | Mapping::Read(_) => true,
        }
    }

    /// Restores the default read-ahead.
    pub(crate) fn advise_normal(&self) {
        #[cfg(unix)]
        if let Mapping::Mapped(map) = self {
            let _ = map.advise(memmap2::Advice::Normal);
        }
    }
}

impl std::fmt::Debug for Mapping {
    /// The kind and length, not the bytes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            Mapping::Empty => "Empty",
            Mapping::Mapped(_) => "Mapped",
            Mapping::Read(_) => "Read",
        };
        write!(f, "{kind}({} bytes)", self.len())
    }
}

impl Deref for Mapping {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Mapping::Empty => &[],
            Mapping::Mapped(map) => map,
            Mapping::Read(bytes) => bytes,
        }
    }
}

/// A committed shard's data file, loaded: mapped, or read into memory when small.
/// Cheap to clone, and it keeps the bytes alive however long it is held, after
/// the [`Dataset`](crate::Dataset) is gone too: for handing out zero-copy views
/// (the Python package's memoryviews) whose lifetime Rust cannot track.
///
/// The bytes never change while held, under the assumption stated for mapped
/// reads (committed shard files are never modified; see the README on SIGBUS).
#[derive(Clone, Debug)]
pub struct ShardData(pub(crate) Arc<Mapping>);

impl Deref for ShardData {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<[u8]> for ShardData {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl ShardData {
    /// Tells the kernel this process is done with bytes `offset..offset + len`
    /// for now: a mapped file's whole pages there stop counting in the
    /// process's resident memory (they stay in the page cache, and a later
    /// read maps them again, with the same bytes). For a reader that goes
    /// through a large file once (reading back a file just written). Nothing
    /// for a file read into memory.
    pub fn release(&self, offset: usize, len: usize) {
        self.0.release(offset, len);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn a_page_just_read_is_cached_and_bytes_past_the_end_are_not() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&crate::test_bytes::noise(3 * 4096 + 5, 7))
            .unwrap();
        let mapping = Mapping::map(&file, 3 * 4096 + 5).unwrap();
        assert!(matches!(mapping, Mapping::Mapped(_)));
        // Read through the mapping just now: the page is in memory.
        std::hint::black_box(mapping[2 * 4096 + 1]);
        assert!(mapping.cached(2 * 4096 + 1));
        assert!(!mapping.cached(mapping.len()));
        // Bytes read into memory are always at hand.
        assert!(Mapping::Read(vec![1, 2].into_boxed_slice()).cached(1));
        assert!(Mapping::Empty.cached(0));
    }
}
