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

impl Deref for Mapping {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Mapping::Empty => &[],
            Mapping::Mapped(map) => map,
        }
    }
}
