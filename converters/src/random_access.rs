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

/// Sequential reads from `offset` on, fetched in blocks of this size.
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
        }
    }
}

/// Sequential reads of a [`RandomAccess`] input, a block at a time.
pub struct SequentialReader {
    input: Arc<dyn RandomAccess>,
    pos: u64,
    block: Bytes,
}

impl Read for SequentialReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.block.is_empty() {
            let left = self.input.len().saturating_sub(self.pos);
            if left == 0 || buf.is_empty() {
                return Ok(0);
            }
            let len = left.min(READ_BLOCK.max(buf.len() as u64));
            self.block = self.input.read_at(self.pos, len as usize)?;
            self.pos += len;
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
