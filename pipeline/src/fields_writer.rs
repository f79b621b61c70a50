//! The writer of fields that rides along an extend (FORMAT.md, "Fields"): one
//! Arrow file and one statistics file per shard, then the commit file with the
//! dataset's schema, metadata and statistics totals. The encodings are
//! `bcd-fields'`; the files and their commit are the store's.

use std::collections::VecDeque;

use bcd::{Dataset, Extend, ShardFingerprint, WrittenShard};
use bcd_fields::{
    encode_shard, merge_metadata, BatchBuilder, CommitFile, DatasetSchema, Fields, FieldsError,
    Fingerprint, Remap, ShardStats,
};
use serde_json::{Map, Value};

use bcd_fields::{FIELDS_SUFFIX, STATS_SUFFIX};

use crate::fields::{fingerprint, DatasetFields, FieldsIoError};
use crate::read_back::{check_fields_file, check_stats_file, checked_commit_file};

/// One record waiting for its shard to end: what the statistics need.
struct Pending {
    key_len: u64,
    raw_len: u64,
}

/// Writes the fields and statistics of the records pushed through an
/// [`Extend`], shard by shard, and the commit file. Push each record's fields
/// with [`FieldsWriter::push`] in the order the records were pushed to the
/// extend (records it left out as duplicates are not pushed), call
/// [`FieldsWriter::shards_finished`] after every push to the extend, and
/// [`FieldsWriter::finish`] before committing it.
pub struct FieldsWriter {
    builder: BatchBuilder,
    pending: VecDeque<Pending>,
    shards_with_stats: u64,
    schema: DatasetSchema,
    /// The committed metadata, the run's (as given so far), and the two merged.
    committed: Map<String, Value>,
    run: Map<String, Value>,
    metadata: Map<String, Value>,
    /// How the run's class indices become the dataset's (from the merge).
    remap: Remap,
    /// Records pushed so far.
    pushed: u64,
    totals: ShardStats,
    shards: u64,
    /// The last shard this writer wrote, with its fingerprint.
    last_written: Option<(u64, ShardFingerprint)>,
}

impl FieldsWriter {
    /// A writer for an extend of `dataset` (its committed state): starts from the
    /// committed schema, metadata and totals, adding statistics of the shards no
    /// commit file covers (written by the reference).
    pub fn begin(dataset: &Dataset) -> Result<FieldsWriter, FieldsIoError> {
        let state = DatasetFields::load(dataset)?;
        let totals = state.totals(dataset)?;
        Ok(FieldsWriter {
            builder: BatchBuilder::new(),
            pending: VecDeque::new(),
            shards_with_stats: state.shards_with_stats(),
            schema: state.schema,
            committed: state.metadata.clone(),
            run: Map::new(),
            metadata: state.metadata,
            remap: Remap::default(),
            pushed: 0,
            totals,
            shards: dataset.shards(),
            last_written: None,
        })
    }

    /// Adds one record: the sizes of its key and (uncompressed) value, its fields,
    /// and where it came from (for errors). On an error (a field whose type
    /// conflicts with earlier records') nothing is added.
    pub fn push(
        &mut self,
        key_len: usize,
        raw_len: usize,
        fields: &Fields,
        origin: &dyn std::fmt::Display,
    ) -> Result<(), FieldsIoError> {
        if !fields.is_empty() {
            self.builder.push(fields, &origin.to_string())?;
        } else {
            self.builder.push(fields, "")?;
        }
        self.pending.push_back(Pending {
            key_len: key_len as u64,
            raw_len: raw_len as u64,
        });
        self.pushed += 1;
        Ok(())
    }

    /// Sets metadata on a field column (`bcd.member_ext`, or an Arrow extension
    /// type's name and parameters, which say what the storage type's values
    /// mean; FORMAT.md section 9), for the shards finished from now on and so the
    /// dataset schema.
    pub fn set_column_metadata(&mut self, column: &str, key: &str, value: &str) {
        self.builder.set_metadata(column, key, value);
    }

    /// Adds the run's metadata (`metadata`: keys given again replace the run's
    /// earlier ones) and merges it into the dataset's by the rules of
    /// [`merge_metadata`]: class vocabularies are the dataset's, extended by the
    /// run's new names, and the run's class indices are renumbered to them as
    /// each shard's fields are written. Give the vocabularies before the first
    /// record: once records are pushed, metadata that would renumber them
    /// differently is refused. On an error (a value conflicting with the
    /// dataset's) nothing changes.
    pub fn add_metadata(&mut self, metadata: Map<String, Value>) -> Result<(), FieldsIoError> {
        let mut run = self.run.clone();
        run.extend(metadata);
        let merged = merge_metadata(&self.committed, &run)?;
        if self.pushed > 0 && merged.remap != self.remap {
            let columns = |remap: &Remap| -> Vec<String> {
                remap.columns().map(|(c, _)| c.to_owned()).collect()
            };
            return Err(FieldsError::Unsupported(format!(
                "class names given after {} records would renumber them differently (columns renumbered before: {:?}, now: {:?}); give the class names before the records",
                self.pushed,
                columns(&self.remap),
                columns(&merged.remap)
            ))
            .into());
        }
        self.run = run;
        self.metadata = merged.metadata;
        self.remap = merged.remap;
        Ok(())
    }

    /// The dataset schema as of the records pushed so far (of finished shards).
    pub fn schema(&self) -> &DatasetSchema {
        &self.schema
    }

    /// Writes the sidecars of the shards `extend` finished since the last call.
    pub fn shards_finished(&mut self, extend: &mut Extend<'_>) -> Result<(), FieldsIoError> {
        for shard in extend.take_finished_shards() {
            self.write_shard(extend, shard)?;
        }
        Ok(())
    }

    /// Writes the last shard's sidecars and sets the commit file; then the
    /// extend can be committed.
    pub fn finish(mut self, extend: &mut Extend<'_>) -> Result<(), FieldsIoError> {
        for shard in extend.close_shard()? {
            self.write_shard(extend, shard)?;
        }
        let last_shard = match self.shards {
            0 => None,
            n => Some(fingerprint(&self.last_fingerprint(extend, n - 1)?)),
        };
        let commit = CommitFile {
            schema: self.schema,
            metadata: self.metadata,
            totals: self.totals,
            last_shard,
            shards_with_stats: self.shards_with_stats,
        };
        let dir = extend.dataset().path().to_owned();
        extend.set_commit_file(checked_commit_file(&commit, &dir, self.shards)?);
        Ok(())
    }

    fn last_fingerprint(
        &self,
        extend: &Extend<'_>,
        shard: u64,
    ) -> Result<ShardFingerprint, FieldsIoError> {
        // The shard this extend wrote last, or the committed last one.
        if let Some(f) = self.last_written {
            if f.0 == shard {
                return Ok(f.1);
            }
        }
        Ok(extend.dataset().shard_fingerprint(shard)?)
    }

    fn write_shard(
        &mut self,
        extend: &mut Extend<'_>,
        shard: WrittenShard,
    ) -> Result<(), FieldsIoError> {
        let records = shard.fingerprint.records as usize;
        let batch = self.builder.take(records)?;
        let batch = self
            .remap
            .apply(&batch, &format!("the fields of new shard {}", shard.id))?;
        let mut stats = ShardStats::new();
        let mut key_bytes = 0;
        for record in self.pending.drain(..records.min(self.pending.len())) {
            stats.add_record(record.key_len, 0, record.raw_len);
            key_bytes += record.key_len;
        }
        // Stored sizes are known per shard: its data file holds keys and values.
        stats.stored_bytes = shard.fingerprint.data_len - key_bytes;
        stats.add_fields(&batch)?;
        let schema = self.schema.unified(batch.schema().fields())?;
        let print = fingerprint(&shard.fingerprint);
        // Each file is read back as opening the dataset will read it before the
        // extend goes on (read_back.rs): what cannot be read is never committed.
        if let Some(fields) = encode_fields_file(&batch, &print)? {
            extend.write_sidecar(shard.id, FIELDS_SUFFIX, &fields)?;
            check_fields_file(extend.dataset(), shard.id, &print, &schema, records)?;
        }
        let encoded = encode_stats_file(&stats, &print);
        extend.write_sidecar(shard.id, STATS_SUFFIX, &encoded)?;
        check_stats_file(extend.dataset(), shard.id, &print, &encoded)?;
        self.totals.merge(&stats)?;
        self.shards_with_stats += 1;
        self.schema = schema;
        self.shards = shard.id + 1;
        self.last_written = Some((shard.id, shard.fingerprint));
        Ok(())
    }
}

/// A shard's fields file (fingerprint `print`), encoded; none when its records
/// have no field. Every writer of the files beside a shard (an extend's
/// [`FieldsWriter`], a merge's rewritten or renumbered shards) encodes them
/// with this and [`encode_stats_file`].
pub(crate) fn encode_fields_file(
    fields: &arrow_array::RecordBatch,
    print: &Fingerprint,
) -> Result<Option<Vec<u8>>, FieldsIoError> {
    match fields.num_columns() {
        0 => Ok(None),
        _ => Ok(Some(encode_shard(fields, print)?)),
    }
}

/// A shard's statistics file: `stats` (without a fingerprint) with `print`.
pub(crate) fn encode_stats_file(stats: &ShardStats, print: &Fingerprint) -> Vec<u8> {
    let mut stats = stats.clone();
    stats.fingerprint = Some(*print);
    stats.encode()
}
