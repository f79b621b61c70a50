//! `bcd get`: one record's value (or, locally, its fields) by key or by index,
//! from a local dataset or by ranged reads from a remote one; with `--view`,
//! the index counts the view's records and a key must be one of them.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use bcd::Dataset;
use bcd_pipeline::fields::DatasetFields;
use bcd_remote::{RemoteDataset, RemoteUri};

use crate::location::{local, location, remote, Location};
use crate::output::{
    add_fields, record_identity, stdout_error, stdout_text, write_value, UsageError,
};

pub fn run(
    dataset: &OsStr,
    key: Option<&OsStr>,
    index: Option<i64>,
    hex: bool,
    output: Option<&OsStr>,
    fields: bool,
    view: Option<&str>,
) -> Result<ExitCode> {
    // The key first: a malformed --hex KEY is a usage error, whatever the
    // dataset.
    let key = key.map(|key| key_bytes(key, hex)).transpose()?;
    let output = output.map(|o| local(o, "the output file")).transpose()?;
    match location(dataset)? {
        Location::Local(path) => get_local(&path, key, index, output, fields, view),
        Location::Remote(uri) if fields => Err(UsageError(format!(
            "--fields reads a local dataset; `bcd pull {uri} DIR` first"
        ))
        .into()),
        Location::Remote(uri) => get_remote(uri, key, index, output, view),
    }
}

/// The record a `--view`'s position `index` (negative from the view's end)
/// names.
fn in_view(view: &bcd::ViewIndices, index: i64) -> Result<usize> {
    let len = view.len() as i64;
    let at = if index < 0 { index + len } else { index };
    match usize::try_from(at).ok().and_then(|at| view.get(at)) {
        Some(record) => Ok(record as usize),
        None => Err(bcd::Error::IndexOutOfRange {
            index,
            len: len as u64,
        }
        .into()),
    }
}

/// Refuses a record found by key that the view does not hold.
fn check_in_view(
    view: Option<&bcd::ViewIndices>,
    name: Option<&str>,
    key: &[u8],
    position: usize,
) -> Result<()> {
    match (view, name) {
        (Some(view), Some(name)) if view.position_of(position as u64).is_none() => bail!(
            "key {} is record {position}, which view {name:?} does not hold",
            bcd::DisplayKey(key.to_vec())
        ),
        _ => Ok(()),
    }
}

fn get_local(
    path: &std::path::Path,
    key: Option<Vec<u8>>,
    index: Option<i64>,
    output: Option<PathBuf>,
    fields: bool,
    view_name: Option<&str>,
) -> Result<ExitCode> {
    let dataset = Dataset::open(path)?;
    let view = view_name
        .map(|name| dataset.view(name))
        .transpose()?
        .map(|v| v.indices);
    let position = match (key, index) {
        (_, Some(index)) => match &view {
            Some(view) => in_view(view, index)?,
            None => dataset.resolve_index(index)?,
        },
        (Some(key), None) => match dataset.position(&key)? {
            Some(position) => {
                check_in_view(view.as_ref(), view_name, &key, position)?;
                position
            }
            None => bail!(
                "key {} not found in {} (list keys with `bcd ls`)",
                bcd::DisplayKey(key),
                dataset.path().display()
            ),
        },
        (None, None) => unreachable!("clap requires KEY or --index"),
    };
    if fields {
        let line = record_fields_json(&dataset, &DatasetFields::load(&dataset)?, position)?;
        stdout_text(&format!("{line}\n"))
            .map_err(stdout_error("writing the fields to stdout failed"))?;
        return Ok(ExitCode::SUCCESS);
    }
    write_value(&dataset.at(position)?, output)?;
    Ok(ExitCode::SUCCESS)
}

fn get_remote(
    uri: RemoteUri,
    key: Option<Vec<u8>>,
    index: Option<i64>,
    output: Option<PathBuf>,
    view_name: Option<&str>,
) -> Result<ExitCode> {
    let dataset = RemoteDataset::open(remote(uri.clone())?)?;
    let view = view_name
        .map(|name| dataset.view(name))
        .transpose()?
        .map(|v| v.indices);
    let position = match (key, index) {
        (_, Some(index)) => match &view {
            Some(view) => in_view(view, index)?,
            None => dataset.resolve_index(index)?,
        },
        (Some(key), None) => {
            if !dataset.keyed() {
                return Err(bcd::Error::WrongKeying(
                    "key lookup on a keyless dataset: read records by index instead",
                )
                .into());
            }
            match dataset.position(&key)? {
                Some(position) => {
                    check_in_view(view.as_ref(), view_name, &key, position)?;
                    position
                }
                None => bail!(
                    "key {} not found in {uri} (list keys with `bcd ls`)",
                    bcd::DisplayKey(key)
                ),
            }
        }
        (None, None) => unreachable!("clap requires KEY or --index"),
    };
    write_value(&dataset.value(position)?, output)?;
    Ok(ExitCode::SUCCESS)
}

/// The fields of record `index` as one JSON object, with its `key` (or
/// `index` for keyless datasets) first.
fn record_fields_json(
    dataset: &Dataset,
    fields: &DatasetFields,
    index: usize,
) -> Result<serde_json::Value> {
    let shard = dataset.value_location(index)?.shard;
    let mut local = index - dataset.shard_first_record(shard) as usize;
    let mut object = record_identity(dataset, index)?;
    for batch in fields.shard_batches(dataset, shard, None)? {
        if local < batch.num_rows() {
            add_fields(&mut object, bcd_fields::row_to_json(&batch, local));
            break;
        }
        local -= batch.num_rows();
    }
    Ok(serde_json::Value::Object(object))
}

/// The bytes of a KEY argument: as given (any bytes on Unix), or decoded from hex.
fn key_bytes(key: &OsStr, hex: bool) -> Result<Vec<u8>> {
    #[cfg(unix)]
    let raw = std::os::unix::ffi::OsStrExt::as_bytes(key).to_vec();
    #[cfg(not(unix))]
    let raw =
        anyhow::Context::context(key.to_str(), "KEY is not valid Unicode; pass it with --hex")?
            .as_bytes()
            .to_vec();
    if !hex {
        return Ok(raw);
    }
    let text = std::str::from_utf8(&raw).ok().filter(|t| t.len() % 2 == 0);
    let decoded = text.and_then(|t| {
        (0..t.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&t[i..i + 2], 16).ok())
            .collect::<Option<Vec<u8>>>()
    });
    decoded.ok_or_else(|| {
        UsageError("--hex KEY must be an even number of hexadecimal digits".into()).into()
    })
}
