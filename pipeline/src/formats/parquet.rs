//! `parquet`: Parquet files, directories of them, or patterns, with a value
//! column ([`bcd_converters::parquet_source`]); local, or read by ranges from
//! object storage.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use bcd_converters::detect::Content;
use bcd_converters::parquet_source::ParquetSource;
use bcd_converters::Source;
use bcd_converters::TableOptions;

use super::{
    Format, OptionSpec, Probe, RemoteOpener, Sign, SourceName, FIELDS, KEY_COLUMN, VALUE_COLUMN,
};
use crate::source_errors::SourceSetupError;
use crate::source_format::SourceFormat;
use crate::source_options::SourceOptions;

#[allow(non_upper_case_globals)]
impl SourceFormat {
    /// Parquet files, directories of them, or patterns (needs a value column).
    pub const Parquet: SourceFormat = SourceFormat::named("parquet");
}

/// The descriptor of [`SourceFormat::Parquet`].
pub(crate) struct Parquet;

/// The options of the columns of a table: Parquet's, and hf-disk's besides its
/// own.
pub(super) const COLUMN_OPTIONS: [OptionSpec; 4] = [
    VALUE_COLUMN,
    KEY_COLUMN,
    OptionSpec {
        field: "skip_nulls",
        given: |o| o.skip_nulls,
    },
    FIELDS,
];

static OPTIONS: &[OptionSpec] = &COLUMN_OPTIONS;

/// The column part of the options (checked by [`need_value_column`]).
pub(super) fn parquet_options(options: &SourceOptions) -> TableOptions {
    TableOptions {
        // `check` refused sources without a value column.
        value_column: options.value_column.clone().unwrap_or_default(),
        key_column: options.key_column.clone(),
        skip_nulls: options.skip_nulls,
        fields: options.fields.clone().unwrap_or_default(),
    }
}

impl Format for Parquet {
    fn format(&self) -> SourceFormat {
        SourceFormat::Parquet
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn name_sign(&self, name: &SourceName<'_>, options: &SourceOptions) -> Option<Sign> {
        if options.value_column.is_some() {
            return Some(Sign::Option);
        }
        name.ends_with_any(&[".parquet", ".pq"])
            .then_some(Sign::Name)
    }

    fn disk_sign(&self, probe: &Probe<'_>) -> std::io::Result<Option<Sign>> {
        Ok((probe.content()? == Some(Content::Parquet)).then_some(Sign::Content))
    }

    fn check(&self, options: &SourceOptions) -> Result<(), SourceSetupError> {
        need_value_column(SourceFormat::Parquet, options)
    }

    fn open(
        &self,
        sources: &[&OsStr],
        options: &SourceOptions,
        _target: Option<&Path>,
    ) -> Result<Box<dyn Source>, SourceSetupError> {
        let paths: Vec<PathBuf> = sources.iter().map(PathBuf::from).collect();
        Ok(Box::new(ParquetSource::new(
            &paths,
            parquet_options(options),
        )?))
    }

    fn remote_opener(&self) -> Option<RemoteOpener> {
        Some(|names, options| {
            let inputs = crate::remote_sources::parquet_inputs(names)?;
            Ok(Box::new(ParquetSource::from_inputs(
                inputs,
                parquet_options(options),
            )?))
        })
    }
}

/// Refuses `format`'s sources (a table format's) without a value column.
pub(super) fn need_value_column(
    format: SourceFormat,
    options: &SourceOptions,
) -> Result<(), SourceSetupError> {
    match options.value_column {
        None => Err(SourceSetupError::MissingValueColumn { format }),
        Some(_) => Ok(()),
    }
}
