//! `export`: a dataset's records, in order, to tar.

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bcd::Dataset;
use bcd_converters::tar_export::{self, ExportSummary, Split, TarExporter, Target};

/// How members of a keyless dataset are named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Naming {
    /// Appended to the zero-padded record number of keyless records (e.g. `.jpg`).
    pub keyless_suffix: String,
}

/// Progress of an export, reported after every member.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExportProgress {
    /// Members written so far.
    pub members: u64,
    /// Payload bytes written so far.
    pub bytes: u64,
    /// Members the export will write in all (the dataset's length).
    pub total_members: u64,
}

/// A progress callback, called after every member with the counts so far.
pub type ExportProgressFn = Arc<dyn Fn(&ExportProgress) + Send + Sync>;

/// Settings of one export.
#[derive(Clone)]
pub struct ExportOptions {
    /// Where the archives go.
    pub target: Target,
    /// Splitting into several archives.
    pub split: Split,
    /// Clean unsafe keys instead of refusing them; cleaned names are made unique
    /// against every name of the export.
    pub rename_unsafe: bool,
    /// Naming of keyless records.
    pub naming: Naming,
    /// Set (from a signal handler, typically) to stop the export at the next
    /// record: the archive being written is removed, and the export fails with
    /// [`ExportError::Interrupted`]. Archives of a split export that were already
    /// complete stay.
    pub interrupt: Option<Arc<AtomicBool>>,
    /// Called after every member (default: none).
    pub progress: Option<ExportProgressFn>,
    /// The records to export, in this order (default: all, in order); see
    /// [`crate::sample_records`].
    pub records: Option<Vec<u64>>,
}

impl fmt::Debug for ExportOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExportOptions")
            .field("target", &self.target)
            .field("split", &self.split)
            .field("rename_unsafe", &self.rename_unsafe)
            .field("naming", &self.naming)
            .field("interrupt", &self.interrupt)
            .field("progress", &self.progress.as_ref().map(|_| "callback"))
            .field("records", &self.records.as_ref().map(Vec::len))
            .finish()
    }
}

impl ExportOptions {
    /// Options for one archive at `target`, unsplit, refusing unsafe names, with
    /// no suffix for keyless names, no interrupt flag and no progress callback.
    pub fn new(target: Target) -> ExportOptions {
        ExportOptions {
            target,
            split: Split::default(),
            rename_unsafe: false,
            naming: Naming {
                keyless_suffix: String::new(),
            },
            interrupt: None,
            progress: None,
            records: None,
        }
    }
}

/// Why an export failed. No partial archive is left behind in any case (a split
/// export keeps the archives it completed before the failure).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The archive side: a bad target or pattern (see
    /// [`tar_export::ExportError::is_usage`]), an unsafe name, or a failed write
    /// to the output.
    #[error(transparent)]
    Archive(#[from] tar_export::ExportError),
    /// Reading the dataset failed.
    #[error(transparent)]
    Store(#[from] bcd::Error),
    /// Stopped through [`ExportOptions::interrupt`].
    #[error("interrupted; the archive being written was removed")]
    Interrupted,
}

impl ExportError {
    /// Whether the options cannot work (a bad target or pattern, splitting without
    /// a pattern): found before anything was written, a usage error for a front end.
    pub fn is_usage(&self) -> bool {
        matches!(self, ExportError::Archive(e) if e.is_usage())
    }

    /// The error of writing to the output, when that is what failed: a front end
    /// writing to a pipe can treat [`io::ErrorKind::BrokenPipe`] as the reader
    /// having stopped early.
    pub fn write_error(&self) -> Option<&io::Error> {
        match self {
            ExportError::Archive(tar_export::ExportError::Write { source, .. }) => Some(source),
            _ => None,
        }
    }
}

/// Width of keyless member names: enough digits for every index, at least 6.
fn index_width(len: usize) -> usize {
    len.saturating_sub(1).to_string().len().max(6)
}

/// Writes every record of `dataset` (or [`ExportOptions::records`]) to tar, in
/// dataset order (or that order): keyed records are named by their key, keyless
/// ones by their zero-padded index.
pub fn export(dataset: &Dataset, options: &ExportOptions) -> Result<ExportSummary, ExportError> {
    let mut exporter =
        TarExporter::new(options.target.clone(), options.split, options.rename_unsafe)?;
    let all: Vec<u64>;
    let records = match &options.records {
        Some(records) => records,
        None => {
            all = (0..dataset.len() as u64).collect();
            &all
        }
    };
    let at = |record: u64| usize::try_from(record).unwrap_or(usize::MAX);
    if options.rename_unsafe && dataset.keyed() {
        // Renamed keys must not take the name of any key, later ones included.
        for &record in records {
            exporter.reserve_names([dataset.key_at(at(record))?]);
        }
    }
    let interrupted = || {
        options
            .interrupt
            .as_ref()
            .is_some_and(|flag| flag.load(Ordering::Relaxed))
    };
    let width = index_width(dataset.len());
    let mut buffer = Vec::new();
    let mut name = Vec::new();
    let mut progress = ExportProgress {
        total_members: records.len() as u64,
        ..ExportProgress::default()
    };
    for &record in records {
        let index = at(record);
        if interrupted() {
            return Err(ExportError::Interrupted);
        }
        name.clear();
        if dataset.keyed() {
            name.extend_from_slice(dataset.key_at(index)?);
        } else {
            name.extend_from_slice(
                format!("{index:0width$}{}", options.naming.keyless_suffix).as_bytes(),
            );
        }
        let value = dataset.at_with_buffer(index, &mut buffer)?;
        exporter.add(index as u64, &name, value)?;
        progress.members += 1;
        progress.bytes += value.len() as u64;
        if let Some(report) = &options.progress {
            report(&progress);
        }
    }
    if interrupted() {
        return Err(ExportError::Interrupted);
    }
    Ok(exporter.finish()?)
}
