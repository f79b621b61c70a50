//! `open_sources`: from source names and plain options to one [`Source`], the way
//! `bcd ingest` does it: detect the format from the names (unless given), refuse
//! options that belong to another format, open the inputs. Kept free of any
//! argument parser so that every front end (the CLI, a Python binding) shares the
//! rules and the messages. What each format recognises, takes and opens is its
//! descriptor's (`formats/`).

use std::ffi::OsStr;
use std::fmt;
use std::path::Path;

use bcd_converters::{Source, SourceError};

use crate::formats;
use crate::source_errors::SourceSetupError;
use crate::source_format::{and_list, SourceFormat};
use crate::source_options::SourceOptions;

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
                        formats::detect_by_name(OsStr::new(name), options)
                            .ok_or_else(|| undetectable(OsStr::new(name)))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                if formats.iter().any(|format| *format != formats[0]) {
                    return Err(SourceSetupError::MixedFormats { formats });
                }
                formats[0]
            }
        };
        formats::check_options(format, options)?;
        let source = open_remote(format, &names, options)?;
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
    formats::check_options(format, options)?;
    let source = format.descriptor().open(&sources, options, target)?;
    Ok(OpenedSource { format, source })
}

/// The format of one source, from its name, or failing that from the file system.
fn detect_format(name: &OsStr, options: &SourceOptions) -> Result<SourceFormat, SourceSetupError> {
    if let Some(format) = formats::detect_layout(name, options) {
        return Ok(format);
    }
    if let Some(format) = formats::detect_by_name(name, options) {
        return Ok(format);
    }
    match formats::detect_on_disk(Path::new(name)) {
        Ok(Some(format)) => Ok(format),
        Ok(None) => Err(undetectable(name)),
        Err(source) => Err(SourceSetupError::Unreadable {
            name: name.to_string_lossy().into_owned(),
            source,
        }),
    }
}

fn undetectable(name: &OsStr) -> SourceSetupError {
    SourceSetupError::UndetectableFormat {
        name: name.to_string_lossy().into_owned(),
        known: SourceFormat::all().collect(),
    }
}

/// Opens checked sources in object storage, with the format's remote opener.
fn open_remote(
    format: SourceFormat,
    names: &[String],
    options: &SourceOptions,
) -> Result<Box<dyn Source>, SourceError> {
    match format.descriptor().remote_opener() {
        Some(open) => open(names, options),
        None => Err(SourceError::Usage(format!(
            "{}: {format} sources must be local; object storage holds {} sources",
            names.first().map(String::as_str).unwrap_or_default(),
            and_list(&formats::remote_formats())
        ))),
    }
}

#[cfg(test)]
mod tests;
