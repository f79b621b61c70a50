//! Fields beside the records (FORMAT.md, "Fields"): the reader of a committed
//! state, the statistics report, and the names and limits of the files (the
//! writer that rides along an extend is [`FieldsWriter`], in `fields_writer.rs`). The encodings are `bcd-fields`'; the files and
//! their commit are the store's.

use std::sync::Arc;

use arrow_array::{BooleanArray, RecordBatch};
use bcd::{Compression, Dataset, ShardFingerprint};
use bcd_fields::{
    align, decode_shard_columns, decode_shard_each, CommitFile, CountKey, DatasetSchema,
    FieldsError, Fingerprint, Scalar, ShardStats, BATCH_ROWS, FIELDS_SUFFIX, STATS_SUFFIX,
};
use serde_json::{Map, Value};

pub use crate::fields_writer::FieldsWriter;

/// Largest commit file read: the fields crate's limit, which decodes it.
pub(crate) const MAX_COMMIT_FILE: u64 = bcd_fields::MAX_COMMIT_BYTES as u64;
/// Largest statistics file read: the fields crate's limit, which decodes it.
pub(crate) const MAX_STATS_FILE: u64 = bcd_fields::MAX_STATS_BYTES as u64;
// The store reads commit files (for a merge's hook) without depending on the
// fields crate, so it declares the limit too: the two must agree.
const _: () = assert!(MAX_COMMIT_FILE == bcd::format::MAX_COMMIT_FILE_BYTES);

/// Why fields could not be written or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FieldsIoError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] bcd::Error),
    /// Fields were refused (a type conflict, a value of the wrong type) or a
    /// file of fields is corrupt; the message names the field or the file.
    #[error(transparent)]
    Fields(#[from] FieldsError),
    /// A key seen before (committed, or earlier in the same extend) with the
    /// duplicate policy [`crate::OnDuplicate::Error`]; nothing was committed.
    #[error("{origin}: duplicate key {key}: already in the dataset or earlier in this extend; nothing was committed")]
    Duplicate {
        /// The key.
        key: bcd::DisplayKey,
        /// Where the record came from.
        origin: String,
        /// Its position in the batch pushed (for callers that keep richer origins).
        position: usize,
    },
    /// A file just written (a shard's fields or statistics file, or the commit
    /// file with the schema and metadata) does not read back with the readers
    /// that open a dataset; nothing was committed.
    #[error("{}: written, but it does not read back; nothing was committed", file.display())]
    ReadBack {
        /// The file.
        file: std::path::PathBuf,
        /// What the reader said.
        #[source]
        source: Box<FieldsIoError>,
    },
}

/// The fingerprint as `bcd-fields` stores it.
pub fn fingerprint(f: &ShardFingerprint) -> Fingerprint {
    Fingerprint {
        records: f.records,
        data_len: f.data_len,
        index_xxh3: f.index_xxh3,
        edges_xxh3: f.edges_xxh3,
    }
}

/// The fingerprint of committed shard `shard`, as `bcd-fields` stores it.
fn committed_fingerprint(dataset: &Dataset, shard: u64) -> Result<Fingerprint, FieldsIoError> {
    Ok(fingerprint(&dataset.shard_fingerprint(shard)?))
}

/// The fields of a committed state: its schema and metadata (from the newest
/// commit file that matches the shards), and readers of each shard's fields and
/// statistics.
#[derive(Debug)]
pub struct DatasetFields {
    /// The dataset schema (empty for a dataset without fields).
    pub schema: DatasetSchema,
    /// The dataset metadata.
    pub metadata: Map<String, Value>,
    /// The statistics totals of the shards the commit file covers.
    totals: Option<ShardStats>,
    /// Of those, how many had a statistics file.
    shards_with_stats: u64,
    /// Shards the commit file covers (`0..covered`).
    covered: u64,
}

impl DatasetFields {
    /// Reads the commit file of `dataset`'s state: the newest `commit.M.json`
    /// with `M <= shards` whose recorded last shard is shard `M - 1` (older states
    /// are kept; one whose shard the reference rewrote after a crash is stale and
    /// passed over). None at all: no fields, no metadata.
    pub fn load(dataset: &Dataset) -> Result<DatasetFields, FieldsIoError> {
        for covered in dataset.commit_files()? {
            let path = dataset.path().join(format!("commit.{covered:06}.json"));
            let name = path.display().to_string();
            let Some(bytes) = dataset.read_commit_file(covered, MAX_COMMIT_FILE)? else {
                continue;
            };
            let commit = CommitFile::decode(&bytes, &name)?;
            let current = match covered {
                0 => None,
                n => Some(fingerprint(&dataset.shard_fingerprint(n - 1)?)),
            };
            if commit.last_shard != current {
                continue;
            }
            return Ok(DatasetFields {
                schema: commit.schema,
                metadata: commit.metadata,
                totals: Some(commit.totals),
                shards_with_stats: commit.shards_with_stats,
                covered,
            });
        }
        Ok(DatasetFields {
            schema: DatasetSchema::new(),
            metadata: Map::new(),
            totals: None,
            shards_with_stats: 0,
            covered: 0,
        })
    }

    /// Of the shards the commit file covers, how many had a statistics file.
    pub fn shards_with_stats(&self) -> u64 {
        self.shards_with_stats
    }

    /// Statistics of every committed shard: the commit file's totals, plus those
    /// of the shards after it (written by the reference), from their files.
    pub fn totals(&self, dataset: &Dataset) -> Result<ShardStats, FieldsIoError> {
        let mut totals = self.totals.clone().unwrap_or_default();
        for shard in self.covered..dataset.shards() {
            totals.merge(&self.shard_stats(dataset, shard)?)?;
        }
        Ok(totals)
    }

    /// Statistics of one shard: its statistics file when it matches the shard,
    /// else computed from the shard's records (sizes only).
    pub fn shard_stats(&self, dataset: &Dataset, shard: u64) -> Result<ShardStats, FieldsIoError> {
        match read_stats_file(dataset, shard, || committed_fingerprint(dataset, shard))? {
            Some(stats) => Ok(stats),
            None => stats_from_records(dataset, shard),
        }
    }

    /// The fields of shard `shard`'s records as the dataset schema's columns
    /// (`columns`: only those, in that order), all null where the shard has no
    /// fields file (written by the reference, or without fields).
    pub fn shard_batches(
        &self,
        dataset: &Dataset,
        shard: u64,
        columns: Option<&[String]>,
    ) -> Result<Vec<RecordBatch>, FieldsIoError> {
        let schema = self.projection(columns)?;
        let expected = || committed_fingerprint(dataset, shard);
        match read_fields_file(dataset, shard, expected, &schema, columns)? {
            Some(batches) => Ok(batches),
            None => Ok(vec![null_batch(
                &schema,
                dataset.shard_records(shard) as usize,
            )?]),
        }
    }

    /// The fields of shard `shard`'s records as the dataset schema's columns,
    /// as [`DatasetFields::shard_batches`] gives them, but handed to `visit`
    /// one batch at a time (batches of [`BATCH_ROWS`] nulls where the shard has
    /// no fields file), each let go of once visited, the mapped file's pages
    /// too: for a reader that goes through a shard once and holds a batch.
    pub(crate) fn each_shard_batch(
        &self,
        dataset: &Dataset,
        shard: u64,
        mut visit: impl FnMut(RecordBatch) -> Result<(), FieldsError>,
    ) -> Result<(), FieldsIoError> {
        if let Some(bytes) = dataset.map_sidecar(shard, FIELDS_SUFFIX)? {
            let name = dataset
                .sidecar_path(shard, FIELDS_SUFFIX)
                .display()
                .to_string();
            let expected = committed_fingerprint(dataset, shard)?;
            if each_aligned_batch(bytes, &expected, &name, &self.schema, &mut visit)? {
                return Ok(());
            }
        }
        let mut rows = dataset.shard_records(shard) as usize;
        while rows > 0 {
            let n = rows.min(BATCH_ROWS);
            visit(null_batch(&self.schema, n)?)?;
            rows -= n;
        }
        Ok(())
    }

    /// The schema of `columns` (all when `None`); an unknown name is an error.
    pub fn projection(&self, columns: Option<&[String]>) -> Result<DatasetSchema, FieldsIoError> {
        let Some(columns) = columns else {
            return Ok(self.schema.clone());
        };
        let mut fields = Vec::with_capacity(columns.len());
        for name in columns {
            match self.schema.field(name) {
                Some(field) => fields.push(field.clone()),
                None => {
                    return Err(FieldsError::Unsupported(format!(
                        "no field {name:?} in the dataset (its fields: {})",
                        self.field_names()
                    ))
                    .into())
                }
            }
        }
        Ok(DatasetSchema::from_fields(fields)?)
    }

    /// The dataset schema's column names, in order.
    fn field_names_in_order(&self) -> Vec<String> {
        (self.schema.fields().iter())
            .map(|f| f.name().clone())
            .collect()
    }

    fn field_names(&self) -> String {
        let names: Vec<&str> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    }
}

/// A shard's fields as its batches (as [`DatasetFields::shard_batches`] gives
/// them), with where each starts: a record's row is found in its batch, without
/// joining the batches (which would copy the shard's fields).
pub(crate) struct ShardRows {
    batches: Vec<RecordBatch>,
    /// The shard's row just past each batch.
    ends: Vec<usize>,
}

impl ShardRows {
    pub(crate) fn new(batches: Vec<RecordBatch>) -> ShardRows {
        let ends = batches
            .iter()
            .scan(0, |end, b| {
                *end += b.num_rows();
                Some(*end)
            })
            .collect();
        ShardRows { batches, ends }
    }

    /// The batches.
    pub(crate) fn batches(&self) -> &[RecordBatch] {
        &self.batches
    }

    /// Which batch holds row `row` of the shard, and the row in it. A row past
    /// the shard's gives the last batch's length (so Arrow's checks refuse it).
    pub(crate) fn locate(&self, row: usize) -> (usize, usize) {
        let batch = self.ends.partition_point(|&end| end <= row);
        let batch = batch.min(self.batches.len().saturating_sub(1));
        let start = match batch {
            0 => 0,
            n => self.ends[n - 1],
        };
        (batch, row - start)
    }

    /// The batch holding row `row` of the shard, and the row in it.
    pub(crate) fn row(&self, row: usize) -> (&RecordBatch, usize) {
        let (batch, at) = self.locate(row);
        (&self.batches[batch], at)
    }
}

/// Shard `shard`'s statistics file, when there is one that matches the shard
/// (its fingerprint): the one reader of statistics files, for opening a dataset
/// and for reading back what an extend wrote.
/// `expected` gives the shard's fingerprint (only asked for when there is a file).
pub(crate) fn read_stats_file(
    dataset: &Dataset,
    shard: u64,
    expected: impl FnOnce() -> Result<Fingerprint, FieldsIoError>,
) -> Result<Option<ShardStats>, FieldsIoError> {
    let Some(bytes) = dataset.map_sidecar(shard, STATS_SUFFIX)? else {
        return Ok(None);
    };
    let name = dataset
        .sidecar_path(shard, STATS_SUFFIX)
        .display()
        .to_string();
    if bytes.len() as u64 > MAX_STATS_FILE {
        return Err(FieldsError::Invalid {
            name,
            what: format!("{} bytes, more than a statistics file holds", bytes.len()),
        }
        .into());
    }
    let mut stats = ShardStats::decode(&bytes, &name)?;
    if stats.fingerprint != Some(expected()?) {
        return Ok(None);
    }
    stats.fingerprint = None;
    Ok(Some(stats))
}

/// Shard `shard`'s fields as the columns of `schema`, when it has a fields file
/// that matches the shard: the reader of fields files that opening a dataset
/// uses (reading back what an extend wrote, `read_back.rs`, decodes and aligns
/// the same way, a batch at a time).
/// `expected` gives the shard's fingerprint (only asked for when there is a file).
/// With `columns`, only those of the file's columns are decoded (the file is
/// checked whole all the same).
pub(crate) fn read_fields_file(
    dataset: &Dataset,
    shard: u64,
    expected: impl FnOnce() -> Result<Fingerprint, FieldsIoError>,
    schema: &DatasetSchema,
    columns: Option<&[String]>,
) -> Result<Option<Vec<RecordBatch>>, FieldsIoError> {
    let Some(bytes) = dataset.map_sidecar(shard, FIELDS_SUFFIX)? else {
        return Ok(None);
    };
    let name = dataset
        .sidecar_path(shard, FIELDS_SUFFIX)
        .display()
        .to_string();
    match decode_shard_columns(Arc::new(bytes), &expected()?, &name, columns)? {
        Some(batches) => Ok(Some(align(&batches, schema)?)),
        None => Ok(None),
    }
}

/// The rows of `batch` whose `kept` is set (`kept` holds one flag per row):
/// a view's records, a merge's kept records, a batch at a time.
pub(crate) fn filter(batch: &RecordBatch, kept: &[bool]) -> Result<RecordBatch, FieldsError> {
    let mask = BooleanArray::from(kept.to_vec());
    arrow_select::filter::filter_record_batch(batch, &mask).map_err(|source| FieldsError::Arrow {
        context: "keeping the fields of the chosen records".into(),
        source,
    })
}

/// Decodes a shard's fields file (`bytes`, named `name`) a batch at a time,
/// each aligned to `schema` (as [`read_fields_file`] reads it) and handed to
/// `visit`, the mapped file's pages let go of as it goes. Returns whether the
/// file is the shard's (its fingerprint is `expected`; if not, nothing was
/// visited).
pub(crate) fn each_aligned_batch(
    bytes: bcd::ShardData,
    expected: &Fingerprint,
    name: &str,
    schema: &DatasetSchema,
    mut visit: impl FnMut(RecordBatch) -> Result<(), FieldsError>,
) -> Result<bool, FieldsError> {
    let mapping = bytes.clone();
    let mut released = 0;
    decode_shard_each(Arc::new(bytes), expected, name, |batch, end| {
        for batch in align(&[batch], schema)? {
            visit(batch)?;
        }
        mapping.release(released, end.saturating_sub(released));
        released = end;
        Ok(())
    })
}

/// A batch of `rows` rows, every column of `schema` null.
fn null_batch(schema: &DatasetSchema, rows: usize) -> Result<RecordBatch, FieldsError> {
    let arrow_schema = schema.arrow_schema();
    let columns = arrow_schema
        .fields()
        .iter()
        .map(|f| arrow_array::new_null_array(f.data_type(), rows))
        .collect();
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(arrow_schema, columns, &options).map_err(|e| {
        FieldsError::Arrow {
            context: "building a batch of nulls".into(),
            source: e,
        }
    })
}

/// The size statistics of a shard, from its records: what a shard the
/// reference wrote has (its values' uncompressed sizes from their LZ4 size
/// prefixes).
fn stats_from_records(dataset: &Dataset, shard: u64) -> Result<ShardStats, FieldsIoError> {
    size_stats(dataset, shard, |_| true)
}

/// The size statistics of the records of `shard` whose row (position in the
/// shard) `keep` accepts.
pub(crate) fn size_stats(
    dataset: &Dataset,
    shard: u64,
    keep: impl Fn(usize) -> bool,
) -> Result<ShardStats, FieldsIoError> {
    let mut stats = ShardStats::new();
    let first = dataset.shard_first_record(shard) as usize;
    let end = first + dataset.shard_records(shard) as usize;
    for index in (first..end).filter(|&index| keep(index - first)) {
        let key_len = if dataset.keyed() {
            dataset.key_at(index)?.len()
        } else {
            0
        };
        let stored = dataset.stored_at(index)?;
        let raw_len = match dataset.compression() {
            Compression::None => stored.len() as u64,
            Compression::Lz4 => bcd::lz4_block::declared_len(stored).map_or(0, |n| n as u64),
        };
        stats.add_record(key_len as u64, stored.len() as u64, raw_len);
    }
    Ok(stats)
}

/// The statistics report every front end prints (`bcd stats --json`,
/// `Dataset.stats()`): the totals kept at write time (shards no commit file
/// covers, written by the reference, are summed from their records' sizes),
/// and with `per_shard` the same figures per shard under `"per_shard"`.
pub fn stats_report(dataset: &Dataset, per_shard: bool) -> Result<Value, FieldsIoError> {
    let fields = DatasetFields::load(dataset)?;
    let order = fields.field_names_in_order();
    let totals = fields.totals(dataset)?;
    let mut out = report(&totals, &order);
    out["shards"] = dataset.shards().into();
    out["path"] = dataset.path().display().to_string().into();
    if per_shard {
        let mut shards = Vec::new();
        for shard in 0..dataset.shards() {
            let mut one = report(&fields.shard_stats(dataset, shard)?, &order);
            one["shard"] = shard.into();
            shards.push(one);
        }
        out["per_shard"] = Value::Array(shards);
    }
    Ok(out)
}

/// The statistics report of the records `records` of `dataset` (a view's, in
/// increasing order), as [`stats_report`] gives a dataset's: computed from
/// those records' sizes and fields, shard by shard (each shard's fields
/// read once, only where the view has records).
pub fn records_stats_report(
    dataset: &Dataset,
    records: &bcd::ViewIndices,
) -> Result<Value, FieldsIoError> {
    let fields = DatasetFields::load(dataset)?;
    let order = fields.field_names_in_order();
    let mut totals = ShardStats::new();
    let mut next = records.iter().peekable();
    while let Some(&first) = next.peek() {
        let shard = dataset.value_location(first as usize)?.shard;
        let start = dataset.shard_first_record(shard);
        let mut kept = vec![false; dataset.shard_records(shard) as usize];
        while let Some(index) = next.next_if(|&i| i < start + kept.len() as u64) {
            kept[(index - start) as usize] = true;
        }
        let mut stats = size_stats(dataset, shard, |row| kept[row])?;
        // A batch of the shard's fields at a time: memory for one batch, not
        // for the shard's.
        let mut row = 0;
        fields.each_shard_batch(dataset, shard, |batch| {
            let rows = batch.num_rows();
            let kept = kept.get(row..row + rows).ok_or_else(|| {
                FieldsError::Unsupported(format!(
                    "shard {shard}'s fields hold more rows than its {} records",
                    dataset.shard_records(shard)
                ))
            })?;
            row += rows;
            let chosen = filter(&batch, kept)?;
            if chosen.num_columns() > 0 {
                stats.add_fields(&chosen)?;
            }
            Ok(())
        })?;
        totals.merge(&stats)?;
    }
    let mut out = report(&totals, &order);
    out["shards"] = dataset.shards().into();
    out["path"] = dataset.path().display().to_string().into();
    Ok(out)
}

/// The report of `stats` (see [`stats_report`]): sizes with percentiles, and
/// per field (in `order`, then any other) its type, nulls, min/max, distinct
/// values (exact while counted) and exact counts, largest first.
fn report(stats: &ShardStats, order: &[String]) -> Value {
    let scalar = |s: &Scalar| match s {
        Scalar::Int(i) => int_json(*i),
        Scalar::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
        Scalar::Bool(b) => Value::Bool(*b),
        Scalar::Utf8 { value, .. } => Value::String(value.clone()),
    };
    let key = |k: &CountKey| match k {
        CountKey::Bool(b) => Value::Bool(*b),
        CountKey::Int(i) => int_json(*i),
        CountKey::Utf8(s) => Value::String(s.clone()),
    };
    let mut names: Vec<&str> = order.iter().map(String::as_str).collect();
    names.extend(
        stats
            .fields()
            .map(|(n, _)| n)
            .filter(|n| !order.iter().any(|o| o == n)),
    );
    let mut fields = Map::new();
    for name in names {
        let Some(f) = stats.field(name) else {
            fields.insert(
                name.to_owned(),
                serde_json::json!({"nulls": stats.records, "count": 0}),
            );
            continue;
        };
        let truncated = [f.min(), f.max()].iter().any(|s| {
            matches!(
                s,
                Some(Scalar::Utf8 {
                    truncated: true,
                    ..
                })
            )
        });
        let counts = f.counts().map(|mut c| {
            c.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            c.iter()
                .map(|(k, n)| serde_json::json!([key(k), n]))
                .collect::<Vec<_>>()
        });
        fields.insert(
            name.to_owned(),
            serde_json::json!({
                "type": f.data_type(),
                "count": f.count(),
                "nulls": stats.nulls(name),
                "min": f.min().map(scalar),
                "max": f.max().map(scalar),
                "min_max_truncated": truncated,
                "distinct": f.distinct(),
                "distinct_exact": counts.is_some(),
                "counts": counts,
            }),
        );
    }
    serde_json::json!({
        "records": stats.records,
        "key_bytes": stats.key_bytes,
        "stored_bytes": stats.stored_bytes,
        "raw_bytes": stats.raw_bytes,
        "value_size": {
            "min": stats.min_value_size,
            "p50": stats.value_size_percentile(0.5),
            "p90": stats.value_size_percentile(0.9),
            "p99": stats.value_size_percentile(0.99),
            "max": stats.max_value_size,
            "mean": (stats.records > 0).then(|| stats.raw_bytes as f64 / stats.records as f64),
        },
        "fields": fields,
    })
}

fn int_json(v: i128) -> Value {
    match (i64::try_from(v), u64::try_from(v)) {
        (Ok(i), _) => i.into(),
        (_, Ok(u)) => u.into(),
        _ => Value::String(v.to_string()),
    }
}

/// The schema and metadata of a dataset in object storage: those of the newest
/// commit file `commit.M.json` (`M <= shards`) whose recorded last shard is
/// shard `M - 1` there, as [`DatasetFields::load`] reads a local one; none at
/// all: no fields, no metadata.
pub fn remote_fields(
    dataset: &bcd_remote::RemoteDataset,
) -> Result<(DatasetSchema, Map<String, Value>), RemoteFieldsError> {
    for covered in dataset.commit_files()? {
        let name = bcd_fields::commit_file_name(covered);
        let Some(bytes) = dataset.read_object(&name, MAX_COMMIT_FILE)? else {
            continue;
        };
        let shown = dataset.remote().object_uri(&name);
        let commit = CommitFile::decode(&bytes, &shown).map_err(FieldsIoError::from)?;
        let current = match covered {
            0 => None,
            n => Some(fingerprint(&dataset.shard_fingerprint(n - 1)?)),
        };
        if commit.last_shard == current {
            return Ok((commit.schema, commit.metadata));
        }
    }
    Ok((DatasetSchema::new(), Map::new()))
}

/// Reading the fields of a dataset in object storage failed.
#[derive(Debug, thiserror::Error)]
pub enum RemoteFieldsError {
    /// Listing or reading objects.
    #[error(transparent)]
    Remote(#[from] bcd_remote::RemoteError),
    /// A commit file that does not decode.
    #[error(transparent)]
    Fields(#[from] FieldsIoError),
}
