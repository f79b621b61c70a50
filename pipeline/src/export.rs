//! `export`: a dataset's records, in order, to tar.

use bcd::Dataset;
use bcd_converters::tar_export::{ExportError, ExportSummary, Split, TarExporter, Target};

/// How members of a keyless dataset are named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Naming {
    /// Appended to the zero-padded record number of keyless records (e.g. `.jpg`).
    pub keyless_suffix: String,
}

/// Settings of one export.
#[derive(Clone, Debug)]
pub struct ExportOptions {
    /// Where the archives go.
    pub target: Target,
    /// Splitting into several archives.
    pub split: Split,
    /// Clean unsafe keys instead of refusing them.
    pub rename_unsafe: bool,
    /// Naming of keyless records.
    pub naming: Naming,
}

/// Width of keyless member names: enough digits for every index, at least 6.
fn index_width(len: usize) -> usize {
    len.saturating_sub(1).to_string().len().max(6)
}

/// Writes every record of `dataset` to tar, in dataset order: keyed records are
/// named by their key, keyless ones by their zero-padded index.
pub fn export(
    dataset: &Dataset,
    options: &ExportOptions,
) -> Result<ExportSummary, Box<dyn std::error::Error + Send + Sync>> {
    let mut exporter =
        TarExporter::new(options.target.clone(), options.split, options.rename_unsafe)?;
    let width = index_width(dataset.len());
    let mut buffer = Vec::new();
    let mut name = Vec::new();
    for index in 0..dataset.len() {
        name.clear();
        if dataset.keyed() {
            name.extend_from_slice(dataset.key_at(index)?);
        } else {
            name.extend_from_slice(
                format!("{index:0width$}{}", options.naming.keyless_suffix).as_bytes(),
            );
        }
        let value = dataset.at_with_buffer(index, &mut buffer)?;
        exporter.add(index as u64, &name, value).map_err(Box::new)?;
    }
    Ok(exporter.finish().map_err(|e: ExportError| Box::new(e))?)
}
