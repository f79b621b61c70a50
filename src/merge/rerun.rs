//! Parts a merge committed but did not get to remove (it was killed between its
//! commit and the parts' removal, FORMAT.md "Merging datasets"): their shards
//! are in the target now. The next merge naming them recognises them and only
//! finishes their removal, instead of adding their records a second time: by
//! their shard files being the target's (hard links), or by the merge record
//! (`merged.NNNNNN.json`) the move wrote with its commit, which names each part's
//! committed state by its directory and manifest as file system objects.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::placement::{Part, Planned};
use super::{consume, remove_part_files};
use crate::commit::WriterLock;
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::fingerprint::ShardFingerprint;
use crate::format::{
    merge_record_path, parse_merge_record_name, MANIFEST_NAME, MAX_MERGE_RECORD_BYTES,
};
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
    /// equal bytes (two parts may hold the same records and both be merged). A
    /// whole part a move copied (across file systems) is recognised by a merge
    /// record of this dataset naming its committed state ([`part_stamp`]).
    pub(super) fn separate_merged(&self, opened: Vec<Opened>) -> Result<(Vec<Part>, Vec<Merged>)> {
        let (mut fresh, mut merged) = (Vec::new(), Vec::new());
        let mut committed = HashSet::new();
        if !opened.is_empty() {
            for shard in 0..self.shards() {
                committed.extend(file_identity(&self.shard_data_path(shard))?);
            }
        }
        let recorded = match opened.iter().any(|p| matches!(p, Opened::Dataset(_))) {
            true => self.recorded_parts()?,
            false => HashSet::new(),
        };
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
                    let stamp = part_stamp(&part.dataset.dir)?;
                    if linked || stamp.is_some_and(|s| recorded.contains(&s)) {
                        merged.push(Merged::Whole(part));
                    } else {
                        fresh.push(*part);
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

/// What names a part's committed state: its directory and its manifest as file
/// system objects (device, inode), with the manifest's modification time (ns)
/// and size. Every commit renames a new manifest into place, so a part changed
/// since, or another dataset made at the same path, has another stamp.
type Stamp = [u64; 6];

fn part_stamp(dir: &Path) -> Result<Option<Stamp>> {
    let manifest = dir.join(MANIFEST_NAME);
    let (Some((dir_dev, dir_ino)), Some((dev, ino))) =
        (file_identity(dir)?, file_identity(&manifest)?)
    else {
        return Ok(None);
    };
    let metadata = std::fs::metadata(&manifest).map_err(|e| Error::io("stat", &manifest, e))?;
    let mtime = metadata
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as u64);
    Ok(Some([dir_dev, dir_ino, dev, ino, mtime, metadata.len()]))
}

fn fingerprint_json(f: &ShardFingerprint) -> serde_json::Value {
    serde_json::json!([f.records, f.data_len, f.index_xxh3, f.edges_xxh3])
}

impl Dataset {
    /// Writes the merge record of the state the merge makes
    /// (`merged.{shards:06}.json`): the stamps of the parts it moves and the
    /// fingerprint of its last shard, which ties the record to that state (a
    /// record left by a merge that did not commit is stale: past the count, or
    /// another last shard).
    pub(super) fn write_merge_record(
        &self,
        parts: &[Part],
        plan: &[Planned],
        rewritten: &[Option<ShardFingerprint>],
        created: &mut super::Created<'_>,
    ) -> Result<()> {
        let (Some(last), Some(last_rewritten)) = (plan.last(), rewritten.last()) else {
            return Ok(());
        };
        let last_shard = match last_rewritten {
            Some(fingerprint) => *fingerprint,
            None => parts[last.part].dataset.shard_fingerprint(last.from)?,
        };
        let mut stamps = Vec::with_capacity(parts.len());
        for part in parts {
            stamps.extend(part_stamp(&part.dataset.dir)?);
        }
        if stamps.is_empty() {
            return Ok(());
        }
        let record = serde_json::json!({
            "format": 1,
            "last_shard": fingerprint_json(&last_shard),
            "parts": stamps,
        });
        let path = merge_record_path(&self.dir, self.shards() + plan.len() as u64);
        created.paths.push(path.clone());
        crate::extend::write_durably(self.storage.as_ref(), &path, record.to_string().as_bytes())
    }

    /// The stamps of the parts every current merge record names: a record
    /// `merged.N.json` with `N` at most the committed count whose last shard is
    /// shard `N - 1`. A record that does not read as one is passed over (it only
    /// helps recognise parts).
    fn recorded_parts(&self) -> Result<HashSet<Stamp>> {
        let mut stamps = HashSet::new();
        let entries = std::fs::read_dir(&self.dir).map_err(|e| Error::io("list", &self.dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("list", &self.dir, e))?;
            let name = entry.file_name();
            let Some(n) = name.to_str().and_then(parse_merge_record_name) else {
                continue;
            };
            if n == 0 || n > self.shards() {
                continue;
            }
            let path = entry.path();
            let len = entry
                .metadata()
                .map_err(|e| Error::io("stat", &path, e))?
                .len();
            if len > MAX_MERGE_RECORD_BYTES {
                continue;
            }
            let bytes = std::fs::read(&path).map_err(|e| Error::io("read", &path, e))?;
            let Ok(record) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
                continue;
            };
            let current = fingerprint_json(&self.shard_fingerprint(n - 1)?);
            if record["format"] != 1 || record["last_shard"] != current {
                continue;
            }
            let parts = record["parts"].as_array().map_or(&[][..], Vec::as_slice);
            for part in parts {
                let numbers = part.as_array().map_or(&[][..], Vec::as_slice);
                let numbers: Option<Vec<u64>> = numbers.iter().map(|n| n.as_u64()).collect();
                if let Some(Ok(stamp)) = numbers.map(Stamp::try_from) {
                    stamps.insert(stamp);
                }
            }
        }
        Ok(stamps)
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
