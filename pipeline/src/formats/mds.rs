//! `mds`: MosaicML Streaming (MDS) directories, `index.json` and its shards
//! ([`bcd_converters::mds_source`]); local only.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use bcd_converters::mds_source::{is_mds, MdsSource};
use bcd_converters::sample_shards::ColumnOptions;
use bcd_converters::Source;

use super::{Format, OptionSpec, Probe, Sign, FIELDS, KEY_COLUMN, VALUE_COLUMN};
use crate::source_errors::SourceSetupError;
use crate::source_format::SourceFormat;
use crate::source_options::SourceOptions;

#[allow(non_upper_case_globals)]
impl SourceFormat {
    /// MosaicML Streaming (MDS) directories: `index.json` and its shards.
    pub const Mds: SourceFormat = SourceFormat::named("mds");
}

/// The descriptor of [`SourceFormat::Mds`].
pub(crate) struct Mds;

static OPTIONS: &[OptionSpec] = &[VALUE_COLUMN, KEY_COLUMN, FIELDS];

/// The value, key and field columns of a source of sample shards (MDS and
/// LitData take the same options).
pub(super) fn sample_options(options: &SourceOptions) -> ColumnOptions {
    ColumnOptions {
        value_column: options.value_column.clone(),
        key_column: options.key_column.clone(),
        fields: options.fields.clone().unwrap_or_default(),
    }
}

impl Format for Mds {
    fn format(&self) -> SourceFormat {
        SourceFormat::Mds
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn disk_sign(&self, probe: &Probe<'_>) -> std::io::Result<Option<Sign>> {
        // Only MDS writes an index.json with a `shards` list: it beats the value
        // column's claim for Parquet, as a save_to_disk directory does.
        Ok((probe.is_dir && is_mds(probe.path)).then_some(Sign::Layout))
    }

    fn open(
        &self,
        sources: &[&OsStr],
        options: &SourceOptions,
        _target: Option<&Path>,
    ) -> Result<Box<dyn Source>, SourceSetupError> {
        let dirs: Vec<PathBuf> = sources.iter().map(PathBuf::from).collect();
        Ok(Box::new(MdsSource::open(&dirs, &sample_options(options))?))
    }
}
