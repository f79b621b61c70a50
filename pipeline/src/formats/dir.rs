//! `dir`: directory trees, every regular file keyed by its relative path
//! ([`bcd_converters::dir_source`]). A directory is `dir` when no other format
//! recognises it; local only.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use bcd_converters::dir_source::{DirOptions, DirSource};
use bcd_converters::{Chain, Source, SourceError};

use super::{Format, OptionSpec, Probe, Sign};
use crate::source_errors::SourceSetupError;
use crate::source_format::SourceFormat;
use crate::source_options::SourceOptions;

#[allow(non_upper_case_globals)]
impl SourceFormat {
    /// Directory trees: every regular file, keyed by its relative path.
    pub const Dir: SourceFormat = SourceFormat::named("dir");
}

/// The descriptor of [`SourceFormat::Dir`].
pub(crate) struct Dir;

static OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        field: "include",
        given: |o| !o.include.is_empty(),
    },
    OptionSpec {
        field: "exclude",
        given: |o| !o.exclude.is_empty(),
    },
    OptionSpec {
        field: "follow_links",
        given: |o| o.follow_links,
    },
    OptionSpec {
        field: "labels",
        given: |o| o.labels.is_some(),
    },
];

impl SourceOptions {
    /// The directory-walk part of the options, e.g. to estimate the bytes to come
    /// with [`DirSource::total_bytes`].
    pub fn dir_options(&self) -> DirOptions {
        DirOptions {
            include: self.include.clone(),
            exclude: self.exclude.clone(),
            follow_links: self.follow_links,
            skip_dirs: Vec::new(),
            labels: self.labels,
        }
    }
}

impl Format for Dir {
    fn format(&self) -> SourceFormat {
        SourceFormat::Dir
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn disk_sign(&self, probe: &Probe<'_>) -> std::io::Result<Option<Sign>> {
        Ok(probe.is_dir.then_some(Sign::AnyDirectory))
    }

    fn open(
        &self,
        sources: &[&OsStr],
        options: &SourceOptions,
        target: Option<&Path>,
    ) -> Result<Box<dyn Source>, SourceSetupError> {
        let paths: Vec<PathBuf> = sources.iter().map(PathBuf::from).collect();
        let mut dir_options = options.dir_options();
        dir_options.skip_dirs.extend(target.map(Path::to_owned));
        let roots = paths
            .iter()
            .map(|root| Ok(Box::new(DirSource::new(root, &dir_options)?) as Box<dyn Source>))
            .collect::<Result<Vec<_>, SourceError>>()?;
        if options.labels.is_some() {
            same_classes(&paths, &roots)?;
        }
        Ok(Box::new(Chain::new(roots)))
    }
}

/// Refuses directories labelled by folder whose class folders differ.
fn same_classes(paths: &[PathBuf], roots: &[Box<dyn Source>]) -> Result<(), SourceSetupError> {
    let classes = |root: &dyn Source| -> Vec<String> {
        match root.metadata().get("class_names") {
            Some(serde_json::Value::Array(names)) => names
                .iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        }
    };
    let first = classes(roots[0].as_ref());
    for (path, root) in paths.iter().zip(roots).skip(1) {
        let other = classes(root.as_ref());
        if other != first {
            return Err(SourceSetupError::DifferentClasses {
                first: paths[0].display().to_string(),
                first_classes: first,
                other: path.display().to_string(),
                other_classes: other,
            });
        }
    }
    Ok(())
}
