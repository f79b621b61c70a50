//! What a merge is given and gives back: the parts, the options and the hooks
//! by which the fields layer rewrites sidecars and makes the commit file, and
//! the summary.

use std::io::Write;
use std::path::PathBuf;

pub use super::sidecar_out::SidecarOut;

use crate::dataset::Dataset;
use crate::fingerprint::ShardFingerprint;

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
///
/// A hook gives a sidecar's new content whole ([`SidecarRewrite::rewrite`],
/// [`SidecarRewrite::moved`]) or, for content too large to hold in memory,
/// writes it in pieces ([`SidecarRewrite::rewrite_into`],
/// [`SidecarRewrite::moved_into`], which the merge calls; by default they
/// write what the first two give).
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

    /// [`SidecarRewrite::rewrite`] of `sidecar`, written into `out` (the new sidecar's
    /// file, created by the first write); returns whether there is a new
    /// sidecar (`false`: none, and nothing may have been written). The merge
    /// finishes `out` (flushed, fsynced, read back) unless the hook did
    /// ([`SidecarOut::finish`]: to read the file back itself). The default
    /// writes what [`SidecarRewrite::rewrite`] gives.
    fn rewrite_into(
        &self,
        sidecar: &RewrittenSidecar<'_>,
        out: &mut SidecarOut<'_>,
    ) -> std::result::Result<bool, HookError> {
        let RewrittenSidecar {
            suffix,
            bytes,
            kept_rows,
            fingerprint,
            ..
        } = *sidecar;
        match self.rewrite(suffix, bytes, kept_rows, fingerprint)? {
            Some(content) => {
                out.write_all(&content)?;
                Ok(true)
            }
            None => Ok(false),
        }
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

    /// [`SidecarRewrite::moved`], written into `out` as
    /// [`SidecarRewrite::rewrite_into`] writes; returns whether there is a
    /// new sidecar (`false`: the file moves as it is). The default writes
    /// what [`SidecarRewrite::moved`] gives.
    fn moved_into(
        &self,
        part: &Dataset,
        from: u64,
        suffix: &str,
        out: &mut SidecarOut<'_>,
    ) -> std::result::Result<bool, HookError> {
        match self.moved(part, from, suffix)? {
            Some(content) => {
                out.write_all(&content)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

/// A sidecar of a rewritten shard, as [`SidecarRewrite::rewrite_into`] is
/// given it.
#[derive(Clone, Copy)]
pub struct RewrittenSidecar<'a> {
    /// The part the shard comes from.
    pub part: &'a Dataset,
    /// The shard's number in the part.
    pub from: u64,
    /// The sidecar's suffix.
    pub suffix: &'a str,
    /// The sidecar's content now.
    pub bytes: &'a [u8],
    /// The records kept, by their row in the shard.
    pub kept_rows: &'a [bool],
    /// The new shard's fingerprint.
    pub fingerprint: &'a ShardFingerprint,
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
    /// Which records are duplicates: keys (the default), or with
    /// [`Dedup::Content`](crate::Dedup::Content) also a part record whose value
    /// equals an earlier record's (the target's, an earlier part's, or earlier
    /// in its part), which is left out whatever `on_duplicate` says, its shard
    /// rewritten without it ([`MergeSummary::value_duplicates`]). Every shard of
    /// the target must have content hashes; a part shard without them has them
    /// computed.
    pub dedup: crate::Dedup,
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
            dedup: crate::Dedup::Keys,
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
            .field("dedup", &self.dedup)
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

/// A part record a merge left out because its value repeats an earlier
/// record's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergedValueDuplicate {
    /// The part it was in.
    pub part: PathBuf,
    /// Its index in the part.
    pub record: u64,
    /// Its key (empty when keyless).
    pub key: Vec<u8>,
    /// The index, in the merged target, of the record whose value it repeats.
    pub of: u64,
    /// That record's key (empty when keyless).
    pub of_key: Vec<u8>,
}

/// What a committed merge did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MergeSummary {
    /// Parts merged.
    pub parts: usize,
    /// Records added to the target.
    pub records: u64,
    /// Records of the parts left out as duplicate keys.
    pub skipped: u64,
    /// Records of the parts left out because their value repeats an earlier
    /// record's ([`MergeOptions::dedup`]), in merge order.
    pub value_duplicates: Vec<MergedValueDuplicate>,
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
