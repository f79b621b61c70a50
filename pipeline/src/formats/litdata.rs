//! `litdata`: LitData `optimize` output, `index.json` and its chunks
//! ([`bcd_converters::litdata_source`]); local only.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use bcd_converters::litdata_source::{is_litdata, LitdataSource};
use bcd_converters::Source;

use super::mds::sample_options;
use super::{Format, OptionSpec, Probe, Sign, FIELDS, KEY_COLUMN, VALUE_COLUMN};
use crate::source_errors::SourceSetupError;
use crate::source_format::SourceFormat;
use crate::source_options::SourceOptions;

#[allow(non_upper_case_globals)]
impl SourceFormat {
    /// LitData `optimize` output: `index.json` and its `chunk-*.bin` files.
    pub const Litdata: SourceFormat = SourceFormat::named("litdata");
}

/// The descriptor of [`SourceFormat::Litdata`].
pub(crate) struct Litdata;

static OPTIONS: &[OptionSpec] = &[VALUE_COLUMN, KEY_COLUMN, FIELDS];

impl Format for Litdata {
    fn format(&self) -> SourceFormat {
        SourceFormat::Litdata
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn disk_sign(&self, probe: &Probe<'_>) -> std::io::Result<Option<Sign>> {
        // Only LitData writes an index.json with `config` and `chunks`: it beats the value
        // column's claim for Parquet, as a save_to_disk directory does.
        Ok((probe.is_dir && is_litdata(probe.path)).then_some(Sign::Layout))
    }

    fn open(
        &self,
        sources: &[&OsStr],
        options: &SourceOptions,
        _target: Option<&Path>,
    ) -> Result<Box<dyn Source>, SourceSetupError> {
        let dirs: Vec<PathBuf> = sources.iter().map(PathBuf::from).collect();
        Ok(Box::new(LitdataSource::open(
            &dirs,
            &sample_options(options),
        )?))
    }
}
