//! Sidecar files an extend writes beside its shards (the fields layer's), whole
//! or in pieces, through the dataset's `Storage`.

use std::io::{BufWriter, Write};

use super::Extend;
use crate::error::{Error, Result};
use crate::format::{is_sidecar_suffix, sidecar_path};
use crate::storage::StorageFile;

/// Bytes a [`SidecarWriter`] gathers before writing them to its file.
const SIDECAR_BUFFER: usize = 1 << 20;

/// A sidecar being written in pieces, from [`Extend::create_sidecar`]: a
/// [`Write`] into the file. [`SidecarWriter::finish`] flushes and fsyncs it.
/// A failed write, or dropping it unfinished, fails the extend (which then
/// removes its files when dropped): a sidecar half written is never committed.
pub struct SidecarWriter<'e, 'd> {
    file: Option<BufWriter<Box<dyn StorageFile>>>,
    path: std::path::PathBuf,
    extend: &'e mut Extend<'d>,
}

impl SidecarWriter<'_, '_> {
    /// The file's path.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Writes all of `bytes`; an error names the file.
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        Write::write_all(self, bytes).map_err(|e| Error::io("write", &self.path, e))
    }

    /// Flushes the file and fsyncs it.
    pub fn finish(mut self) -> Result<()> {
        let Some(file) = self.file.take() else {
            return Err(Error::Poisoned);
        };
        let result = match file.into_inner() {
            Ok(mut file) => file.sync().map_err(|e| Error::io("fsync", &self.path, e)),
            Err(e) => Err(Error::io("write", &self.path, e.into_error())),
        };
        if result.is_err() {
            self.extend.poison();
        }
        result
    }
}

impl Write for SidecarWriter<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let Some(file) = &mut self.file else {
            return Err(std::io::Error::other("the sidecar file failed before"));
        };
        let result = file.write(buf);
        if result.is_err() {
            // Nothing more is written: the extend is failed.
            self.file = None;
            self.extend.poison();
        }
        result
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let Some(file) = &mut self.file else {
            return Err(std::io::Error::other("the sidecar file failed before"));
        };
        let result = file.flush();
        if result.is_err() {
            self.file = None;
            self.extend.poison();
        }
        result
    }
}

impl Drop for SidecarWriter<'_, '_> {
    fn drop(&mut self) {
        if let Some(file) = self.file.take() {
            // Unfinished: what was written is incomplete. Its buffer is not
            // flushed (the file is removed with the extend's others).
            let (_, _) = file.into_parts();
            self.extend.poison();
        }
    }
}

impl<'d> Extend<'d> {
    /// Writes `bytes` as shard `shard`'s sidecar with `suffix` (`{shard:06}.{suffix}`),
    /// durably (fsynced; the commit fsyncs the directory). `shard` must be a shard
    /// this extend wrote. The file is committed with the shards, and removed with
    /// them if the extend is not.
    pub fn write_sidecar(&mut self, shard: u64, suffix: &str, bytes: &[u8]) -> Result<()> {
        let mut file = self.create_sidecar(shard, suffix)?;
        file.write_all(bytes)?;
        file.finish()
    }

    /// Creates shard `shard`'s sidecar with `suffix` (`{shard:06}.{suffix}`) to be
    /// written in pieces (a file too large to hold in memory): write it through
    /// the [`SidecarWriter`], then [`SidecarWriter::finish`] it (fsynced; the
    /// commit fsyncs the directory). `shard` must be a shard this extend wrote.
    /// The file is committed with the shards, and removed with them if the
    /// extend is not; a writer dropped unfinished, or any failed write, fails
    /// the extend.
    pub fn create_sidecar(&mut self, shard: u64, suffix: &str) -> Result<SidecarWriter<'_, 'd>> {
        self.check_process()?;
        if self.poisoned {
            return Err(Error::Poisoned);
        }
        if !is_sidecar_suffix(suffix) {
            return Err(Error::InvalidOption(format!(
                "{suffix:?} cannot name a sidecar file"
            )));
        }
        if shard < self.dataset.manifest.shards || shard >= self.writer.next_shard() {
            return Err(Error::InvalidOption(format!(
                "shard {shard} is not one this extend wrote"
            )));
        }
        let path = sidecar_path(&self.dataset.dir, shard, suffix);
        self.writer.register(path.clone());
        let file = match self.dataset.storage.create(&path) {
            Ok(file) => file,
            Err(e) => {
                self.poison();
                return Err(Error::io("create", &path, e));
            }
        };
        Ok(SidecarWriter {
            file: Some(BufWriter::with_capacity(SIDECAR_BUFFER, file)),
            path,
            extend: self,
        })
    }
}
