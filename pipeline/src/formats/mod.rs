//! The registry of source formats: [`FORMATS`] is the one registration of each.
//! The format list and names, detection, the check of which option belongs to
//! which format, the option fields messages may name and the list of the formats
//! object storage holds are all derived from it.

mod csv;
mod dir;
mod format;
mod hf_disk;
mod jsonl;
mod litdata;
mod lmdb;
mod mds;
mod megatron;
mod parquet;
mod tar;
mod tfrecord;

use std::ffi::OsStr;
use std::io;
use std::path::Path;
use std::str::FromStr;

pub(crate) use format::{
    Format, OptionSpec, Probe, RemoteOpener, Sign, SourceName, FIELDS, KEY_COLUMN, VALUE_COLUMN,
};

use crate::source_errors::SourceSetupError;
use crate::source_format::SourceFormat;
use crate::source_options::SourceOptions;

/// Every source format, in the order messages list them; among signs of a
/// source's format that are equally sure, the format listed first wins.
static FORMATS: &[&dyn Format] = &[
    &dir::Dir,
    &tar::Tar,
    &parquet::Parquet,
    &hf_disk::HfDisk,
    &csv::Csv,
    &tfrecord::Tfrecord,
    &jsonl::Jsonl,
    &megatron::Megatron,
    &lmdb::Lmdb,
    &mds::Mds,
    &litdata::Litdata,
];

impl SourceFormat {
    /// Every format, in the order the messages list them.
    pub fn all() -> impl Iterator<Item = SourceFormat> {
        FORMATS.iter().map(|format| format.format())
    }

    /// The descriptor of this format.
    pub(crate) fn descriptor(self) -> &'static dyn Format {
        FORMATS
            .iter()
            .copied()
            .find(|format| format.format() == self)
            // Values are made only by the descriptors' constants and from the
            // registry (a test checks every constant is registered).
            .expect("every SourceFormat is registered")
    }
}

impl FromStr for SourceFormat {
    type Err = SourceSetupError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        SourceFormat::all()
            .find(|format| format.name() == text)
            .ok_or_else(|| SourceSetupError::UnknownFormatName {
                name: text.to_owned(),
                known: SourceFormat::all().collect(),
            })
    }
}

/// The formats that take the [`SourceOptions`] field `field`.
fn owners(field: &str) -> Vec<SourceFormat> {
    FORMATS
        .iter()
        .filter(|format| takes(**format, field))
        .map(|format| format.format())
        .collect()
}

fn takes(format: &dyn Format, field: &str) -> bool {
    format.options().iter().any(|spec| spec.field == field)
}

/// The [`SourceOptions`] fields some format takes, once each, in registry order.
pub(crate) fn option_fields() -> Vec<&'static str> {
    let mut fields: Vec<&'static str> = Vec::new();
    for spec in FORMATS.iter().flat_map(|format| format.options()) {
        if !fields.contains(&spec.field) {
            fields.push(spec.field);
        }
    }
    fields
}

/// The formats object storage holds, in registry order.
pub(crate) fn remote_formats() -> Vec<SourceFormat> {
    FORMATS
        .iter()
        .filter(|format| format.remote_opener().is_some())
        .map(|format| format.format())
        .collect()
}

/// The format whose sign is surest, the first registered among equals.
fn surest(signs: impl Iterator<Item = (SourceFormat, Option<Sign>)>) -> Option<SourceFormat> {
    let mut best: Option<(SourceFormat, Sign)> = None;
    for (format, sign) in signs {
        if let Some(sign) = sign {
            if best.is_none_or(|(_, surest)| sign > surest) {
                best = Some((format, sign));
            }
        }
    }
    best.map(|(format, _)| format)
}

/// The format a source's name (with the options) says, if it says one.
pub(crate) fn detect_by_name(name: &OsStr, options: &SourceOptions) -> Option<SourceFormat> {
    let name = SourceName::new(name);
    surest(
        FORMATS
            .iter()
            .map(|format| (format.format(), format.name_sign(&name, options))),
    )
}

/// The format a local directory holding what only one format writes is
/// ([`Sign::Layout`]), asked before its name unless the name is certain.
pub(crate) fn detect_layout(name: &OsStr, options: &SourceOptions) -> Option<SourceFormat> {
    let path = Path::new(name);
    if !path.is_dir() {
        return None;
    }
    let name = SourceName::new(name);
    let certain = FORMATS
        .iter()
        .any(|format| format.name_sign(&name, options) == Some(Sign::Certain));
    if certain {
        return None;
    }
    let probe = Probe::new(path, true);
    let layouts = FORMATS.iter().map(|format| {
        let sign = format.disk_sign(&probe).ok().flatten();
        (format.format(), sign.filter(|sign| *sign == Sign::Layout))
    });
    surest(layouts)
}

/// The format a local source whose name says nothing is, by what it is on disk
/// (a directory, a file's first bytes); `None` if nothing tells. The error is
/// its metadata's or its first bytes'.
pub(crate) fn detect_on_disk(path: &Path) -> io::Result<Option<SourceFormat>> {
    let probe = Probe::new(path, std::fs::metadata(path)?.is_dir());
    let signs = FORMATS
        .iter()
        .map(|format| Ok((format.format(), format.disk_sign(&probe)?)))
        .collect::<io::Result<Vec<_>>>()?;
    Ok(surest(signs.into_iter()))
}

/// Refuses given options that `format` does not take, naming the formats that
/// do (options of a single format first), then what `format` itself refuses.
pub(crate) fn check_options(
    format: SourceFormat,
    options: &SourceOptions,
) -> Result<(), SourceSetupError> {
    let descriptor = format.descriptor();
    for shared in [false, true] {
        for spec in FORMATS.iter().flat_map(|other| other.options()) {
            if !(spec.given)(options) || takes(descriptor, spec.field) {
                continue;
            }
            let owners = owners(spec.field);
            if (owners.len() > 1) != shared {
                continue;
            }
            return Err(match (spec.field, owners.as_slice()) {
                (option, [owner]) => SourceSetupError::OptionForOtherFormat {
                    option,
                    owner: *owner,
                    format,
                },
                ("key_column", _) => SourceSetupError::KeyColumnForOtherFormat { format, owners },
                ("fields", _) => SourceSetupError::FieldsForOtherFormat { format, owners },
                (option, _) => SourceSetupError::OptionForOtherFormats {
                    option,
                    owners,
                    format,
                },
            });
        }
    }
    descriptor.check(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_constant_is_registered_once_under_its_name() {
        let consts = [
            SourceFormat::Dir,
            SourceFormat::Tar,
            SourceFormat::Parquet,
            SourceFormat::Csv,
            SourceFormat::Tfrecord,
            SourceFormat::Jsonl,
            SourceFormat::HfDisk,
            SourceFormat::Megatron,
            SourceFormat::Lmdb,
            SourceFormat::Mds,
            SourceFormat::Litdata,
        ];
        for format in consts {
            assert_eq!(format.descriptor().format(), format);
        }
        let names: Vec<&str> = SourceFormat::all().map(SourceFormat::name).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        assert_eq!(
            names,
            [
                "dir", "tar", "parquet", "hf-disk", "csv", "tfrecord", "jsonl", "megatron", "lmdb",
                "mds", "litdata"
            ]
        );
    }

    #[test]
    fn each_option_field_is_listed_once_by_each_format_taking_it() {
        for format in FORMATS {
            let fields: Vec<&str> = format.options().iter().map(|s| s.field).collect();
            for field in &fields {
                assert_eq!(fields.iter().filter(|f| *f == field).count(), 1, "{field}");
            }
        }
        assert_eq!(
            owners("key_column"),
            [
                SourceFormat::Parquet,
                SourceFormat::HfDisk,
                SourceFormat::Csv,
                SourceFormat::Mds,
                SourceFormat::Litdata
            ]
        );
        assert_eq!(
            remote_formats(),
            [
                SourceFormat::Tar,
                SourceFormat::Parquet,
                SourceFormat::Tfrecord,
                SourceFormat::Jsonl
            ]
        );
    }

    #[test]
    fn the_surest_sign_wins_and_the_first_registered_among_equals() {
        let value_column = SourceOptions {
            value_column: Some("v".into()),
            ..Default::default()
        };
        let none = SourceOptions::default();
        for (name, options, format) in [
            // A value column beats a suffix...
            ("list.csv", &value_column, SourceFormat::Parquet),
            ("a.tfrecord", &value_column, SourceFormat::Parquet),
            // ...but not a certain name.
            ("a.ndjson", &value_column, SourceFormat::Jsonl),
            ("-", &value_column, SourceFormat::Tar),
            // Two certain names, two suffixes: the first registered.
            ("shards-{0..3}.jsonl", &none, SourceFormat::Tar),
            ("x.tfrecord.parquet", &none, SourceFormat::Parquet),
            ("x.tfrecord.csv", &none, SourceFormat::Csv),
        ] {
            assert_eq!(
                detect_by_name(name.as_ref(), options),
                Some(format),
                "{name}"
            );
        }
        assert_eq!(detect_by_name("notes.txt".as_ref(), &none), None);
    }
}
