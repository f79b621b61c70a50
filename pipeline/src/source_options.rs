//! [`SourceOptions`]: how to read the sources of one ingest, as plain values any
//! front end fills in. Which fields a format takes, and what it does with them,
//! is its descriptor's business (`formats/`).

use std::path::PathBuf;

use arrow_schema::SchemaRef;
use bcd_converters::dir_source::LabelMode;
use bcd_converters::lmdb_source::LmdbValue;
use bcd_converters::{FieldSelection, FieldType};

use crate::source_format::SourceFormat;
#[cfg(doc)]
use bcd_converters::dir_source::DirOptions;

/// How to read the sources. Every field is "not given" by default (`None`, empty,
/// `false`), and a given field that belongs to another format than the sources'
/// is an error
/// ([`SourceSetupError::OptionForOtherFormat`](crate::SourceSetupError::OptionForOtherFormat)).
/// Which format takes which field is said by the formats' descriptors
/// (`formats/`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceOptions {
    /// The format of every source. Default: detected from each name (archive,
    /// JSON Lines, Parquet, CSV and TFRecord suffixes, `-` and brace patterns are
    /// tar, a directory `datasets`' `save_to_disk` wrote is hf-disk, one with an
    /// MDS or LitData `index.json` is mds or litdata, other
    /// existing directories are dir; a given `value_column` means Parquet).
    pub format: Option<SourceFormat>,
    /// dir: only files matching one of these globs (default: all files); see
    /// [`DirOptions::include`].
    pub include: Vec<String>,
    /// dir: leave out files matching any of these globs.
    pub exclude: Vec<String>,
    /// dir: follow symbolic links (default: skip and count them).
    pub follow_links: bool,
    /// parquet, hf-disk, mds, litdata: the column (a LitData leaf) holding the
    /// values. Required for Parquet and hf-disk; for MDS and LitData the default
    /// is the only column of a binary kind, else the only text one.
    /// lmdb with `lmdb_value` pickle: the dict entry holding the value
    /// (default: a dict's only bytes entry).
    pub value_column: Option<String>,
    /// parquet, hf-disk, csv, mds, litdata: the column holding the keys
    /// (default: keyless; CSV: the path as written).
    pub key_column: Option<String>,
    /// parquet, hf-disk: skip (and count) rows whose value or key is null instead
    /// of failing.
    pub skip_nulls: bool,
    /// hf-disk: the split of a `DatasetDict` to read (required for one).
    pub split: Option<String>,
    /// lmdb: how each entry's value is read. Default: as stored.
    pub lmdb_value: Option<LmdbValue>,
    /// lmdb: the named database to read. Default: the unnamed one.
    pub lmdb_db: Option<String>,
    /// csv: the column holding file paths. Default: `path`.
    pub path_column: Option<String>,
    /// csv: resolve relative paths against this directory. Default: each CSV
    /// file's own directory.
    pub root: Option<PathBuf>,
    /// csv: the field delimiter. Default: `b','`.
    pub delimiter: Option<u8>,
    /// tfrecord: store this `bytes_list` feature of each `tf.train.Example`
    /// instead of the whole serialized record.
    pub feature: Option<String>,
    /// tfrecord: key records by this `bytes_list` feature (default: keyless).
    pub key_feature: Option<String>,
    /// dir: fields derived from each file's path: `label` and `label_index` from
    /// its class folder (see [`bcd_converters::dir_source`]).
    pub labels: Option<LabelMode>,
    /// tar: group members into WebDataset samples, one record each, the other
    /// members as fields (see [`bcd_converters::samples`]).
    pub samples: bool,
    /// tar with `samples`: the extensions of the member stored as the value, in
    /// order of preference (lower-cased, a leading `.` dropped). Default:
    /// [`bcd_converters::samples::DEFAULT_VALUE_EXTS`].
    pub value_ext: Vec<String>,
    /// tar with `samples`: also store the top-level scalars of JSON members as
    /// typed fields.
    pub json_fields: bool,
    /// tar with `samples`: skip (and count) bad samples instead of failing.
    pub skip_bad_samples: bool,
    /// jsonl: the string field holding the value. Default: `text`.
    pub value_field: Option<String>,
    /// jsonl: the value field is base64 text of the value's bytes.
    pub value_base64: bool,
    /// jsonl: key records by this field (a string or an integer). Default: keyless.
    pub key_field: Option<String>,
    /// jsonl: the fields and their types (see [`crate::read_schema`]). Default:
    /// inferred from the first lines.
    pub schema: Option<SchemaRef>,
    /// parquet, hf-disk, csv, tfrecord, mds, litdata: which other columns, leaves
    /// or features become fields.
    /// Default: all of them (for TFRecord only when `feature` is given: the whole
    /// record holds them already; any TFRecord fields cost a prescan, a second
    /// read of every file).
    pub fields: Option<FieldSelection>,
    /// csv: declared types of field columns, instead of inferred ones.
    pub field_type: Vec<(String, FieldType)>,
}
