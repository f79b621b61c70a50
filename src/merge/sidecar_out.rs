//! Where a merge's sidecar hook writes a sidecar's new content: a file of the
//! target created through its `Storage` when the first byte comes, written in
//! pieces (a shard's fields may not fit in memory), then fsynced and read back
//! by its content checksum before the merge goes on.

use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use xxhash_rust::xxh3::Xxh3;

use crate::error::{Error, Result};
use crate::storage::{Storage, StorageFile};

/// Bytes gathered before a write to the file.
const BUFFER: usize = 1 << 20;

/// The new content of a sidecar, as a [`SidecarRewrite`](crate::SidecarRewrite)
/// hook writes it (see [`SidecarRewrite::rewrite_into`](crate::SidecarRewrite::rewrite_into)):
/// a [`Write`] into the sidecar's file. The file is created by the first
/// write; [`SidecarOut::finish`] (which the merge calls when the hook has not)
/// flushes and fsyncs it, then reads it back and checks that its content
/// checksum (xxh3-64) and length are those of the bytes written: nothing is
/// committed that does not read back as it was written.
pub struct SidecarOut<'s> {
    storage: &'s dyn Storage,
    path: PathBuf,
    file: Option<BufWriter<Box<dyn StorageFile>>>,
    hasher: Xxh3,
    written: u64,
    finished: bool,
    /// The first failure of the storage (creating or writing the file): the
    /// merge's I/O error, whatever the hook made of the copy it was given.
    failure: Option<(&'static str, std::io::Error)>,
}

impl<'s> SidecarOut<'s> {
    pub(crate) fn new(storage: &'s dyn Storage, path: PathBuf) -> SidecarOut<'s> {
        SidecarOut {
            storage,
            path,
            file: None,
            hasher: Xxh3::new(),
            written: 0,
            finished: false,
            failure: None,
        }
    }

    /// The storage's first failure while the hook wrote, as the merge's I/O
    /// error (naming the operation and the file), if there was one: a hook
    /// that fails because the file could not be created or written fails the
    /// merge with an I/O error, not a hook error.
    pub(crate) fn take_failure(&mut self) -> Option<Error> {
        let (op, source) = self.failure.take()?;
        Some(Error::io(op, &self.path, source))
    }

    /// Keeps the storage's failure `e` of `op` and gives the hook a copy.
    fn fail(&mut self, op: &'static str, e: std::io::Error) -> std::io::Error {
        let copy = std::io::Error::new(e.kind(), e.to_string());
        if self.failure.is_none() {
            self.failure = Some((op, e));
        }
        copy
    }

    /// The sidecar's path (for a hook that reads the finished file back
    /// itself, as its readers will).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether a byte was written (or the file finished, maybe empty).
    pub(crate) fn started(&self) -> bool {
        self.file.is_some() || self.finished
    }

    pub(crate) fn storage(&self) -> &'s dyn Storage {
        self.storage
    }

    fn file(&mut self) -> std::io::Result<&mut BufWriter<Box<dyn StorageFile>>> {
        if self.finished {
            return Err(std::io::Error::other("written to after it was finished"));
        }
        if self.file.is_none() {
            let file = match self.storage.create(&self.path) {
                Ok(file) => file,
                Err(e) => return Err(self.fail("create", e)),
            };
            self.file = Some(BufWriter::with_capacity(BUFFER, file));
        }
        Ok(self.file.as_mut().expect("just created"))
    }

    /// Flushes and fsyncs the file (creating it, empty, if nothing was
    /// written), then reads it back and compares its checksum and length with
    /// what was written. Once finished, later calls do nothing.
    pub fn finish(&mut self) -> Result<()> {
        if self.finished {
            return Ok(());
        }
        if let Err(e) = self.file() {
            return Err(Error::io("create", &self.path, e));
        }
        let file = self.file.take().expect("created above");
        self.finished = true;
        let mut file = file
            .into_inner()
            .map_err(|e| Error::io("write", &self.path, e.into_error()))?;
        file.sync().map_err(|e| Error::io("fsync", &self.path, e))?;
        drop(file);
        self.read_back()
    }

    /// Reads the file (reads do not go through the storage) and compares.
    fn read_back(&self) -> Result<()> {
        let path = &self.path;
        let mut file = std::fs::File::open(path).map_err(|e| Error::io("read back", path, e))?;
        let (mut hasher, mut read) = (Xxh3::new(), 0u64);
        let mut buffer = vec![0; BUFFER];
        loop {
            let n = match file.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io("read back", path, e)),
            };
            hasher.update(&buffer[..n]);
            read += n as u64;
        }
        if (read, hasher.digest()) != (self.written, self.hasher.digest()) {
            let what = format!(
                "the file holds other bytes than were written ({read} read, {} written, checksums {:016x} and {:016x}); nothing was committed",
                self.written,
                hasher.digest(),
                self.hasher.digest()
            );
            let source = std::io::Error::new(std::io::ErrorKind::InvalidData, what);
            return Err(Error::io("read back", path, source));
        }
        Ok(())
    }
}

impl Write for SidecarOut<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = match self.file()?.write(buf) {
            Ok(n) => n,
            Err(e) => return Err(self.fail("write", e)),
        };
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let flushed = match &mut self.file {
            Some(file) => file.flush(),
            None => Ok(()),
        };
        flushed.map_err(|e| self.fail("write", e))
    }
}

impl Drop for SidecarOut<'_> {
    fn drop(&mut self) {
        // Unfinished (the hook failed): the half-written file is removed with
        // the merge's others; its buffer is not flushed.
        if let Some(file) = self.file.take() {
            let (_, _) = file.into_parts();
        }
    }
}
