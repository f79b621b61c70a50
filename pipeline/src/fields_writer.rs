//! The writer of fields that rides along an extend (FORMAT.md, "Fields"): one
//! Arrow file and one statistics file per shard, then the commit file with the
//! dataset's schema, metadata and statistics totals. The encodings are
//! `bcd-fields'`; the files and their commit are the store's.
//!
//! What it holds is bounded whatever a shard's record count (issue 27): the
//! records' fields are built into Arrow batches of at most
//! [`BATCH_ROWS`] rows (about [`BATCH_BYTES`]) as they arrive, and its sizes
//! are folded into its statistics at every push. Each batch is written into
//! the open shard's fields file as it is built, its statistics added, while
//! every batch of the shard has the same columns of the same types, none a
//! dictionary, and no class index is renumbered (the fingerprint, known at the
//! shard's end, goes in the file's footer: [`ShardFileEncoder`]). Otherwise
//! the shard's batches wait in a [`ShardBatches`] (in memory up to a budget,
//! then in a scratch file; the batches written so far are read back into it)
//! and at the shard's end its file is written batch by batch, each converted
//! to the shard's columns and its statistics added as it goes.

use std::collections::VecDeque;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::RecordBatch;
use bcd::{Dataset, Extend, ShardFingerprint, WrittenShard};
use bcd_fields::{
    has_dictionary, merge_metadata, BatchBuilder, CommitFile, DatasetSchema, Fields, FieldsError,
    Fingerprint, Remap, ShardBatches, ShardFileEncoder, ShardFileWriter, ShardStats, SourceColumns,
    BATCH_BYTES, BATCH_ROWS, SHARD_MEMORY_BYTES,
};
use serde_json::{Map, Value};

use bcd_fields::{FIELDS_SUFFIX, STATS_SUFFIX};

use crate::fields::{fingerprint, DatasetFields, FieldsIoError};
use crate::read_back::{check_fields_file, check_stats_file, checked_commit_file};

/// A record pushed whose shard is not known yet: what the statistics need.
struct Pending {
    key_len: u64,
    raw_len: u64,
}

/// How large the batches of a shard's fields are, whether they are written
/// into the shard's file as they are built, and how much of a shard's fields
/// held until its end is kept in memory before the rest goes to a scratch
/// file. The defaults are `bcd-fields`' [`BATCH_ROWS`], [`BATCH_BYTES`] and
/// [`SHARD_MEMORY_BYTES`], written as built; tests make them small.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldsBuffering {
    /// Rows of a batch, at most.
    pub batch_rows: usize,
    /// About the bytes of a batch, at most.
    pub batch_bytes: usize,
    /// Bytes of the open shard's batches kept in memory, at most.
    pub shard_memory: usize,
    /// Whether a batch may be written into its shard's file as it is built
    /// (when the shard's batches so far allow it: see the module's
    /// documentation); `false` holds every shard's batches until its end.
    pub write_as_built: bool,
}

impl Default for FieldsBuffering {
    fn default() -> Self {
        FieldsBuffering {
            batch_rows: BATCH_ROWS,
            batch_bytes: BATCH_BYTES,
            shard_memory: SHARD_MEMORY_BYTES,
            write_as_built: true,
        }
    }
}

/// The shard records are being written to: its sizes so far, and its fields.
struct OpenShard {
    /// Statistics of the sizes of its records folded in so far (and of the
    /// fields of the batches written into `direct`).
    sizes: ShardStats,
    /// Its fields' batches built so far, when they are not in `direct`.
    batches: ShardBatches,
    /// Its fields file, written batch by batch as they are built.
    direct: Option<DirectFile>,
}

/// A shard's fields file written as its batches are built (the extend keeps
/// it open): every batch so far had the file's columns and types.
struct DirectFile {
    shard: u64,
    encoder: ShardFileEncoder,
}

impl OpenShard {
    fn new(scratch_dir: &std::path::Path, buffering: &FieldsBuffering) -> OpenShard {
        OpenShard {
            sizes: ShardStats::new(),
            batches: ShardBatches::with_budget(scratch_dir, buffering.shard_memory),
            direct: None,
        }
    }

    /// Rows of fields built so far.
    fn rows(&self) -> u64 {
        self.batches.rows() + self.direct.as_ref().map_or(0, |d| d.encoder.rows())
    }

    /// Whether some batch built so far had column `name`.
    fn has_column(&self, name: &str) -> bool {
        match &self.direct {
            Some(d) => d.encoder.schema().field_with_name(name).is_ok(),
            None => self.batches.has_column(name),
        }
    }
}

/// Writes the fields and statistics of the records pushed through an
/// [`Extend`], shard by shard, and the commit file. Push each record's fields
/// with [`FieldsWriter::push`] in the order the records were pushed to the
/// extend (records it left out as duplicates are not pushed), call
/// [`FieldsWriter::shards_finished`] after every push to the extend, and
/// [`FieldsWriter::finish`] before committing it.
pub struct FieldsWriter {
    builder: BatchBuilder,
    /// Records pushed since the last [`FieldsWriter::shards_finished`].
    pending: VecDeque<Pending>,
    open: OpenShard,
    buffering: FieldsBuffering,
    /// Where a shard's scratch file goes (the dataset's directory).
    scratch_dir: PathBuf,
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
        FieldsWriter::begin_with(dataset, FieldsBuffering::default())
    }

    /// [`FieldsWriter::begin`] with batches and memory bounded by `buffering`.
    pub fn begin_with(
        dataset: &Dataset,
        buffering: FieldsBuffering,
    ) -> Result<FieldsWriter, FieldsIoError> {
        let state = DatasetFields::load(dataset)?;
        let totals = state.totals(dataset)?;
        let scratch_dir = dataset.path().to_owned();
        Ok(FieldsWriter {
            builder: BatchBuilder::new(),
            pending: VecDeque::new(),
            open: OpenShard::new(&scratch_dir, &buffering),
            buffering,
            scratch_dir,
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
        // The origin is formatted only for an error.
        self.builder.push(fields, origin)?;
        self.pending.push_back(Pending {
            key_len: key_len as u64,
            raw_len: raw_len as u64,
        });
        self.pushed += 1;
        Ok(())
    }

    /// Adds the records whose fields are rows `rows` of `source` (a source's
    /// batch read in order), in order: `sizes` gives each one's key and
    /// (uncompressed) value sizes, `origin` names the record of a row (for
    /// errors). The same as a [`FieldsWriter::push`] of each, the source's
    /// columns extended by whole runs of rows rather than record by record.
    /// On an error the records before the refused one stay added.
    pub fn push_rows<O: std::fmt::Display>(
        &mut self,
        sizes: impl ExactSizeIterator<Item = (usize, usize)>,
        source: &Arc<SourceColumns>,
        rows: std::ops::Range<usize>,
        origin: impl Fn(usize) -> O,
    ) -> Result<(), FieldsIoError> {
        debug_assert_eq!(sizes.len(), rows.len());
        let before = self.builder.len();
        let pushed = self.builder.push_rows(source, rows, origin);
        // The records added before an error, or all of them.
        let added = self.builder.len() - before;
        for (key_len, raw_len) in sizes.take(added) {
            self.pending.push_back(Pending {
                key_len: key_len as u64,
                raw_len: raw_len as u64,
            });
        }
        self.pushed += added as u64;
        Ok(pushed?)
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

    /// Writes the sidecars of the shards `extend` finished since the last call;
    /// the records pushed after them, in the shard being written, are folded
    /// into its statistics and built into batches.
    pub fn shards_finished(&mut self, extend: &mut Extend<'_>) -> Result<(), FieldsIoError> {
        for shard in extend.take_finished_shards() {
            self.write_shard(extend, shard)?;
        }
        self.fold_open(extend)
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

    /// Folds the pending records (all in the open shard) into its statistics,
    /// and builds full batches of their fields.
    fn fold_open(&mut self, extend: &mut Extend<'_>) -> Result<(), FieldsIoError> {
        for record in self.pending.drain(..) {
            self.open
                .sizes
                .add_record(record.key_len, 0, record.raw_len);
        }
        let buffering = self.buffering;
        while self.builder.len() >= buffering.batch_rows
            || (self.builder.bytes() >= buffering.batch_bytes && !self.builder.is_empty())
        {
            let batch = self.builder.take(buffering.batch_rows)?;
            let shard = extend.open_shard();
            self.push_batch(extend, shard, batch)?;
        }
        Ok(())
    }

    /// Adds the open shard's next batch (of shard `shard`, when known): into
    /// its fields file when that is being written and the batch has its
    /// columns, else (the file's batches read back first) to its held batches.
    fn push_batch(
        &mut self,
        extend: &mut Extend<'_>,
        shard: Option<u64>,
        batch: arrow_array::RecordBatch,
    ) -> Result<(), FieldsIoError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let open = &mut self.open;
        match &mut open.direct {
            Some(direct) if direct.encoder.schema().fields() == batch.schema().fields() => {
                // The remap is the identity (a condition of writing directly).
                open.sizes.add_fields(&batch)?;
                let mut out = extend.open_sidecar_writer(direct.shard, FIELDS_SUFFIX)?;
                direct.encoder.write(&mut out, &batch)?;
                return Ok(());
            }
            Some(_) => self.stop_direct(extend)?,
            None => {
                let direct = self.buffering.write_as_built
                    && open.batches.rows() == 0
                    && self.remap.is_identity()
                    && batch.num_columns() > 0
                    && !batch
                        .schema()
                        .fields()
                        .iter()
                        .any(|f| has_dictionary(f.data_type()));
                if let (true, Some(shard)) = (direct, shard) {
                    extend.open_sidecar(shard, FIELDS_SUFFIX)?;
                    let mut out = extend.open_sidecar_writer(shard, FIELDS_SUFFIX)?;
                    let mut encoder =
                        ShardFileEncoder::start(&mut out, batch.schema().fields(), None)?;
                    open.sizes.add_fields(&batch)?;
                    encoder.write(&mut out, &batch)?;
                    open.direct = Some(DirectFile { shard, encoder });
                    return Ok(());
                }
            }
        }
        self.open.batches.push(batch)?;
        Ok(())
    }

    /// Stops writing the open shard's fields file as its batches come: the
    /// batches written are read back (from a mapping of the file, which is
    /// removed) into the held batches, and their statistics forgotten (they
    /// are added again when the shard's file is written).
    fn stop_direct(&mut self, extend: &mut Extend<'_>) -> Result<(), FieldsIoError> {
        let Some(direct) = self.open.direct.take() else {
            return Ok(());
        };
        let name = extend
            .dataset()
            .sidecar_path(direct.shard, FIELDS_SUFFIX)
            .display()
            .to_string();
        let written = extend.take_sidecar(direct.shard, FIELDS_SUFFIX)?;
        let batches = direct
            .encoder
            .read_written(std::sync::Arc::new(written), &name)?;
        self.open.sizes.clear_fields();
        for batch in batches {
            self.open.batches.push(batch)?;
        }
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
        let records = shard.fingerprint.records;
        let missing = records.saturating_sub(self.open.sizes.records) as usize;
        for record in self.pending.drain(..missing.min(self.pending.len())) {
            self.open
                .sizes
                .add_record(record.key_len, 0, record.raw_len);
        }
        while self.open.rows() < records && !self.builder.is_empty() {
            let rows = ((records - self.open.rows()) as usize).min(self.buffering.batch_rows);
            let batch = self.builder.take(rows)?;
            self.push_batch(extend, Some(shard.id), batch)?;
        }
        // The shard's columns: those its records gave, typed as one batch of
        // all of them would be.
        let columns = self.builder.shard_fields(|name| self.open.has_column(name));
        if let Some(direct) = &self.open.direct {
            if direct.shard != shard.id || direct.encoder.schema().fields() != &columns {
                // Typed otherwise at the shard's end (the file is written anew).
                self.stop_direct(extend)?;
            }
        }
        let fresh = OpenShard::new(&self.scratch_dir, &self.buffering);
        let OpenShard {
            sizes,
            batches,
            direct,
        } = std::mem::replace(&mut self.open, fresh);
        let mut stats = sizes;
        // Stored sizes are known per shard: its data file holds keys and values.
        stats.stored_bytes = shard.fingerprint.data_len - stats.key_bytes;
        let schema = self.schema.unified(&columns)?;
        let print = fingerprint(&shard.fingerprint);
        // Each file is read back as opening the dataset will read it before the
        // extend goes on (read_back.rs): what cannot be read is never committed.
        if let Some(direct) = direct {
            // Written as the batches came (their statistics added): the
            // footer, with the fingerprint, ends it.
            let mut out = extend.open_sidecar_writer(shard.id, FIELDS_SUFFIX)?;
            direct.encoder.finish(&mut out, &print)?;
            extend.finish_sidecar(shard.id, FIELDS_SUFFIX)?;
            check_fields_file(
                extend.dataset(),
                shard.id,
                &print,
                &schema,
                records as usize,
            )?;
        } else if !columns.is_empty() {
            let what = format!("the fields of new shard {}", shard.id);
            let mut file = extend.create_sidecar(shard.id, FIELDS_SUFFIX)?;
            let batches = batches.into_batches(&columns)?;
            let (remap, stats) = (&self.remap, &mut stats);
            write_fields_file(&mut file, &columns, batches, &print, remap, &what, stats)?;
            file.finish()?;
            let rows = records as usize;
            check_fields_file(extend.dataset(), shard.id, &print, &schema, rows)?;
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

/// Writes a shard's fields file (fingerprint `print`, columns `columns`) into
/// `out` batch by batch: each of `batches` (of those columns) with its class
/// indices renumbered by `remap` (`what` names the shard in its errors), its
/// statistics added to `stats`. Returns the rows written. Every writer of a
/// shard's fields file (an extend's [`FieldsWriter`], a merge's rewritten or
/// renumbered shards) writes it with this, and its statistics file with
/// [`encode_stats_file`].
pub(crate) fn write_fields_file(
    out: &mut dyn Write,
    columns: &arrow_schema::Fields,
    batches: impl Iterator<Item = Result<RecordBatch, FieldsError>>,
    print: &Fingerprint,
    remap: &Remap,
    what: &str,
    stats: &mut ShardStats,
) -> Result<u64, FieldsIoError> {
    let mut writer = ShardFileWriter::try_new(out, columns, print)?;
    for batch in batches {
        let batch = remap.apply(&batch?, what)?;
        stats.add_fields(&batch)?;
        writer.write(&batch)?;
    }
    let rows = writer.rows();
    writer.finish()?;
    Ok(rows)
}

/// A shard's statistics file: `stats` (without a fingerprint) with `print`.
pub(crate) fn encode_stats_file(stats: &ShardStats, print: &Fingerprint) -> Vec<u8> {
    let mut stats = stats.clone();
    stats.fingerprint = Some(*print);
    stats.encode()
}
