//! `hf-disk`: Hugging Face `save_to_disk` directories, a `Dataset` or one split
//! of a `DatasetDict` ([`bcd_converters::hf_disk_source`]), with the columns
//! taken as Parquet takes them; local only.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use bcd_converters::hf_disk_source::{is_hf_disk, HfDiskOptions, HfDiskSource};
use bcd_converters::Source;

use super::parquet::{need_value_column, parquet_options, COLUMN_OPTIONS};
use super::{Format, OptionSpec, Probe, Sign};
use crate::source_errors::SourceSetupError;
use crate::source_format::SourceFormat;
use crate::source_options::SourceOptions;

#[allow(non_upper_case_globals)]
impl SourceFormat {
    /// Hugging Face `save_to_disk` directories (needs a value column; a
    /// `DatasetDict` a split).
    pub const HfDisk: SourceFormat = SourceFormat::named("hf-disk");
}

/// The descriptor of [`SourceFormat::HfDisk`].
pub(crate) struct HfDisk;

static OPTIONS: [OptionSpec; 5] = {
    let [value, key, skip_nulls, fields] = COLUMN_OPTIONS;
    [
        value,
        key,
        skip_nulls,
        fields,
        OptionSpec {
            field: "split",
            given: |o| o.split.is_some(),
        },
    ]
};

impl Format for HfDisk {
    fn format(&self) -> SourceFormat {
        SourceFormat::HfDisk
    }

    fn options(&self) -> &'static [OptionSpec] {
        &OPTIONS
    }

    fn disk_sign(&self, probe: &Probe<'_>) -> std::io::Result<Option<Sign>> {
        Ok((probe.is_dir && is_hf_disk(probe.path)).then_some(Sign::Layout))
    }

    fn check(&self, options: &SourceOptions) -> Result<(), SourceSetupError> {
        need_value_column(SourceFormat::HfDisk, options)
    }

    fn open(
        &self,
        sources: &[&OsStr],
        options: &SourceOptions,
        _target: Option<&Path>,
    ) -> Result<Box<dyn Source>, SourceSetupError> {
        let hf_options = HfDiskOptions {
            columns: parquet_options(options),
            split: options.split.clone(),
        };
        let dirs: Vec<PathBuf> = sources.iter().map(PathBuf::from).collect();
        Ok(Box::new(HfDiskSource::from_dirs(&dirs, hf_options)?))
    }
}
