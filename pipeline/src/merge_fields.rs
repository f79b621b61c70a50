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
//! (through [`SidecarRewrite::moved_into`]) instead of being linked.
//!
//! A shard's fields are gone through a batch at a time, twice (its statistics
//! when the merge asks for them, then its file written into the merge's
//! [`SidecarOut`]), so a merge holds a batch, not a shard's fields; each file
//! written is read back as opening the dataset will before the commit file is
//! made.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use std::io::Write;

use arrow_array::RecordBatch;
use bcd::{
    Dataset, HookError, MergeCommitInput, RewrittenSidecar, ShardFingerprint, SidecarOut,
    SidecarRewrite,
};
use bcd_fields::{
    merge_metadata, CommitFile, FieldsError, Fingerprint, Remap, ShardFileWriter, ShardStats,
    FIELDS_SUFFIX, STATS_SUFFIX,
};

use crate::fields::{filter, fingerprint, size_stats, DatasetFields, FieldsIoError};
use crate::fields_writer::encode_stats_file;
use crate::read_back::{check_fields_file, checked_commit_file};

/// What a rewritten (or renumbered) shard keeps: its statistics (its fields
/// are read again from the part to write them).
struct Kept {
    stats: ShardStats,
    /// Whether a fields file was written for it.
    fields_written: bool,
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

    /// Shard `from` of `part`, restricted to `kept_rows` (`None`: all):
    /// statistics of the kept records' sizes and fields (class indices
    /// renumbered), gone through a batch at a time.
    fn kept(
        &self,
        part: &Dataset,
        from: u64,
        kept_rows: Option<&[bool]>,
    ) -> Result<Kept, FieldsIoError> {
        // The kept records are copied as stored: their sizes are the part's.
        let mut stats = size_stats(part, from, |row| kept_rows.is_none_or(|k| k[row]))?;
        self.each_kept_batch(part, from, kept_rows, |batch| stats.add_fields(&batch))?;
        Ok(Kept {
            stats,
            fields_written: false,
        })
    }

    /// The fields of the records of shard `from` of `part` that `kept_rows`
    /// keeps (`None`: all), as the part's schema's columns, class indices
    /// renumbered, handed to `visit` a batch at a time; nothing when the part
    /// has no fields.
    fn each_kept_batch(
        &self,
        part: &Dataset,
        from: u64,
        kept_rows: Option<&[bool]>,
        mut visit: impl FnMut(RecordBatch) -> Result<(), FieldsError>,
    ) -> Result<(), FieldsIoError> {
        let state = DatasetFields::load(part)?;
        if state.schema.fields().is_empty() {
            return Ok(());
        }
        let remap = self.remap(part);
        let what = format!("the fields of shard {from} of {}", part.path().display());
        let mut row = 0;
        state.each_shard_batch(part, from, |batch| {
            let rows = batch.num_rows();
            let batch = match kept_rows {
                Some(kept) => filter(&batch, &kept[row..row + rows])?,
                None => batch,
            };
            row += rows;
            if batch.num_rows() == 0 {
                return Ok(());
            }
            visit(remap.apply(&batch, &what)?)
        })
    }

    /// Writes the fields file of the records of shard `from` of `part` that
    /// `kept_rows` keeps (`None`: all) into `out`, with fingerprint `print`;
    /// false when the part has no fields.
    fn write_kept_fields(
        &self,
        part: &Dataset,
        from: u64,
        kept_rows: Option<&[bool]>,
        print: &Fingerprint,
        out: &mut SidecarOut<'_>,
    ) -> Result<bool, FieldsIoError> {
        let columns = DatasetFields::load(part)?
            .schema
            .arrow_schema()
            .fields()
            .clone();
        if columns.is_empty() {
            return Ok(false);
        }
        let mut writer = ShardFileWriter::try_new(&mut *out, &columns, print)?;
        self.each_kept_batch(part, from, kept_rows, |batch| writer.write(&batch))?;
        writer.finish()?;
        Ok(true)
    }

    /// The new sidecar `suffix` of shard `from` of `part`, moved whole, when its
    /// class indices are renumbered, written into `out`.
    fn renumbered_sidecar(
        &self,
        part: &Dataset,
        from: u64,
        suffix: &str,
        out: &mut SidecarOut<'_>,
    ) -> Result<bool, FieldsIoError> {
        if self.remap(part).is_identity() || !matches!(suffix, FIELDS_SUFFIX | STATS_SUFFIX) {
            return Ok(false);
        }
        let print = fingerprint(&part.shard_fingerprint(from)?);
        let key = print_key(&print);
        let mut renumbered = self.renumbered.lock().unwrap_or_else(|e| e.into_inner());
        if !renumbered.contains_key(&key) {
            renumbered.insert(key.clone(), self.kept(part, from, None)?);
        }
        let kept = renumbered.get_mut(&key).expect("inserted above");
        self.sidecar(part, from, None, kept, suffix, &print, out)
    }

    /// Writes sidecar `suffix` of the shard made of the records of shard
    /// `from` of `part` that `kept_rows` keeps (`None`: all), whose statistics
    /// are `kept`'s, with fingerprint `print`, into `out`; false for no file
    /// (no fields, or a suffix not ours). Encoded as an extend encodes them.
    #[allow(clippy::too_many_arguments)]
    fn sidecar(
        &self,
        part: &Dataset,
        from: u64,
        kept_rows: Option<&[bool]>,
        kept: &mut Kept,
        suffix: &str,
        print: &Fingerprint,
        out: &mut SidecarOut<'_>,
    ) -> Result<bool, FieldsIoError> {
        match suffix {
            FIELDS_SUFFIX => {
                let written = self.write_kept_fields(part, from, kept_rows, print, out)?;
                kept.fields_written |= written;
                Ok(written)
            }
            STATS_SUFFIX => {
                let written = out.write_all(&encode_stats_file(&kept.stats, print));
                written.map_err(|source| bcd::Error::Io {
                    op: "write",
                    path: out.path().to_owned(),
                    source,
                })?;
                Ok(true)
            }
            _ => Ok(false),
        }
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
        // Every fields file the merge wrote, read back as opening the merged
        // dataset will read it.
        for part in &input.parts {
            for shard in &part.shards {
                let print = fingerprint(&shard.fingerprint);
                let key = print_key(&print);
                let kept = rewritten.get(&key).or_else(|| renumbered.get(&key));
                if kept.is_some_and(|k| k.fields_written) {
                    let records = shard.records as usize;
                    check_fields_file(input.target, shard.to, &print, &schema, records)?;
                }
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

impl SidecarRewrite for FieldsMerge {
    fn shard_rewritten(
        &self,
        part: &Dataset,
        from: u64,
        kept_rows: &[bool],
        new: &ShardFingerprint,
    ) -> Result<(), HookError> {
        let kept = self.kept(part, from, Some(kept_rows)).map_err(hook_error)?;
        self.rewritten
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(print_key(&fingerprint(new)), kept);
        Ok(())
    }

    fn rewrite_into(
        &self,
        sidecar: &RewrittenSidecar<'_>,
        out: &mut SidecarOut<'_>,
    ) -> Result<bool, HookError> {
        let print = fingerprint(sidecar.fingerprint);
        let mut rewritten = self.rewritten.lock().unwrap_or_else(|e| e.into_inner());
        let Some(kept) = rewritten.get_mut(&print_key(&print)) else {
            return Ok(false);
        };
        let (part, from, kept_rows) = (sidecar.part, sidecar.from, Some(sidecar.kept_rows));
        self.sidecar(part, from, kept_rows, kept, sidecar.suffix, &print, out)
            .map_err(hook_error)
    }

    fn moved_into(
        &self,
        part: &Dataset,
        from: u64,
        suffix: &str,
        out: &mut SidecarOut<'_>,
    ) -> Result<bool, HookError> {
        self.renumbered_sidecar(part, from, suffix, out)
            .map_err(hook_error)
    }
}
