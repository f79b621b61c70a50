//! The one place files are memory-mapped.

use std::fs::File;
use std::ops::Deref;

use memmap2::Mmap;

/// A read-only view of a whole shard data file.
#[derive(Debug)]
pub(crate) enum Mapping {
    /// A zero-length file: mmap cannot map nothing.
    Empty,
    Mapped(Mmap),
}

impl Mapping {
    /// Maps `file`, whose length the caller has already read and validated as `len`.
    pub(crate) fn map(file: &File, len: u64) -> std::io::Result<Mapping> {
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

    /// Restores the default read-ahead.
    pub(crate) fn advise_normal(&self) {
        #[cfg(unix)]
        if let Mapping::Mapped(map) = self {
            let _ = map.advise(memmap2::Advice::Normal);
        }
    }
}

impl Deref for Mapping {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Mapping::Empty => &[],
            Mapping::Mapped(map) => map,
        }
    }
}
