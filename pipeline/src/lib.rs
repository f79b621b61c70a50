//! The ingestion pipeline and the exporter: where sources from `bcd-converters`
//! meet the store.
//!
//! Ingest: a reader thread (never waited for after an interrupt, so a blocked
//! read cannot delay it) pulls records from the source into batches; the
//! writer checks each key against the committed and already-added keys (a hash
//! table confirmed on the key bytes), compresses the batch on all cores and
//! appends it, in source order, through one [`bcd::Extend`]; one commit at the end.
//! The bytes written do not depend on the number of jobs. Memory holds at most
//! three batches (each up to [`bcd::BATCH_BYTES_PER_THREAD`] x jobs, or one record if
//! larger) plus the key set, and with fields a bounded part of the open shard's
//! (see [`FieldsBuffering`]) and the statistics sketches.
//!
//! [`open_sources`] turns source names and plain [`SourceOptions`] into one
//! [`bcd_converters::Source`], with the format detection and option checks every
//! front end shares. [`Destination`] is the one entry point of an ingest for
//! every front end: it opens the sources and runs the local or the remote
//! ingest, as the destination is a directory or a URI.

#![warn(missing_docs)]

mod batch_queue;
mod categories;
mod dedup_report;
mod destination;
mod export;
mod export_megatron;
mod export_parquet;
mod export_samples;
pub mod fields;
mod fields_extend;
mod fields_writer;
mod formats;
mod ingest;
mod ingest_remote;
mod merge;
mod merge_fields;
mod options;
mod read_back;
mod remote_sources;
mod schema_file;
mod source_errors;
mod source_format;
mod source_options;
mod sources;
mod spelling;
mod subset;
pub mod views;

pub use categories::{field_categories, CategoriesError};
pub use dedup_report::{add_record_name, ContentDuplicate, DedupReport, ReportError};
pub use destination::Destination;
pub use export::{
    export, ExportError, ExportOptions, ExportProgress, ExportProgressFn, ExportRecords, Naming,
};
pub use export_megatron::{
    export_megatron, MegatronExportError, MegatronExportOptions, MegatronExportSummary,
};
pub use export_parquet::{export_parquet, ParquetExportOptions, ParquetExportSummary};
pub use fields_extend::{Extended, FieldsExtend, FieldsExtendOptions, NewRecord, Numbered};
pub use fields_writer::FieldsBuffering;
pub use ingest::{ingest, IngestError, IngestOptions, IngestSummary, OnDuplicate, Progress};
pub use ingest_remote::{ingest_into_remote, RemoteIngestSummary, Staging};
pub use merge::{gc_json, merge, parse_duration, MergeReport, MergeRunOptions};
pub use options::{
    fields_from_names, parse_dedup, parse_delimiter, parse_field_type, parse_fields, parse_labels,
    parse_lz4_mode, parse_size, parse_value_ext, parse_value_exts, InvalidValue,
};
pub use schema_file::{parse_schema, read_schema, SchemaFileError};
pub use source_errors::SourceSetupError;
pub use source_format::SourceFormat;
pub use source_options::SourceOptions;
pub use sources::{open_sources, open_sources_into, OpenedSource};
pub use spelling::{error_chain, spell_options};
pub use subset::{
    copy_into, sample_records, sample_records_of, CopyOptions, CopySummary, SampleError,
    SampleOptions,
};

/// How often an ingest checks [`IngestOptions::interrupt`] while it waits for its
/// source: the longest it takes to notice an interrupt (plus the batch in hand).
pub const INTERRUPT_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// High-compression level `bcd ingest` uses by default, chosen by measurement
/// (BENCHMARKS.md, `--level` table): the lowest level that keeps at least 99% of
/// the reference's compression ratio on text (99.4%; level 4 gives 98.8%), at about
/// twice the reference's speed.
pub const DEFAULT_INGEST_LEVEL: i32 = 5;
