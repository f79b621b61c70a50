//! `bcd info`: a dataset's settings, size and fields, local or remote.

use std::ffi::OsStr;
use std::process::ExitCode;

use anyhow::Result;
use bcd::Dataset;
use bcd_pipeline::fields::DatasetFields;
use bcd_remote::RemoteDataset;

use crate::location::{location, remote, Location};
use crate::output::{print_info, DatasetInfo};

pub fn run(dataset: &OsStr, json: bool) -> Result<ExitCode> {
    match location(dataset)? {
        Location::Local(path) => {
            let dataset = Dataset::open(&path)?;
            let fields = DatasetFields::load(&dataset)?;
            let info = DatasetInfo {
                path: dataset.path().display().to_string(),
                manifest: dataset.manifest(),
                records: dataset.len(),
                stored_bytes: dataset.stored_bytes(),
                schema: &fields.schema,
                metadata: &fields.metadata,
            };
            print_info(&info, json)?;
        }
        Location::Remote(uri) => {
            let dataset = RemoteDataset::open(remote(uri.clone())?)?;
            let (schema, metadata) = bcd_pipeline::fields::remote_fields(&dataset)?;
            let info = DatasetInfo {
                path: uri.to_string(),
                manifest: dataset.manifest(),
                records: dataset.len(),
                stored_bytes: dataset.stored_bytes(),
                schema: &schema,
                metadata: &metadata,
            };
            print_info(&info, json)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
