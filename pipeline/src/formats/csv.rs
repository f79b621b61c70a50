//! `csv`: CSV files listing file paths, one value per row
//! ([`bcd_converters::csv_source`]); local only.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use bcd_converters::csv_source::{CsvOptions, CsvSource};
use bcd_converters::Source;

use super::{Format, OptionSpec, Sign, SourceName, FIELDS, KEY_COLUMN};
use crate::source_errors::SourceSetupError;
use crate::source_format::SourceFormat;
use crate::source_options::SourceOptions;

#[allow(non_upper_case_globals)]
impl SourceFormat {
    /// CSV files listing file paths, one value per row.
    pub const Csv: SourceFormat = SourceFormat::named("csv");
}

/// The descriptor of [`SourceFormat::Csv`].
pub(crate) struct Csv;

static OPTIONS: &[OptionSpec] = &[
    KEY_COLUMN,
    OptionSpec {
        field: "path_column",
        given: |o| o.path_column.is_some(),
    },
    OptionSpec {
        field: "root",
        given: |o| o.root.is_some(),
    },
    OptionSpec {
        field: "delimiter",
        given: |o| o.delimiter.is_some(),
    },
    FIELDS,
    OptionSpec {
        field: "field_type",
        given: |o| !o.field_type.is_empty(),
    },
];

impl Format for Csv {
    fn format(&self) -> SourceFormat {
        SourceFormat::Csv
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn name_sign(&self, name: &SourceName<'_>, _options: &SourceOptions) -> Option<Sign> {
        name.ends_with_any(&[".csv", ".tsv"]).then_some(Sign::Name)
    }

    fn open(
        &self,
        sources: &[&OsStr],
        options: &SourceOptions,
        _target: Option<&Path>,
    ) -> Result<Box<dyn Source>, SourceSetupError> {
        let paths: Vec<PathBuf> = sources.iter().map(PathBuf::from).collect();
        Ok(Box::new(CsvSource::new(
            &paths,
            CsvOptions {
                path_column: options
                    .path_column
                    .clone()
                    .unwrap_or_else(|| "path".to_owned()),
                key_column: options.key_column.clone(),
                root: options.root.clone(),
                delimiter: options.delimiter.unwrap_or(b','),
                fields: options.fields.clone().unwrap_or_default(),
                field_type: options.field_type.clone(),
            },
        )?))
    }
}
