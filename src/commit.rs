//! The commit protocol: the manifest is replaced atomically, after everything it
//! names is durable, and the rename is made durable before the commit returns.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::mem::ManuallyDrop;
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
/// The lock is a `flock`, which belongs to the open file description: a process
/// forked while it is held would share it, and keep it held after this process
/// lets go. So the descriptor is registered with [`crate::fork`], whose handler
/// closes it in every child.
#[derive(Debug)]
pub(crate) struct WriterLock {
    file: ManuallyDrop<File>,
    /// The fork generation it was taken in: in a child, the handler has closed the
    /// descriptor already.
    generation: u64,
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
        // Opened, locked and registered with no fork in between, so no child can
        // inherit an unregistered hold.
        fork::with_lock_registry(|registry| {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| Error::io("open lock file", &path, e))?;
            match file.try_lock() {
                Ok(()) => {
                    registry.hold(handle(&file));
                    Ok(WriterLock {
                        file: ManuallyDrop::new(file),
                        generation: fork::generation(),
                    })
                }
                Err(TryLockError::WouldBlock) => Err(Error::Locked {
                    dir: dir.to_owned(),
                    lock: path,
                }),
                Err(TryLockError::Error(e)) => Err(Error::io("lock", path, e)),
            }
        })
    }
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        fork::with_lock_registry(|registry| {
            if self.generation == fork::generation() && registry.release(handle(&self.file)) {
                // Unlocked before it is closed: a process another thread is
                // spawning may hold a copy of the descriptor until its exec
                // (posix_spawn runs no fork handlers), and with it the lock; the
                // next writer would find the dataset locked by nobody.
                let _ = self.file.unlock();
                // SAFETY: dropped once, here; the field is not used afterwards.
                unsafe { ManuallyDrop::drop(&mut self.file) };
            }
            // Otherwise this is a forked child's copy, whose descriptor the fork
            // handler closed (its number may belong to another file by now).
        });
    }
}

#[cfg(unix)]
fn handle(file: &File) -> std::os::fd::RawFd {
    std::os::fd::AsRawFd::as_raw_fd(file)
}

#[cfg(not(unix))]
fn handle(_file: &File) {}

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
        let copy = lock.file.try_clone().unwrap();
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
