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

use bcd_converters::csv_source::{CsvOptions, CsvSource};
use bcd_converters::dir_source::{DirOptions, DirSource};
use bcd_converters::parquet_source::{ParquetOptions, ParquetSource};
use bcd_converters::tar_source::TarSource;
use bcd_converters::tfrecord_source::{TfRecordOptions, TfRecordSource};
use bcd_converters::{Chain, Source, SourceError};

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
}

impl SourceFormat {
    /// Every format, in the order the messages list them.
    pub const ALL: [SourceFormat; 5] = [
        SourceFormat::Dir,
        SourceFormat::Tar,
        SourceFormat::Parquet,
        SourceFormat::Csv,
        SourceFormat::Tfrecord,
    ];

    /// The lower-case name, as `--format` and [`FromStr`] take it.
    pub fn name(self) -> &'static str {
        match self {
            SourceFormat::Dir => "dir",
            SourceFormat::Tar => "tar",
            SourceFormat::Parquet => "parquet",
            SourceFormat::Csv => "csv",
            SourceFormat::Tfrecord => "tfrecord",
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
    /// Parquet, CSV and TFRecord suffixes, `-` and brace patterns are tar,
    /// existing directories are dir; a given `value_column` means Parquet).
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
}

impl SourceOptions {
    /// The directory-walk part of the options, e.g. to estimate the bytes to come
    /// with [`DirSource::total_bytes`].
    pub fn dir_options(&self) -> DirOptions {
        DirOptions {
            include: self.include.clone(),
            exclude: self.exclude.clone(),
            follow_links: self.follow_links,
            skip_dirs: Vec::new(),
        }
    }

    /// The options that are given and belong to one format only, by field name,
    /// with the format they belong to.
    fn given_single_format(&self) -> [(&'static str, bool, SourceFormat); 10] {
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
        ]
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
    /// The format of a source cannot be told from its name, and it is not a
    /// directory.
    #[error(
        "{name}: cannot tell its format from the name; pass `format` {}",
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
    /// Parquet sources without a value column.
    #[error("parquet sources need `value_column` COL (and `key_column` COL for a keyed dataset)")]
    MissingValueColumn,
    /// Opening a source failed (a missing file, a bad glob or brace pattern, an
    /// unreadable Parquet footer, ...).
    #[error(transparent)]
    Open(#[from] SourceError),
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
    match std::fs::metadata(name) {
        Ok(meta) if meta.is_dir() => Ok(SourceFormat::Dir),
        Ok(_) => Err(SourceSetupError::UndetectableFormat {
            name: name.to_string_lossy().into_owned(),
        }),
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
    if format == SourceFormat::Parquet && options.value_column.is_none() {
        return Err(SourceSetupError::MissingValueColumn);
    }
    Ok(())
}

/// Opens checked sources.
fn open(
    format: SourceFormat,
    sources: &[&OsStr],
    options: &SourceOptions,
    target: Option<&Path>,
) -> Result<Box<dyn Source>, SourceError> {
    let paths: Vec<PathBuf> = sources.iter().map(PathBuf::from).collect();
    Ok(match format {
        SourceFormat::Dir => {
            let mut dir_options = options.dir_options();
            dir_options.skip_dirs.extend(target.map(Path::to_owned));
            Box::new(Chain::new(
                paths
                    .iter()
                    .map(
                        |root| Ok(Box::new(DirSource::new(root, &dir_options)?) as Box<dyn Source>),
                    )
                    .collect::<Result<Vec<_>, SourceError>>()?,
            ))
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
            Box::new(TarSource::new(&names)?)
        }
        SourceFormat::Parquet => Box::new(ParquetSource::new(
            &paths,
            ParquetOptions {
                // check_options refused Parquet without a value column.
                value_column: options.value_column.clone().unwrap_or_default(),
                key_column: options.key_column.clone(),
                skip_nulls: options.skip_nulls,
            },
        )?),
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
            },
        )?),
        SourceFormat::Tfrecord => Box::new(TfRecordSource::new(
            &paths,
            TfRecordOptions {
                feature: options.feature.clone(),
                key_feature: options.key_feature.clone(),
            },
        )?),
    })
}

#[cfg(test)]
mod tests;
