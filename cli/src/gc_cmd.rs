//! `bcd gc`: remove what no manifest references: a local dataset's leftovers of
//! killed writers and abandoned staging jobs, or a remote dataset's leftovers of
//! interrupted pushes.

use std::ffi::OsStr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use bcd::Dataset;

use crate::location::{location, remote, Location};
use crate::output::{print_gc_report, print_remote_gc};

/// `bcd gc URI` leaves objects younger than this unless `--older-than` says
/// otherwise: they may belong to a push in progress.
const DEFAULT_GRACE: Duration = Duration::from_secs(3600);

pub fn run(
    dataset: &OsStr,
    dry_run: bool,
    older_than: Option<Duration>,
    json: bool,
) -> Result<ExitCode> {
    match location(dataset)? {
        Location::Local(path) => {
            let options = bcd::GcOptions {
                dry_run,
                older_than,
            };
            let report = Dataset::gc(&path, &options)?;
            print_gc_report(&report, &options, json)?;
        }
        Location::Remote(uri) => {
            let options = bcd_remote::GcOptions {
                grace: older_than.unwrap_or(DEFAULT_GRACE),
                dry_run,
            };
            let summary = bcd_remote::gc(&remote(uri.clone())?, &options)
                .with_context(|| format!("gc of {uri} failed"))?;
            print_remote_gc(&uri, &summary, dry_run, json)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
