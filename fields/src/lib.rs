//! Structured fields stored beside the records of a dataset: labels, captions,
//! metadata. A source yields each record's [`Fields`] (named [`FieldValue`]s);
//! this crate turns them into Arrow columns, one IPC file per shard, with a
//! dataset schema and statistics (FORMAT.md, "Fields").
//!
//! It knows nothing of the store (the pipeline writes and commits the files it
//! encodes) nor of foreign formats (the converters produce the values).

#![warn(missing_docs)]

mod value;

pub use value::{FieldValue, Fields};
