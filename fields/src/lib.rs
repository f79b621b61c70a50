//! Structured fields stored beside the records of a dataset: labels, captions,
//! metadata. A source yields each record's [`Fields`] (named [`FieldValue`]s);
//! this crate turns them into Arrow columns, one IPC file per shard, with a
//! dataset schema and statistics (FORMAT.md, "Fields").
//!
//! It knows nothing of the store (the pipeline writes and commits the files it
//! encodes) nor of foreign formats (the converters produce the values).
//!
//! - [`BatchBuilder`]: records' fields to one Arrow [`RecordBatch`](arrow_array::RecordBatch).
//! - [`DatasetSchema`]: the dataset's columns and how a shard's unify with them
//!   ([`unify_types`], the one rule of unification).
//! - [`ShardBatches`]: a shard's batches until the shard ends (in memory up
//!   to a budget, then in a scratch file), handed back as the shard's columns,
//!   when they cannot be written into its file as they come.
//! - [`ShardFileEncoder`], [`ShardFileWriter`] (or [`encode_shard`]) /
//!   [`decode_shard`] / [`align`]: the `NNNNNN.fields.arrow` file, written
//!   batch by batch (before the shard's fingerprint is known, or after).
//! - [`ShardStats`]: a shard's statistics (`NNNNNN.stats.json`) and their merged totals.
//! - [`CommitFile`]: `commit.NNNNNN.json`, the schema, metadata and totals of a commit.
//! - [`merge_metadata`] / [`Remap`]: a run's metadata joined to the dataset's, its
//!   class indices renumbered into the dataset's vocabularies.
//! - [`row_to_json`] / [`member_bytes`]: a row for people, a value for WebDataset.
//! - [`Fingerprint`]: what ties a sidecar file to its shard.
//! - [`Predicate`]: a SQL boolean expression over fields, compiled to Arrow's
//!   kernels (views, `--where`).
//! - [`CategoryCodes`]: a column's values as dense class numbers, for balanced
//!   orders and subsets.

#![warn(missing_docs)]

mod builder;
mod canonical;
mod categories;
mod commit;
mod conform;
mod error;
mod field_stats;
mod fingerprint;
mod guard;
mod hll;
mod ipc;
mod ipc_writer;
mod json_row;
mod json_util;
mod metadata;
mod predicate;
mod remap;
mod schema;
mod shard_batches;
mod shard_dictionaries;
mod stats;
mod types;
mod unify;
mod value;

pub use builder::BatchBuilder;
pub use categories::{is_category_type, CategoryCodes};
pub use commit::{
    commit_file_name, fields_file_name, parse_commit_file_name, stats_file_name, CommitFile,
    COMMIT_FORMAT, FIELDS_SUFFIX, MAX_COMMIT_BYTES, STATS_SUFFIX,
};
pub use conform::align;
pub use error::{FieldsError, Result};
pub use field_stats::{CountKey, FieldStats, Scalar, MAX_EXACT_COUNTS, MAX_STRING_STAT_BYTES};
pub use fingerprint::Fingerprint;
pub use guard::{contain_panics, containing_panics};
pub use hll::{HyperLogLog, HLL_PRECISION, HLL_REGISTERS};
pub use ipc::{
    decode_shard, decode_shard_columns, decode_shard_each, NESTED_ELEMENTS_PER_BYTE,
    SHARD_METADATA_KEY,
};
pub use ipc_writer::{encode_shard, ShardFileEncoder, ShardFileWriter};
pub use json_row::{member_bytes, row_to_json, value_to_json};
pub use metadata::{
    merge_metadata, metadata_from_json, MergedMetadata, Remap, CLASS_LABELS_KEY,
    CLASS_NAMES_COLUMN, CLASS_NAMES_KEY, HUGGINGFACE_KEY, VALUE_KEY,
};
pub use predicate::{Predicate, PredicateError, MAX_PREDICATE_BYTES};
pub use schema::{DatasetSchema, MAX_SCHEMA_BYTES};
pub use shard_batches::{
    ShardBatchIter, ShardBatches, BATCH_BYTES, BATCH_ROWS, SHARD_MEMORY_BYTES,
};
pub use shard_dictionaries::has_dictionary;
pub use stats::{size_bucket, ShardStats, MAX_STATS_BYTES, STATS_FORMAT};
pub use types::MAX_TYPE_DEPTH;
pub use unify::{unify_types, TypeConflict};
pub use value::{FieldValue, Fields, SourceColumns};
