//! `open_sources`: from source names and plain options to one [`Source`], the way
//! `bcd ingest` does it: detect the format from the names (unless given), refuse
//! options that belong to another format, open the inputs. Kept free of any
//! argument parser so that every front end (the CLI, a Python binding) shares the
//! rules and the messages.

use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use arrow_schema::SchemaRef;
use bcd_converters::csv_source::{CsvOptions, CsvSource};
use bcd_converters::detect::Content;
use bcd_converters::dir_source::{DirOptions, DirSource, LabelMode};
use bcd_converters::jsonl_source::{JsonlOptions, JsonlSource};
use bcd_converters::parquet_source::{ParquetOptions, ParquetSource};
use bcd_converters::samples::SampleOptions;
use bcd_converters::tar_source::{TarOptions, TarSource};
use bcd_converters::tfrecord_source::{TfRecordOptions, TfRecordSource};
use bcd_converters::{Chain, FieldSelection, FieldType, Source, SourceError};

/// The format of the inputs of one ingest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceFormat {
    /// Directory trees: every regular file, keyed by its relative path.
    Dir,
    /// Tar archives (plain, gzip or zstd), WebDataset shards, brace patterns, or
    /// `-` for stdin.
    Tar,
    /// Parquet files, directories of them, or patterns (needs a value column).
    Parquet,
    /// CSV files listing file paths, one value per row.
    Csv,
    /// TFRecord files, plain or GZIP-compressed.
    Tfrecord,
    /// JSON Lines files, plain, gzip or zstd: one record per object.
    Jsonl,
}

impl SourceFormat {
    /// Every format, in the order the messages list them.
    pub const ALL: [SourceFormat; 6] = [
        SourceFormat::Dir,
        SourceFormat::Tar,
        SourceFormat::Parquet,
        SourceFormat::Csv,
        SourceFormat::Tfrecord,
        SourceFormat::Jsonl,
    ];

    /// The lower-case name, as `--format` and [`FromStr`] take it.
    pub fn name(self) -> &'static str {
        match self {
            SourceFormat::Dir => "dir",
            SourceFormat::Tar => "tar",
            SourceFormat::Parquet => "parquet",
            SourceFormat::Csv => "csv",
            SourceFormat::Tfrecord => "tfrecord",
            SourceFormat::Jsonl => "jsonl",
        }
    }
}

/// The valid format names joined by `separator`.
fn format_names(separator: &str) -> String {
    SourceFormat::ALL.map(SourceFormat::name).join(separator)
}

impl FromStr for SourceFormat {
    type Err = SourceSetupError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        SourceFormat::ALL
            .into_iter()
            .find(|format| format.name() == text)
            .ok_or_else(|| SourceSetupError::UnknownFormatName {
                name: text.to_owned(),
            })
    }
}

impl fmt::Display for SourceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How to read the sources. Every field is "not given" by default (`None`, empty,
/// `false`), and a given field that belongs to another format than the sources'
/// is an error ([`SourceSetupError::OptionForOtherFormat`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceOptions {
    /// The format of every source. Default: detected from each name (archive,
    /// JSON Lines, Parquet, CSV and TFRecord suffixes, `-` and brace patterns are
    /// tar, existing directories are dir; a given `value_column` means Parquet).
    pub format: Option<SourceFormat>,
    /// dir: only files matching one of these globs (default: all files); see
    /// [`DirOptions::include`].
    pub include: Vec<String>,
    /// dir: leave out files matching any of these globs.
    pub exclude: Vec<String>,
    /// dir: follow symbolic links (default: skip and count them).
    pub follow_links: bool,
    /// parquet: the column holding the values. Required for Parquet.
    pub value_column: Option<String>,
    /// parquet, csv: the column holding the keys (Parquet default: keyless; CSV
    /// default: the path as written).
    pub key_column: Option<String>,
    /// parquet: skip (and count) rows whose value or key is null instead of failing.
    pub skip_nulls: bool,
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
    /// parquet, csv, tfrecord: which other columns or features become fields.
    /// Default: all of them (for TFRecord only when `feature` is given: the whole
    /// record holds them already; any TFRecord fields cost a prescan, a second
    /// read of every file).
    pub fields: Option<FieldSelection>,
    /// csv: declared types of field columns, instead of inferred ones.
    pub field_type: Vec<(String, FieldType)>,
}

/// The formats [`SourceOptions::fields`] applies to.
const FIELDS_FORMATS: [SourceFormat; 3] = [
    SourceFormat::Parquet,
    SourceFormat::Csv,
    SourceFormat::Tfrecord,
];

impl SourceOptions {
    /// The directory-walk part of the options, e.g. to estimate the bytes to come
    /// with [`DirSource::total_bytes`].
    pub fn dir_options(&self) -> DirOptions {
        DirOptions {
            include: self.include.clone(),
            exclude: self.exclude.clone(),
            follow_links: self.follow_links,
            skip_dirs: Vec::new(),
            labels: self.labels,
        }
    }

    /// The options that are given and belong to one format only, by field name,
    /// with the format they belong to.
    fn given_single_format(&self) -> [(&'static str, bool, SourceFormat); 20] {
        [
            ("include", !self.include.is_empty(), SourceFormat::Dir),
            ("exclude", !self.exclude.is_empty(), SourceFormat::Dir),
            ("follow_links", self.follow_links, SourceFormat::Dir),
            (
                "value_column",
                self.value_column.is_some(),
                SourceFormat::Parquet,
            ),
            ("skip_nulls", self.skip_nulls, SourceFormat::Parquet),
            ("path_column", self.path_column.is_some(), SourceFormat::Csv),
            ("root", self.root.is_some(), SourceFormat::Csv),
            ("delimiter", self.delimiter.is_some(), SourceFormat::Csv),
            ("feature", self.feature.is_some(), SourceFormat::Tfrecord),
            (
                "key_feature",
                self.key_feature.is_some(),
                SourceFormat::Tfrecord,
            ),
            ("labels", self.labels.is_some(), SourceFormat::Dir),
            ("samples", self.samples, SourceFormat::Tar),
            ("value_ext", !self.value_ext.is_empty(), SourceFormat::Tar),
            ("json_fields", self.json_fields, SourceFormat::Tar),
            ("skip_bad_samples", self.skip_bad_samples, SourceFormat::Tar),
            (
                "value_field",
                self.value_field.is_some(),
                SourceFormat::Jsonl,
            ),
            ("value_base64", self.value_base64, SourceFormat::Jsonl),
            ("key_field", self.key_field.is_some(), SourceFormat::Jsonl),
            ("schema", self.schema.is_some(), SourceFormat::Jsonl),
            ("field_type", !self.field_type.is_empty(), SourceFormat::Csv),
        ]
    }

    /// The sample options that are given, by field name: they need `samples`.
    fn given_sample_options(&self) -> [(&'static str, bool); 3] {
        [
            ("value_ext", !self.value_ext.is_empty()),
            ("json_fields", self.json_fields),
            ("skip_bad_samples", self.skip_bad_samples),
        ]
    }

    /// The Parquet part of the options (checked: a value column is given).
    pub(crate) fn parquet_options(&self) -> ParquetOptions {
        ParquetOptions {
            // check_options refused Parquet without a value column.
            value_column: self.value_column.clone().unwrap_or_default(),
            key_column: self.key_column.clone(),
            skip_nulls: self.skip_nulls,
            fields: self.fields.clone().unwrap_or_default(),
        }
    }

    /// The TFRecord part of the options.
    pub(crate) fn tfrecord_options(&self) -> TfRecordOptions {
        TfRecordOptions {
            feature: self.feature.clone(),
            key_feature: self.key_feature.clone(),
            fields: self.fields.clone(),
        }
    }

    /// The JSON Lines part of the options.
    pub(crate) fn jsonl_options(&self) -> JsonlOptions {
        JsonlOptions {
            value_field: self
                .value_field
                .clone()
                .unwrap_or_else(|| JsonlOptions::default().value_field),
            value_base64: self.value_base64,
            key_field: self.key_field.clone(),
            schema: self.schema.clone(),
        }
    }

    /// The tar part of the options.
    pub(crate) fn tar_options(&self) -> TarOptions {
        TarOptions {
            samples: self.samples.then(|| SampleOptions {
                value_exts: match self.value_ext.is_empty() {
                    true => SampleOptions::default().value_exts,
                    false => self
                        .value_ext
                        .iter()
                        .map(|ext| ext.trim_start_matches('.').to_lowercase())
                        .collect(),
                },
                json_fields: self.json_fields,
                skip_bad_samples: self.skip_bad_samples,
            }),
        }
    }
}

/// Opened sources, and the format they were read as.
pub struct OpenedSource {
    /// The format, given or detected.
    pub format: SourceFormat,
    /// The records of every source, in the order given.
    pub source: Box<dyn Source>,
}

impl fmt::Debug for OpenedSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenedSource")
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

/// Why the sources could not be opened. Options are named as `bcd ingest` spells
/// them (`--value-column`); the variants that name an option also hold its
/// [`SourceOptions`] field name, for front ends that spell options differently.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceSetupError {
    /// The list of sources is empty.
    #[error("no sources given; name at least one directory, archive or file")]
    NoSources,
    /// A format name that is not one of [`SourceFormat::ALL`].
    #[error(
        "{name:?}: unknown source format; expected one of {}",
        format_names(", ")
    )]
    UnknownFormatName {
        /// The name given.
        name: String,
    },
    /// The format of a source cannot be told from its name, and it is neither a
    /// directory nor a file whose first bytes tell it.
    #[error(
        "{name}: cannot tell its format from the name or the first bytes; pass `format` {}",
        format_names("|")
    )]
    UndetectableFormat {
        /// The source, as given.
        name: String,
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
        join(formats)
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
    /// A key column for a format other than Parquet and CSV.
    #[error("`key_column` applies to parquet and csv sources only, not {format}")]
    KeyColumnForOtherFormat {
        /// The sources' format.
        format: SourceFormat,
    },
    /// A field selection for a format whose records have no fields to choose.
    #[error("`fields` applies to parquet, csv and tfrecord sources only, not {format}")]
    FieldsForOtherFormat {
        /// The sources' format.
        format: SourceFormat,
    },
    /// Parquet sources without a value column.
    #[error("parquet sources need `value_column` COL (and `key_column` COL for a keyed dataset)")]
    MissingValueColumn,
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

/// Format names as messages list them: `dir, tar`.
fn join(formats: &[SourceFormat]) -> String {
    formats
        .iter()
        .map(|f| f.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The command-line flag of a [`SourceOptions`] field: `value_column` ->
/// `--value-column`.
fn flag(option: &str) -> String {
    format!("`{option}`")
}

/// Detects the format of every source (unless `options.format` is given), refuses
/// options that belong to another format, naming them, and opens the sources, in
/// order, as one [`Source`].
///
/// ```
/// use bcd_pipeline::{open_sources, SourceFormat, SourceOptions};
///
/// let names = ["../fixtures/tar/gnu.tar".to_owned()];
/// let opened = open_sources(&names, &SourceOptions::default())?;
/// assert_eq!(opened.format, SourceFormat::Tar);
///
/// let csv_flag_for_tar = SourceOptions { delimiter: Some(b';'), ..Default::default() };
/// let error = open_sources(&names, &csv_flag_for_tar).unwrap_err();
/// assert_eq!(error.to_string(), "`delimiter` applies to csv sources only, not tar");
/// # Ok::<(), bcd_pipeline::SourceSetupError>(())
/// ```
pub fn open_sources<S: AsRef<OsStr>>(
    sources: &[S],
    options: &SourceOptions,
) -> Result<OpenedSource, SourceSetupError> {
    open_sources_impl(sources, options, None)
}

/// [`open_sources`] for an ingest into the dataset at `target`: a directory
/// source never reads `target` or anything under it, so `ingest src --into
/// src/ds` does not store the dataset's own files (its lock, its manifest, the
/// shards being written). The directory is recognised by identity (device and
/// inode), however it is spelled, also when it is created after this call.
pub fn open_sources_into<S: AsRef<OsStr>>(
    sources: &[S],
    options: &SourceOptions,
    target: &Path,
) -> Result<OpenedSource, SourceSetupError> {
    open_sources_impl(sources, options, Some(target))
}

fn open_sources_impl<S: AsRef<OsStr>>(
    sources: &[S],
    options: &SourceOptions,
    target: Option<&Path>,
) -> Result<OpenedSource, SourceSetupError> {
    let sources: Vec<&OsStr> = sources.iter().map(AsRef::as_ref).collect();
    if sources.is_empty() {
        return Err(SourceSetupError::NoSources);
    }
    // A `scheme://` name is a URI: one of a supported store, or refused; never a
    // local path.
    let remote = sources
        .iter()
        .map(|name| {
            bcd_remote::Location::parse(name).map(|l| !matches!(l, bcd_remote::Location::Local(_)))
        })
        .collect::<Result<Vec<bool>, _>>()
        .map_err(|e| SourceSetupError::Open(SourceError::Usage(e.to_string())))?;
    if remote.iter().any(|&r| r) {
        if !remote.iter().all(|&r| r) {
            return Err(SourceSetupError::Open(SourceError::Usage(
                "the sources mix local paths and object-store URIs; ingest them in separate runs"
                    .into(),
            )));
        }
        let names: Vec<String> = sources
            .iter()
            .map(|name| name.to_string_lossy().into_owned())
            .collect();
        let format = match options.format {
            Some(format) => format,
            None => {
                let formats = names
                    .iter()
                    .map(|name| {
                        detect_by_name(OsStr::new(name), options).ok_or_else(|| {
                            SourceSetupError::UndetectableFormat { name: name.clone() }
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                if formats.iter().any(|format| *format != formats[0]) {
                    return Err(SourceSetupError::MixedFormats { formats });
                }
                formats[0]
            }
        };
        check_options(format, options)?;
        let source = crate::remote_sources::open(format, &names, options)?;
        return Ok(OpenedSource { format, source });
    }
    let format = match options.format {
        Some(format) => format,
        None => {
            let formats = sources
                .iter()
                .map(|name| detect_format(name, options))
                .collect::<Result<Vec<_>, _>>()?;
            if formats.iter().any(|format| *format != formats[0]) {
                return Err(SourceSetupError::MixedFormats { formats });
            }
            formats[0]
        }
    };
    check_options(format, options)?;
    let source = open(format, &sources, options, target)?;
    Ok(OpenedSource { format, source })
}

/// The format a source's name says, if it says one.
fn detect_by_name(name: &OsStr, options: &SourceOptions) -> Option<SourceFormat> {
    // Suffixes are ASCII: a lossy decoding of a non-UTF-8 name keeps them.
    let lower = name.to_string_lossy().to_ascii_lowercase();
    let ends = |suffixes: &[&str]| suffixes.iter().any(|suffix| lower.ends_with(suffix));
    if name == "-"
        || lower.contains('{')
        || ends(&[".tar", ".tar.gz", ".tgz", ".tar.zst", ".tzst", ".tar.zstd"])
    {
        return Some(SourceFormat::Tar);
    }
    // Before the value column's rule, so that `value_column` on a .jsonl file is
    // refused as a Parquet option rather than read as Parquet.
    if ends(&[
        ".jsonl",
        ".jsonl.gz",
        ".jsonl.zst",
        ".jsonl.zstd",
        ".ndjson",
        ".ndjson.gz",
        ".ndjson.zst",
    ]) {
        return Some(SourceFormat::Jsonl);
    }
    if options.value_column.is_some() || ends(&[".parquet", ".pq"]) {
        return Some(SourceFormat::Parquet);
    }
    if ends(&[".csv", ".tsv"]) {
        return Some(SourceFormat::Csv);
    }
    // Also sharded names such as train.tfrecord-00000-of-00010.
    if lower.contains(".tfrecord") {
        return Some(SourceFormat::Tfrecord);
    }
    None
}

/// The format of one source, from its name, or failing that from the file system.
fn detect_format(name: &OsStr, options: &SourceOptions) -> Result<SourceFormat, SourceSetupError> {
    if let Some(format) = detect_by_name(name, options) {
        return Ok(format);
    }
    let undetectable = || SourceSetupError::UndetectableFormat {
        name: name.to_string_lossy().into_owned(),
    };
    match std::fs::metadata(name) {
        Ok(meta) if meta.is_dir() => Ok(SourceFormat::Dir),
        // A name that says nothing (TFX's GZIP TFRecord shards are `….gz`):
        // the first bytes, decompressed, may.
        Ok(_) => match bcd_converters::detect::file_content(Path::new(name)) {
            Ok(Some(Content::Tar)) => Ok(SourceFormat::Tar),
            Ok(Some(Content::TfRecord)) => Ok(SourceFormat::Tfrecord),
            Ok(Some(Content::Parquet)) => Ok(SourceFormat::Parquet),
            Ok(None) => Err(undetectable()),
            Err(source) => Err(SourceSetupError::Unreadable {
                name: name.to_string_lossy().into_owned(),
                source,
            }),
        },
        Err(source) => Err(SourceSetupError::Unreadable {
            name: name.to_string_lossy().into_owned(),
            source,
        }),
    }
}

/// Refuses given options that belong to other formats than `format`, and a
/// Parquet source without a value column.
fn check_options(format: SourceFormat, options: &SourceOptions) -> Result<(), SourceSetupError> {
    for (option, given, owner) in options.given_single_format() {
        if given && owner != format {
            return Err(SourceSetupError::OptionForOtherFormat {
                option,
                owner,
                format,
            });
        }
    }
    if options.key_column.is_some() && !matches!(format, SourceFormat::Parquet | SourceFormat::Csv)
    {
        return Err(SourceSetupError::KeyColumnForOtherFormat { format });
    }
    if options.fields.is_some() && !FIELDS_FORMATS.contains(&format) {
        return Err(SourceSetupError::FieldsForOtherFormat { format });
    }
    if format == SourceFormat::Parquet && options.value_column.is_none() {
        return Err(SourceSetupError::MissingValueColumn);
    }
    if !options.samples {
        if let Some((option, _)) = options
            .given_sample_options()
            .into_iter()
            .find(|(_, given)| *given)
        {
            return Err(SourceSetupError::NeedsSamples { option });
        }
    }
    Ok(())
}

/// Opens checked sources.
fn open(
    format: SourceFormat,
    sources: &[&OsStr],
    options: &SourceOptions,
    target: Option<&Path>,
) -> Result<Box<dyn Source>, SourceSetupError> {
    let paths: Vec<PathBuf> = sources.iter().map(PathBuf::from).collect();
    Ok(match format {
        SourceFormat::Dir => {
            let mut dir_options = options.dir_options();
            dir_options.skip_dirs.extend(target.map(Path::to_owned));
            let roots = paths
                .iter()
                .map(|root| Ok(Box::new(DirSource::new(root, &dir_options)?) as Box<dyn Source>))
                .collect::<Result<Vec<_>, SourceError>>()?;
            if options.labels.is_some() {
                same_classes(&paths, &roots)?;
            }
            Box::new(Chain::new(roots))
        }
        SourceFormat::Tar => {
            // Archive names go through brace expansion, which works on text.
            let names = sources
                .iter()
                .map(|name| {
                    name.to_str().map(str::to_owned).ok_or_else(|| {
                        SourceError::Usage(format!(
                            "{}: a tar archive name must be valid UTF-8 (rename it, or pipe it to `-`)",
                            name.to_string_lossy()
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            Box::new(TarSource::with_options(&names, &options.tar_options())?)
        }
        SourceFormat::Parquet => Box::new(ParquetSource::new(&paths, options.parquet_options())?),
        SourceFormat::Csv => Box::new(CsvSource::new(
            &paths,
            CsvOptions {
                path_column: options
                    .path_column
                    .clone()
                    .unwrap_or_else(|| "path".to_owned()),
                key_column: options.key_column.clone(),
                root: options.root.clone(),
                delimiter: options.delimiter.unwrap_or(b','),
                fields: options.fields.clone().unwrap_or_default(),
                field_type: options.field_type.clone(),
            },
        )?),
        SourceFormat::Tfrecord => {
            Box::new(TfRecordSource::new(&paths, options.tfrecord_options())?)
        }
        SourceFormat::Jsonl => Box::new(JsonlSource::new(&paths, options.jsonl_options())?),
    })
}

/// Refuses directories labelled by folder whose class folders differ.
fn same_classes(paths: &[PathBuf], roots: &[Box<dyn Source>]) -> Result<(), SourceSetupError> {
    let classes = |root: &dyn Source| -> Vec<String> {
        match root.metadata().get("class_names") {
            Some(serde_json::Value::Array(names)) => names
                .iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        }
    };
    let first = classes(roots[0].as_ref());
    for (path, root) in paths.iter().zip(roots).skip(1) {
        let other = classes(root.as_ref());
        if other != first {
            return Err(SourceSetupError::DifferentClasses {
                first: paths[0].display().to_string(),
                first_classes: first,
                other: path.display().to_string(),
                other_classes: other,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
