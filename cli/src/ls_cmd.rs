//! `bcd ls`: the keys (or, for a keyless dataset, the indices) of a local or
//! remote dataset, one a line or NUL-separated; with `--fields`, each record of a
//! local dataset as one JSON object.

use std::ffi::OsStr;
use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::Result;
use bcd::Dataset;
use bcd_pipeline::fields::DatasetFields;
use bcd_remote::{RemoteDataset, RemoteUri};

use crate::location::{local, location, remote, Location};
use crate::output::{add_fields, record_identity, stdout_error};

pub fn run(dataset: &OsStr, null: bool, fields: bool) -> Result<ExitCode> {
    if fields {
        return ls_fields(&Dataset::open(&local(dataset, "the dataset")?)?);
    }
    let end = if null { b'\0' } else { b'\n' };
    match location(dataset)? {
        Location::Local(path) => ls_local(&Dataset::open(&path)?, end),
        Location::Remote(uri) => ls_remote(uri, end),
    }
}

fn ls_local(dataset: &Dataset, end: u8) -> Result<ExitCode> {
    let mut out = io::BufWriter::new(io::stdout().lock());
    let failed = || stdout_error("writing the keys to stdout failed");
    for index in 0..dataset.len() {
        if dataset.keyed() {
            out.write_all(dataset.key_at(index)?).map_err(failed())?;
        } else {
            write!(out, "{index}").map_err(failed())?;
        }
        out.write_all(&[end]).map_err(failed())?;
    }
    out.flush().map_err(failed())?;
    Ok(ExitCode::SUCCESS)
}

fn ls_remote(uri: RemoteUri, end: u8) -> Result<ExitCode> {
    let dataset = RemoteDataset::open(remote(uri)?)?;
    let mut out = io::BufWriter::new(io::stdout().lock());
    let failed = || stdout_error("writing the keys to stdout failed");
    if dataset.keyed() {
        let mut write_error = None;
        dataset.for_each_key(|_, key| {
            match out.write_all(key).and_then(|()| out.write_all(&[end])) {
                Ok(()) => Ok(true),
                Err(e) => {
                    write_error = Some(e);
                    Ok(false)
                }
            }
        })?;
        if let Some(e) = write_error {
            return Err(failed()(e).into());
        }
    } else {
        for index in 0..dataset.len() {
            write!(out, "{index}").map_err(failed())?;
            out.write_all(&[end]).map_err(failed())?;
        }
    }
    out.flush().map_err(failed())?;
    Ok(ExitCode::SUCCESS)
}

/// `bcd ls --fields`: one JSON object per record, shard by shard.
fn ls_fields(dataset: &Dataset) -> Result<ExitCode> {
    let fields = DatasetFields::load(dataset)?;
    let mut out = io::BufWriter::new(io::stdout().lock());
    let failed = || stdout_error("writing the records to stdout failed");
    let mut index = 0;
    for shard in 0..dataset.shards() {
        for batch in fields.shard_batches(dataset, shard, None)? {
            for row in 0..batch.num_rows() {
                let mut object = record_identity(dataset, index)?;
                add_fields(&mut object, bcd_fields::row_to_json(&batch, row));
                writeln!(out, "{}", serde_json::Value::Object(object)).map_err(failed())?;
                index += 1;
            }
        }
    }
    out.flush().map_err(failed())?;
    Ok(ExitCode::SUCCESS)
}
