//! `bcd verify`: decode every record of a local dataset, or check every record
//! of a remote one by ranged reads, and list what is wrong.

use std::ffi::OsStr;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use bcd::{Compression, Dataset};
use bcd_remote::{RemoteDataset, RemoteUri};

use crate::location::{location, remote, Location};
use crate::output::{chain, say, stdout_error, stdout_text, UsageError};

/// Problems listed by `verify` before it only counts the rest.
const VERIFY_SHOWN: usize = 20;

pub fn run(dataset: &OsStr, content: bool) -> Result<ExitCode> {
    match location(dataset)? {
        Location::Local(path) => verify_local(&path, content),
        Location::Remote(_) if content => Err(UsageError(
            "--content checks a local dataset: pull it first (`bcd pull`)".into(),
        )
        .into()),
        Location::Remote(uri) => verify_remote(uri),
    }
}

fn verify_local(path: &Path, content: bool) -> Result<ExitCode> {
    let dataset = match Dataset::open(path) {
        Ok(dataset) => dataset,
        Err(error) => {
            say!("bcd: verify failed: {}", chain(&error));
            return Ok(ExitCode::FAILURE);
        }
    };
    // With --content every value is decoded (and checked) once, on all cores.
    let problems = match content {
        true => dataset.verify_content(),
        false => dataset.verify(),
    };
    say_problems(&problems);
    let leftovers = dataset.uncommitted_files()?;
    if !leftovers.is_empty() {
        say!(
            "bcd: note: {} uncommitted file(s) from an interrupted write are ignored (the next extend overwrites them): {}",
            leftovers.len(),
            leftovers
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let [bcd::Error::CorruptIndexFile { .. }] = problems.as_slice() {
        say!("bcd: verify failed: the persisted index is wrong");
        return Ok(ExitCode::FAILURE);
    }
    if !problems.is_empty() {
        match content {
            true => say!(
                "bcd: verify failed: {} problem(s) in the values of {} records",
                problems.len(),
                dataset.len()
            ),
            false => say!(
                "bcd: verify failed: {} of {} records cannot be decoded",
                problems.len(),
                dataset.len()
            ),
        }
        return Ok(ExitCode::FAILURE);
    }
    if content {
        return say_ok_text(&format!(
            "ok: {} records in {} shards, every value matches its content hash\n",
            dataset.len(),
            dataset.shards()
        ));
    }
    say_ok(dataset.len(), dataset.shards(), dataset.compression())
}

fn say_ok_text(text: &str) -> Result<ExitCode> {
    stdout_text(text).map_err(stdout_error(
        "the dataset verified ok; writing the result to stdout failed",
    ))?;
    Ok(ExitCode::SUCCESS)
}

fn verify_remote(uri: RemoteUri) -> Result<ExitCode> {
    let dataset = match RemoteDataset::open(remote(uri.clone())?) {
        Ok(dataset) => dataset,
        Err(error) => {
            say!("bcd: verify failed: {}", chain(&error));
            return Ok(ExitCode::FAILURE);
        }
    };
    let problems = dataset.verify()?;
    say_problems(&problems);
    let shards = dataset.manifest().shards;
    let leftovers: Vec<String> = dataset
        .remote()
        .list_blocking()?
        .into_keys()
        .filter(|name| bcd_remote::FileKind::of(name).pending(shards))
        .map(|name| uri.object(&name))
        .collect();
    if !leftovers.is_empty() {
        say!(
            "bcd: note: {} uncommitted object(s) from interrupted pushes are ignored (`bcd gc` removes them): {}",
            leftovers.len(),
            leftovers.join(", ")
        );
    }
    if !problems.is_empty() {
        say!(
            "bcd: verify failed: {} problem(s) in {} records",
            problems.len(),
            dataset.len()
        );
        return Ok(ExitCode::FAILURE);
    }
    say_ok(dataset.len(), shards, dataset.manifest().compression)
}

/// The first [`VERIFY_SHOWN`] problems, then how many more there are.
fn say_problems<E: std::error::Error + 'static>(problems: &[E]) {
    for problem in problems.iter().take(VERIFY_SHOWN) {
        say!("bcd: {}", chain(problem));
    }
    if problems.len() > VERIFY_SHOWN {
        say!("bcd: ... and {} more", problems.len() - VERIFY_SHOWN);
    }
}

fn say_ok(records: usize, shards: u64, compression: Compression) -> Result<ExitCode> {
    let what = match compression {
        Compression::Lz4 => "all decoded",
        Compression::None => "stored uncompressed",
    };
    stdout_text(&format!(
        "ok: {records} records in {shards} shards, {what}\n"
    ))
    .map_err(stdout_error(
        "the dataset verified ok; writing the result to stdout failed",
    ))?;
    Ok(ExitCode::SUCCESS)
}
