//! The commit protocol: the manifest is replaced atomically, after everything it
//! names is durable, and the rename is made durable before the commit returns.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::fork;
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
    write_manifest_bytes(storage, dir, &manifest.to_bytes())
}

/// [`write_manifest`] of bytes already checked to parse as a manifest.
pub(crate) fn write_manifest_bytes(
    storage: &dyn Storage,
    dir: &Path,
    bytes: &[u8],
) -> Result<(), ManifestWriteError> {
    use ManifestWriteError::*;
    let tmp = dir.join(MANIFEST_TMP_NAME);
    let target = dir.join(MANIFEST_NAME);
    let write = || -> Result<()> {
        let mut file = storage
            .create(&tmp)
            .map_err(|e| Error::io("create", &tmp, e))?;
        file.write_all(bytes)
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
///
/// A [`fork::FileLock`]: a process forked while it is held does not keep it.
#[derive(Debug)]
pub(crate) struct WriterLock {
    _lock: fork::FileLock,
}

impl WriterLock {
    /// Takes the lock, failing at once with [`Error::Locked`] if another writer
    /// (in this process or another) holds it.
    pub(crate) fn acquire(dir: &Path) -> Result<WriterLock> {
        Self::acquire_file(dir, LOCK_NAME)
    }

    /// [`WriterLock::acquire`] of the lock file `name` in `dir` (a staging job's
    /// lock, say).
    pub(crate) fn acquire_file(dir: &Path, name: &str) -> Result<WriterLock> {
        let path: PathBuf = dir.join(name);
        match fork::FileLock::try_acquire(&path, fork::LockKind::Exclusive) {
            Ok(Some(lock)) => Ok(WriterLock { _lock: lock }),
            Ok(None) => Err(Error::Locked {
                dir: dir.to_owned(),
                lock: path,
            }),
            Err(e) => Err(Error::io("lock", path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy of the lock's descriptor elsewhere (what a process being spawned
    /// holds until its exec) does not keep the lock held once its writer lets go.
    #[cfg(unix)]
    #[test]
    fn a_released_lock_is_free_although_a_copy_of_its_descriptor_lives_on() {
        let dir = tempfile::tempdir().unwrap();
        let lock = WriterLock::acquire(dir.path()).unwrap();
        let copy = lock._lock.duplicate_descriptor();
        assert!(matches!(
            WriterLock::acquire(dir.path()),
            Err(Error::Locked { .. })
        ));
        drop(lock);
        let again = WriterLock::acquire(dir.path()).expect("the lock is free");
        drop(again);
        drop(copy);
    }
}
