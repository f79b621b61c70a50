//! `ingest`: source -> duplicate check -> parallel compression -> ordered write ->
//! one commit.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::Instant;

use bcd::{Compression, CreateOptions, Dataset, Dedup, DisplayKey, Lz4Mode};
use bcd_converters::{Origin, Record, Skipped, Source, SourceError};
use serde_json::{Map, Value};

use crate::batch_queue;
use crate::dedup_report::{ContentDuplicate, DedupReport, ReportError};
use crate::fields::FieldsIoError;
use crate::fields_extend::{FieldsExtend, FieldsExtendOptions, NewRecord};
use crate::{DEFAULT_INGEST_LEVEL, INTERRUPT_POLL};

/// What to do with a key seen before (committed, or earlier in the same run).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnDuplicate {
    /// Fail the whole run; nothing is committed (the reference's behaviour).
    #[default]
    Error,
    /// Keep the first, skip and count the others: re-running an ingest is idempotent.
    Skip,
}

/// Settings of one ingest run.
#[derive(Clone, Debug)]
pub struct IngestOptions {
    /// Create the dataset keyless (keys are dropped). Default: keyed when the
    /// source has keys.
    pub keyless: bool,
    /// Compression of a dataset this run creates (default lz4). For an existing
    /// dataset, a different value is an error.
    pub compression: Option<Compression>,
    /// `max_shard_size` of a dataset this run creates (default 1 GiB). For an
    /// existing dataset, a different value is an error.
    pub max_shard_size: Option<u64>,
    /// Duplicate policy (for keys).
    pub on_duplicate: OnDuplicate,
    /// Which records are duplicates: those with a key seen before (the
    /// default), or with [`Dedup::Content`] also those whose value repeats an
    /// earlier record's (committed or in this run), which are skipped, counted
    /// and reported whatever `on_duplicate` says.
    pub dedup: Dedup,
    /// With [`Dedup::Content`]: write every record left out for its value to
    /// this file, one JSON object per line ([`ContentDuplicate::to_json`]); the
    /// file takes its name when the run commits.
    pub dedup_report: Option<PathBuf>,
    /// Keep every record left out for its value in the summary
    /// ([`IngestSummary::content_duplicates`]), for front ends that print them.
    pub list_content_duplicates: bool,
    /// Memory the duplicate checks may hold before they spill to disk
    /// ([`Dataset::set_memory_limit`]); `None`: the default.
    pub memory_limit: Option<u64>,
    /// Compression threads (default: available cores).
    pub jobs: usize,
    /// How values are compressed. Default: adaptive high compression at
    /// [`DEFAULT_INGEST_LEVEL`].
    pub lz4_mode: Lz4Mode,
    /// Set from a signal handler to stop the run; nothing is committed. The run
    /// sees it within [`INTERRUPT_POLL`] (plus the time to remove what it wrote),
    /// also while the source is blocked in a read.
    pub interrupt: Option<Arc<AtomicBool>>,
}

impl Default for IngestOptions {
    fn default() -> Self {
        IngestOptions {
            keyless: false,
            compression: None,
            max_shard_size: None,
            on_duplicate: OnDuplicate::Error,
            dedup: Dedup::Keys,
            dedup_report: None,
            list_content_duplicates: false,
            memory_limit: None,
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
            lz4_mode: Lz4Mode::Adaptive(DEFAULT_INGEST_LEVEL),
            interrupt: None,
        }
    }
}

/// Progress, reported after every batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Records written so far.
    pub records: u64,
    /// Duplicate keys skipped so far.
    pub skipped: u64,
    /// Records skipped so far because their value repeats an earlier one's.
    pub skipped_values: u64,
    /// Value bytes read so far.
    pub bytes_in: u64,
    /// Bytes written so far (keys plus stored values).
    pub bytes_stored: u64,
}

/// What a finished run did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IngestSummary {
    /// Records written.
    pub records: u64,
    /// Duplicate keys skipped (with [`OnDuplicate::Skip`]).
    pub skipped: u64,
    /// Records skipped because their value repeats an earlier record's
    /// ([`Dedup::Content`]).
    pub skipped_values: u64,
    /// Those records, when [`IngestOptions::list_content_duplicates`] asks.
    pub content_duplicates: Vec<ContentDuplicate>,
    /// Source items passed over, by kind (symlinks, devices, ...).
    pub skipped_members: BTreeMap<&'static str, u64>,
    /// Value bytes read from the source.
    pub bytes_in: u64,
    /// Bytes added to the dataset (keys plus stored values).
    pub bytes_stored: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Whether this run created the dataset.
    pub created: bool,
    /// Shards added.
    pub shards: u64,
}

/// Why an ingest failed. Nothing was committed, except with
/// [`bcd::Error::CommittedNotDurable`] (in [`IngestError::Store`]): the records
/// are visible, but the commit may not survive a power loss.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IngestError {
    /// The source could not be read.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] bcd::Error),
    /// Object storage refused or failed (pulling the destination, or pushing the
    /// result: the remote is unchanged).
    #[error(transparent)]
    Remote(bcd_remote::RemoteError),
    /// A key seen before, with `--on-duplicate error`.
    #[error("{origin}: duplicate key {key}: already in the dataset or earlier in this run; nothing was committed (use `on_duplicate` skip to keep the first)")]
    Duplicate {
        /// The key.
        key: DisplayKey,
        /// Where the second occurrence came from.
        origin: Origin,
    },
    /// The `keyless` option with an existing keyed dataset.
    #[error("{} is a keyed dataset: `keyless` applies only when creating one", path.display())]
    KeylessForKeyedDataset {
        /// The dataset.
        path: PathBuf,
    },
    /// A source without keys for an existing keyed dataset.
    #[error("{} is a keyed dataset but the source has no keys; pass a key (e.g. `key_column`) or ingest into a keyless dataset", path.display())]
    NoKeysForKeyedDataset {
        /// The dataset.
        path: PathBuf,
    },
    /// A keyed ingest into an existing keyless dataset.
    #[error("{} is a keyless dataset: pass `keyless` to store the values without their keys", path.display())]
    KeysForKeylessDataset {
        /// The dataset.
        path: PathBuf,
    },
    /// A `compression` other than the existing dataset's.
    #[error("{} uses compression {dataset}; `compression` applies only when creating a dataset", path.display())]
    CompressionForExistingDataset {
        /// The dataset.
        path: PathBuf,
        /// The dataset's compression, as its manifest names it.
        dataset: &'static str,
    },
    /// A `max_shard_size` other than the existing dataset's.
    #[error("{} has max_shard_size {dataset}; `max_shard_size` applies only when creating a dataset", path.display())]
    MaxShardSizeForExistingDataset {
        /// The dataset.
        path: PathBuf,
        /// The dataset's max_shard_size.
        dataset: u64,
    },
    /// Fields that cannot be stored (a type conflicting with the dataset's or
    /// with earlier records'), or a corrupt file of fields; nothing was committed.
    #[error(transparent)]
    Fields(FieldsIoError),
    /// The dedup report could not be written (before the commit: nothing was
    /// committed; after it, the message says so).
    #[error(transparent)]
    Report(#[from] ReportError),
    /// A bug: a thread of the pipeline panicked (the dataset is still unchanged).
    #[error("internal error (this is a bug, please report it): {0}; nothing was committed")]
    Internal(&'static str),
    /// Stopped by a signal.
    #[error("interrupted; nothing was committed")]
    Interrupted,
}

impl From<FieldsIoError> for IngestError {
    /// The store's errors stay the store's (a commit that is not durable is
    /// told apart by its variant).
    fn from(error: FieldsIoError) -> IngestError {
        match error {
            FieldsIoError::Store(error) => IngestError::Store(error),
            other => IngestError::Fields(other),
        }
    }
}

type Batch = Vec<Record>;

impl IngestSummary {
    /// Bytes in per byte stored (1 when nothing was stored).
    pub fn compression_ratio(&self) -> f64 {
        if self.bytes_stored > 0 {
            self.bytes_in as f64 / self.bytes_stored as f64
        } else {
            1.0
        }
    }

    /// Megabytes (10^6 bytes) in per second.
    pub fn mb_per_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes_in as f64 / 1e6 / self.seconds
        } else {
            0.0
        }
    }

    /// The summary as every front end reports it (`bcd ingest --json`, the dict
    /// `bcd.ingest` returns): one object, `skipped_members` by kind.
    pub fn to_json(&self, dataset: &Path) -> serde_json::Value {
        serde_json::json!({
            "dataset": dataset.display().to_string(),
            "created": self.created,
            "records": self.records,
            "skipped": self.skipped,
            "skipped_values": self.skipped_values,
            "content_duplicates": self.content_duplicates.iter().map(ContentDuplicate::to_json).collect::<Vec<_>>(),
            "skipped_members": self.skipped_members,
            "bytes_in": self.bytes_in,
            "bytes_stored": self.bytes_stored,
            "compression_ratio": self.compression_ratio(),
            "shards": self.shards,
            "seconds": self.seconds,
            "mb_per_s": self.mb_per_s(),
        })
    }
}

/// Reads `source` into the dataset at `dir`, creating it when missing or empty, in
/// one all-or-nothing commit. `progress` is called after every batch.
///
/// The source is read on a thread of its own, which is not waited for when the run
/// ends early (an interrupt, a duplicate, a write error): a source blocked in a
/// read (a pipe nobody writes to) cannot hold the run up. That thread stops at its
/// next record, or stays blocked until its read returns or the process exits.
pub fn ingest(
    source: Box<dyn Source>,
    dir: &Path,
    options: &IngestOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<IngestSummary, IngestError> {
    let started = Instant::now();
    if interrupted(options) {
        return Err(IngestError::Interrupted);
    }
    let (mut dataset, created) = open_or_create(dir, source.keyed(), options)?;
    let result = run(source, &mut dataset, options, progress);
    let mut summary = match result {
        Ok(summary) => summary,
        Err(error) => {
            if let Some(created) = created {
                // Best effort: the run's error is what the caller needs to see, and
                // an empty dataset left behind (say, on a read-only disk) holds no
                // records.
                let _ = dataset.remove_empty(created.made_directory);
            }
            return Err(error);
        }
    };
    summary.created = created.is_some();
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

/// What `open_or_create` made, so a failed run can remove it.
struct Created {
    made_directory: bool,
}

fn is_empty_dir(dir: &Path) -> Result<Option<bool>, IngestError> {
    match fs::read_dir(dir) {
        Ok(mut entries) => Ok(Some(entries.next().is_none())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(SourceError::Io {
            path: dir.to_owned(),
            source,
        }
        .into()),
    }
}

fn open_or_create(
    dir: &Path,
    source_keyed: bool,
    options: &IngestOptions,
) -> Result<(Dataset, Option<Created>), IngestError> {
    let keyed = source_keyed && !options.keyless;
    let state = is_empty_dir(dir)?;
    // No manifest: a new dataset, in a directory that is empty or holds what a
    // run killed while creating one left (`Dataset::create` refuses anything else).
    let no_manifest =
        state == Some(false) && fs::symlink_metadata(dir.join(bcd::format::MANIFEST_NAME)).is_err();
    if state != Some(false) || no_manifest {
        let create = CreateOptions {
            keyed,
            compression: options.compression.unwrap_or(Compression::Lz4),
            max_shard_size: options
                .max_shard_size
                .unwrap_or(bcd::format::DEFAULT_MAX_SHARD_SIZE),
        };
        let dataset = Dataset::create(dir, create)?;
        return Ok((
            dataset,
            Some(Created {
                made_directory: state.is_none(),
            }),
        ));
    }
    let dataset = Dataset::open(dir)?;
    let path = dir.to_path_buf();
    if dataset.keyed() && options.keyless {
        return Err(IngestError::KeylessForKeyedDataset { path });
    }
    if dataset.keyed() && !source_keyed {
        return Err(IngestError::NoKeysForKeyedDataset { path });
    }
    if !dataset.keyed() && keyed {
        return Err(IngestError::KeysForKeylessDataset { path });
    }
    if let Some(compression) = options.compression {
        if compression != dataset.compression() {
            return Err(IngestError::CompressionForExistingDataset {
                path,
                dataset: dataset.compression().as_manifest_str().unwrap_or("none"),
            });
        }
    }
    if let Some(size) = options.max_shard_size {
        if size != dataset.manifest().max_shard_size {
            return Err(IngestError::MaxShardSizeForExistingDataset {
                path,
                dataset: dataset.manifest().max_shard_size,
            });
        }
    }
    Ok((dataset, None))
}

fn interrupted(options: &IngestOptions) -> bool {
    options
        .interrupt
        .as_ref()
        .is_some_and(|flag| flag.load(Ordering::Relaxed))
}

/// Batches the queue between the reader and the writer holds at most, and at
/// most one full batch's bytes of them ([`batch_queue`], counted by
/// [`queued_bytes`]): many batches of small records, one of large ones. More
/// than 8 gained nothing measurable on 46-byte records.
const QUEUED_BATCHES: usize = 16;

/// What a batch holds, as the queue counts it: `bytes` of keys and values,
/// each record's own size (a short record's struct is larger than its bytes)
/// and its fields' memory (a caption column can be most of a record).
fn queued_bytes(batch: &Batch, bytes: usize) -> usize {
    batch.iter().fold(bytes, |sum, record| {
        sum.saturating_add(std::mem::size_of::<Record>() + record.fields.memory())
    })
}

/// Reads `source` in batches and sends them, until the source ends (then the
/// last, possibly empty, batch), fails, is interrupted, or the consumer is gone.
/// Returns what the source passed over.
///
/// The batches the writer is done with come back through `done` and are
/// dropped here, where their records were made. A record's shared parts (its
/// file's path, its batch's field columns) are reference counts that this
/// thread counts up; dropped on the writer's thread, the same cache lines were
/// counted down on the other core at once, and most of the CPU of making a
/// Parquet record went to those two atomic increments (perf annotate). Dropped
/// here, the ingest of 4 million short Parquet records took 12% less CPU with
/// fields and without (BENCHMARKS.md, issue 27, session 41).
fn read_batches(
    mut source: Box<dyn Source>,
    sender: batch_queue::Sender<Result<Batch, IngestError>>,
    done: std::sync::mpsc::Receiver<Batch>,
    interrupt: Option<Arc<AtomicBool>>,
    max_records: usize,
    max_bytes: usize,
) -> (Skipped, Map<String, Value>) {
    let mut batch = Batch::new();
    let mut bytes = 0usize;
    while let Some(record) = source.next() {
        if interrupt
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Relaxed))
        {
            let _ = sender.send(Err(IngestError::Interrupted), 0);
            return (source.skipped().clone(), Map::new());
        }
        match record {
            Ok(record) => {
                bytes += record.value.len() + record.key.len();
                batch.push(record);
                if batch.len() >= max_records || bytes >= max_bytes {
                    let queued = queued_bytes(&batch, bytes);
                    bytes = 0;
                    if sender.send(Ok(std::mem::take(&mut batch)), queued).is_err() {
                        return (source.skipped().clone(), Map::new());
                    }
                    // Those written while this one was made.
                    for written in done.try_iter() {
                        drop(written);
                    }
                }
            }
            Err(error) => {
                let _ = sender.send(Err(error.into()), 0);
                return (source.skipped().clone(), Map::new());
            }
        }
    }
    let queued = queued_bytes(&batch, bytes);
    let _ = sender.send(Ok(batch), queued);
    // Metadata can depend on every record read (the derived fields of samples).
    (source.skipped().clone(), source.metadata())
}

fn run(
    source: Box<dyn Source>,
    dataset: &mut Dataset,
    options: &IngestOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<IngestSummary, IngestError> {
    let jobs = options.jobs.max(1);
    dataset.set_threads(jobs);
    dataset.set_lz4_mode(options.lz4_mode);
    let (max_records, max_bytes) = bcd::batch_limits(jobs);
    let mut report = DedupReport::new(
        options.dedup_report.as_deref(),
        options.list_content_duplicates,
    )?;

    // Records go in whole (value, key, fields, statistics) through the one
    // extend with fields, which applies the duplicate policy.
    let checks = FieldsExtendOptions {
        store: bcd::ExtendOptions {
            dedup: options.dedup,
            memory_limit: options.memory_limit,
            ..bcd::ExtendOptions::default()
        },
        ..FieldsExtendOptions::default()
    };
    let mut extend = FieldsExtend::begin_with(dataset, options.on_duplicate, checks)?;
    // The class names are known when the source is opened: the records' indices
    // are renumbered to the dataset's names as they are written.
    extend.add_metadata(source.metadata())?;
    // So is the part of a column's type its Arrow field metadata carries.
    for (column, entries) in source.column_metadata() {
        for (key, value) in entries {
            extend.set_column_metadata(&column, &key, &value);
        }
    }
    let mut state = Progress::default();
    // Records read before the current batch: a keyless duplicate is named by
    // its position among them.
    let mut read_before = 0u64;
    let (sender, receiver) =
        batch_queue::bounded::<Result<Batch, IngestError>>(QUEUED_BATCHES, max_bytes);
    // The batches written go back to the reader to be dropped (`read_batches`):
    // at most those the queue held, since the reader takes them back after each
    // batch it sends.
    let (done_sender, done) = std::sync::mpsc::channel::<Batch>();
    let interrupt = options.interrupt.clone();
    // Not a scoped thread: an early return must not wait for a read that may never
    // return. Returning drops the receiver, so the reader's next send fails and it
    // stops.
    let reader = std::thread::Builder::new()
        .name("ingest-reader".into())
        .spawn(move || read_batches(source, sender, done, interrupt, max_records, max_bytes))
        .map_err(|_| IngestError::Internal("the reader thread could not be started"))?;

    loop {
        if interrupted(options) {
            return Err(IngestError::Interrupted);
        }
        let batch = match receiver.recv_timeout(INTERRUPT_POLL) {
            Ok(batch) => batch?,
            Err(RecvTimeoutError::Timeout) => continue,
            // The reader has sent its last batch, or panicked (found by the join).
            Err(RecvTimeoutError::Disconnected) => break,
        };
        if interrupted(options) {
            return Err(IngestError::Interrupted);
        }
        state.bytes_in += batch.iter().map(|r| r.value.len() as u64).sum::<u64>();
        // Keys must be new to the dataset, this run and this batch; the extend
        // hashes each once and leaves duplicates out (or refuses them).
        let records: Vec<NewRecord<'_>> = batch
            .iter()
            .map(|r| NewRecord {
                key: &r.key,
                value: &r.value,
                fields: Cow::Borrowed(&r.fields),
                origin: &r.origin,
            })
            .collect();
        let skipped = match extend.push_batch(&records) {
            Ok(skipped) => skipped,
            // The extend is dropped uncommitted: what it wrote is removed.
            Err(FieldsIoError::Duplicate { key, position, .. }) => {
                return Err(IngestError::Duplicate {
                    key,
                    origin: batch[position].origin.clone(),
                })
            }
            Err(error) => return Err(error.into()),
        };
        let keyed = extend.dataset().keyed();
        for duplicate in &skipped.values {
            let record = &batch[duplicate.position];
            report.add(ContentDuplicate {
                key: keyed.then(|| record.key.clone()),
                index: read_before + duplicate.position as u64,
                origin: record.origin.to_string(),
                of: duplicate.of,
                of_key: keyed.then(|| duplicate.of_key.clone()),
            })?;
        }
        read_before += batch.len() as u64;
        state.skipped += skipped.keys.len() as u64;
        state.skipped_values += skipped.values.len() as u64;
        state.records += (records.len() - skipped.keys.len() - skipped.values.len()) as u64;
        state.bytes_stored = extend.bytes_stored();
        progress(&state);
        drop(records);
        // Dropped here instead once the reader has returned.
        let _ = done_sender.send(batch);
    }
    // The channel is closed: the reader has returned (or panicked).
    let (skipped_members, metadata) = reader
        .join()
        .map_err(|_| IngestError::Internal("the reader thread panicked"))?;
    extend.add_metadata(metadata)?;
    // A signal before the commit still wins; once the commit starts it completes.
    if interrupted(options) {
        return Err(IngestError::Interrupted);
    }

    let committed = extend.commit()?;
    let content_duplicates = report.finish().map_err(|e| ReportError {
        what: format!(
            "the ingest was committed ({} records), but {}",
            committed.records, e.what
        ),
        ..e
    })?;
    Ok(IngestSummary {
        records: committed.records,
        skipped: state.skipped,
        skipped_values: state.skipped_values,
        content_duplicates,
        skipped_members: skipped_members.0,
        bytes_in: state.bytes_in,
        bytes_stored: committed.bytes_stored,
        seconds: 0.0,
        created: false,
        shards: committed.shards,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bcd_fields::{FieldValue, Fields};

    fn record(value: &[u8], caption: Option<usize>) -> Record {
        let mut fields = Fields::new();
        if let Some(len) = caption {
            fields.push("caption", FieldValue::String("c".repeat(len)));
        }
        Record {
            key: b"k".to_vec(),
            value: value.to_vec(),
            origin: Origin::File(PathBuf::from("f")),
            fields,
        }
    }

    /// A queue of 16 batches of short records with long captions must not
    /// hold 16 batches of captions: the queue counts the fields.
    #[test]
    fn a_queued_batch_counts_its_records_and_their_fields() {
        let overhead = std::mem::size_of::<Record>();
        let plain: Batch = (0..512).map(|_| record(b"v", None)).collect();
        assert_eq!(queued_bytes(&plain, 1024), 1024 + 512 * overhead);
        let captioned: Batch = (0..512).map(|_| record(b"v", Some(100_000))).collect();
        assert_eq!(
            queued_bytes(&captioned, 1024),
            1024 + 512 * (overhead + 100_000)
        );
    }
}
