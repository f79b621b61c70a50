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
    /// Write each record as a WebDataset sample: its value and one member per
    /// field (see [`crate::export_samples`]); a split's `max_members` then
    /// counts samples. Local datasets only. Default: false, one member per
    /// record.
    pub samples: bool,
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
            samples: false,
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
    /// Reading a dataset in object storage failed.
    #[error(transparent)]
    Remote(#[from] bcd_remote::RemoteError),
    /// Reading the records' fields failed, or a field cannot be a member.
    #[error(transparent)]
    Fields(#[from] crate::fields::FieldsIoError),
    /// A Megatron export cannot be written (see [`crate::export_megatron`]).
    #[error(transparent)]
    Megatron(#[from] crate::export_megatron::MegatronExportError),
    /// A copy into a new dataset committed its records, but the source's views
    /// could not be written beside them.
    #[error("{}: the records were copied and committed, but the views of the source could not be carried", dataset.display())]
    ViewsNotCarried {
        /// The new dataset.
        dataset: std::path::PathBuf,
        /// Why.
        #[source]
        source: Box<crate::views::ViewError>,
    },
    /// Stopped through [`ExportOptions::interrupt`].
    #[error("interrupted; the archive being written was removed")]
    Interrupted,
}

impl ExportError {
    /// Whether the options cannot work (a bad target or pattern, splitting without
    /// a pattern): found before anything was written, a usage error for a front end.
    pub fn is_usage(&self) -> bool {
        match self {
            ExportError::Archive(e) => e.is_usage(),
            ExportError::Megatron(e) => e.is_usage(),
            _ => false,
        }
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

/// What [`ExportRecords::for_each_record`] calls: `(index, key, value)`.
pub type RecordFn<'a> = dyn FnMut(usize, &[u8], &[u8]) -> Result<(), ExportError> + 'a;

/// A dataset an export reads: a local [`Dataset`] or a
/// [`bcd_remote::RemoteDataset`] (streamed shard by shard).
pub trait ExportRecords {
    /// Number of records.
    fn len(&self) -> usize;
    /// Whether there are no records.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether records carry keys.
    fn keyed(&self) -> bool;
    /// The dataset itself when it is local (its fields are read from it).
    fn local(&self) -> Option<&Dataset> {
        None
    }
    /// Calls `f` with the key of every record of `records` (default: all), in
    /// that order (keyed datasets only).
    fn for_each_key(
        &self,
        records: Option<&[u64]>,
        f: &mut dyn FnMut(&[u8]) -> Result<(), ExportError>,
    ) -> Result<(), ExportError>;
    /// Calls `f(index, key, value)` with every record of `records` (default:
    /// all), in that order, values decoded.
    fn for_each_record(
        &self,
        records: Option<&[u64]>,
        f: &mut RecordFn<'_>,
    ) -> Result<(), ExportError>;
}

impl ExportRecords for Dataset {
    fn len(&self) -> usize {
        Dataset::len(self)
    }

    fn keyed(&self) -> bool {
        Dataset::keyed(self)
    }

    fn local(&self) -> Option<&Dataset> {
        Some(self)
    }

    fn for_each_key(
        &self,
        records: Option<&[u64]>,
        f: &mut dyn FnMut(&[u8]) -> Result<(), ExportError>,
    ) -> Result<(), ExportError> {
        for index in selected(Dataset::len(self), records) {
            f(self.key_at(index)?)?;
        }
        Ok(())
    }

    fn for_each_record(
        &self,
        records: Option<&[u64]>,
        f: &mut RecordFn<'_>,
    ) -> Result<(), ExportError> {
        let mut buffer = Vec::new();
        for index in selected(Dataset::len(self), records) {
            let key = match Dataset::keyed(self) {
                true => self.key_at(index)?,
                false => &[],
            };
            let value = self.at_with_buffer(index, &mut buffer)?;
            f(index, key, value)?;
        }
        Ok(())
    }
}

impl ExportRecords for bcd_remote::RemoteDataset {
    fn len(&self) -> usize {
        bcd_remote::RemoteDataset::len(self)
    }

    fn keyed(&self) -> bool {
        bcd_remote::RemoteDataset::keyed(self)
    }

    fn for_each_key(
        &self,
        records: Option<&[u64]>,
        f: &mut dyn FnMut(&[u8]) -> Result<(), ExportError>,
    ) -> Result<(), ExportError> {
        if let Some(records) = records.filter(|r| !streamed(self.len(), r)) {
            for index in selected(self.len(), Some(records)) {
                self.resolve_index(index as i64)?;
                f(&self.key(index)?)?;
            }
            return Ok(());
        }
        let mut wanted = Wanted::new(records);
        let mut failed = None;
        let read = bcd_remote::RemoteDataset::for_each_key(self, |index, key| {
            if !wanted.take(index) {
                return Ok(true);
            }
            match f(key) {
                Ok(()) => Ok(true),
                Err(e) => {
                    failed = Some(e);
                    Ok(false)
                }
            }
        });
        match failed {
            Some(e) => Err(e),
            None => Ok(read?),
        }
    }

    fn for_each_record(
        &self,
        records: Option<&[u64]>,
        f: &mut RecordFn<'_>,
    ) -> Result<(), ExportError> {
        if let Some(records) = records.filter(|r| !streamed(self.len(), r)) {
            for index in selected(self.len(), Some(records)) {
                self.resolve_index(index as i64)?;
                let key = match self.keyed() {
                    true => self.key(index)?,
                    false => Vec::new(),
                };
                f(index, &key, &self.value(index)?)?;
            }
            return Ok(());
        }
        let mut wanted = Wanted::new(records);
        let mut failed = None;
        let read = bcd_remote::RemoteDataset::for_each_record(self, |index, key, stored| {
            if !wanted.take(index) {
                return Ok(());
            }
            let span = self.span(index);
            let value = self.decode(index, &span, stored)?;
            f(index, key, &value).map_err(|e| {
                failed = Some(e);
                // Stops the stream; the export's own error is returned below.
                bcd_remote::RemoteError::Interrupted
            })
        });
        match failed {
            Some(e) => Err(e),
            None => Ok(read?),
        }
    }
}

/// The record numbers `records` names (default: all), as indices (a number past
/// `usize` becomes one past the end, which reading refuses).
fn selected(len: usize, records: Option<&[u64]>) -> Box<dyn Iterator<Item = usize> + '_> {
    match records {
        None => Box::new(0..len),
        Some(records) => Box::new(
            records
                .iter()
                .map(|&record| usize::try_from(record).unwrap_or(usize::MAX)),
        ),
    }
}

/// Whether the records `records` of a remote dataset of `len` records are read
/// by streaming every record and keeping theirs (in increasing order, and at
/// least one in 64 of them), rather than by a ranged read each.
fn streamed(len: usize, records: &[u64]) -> bool {
    records.len().saturating_mul(64) >= len && records.windows(2).all(|w| w[0] < w[1])
}

/// The records a stream keeps: all, or those of an increasing list.
struct Wanted<'a> {
    records: Option<&'a [u64]>,
}

impl<'a> Wanted<'a> {
    fn new(records: Option<&'a [u64]>) -> Self {
        Wanted { records }
    }

    /// Whether record `index` (streamed in increasing order) is kept.
    fn take(&mut self, index: usize) -> bool {
        let Some(records) = self.records else {
            return true;
        };
        let skip = records.partition_point(|&r| r < index as u64);
        let rest = &records[skip..];
        self.records = Some(rest);
        rest.first() == Some(&(index as u64))
    }
}

/// Writes every record of `dataset` (or [`ExportOptions::records`]) to tar, in
/// dataset order (or that order): keyed records are named by their key, keyless
/// ones by their zero-padded index.
pub fn export(
    dataset: &dyn ExportRecords,
    options: &ExportOptions,
) -> Result<ExportSummary, ExportError> {
    let mut exporter =
        TarExporter::new(options.target.clone(), options.split, options.rename_unsafe)?;
    let mut samples = match (options.samples, dataset.local()) {
        (false, _) => None,
        (true, Some(local)) => Some(crate::export_samples::SampleMembers::new(local)?),
        (true, None) => {
            return Err(bcd_remote::RemoteError::RemoteNotSupported {
                uri: "the dataset".into(),
                what: "a dataset exported as samples (pull it first)".into(),
            }
            .into())
        }
    };
    if options.rename_unsafe && dataset.keyed() && samples.is_none() {
        // Renamed keys must not take the name of any key, later ones included.
        dataset.for_each_key(options.records.as_deref(), &mut |key| {
            exporter.reserve_names([key]);
            Ok(())
        })?;
    }
    let interrupted = || {
        options
            .interrupt
            .as_ref()
            .is_some_and(|flag| flag.load(Ordering::Relaxed))
    };
    let width = index_width(dataset.len());
    let keyed = dataset.keyed();
    let mut name = Vec::new();
    let mut progress = ExportProgress {
        total_members: options.records.as_ref().map_or(dataset.len(), Vec::len) as u64,
        ..ExportProgress::default()
    };
    dataset.for_each_record(options.records.as_deref(), &mut |index, key, value| {
        if interrupted() {
            return Err(ExportError::Interrupted);
        }
        name.clear();
        if keyed {
            name.extend_from_slice(key);
        } else {
            name.extend_from_slice(
                format!("{index:0width$}{}", options.naming.keyless_suffix).as_bytes(),
            );
        }
        match samples.as_mut() {
            None => {
                exporter.add(index as u64, &name, value)?;
                progress.members += 1;
                progress.bytes += value.len() as u64;
            }
            Some(samples) => {
                let members = samples.members(index, &name, value)?;
                let members: Vec<(Vec<u8>, &[u8])> =
                    members.iter().map(|(n, b)| (n.clone(), &**b)).collect();
                exporter.add_sample(index as u64, &members)?;
                progress.members += members.len() as u64;
                progress.bytes += members.iter().map(|(_, b)| b.len() as u64).sum::<u64>();
            }
        }
        if let Some(report) = &options.progress {
            report(&progress);
        }
        Ok(())
    })?;
    if interrupted() {
        return Err(ExportError::Interrupted);
    }
    Ok(exporter.finish()?)
}
