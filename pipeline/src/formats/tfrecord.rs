//! `tfrecord`: TFRecord files, plain or GZIP-compressed
//! ([`bcd_converters::tfrecord_source`]); local or streamed from object storage.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use bcd_converters::detect::Content;
use bcd_converters::tfrecord_source::{TfRecordOptions, TfRecordSource};
use bcd_converters::Source;

use super::{Format, OptionSpec, Probe, RemoteOpener, Sign, SourceName, FIELDS};
use crate::source_errors::SourceSetupError;
use crate::source_format::SourceFormat;
use crate::source_options::SourceOptions;

#[allow(non_upper_case_globals)]
impl SourceFormat {
    /// TFRecord files, plain or GZIP-compressed.
    pub const Tfrecord: SourceFormat = SourceFormat::named("tfrecord");
}

/// The descriptor of [`SourceFormat::Tfrecord`].
pub(crate) struct Tfrecord;

static OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        field: "feature",
        given: |o| o.feature.is_some(),
    },
    OptionSpec {
        field: "key_feature",
        given: |o| o.key_feature.is_some(),
    },
    FIELDS,
];

/// The TFRecord part of the options.
fn tfrecord_options(options: &SourceOptions) -> TfRecordOptions {
    TfRecordOptions {
        feature: options.feature.clone(),
        key_feature: options.key_feature.clone(),
        fields: options.fields.clone(),
    }
}

impl Format for Tfrecord {
    fn format(&self) -> SourceFormat {
        SourceFormat::Tfrecord
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn name_sign(&self, name: &SourceName<'_>, _options: &SourceOptions) -> Option<Sign> {
        // Also sharded names such as train.tfrecord-00000-of-00010.
        name.lower.contains(".tfrecord").then_some(Sign::Name)
    }

    fn disk_sign(&self, probe: &Probe<'_>) -> std::io::Result<Option<Sign>> {
        // A name that says nothing (TFX's GZIP TFRecord shards are `….gz`): the
        // first bytes, decompressed, may.
        Ok((probe.content()? == Some(Content::TfRecord)).then_some(Sign::Content))
    }

    fn open(
        &self,
        sources: &[&OsStr],
        options: &SourceOptions,
        _target: Option<&Path>,
    ) -> Result<Box<dyn Source>, SourceSetupError> {
        let paths: Vec<PathBuf> = sources.iter().map(PathBuf::from).collect();
        Ok(Box::new(TfRecordSource::new(
            &paths,
            tfrecord_options(options),
        )?))
    }

    fn remote_opener(&self) -> Option<RemoteOpener> {
        Some(|names, options| {
            let inputs = crate::remote_sources::streamed_inputs(names)?;
            Ok(Box::new(TfRecordSource::from_inputs(
                inputs,
                tfrecord_options(options),
            )?))
        })
    }
}
