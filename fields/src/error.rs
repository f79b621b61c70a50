//! The one error type of this crate.

use arrow_schema::ArrowError;

/// What went wrong building, encoding or decoding fields.
///
/// Messages say what failed where (the field, the record's origin, the file);
/// an underlying Arrow or JSON error is left to [`std::error::Error::source`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FieldsError {
    /// A column's type does not unify with the type it already has in the
    /// dataset (or, within a shard, in earlier records).
    #[error("field \"{field}\": type {new} conflicts with {existing} already in the dataset")]
    DatasetConflict {
        /// The field, with a path into nested values (`meta.score`, `tags[]`).
        field: String,
        /// The type that came in.
        new: String,
        /// The type the dataset has.
        existing: String,
    },
    /// A record's value does not unify with the values earlier records of the
    /// same shard gave that column.
    #[error(
        "field \"{field}\" of {origin}: type {new} conflicts with {existing} of earlier records"
    )]
    RecordConflict {
        /// The field, with a path into nested values (`meta.score`, `tags[]`).
        field: String,
        /// The type this record's value has.
        new: String,
        /// The type the column has from earlier records.
        existing: String,
        /// The record, as the caller names it.
        origin: String,
    },
    /// A record gives the same field twice.
    #[error("field \"{field}\" of {origin} is given twice")]
    DuplicateField {
        /// The field.
        field: String,
        /// The record, as the caller names it.
        origin: String,
    },
    /// A file (or a JSON document) is not what this crate writes: corrupt,
    /// truncated, hostile or of an unknown version.
    #[error("{name}: {what}")]
    Invalid {
        /// The file, as the caller names it.
        name: String,
        /// What is wrong with it.
        what: String,
    },
    /// The same, with the Arrow error that found it as the source.
    #[error("{name}: {what}")]
    InvalidArrow {
        /// The file, as the caller names it.
        name: String,
        /// What was being read.
        what: String,
        /// Arrow's report.
        #[source]
        source: ArrowError,
    },
    /// The same, with the JSON error that found it as the source.
    #[error("{name}: {what}")]
    InvalidJson {
        /// The file, as the caller names it.
        name: String,
        /// What was being read.
        what: String,
        /// serde_json's report.
        #[source]
        source: serde_json::Error,
    },
    /// An Arrow operation failed on data this crate built (a bug or an
    /// unsupported type), with what was being done.
    #[error("{context}")]
    Arrow {
        /// What was being done.
        context: String,
        /// Arrow's report.
        #[source]
        source: ArrowError,
    },
    /// A run's metadata gives a key a value other than the dataset's, where no
    /// merging rule applies (FORMAT.md, "Merging metadata").
    #[error("metadata \"{key}\": {run} conflicts with {dataset} already in the dataset; a dataset's metadata is not replaced by an append")]
    MetadataConflict {
        /// The key, with a path into nested objects (`huggingface.info.description`).
        key: String,
        /// The dataset's value, as JSON.
        dataset: String,
        /// The run's value, as JSON.
        run: String,
    },
    /// A column whose type cannot give categories (a float or nested field).
    #[error("{what} has type {data_type}, which has no categories: categories are text, bytes, integers, booleans, dates, times or a dictionary of them (floats and nested values are not classes)")]
    NotCategories {
        /// The column, as the caller names it (`field "score" of ds`).
        what: String,
        /// Its Arrow type.
        data_type: String,
    },
    /// A value or column this crate does not handle.
    #[error("{0}")]
    Unsupported(String),
    /// Reading or writing the scratch file that holds a shard's fields until
    /// the shard ends failed.
    #[error("{what}")]
    Scratch {
        /// What was being done, and in which directory.
        what: String,
        /// The system's report.
        #[source]
        source: std::io::Error,
    },
}

/// This crate's results.
pub type Result<T, E = FieldsError> = std::result::Result<T, E>;

impl FieldsError {
    pub(crate) fn invalid(name: &str, what: impl Into<String>) -> FieldsError {
        FieldsError::Invalid {
            name: name.to_owned(),
            what: what.into(),
        }
    }

    pub(crate) fn arrow(context: impl Into<String>, source: ArrowError) -> FieldsError {
        FieldsError::Arrow {
            context: context.into(),
            source,
        }
    }
}
