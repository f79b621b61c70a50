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

    /// Its file, which this writer leaves to the caller (and its drop).
    fn into_file(mut self) -> Option<BufWriter<Box<dyn StorageFile>>> {
        self.file.take()
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

/// A sidecar an extend keeps open between its calls ([`Extend::open_sidecar`]).
pub(super) struct OpenSidecar {
    shard: u64,
    suffix: String,
    path: std::path::PathBuf,
    /// `None` once dropped or failed.
    file: Option<BufWriter<Box<dyn StorageFile>>>,
}

impl OpenSidecar {
    pub(super) fn path(&self) -> &std::path::Path {
        &self.path
    }
}

impl Drop for OpenSidecar {
    fn drop(&mut self) {
        // Unfinished (the extend dropped, or a forked child's copy): its buffer
        // is never written (the file is removed with the extend's others, or
        // is the parent's).
        if let Some(file) = self.file.take() {
            let (_, _) = file.into_parts();
        }
    }
}

/// A [`Write`] into a sidecar the extend keeps open, from
/// [`Extend::open_sidecar_writer`]. A failed write fails the extend.
pub struct OpenSidecarWriter<'e, 'd> {
    index: usize,
    extend: &'e mut Extend<'d>,
}

impl OpenSidecarWriter<'_, '_> {
    fn file(&mut self) -> std::io::Result<&mut BufWriter<Box<dyn StorageFile>>> {
        self.extend.open_sidecars[self.index]
            .file
            .as_mut()
            .ok_or_else(|| std::io::Error::other("the sidecar file failed before"))
    }

    fn failed(&mut self) {
        // Nothing more is written: the extend is failed.
        self.extend.open_sidecars[self.index].file = None;
        self.extend.poison();
    }
}

impl Write for OpenSidecarWriter<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let result = self.file()?.write(buf);
        if result.is_err() {
            self.failed();
        }
        result
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        let result = self.file()?.write_all(buf);
        if result.is_err() {
            self.failed();
        }
        result
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let result = self.file()?.flush();
        if result.is_err() {
            self.failed();
        }
        result
    }
}

impl<'d> Extend<'d> {
    /// Creates shard `shard`'s sidecar with `suffix`, as
    /// [`Extend::create_sidecar`] does, and keeps it open in the extend, so that
    /// it can be written in pieces between pushes (through
    /// [`Extend::open_sidecar_writer`]) while the shard's records are being
    /// written: `shard` may be the shard records are being appended to
    /// ([`Extend::open_shard`]). [`Extend::finish_sidecar`] flushes and fsyncs
    /// it; the commit fails while one is open. The file is committed with the
    /// shards, and removed with them if the extend is not; any failed write
    /// fails the extend.
    pub fn open_sidecar(&mut self, shard: u64, suffix: &str) -> Result<()> {
        if self.open_sidecar_index(shard, suffix).is_some() {
            return Err(Error::InvalidOption(format!(
                "shard {shard}'s sidecar {suffix:?} is open already"
            )));
        }
        let writer = self.create_sidecar(shard, suffix)?;
        let path = writer.path().to_owned();
        let file = writer.into_file();
        self.open_sidecars.push(OpenSidecar {
            shard,
            suffix: suffix.to_owned(),
            path,
            file,
        });
        Ok(())
    }

    fn open_sidecar_index(&self, shard: u64, suffix: &str) -> Option<usize> {
        self.open_sidecars
            .iter()
            .position(|o| o.shard == shard && o.suffix == suffix)
    }

    fn open_index(&self, shard: u64, suffix: &str) -> Result<usize> {
        self.check_process()?;
        if self.poisoned {
            return Err(Error::Poisoned);
        }
        self.open_sidecar_index(shard, suffix).ok_or_else(|| {
            Error::InvalidOption(format!("shard {shard}'s sidecar {suffix:?} is not open"))
        })
    }

    /// A [`Write`] into shard `shard`'s sidecar with `suffix`, opened with
    /// [`Extend::open_sidecar`].
    pub fn open_sidecar_writer(
        &mut self,
        shard: u64,
        suffix: &str,
    ) -> Result<OpenSidecarWriter<'_, 'd>> {
        let index = self.open_index(shard, suffix)?;
        Ok(OpenSidecarWriter {
            index,
            extend: self,
        })
    }

    /// Flushes and fsyncs shard `shard`'s sidecar with `suffix`, opened with
    /// [`Extend::open_sidecar`], and closes it.
    pub fn finish_sidecar(&mut self, shard: u64, suffix: &str) -> Result<()> {
        let index = self.open_index(shard, suffix)?;
        let mut open = self.open_sidecars.remove(index);
        let Some(file) = open.file.take() else {
            return Err(Error::Poisoned);
        };
        let result = match file.into_inner() {
            Ok(mut file) => file.sync().map_err(|e| Error::io("fsync", &open.path, e)),
            Err(e) => Err(Error::io("write", &open.path, e.into_error())),
        };
        if result.is_err() {
            self.poison();
        }
        result
    }

    /// Closes shard `shard`'s sidecar with `suffix`, opened with
    /// [`Extend::open_sidecar`], unfinished, and returns what was written to
    /// it, mapped (a writer that must write it otherwise reads back what it
    /// wrote, without holding it in memory); the file is removed (the mapping
    /// stays readable). An error fails the extend.
    pub fn take_sidecar(&mut self, shard: u64, suffix: &str) -> Result<crate::ShardData> {
        let index = self.open_index(shard, suffix)?;
        let mut open = self.open_sidecars.remove(index);
        let Some(file) = open.file.take() else {
            return Err(Error::Poisoned);
        };
        let result = match file.into_inner() {
            Ok(file) => {
                drop(file);
                self.dataset.map_sidecar(shard, suffix).and_then(|mapped| {
                    mapped.ok_or_else(|| {
                        let e = std::io::Error::from(std::io::ErrorKind::NotFound);
                        Error::io("map", &open.path, e)
                    })
                })
            }
            Err(e) => Err(Error::io("write", &open.path, e.into_error())),
        };
        let result = result.and_then(|mapped| {
            let storage = self.dataset.storage.clone();
            storage
                .remove(&open.path)
                .map_err(|e| Error::io("remove", &open.path, e))?;
            Ok(mapped)
        });
        if result.is_err() {
            self.poison();
        }
        result
    }
}
