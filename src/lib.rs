//! The core store of the bitcask-dataset format: an append-only directory of
//! memory-mapped shards of byte blobs, optionally keyed and LZ4-compressed,
//! byte-compatible with the Python reference (`bitcask-dataset` 0.2.0 / 0.3.0).
//! FORMAT.md in the repository is the on-disk contract.
//!
//! ```
//! use bcd::{CreateOptions, Dataset};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("images");
//! let mut dataset = Dataset::create(&path, CreateOptions { keyed: true, ..Default::default() })?;
//! dataset.extend([(b"cat.jpg", b"meow"), (b"dog.jpg", b"woof")])?;
//!
//! let dataset = Dataset::open(&path)?;
//! assert_eq!(dataset.len(), 2);
//! assert_eq!(dataset.get(b"dog.jpg")?.as_deref(), Some(&b"woof"[..]));
//! assert_eq!(dataset.key_at(dataset.resolve_index(-1)?)?, b"dog.jpg");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! This crate knows nothing of foreign formats or command lines: the `bcd`
//! command and the converters build on it.

#![warn(missing_docs)]

mod commit;
mod content;
mod dataset;
mod error;
mod extend;
mod fingerprint;
pub mod fork;
pub mod format;
mod gc;
mod import;
mod index_file;
mod key_set;
mod key_table;
pub mod lz4_block;
mod manifest;
mod mapping;
mod merge;
pub mod positional_batch;
mod read_ahead;
mod reader;
mod shard;
pub(crate) mod shard_writer;
mod sidecars;
pub mod storage;
mod teardown;
#[cfg(test)]
mod test_bytes;
mod unmapped;
mod verify;
mod view_file;
mod views;

/// The README's Rust example, compiled as a doctest so it cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExample;

pub use content::{force_content_collisions, ContentIndexSummary, FORCE_COLLISIONS_ENV};
pub use dataset::{default_memory_limit, CreateOptions, Dataset, OpenOptions, ValueLocation};
pub use error::{error_chain, DisplayKey, Error, Result};
pub use extend::{
    batch_limits, Dedup, Extend, ExtendOptions, ExtendSummary, LeftOut, OpenSidecarWriter,
    SidecarWriter, Skipped, ValueDuplicate, BATCH_BYTES_PER_THREAD, BATCH_RECORDS_PER_THREAD,
};
pub use fingerprint::ShardFingerprint;
pub use gc::{GcOptions, GcReport};
pub use import::Import;
pub use lz4_block::Lz4Mode;
pub use manifest::{Compression, Manifest, ManifestVersion};
pub use mapping::ShardData;
pub use merge::{
    CommitFileHook, DropSidecars, HookError, MergeCommitInput, MergeOnDuplicate, MergeOptions,
    MergeSummary, MergedPart, MergedShard, MergedValueDuplicate, PartSource, RewrittenSidecar,
    SidecarOut, SidecarRewrite,
};
pub use positional_batch::{PlanCounts, PositionalBatch};
pub use shard::DataFiles;
pub use shard_writer::WrittenShard;
pub use view_file::{View, ViewBinding, ViewFileError, ViewIndices, ViewRecords, ViewRecordsError};
pub use views::max_view_file_len;
