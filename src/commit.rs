//! The commit protocol: the manifest is replaced atomically, after everything it
//! names is durable, and the rename is made durable before the commit returns.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::format::{LOCK_NAME, MANIFEST_NAME, MANIFEST_TMP_NAME};
use crate::manifest::Manifest;
use crate::storage::Storage;

/// How far a manifest write got when it failed.
#[derive(Debug)]
pub(crate) enum ManifestWriteError {
    /// Failed before the rename: the old manifest is still the committed one.
    NotCommitted(Error),
    /// The rename happened but making it durable failed: the new manifest is
    /// visible now, and may or may not survive a power loss.
    NotDurable(Error),
}

/// Writes `manifest` to `.manifest.json.tmp`, fsyncs it and the directory (so every
/// shard file written before is durable too), renames it over manifest.json and
/// fsyncs the directory again.
pub(crate) fn write_manifest(
    storage: &dyn Storage,
    dir: &Path,
    manifest: &Manifest,
) -> Result<(), ManifestWriteError> {
    use ManifestWriteError::*;
    let tmp = dir.join(MANIFEST_TMP_NAME);
    let target = dir.join(MANIFEST_NAME);
    let write = || -> Result<()> {
        let mut file = storage
            .create(&tmp)
            .map_err(|e| Error::io("create", &tmp, e))?;
        file.write_all(&manifest.to_bytes())
            .map_err(|e| Error::io("write", &tmp, e))?;
        file.sync().map_err(|e| Error::io("fsync", &tmp, e))?;
        drop(file);
        storage
            .sync_dir(dir)
            .map_err(|e| Error::io("fsync directory", dir, e))?;
        storage
            .rename(&tmp, &target)
            .map_err(|e| Error::io("rename to manifest.json", &tmp, e))
    };
    if let Err(e) = write() {
        let _ = storage.remove(&tmp);
        return Err(NotCommitted(e));
    }
    storage.sync_dir(dir).map_err(|source| {
        NotDurable(Error::CommittedNotDurable {
            path: dir.to_owned(),
            source,
        })
    })
}

/// An exclusive hold on a dataset's lock file; released on drop.
#[derive(Debug)]
pub(crate) struct WriterLock {
    _file: File,
}

impl WriterLock {
    /// Takes the lock, failing at once with [`Error::Locked`] if another writer
    /// (in this process or another) holds it.
    pub(crate) fn acquire(dir: &Path) -> Result<WriterLock> {
        let path: PathBuf = dir.join(LOCK_NAME);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io("open lock file", &path, e))?;
        match file.try_lock() {
            Ok(()) => Ok(WriterLock { _file: file }),
            Err(TryLockError::WouldBlock) => Err(Error::Locked {
                dir: dir.to_owned(),
                lock: path,
            }),
            Err(TryLockError::Error(e)) => Err(Error::io("lock", path, e)),
        }
    }
}
