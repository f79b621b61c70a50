//! Fields through `merge`: the hooks that carry the parts' fields and statistics
//! into the merged dataset (FORMAT.md section 9). Shards moved whole keep their
//! sidecars (their fingerprint does not depend on the shard's number); a shard
//! rewritten without dropped duplicates gets its fields file filtered to the
//! records kept and its statistics computed anew from them; the commit file of
//! the merged state unifies the schemas, merges the parts' metadata into the
//! target's in order (`bcd_fields::merge_metadata`: class vocabularies extended,
//! conflicts refused) and adds every merged shard's statistics to the totals.
//!
//! A part whose class indices mean other names in the target's vocabulary has
//! them renumbered: its shards' fields and statistics files are written anew
//! (through [`SidecarRewrite::moved`]) instead of being linked.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;
use bcd::{Dataset, HookError, MergeCommitInput, ShardFingerprint, SidecarRewrite};
use bcd_fields::{
    merge_metadata, CommitFile, FieldsError, Fingerprint, Remap, ShardStats, FIELDS_SUFFIX,
    STATS_SUFFIX,
};

use crate::fields::{filter, fingerprint, size_stats, DatasetFields, FieldsIoError};
use crate::fields_writer::{encode_fields_file, encode_stats_file};
use crate::read_back::{check_fields_bytes, checked_commit_file};

/// What a rewritten shard keeps: its statistics and its fields.
struct Kept {
    stats: ShardStats,
    fields: RecordBatch,
    /// The fields file of the part's shard it comes from (for errors).
    source: PathBuf,
}

/// The state both hooks share: what each rewritten or renumbered shard keeps,
/// by its new fingerprint, for its sidecars and for the commit file; and each
/// part's renumbering of class indices, planned before the merge.
#[derive(Default)]
pub(crate) struct FieldsMerge {
    rewritten: Mutex<HashMap<String, Kept>>,
    /// Shards moved whole whose class indices were renumbered, by fingerprint.
    renumbered: Mutex<HashMap<String, Kept>>,
    /// Each part's renumbering, by its path (canonical where it resolves).
    remaps: HashMap<PathBuf, Remap>,
}

/// The key of a part in [`FieldsMerge::remaps`].
fn part_key(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

fn hook_error(error: impl Into<FieldsIoError>) -> HookError {
    Box::new(error.into())
}

impl FieldsMerge {
    /// Plans the merge of `parts` (in order) into `target`: each part's metadata
    /// merged into the target's, and how each part's class indices are
    /// renumbered. A conflict is an error before anything is written. A part
    /// that does not open is left for the merge to report.
    pub(crate) fn plan(target: &Dataset, parts: &[PathBuf]) -> Result<FieldsMerge, FieldsIoError> {
        let mut metadata = DatasetFields::load(target)?.metadata;
        let mut remaps = HashMap::new();
        // Read only, as the merge opens its parts: no persisted index is written.
        let read_only = bcd::OpenOptions {
            index_file_min_records: None,
            index_file_min_bytes: None,
            ..bcd::OpenOptions::default()
        };
        for path in parts {
            let storage = Arc::new(bcd::storage::FileSystem);
            let Ok(part) = Dataset::open_with(path, read_only, storage) else {
                continue;
            };
            let merged = merge_metadata(&metadata, &DatasetFields::load(&part)?.metadata)?;
            metadata = merged.metadata;
            remaps.insert(part_key(path), merged.remap);
        }
        Ok(FieldsMerge {
            remaps,
            ..FieldsMerge::default()
        })
    }

    fn remap(&self, part: &Dataset) -> Remap {
        self.remaps
            .get(&part_key(part.path()))
            .cloned()
            .unwrap_or_default()
    }

    /// Shard `from` of `part`, restricted to `kept_rows`: statistics of the kept
    /// records' sizes and fields, and those fields, class indices renumbered.
    fn kept(&self, part: &Dataset, from: u64, kept_rows: &[bool]) -> Result<Kept, FieldsIoError> {
        // The kept records are copied as stored: their sizes are the part's.
        let mut stats = size_stats(part, from, |row| kept_rows[row])?;
        let state = DatasetFields::load(part)?;
        let fields = filter(&state.shard_batches(part, from, None)?, kept_rows)?;
        let what = format!("the fields of shard {from} of {}", part.path().display());
        let fields = self.remap(part).apply(&fields, &what)?;
        if fields.num_columns() > 0 {
            stats.add_fields(&fields)?;
        }
        let source = part.sidecar_path(from, FIELDS_SUFFIX);
        Ok(Kept {
            stats,
            fields,
            source,
        })
    }

    /// The new sidecar `suffix` of shard `from` of `part`, moved whole, when its
    /// class indices are renumbered.
    fn renumbered_sidecar(
        &self,
        part: &Dataset,
        from: u64,
        suffix: &str,
    ) -> Result<Option<Vec<u8>>, FieldsIoError> {
        if self.remap(part).is_identity() || !matches!(suffix, FIELDS_SUFFIX | STATS_SUFFIX) {
            return Ok(None);
        }
        let print = fingerprint(&part.shard_fingerprint(from)?);
        let key = print_key(&print);
        let mut renumbered = self.renumbered.lock().unwrap_or_else(|e| e.into_inner());
        if !renumbered.contains_key(&key) {
            let all = vec![true; part.shard_records(from) as usize];
            renumbered.insert(key.clone(), self.kept(part, from, &all)?);
        }
        let kept = &renumbered[&key];
        sidecar(kept, suffix, &print)
    }

    /// The commit file of the merged state.
    pub(crate) fn commit_file(
        &self,
        input: &MergeCommitInput<'_>,
    ) -> Result<Vec<u8>, FieldsIoError> {
        let target = DatasetFields::load(input.target)?;
        let mut totals = target.totals(input.target)?;
        let mut shards_with_stats = target.shards_with_stats();
        let mut schema = target.schema;
        let mut metadata = target.metadata;
        let mut last_shard = match input.target.shards() {
            0 => None,
            n => Some(fingerprint(&input.target.shard_fingerprint(n - 1)?)),
        };
        let rewritten = self.rewritten.lock().unwrap_or_else(|e| e.into_inner());
        let no_stats = |to: u64| -> FieldsIoError {
            FieldsError::Unsupported(format!(
                "internal error: the statistics of rewritten shard {to} were not computed"
            ))
            .into()
        };
        let renumbered = self.renumbered.lock().unwrap_or_else(|e| e.into_inner());
        for part in &input.parts {
            let state = DatasetFields::load(part.dataset)?;
            schema = schema.unified(state.schema.fields())?;
            let merged = merge_metadata(&metadata, &state.metadata)?;
            if merged.remap != self.remap(part.dataset) {
                // The part or the target changed between the plan and the locks.
                return Err(FieldsError::Unsupported(format!(
                    "the class names of {} changed while it was merged; nothing was committed: merge again",
                    part.dataset.path().display()
                ))
                .into());
            }
            metadata = merged.metadata;
            for shard in &part.shards {
                let print = fingerprint(&shard.fingerprint);
                let stats = match shard.rewritten {
                    true => (rewritten.get(&print_key(&print)))
                        .ok_or_else(|| no_stats(shard.to))?
                        .stats
                        .clone(),
                    false => match renumbered.get(&print_key(&print)) {
                        Some(kept) => kept.stats.clone(),
                        None => state.shard_stats(part.dataset, shard.from)?,
                    },
                };
                totals.merge(&stats)?;
                shards_with_stats += 1;
                last_shard = Some(print);
            }
        }
        let commit = CommitFile {
            schema,
            metadata,
            totals,
            last_shard,
            shards_with_stats,
        };
        checked_commit_file(&commit, input.target.path(), input.shards)
    }
}

/// A fingerprint as a map key.
fn print_key(print: &Fingerprint) -> String {
    format!(
        "{}:{}:{:016x}:{:016x}",
        print.records, print.data_len, print.index_xxh3, print.edges_xxh3
    )
}

/// The rows of `batches` (concatenated) where `kept` is true.
impl SidecarRewrite for FieldsMerge {
    fn shard_rewritten(
        &self,
        part: &Dataset,
        from: u64,
        kept_rows: &[bool],
        new: &ShardFingerprint,
    ) -> Result<(), HookError> {
        let kept = self.kept(part, from, kept_rows).map_err(hook_error)?;
        self.rewritten
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(print_key(&fingerprint(new)), kept);
        Ok(())
    }

    fn rewrite(
        &self,
        suffix: &str,
        _bytes: &[u8],
        _kept_rows: &[bool],
        new: &ShardFingerprint,
    ) -> Result<Option<Vec<u8>>, HookError> {
        let print = fingerprint(new);
        let rewritten = self.rewritten.lock().unwrap_or_else(|e| e.into_inner());
        let Some(kept) = rewritten.get(&print_key(&print)) else {
            return Ok(None);
        };
        sidecar(kept, suffix, &print).map_err(hook_error)
    }

    fn moved(&self, part: &Dataset, from: u64, suffix: &str) -> Result<Option<Vec<u8>>, HookError> {
        self.renumbered_sidecar(part, from, suffix)
            .map_err(hook_error)
    }
}

/// The content of sidecar `suffix` of a shard whose records keep `kept`, with
/// fingerprint `print`; `None` for no file (no fields, or a suffix not ours).
/// Encoded as an extend encodes them; a fields file is checked to decode as a
/// reader will (read_back.rs) before the store writes it.
fn sidecar(
    kept: &Kept,
    suffix: &str,
    print: &Fingerprint,
) -> Result<Option<Vec<u8>>, FieldsIoError> {
    match suffix {
        FIELDS_SUFFIX => {
            let bytes = encode_fields_file(&kept.fields, print)?;
            if let Some(bytes) = &bytes {
                check_fields_bytes(bytes, print, kept.fields.num_rows(), &kept.source)?;
            }
            Ok(bytes)
        }
        STATS_SUFFIX => Ok(Some(encode_stats_file(&kept.stats, print))),
        _ => Ok(None),
    }
}
