//! Readers and writers of foreign formats, as plain records. This crate knows
//! nothing of the store: a source yields [`Record`]s (key, value bytes, and where
//! they came from, for messages), a sink takes them.
//!
//! Adding a source means adding one module that implements [`Source`].
//!
//! ```
//! use bcd_converters::{dir_source::{DirOptions, DirSource}, Source};
//!
//! let root = tempfile::tempdir()?;
//! std::fs::create_dir(root.path().join("cat"))?;
//! std::fs::write(root.path().join("cat/1.jpg"), b"meow")?;
//! let mut source = DirSource::new(root.path(), &DirOptions::default())?;
//! let record = source.next().unwrap()?;
//! assert_eq!((&record.key[..], &record.value[..]), (&b"cat/1.jpg"[..], &b"meow"[..]));
//! assert!(source.next().is_none());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

pub mod arrow_batches;
pub mod brace;
pub mod caffe_datum;
pub mod compression;
mod csv_fields;
pub mod csv_source;
pub mod detect;
pub mod dir_source;
mod error;
pub mod example;
pub mod field_options;
mod fused;
pub mod hf_disk_source;
pub mod jsonl_fields;
pub mod jsonl_source;
mod litdata_chunks;
mod litdata_footer;
mod litdata_index;
pub mod litdata_source;
mod lmdb_env;
pub mod lmdb_meta;
pub mod lmdb_source;
pub mod lmdb_tree;
mod mds_index;
pub mod mds_source;
pub mod megatron_index;
pub mod megatron_source;
mod member_names;
mod parquet_columns;
mod parquet_compat;
mod parquet_dictionary;
pub mod parquet_export;
mod parquet_fields;
mod parquet_pages;
pub mod parquet_source;
pub mod pickle;
pub mod random_access;
pub mod regular_file;
mod sample_columns;
mod sample_plan;
pub mod sample_shards;
pub mod sample_source;
pub mod samples;
pub mod sequence_example;
mod shard_hashes;
mod table_rows;
pub mod tar_export;
mod tar_reader;
pub mod tar_source;
mod tfrecord_fields;
pub mod tfrecord_source;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use bcd_fields::{FieldValue, Fields, SourceColumns};
pub use error::SourceError;
pub use field_options::{FieldSelection, FieldType};
pub use fused::Fused;
pub use table_rows::TableOptions;

/// Opens an input stream when a source reaches it (an object in a store, say), so
/// that a list of inputs costs nothing until each is read.
/// It may be called more than once (a TFRecord prescan reads every input twice).
pub(crate) type Opener =
    std::sync::Arc<dyn Fn() -> std::io::Result<Box<dyn std::io::Read + Send>> + Send + Sync>;

/// An input opened on demand: its name (for records' origins and messages), its
/// size when known (which bounds the lengths a record-oriented file may declare),
/// and how to open it.
#[derive(Clone)]
pub struct LazyInput {
    /// The name, as messages show it (a URI, say).
    pub name: String,
    /// The input's size in bytes, when known.
    pub len: Option<u64>,
    /// Opens it.
    pub open: Opener,
}

impl fmt::Debug for LazyInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LazyInput")
            .field("name", &self.name)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// Largest value a source produces: the store records every size in a `u32`
/// (FORMAT.md, section 3). A larger value is an error before it is read.
pub const MAX_VALUE_SIZE: u64 = u32::MAX as u64;

/// One record read from a foreign format.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// The key (empty for sources without keys).
    pub key: Vec<u8>,
    /// The value's bytes.
    pub value: Vec<u8>,
    /// Where it came from, for error messages.
    pub origin: Origin,
    /// Structured fields stored beside the value (labels, captions, metadata);
    /// empty when the source was not asked for any.
    pub fields: Fields,
}

/// Where a record came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A file of a directory tree.
    File(PathBuf),
    /// A member of an archive, with the byte offset of its header in the
    /// (decompressed) archive stream.
    Member {
        /// The archive (`-` for stdin).
        archive: String,
        /// The member's name.
        member: String,
        /// Offset of the member's header.
        offset: u64,
    },
    /// A record of a record-oriented file (TFRecord), by number and byte offset.
    Record {
        /// The file (shared by its records: a record's origin costs no copy of
        /// the path).
        file: Arc<Path>,
        /// Record number, from 0.
        record: u64,
        /// Byte offset of the record's frame (in the decompressed stream).
        offset: u64,
    },
    /// A row of a table (CSV line, Parquet row, LMDB entry).
    Row {
        /// The file (shared by its rows).
        file: Arc<Path>,
        /// Which row.
        row: RowAt,
    },
}

/// Which row of a table a record came from: kept as numbers and formatted only
/// when shown (an origin is made for every record, and shown for few).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RowAt {
    /// A line of a text file, from 1: "line 12".
    Line(u64),
    /// A row of a columnar file, from 0: "row 12".
    Row(u64),
    /// An entry named by its key, shown as it is.
    Entry(String),
}

impl fmt::Display for RowAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RowAt::Line(line) => write!(f, "line {line}"),
            RowAt::Row(row) => write!(f, "row {row}"),
            RowAt::Entry(entry) => f.write_str(entry),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(path) => write!(f, "{}", path.display()),
            Origin::Member {
                archive,
                member,
                offset,
            } => write!(f, "{archive}: member {member:?} (header at byte {offset})"),
            Origin::Record {
                file,
                record,
                offset,
            } => write!(f, "{}: record {record} at byte {offset}", file.display()),
            Origin::Row { file, row } => write!(f, "{}: {row}", file.display()),
        }
    }
}

/// A path from raw bytes (a tar member name, a CSV field): exact on Unix, lossy
/// UTF-8 elsewhere.
pub(crate) fn bytes_to_path(bytes: &[u8]) -> PathBuf {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
    }
    #[cfg(not(unix))]
    {
        PathBuf::from(String::from_utf8_lossy(bytes).into_owned())
    }
}

/// Counts of what a source passed over, by kind ("symlink", "hardlink", ...).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Skipped(pub BTreeMap<&'static str, u64>);

impl Skipped {
    /// Counts one more skipped item of `kind`.
    pub fn add(&mut self, kind: &'static str) {
        *self.0.entry(kind).or_default() += 1;
    }

    /// Total skipped.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }
}

/// A streaming reader of records from one foreign format. Iteration yields
/// records in the source's deterministic order; an error ends the source: every
/// source of this crate comes wrapped in [`Fused`], which yields nothing after
/// the first error (a new source gets that by returning `Fused<Self>` from its
/// constructor).
pub trait Source: Iterator<Item = Result<Record, SourceError>> + Send {
    /// Whether the records carry meaningful keys.
    fn keyed(&self) -> bool;
    /// What was passed over so far.
    fn skipped(&self) -> &Skipped;
    /// Dataset-level metadata this source contributes (class names, the
    /// Hugging Face features of a Parquet file, ...), merged key-wise into the
    /// dataset's metadata when the ingest commits. Asked for once the source is
    /// drained, so it may describe every record read (the derived fields of
    /// WebDataset samples).
    fn metadata(&self) -> serde_json::Map<String, serde_json::Value> {
        serde_json::Map::new()
    }
    /// Field metadata of the field columns that is part of their type (an Arrow
    /// extension type's `ARROW:extension:name` and `ARROW:extension:metadata`:
    /// `arrow.uuid`, `arrow.json`, a tensor's shape), by field name. Known when
    /// the source is opened; a later file that gives a column another is an error
    /// of that file.
    fn column_metadata(&self) -> ColumnMetadata {
        ColumnMetadata::new()
    }
}

/// Field metadata by field name, then key ([`Source::column_metadata`]).
pub type ColumnMetadata =
    std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>;

/// Several sources read one after another, as one.
pub struct Chain {
    sources: std::collections::VecDeque<Box<dyn Source>>,
    skipped: Skipped,
    keyed: bool,
    metadata: serde_json::Map<String, serde_json::Value>,
}

impl Chain {
    /// Chains `sources` in order; keyed if all are. An error of one source ends
    /// the chain: the sources after it are not read. Its metadata is that of its
    /// sources, merged key-wise in order (a later source's key wins), each asked
    /// once it is drained (or when the chain's metadata is asked for, if not yet).
    pub fn new(sources: Vec<Box<dyn Source>>) -> Fused<Chain> {
        let keyed = sources.iter().all(|s| s.keyed());
        Fused::new(Chain {
            sources: sources.into(),
            skipped: Skipped::default(),
            keyed,
            metadata: serde_json::Map::new(),
        })
    }
}

impl Iterator for Chain {
    type Item = Result<Record, SourceError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let source = self.sources.front_mut()?;
            if let Some(item) = source.next() {
                return Some(item);
            }
            let finished = self.sources.pop_front().expect("front exists");
            self.metadata.extend(finished.metadata());
            for (kind, n) in &finished.skipped().0 {
                *self.skipped.0.entry(kind).or_default() += n;
            }
        }
    }
}

impl Source for Chain {
    fn keyed(&self) -> bool {
        self.keyed
    }

    fn skipped(&self) -> &Skipped {
        &self.skipped
    }

    fn metadata(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut metadata = self.metadata.clone();
        for source in &self.sources {
            metadata.extend(source.metadata());
        }
        metadata
    }

    fn column_metadata(&self) -> ColumnMetadata {
        // Asked when the chain is opened: the sources not yet read, the first
        // one's first.
        let mut columns = ColumnMetadata::new();
        for source in &self.sources {
            for (column, entries) in source.column_metadata() {
                columns.entry(column).or_insert(entries);
            }
        }
        columns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An origin is shown as error messages and duplicate reports name it;
    /// the row is kept as a number and formatted only here.
    #[test]
    fn origins_are_shown_as_messages_name_them() {
        let file: Arc<Path> = Arc::from(Path::new("dir/t.parquet"));
        let shown = |origin: Origin| origin.to_string();
        let row = |row| Origin::Row {
            file: Arc::clone(&file),
            row,
        };
        assert_eq!(shown(row(RowAt::Row(12))), "dir/t.parquet: row 12");
        assert_eq!(shown(row(RowAt::Line(3))), "dir/t.parquet: line 3");
        assert_eq!(
            shown(row(RowAt::Entry("key \"a\"".into()))),
            "dir/t.parquet: key \"a\""
        );
        let record = Origin::Record {
            file: Arc::clone(&file),
            record: 4,
            offset: 96,
        };
        assert_eq!(shown(record), "dir/t.parquet: record 4 at byte 96");
    }
}
