//! Datasets in object storage: `s3://`, `gs://` and `az://` prefixes holding the
//! same files as a local dataset directory, so a plain copy of the prefix is a
//! dataset the reference opens.
//!
//! - [`Location`]: what a location argument is (a local path, a store URI, or an
//!   unsupported scheme, which is refused).
//! - [`Remote`]: a prefix and a client configured from the cloud's standard
//!   environment, with retries.
//! - [`push`] / [`pull`]: copy the files of the committed state each way, the
//!   manifest last (a conditional put on the store, the atomic rename locally).
//! - [`RemoteDataset`]: read a remote dataset by ranged reads (info, ls, get,
//!   verify, export) without downloading it whole.
//! - [`cache`]: open a remote dataset as a [`bcd::Dataset`] whose shards are
//!   fetched into a shared, bounded local cache on first read (training).
//! - [`gc()`]: remove what interrupted pushes left.
//! - [`FileKind`]: which files make up a committed state, by name.
//!
//! The API is blocking: requests run on a runtime this crate owns (one per
//! process, rebuilt after a fork).

#![warn(missing_docs)]

pub mod cache;
mod cache_files;
mod cache_prefetch;
mod cache_records;
mod download;
mod error;
#[cfg(test)]
mod fork_tests;
mod gc;
mod names;
mod objects;
mod per_process;
mod pull;
mod push;
mod read;
mod source;
mod store;
mod transfer;
mod uri;

pub use cache::{CacheOptions, PrefetchStatus, RemoteCache};
pub use error::{RemoteError, Result};
pub use gc::{gc, GcOptions, GcSummary};
pub use names::FileKind;
pub use objects::{
    file_checksum, same_content, Base, RemoteManifest, RemoteObject, Stamp, CHECKSUM_KEY, MTIME_KEY,
};
pub use pull::pull;
pub use push::{push, push_onto};
pub use read::{RecordSpan, RemoteDataset};
pub use source::{split_object, ObjectReader};
pub use store::Remote;
pub use transfer::{TransferOptions, TransferSummary};
pub use uri::{Location, RemoteUri, Scheme};
