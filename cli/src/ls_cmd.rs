//! `bcd ls`: the keys (or, for a keyless dataset, the indices) of a local or
//! remote dataset, one a line or NUL-separated; with `--fields`, each record of a
//! local dataset as one JSON object. `--view` and `--where` list only those
//! records (a remote dataset's views too).

use std::ffi::OsStr;
use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::Result;
use bcd::{Dataset, ViewIndices};
use bcd_pipeline::fields::DatasetFields;
use bcd_remote::{RemoteDataset, RemoteUri};

use crate::location::{local, location, remote, Location};
use crate::output::{add_fields, record_identity, stdout_error};
use crate::selection;

pub fn run(
    dataset: &OsStr,
    null: bool,
    fields: bool,
    view: Option<&str>,
    where_: Option<&str>,
) -> Result<ExitCode> {
    if fields {
        let dataset = Dataset::open(local(dataset, "the dataset")?)?;
        let selection = selection::local(&dataset, view, where_)?;
        return ls_fields(&dataset, selection.as_ref());
    }
    let end = if null { b'\0' } else { b'\n' };
    match location(dataset)? {
        Location::Local(path) => {
            let dataset = Dataset::open(&path)?;
            let selection = selection::local(&dataset, view, where_)?;
            ls_local(&dataset, selection.as_ref(), end)
        }
        Location::Remote(uri) => ls_remote(uri, view, where_, end),
    }
}

/// The records listed: all, or those of a selection.
fn records(len: usize, selection: Option<&ViewIndices>) -> Box<dyn Iterator<Item = usize> + '_> {
    match selection {
        None => Box::new(0..len),
        Some(indices) => Box::new(indices.iter().map(|i| i as usize)),
    }
}

fn ls_local(dataset: &Dataset, selection: Option<&ViewIndices>, end: u8) -> Result<ExitCode> {
    let mut out = io::BufWriter::new(io::stdout().lock());
    let failed = || stdout_error("writing the keys to stdout failed");
    for index in records(dataset.len(), selection) {
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

fn ls_remote(
    uri: RemoteUri,
    view: Option<&str>,
    where_: Option<&str>,
    end: u8,
) -> Result<ExitCode> {
    let dataset = RemoteDataset::open(remote(uri)?)?;
    let selection = selection::remote(&dataset, view, where_)?;
    let mut out = io::BufWriter::new(io::stdout().lock());
    let failed = || stdout_error("writing the keys to stdout failed");
    if let Some(indices) = &selection {
        // The view's keys, by ranged reads of each (few, for a view).
        for index in indices.iter() {
            let index = index as usize;
            if dataset.keyed() {
                out.write_all(&dataset.key(index)?).map_err(failed())?;
            } else {
                write!(out, "{index}").map_err(failed())?;
            }
            out.write_all(&[end]).map_err(failed())?;
        }
    } else if dataset.keyed() {
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

/// `bcd ls --fields`: one JSON object per record, shard by shard (only the
/// shards holding records of a selection are read).
fn ls_fields(dataset: &Dataset, selection: Option<&ViewIndices>) -> Result<ExitCode> {
    let fields = DatasetFields::load(dataset)?;
    let mut out = io::BufWriter::new(io::stdout().lock());
    let failed = || stdout_error("writing the records to stdout failed");
    let mut wanted = records(dataset.len(), selection).peekable();
    while let Some(&first) = wanted.peek() {
        let shard = dataset.value_location(first)?.shard;
        let mut start = dataset.shard_first_record(shard) as usize;
        for batch in fields.shard_batches(dataset, shard, None)? {
            let end = start + batch.num_rows();
            while let Some(index) = wanted.next_if(|&i| i < end) {
                let mut object = record_identity(dataset, index)?;
                add_fields(&mut object, bcd_fields::row_to_json(&batch, index - start));
                writeln!(out, "{}", serde_json::Value::Object(object)).map_err(failed())?;
            }
            start = end;
        }
    }
    out.flush().map_err(failed())?;
    Ok(ExitCode::SUCCESS)
}
