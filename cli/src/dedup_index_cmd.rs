//! `bcd dedup-index`: give every committed shard of a local dataset its content
//! hashes, in one pass over the values.

use std::ffi::OsStr;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use bcd::Dataset;

use crate::location::local;
use crate::output::{say, stdout_error, stdout_text};

pub fn run(dataset: &OsStr, jobs: Option<usize>, json: bool) -> Result<ExitCode> {
    let path = local(dataset, "the dataset")?;
    let started = Instant::now();
    let mut opened = Dataset::open(&path)?;
    if let Some(jobs) = jobs {
        opened.set_threads(jobs);
    }
    let summary = opened.build_content_hashes()?;
    let seconds = started.elapsed().as_secs_f64();
    if json {
        let object = serde_json::json!({
            "dataset": path.display().to_string(),
            "shards_built": summary.shards_built,
            "shards_present": summary.shards_present,
            "records": summary.records,
            "bytes": summary.bytes,
            "seconds": seconds,
        });
        stdout_text(&format!("{object}\n")).map_err(stdout_error(
            "the content hashes were written; writing the summary to stdout failed",
        ))?;
    } else {
        say!(
            "content hashes of {}: {} shards written ({} records, {:.1} MB of values), {} had them already, {:.2} s",
            path.display(),
            summary.shards_built,
            summary.records,
            summary.bytes as f64 / 1e6,
            summary.shards_present,
            seconds
        );
    }
    Ok(ExitCode::SUCCESS)
}
