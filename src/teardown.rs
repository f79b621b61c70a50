//! Removing a dataset that holds no records: what a run that created a dataset and
//! then failed leaves behind, so that it can leave the directory as it found it;
//! and recognising what such a run left when it was killed before its manifest
//! was written or after it was removed (FORMAT.md section 6).

use std::io;
use std::path::{Path, PathBuf};

use crate::commit::WriterLock;
use crate::error::{Error, Result};
use crate::format::{
    parse_commit_file_name, parse_shard_name, parse_sidecar_name, COMMIT_FILE_TMP_PREFIX,
    INDEX_FILE_NAME, INDEX_FILE_TMP_PREFIX, LOCK_NAME, MANIFEST_NAME, MANIFEST_TMP_NAME, SPILL_DIR,
    STAGING_DIR,
};
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
    /// the empty state, its views (which select nothing) and the lock file.
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
        storage
            .remove_dir(&dir.join(SPILL_DIR))
            .map_err(|e| Error::io("remove directory", dir.join(SPILL_DIR), e))?;
        remove(&dir.join(INDEX_FILE_NAME))?;
        // Views of the empty state select nothing.
        for view in crate::views::view_names_in(&dir)? {
            remove(&crate::format::view_file_path(&dir, &view))?;
        }
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

/// Whether `name` is a file a writer of this project creates in a dataset
/// directory before its manifest exists or after it is removed: the lock, the
/// temporary manifest, shard files and their sidecars, commit files, the index
/// file and the temporaries of both.
fn is_writer_file(name: &str) -> bool {
    name == LOCK_NAME
        || name == MANIFEST_TMP_NAME
        || name == INDEX_FILE_NAME
        || name.starts_with(INDEX_FILE_TMP_PREFIX)
        || name.starts_with(COMMIT_FILE_TMP_PREFIX)
        || name.starts_with(crate::format::CONTENT_HASH_TMP_PREFIX)
        || name.starts_with(crate::format::VIEW_FILE_TMP_PREFIX)
        || crate::format::parse_view_file_name(name).is_some()
        || parse_shard_name(name).is_some()
        || parse_sidecar_name(name).is_some()
        || parse_commit_file_name(name).is_some()
        || crate::format::parse_merge_record_name(name).is_some()
}

/// Whether `dir` holds a regular file named as [`is_writer_file`] says, or a
/// staging directory.
pub(crate) fn holds_writer_files(dir: &Path) -> Result<bool> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list", dir, e))?;
        let kind = entry
            .file_type()
            .map_err(|e| Error::io("stat", entry.path(), e))?;
        let name = entry.file_name();
        let name = name.to_str().unwrap_or("");
        let our_dir = name == STAGING_DIR || name == SPILL_DIR;
        if (kind.is_file() && is_writer_file(name)) || (kind.is_dir() && our_dir) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The files in `dir`, a directory without a manifest, that a writer killed
/// while creating a dataset there (or removing the one it had created) left:
/// regular files named as [`is_writer_file`] says, sorted. A staging directory
/// (`_staging/`) may be there too and is not listed; the files of a spill
/// directory (`.bcd-spill/`) are listed. Anything else makes the
/// directory someone else's: [`Error::ForeignFile`] names the first such entry,
/// and nothing is to be removed.
pub(crate) fn leftovers_without_manifest(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list", dir, e))?;
        let kind = entry
            .file_type()
            .map_err(|e| Error::io("stat", entry.path(), e))?;
        let name = entry.file_name();
        let name = name.to_str().unwrap_or("");
        let ours = match (kind.is_file(), kind.is_dir()) {
            (true, _) => is_writer_file(name),
            (_, true) => name == STAGING_DIR || name == SPILL_DIR,
            _ => false,
        };
        if !ours {
            return Err(Error::ForeignFile {
                dir: dir.to_owned(),
                file: entry.path(),
            });
        }
        if kind.is_file() {
            found.push(entry.path());
        }
        // The runs a writer spilled (its directory is removed once emptied).
        if kind.is_dir() && name == SPILL_DIR {
            found.extend(crate::key_set::spill_leftovers(&entry.path())?);
        }
    }
    found.sort();
    Ok(found)
}
