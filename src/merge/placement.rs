//! Where each part shard goes and how it gets there: moved whole by hard link
//! (or copy) with its sidecars, rewritten without its duplicates, or left out;
//! the files made are removed unless the merge commits. Also the commit file
//! the caller's hook makes.

use std::path::{Path, PathBuf};

use super::options::{
    CommitFileHook, MergeCommitInput, MergeOptions, MergeSummary, MergedPart, MergedShard,
    RewrittenSidecar, SidecarOut,
};
use crate::commit::WriterLock;
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::fingerprint::ShardFingerprint;
use crate::format::{
    commit_file_path, parse_sidecar_name, shard_paths, sidecar_path, CONTENT_HASH_SUFFIX,
    MAX_COMMIT_FILE_BYTES,
};
use crate::shard_writer::ShardWriter;
use crate::storage::Storage;

/// A part, opened and locked.
pub(super) struct Part {
    pub(super) dataset: Dataset,
    pub(super) lock: Option<WriterLock>,
    /// Suffixes of the sidecars of each committed shard, sorted.
    pub(super) sidecars: Vec<Vec<String>>,
}

/// What happens to a part's shard.
pub(super) enum Plan {
    Move,
    /// Rewritten with the records marked true.
    Rewrite(Vec<bool>),
}

pub(super) struct Planned {
    pub(super) part: usize,
    pub(super) from: u64,
    pub(super) to: u64,
    pub(super) records: u64,
    pub(super) plan: Plan,
}

/// Files the merge created in the target, removed unless it commits.
pub(super) struct Created<'s> {
    pub(super) storage: &'s dyn Storage,
    pub(super) paths: Vec<PathBuf>,
}

impl Created<'_> {
    pub(super) fn keep(&mut self) {
        self.paths.clear();
    }
}

impl Drop for Created<'_> {
    fn drop(&mut self) {
        for path in self.paths.drain(..) {
            let _ = self.storage.remove(&path);
        }
    }
}

/// Finishes a sidecar a hook wrote into `out` when it says there is one
/// (`written`), and returns that; a file it started and then declined is
/// removed.
fn finish_sidecar(mut out: SidecarOut<'_>, written: bool) -> Result<bool> {
    if written {
        out.finish()?;
    } else if out.started() {
        let path = out.path().to_owned();
        let storage = out.storage();
        drop(out);
        storage
            .remove(&path)
            .map_err(|e| Error::io("remove", &path, e))?;
    }
    Ok(written)
}

impl Dataset {
    /// Where each part shard goes: moved whole, rewritten without its dropped
    /// records, or (all dropped) left out.
    pub(super) fn plan(&self, parts: &[Part], dropped: &[Vec<u64>]) -> Vec<Planned> {
        let mut plan = Vec::new();
        let mut to = self.shards();
        for (p, part) in parts.iter().enumerate() {
            let dropped = &dropped[p];
            let mut at = 0;
            for from in 0..part.dataset.shards() {
                let first = part.dataset.shard_first_record(from);
                let records = part.dataset.shard_records(from);
                let start = at;
                while at < dropped.len() && dropped[at] < first + records {
                    at += 1;
                }
                let gone = &dropped[start..at];
                let (plan_of, kept) = if gone.is_empty() {
                    (Plan::Move, records)
                } else if gone.len() as u64 == records {
                    continue;
                } else {
                    let mut kept = vec![true; records as usize];
                    for &record in gone {
                        kept[(record - first) as usize] = false;
                    }
                    (Plan::Rewrite(kept), records - gone.len() as u64)
                };
                plan.push(Planned {
                    part: p,
                    from,
                    to,
                    records: kept,
                    plan: plan_of,
                });
                to += 1;
            }
        }
        plan
    }

    /// Puts one part shard, and its sidecars, in place as shard `planned.to`;
    /// returns the new shard's fingerprint if it was rewritten.
    /// With `keep_hashes`, a shard whose part shard has no content hashes gets
    /// them computed.
    pub(super) fn place(
        &self,
        part: &Part,
        planned: &Planned,
        options: &MergeOptions<'_>,
        keep_hashes: bool,
        created: &mut Created<'_>,
        summary: &mut MergeSummary,
    ) -> Result<Option<ShardFingerprint>> {
        let source = &part.dataset;
        let suffixes = &part.sidecars[planned.from as usize];
        let storage = self.storage.as_ref();
        if keep_hashes {
            if let Some(bytes) = computed_content_hashes(part, planned)? {
                let path = sidecar_path(&self.dir, planned.to, CONTENT_HASH_SUFFIX);
                created.paths.push(path.clone());
                crate::extend::write_read_back(storage, &path, &bytes)?;
            }
        }
        match &planned.plan {
            Plan::Move => {
                let (from_data, from_index) = shard_paths(&source.dir, planned.from);
                let (to_data, to_index) = shard_paths(&self.dir, planned.to);
                let mut files = vec![(from_data, to_data), (from_index, to_index)];
                for suffix in suffixes {
                    let from = sidecar_path(&source.dir, planned.from, suffix);
                    let to = sidecar_path(&self.dir, planned.to, suffix);
                    // The store's own sidecar: its records are the shard's.
                    if suffix == CONTENT_HASH_SUFFIX {
                        files.push((from, to));
                        continue;
                    }
                    created.paths.push(to.clone());
                    let mut out = SidecarOut::new(storage, to.clone());
                    let moved = options
                        .sidecars
                        .moved_into(source, planned.from, suffix, &mut out);
                    let replaced = moved.map_err(|source| {
                        out.take_failure().unwrap_or_else(|| Error::Hook {
                            what: format!("rewriting {} for {}", from.display(), to.display()),
                            source,
                        })
                    })?;
                    if !finish_sidecar(out, replaced)? {
                        files.push((from, to));
                    }
                }
                for (from, to) in files {
                    transfer(storage, &from, &to, options.copy, created, summary)?;
                }
                summary.bytes_stored += source.index.shards()[planned.from as usize].data_len();
                Ok(None)
            }
            Plan::Rewrite(kept) => {
                let written = self.rewrite_shard(source, planned, kept, created)?;
                summary.bytes_stored += written.data_len;
                options
                    .sidecars
                    .shard_rewritten(source, planned.from, kept, &written)
                    .map_err(|source| Error::Hook {
                        what: format!(
                            "rewriting shard {} of {} as shard {}",
                            planned.from,
                            part.dataset.dir.display(),
                            planned.to
                        ),
                        source,
                    })?;
                for suffix in suffixes {
                    let Some(bytes) = source.map_sidecar(planned.from, suffix)? else {
                        continue;
                    };
                    let path = sidecar_path(&self.dir, planned.to, suffix);
                    if suffix == CONTENT_HASH_SUFFIX {
                        let hashes = source.content_hashes_of(planned.from)?;
                        let kept_hashes = crate::content::kept_hashes(&hashes, kept);
                        created.paths.push(path.clone());
                        crate::extend::write_read_back(storage, &path, &kept_hashes)?;
                        continue;
                    }
                    created.paths.push(path.clone());
                    let mut out = SidecarOut::new(storage, path.clone());
                    let rewritten = options.sidecars.rewrite_into(
                        &RewrittenSidecar {
                            part: source,
                            from: planned.from,
                            suffix,
                            bytes: &bytes,
                            kept_rows: kept,
                            fingerprint: &written,
                        },
                        &mut out,
                    );
                    let rewritten = rewritten.map_err(|source| {
                        out.take_failure().unwrap_or_else(|| Error::Hook {
                            what: format!(
                                "rewriting {} for {}",
                                sidecar_path(&part.dataset.dir, planned.from, suffix).display(),
                                path.display()
                            ),
                            source,
                        })
                    })?;
                    finish_sidecar(out, rewritten)?;
                }
                Ok(Some(written))
            }
        }
    }

    /// Writes the kept records of a part shard, as stored (no recompression), as
    /// one new shard of this dataset; returns its fingerprint.
    fn rewrite_shard(
        &self,
        source: &Dataset,
        planned: &Planned,
        kept: &[bool],
        created: &mut Created<'_>,
    ) -> Result<ShardFingerprint> {
        let (data, index) = shard_paths(&self.dir, planned.to);
        created.paths.push(data);
        created.paths.push(index);
        // One shard, whatever its size: a sidecar's rows follow its records.
        let mut writer = ShardWriter::new(
            &self.dir,
            self.storage.clone(),
            self.keyed(),
            u64::MAX,
            planned.to,
        );
        let first = source.shard_first_record(planned.from) as usize;
        let mut write = || -> Result<()> {
            for (local, _) in kept.iter().enumerate().filter(|(_, &k)| k) {
                let location = source.index.locate(first + local)?;
                writer.append(location.key, location.stored)?;
            }
            writer.finish().map(drop)
        };
        let result = write();
        let finished = writer.take_finished();
        // The files are in `created`, removed with the others on failure.
        writer.keep();
        result?;
        Ok(finished
            .first()
            .expect("a rewritten shard keeps a record")
            .fingerprint)
    }

    /// Writes the commit file of the merged state that `hook` makes.
    pub(super) fn write_commit_file(
        &self,
        hook: &CommitFileHook<'_>,
        parts: &[Part],
        plan: &[Planned],
        rewritten: &[Option<ShardFingerprint>],
        created: &mut Created<'_>,
    ) -> Result<()> {
        let shards = self.shards() + plan.len() as u64;
        let mut input = MergeCommitInput {
            target: self,
            target_commit_file: self.read_commit_file(self.shards(), MAX_COMMIT_FILE_BYTES)?,
            parts: Vec::with_capacity(parts.len()),
            shards,
        };
        for part in parts {
            let dataset = &part.dataset;
            input.parts.push(MergedPart {
                dataset,
                commit_file: dataset.read_commit_file(dataset.shards(), MAX_COMMIT_FILE_BYTES)?,
                shards: Vec::new(),
            });
        }
        for (planned, rewritten) in plan.iter().zip(rewritten) {
            let part = &mut input.parts[planned.part];
            let fingerprint = match rewritten {
                Some(fingerprint) => *fingerprint,
                None => part.dataset.shard_fingerprint(planned.from)?,
            };
            part.shards.push(MergedShard {
                from: planned.from,
                to: planned.to,
                records: planned.records,
                rewritten: rewritten.is_some(),
                fingerprint,
            });
        }
        let path = commit_file_path(&self.dir, shards);
        let bytes = hook(&input).map_err(|source| Error::Hook {
            what: format!("the fields of the merged state ({})", path.display()),
            source,
        })?;
        if let Some(bytes) = bytes {
            created.paths.push(path.clone());
            crate::extend::write_read_back(self.storage.as_ref(), &path, &bytes)?;
        }
        Ok(())
    }
}

/// The content hashes of the target shard `planned` makes, when its part shard
/// has none (else they come with its sidecars): its kept records'.
fn computed_content_hashes(part: &Part, planned: &Planned) -> Result<Option<Vec<u8>>> {
    let dataset = &part.dataset;
    if dataset
        .map_sidecar(planned.from, CONTENT_HASH_SUFFIX)?
        .is_some()
    {
        return Ok(None);
    }
    let all = crate::content::shard_content_hashes(dataset, planned.from)?;
    Ok(Some(match &planned.plan {
        Plan::Move => all,
        Plan::Rewrite(kept) => crate::content::kept_hashes(&all, kept),
    }))
}

/// The sidecars of each committed shard of `dataset`, by suffix.
pub(super) fn list_sidecars(dataset: &Dataset) -> Result<Vec<Vec<String>>> {
    let dir = &dataset.dir;
    let mut sidecars = vec![Vec::new(); dataset.shards() as usize];
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list", dir, e))?;
        let name = entry.file_name();
        let Some((id, suffix)) = name.to_str().and_then(parse_sidecar_name) else {
            continue;
        };
        let Some(list) = usize::try_from(id).ok().and_then(|i| sidecars.get_mut(i)) else {
            continue;
        };
        let kind = entry
            .file_type()
            .map_err(|e| Error::io("stat", entry.path(), e))?;
        if !kind.is_file() {
            return Err(Error::io(
                "merge",
                entry.path(),
                std::io::Error::other("not a regular file"),
            ));
        }
        list.push(suffix.to_owned());
    }
    for list in &mut sidecars {
        list.sort_unstable();
    }
    Ok(sidecars)
}

/// Gives the target the file `from` as `to`: a hard link, or a copy when
/// `copy` is set or the file systems cannot link.
fn transfer(
    storage: &dyn Storage,
    from: &Path,
    to: &Path,
    copy: bool,
    created: &mut Created<'_>,
    summary: &mut MergeSummary,
) -> Result<()> {
    // A leftover of an interrupted write may have the name.
    if std::fs::symlink_metadata(to).is_ok() {
        storage
            .remove(to)
            .map_err(|e| Error::io("remove leftover", to, e))?;
    }
    created.paths.push(to.to_owned());
    if !copy {
        match storage.hard_link(from, to) {
            Ok(()) => {
                summary.linked_files += 1;
                return Ok(());
            }
            Err(e) if !cannot_link(&e) => return Err(Error::io("link", from, e)),
            Err(_) => {}
        }
    }
    storage
        .copy(from, to)
        .map_err(|e| Error::io("copy", from, e))?;
    summary.copied_files += 1;
    Ok(())
}

/// Whether a hard link failed because links are impossible here (another file
/// system, or one without links), so that a copy will do.
fn cannot_link(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        error.kind(),
        CrossesDevices | Unsupported | PermissionDenied | TooManyLinks
    )
}
