//! The one extend of a dataset that carries records whole: each record's value
//! (or stored value), key, fields and statistics, the duplicate policy applied
//! here and nowhere else, the run's metadata merged into the dataset's by the
//! rules of [`bcd_fields::merge_metadata`], every file read back before the
//! commit (`read_back.rs`), and one commit. `bcd ingest`, `export --into`
//! ([`crate::copy_into`]), Python's `Dataset.extend` and `Dataset.extend_arrow`
//! all add records through it. (A merge moves whole shards instead of records;
//! it shares the fields files' encoding, their read-back and the commit file's
//! rules, `merge_fields.rs`.)

use std::borrow::Cow;
use std::fmt::Display;
use std::sync::Arc;

#[cfg(doc)]
use bcd::Dedup;
use bcd::{Compression, Dataset, DisplayKey, Extend, ExtendOptions, LeftOut, Skipped};
use bcd_fields::{DatasetSchema, Fields};
use serde_json::{Map, Value};

use crate::fields::{FieldsIoError, FieldsWriter};
use crate::fields_writer::FieldsBuffering;
use crate::OnDuplicate;

/// One record to add: its key (ignored by a keyless dataset), its value as
/// given (compressed by the extend when the dataset compresses), its fields,
/// and where it came from (named in errors).
pub struct NewRecord<'a> {
    /// The key; empty for a keyless source.
    pub key: &'a [u8],
    /// The value, uncompressed.
    pub value: &'a [u8],
    /// Its fields (empty for none).
    pub fields: Cow<'a, Fields>,
    /// Where it came from: `tar a.tar member x.jpg`, `entry 7`, `Arrow data: row 3`.
    pub origin: &'a (dyn Display + Sync),
}

/// A record number for [`NewRecord::origin`]: shown as `{what} {number}`.
#[derive(Clone, Copy, Debug)]
pub struct Numbered {
    /// What is numbered (`entry`, `Arrow data: row`).
    pub what: &'static str,
    /// Its number, from 0.
    pub number: u64,
}

impl Display for Numbered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.what, self.number)
    }
}

/// What a committed [`FieldsExtend`] added.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extended {
    /// Records added.
    pub records: u64,
    /// Records left out as duplicate keys ([`OnDuplicate::Skip`]).
    pub skipped: u64,
    /// Records left out because their value repeats an earlier record's
    /// ([`Dedup::Content`]).
    pub skipped_values: u64,
    /// Shards added.
    pub shards: u64,
    /// Bytes added to shard data files (keys plus stored values).
    pub bytes_stored: u64,
}

/// How a [`FieldsExtend`] checks and writes records. Default: the store's
/// defaults ([`ExtendOptions::default`]) and the fields' batches of
/// [`FieldsBuffering::default`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FieldsExtendOptions {
    /// The store's checks: which records are duplicates, and their memory.
    pub store: ExtendOptions,
    /// How large the fields' batches are and how much of a shard's fields is
    /// kept in memory.
    pub buffering: FieldsBuffering,
}

/// An extend with fields in progress. Dropping it uncommitted (after any
/// error) removes what it wrote and leaves the dataset as it was.
pub struct FieldsExtend<'d> {
    extend: Extend<'d>,
    writer: FieldsWriter,
    on_duplicate: OnDuplicate,
    keyed: bool,
    added: u64,
    skipped: u64,
    skipped_values: u64,
}

impl<'d> FieldsExtend<'d> {
    /// Begins an extend of `dataset` (taking its writer lock) that starts from
    /// the committed schema, metadata and statistics, with the duplicate policy
    /// `on_duplicate` (keyed datasets only).
    pub fn begin(
        dataset: &'d mut Dataset,
        on_duplicate: OnDuplicate,
    ) -> Result<FieldsExtend<'d>, FieldsIoError> {
        FieldsExtend::begin_with(dataset, on_duplicate, FieldsExtendOptions::default())
    }

    /// [`FieldsExtend::begin`] with `options`: the store's checks (which
    /// records are duplicates, [`Dedup::Content`] also skipping and reporting
    /// repeated values whatever `on_duplicate` says of keys, and the memory of
    /// the checks) and the fields' batches and the memory they take (see
    /// [`FieldsWriter::begin_with`]).
    pub fn begin_with(
        dataset: &'d mut Dataset,
        on_duplicate: OnDuplicate,
        options: FieldsExtendOptions,
    ) -> Result<FieldsExtend<'d>, FieldsIoError> {
        let keyed = dataset.keyed();
        let extend = dataset.begin_extend_with(options.store)?;
        let writer = FieldsWriter::begin_with(extend.dataset(), options.buffering)?;
        Ok(FieldsExtend {
            extend,
            writer,
            on_duplicate,
            keyed,
            added: 0,
            skipped: 0,
            skipped_values: 0,
        })
    }

    /// The dataset being extended (its committed state).
    pub fn dataset(&self) -> &Dataset {
        self.extend.dataset()
    }

    /// Fails in a process forked from the one that began the extend (see
    /// [`Extend::check_process`]).
    pub fn check_process(&self) -> Result<(), FieldsIoError> {
        Ok(self.extend.check_process()?)
    }

    /// Adds the run's metadata, merged into the dataset's (see
    /// [`FieldsWriter::add_metadata`]): give class names before the records.
    pub fn add_metadata(&mut self, metadata: Map<String, Value>) -> Result<(), FieldsIoError> {
        self.writer.add_metadata(metadata)
    }

    /// Sets metadata on a field column (see [`FieldsWriter::set_column_metadata`]).
    pub fn set_column_metadata(&mut self, column: &str, key: &str, value: &str) {
        self.writer.set_column_metadata(column, key, value);
    }

    /// The dataset schema as of the shards finished so far.
    pub fn schema(&self) -> &DatasetSchema {
        self.writer.schema()
    }

    /// Records added so far.
    pub fn records(&self) -> u64 {
        self.added
    }

    /// Duplicate keys left out so far.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Records left out so far because their value repeats an earlier one's.
    pub fn skipped_values(&self) -> u64 {
        self.skipped_values
    }

    /// Bytes written so far (keys plus stored values).
    pub fn bytes_stored(&self) -> u64 {
        self.extend.bytes_stored()
    }

    /// Adds `records` in order, their values compressed on all cores. A key
    /// seen before (committed, earlier in this extend, or earlier in `records`)
    /// is left out with [`OnDuplicate::Skip`] (the first wins) and fails the
    /// extend with [`FieldsIoError::Duplicate`] with [`OnDuplicate::Error`];
    /// with [`Dedup::Content`] a value seen before is left out. Returns what was
    /// left out. After an error the extend must be dropped.
    pub fn push_batch(&mut self, records: &[NewRecord<'_>]) -> Result<Skipped, FieldsIoError> {
        let pairs: Vec<(&[u8], &[u8])> = records
            .iter()
            .map(|r| (if self.keyed { r.key } else { &[][..] }, r.value))
            .collect();
        let skipped = self.extend.push_batch_deduplicated(&pairs)?;
        if let Some(&first) = skipped.keys.first() {
            self.refuse_duplicate(&records[first], first)?;
        }
        let mut left_out: Vec<usize> = skipped.keys.clone();
        left_out.extend(skipped.values.iter().map(|v| v.position));
        left_out.sort_unstable();
        // The records kept, between those left out.
        let mut from = 0;
        for end in left_out.into_iter().chain([records.len()]) {
            if end > from {
                self.push_fields(&records[from..end])?;
            }
            from = end + 1;
        }
        self.writer.shards_finished(&mut self.extend)?;
        self.skipped += skipped.keys.len() as u64;
        self.skipped_values += skipped.values.len() as u64;
        self.added += (records.len() - skipped.keys.len() - skipped.values.len()) as u64;
        Ok(skipped)
    }

    /// Pushes the fields of `records` (all kept) to the writer: a run of
    /// records whose fields are consecutive rows of one source's batch at
    /// once, the others one by one.
    fn push_fields(&mut self, records: &[NewRecord<'_>]) -> Result<(), FieldsIoError> {
        let keyed = self.keyed;
        let sizes = |r: &NewRecord<'_>| (if keyed { r.key.len() } else { 0 }, r.value.len());
        let mut at = 0;
        while at < records.len() {
            let record = &records[at];
            // How many records from `at` are rows `row..` of one batch.
            let run = record.fields.source_row().map(|(source, row)| {
                let n = records[at + 1..]
                    .iter()
                    .zip(row + 1..)
                    .take_while(|(r, next)| {
                        r.fields
                            .source_row()
                            .is_some_and(|(s, k)| Arc::ptr_eq(s, source) && k == *next)
                    })
                    .count();
                (source, row, n + 1)
            });
            match run {
                Some((source, row, n)) if n > 1 => {
                    let run = &records[at..at + n];
                    let origin = |k: usize| run[k - row].origin;
                    self.writer
                        .push_rows(run.iter().map(sizes), source, row..row + n, origin)?;
                    at += n;
                }
                _ => {
                    let (key_len, raw_len) = sizes(record);
                    let (fields, origin) = (&record.fields, record.origin);
                    self.writer.push(key_len, raw_len, fields, origin)?;
                    at += 1;
                }
            }
        }
        Ok(())
    }

    /// Adds one record whose value is already in the dataset's stored form (a
    /// copy from a dataset of the same compression: LZ4 values are not
    /// compressed again), under the same duplicate policy as
    /// [`FieldsExtend::push_batch`]. Returns why it was left out, if it was.
    pub fn push_stored(
        &mut self,
        key: &[u8],
        stored: &[u8],
        fields: &Fields,
        origin: &dyn Display,
    ) -> Result<Option<LeftOut>, FieldsIoError> {
        let key = if self.keyed { key } else { &[][..] };
        match self.extend.push_stored_deduplicated(key, stored)? {
            Some(LeftOut::Key) => {
                self.refuse_duplicate_key(key, origin, 0)?;
                self.skipped += 1;
                return Ok(Some(LeftOut::Key));
            }
            Some(duplicate) => {
                self.skipped_values += 1;
                return Ok(Some(duplicate));
            }
            None => {}
        }
        // The statistics count the value's uncompressed size: an LZ4 value
        // declares it in its size prefix (checked by the push).
        let raw_len = match self.extend.dataset().compression() {
            Compression::None => stored.len(),
            Compression::Lz4 => bcd::lz4_block::declared_len(stored).unwrap_or(0),
        };
        self.writer.push(key.len(), raw_len, fields, origin)?;
        self.writer.shards_finished(&mut self.extend)?;
        self.added += 1;
        Ok(None)
    }

    fn refuse_duplicate(&self, record: &NewRecord<'_>, at: usize) -> Result<(), FieldsIoError> {
        self.refuse_duplicate_key(record.key, record.origin, at)
    }

    /// The duplicate policy, for a key seen before: fine when skipping.
    fn refuse_duplicate_key(
        &self,
        key: &[u8],
        origin: &dyn Display,
        position: usize,
    ) -> Result<(), FieldsIoError> {
        match self.on_duplicate {
            OnDuplicate::Skip => Ok(()),
            OnDuplicate::Error => Err(FieldsIoError::Duplicate {
                key: DisplayKey(key.to_vec()),
                origin: origin.to_string(),
                position,
            }),
        }
    }

    /// Writes the last shard's files and the commit file (each read back), and
    /// commits, atomically. On an error nothing is committed, except with
    /// [`bcd::Error::CommittedNotDurable`] (see [`Extend::commit`]).
    pub fn commit(self) -> Result<Extended, FieldsIoError> {
        let FieldsExtend {
            mut extend,
            writer,
            skipped,
            skipped_values,
            ..
        } = self;
        writer.finish(&mut extend)?;
        let committed = extend.commit()?;
        Ok(Extended {
            records: committed.records,
            skipped,
            skipped_values,
            shards: committed.shards,
            bytes_stored: committed.bytes_stored,
        })
    }
}
