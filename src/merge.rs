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

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::{Path, PathBuf};

use crate::commit::{write_manifest, ManifestWriteError, WriterLock};
use crate::dataset::{Dataset, OpenOptions};
use crate::error::{DisplayKey, Error, Result};
use crate::fingerprint::ShardFingerprint;
use crate::format::{
    commit_file_path, parse_commit_file_name, parse_shard_name, parse_sidecar_name, shard_paths,
    sidecar_path, COMMIT_FILE_TMP_PREFIX, INDEX_FILE_NAME, INDEX_FILE_TMP_PREFIX, LOCK_NAME,
    MANIFEST_NAME, MANIFEST_TMP_NAME, MAX_COMMIT_FILE_BYTES,
};
use crate::manifest::{Manifest, ManifestVersion};
use crate::shard_writer::ShardWriter;
use crate::storage::Storage;

mod rerun;
use rerun::{Merged, Opened};

/// A dataset to merge into another: its directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartSource {
    /// The part's dataset directory.
    pub path: PathBuf,
}

impl PartSource {
    /// The part in `path`.
    pub fn new(path: impl Into<PathBuf>) -> PartSource {
        PartSource { path: path.into() }
    }
}

impl<P: Into<PathBuf>> From<P> for PartSource {
    fn from(path: P) -> PartSource {
        PartSource::new(path)
    }
}

/// What a merge does with a key found twice (in the target and a part, or in
/// two parts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MergeOnDuplicate {
    /// Fail, naming the key and both places; nothing is merged.
    #[default]
    Error,
    /// Keep the first copy: the target's before any part's, an earlier part's
    /// before a later one's. The shards holding a dropped record are rewritten
    /// without it.
    Skip,
}

/// The error type of the caller's hooks ([`SidecarRewrite`], [`CommitFileHook`]).
pub type HookError = Box<dyn std::error::Error + Send + Sync>;

/// What becomes of a part shard's sidecar when the shard is rewritten (it lost
/// duplicate records): a sidecar whose row `i` describes record `i` no longer
/// fits. Sidecars of shards moved whole are carried over unchanged (their
/// fingerprint does not depend on the shard's number).
pub trait SidecarRewrite: Sync {
    /// The new content of the sidecar `suffix` (`bytes` now) of a shard of which
    /// only the records where `kept_rows` is true remain, in order, in a new shard
    /// whose fingerprint is `fingerprint`; `None` leaves the new shard without
    /// it. The default drops it.
    fn rewrite(
        &self,
        suffix: &str,
        bytes: &[u8],
        kept_rows: &[bool],
        fingerprint: &ShardFingerprint,
    ) -> std::result::Result<Option<Vec<u8>>, HookError> {
        let _ = (suffix, bytes, kept_rows, fingerprint);
        Ok(None)
    }

    /// Called once for every rewritten shard, before its sidecars are
    /// rewritten: shard `from` of `part` keeps the records where `kept_rows` is
    /// true, in a new shard whose fingerprint is `fingerprint`. The default does
    /// nothing.
    fn shard_rewritten(
        &self,
        part: &Dataset,
        from: u64,
        kept_rows: &[bool],
        fingerprint: &ShardFingerprint,
    ) -> std::result::Result<(), HookError> {
        let _ = (part, from, kept_rows, fingerprint);
        Ok(())
    }

    /// The new content of the sidecar `suffix` of shard `from` of `part`, a
    /// shard moved whole (its records unchanged, so its fingerprint too) whose
    /// sidecar must change all the same (the fields layer renumbers class
    /// indices into the target's vocabulary); `None` moves the file as it is.
    /// The default moves every sidecar as it is.
    fn moved(
        &self,
        part: &Dataset,
        from: u64,
        suffix: &str,
    ) -> std::result::Result<Option<Vec<u8>>, HookError> {
        let _ = (part, from, suffix);
        Ok(None)
    }
}

/// The default [`SidecarRewrite`]: a rewritten shard keeps no sidecar.
#[derive(Clone, Copy, Debug, Default)]
pub struct DropSidecars;

impl SidecarRewrite for DropSidecars {}

/// Makes the commit file of the merged state (`commit.{shards:06}.json`) from
/// the target's and the parts'; `None` writes none.
pub type CommitFileHook<'h> =
    dyn Fn(&MergeCommitInput<'_>) -> std::result::Result<Option<Vec<u8>>, HookError> + Sync + 'h;

/// How to merge.
#[derive(Clone, Copy)]
pub struct MergeOptions<'h> {
    /// Copy the parts' files and leave the parts as they are. Default `false`:
    /// move them (hard links, or copies where links are impossible) and remove
    /// the parts once the merge is committed.
    pub copy: bool,
    /// What to do with a key found twice. Default: [`MergeOnDuplicate::Error`].
    pub on_duplicate: MergeOnDuplicate,
    /// Sidecars of rewritten shards. Default: [`DropSidecars`].
    pub sidecars: &'h dyn SidecarRewrite,
    /// The commit file of the merged state. Default: none.
    pub commit_file: Option<&'h CommitFileHook<'h>>,
}

impl Default for MergeOptions<'_> {
    fn default() -> Self {
        MergeOptions {
            copy: false,
            on_duplicate: MergeOnDuplicate::Error,
            sidecars: &DropSidecars,
            commit_file: None,
        }
    }
}

impl std::fmt::Debug for MergeOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MergeOptions")
            .field("copy", &self.copy)
            .field("on_duplicate", &self.on_duplicate)
            .field("commit_file", &self.commit_file.is_some())
            .finish_non_exhaustive()
    }
}

/// One shard of a part as it goes into the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergedShard {
    /// Its number in the part.
    pub from: u64,
    /// Its number in the target.
    pub to: u64,
    /// Records it holds in the target.
    pub records: u64,
    /// Whether it was rewritten without dropped duplicates (else moved whole).
    pub rewritten: bool,
    /// Its fingerprint in the target.
    pub fingerprint: ShardFingerprint,
}

/// A part as a [`CommitFileHook`] sees it.
#[derive(Debug)]
pub struct MergedPart<'a> {
    /// The part, opened.
    pub dataset: &'a Dataset,
    /// Its commit file of its current state (`commit.{shards:06}.json`), if any.
    pub commit_file: Option<Vec<u8>>,
    /// Its shards that go into the target, in order; a shard all of whose
    /// records were dropped is not among them.
    pub shards: Vec<MergedShard>,
}

/// What a [`CommitFileHook`] is given.
#[derive(Debug)]
pub struct MergeCommitInput<'a> {
    /// The target before the merge (its shards `0..target.shards()` stay).
    pub target: &'a Dataset,
    /// The target's commit file of its current state, if any.
    pub target_commit_file: Option<Vec<u8>>,
    /// The parts, in merge order.
    pub parts: Vec<MergedPart<'a>>,
    /// The target's shard count after the merge.
    pub shards: u64,
}

/// What a committed merge did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MergeSummary {
    /// Parts merged.
    pub parts: usize,
    /// Records added to the target.
    pub records: u64,
    /// Records of the parts left out as duplicates.
    pub skipped: u64,
    /// Shards added to the target.
    pub shards: u64,
    /// Of those, shards rewritten without their duplicates.
    pub rewritten_shards: u64,
    /// Files given to the target as hard links (no byte copied).
    pub linked_files: u64,
    /// Files copied.
    pub copied_files: u64,
    /// Bytes added to the target's shard data files.
    pub bytes_stored: u64,
    /// Parts that could not be removed after the commit (the merge itself
    /// succeeded), with why: their files are in the target too, so they must not
    /// be merged again; delete them.
    pub parts_not_removed: Vec<(PathBuf, String)>,
    /// Parts found merged already: one of their shard files is the same file
    /// as a committed shard of the target (a merge that committed them was
    /// interrupted before it removed them). Nothing of them was added; they
    /// were removed (unless [`MergeOptions::copy`]), or are in
    /// [`MergeSummary::parts_not_removed`].
    pub already_merged: Vec<PathBuf>,
}

/// A part, opened and locked.
struct Part {
    dataset: Dataset,
    lock: Option<WriterLock>,
    /// Suffixes of the sidecars of each committed shard, sorted.
    sidecars: Vec<Vec<String>>,
}

/// Where a record is: its dataset (`None` for the target) and its number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Place {
    part: Option<usize>,
    record: u64,
}

/// The outcome of the key check.
struct KeyCheck {
    /// Per part, its records dropped as duplicates, sorted.
    dropped: Vec<Vec<u64>>,
    /// Per part, each record's key hash (empty for keyless datasets).
    hashes: Vec<Vec<u64>>,
}

/// What happens to a part's shard.
enum Plan {
    Move,
    /// Rewritten with the records marked true.
    Rewrite(Vec<bool>),
}

struct Planned {
    part: usize,
    from: u64,
    to: u64,
    records: u64,
    plan: Plan,
}

/// Files the merge created in the target, removed unless it commits.
struct Created<'s> {
    storage: &'s dyn Storage,
    paths: Vec<PathBuf>,
}

impl Created<'_> {
    fn keep(&mut self) {
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
        let plan = self.plan(&parts, &check.dropped);

        let storage = self.storage.clone();
        let mut created = Created {
            storage: storage.as_ref(),
            paths: Vec::new(),
        };
        let mut summary = MergeSummary {
            parts: parts.len(),
            skipped: check.dropped.iter().map(|d| d.len() as u64).sum(),
            already_merged: merged_before.iter().map(|m| m.dir().to_owned()).collect(),
            ..MergeSummary::default()
        };
        let mut fingerprints = Vec::with_capacity(plan.len());
        for planned in &plan {
            let part = &parts[planned.part];
            fingerprints.push(self.place(part, planned, options, &mut created, &mut summary)?);
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
        let known = self
            .keyed()
            .then(|| known_hashes(&parts, &plan, &check.hashes));
        let dir = self.dir.clone();
        match write_manifest(storage.as_ref(), &dir, &manifest) {
            Ok(()) => {}
            Err(ManifestWriteError::NotCommitted(e)) => return Err(e),
            Err(ManifestWriteError::NotDurable(e)) => {
                created.keep();
                let _ = self.apply_manifest_with(manifest, known.as_deref());
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
        let loaded = self.apply_manifest_with(manifest, known.as_deref());
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

    /// Checks every part's keys against the target's and the earlier parts', in
    /// hash order: the parts' sorted key tables are merged (a heap of one cursor
    /// per part), and keys are read only where hashes meet.
    fn check_keys(&self, parts: &[Part], policy: MergeOnDuplicate) -> Result<KeyCheck> {
        let mut dropped = vec![Vec::new(); parts.len()];
        if !self.keyed() {
            return Ok(KeyCheck {
                dropped,
                hashes: Vec::new(),
            });
        }
        let mut hashes: Vec<Vec<u64>> = Vec::with_capacity(parts.len());
        let mut seen: Vec<Vec<u64>> = Vec::with_capacity(parts.len());
        for part in parts {
            let len = part.dataset.len();
            hashes.push(vec![0; len]);
            seen.push(vec![0; len.div_ceil(64)]);
        }
        let mut cursors: Vec<_> = parts
            .iter()
            .map(|p| p.dataset.index.key_entries())
            .collect();
        let mut heap = BinaryHeap::with_capacity(parts.len());
        for (part, cursor) in cursors.iter_mut().enumerate() {
            if let Some((hash, record)) = cursor.next() {
                heap.push(Reverse((hash, part, record)));
            }
        }
        let mut group: Vec<Place> = Vec::new();
        let mut reported: Option<(Place, Place)> = None;
        while let Some(Reverse((hash, part, record))) = heap.pop() {
            if let Some((next_hash, next_record)) = cursors[part].next() {
                heap.push(Reverse((next_hash, part, next_record)));
            }
            let listed = usize::try_from(record)
                .ok()
                .filter(|&r| r < hashes[part].len())
                .filter(|&r| seen[part][r / 64] & (1 << (r % 64)) == 0);
            let Some(r) = listed else {
                return Err(bad_key_table(&parts[part].dataset));
            };
            seen[part][r / 64] |= 1 << (r % 64);
            hashes[part][r] = hash;
            group.push(Place {
                part: Some(part),
                record,
            });
            if heap.peek().is_some_and(|Reverse((h, _, _))| *h == hash) {
                continue;
            }
            for (second, first) in self.duplicates_in(hash, &group, parts)? {
                match policy {
                    // The one reported is the first in merge order, whatever the
                    // hashes' order.
                    MergeOnDuplicate::Error => {
                        if reported.is_none_or(|(s, _)| second < s) {
                            reported = Some((second, first));
                        }
                    }
                    MergeOnDuplicate::Skip => {
                        dropped[second.part.expect("a part")].push(second.record)
                    }
                }
            }
            group.clear();
        }
        if let Some((second, first)) = reported {
            return Err(self.duplicate_error(parts, first, second));
        }
        // A table that leaves a record out (a damaged index file) would let its
        // key through unchecked.
        for (part, seen) in seen.iter().enumerate() {
            let len = hashes[part].len();
            let listed: usize = seen.iter().map(|w| w.count_ones() as usize).sum();
            if listed != len {
                return Err(bad_key_table(&parts[part].dataset));
            }
        }
        for d in &mut dropped {
            d.sort_unstable();
        }
        Ok(KeyCheck { dropped, hashes })
    }

    /// The duplicates among `group` (part records whose keys hash to `hash`, in
    /// merge order): each as (second copy, first copy).
    fn duplicates_in(
        &self,
        hash: u64,
        group: &[Place],
        parts: &[Part],
    ) -> Result<Vec<(Place, Place)>> {
        let in_target: Vec<u64> = self.index.candidates(hash).collect();
        if group.len() == 1 && in_target.is_empty() {
            return Ok(Vec::new());
        }
        let key_of = |place: Place| -> Result<&[u8]> {
            match place.part {
                None => self.key_at(place.record as usize),
                Some(p) => parts[p].dataset.key_at(place.record as usize),
            }
        };
        let mut found = Vec::new();
        for (j, &place) in group.iter().enumerate() {
            let key = key_of(place)?;
            let mut first = None;
            for &record in &in_target {
                let candidate = Place { part: None, record };
                if key_of(candidate)? == key {
                    first = Some(candidate);
                    break;
                }
            }
            if first.is_none() {
                for &earlier in &group[..j] {
                    if key_of(earlier)? == key {
                        first = Some(earlier);
                        break;
                    }
                }
            }
            if let Some(first) = first {
                found.push((place, first));
            }
        }
        Ok(found)
    }

    fn duplicate_error(&self, parts: &[Part], first: Place, second: Place) -> Error {
        let dataset = |place: Place| match place.part {
            None => self,
            Some(p) => &parts[p].dataset,
        };
        let locate = |place: Place| {
            let dataset = dataset(place);
            let shard = shard_of(dataset, place.record);
            (
                dataset.shard_data_path(shard),
                place.record - dataset.shard_first_record(shard),
            )
        };
        let key = dataset(second)
            .key_at(second.record as usize)
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        let (first, first_record) = locate(first);
        let (second, second_record) = locate(second);
        Error::DuplicateKeyInMerge {
            key: DisplayKey(key),
            first,
            first_record,
            second,
            second_record,
        }
    }

    /// Where each part shard goes: moved whole, rewritten without its dropped
    /// records, or (all dropped) left out.
    fn plan(&self, parts: &[Part], dropped: &[Vec<u64>]) -> Vec<Planned> {
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
    fn place(
        &self,
        part: &Part,
        planned: &Planned,
        options: &MergeOptions<'_>,
        created: &mut Created<'_>,
        summary: &mut MergeSummary,
    ) -> Result<Option<ShardFingerprint>> {
        let source = &part.dataset;
        let suffixes = &part.sidecars[planned.from as usize];
        let storage = self.storage.as_ref();
        match &planned.plan {
            Plan::Move => {
                let (from_data, from_index) = shard_paths(&source.dir, planned.from);
                let (to_data, to_index) = shard_paths(&self.dir, planned.to);
                let mut files = vec![(from_data, to_data), (from_index, to_index)];
                for suffix in suffixes {
                    let from = sidecar_path(&source.dir, planned.from, suffix);
                    let to = sidecar_path(&self.dir, planned.to, suffix);
                    let replaced = options
                        .sidecars
                        .moved(source, planned.from, suffix)
                        .map_err(|source| Error::Hook {
                            what: format!("rewriting {} for {}", from.display(), to.display()),
                            source,
                        })?;
                    match replaced {
                        Some(bytes) => {
                            created.paths.push(to.clone());
                            crate::extend::write_read_back(storage, &to, &bytes)?;
                        }
                        None => files.push((from, to)),
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
                    let rewritten = options
                        .sidecars
                        .rewrite(suffix, &bytes, kept, &written)
                        .map_err(|source| Error::Hook {
                            what: format!(
                                "rewriting {} for {}",
                                sidecar_path(&part.dataset.dir, planned.from, suffix).display(),
                                path.display()
                            ),
                            source,
                        })?;
                    if let Some(bytes) = rewritten {
                        created.paths.push(path.clone());
                        crate::extend::write_read_back(storage, &path, &bytes)?;
                    }
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
    fn write_commit_file(
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

/// Each part's key hashes in the order of the records the target gains.
fn known_hashes(parts: &[Part], plan: &[Planned], hashes: &[Vec<u64>]) -> Vec<u64> {
    let mut known = Vec::with_capacity(plan.iter().map(|p| p.records as usize).sum());
    for planned in plan {
        let dataset = &parts[planned.part].dataset;
        let first = dataset.shard_first_record(planned.from) as usize;
        let records = dataset.shard_records(planned.from) as usize;
        let hashes = &hashes[planned.part][first..first + records];
        match &planned.plan {
            Plan::Move => known.extend_from_slice(hashes),
            Plan::Rewrite(kept) => {
                known.extend(hashes.iter().zip(kept).filter(|(_, &k)| k).map(|(&h, _)| h))
            }
        }
    }
    known
}

/// The shard holding record `record` of `dataset`.
fn shard_of(dataset: &Dataset, record: u64) -> u64 {
    dataset
        .index
        .shards()
        .partition_point(|s| s.first <= record)
        .saturating_sub(1) as u64
}

fn bad_key_table(dataset: &Dataset) -> Error {
    Error::CorruptIndexFile {
        path: dataset.dir.join(INDEX_FILE_NAME),
        reason: "its key table does not list every record exactly once".into(),
    }
}

/// The sidecars of each committed shard of `dataset`, by suffix.
fn list_sidecars(dataset: &Dataset) -> Result<Vec<Vec<String>>> {
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
            summary.parts_not_removed.push((path, error_chain(&e)));
        }
    }
    for part in merged_before {
        let path = part.dir().to_owned();
        if let Err(e) = part.remove(storage) {
            summary.parts_not_removed.push((path, error_chain(&e)));
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
            || name.starts_with(COMMIT_FILE_TMP_PREFIX);
        if ours {
            names.push(name.to_owned());
        }
    }
    names.sort_unstable();
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

/// An error and its causes, joined by ": ".
fn error_chain(error: &Error) -> String {
    let mut text = error.to_string();
    let mut next = std::error::Error::source(error);
    while let Some(cause) = next {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        next = cause.source();
    }
    text
}
