//! [`Import`]: committing files a caller copied into a dataset directory (a pull
//! from object storage, a copy from another disk) with the same protocol as an
//! extend: under the writer lock, every file durable before the manifest, the
//! manifest replaced atomically last.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::commit::{write_manifest_bytes, ManifestWriteError, WriterLock};
use crate::error::{Error, Result};
use crate::format::MANIFEST_NAME;
use crate::manifest::Manifest;
use crate::storage::{FileSystem, Storage};

/// A copy into a dataset directory in progress: holds the writer lock until it is
/// committed or dropped. The caller writes (and fsyncs) the files of the new state
/// under names readers ignore until the commit (shard files numbered at or past
/// the committed count, or temporary names it renames itself), then calls
/// [`Import::commit`] with the manifest that names them.
#[derive(Debug)]
pub struct Import {
    dir: PathBuf,
    storage: Arc<dyn Storage>,
    _lock: WriterLock,
}

impl Import {
    /// Takes the writer lock of `dir`, creating the directory (durably) when it is
    /// missing. Fails with [`Error::Locked`] while another writer holds it.
    pub fn begin(dir: impl AsRef<Path>) -> Result<Import> {
        Self::begin_with_storage(dir, Arc::new(FileSystem))
    }

    /// [`Import::begin`] writing the manifest through `storage`.
    pub fn begin_with_storage(dir: impl AsRef<Path>, storage: Arc<dyn Storage>) -> Result<Import> {
        let dir = dir.as_ref().to_owned();
        if !dir.is_dir() {
            fs::create_dir_all(&dir).map_err(|e| Error::io("create directory", &dir, e))?;
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                storage
                    .sync_dir(parent)
                    .map_err(|e| Error::io("fsync directory", parent, e))?;
            }
        }
        let lock = WriterLock::acquire(&dir)?;
        Ok(Import {
            dir,
            storage,
            _lock: lock,
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The committed manifest, read under the lock, or `None` when there is none yet.
    pub fn manifest(&self) -> Result<Option<Manifest>> {
        match Manifest::read(&self.dir) {
            Ok(manifest) => Ok(Some(manifest)),
            Err(Error::NotADataset { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Makes the directory's entries durable and replaces `manifest.json` with
    /// `manifest` (its exact bytes, which must parse as a manifest): the commit.
    /// The caller has fsynced the files it wrote.
    pub fn commit(self, manifest: &[u8]) -> Result<Manifest> {
        let parsed = Manifest::parse(manifest, &self.dir.join(MANIFEST_NAME))?;
        write_manifest_bytes(self.storage.as_ref(), &self.dir, manifest).map_err(|e| match e {
            ManifestWriteError::NotCommitted(e) | ManifestWriteError::NotDurable(e) => e,
        })?;
        Ok(parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_the_exact_bytes_under_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("copy");
        let import = Import::begin(&path).unwrap();
        assert!(import.manifest().unwrap().is_none());
        // A second writer is refused while the import holds the lock.
        assert!(matches!(Import::begin(&path), Err(Error::Locked { .. })));
        let bytes = br#"{"keyed": false, "compression": null, "shards": 0}"#;
        let manifest = import.commit(bytes).unwrap();
        assert_eq!(manifest.shards, 0);
        assert_eq!(fs::read(path.join(MANIFEST_NAME)).unwrap(), bytes);
        let import = Import::begin(&path).unwrap();
        assert!(import.commit(b"{}").is_err());
        assert_eq!(fs::read(path.join(MANIFEST_NAME)).unwrap(), bytes);
    }
}
