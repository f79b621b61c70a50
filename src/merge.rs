//! Merging whole datasets ("parts") into a dataset in one commit: what a
//! distributed writer does at the end, each task having written a part.
//!
//! The parts' committed shards become the target's next shards, renumbered, with
//! their sidecars. On one file system a shard is moved by a hard link, never
//! copied; the commit is the target's manifest rename, as for an extend; only
//! then are the parts' files removed. Keys are checked across the target and
//! every part from the key tables the datasets already have (the persisted index
//! where there is one), in hash order, so no key is read unless two hashes meet.
//! The cost is proportional to shards and keys, not to bytes, except for shards
//! that lose a duplicate record under [`MergeOnDuplicate::Skip`], which are
//! rewritten.

use std::path::{Path, PathBuf};

use crate::commit::{write_manifest, ManifestWriteError, WriterLock};
use crate::dataset::{Dataset, OpenOptions};
use crate::error::{Error, Result};
use crate::format::{
    parse_commit_file_name, parse_shard_name, parse_sidecar_name, COMMIT_FILE_TMP_PREFIX,
    INDEX_FILE_NAME, INDEX_FILE_TMP_PREFIX, LOCK_NAME, MANIFEST_NAME, MANIFEST_TMP_NAME,
};
use crate::manifest::{Manifest, ManifestVersion};
use crate::storage::Storage;

mod keys;
mod options;
mod placement;
mod rerun;
mod sidecar_out;
mod values;
use keys::{gained_keys, Renumbering};
pub use options::{
    CommitFileHook, DropSidecars, HookError, MergeCommitInput, MergeOnDuplicate, MergeOptions,
    MergeSummary, MergedPart, MergedShard, MergedValueDuplicate, PartSource, RewrittenSidecar,
    SidecarOut, SidecarRewrite,
};
use placement::{list_sidecars, Created, Part, Plan};
use rerun::{Merged, Opened};

impl Dataset {
    /// Appends the records of every part, in the order given, in one commit: the
    /// parts' shards become this dataset's next shards, renumbered, with their
    /// sidecars. All or nothing: on any error (settings that differ, a duplicate
    /// key, an I/O failure, a kill) the target is as it was and every part whole.
    ///
    /// Parts must have the target's `keyed` and `compression` settings (their
    /// shards may be larger than its `max_shard_size`). Keys are checked across
    /// the target and all parts ([`MergeOptions::on_duplicate`]). The target's
    /// writer lock and every part's are held throughout.
    ///
    /// Without [`MergeOptions::copy`], files move by hard link where the part and
    /// the target share a file system (by copy elsewhere), and once the merge is
    /// committed the parts' files are removed, each part's manifest first (see
    /// [`MergeSummary::parts_not_removed`]). With it, files are copied and the
    /// parts left as they are.
    ///
    /// If the manifest was renamed into place but the directory fsync after it
    /// failed, the error is [`Error::CommittedNotDurable`]: the merge is visible,
    /// the parts were not removed, and it must not be retried.
    pub fn merge(
        &mut self,
        parts: &[PartSource],
        options: &MergeOptions<'_>,
    ) -> Result<MergeSummary> {
        let _lock = WriterLock::acquire(&self.dir)?;
        let manifest = Manifest::read(&self.dir)?;
        self.apply_manifest(manifest)?;
        self.remove_stale_files()?;
        let (mut parts, mut merged_before) = self.separate_merged(self.open_parts(parts)?)?;
        let check = self.check_keys(&parts, options.on_duplicate)?;
        let skipped_keys: u64 = check.dropped.iter().map(|d| d.len() as u64).sum();
        let mut dropped = check.dropped;
        let values = match options.dedup {
            crate::Dedup::Content => Some(self.check_values(&parts, &dropped)?),
            _ => None,
        };
        if let Some(values) = &values {
            for (dropped, by_value) in dropped.iter_mut().zip(&values.dropped) {
                dropped.extend_from_slice(by_value);
                dropped.sort_unstable();
            }
        }
        // Every shard the target gains gets content hashes when it keeps them.
        let keep_hashes = values.is_some() || self.keeps_content_hashes()?;
        let plan = self.plan(&parts, &dropped);

        let storage = self.storage.clone();
        let mut created = Created {
            storage: storage.as_ref(),
            paths: Vec::new(),
        };
        let mut summary = MergeSummary {
            parts: parts.len(),
            skipped: skipped_keys,
            already_merged: merged_before.iter().map(|m| m.dir().to_owned()).collect(),
            ..MergeSummary::default()
        };
        if let Some(values) = &values {
            let renumbering = Renumbering::new(self.len() as u64, &parts, &plan);
            summary.value_duplicates = self.value_duplicates(&parts, values, &renumbering)?;
        }
        let mut fingerprints = Vec::with_capacity(plan.len());
        for planned in &plan {
            let part = &parts[planned.part];
            fingerprints.push(self.place(
                part,
                planned,
                options,
                keep_hashes,
                &mut created,
                &mut summary,
            )?);
        }
        let shards = self.shards() + plan.len() as u64;
        if plan.is_empty() {
            // Nothing to add (empty parts, every record a duplicate, or every
            // part merged already): no commit, and the current state's commit
            // file stays as it is.
            if !options.copy {
                remove_parts(
                    storage.as_ref(),
                    &mut parts,
                    &mut merged_before,
                    &mut summary,
                );
            }
            return Ok(summary);
        }
        if !options.copy {
            self.write_merge_record(&parts, &plan, &fingerprints, &mut created)?;
        }
        if let Some(hook) = options.commit_file {
            self.write_commit_file(hook, &parts, &plan, &fingerprints, &mut created)?;
        }

        let manifest = Manifest {
            shards,
            version: ManifestVersion::V0_3,
            ..self.manifest
        };
        let renumbering = Renumbering::new(self.len() as u64, &parts, &plan);
        let dir = self.dir.clone();
        match write_manifest(storage.as_ref(), &dir, &manifest) {
            Ok(()) => {}
            Err(ManifestWriteError::NotCommitted(e)) => return Err(e),
            Err(ManifestWriteError::NotDurable(e)) => {
                created.keep();
                let _ = self.load_merged(manifest, &parts, &renumbering);
                return Err(e);
            }
        }
        created.keep();
        summary.shards = plan.len() as u64;
        summary.records = plan.iter().map(|p| p.records).sum();
        summary.rewritten_shards = plan
            .iter()
            .filter(|p| matches!(p.plan, Plan::Rewrite(_)))
            .count() as u64;

        // Committed: what follows must not read as a failed merge.
        let loaded = self.load_merged(manifest, &parts, &renumbering);
        if !options.copy {
            remove_parts(
                storage.as_ref(),
                &mut parts,
                &mut merged_before,
                &mut summary,
            );
        }
        loaded.map_err(|e| Error::CommittedNotLoaded {
            path: dir,
            source: Box::new(e),
        })?;
        Ok(summary)
    }

    /// Moves the handle to the merged state: the new shards indexed from the
    /// parts' key tables (no key read back), straight into a new persisted
    /// index when the dataset wants one.
    fn load_merged(
        &mut self,
        manifest: Manifest,
        parts: &[Part],
        renumbering: &Renumbering,
    ) -> Result<()> {
        let sorted = |out: &mut dyn FnMut((u64, u64)) -> std::io::Result<()>| {
            gained_keys(parts, renumbering, out)
        };
        self.apply_manifest_with(manifest, crate::reader::NewKeys::Sorted(&sorted))
    }

    /// The records the content check left out, named for the summary.
    fn value_duplicates(
        &self,
        parts: &[Part],
        values: &values::ValueCheck,
        renumbering: &Renumbering,
    ) -> Result<Vec<MergedValueDuplicate>> {
        let key_of = |dataset: &Dataset, record: u64| -> Result<Vec<u8>> {
            match dataset.keyed() {
                true => Ok(dataset.key_at(record as usize)?.to_vec()),
                false => Ok(Vec::new()),
            }
        };
        let mut found = Vec::with_capacity(values.found.len());
        for &(part, record, of) in &values.found {
            let of_index = match of.0 {
                None => Some(of.1),
                Some(p) => renumbering.of(parts, p, of.1),
            };
            found.push(MergedValueDuplicate {
                part: parts[part].dataset.dir.clone(),
                record,
                key: key_of(&parts[part].dataset, record)?,
                // The record kept is in the target: its new index exists.
                of: of_index.unwrap_or(u64::MAX),
                of_key: key_of(self.dataset_of(parts, of), of.1)?,
            });
        }
        Ok(found)
    }

    /// Opens and locks every part, checking that it can be merged; a part
    /// without a manifest is left for [`Dataset::separate_merged`] to judge.
    fn open_parts(&self, sources: &[PartSource]) -> Result<Vec<Opened>> {
        let refuse = |part: &Path, reason: String| Error::MergePart {
            part: part.to_owned(),
            target: self.dir.clone(),
            reason,
        };
        let canonical = |path: &Path| {
            std::fs::canonicalize(path).map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Error::NotADataset {
                    path: path.to_owned(),
                },
                _ => Error::io("resolve", path, e),
            })
        };
        let target = canonical(&self.dir)?;
        let mut seen: Vec<PathBuf> = Vec::with_capacity(sources.len());
        let mut parts = Vec::with_capacity(sources.len());
        for source in sources {
            let path = &source.path;
            let real = canonical(path)?;
            if real == target {
                return Err(refuse(path, "it is the target itself".into()));
            }
            if seen.contains(&real) {
                return Err(refuse(path, "it is named twice".into()));
            }
            seen.push(real);
            if !path.join(MANIFEST_NAME).is_file() {
                parts.push(Opened::Manifestless(path.clone()));
                continue;
            }
            let lock = WriterLock::acquire(path)?;
            // Nothing is written into a part: no persisted index either.
            let no_index_file = OpenOptions {
                index_file_min_records: None,
                index_file_min_bytes: None,
                ..OpenOptions::default()
            };
            let dataset = Dataset::open_with(path, no_index_file, self.storage.clone())?;
            if dataset.keyed() != self.keyed() {
                let keyed = |k: bool| if k { "keyed" } else { "keyless" };
                return Err(refuse(
                    path,
                    format!(
                        "it is {}, the target {}",
                        keyed(dataset.keyed()),
                        keyed(self.keyed())
                    ),
                ));
            }
            if dataset.compression() != self.compression() {
                let name = |c: crate::Compression| c.as_manifest_str().unwrap_or("none");
                return Err(refuse(
                    path,
                    format!(
                        "its compression is {}, the target's {}",
                        name(dataset.compression()),
                        name(self.compression())
                    ),
                ));
            }
            let sidecars = list_sidecars(&dataset)?;
            parts.push(Opened::Dataset(Box::new(Part {
                dataset,
                lock: Some(lock),
                sidecars,
            })));
        }
        Ok(parts)
    }
}

/// Removes the parts merged now ([`consume`]) and those merged before,
/// noting in `summary` those that could not be.
fn remove_parts(
    storage: &dyn Storage,
    parts: &mut [Part],
    merged_before: &mut [Merged],
    summary: &mut MergeSummary,
) {
    for part in parts {
        let path = part.dataset.dir.clone();
        if let Err(e) = consume(storage, part) {
            summary
                .parts_not_removed
                .push((path, crate::error_chain(&e)));
        }
    }
    for part in merged_before {
        let path = part.dir().to_owned();
        if let Err(e) = part.remove(storage) {
            summary
                .parts_not_removed
                .push((path, crate::error_chain(&e)));
        }
    }
}

/// Removes a merged part: its manifest first (made durable), so that it is no
/// longer a dataset whatever happens next, then every file of the format or of
/// this project, then the directory if nothing else is in it.
fn consume(storage: &dyn Storage, part: &mut Part) -> Result<()> {
    let dir = part.dataset.dir.clone();
    let manifest = dir.join(MANIFEST_NAME);
    storage
        .remove(&manifest)
        .map_err(|e| Error::io("remove", &manifest, e))?;
    storage
        .sync_dir(&dir)
        .map_err(|e| Error::io("fsync directory", &dir, e))?;
    remove_part_files(storage, &dir, &mut part.lock)
}

/// The rest of a part's removal once its manifest is gone: every file of the
/// format or of this project, the lock (`lock`, held until then) last, then the
/// directory if nothing else is in it.
fn remove_part_files(
    storage: &dyn Storage,
    dir: &Path,
    lock: &mut Option<WriterLock>,
) -> Result<()> {
    let mut names = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list", dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let ours = parse_shard_name(name).is_some()
            || parse_sidecar_name(name).is_some()
            || parse_commit_file_name(name).is_some()
            || crate::format::parse_merge_record_name(name).is_some()
            || name == MANIFEST_TMP_NAME
            || name == INDEX_FILE_NAME
            || name.starts_with(INDEX_FILE_TMP_PREFIX)
            || name.starts_with(COMMIT_FILE_TMP_PREFIX)
            || name.starts_with(crate::format::CONTENT_HASH_TMP_PREFIX)
            || name.starts_with(crate::format::VIEW_FILE_TMP_PREFIX)
            || crate::format::parse_view_file_name(name).is_some();
        if ours {
            names.push(name.to_owned());
        }
    }
    names.sort_unstable();
    // What a writer of the part that died while spilling left.
    crate::key_set::remove_spill_leftovers(storage, dir)?;
    // The lock last: it is held until the part is gone.
    names.push(LOCK_NAME.to_owned());
    for name in names {
        let path = dir.join(name);
        storage
            .remove(&path)
            .map_err(|e| Error::io("remove", &path, e))?;
    }
    storage
        .sync_dir(dir)
        .map_err(|e| Error::io("fsync directory", dir, e))?;
    *lock = None;
    match storage.remove_dir(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::DirectoryNotEmpty => {
            Err(Error::io("remove directory", dir, e))
        }
        _ => Ok(()),
    }
}
