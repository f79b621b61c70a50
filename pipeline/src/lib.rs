//! The ingestion pipeline and the exporter: where sources from `bcd-converters`
//! meet the store.
//!
//! Ingest: a reader thread (never waited for after an interrupt, so a blocked
//! read cannot delay it) pulls records from the source into batches; the
//! writer checks each key against the committed and already-added keys (a hash
//! table confirmed on the key bytes), compresses the batch on all cores and
//! appends it, in source order, through one [`bcd::Extend`]; one commit at the end.
//! The bytes written do not depend on the number of jobs. Memory holds at most
//! three batches (each up to [`BATCH_BYTES_PER_JOB`] x jobs, or one record if
//! larger) plus the key set.
//!
//! [`open_sources`] turns source names and plain [`SourceOptions`] into one
//! [`bcd_converters::Source`], with the format detection and option checks every
//! front end shares.

#![warn(missing_docs)]

mod export;
mod export_parquet;
pub mod export_samples;
pub mod fields;
mod fields_extend;
mod fields_writer;
mod ingest;
mod ingest_remote;
mod merge;
mod merge_fields;
mod options;
mod read_back;
mod remote_sources;
mod schema_file;
mod sources;
mod spelling;
mod subset;

pub use export::{
    export, ExportError, ExportOptions, ExportProgress, ExportProgressFn, ExportRecords, Naming,
};
pub use export_parquet::{export_parquet, ParquetExportOptions, ParquetExportSummary};
pub use fields_extend::{Extended, FieldsExtend, NewRecord, Numbered};
pub use ingest::{ingest, IngestError, IngestOptions, IngestSummary, OnDuplicate, Progress};
pub use ingest_remote::{ingest_into_remote, RemoteIngestSummary, Staging};
pub use merge::{gc_json, merge, parse_duration, MergeReport, MergeRunOptions};
pub use options::{
    fields_from_names, parse_delimiter, parse_field_type, parse_fields, parse_labels,
    parse_lz4_mode, parse_size, parse_value_ext, parse_value_exts, InvalidValue,
};
pub use schema_file::{
    parse_schema, read_schema, SchemaFileError, MAX_LIST_DEPTH, MAX_SCHEMA_BYTES,
};
pub use sources::{
    open_sources, open_sources_into, OpenedSource, SourceFormat, SourceOptions, SourceSetupError,
};
pub use spelling::{error_chain, spell_options, OPTION_FIELDS};
pub use subset::{
    copy_into, field_categories, sample_records, CopyOptions, CopySummary, SampleError,
    SampleOptions,
};

/// How often an ingest checks [`IngestOptions::interrupt`] while it waits for its
/// source: the longest it takes to notice an interrupt (plus the batch in hand).
pub const INTERRUPT_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// Records per batch and job: the store's one batching policy
/// ([`bcd::batch_limits`]).
pub const BATCH_RECORDS_PER_JOB: usize = bcd::BATCH_RECORDS_PER_THREAD;
/// Bytes per batch and job ([`bcd::batch_limits`]).
pub const BATCH_BYTES_PER_JOB: usize = bcd::BATCH_BYTES_PER_THREAD;
/// High-compression level `bcd ingest` uses by default, chosen by measurement
/// (BENCHMARKS.md, `--level` table): the lowest level that keeps at least 99% of
/// the reference's compression ratio on text (99.4%; level 4 gives 98.8%), at about
/// twice the reference's speed.
pub const DEFAULT_INGEST_LEVEL: i32 = 5;
