//! `tar`: tar archives (plain, gzip or zstd), WebDataset shards, brace patterns,
//! or `-` for stdin ([`bcd_converters::tar_source`]); local or streamed from
//! object storage.

use std::ffi::OsStr;
use std::path::Path;

use bcd_converters::detect::Content;
use bcd_converters::samples::SampleOptions;
use bcd_converters::tar_source::{TarOptions, TarSource};
use bcd_converters::{Source, SourceError};

use super::{Format, OptionSpec, Probe, RemoteOpener, Sign, SourceName};
use crate::source_errors::SourceSetupError;
use crate::source_format::SourceFormat;
use crate::source_options::SourceOptions;

#[allow(non_upper_case_globals)]
impl SourceFormat {
    /// Tar archives (plain, gzip or zstd), WebDataset shards, brace patterns, or
    /// `-` for stdin.
    pub const Tar: SourceFormat = SourceFormat::named("tar");
}

/// The descriptor of [`SourceFormat::Tar`].
pub(crate) struct Tar;

/// `samples`, then the options of WebDataset samples, which need it.
static OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        field: "samples",
        given: |o| o.samples,
    },
    OptionSpec {
        field: "value_ext",
        given: |o| !o.value_ext.is_empty(),
    },
    OptionSpec {
        field: "json_fields",
        given: |o| o.json_fields,
    },
    OptionSpec {
        field: "skip_bad_samples",
        given: |o| o.skip_bad_samples,
    },
];

/// The tar part of the options.
fn tar_options(options: &SourceOptions) -> TarOptions {
    TarOptions {
        samples: options.samples.then(|| SampleOptions {
            value_exts: match options.value_ext.is_empty() {
                true => SampleOptions::default().value_exts,
                false => options
                    .value_ext
                    .iter()
                    .map(|ext| ext.trim_start_matches('.').to_lowercase())
                    .collect(),
            },
            json_fields: options.json_fields,
            skip_bad_samples: options.skip_bad_samples,
        }),
    }
}

impl Format for Tar {
    fn format(&self) -> SourceFormat {
        SourceFormat::Tar
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn name_sign(&self, name: &SourceName<'_>, _options: &SourceOptions) -> Option<Sign> {
        let tar = name.raw == "-"
            || name.lower.contains('{')
            || name.ends_with_any(&[".tar", ".tar.gz", ".tgz", ".tar.zst", ".tzst", ".tar.zstd"]);
        tar.then_some(Sign::Certain)
    }

    fn disk_sign(&self, probe: &Probe<'_>) -> std::io::Result<Option<Sign>> {
        Ok((probe.content()? == Some(Content::Tar)).then_some(Sign::Content))
    }

    fn check(&self, options: &SourceOptions) -> Result<(), SourceSetupError> {
        match OPTIONS[1..].iter().find(|spec| (spec.given)(options)) {
            Some(spec) if !options.samples => {
                Err(SourceSetupError::NeedsSamples { option: spec.field })
            }
            _ => Ok(()),
        }
    }

    fn open(
        &self,
        sources: &[&OsStr],
        options: &SourceOptions,
        _target: Option<&Path>,
    ) -> Result<Box<dyn Source>, SourceSetupError> {
        // Archive names go through brace expansion, which works on text.
        let names = sources
            .iter()
            .map(|name| {
                name.to_str().map(str::to_owned).ok_or_else(|| {
                    SourceError::Usage(format!(
                        "{}: a tar archive name must be valid UTF-8 (rename it, or pipe it to `-`)",
                        name.to_string_lossy()
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Box::new(TarSource::with_options(
            &names,
            &tar_options(options),
        )?))
    }

    fn remote_opener(&self) -> Option<RemoteOpener> {
        Some(|names, options| {
            let inputs = crate::remote_sources::streamed_inputs(names)?;
            Ok(Box::new(TarSource::from_inputs(
                inputs,
                &tar_options(options),
            )?))
        })
    }
}
