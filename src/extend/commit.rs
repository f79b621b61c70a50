//! Committing an extend: the last shard finished, the commit file written and
//! read back, the manifest renamed into place and the handle moved to the new
//! state; a metadata-only commit; and the durable writes the merge shares.

use super::*;

impl Extend<'_> {
    /// Makes every pushed record durable and visible, atomically. With nothing
    /// pushed, nothing is written.
    ///
    /// If the manifest was renamed into place but the final directory fsync failed,
    /// the records are visible (the handle shows them) but their durability across a
    /// power loss is unknown: the error is [`Error::CommittedNotDurable`], and the
    /// extend must not be retried. Likewise if this handle cannot load the shards
    /// it committed: the error is [`Error::CommittedNotLoaded`].
    pub fn commit(mut self) -> Result<ExtendSummary> {
        self.check_process()?;
        if self.poisoned {
            return Err(Error::Poisoned);
        }
        if let Some(open) = self.open_sidecars.first() {
            // Its writer did not finish it: what it holds is incomplete.
            let path = open.path().to_owned();
            self.poison();
            return Err(Error::InvalidOption(format!(
                "{} was left open unfinished: nothing is committed",
                path.display()
            )));
        }
        let first_shard = self.dataset.manifest.shards;
        if self.writer.records() == 0 {
            if let Some(bytes) = self.commit_file.take() {
                self.replace_commit_file(&bytes)?;
            }
            return Ok(ExtendSummary::default());
        }
        let shards = match self.writer.finish() {
            Ok(shards) => shards,
            Err(e) => {
                self.writer.abort();
                return Err(e);
            }
        };
        if let Some(bytes) = self.commit_file.take() {
            let path = commit_file_path(&self.dataset.dir, shards);
            self.writer.register(path.clone());
            if let Err(e) = write_read_back(self.dataset.storage.as_ref(), &path, &bytes) {
                self.writer.abort();
                return Err(e);
            }
        }
        let manifest = Manifest {
            shards,
            version: ManifestVersion::V0_3,
            ..self.dataset.manifest
        };
        let dir = self.dataset.dir.clone();
        match write_manifest(self.dataset.storage.as_ref(), &dir, &manifest) {
            Ok(()) => {}
            Err(ManifestWriteError::NotCommitted(e)) => {
                self.writer.abort();
                return Err(e);
            }
            Err(ManifestWriteError::NotDurable(e)) => {
                self.writer.keep();
                let _ = self.load_committed(manifest);
                return Err(e);
            }
        }
        let summary = ExtendSummary {
            records: self.writer.records(),
            shards: shards - first_shard,
            bytes_stored: self.writer.bytes(),
        };
        // The files are committed now: dropping the extend must not remove them.
        self.writer.keep();
        // Whatever happens now, the extend is done: a failure to load what it
        // committed must not read as a failed (and so retryable) extend.
        self.load_committed(manifest)
            .map_err(|e| Error::CommittedNotLoaded {
                path: dir,
                source: Box::new(e),
            })?;
        Ok(summary)
    }

    /// Moves the handle to the committed state: the new shards are indexed from
    /// the key set (sorted, no key read back), straight into a new persisted
    /// index when the dataset wants one.
    fn load_committed(&mut self, manifest: Manifest) -> Result<()> {
        let keys = self.keys.as_deref();
        let sorted = |out: &mut dyn FnMut((u64, u64)) -> std::io::Result<()>| {
            let Some(keys) = keys else { return Ok(()) };
            for entry in keys.sorted().map_err(std::io::Error::other)? {
                out(entry.map_err(std::io::Error::other)?)?;
            }
            Ok(())
        };
        self.dataset
            .apply_manifest_with(manifest, NewKeys::Sorted(&sorted))
    }
}

impl Extend<'_> {
    /// A metadata-only commit: the current state's commit file replaced by
    /// `bytes`, atomically (a temporary file, fsynced, renamed over it, and the
    /// directory fsynced).
    fn replace_commit_file(&mut self, bytes: &[u8]) -> Result<()> {
        let dir = &self.dataset.dir;
        let shards = self.dataset.manifest.shards;
        let storage = self.dataset.storage.as_ref();
        let target = commit_file_path(dir, shards);
        let tmp = dir.join(format!("{COMMIT_FILE_TMP_PREFIX}{shards:06}.json.tmp"));
        let replace = || -> Result<()> {
            write_read_back(storage, &tmp, bytes)?;
            storage
                .rename(&tmp, &target)
                .map_err(|e| Error::io("rename", &tmp, e))
        };
        if let Err(e) = replace() {
            let _ = storage.remove(&tmp);
            return Err(e);
        }
        storage
            .sync_dir(dir)
            .map_err(|source| Error::CommittedNotDurable {
                path: dir.clone(),
                source,
            })
    }
}

/// Creates `path` holding `bytes`, fsynced.
pub(crate) fn write_durably(
    storage: &dyn crate::storage::Storage,
    path: &std::path::Path,
    bytes: &[u8],
) -> Result<()> {
    let mut file = storage
        .create(path)
        .map_err(|e| Error::io("create", path, e))?;
    std::io::Write::write_all(&mut file, bytes).map_err(|e| Error::io("write", path, e))?;
    file.sync().map_err(|e| Error::io("fsync", path, e))
}

/// [`write_durably`], then reads the file back (reads do not go through
/// `storage`): the commit file names the dataset's schema and metadata, and
/// nothing is committed that does not read back as it was handed over (its
/// writer checked that those bytes decode). A merge writes the sidecars its
/// hooks hand over and its commit file through it too.
pub(crate) fn write_read_back(
    storage: &dyn crate::storage::Storage,
    path: &std::path::Path,
    bytes: &[u8],
) -> Result<()> {
    write_durably(storage, path, bytes)?;
    let read = std::fs::read(path).map_err(|e| Error::io("read back", path, e))?;
    if read != bytes {
        let what = format!(
            "the file holds other bytes than were written ({} read, {} written); nothing was committed",
            read.len(),
            bytes.len()
        );
        let source = std::io::Error::new(std::io::ErrorKind::InvalidData, what);
        return Err(Error::io("read back", path, source));
    }
    Ok(())
}
