//! [`SourceSetupError`]: why the sources of an ingest could not be opened. The
//! format lists the messages show are carried by the errors, taken from the
//! registry where they are made, so this module knows no format.

use std::io;

use bcd_converters::SourceError;

use crate::source_format::{and_list, join, SourceFormat};
#[cfg(doc)]
use crate::source_options::SourceOptions;

/// Why the sources could not be opened. Options are named by their
/// [`SourceOptions`] field in backquotes (`` `value_column` ``), which each front
/// end spells its own way (`crate::spell_options`); the variants that name an
/// option also hold its field name.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceSetupError {
    /// The list of sources is empty.
    #[error("no sources given; name at least one directory, archive or file")]
    NoSources,
    /// A format name that is not one of [`SourceFormat::all`].
    #[error(
        "{name:?}: unknown source format; expected one of {}",
        join(known, ", ")
    )]
    UnknownFormatName {
        /// The name given.
        name: String,
        /// The registered formats.
        known: Vec<SourceFormat>,
    },
    /// The format of a source cannot be told from its name, and it is neither a
    /// directory nor a file whose first bytes tell it.
    #[error(
        "{name}: cannot tell its format from the name or the first bytes; pass `format` {}",
        join(known, "|")
    )]
    UndetectableFormat {
        /// The source, as given.
        name: String,
        /// The registered formats.
        known: Vec<SourceFormat>,
    },
    /// Detecting the format of a source needed its metadata, which could not be read
    /// (it does not exist, typically).
    #[error("{name}")]
    Unreadable {
        /// The source, as given.
        name: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The sources were detected as different formats.
    #[error(
        "the sources are of different formats ({}); ingest them in separate runs or pass `format`",
        join(formats, ", ")
    )]
    MixedFormats {
        /// The format of each source, in order.
        formats: Vec<SourceFormat>,
    },
    /// An option that belongs to another format than the sources'.
    #[error("{} applies to {owner} sources only, not {format}", flag(option))]
    OptionForOtherFormat {
        /// The [`SourceOptions`] field.
        option: &'static str,
        /// The format the option belongs to.
        owner: SourceFormat,
        /// The sources' format.
        format: SourceFormat,
    },
    /// An option that several formats take, none of them the sources'.
    #[error(
        "{} applies to {} sources only, not {format}",
        flag(option),
        and_list(owners)
    )]
    OptionForOtherFormats {
        /// The [`SourceOptions`] field.
        option: &'static str,
        /// The formats that take it.
        owners: Vec<SourceFormat>,
        /// The sources' format.
        format: SourceFormat,
    },
    /// A key column for a format that takes none (only Parquet and CSV do).
    #[error(
        "`key_column` applies to {} sources only, not {format}",
        and_list(owners)
    )]
    KeyColumnForOtherFormat {
        /// The sources' format.
        format: SourceFormat,
        /// The formats that take a key column.
        owners: Vec<SourceFormat>,
    },
    /// A field selection for a format whose records have no fields to choose.
    #[error("`fields` applies to {} sources only, not {format}", and_list(owners))]
    FieldsForOtherFormat {
        /// The sources' format.
        format: SourceFormat,
        /// The formats that take a field selection.
        owners: Vec<SourceFormat>,
    },
    /// Parquet or hf-disk sources without a value column.
    #[error("{format} sources need `value_column` COL (and `key_column` COL for a keyed dataset)")]
    MissingValueColumn {
        /// The sources' format.
        format: SourceFormat,
    },
    /// A value column for LMDB values not read as pickles.
    #[error("`value_column` applies to lmdb sources read with `lmdb_value` pickle only (it names a pickled dict's entry)")]
    ValueColumnNeedsPickle,
    /// An option of WebDataset samples without `samples`.
    #[error("{} applies to tar sources read with `samples` only", flag(option))]
    NeedsSamples {
        /// The [`SourceOptions`] field.
        option: &'static str,
    },
    /// Directory sources labelled by folder whose class folders differ: their
    /// label indices would not mean the same classes.
    #[error("`labels` folder numbers the class folders of each directory; {first} and {other} must have the same ones, but {}", describe_difference(first_classes, other_classes))]
    DifferentClasses {
        /// The first directory.
        first: String,
        /// Its class folders.
        first_classes: Vec<String>,
        /// A directory with other class folders.
        other: String,
        /// Its class folders.
        other_classes: Vec<String>,
    },
    /// Opening a source failed (a missing file, a bad glob or brace pattern, an
    /// unreadable Parquet footer, ...).
    #[error(transparent)]
    Open(#[from] SourceError),
}

/// The first class folder one list has and the other lacks, or where they differ
/// in order (never, sorted as they are).
fn describe_difference(first: &[String], other: &[String]) -> String {
    if let Some(name) = other.iter().find(|name| !first.contains(name)) {
        return format!("only the second has {name:?}");
    }
    if let Some(name) = first.iter().find(|name| !other.contains(name)) {
        return format!("only the first has {name:?}");
    }
    "their class folders differ".into()
}

/// A [`SourceOptions`] field as messages name it, for each front end to spell:
/// `value_column` -> `` `value_column` ``.
fn flag(option: &str) -> String {
    format!("`{option}`")
}
