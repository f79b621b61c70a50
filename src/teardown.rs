//! Removing a dataset that holds no records: what a run that created a dataset and
//! then failed leaves behind, so that it can leave the directory as it found it.

use std::io;

use crate::commit::WriterLock;
use crate::error::{Error, Result};
use crate::format::{INDEX_FILE_NAME, LOCK_NAME, MANIFEST_NAME};
use crate::manifest::Manifest;
use crate::verify::uncommitted_files_in;
use crate::Dataset;

impl Dataset {
    /// Removes this dataset's files if it holds no records, and its directory too
    /// when `remove_directory` is set and nothing else is left in it.
    ///
    /// Takes the writer lock and re-reads the manifest first: if another writer
    /// committed records meanwhile, nothing is removed and the result is
    /// [`Error::NotEmpty`]. Removes the manifest, leftovers of interrupted writes
    /// ([`Dataset::uncommitted_files`]), the persisted index, the commit file of
    /// the empty state and the lock file.
    pub fn remove_empty(self, remove_directory: bool) -> Result<()> {
        let dir = self.dir.clone();
        let storage = self.storage.clone();
        drop(self);
        let lock = WriterLock::acquire(&dir)?;
        let manifest = Manifest::read(&dir)?;
        if manifest.shards > 0 {
            return Err(Error::NotEmpty {
                path: dir,
                shards: manifest.shards,
            });
        }
        let remove = |path: &std::path::Path| {
            storage
                .remove(path)
                .map_err(|e| Error::io("remove", path, e))
        };
        // The manifest first: once it is gone this is no longer a dataset, whatever
        // else fails to be removed.
        remove(&dir.join(MANIFEST_NAME))?;
        storage
            .sync_dir(&dir)
            .map_err(|e| Error::io("fsync directory", &dir, e))?;
        for leftover in uncommitted_files_in(&dir, 0)? {
            remove(&leftover)?;
        }
        remove(&dir.join(INDEX_FILE_NAME))?;
        remove(&crate::format::commit_file_path(&dir, 0))?;
        remove(&dir.join(LOCK_NAME))?;
        drop(lock);
        if remove_directory {
            match std::fs::remove_dir(&dir) {
                Err(e) if e.kind() != io::ErrorKind::DirectoryNotEmpty => {
                    return Err(Error::io("remove directory", &dir, e))
                }
                _ => {}
            }
        }
        Ok(())
    }
}
