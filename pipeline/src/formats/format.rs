//! What a format descriptor says: the [`Format`] trait, modelled on DataFusion's
//! `FileFormat`. A descriptor holds everything the pipeline knows of its format
//! (its name, how a source is recognised, which options it takes and checks, how
//! it is opened locally and in object storage); the registry (`mod.rs`) derives
//! the format list, detection, option checks and the spelling table from them.

use std::cell::OnceCell;
use std::ffi::OsStr;
use std::io;
use std::path::Path;

use bcd_converters::detect::Content;
use bcd_converters::{Source, SourceError};

use crate::source_errors::SourceSetupError;
use crate::source_format::SourceFormat;
use crate::source_options::SourceOptions;

/// How sure a sign of a source's format is. When the formats' signs disagree the
/// surest wins, and among equally sure ones the format registered first. Signs of
/// the name are asked first; the file system only when no name says anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Sign {
    /// Any directory: the claim of the `dir` format, which a format recognising a
    /// directory by what it holds beats.
    AnyDirectory,
    /// The first bytes of a file, decompressed (or, for a format that is a
    /// directory, the files it holds).
    Content,
    /// A suffix or name pattern (`.parquet`, `x.tfrecord-00000-of-00010`).
    Name,
    /// An option only this format takes (`value_column` for Parquet): it beats a
    /// [`Sign::Name`], so that `dump.csv` with a value column is read as Parquet.
    Option,
    /// What a directory holds that only this format writes (`state.json` beside
    /// `dataset_info.json`, for hf-disk): it beats an option, so that a Hugging
    /// Face directory given a value column is not read as a directory of Parquet
    /// files. Unlike the other file-system signs it is asked even when the name
    /// says something, if the source is a local directory.
    Layout,
    /// A name nothing else can mean (`-` or a brace pattern for tar, `.jsonl`): it
    /// beats options, so that `value_column` with `a.jsonl` is refused as a
    /// Parquet option rather than read as Parquet.
    Certain,
}

/// A source's name, as the name signs look at it.
pub(crate) struct SourceName<'a> {
    /// As given.
    pub raw: &'a OsStr,
    /// Lower-cased; suffixes are ASCII, so a lossy decoding of a non-UTF-8 name
    /// keeps them.
    pub lower: String,
}

impl<'a> SourceName<'a> {
    pub(crate) fn new(raw: &'a OsStr) -> SourceName<'a> {
        SourceName {
            raw,
            lower: raw.to_string_lossy().to_ascii_lowercase(),
        }
    }

    /// Whether the name ends with one of `suffixes` (lower-case), in any case.
    pub(crate) fn ends_with_any(&self, suffixes: &[&str]) -> bool {
        suffixes.iter().any(|suffix| self.lower.ends_with(suffix))
    }
}

/// A local source that exists, as the file-system signs look at it.
pub(crate) struct Probe<'a> {
    /// Its path.
    pub path: &'a Path,
    /// Whether it is a directory.
    pub is_dir: bool,
    /// What its first bytes say, read once for all formats.
    content: OnceCell<Option<Content>>,
}

impl<'a> Probe<'a> {
    pub(crate) fn new(path: &'a Path, is_dir: bool) -> Probe<'a> {
        Probe {
            path,
            is_dir,
            content: OnceCell::new(),
        }
    }

    /// What the first bytes of a file say (`None` for a directory, or bytes no
    /// sniffer knows); see [`bcd_converters::detect::file_content`].
    pub(crate) fn content(&self) -> io::Result<Option<Content>> {
        if self.is_dir {
            return Ok(None);
        }
        if let Some(content) = self.content.get() {
            return Ok(*content);
        }
        let content = bcd_converters::detect::file_content(self.path)?;
        Ok(*self.content.get_or_init(|| content))
    }
}

/// One [`SourceOptions`] field a format takes, and whether it is given (not
/// `None`, empty or `false`: a given field is refused for other formats even with
/// its default value).
pub(crate) struct OptionSpec {
    /// The field's name, as messages name it.
    pub field: &'static str,
    /// Whether `options` gives it.
    pub given: fn(&SourceOptions) -> bool,
}

/// `value_column`, taken by several formats (Parquet, hf-disk, MDS, LitData):
/// declared once.
pub(crate) const VALUE_COLUMN: OptionSpec = OptionSpec {
    field: "value_column",
    given: |o| o.value_column.is_some(),
};

/// `key_column`, taken by several formats (Parquet, hf-disk, CSV): declared once.
pub(crate) const KEY_COLUMN: OptionSpec = OptionSpec {
    field: "key_column",
    given: |o| o.key_column.is_some(),
};

/// `fields`, taken by several formats (Parquet, hf-disk, CSV, TFRecord):
/// declared once.
pub(crate) const FIELDS: OptionSpec = OptionSpec {
    field: "fields",
    given: |o| o.fields.is_some(),
};

/// Opens sources in object storage: the names as given (URIs, maybe brace
/// patterns), with options checked by [`Format::check`].
pub(crate) type RemoteOpener =
    fn(&[String], &SourceOptions) -> Result<Box<dyn Source>, SourceError>;

/// A source format, as the pipeline knows it. Only [`Format::format`] and
/// [`Format::open`] are required; a format is a file format or a directory format
/// by the signs it gives ([`Format::name_sign`], [`Format::disk_sign`]) and by what
/// `open` does with the paths.
pub(crate) trait Format: Sync {
    /// Its name ([`SourceFormat::named`] in its own constant).
    fn format(&self) -> SourceFormat;

    /// The [`SourceOptions`] fields it takes, in the order messages name them. A
    /// given field that the sources' format does not take is refused; a field
    /// several formats take is listed by each.
    fn options(&self) -> &'static [OptionSpec];

    /// What a source's name (and the options) say of this format.
    fn name_sign(&self, _name: &SourceName<'_>, _options: &SourceOptions) -> Option<Sign> {
        None
    }

    /// What a local source whose name says nothing says of this format (a
    /// directory, or a file and its first bytes). An error is the source's: it
    /// could not be read.
    fn disk_sign(&self, _probe: &Probe<'_>) -> io::Result<Option<Sign>> {
        Ok(None)
    }

    /// Refuses options this format takes that do not go together (after the
    /// options of other formats were refused).
    fn check(&self, _options: &SourceOptions) -> Result<(), SourceSetupError> {
        Ok(())
    }

    /// Opens local sources, in order, as one source. A directory source never
    /// reads `target` (the dataset being written) or anything under it.
    fn open(
        &self,
        sources: &[&OsStr],
        options: &SourceOptions,
        target: Option<&Path>,
    ) -> Result<Box<dyn Source>, SourceSetupError>;

    /// How it is read from object storage; `None`: only local sources.
    fn remote_opener(&self) -> Option<RemoteOpener> {
        None
    }
}
