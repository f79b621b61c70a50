//! Checking a dataset: what `verify` reads, and the leftovers of interrupted
//! writes that it reports and that `remove_empty` removes.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::manifest::Compression;
use crate::Dataset;

impl Dataset {
    /// Files in the directory left by interrupted writes: shard files and sidecars
    /// numbered at or beyond the manifest's count, commit files of later states,
    /// temporary files, and the key runs a writer spilled to `.bcd-spill/`
    /// (while one runs, its own). Readers ignore them and
    /// the next extend overwrites them; they are safe to delete while no one writes.
    pub fn uncommitted_files(&self) -> Result<Vec<PathBuf>> {
        uncommitted_files_in(&self.dir, self.shards())
    }

    /// Checks the persisted index file against the shards it covers, loads every
    /// shard and decodes every record, and returns what is wrong, in order (empty
    /// when the dataset is sound). The rest of the structure was already checked by
    /// `open`.
    pub fn verify(&self) -> Vec<Error> {
        let mut problems = self.verify_structure();
        if !problems.is_empty() {
            return problems;
        }
        if self.compression() == Compression::Lz4 {
            let mut buffer = Vec::new();
            for index in 0..self.len() {
                if let Err(e) = self.at_with_buffer(index, &mut buffer) {
                    problems.push(e);
                }
            }
        }
        problems
    }
}

impl Dataset {
    /// What [`Dataset::verify`] checks before it decodes: every shard's data
    /// file can be read, and the persisted index matches the shards.
    pub(crate) fn verify_structure(&self) -> Vec<Error> {
        let mut problems = Vec::new();
        // Opening only checked the data files' sizes: check they can be read.
        for shard in self.index.shards() {
            if let Err(e) = shard.data() {
                problems.push(e);
            }
        }
        if !problems.is_empty() {
            return problems;
        }
        if let Err(e) = self.index.verify_file(&self.dir) {
            // Every read goes through the file: decoding would only repeat this.
            problems.push(e);
        }
        problems
    }
}

/// The files of `dir` left by interrupted writes, given `shards` committed shards
/// (see [`Dataset::uncommitted_files`]), and the runs a writer spilled to
/// `.bcd-spill/` (whose directory the callers that remove them remove after).
pub(crate) fn uncommitted_files_in(dir: &Path, shards: u64) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let entries = fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list", dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let leftover = name == crate::format::MANIFEST_TMP_NAME
            || name.starts_with(crate::format::INDEX_FILE_TMP_PREFIX)
            || name.starts_with(crate::format::COMMIT_FILE_TMP_PREFIX)
            || name.starts_with(crate::format::CONTENT_HASH_TMP_PREFIX)
            || name.starts_with(crate::format::VIEW_FILE_TMP_PREFIX)
            || crate::format::parse_shard_name(name).is_some_and(|id| id >= shards)
            || crate::format::parse_sidecar_name(name).is_some_and(|(id, _)| id >= shards)
            || crate::format::parse_commit_file_name(name).is_some_and(|n| n > shards)
            || crate::format::parse_merge_record_name(name).is_some_and(|n| n > shards);
        if leftover {
            found.push(entry.path());
        }
    }
    found.extend(crate::key_set::spill_leftovers(
        &dir.join(crate::format::SPILL_DIR),
    )?);
    found.sort();
    Ok(found)
}
