//! `lmdb`: LMDB environments, a directory holding `data.mdb` or the data file
//! itself ([`bcd_converters::lmdb_source`]); local only (liblmdb maps the file).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use bcd_converters::lmdb_source::{is_lmdb, LmdbOptions, LmdbSource, LmdbValue};
use bcd_converters::Source;

use super::{Format, OptionSpec, Probe, Sign, SourceName};
use crate::source_errors::SourceSetupError;
use crate::source_format::SourceFormat;
use crate::source_options::SourceOptions;

#[allow(non_upper_case_globals)]
impl SourceFormat {
    /// LMDB environments: every entry of one database in key order.
    pub const Lmdb: SourceFormat = SourceFormat::named("lmdb");
}

/// The descriptor of [`SourceFormat::Lmdb`].
pub(crate) struct Lmdb;

static OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        field: "lmdb_value",
        given: |o| o.lmdb_value.is_some(),
    },
    OptionSpec {
        field: "lmdb_db",
        given: |o| o.lmdb_db.is_some(),
    },
    OptionSpec {
        field: "value_column",
        given: |o| o.value_column.is_some(),
    },
];

impl Format for Lmdb {
    fn format(&self) -> SourceFormat {
        SourceFormat::Lmdb
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn name_sign(&self, _name: &SourceName<'_>, options: &SourceOptions) -> Option<Sign> {
        // Options only LMDB takes say it whatever the name, and beat the value
        // column's claim for Parquet (a pickled dict's entry is named by it).
        (options.lmdb_value.is_some() || options.lmdb_db.is_some()).then_some(Sign::Certain)
    }

    fn disk_sign(&self, probe: &Probe<'_>) -> std::io::Result<Option<Sign>> {
        if !is_lmdb(probe.path) {
            return Ok(None);
        }
        // A directory holding data.mdb beats `dir` (and a value column's claim
        // for Parquet); a data file is known by its meta page.
        Ok(Some(if probe.is_dir {
            Sign::Layout
        } else {
            Sign::Content
        }))
    }

    fn check(&self, options: &SourceOptions) -> Result<(), SourceSetupError> {
        if options.value_column.is_some() && options.lmdb_value != Some(LmdbValue::Pickle) {
            return Err(SourceSetupError::ValueColumnNeedsPickle);
        }
        Ok(())
    }

    fn open(
        &self,
        sources: &[&OsStr],
        options: &SourceOptions,
        _target: Option<&Path>,
    ) -> Result<Box<dyn Source>, SourceSetupError> {
        let lmdb_options = LmdbOptions {
            value: options.lmdb_value.unwrap_or_default(),
            db: options.lmdb_db.clone(),
            value_column: options.value_column.clone(),
        };
        let paths: Vec<PathBuf> = sources.iter().map(PathBuf::from).collect();
        Ok(Box::new(LmdbSource::new(&paths, lmdb_options)))
    }
}
