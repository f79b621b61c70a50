//! `bcd create`: an empty dataset in a new or empty local directory (a dataset
//! reaches object storage by `bcd push`).

use std::ffi::OsStr;
use std::process::ExitCode;

use anyhow::Result;
use bcd::{CreateOptions, Dataset};

use crate::args::CompressionArg;
use crate::location::local;

pub fn run(
    dataset: &OsStr,
    keyed: bool,
    compression: CompressionArg,
    max_shard_size: u64,
) -> Result<ExitCode> {
    let dataset = local(dataset, "the dataset created")?;
    Dataset::create(
        &dataset,
        CreateOptions {
            keyed,
            compression: compression.into(),
            max_shard_size,
        },
    )?;
    Ok(ExitCode::SUCCESS)
}
