//! Garbage collection: removing what no manifest references. Leftovers of
//! interrupted writes beside the shards, and the staging parts of distributed
//! jobs that failed or were abandoned (FORMAT.md, "Staging").

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::commit::WriterLock;
use crate::error::{Error, Result};
use crate::format::{JOB_LOCK_NAME, LOCK_NAME, PART_CLAIM_SUFFIX, STAGING_DIR};
use crate::manifest::Manifest;
use crate::storage::{FileSystem, Storage};
use crate::verify::uncommitted_files_in;
use crate::Dataset;

/// How to collect garbage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcOptions {
    /// Only list what would be removed.
    pub dry_run: bool,
    /// Only remove what was last modified at least this long ago (a staging job:
    /// its newest file). Default: everything unreferenced.
    pub older_than: Option<Duration>,
}

/// What a garbage collection removed (or, dry, would remove).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Every file removed, in order (directories emptied by it are removed too).
    pub files: Vec<PathBuf>,
    /// Their total size in bytes.
    pub bytes: u64,
    /// Staging jobs left alone because a writer of theirs is running (a lock is
    /// held) or they are newer than [`GcOptions::older_than`].
    pub kept_jobs: Vec<PathBuf>,
}

/// A file found removable.
struct Found {
    path: PathBuf,
    len: u64,
    modified: SystemTime,
}

impl Dataset {
    /// Removes from the dataset in `dir` what no manifest references: shard files
    /// and sidecars numbered at or past the committed count, commit files of
    /// later states, temporary files of interrupted writes, and the staging
    /// directories (`_staging/<job>/`) of jobs no process is running. Committed
    /// files are never touched.
    ///
    /// A directory without a manifest that holds only what a writer killed
    /// while creating a dataset there left (the lock, a temporary manifest, shard
    /// files, sidecars, commit files: nothing is committed) has all of it
    /// removed, the lock last; one holding anything else is refused
    /// ([`Error::ForeignFile`]) and left as it is.
    ///
    /// Fails with [`Error::Locked`] while a writer holds the dataset's lock, and
    /// leaves alone a staging job whose job lock or any of whose parts' locks is
    /// held.
    pub fn gc(dir: impl AsRef<Path>, options: &GcOptions) -> Result<GcReport> {
        Self::gc_with_storage(dir, options, &FileSystem)
    }

    /// [`Dataset::gc`] removing through `storage`.
    pub fn gc_with_storage(
        dir: impl AsRef<Path>,
        options: &GcOptions,
        storage: &dyn Storage,
    ) -> Result<GcReport> {
        let dir = dir.as_ref();
        let not_a_dataset = || Error::NotADataset {
            path: dir.to_owned(),
        };
        // Without a manifest: what a killed creator left, or not ours at all.
        let leftovers = match dir.join(crate::format::MANIFEST_NAME).is_file() {
            true => None,
            false if !dir.is_dir() => return Err(not_a_dataset()),
            // Nothing of a writer at all: not a dataset, nor what one left.
            false if !crate::teardown::holds_writer_files(dir)? => return Err(not_a_dataset()),
            false => Some(crate::teardown::leftovers_without_manifest(dir)?),
        };
        let _lock = WriterLock::acquire(dir)?;
        // Listed again under the lock: a writer that held it may have committed.
        let leftovers = match leftovers {
            Some(_) if dir.join(crate::format::MANIFEST_NAME).is_file() => None,
            Some(_) => Some(crate::teardown::leftovers_without_manifest(dir)?),
            None => None,
        };
        let cutoff = options.older_than.map(|age| {
            SystemTime::now()
                .checked_sub(age)
                .unwrap_or(SystemTime::UNIX_EPOCH)
        });
        let old_enough = |modified: SystemTime| cutoff.is_none_or(|c| modified <= c);

        let mut report = GcReport::default();
        let mut found = Vec::new();
        let lock_path = dir.join(LOCK_NAME);
        let removable = match &leftovers {
            None => uncommitted_files_in(dir, Manifest::read(dir)?.shards)?,
            Some(files) => files.iter().filter(|p| **p != lock_path).cloned().collect(),
        };
        let mut kept_any = false;
        for path in removable {
            let file = stat(&path)?;
            if old_enough(file.modified) {
                found.push(file);
            } else {
                kept_any = true;
            }
        }
        // Held until the files are removed, so no job starts writing them meanwhile.
        let mut locks = Vec::new();
        let mut emptied = Vec::new();
        let staging = dir.join(STAGING_DIR);
        if staging.is_dir() {
            for job in sorted_entries(&staging)? {
                if !job.is_dir() {
                    continue;
                }
                let Some((files, dirs, job_locks)) = take_job(&job)? else {
                    report.kept_jobs.push(job);
                    continue;
                };
                let newest = files.iter().map(|f| f.modified).max();
                if !newest.is_none_or(old_enough) {
                    report.kept_jobs.push(job);
                    continue;
                }
                found.extend(files);
                emptied.extend(dirs);
                emptied.push(job);
                locks.extend(job_locks);
            }
            emptied.push(staging);
        }
        // The spill directory of a writer that died, once its runs are gone.
        let spill = dir.join(crate::format::SPILL_DIR);
        if spill.is_dir() && !kept_any {
            emptied.insert(0, spill);
        }
        // A directory of leftovers loses its lock too, last, once nothing of a
        // writer is left in it.
        if leftovers.is_some() && !kept_any && report.kept_jobs.is_empty() {
            found.push(stat(&lock_path)?);
        }

        report.bytes = found.iter().map(|f| f.len).sum();
        report.files = found.into_iter().map(|f| f.path).collect();
        if options.dry_run {
            return Ok(report);
        }
        for path in &report.files {
            storage
                .remove(path)
                .map_err(|e| Error::io("remove", path, e))?;
        }
        drop(locks);
        for dir in emptied {
            match storage.remove_dir(&dir) {
                Err(e) if e.kind() != std::io::ErrorKind::DirectoryNotEmpty => {
                    return Err(Error::io("remove directory", &dir, e))
                }
                _ => {}
            }
        }
        storage
            .sync_dir(dir)
            .map_err(|e| Error::io("fsync directory", dir, e))?;
        Ok(report)
    }
}

/// Every file of a staging job (its directories deepest first), with the locks of
/// the job and of its parts held; `None` if one of them is held by a writer.
#[allow(clippy::type_complexity)]
fn take_job(job: &Path) -> Result<Option<(Vec<Found>, Vec<PathBuf>, Vec<WriterLock>)>> {
    let mut locks = Vec::new();
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    let mut pending = vec![job.to_owned()];
    while let Some(dir) = pending.pop() {
        let entries = sorted_entries(&dir)?;
        // A directory with a lock file is a dataset (a part) or the job itself.
        let has_lock = entries.iter().any(|p| {
            p.file_name()
                .is_some_and(|n| n == LOCK_NAME || n == JOB_LOCK_NAME)
        });
        if has_lock {
            let name = if dir.join(JOB_LOCK_NAME).exists() {
                JOB_LOCK_NAME
            } else {
                LOCK_NAME
            };
            match WriterLock::acquire_file(&dir, name) {
                Ok(lock) => locks.push(lock),
                Err(Error::Locked { .. }) => return Ok(None),
                Err(e) => return Err(e),
            }
            if name == JOB_LOCK_NAME && dir.join(LOCK_NAME).exists() {
                match WriterLock::acquire_file(&dir, LOCK_NAME) {
                    Ok(lock) => locks.push(lock),
                    Err(Error::Locked { .. }) => return Ok(None),
                    Err(e) => return Err(e),
                }
            }
        }
        // A part's claim is held by the task attempt still writing that part
        // (whose directory may not have its own lock yet).
        if dir == job {
            for claim in entries.iter().filter_map(|p| p.file_name()?.to_str()) {
                if !claim.ends_with(PART_CLAIM_SUFFIX) {
                    continue;
                }
                match WriterLock::acquire_file(&dir, claim) {
                    Ok(lock) => locks.push(lock),
                    Err(Error::Locked { .. }) => return Ok(None),
                    Err(e) => return Err(e),
                }
            }
        }
        for path in entries {
            let kind = fs::symlink_metadata(&path).map_err(|e| Error::io("stat", &path, e))?;
            if kind.is_dir() {
                pending.push(path);
            } else {
                files.push(stat(&path)?);
            }
        }
        if dir != job {
            dirs.push(dir);
        }
    }
    // Deepest first, so each is empty when its turn comes.
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    Ok(Some((files, dirs, locks)))
}

fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut entries = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))? {
        entries.push(entry.map_err(|e| Error::io("list", dir, e))?.path());
    }
    entries.sort();
    Ok(entries)
}

fn stat(path: &Path) -> Result<Found> {
    let metadata = fs::symlink_metadata(path).map_err(|e| Error::io("stat", path, e))?;
    Ok(Found {
        path: path.to_owned(),
        len: metadata.len(),
        modified: metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH),
    })
}
