//! Fields through `merge`: the hooks that carry the parts' fields and statistics
//! into the merged dataset (FORMAT.md section 9). Shards moved whole keep their
//! sidecars (their fingerprint does not depend on the shard's number); a shard
//! rewritten without dropped duplicates gets its fields file filtered to the
//! records kept and its statistics computed anew from them; the commit file of
//! the merged state unifies the schemas, carries the metadata forward (later
//! parts' keys win) and adds every merged shard's statistics to the totals.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arrow_array::{BooleanArray, RecordBatch};
use bcd::{Dataset, HookError, MergeCommitInput, ShardFingerprint, SidecarRewrite};
use bcd_fields::{encode_shard, merge_metadata, CommitFile, FieldsError, Fingerprint, ShardStats};

use crate::fields::{
    fingerprint, size_stats, DatasetFields, FieldsIoError, FIELDS_SUFFIX, STATS_SUFFIX,
};

/// What a rewritten shard keeps: its statistics and its fields.
struct Kept {
    stats: ShardStats,
    fields: RecordBatch,
}

/// The state both hooks share: what each rewritten shard keeps, by its new
/// fingerprint, for its sidecars and for the commit file.
#[derive(Default)]
pub(crate) struct FieldsMerge {
    rewritten: Mutex<HashMap<String, Kept>>,
}

fn hook_error(error: impl Into<FieldsIoError>) -> HookError {
    Box::new(error.into())
}

impl FieldsMerge {
    /// Shard `from` of `part`, restricted to `kept_rows`: statistics of the kept
    /// records' sizes and fields, and those fields.
    fn kept(part: &Dataset, from: u64, kept_rows: &[bool]) -> Result<Kept, FieldsIoError> {
        // The kept records are copied as stored: their sizes are the part's.
        let mut stats = size_stats(part, from, |row| kept_rows[row])?;
        let state = DatasetFields::load(part)?;
        let fields = filter(&state.shard_batches(part, from, None)?, kept_rows)?;
        if fields.num_columns() > 0 {
            stats.add_fields(&fields)?;
        }
        Ok(Kept { stats, fields })
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
        for part in &input.parts {
            let state = DatasetFields::load(part.dataset)?;
            schema = schema.unified(state.schema.fields())?;
            metadata = merge_metadata(&metadata, &state.metadata);
            for shard in &part.shards {
                let print = fingerprint(&shard.fingerprint);
                let stats = match shard.rewritten {
                    true => (rewritten.get(&print_key(&print)))
                        .ok_or_else(|| no_stats(shard.to))?
                        .stats
                        .clone(),
                    false => state.shard_stats(part.dataset, shard.from)?,
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
        Ok(commit.encode()?)
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
fn filter(batches: &[RecordBatch], kept: &[bool]) -> Result<RecordBatch, FieldsIoError> {
    let arrow = |context: &str| {
        let context = context.to_owned();
        move |source| FieldsIoError::from(FieldsError::Arrow { context, source })
    };
    let schema = match batches.first() {
        Some(batch) => batch.schema(),
        None => {
            return Ok(RecordBatch::new_empty(Arc::new(
                arrow_schema::Schema::empty(),
            )))
        }
    };
    let whole = arrow_select::concat::concat_batches(&schema, batches)
        .map_err(arrow("joining a shard's fields"))?;
    let mask = BooleanArray::from(kept.to_vec());
    arrow_select::filter::filter_record_batch(&whole, &mask)
        .map_err(arrow("keeping the fields of the records a merge kept"))
}

impl SidecarRewrite for FieldsMerge {
    fn shard_rewritten(
        &self,
        part: &Dataset,
        from: u64,
        kept_rows: &[bool],
        new: &ShardFingerprint,
    ) -> Result<(), HookError> {
        let kept = FieldsMerge::kept(part, from, kept_rows).map_err(hook_error)?;
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
        match suffix {
            FIELDS_SUFFIX if kept.fields.num_columns() > 0 => Ok(Some(
                encode_shard(&kept.fields, &print).map_err(hook_error)?,
            )),
            STATS_SUFFIX => {
                let mut stats = kept.stats.clone();
                stats.fingerprint = Some(print);
                Ok(Some(stats.encode()))
            }
            _ => Ok(None),
        }
    }
}
