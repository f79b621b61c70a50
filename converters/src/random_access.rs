//! [`RandomAccess`]: byte ranges of an input by offset, for formats read from
//! their end (Parquet's footer, then its row groups): a local file, or an object in
//! a store read by ranged requests. [`ParquetInput`] makes one a `parquet`
//! `ChunkReader`.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::sync::Arc;

use bytes::Bytes;
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};

/// Reads of byte ranges of a fixed-size input.
pub trait RandomAccess: Send + Sync {
    /// The input's size in bytes.
    fn len(&self) -> u64;
    /// Whether the input is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Exactly `len` bytes from `offset` (an error if the input ends before).
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes>;
}

/// A local file as [`RandomAccess`].
pub(crate) struct FileAccess {
    file: File,
    len: u64,
}

impl FileAccess {
    /// `file`, whose size is read now.
    pub fn new(file: File) -> io::Result<FileAccess> {
        let len = file.metadata()?.len();
        Ok(FileAccess { file, len })
    }
}

impl RandomAccess for FileAccess {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        let mut buffer = vec![0u8; len];
        #[cfg(unix)]
        std::os::unix::fs::FileExt::read_exact_at(&self.file, &mut buffer, offset)?;
        #[cfg(not(unix))]
        {
            use std::io::{Seek, SeekFrom};
            let mut file = self.file.try_clone()?;
            file.seek(SeekFrom::Start(offset))?;
            file.read_exact(&mut buffer)?;
        }
        Ok(Bytes::from(buffer))
    }
}

/// Sequential reads from `offset` on are fetched in blocks, the first of this
/// size and each next one twice the last, up to [`READ_BLOCK`]. The `parquet`
/// crate starts a reader at each page only to read its header (tens of bytes),
/// then fetches the page with [`ChunkReader::get_bytes`]: a first block of 1 MiB
/// read (and zeroed) a MiB per page, most of it never looked at.
const FIRST_READ_BLOCK: u64 = 16 << 10;
/// The largest block of a sequential read. A seek past the fetched block starts
/// again from [`FIRST_READ_BLOCK`]: the page-header walk of
/// [`crate::parquet_pages::check_chunk`] reads tens of bytes per page and skips
/// the rest, and blocks that kept doubling across its skips fetched 1 MiB per
/// page header (the column chunks read about twice over, issue 27).
const READ_BLOCK: u64 = 1 << 20;

/// An input of a Parquet source: any [`RandomAccess`], shared.
#[derive(Clone)]
pub struct ParquetInput(pub Arc<dyn RandomAccess>);

impl ParquetInput {
    /// Sequential reads from `start`, in blocks, up to the end of the input.
    pub(crate) fn reader_at(&self, start: u64) -> SequentialReader {
        SequentialReader {
            input: self.0.clone(),
            pos: start,
            block: Bytes::new(),
            next_block: FIRST_READ_BLOCK,
        }
    }
}

/// Sequential reads of a [`RandomAccess`] input, a block at a time.
pub struct SequentialReader {
    input: Arc<dyn RandomAccess>,
    pos: u64,
    block: Bytes,
    /// Size of the next block fetched (before the last block asked for more).
    next_block: u64,
}

impl Read for SequentialReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.block.is_empty() {
            let left = self.input.len().saturating_sub(self.pos);
            if left == 0 || buf.is_empty() {
                return Ok(0);
            }
            let len = left.min(self.next_block.max(buf.len() as u64));
            self.block = self.input.read_at(self.pos, len as usize)?;
            self.pos += len;
            self.next_block = (self.next_block * 2).min(READ_BLOCK);
        }
        let n = buf.len().min(self.block.len());
        buf[..n].copy_from_slice(&self.block[..n]);
        self.block = self.block.slice(n..);
        Ok(n)
    }
}

impl Seek for SequentialReader {
    fn seek(&mut self, from: SeekFrom) -> io::Result<u64> {
        let current = self.pos - self.block.len() as u64;
        let target = match from {
            SeekFrom::Start(n) => i128::from(n),
            SeekFrom::Current(delta) => i128::from(current) + i128::from(delta),
            SeekFrom::End(delta) => i128::from(self.input.len()) + i128::from(delta),
        };
        let target = u64::try_from(target)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "seek before the start"))?;
        if (current..=self.pos).contains(&target) {
            self.block = self.block.slice((target - current) as usize..);
        } else {
            self.block = Bytes::new();
            self.pos = target;
            self.next_block = FIRST_READ_BLOCK;
        }
        Ok(target)
    }
}

impl Length for ParquetInput {
    fn len(&self) -> u64 {
        self.0.len()
    }
}

impl ChunkReader for ParquetInput {
    type T = SequentialReader;

    fn get_read(&self, start: u64) -> parquet::errors::Result<SequentialReader> {
        Ok(self.reader_at(start))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.0
            .read_at(start, length)
            .map_err(|e| ParquetError::External(Box::new(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Bytes in memory that log every read asked of them.
    struct Logged {
        data: Vec<u8>,
        reads: Mutex<Vec<(u64, usize)>>,
    }

    impl RandomAccess for Logged {
        fn len(&self) -> u64 {
            self.data.len() as u64
        }

        fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
            self.reads.lock().unwrap().push((offset, len));
            let start = offset as usize;
            Ok(Bytes::copy_from_slice(&self.data[start..start + len]))
        }
    }

    fn input(len: usize) -> (Arc<Logged>, ParquetInput) {
        let logged = Arc::new(Logged {
            data: (0..len).map(|i| (i % 251) as u8).collect(),
            reads: Mutex::new(Vec::new()),
        });
        (logged.clone(), ParquetInput(logged))
    }

    #[test]
    fn a_short_read_fetches_a_small_block() {
        // What the `parquet` crate does per page: a reader to parse its header.
        let (logged, input) = input(4 << 20);
        let mut header = [0u8; 40];
        input
            .get_read(1000)
            .unwrap()
            .read_exact(&mut header)
            .unwrap();
        assert_eq!(header[..], logged.data[1000..1040]);
        assert_eq!(*logged.reads.lock().unwrap(), [(1000, 16 << 10)]);
    }

    #[test]
    fn sequential_reads_fetch_growing_blocks_and_read_every_byte() {
        let (logged, input) = input(5 << 20);
        let mut all = Vec::new();
        input.get_read(3).unwrap().read_to_end(&mut all).unwrap();
        assert_eq!(all, logged.data[3..]);
        let sizes: Vec<usize> = logged.reads.lock().unwrap().iter().map(|r| r.1).collect();
        // 16 KiB doubling to 1 MiB, then 1 MiB blocks, then what is left.
        let mut expected: Vec<usize> = (0..7).map(|i| (16 << 10) << i).collect();
        let mut left = (5 << 20) - 3 - expected.iter().sum::<usize>();
        while left > 0 {
            expected.push(left.min(1 << 20));
            left -= left.min(1 << 20);
        }
        assert_eq!(sizes, expected);
    }

    #[test]
    fn a_seek_within_the_block_reads_nothing_more() {
        let (logged, input) = input(1 << 20);
        let mut reader = input.get_read(0).unwrap();
        let mut byte = [0u8; 1];
        reader.read_exact(&mut byte).unwrap();
        reader.seek(SeekFrom::Start(10_000)).unwrap();
        reader.read_exact(&mut byte).unwrap();
        assert_eq!(byte[0], logged.data[10_000]);
        assert_eq!(logged.reads.lock().unwrap().len(), 1);
        reader.seek(SeekFrom::Start(500_000)).unwrap();
        reader.read_exact(&mut byte).unwrap();
        assert_eq!(byte[0], logged.data[500_000]);
        assert_eq!(
            *logged.reads.lock().unwrap(),
            [(0, 16 << 10), (500_000, 16 << 10)]
        );
    }

    #[test]
    fn a_walk_that_skips_past_each_block_fetches_small_blocks() {
        // check_chunk's walk: a header of tens of bytes, then a skip past the
        // page's data, page after page.
        let (logged, input) = input(4 << 20);
        let mut reader = input.get_read(0).unwrap();
        let mut header = [0u8; 40];
        for page in 0..12u64 {
            let at = page * 300_000;
            reader.seek(SeekFrom::Start(at)).unwrap();
            reader.read_exact(&mut header).unwrap();
            assert_eq!(header[..], logged.data[at as usize..at as usize + 40]);
        }
        let reads = logged.reads.lock().unwrap();
        assert_eq!(reads.len(), 12);
        assert!(reads.iter().all(|&(_, len)| len == 16 << 10), "{reads:?}");
    }
}
