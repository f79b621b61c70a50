//! `jsonl`: JSON Lines files, plain, gzip or zstd, one record per object
//! ([`bcd_converters::jsonl_source`]); local or streamed from object storage.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use bcd_converters::jsonl_source::{JsonlOptions, JsonlSource};
use bcd_converters::Source;

use super::{Format, OptionSpec, RemoteOpener, Sign, SourceName};
use crate::source_errors::SourceSetupError;
use crate::source_format::SourceFormat;
use crate::source_options::SourceOptions;

#[allow(non_upper_case_globals)]
impl SourceFormat {
    /// JSON Lines files, plain, gzip or zstd: one record per object.
    pub const Jsonl: SourceFormat = SourceFormat::named("jsonl");
}

/// The descriptor of [`SourceFormat::Jsonl`].
pub(crate) struct Jsonl;

static OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        field: "value_field",
        given: |o| o.value_field.is_some(),
    },
    OptionSpec {
        field: "value_base64",
        given: |o| o.value_base64,
    },
    OptionSpec {
        field: "key_field",
        given: |o| o.key_field.is_some(),
    },
    OptionSpec {
        field: "schema",
        given: |o| o.schema.is_some(),
    },
];

/// The JSON Lines part of the options.
fn jsonl_options(options: &SourceOptions) -> JsonlOptions {
    JsonlOptions {
        value_field: options
            .value_field
            .clone()
            .unwrap_or_else(|| JsonlOptions::default().value_field),
        value_base64: options.value_base64,
        key_field: options.key_field.clone(),
        schema: options.schema.clone(),
        ..JsonlOptions::default()
    }
}

impl Format for Jsonl {
    fn format(&self) -> SourceFormat {
        SourceFormat::Jsonl
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn name_sign(&self, name: &SourceName<'_>, _options: &SourceOptions) -> Option<Sign> {
        // Certain, so that `value_column` on a .jsonl file is refused as a Parquet
        // option rather than read as Parquet.
        name.ends_with_any(&[
            ".jsonl",
            ".jsonl.gz",
            ".jsonl.zst",
            ".jsonl.zstd",
            ".ndjson",
            ".ndjson.gz",
            ".ndjson.zst",
        ])
        .then_some(Sign::Certain)
    }

    fn open(
        &self,
        sources: &[&OsStr],
        options: &SourceOptions,
        _target: Option<&Path>,
    ) -> Result<Box<dyn Source>, SourceSetupError> {
        let paths: Vec<PathBuf> = sources.iter().map(PathBuf::from).collect();
        Ok(Box::new(JsonlSource::new(&paths, jsonl_options(options))?))
    }

    fn remote_opener(&self) -> Option<RemoteOpener> {
        Some(|names, options| {
            let inputs = crate::remote_sources::streamed_inputs(names)?;
            Ok(Box::new(JsonlSource::from_inputs(
                inputs,
                jsonl_options(options),
            )?))
        })
    }
}
