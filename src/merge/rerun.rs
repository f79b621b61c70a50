//! Parts a merge committed but did not get to remove (it was killed between its
//! commit and the parts' removal, FORMAT.md "Merging datasets"): their shards
//! are the target's files now. The next merge naming them recognises them and
//! only finishes their removal, instead of adding their records a second time.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::{consume, remove_part_files, Part};
use crate::commit::WriterLock;
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::format::MANIFEST_NAME;
use crate::storage::Storage;

/// A part as opened: a dataset, or a directory whose manifest a killed merge
/// already removed.
pub(super) enum Opened {
    Dataset(Box<Part>),
    Manifestless(PathBuf),
}

/// A part found merged already.
pub(super) enum Merged {
    /// Still a whole dataset.
    Whole(Box<Part>),
    /// Its manifest removed, the rest of its files left; its lock held.
    Manifestless {
        dir: PathBuf,
        lock: Option<WriterLock>,
    },
}

impl Merged {
    pub(super) fn dir(&self) -> &Path {
        match self {
            Merged::Whole(part) => &part.dataset.dir,
            Merged::Manifestless { dir, .. } => dir,
        }
    }

    /// Removes what is left of it.
    pub(super) fn remove(&mut self, storage: &dyn Storage) -> Result<()> {
        match self {
            Merged::Whole(part) => consume(storage, part),
            Merged::Manifestless { dir, lock } => remove_part_files(storage, dir, lock),
        }
    }
}

impl Dataset {
    /// Separates the parts merged already from the others, keeping their order:
    /// a part one of whose shard files is the same file as a committed shard of
    /// this dataset was committed by a merge that did not get to remove it (a
    /// move links every shard it does not rewrite); merging it again would add
    /// its records twice. A directory without a manifest is such a part if it
    /// holds only files a writer of this project makes and one of them is;
    /// otherwise it is not a dataset ([`Error::NotADataset`]).
    ///
    /// Same file means the same file system object (device and inode), not
    /// equal bytes: a part a merge copied (across file systems) is not
    /// recognised.
    pub(super) fn separate_merged(&self, opened: Vec<Opened>) -> Result<(Vec<Part>, Vec<Merged>)> {
        let (mut fresh, mut merged) = (Vec::new(), Vec::new());
        let mut committed = HashSet::new();
        if !opened.is_empty() {
            for shard in 0..self.shards() {
                committed.extend(file_identity(&self.shard_data_path(shard))?);
            }
        }
        let is_committed = |path: &Path| -> Result<bool> {
            Ok(file_identity(path)?.is_some_and(|id| committed.contains(&id)))
        };
        for part in opened {
            match part {
                Opened::Dataset(part) => {
                    let mut linked = false;
                    for shard in 0..part.dataset.shards() {
                        if is_committed(&part.dataset.shard_data_path(shard))? {
                            linked = true;
                            break;
                        }
                    }
                    match linked {
                        true => merged.push(Merged::Whole(part)),
                        false => fresh.push(*part),
                    }
                }
                Opened::Manifestless(dir) => {
                    let not_a_dataset = || Error::NotADataset { path: dir.clone() };
                    let files = crate::teardown::leftovers_without_manifest(&dir)
                        .map_err(|_| not_a_dataset())?;
                    let mut linked = false;
                    for file in &files {
                        if is_committed(file)? {
                            linked = true;
                            break;
                        }
                    }
                    if !linked {
                        return Err(not_a_dataset());
                    }
                    let lock = WriterLock::acquire(&dir)?;
                    if dir.join(MANIFEST_NAME).exists() {
                        return Err(Error::MergePart {
                            part: dir.clone(),
                            target: self.dir.clone(),
                            reason: "it became a dataset while the merge started".into(),
                        });
                    }
                    merged.push(Merged::Manifestless {
                        dir,
                        lock: Some(lock),
                    });
                }
            }
        }
        Ok((fresh, merged))
    }
}

/// The file system object `path` names (device and inode), where the platform
/// tells.
fn file_identity(path: &Path) -> Result<Option<(u64, u64)>> {
    let metadata = std::fs::metadata(path).map_err(|e| Error::io("stat", path, e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Ok(Some((metadata.dev(), metadata.ino())))
    }
    #[cfg(not(unix))]
    {
        let _ = metadata;
        Ok(None)
    }
}
