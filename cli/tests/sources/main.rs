//! `bcd ingest` from Parquet, TFRecord and CSV sources, end to end through the
//! binary, against files made by the real tools: `fixtures/parquet/` (pyarrow
//! 22.0.0 and Hugging Face `datasets`), `fixtures/tfrecord/` (the `tfrecord`
//! package) and `fixtures/csv/` (Python's `csv` module). Each directory's
//! `expected.json`, written by its `make_*.py` from what those tools read back,
//! lists the exact records per fixture file and option set; every dataset ingested
//! here is read back through the library, `bcd ls`/`bcd get` and the Python
//! reference (`tests/python/reference.py 0.3.0 dump`) and compared with it in full.
//!
//! Bad input must fail with exit status 1 and one message naming the file and the
//! row, line or record (and the byte offset where there is one), never a panic,
//! leaving an existing dataset byte-identical and creating none.
//!
//! The interrupted-ingest test writes its large Parquet file at test time with the
//! Rust `parquet`/`arrow-array` crates (dev-dependencies). The reference and the
//! CSV writer for absolute paths run in the virtualenv made by
//! `bash tests/python/setup-env.sh` (`<repo>/.venv`, or `$BCD_TEST_VENV`).
//!
//! Shared parts: [`datasets`] (datasets to ingest into, failure checks, the
//! fixtures and their `expected.json`), [`checks`] (what a dataset holds, read
//! three ways; the summary; the cases of `expected.json`) and [`per_source`]
//! (helpers for one kind of source). One module per source: [`parquet`],
//! [`tfrecord`], [`csv`], then [`nightly_append`], the nightly-append workflow.

use std::ffi::OsStr;
use std::path::Path;

use serde_json::Value;

#[path = "../common/mod.rs"]
mod common;
use common::*;

mod checks;
mod csv;
mod datasets;
mod nightly_append;
mod parquet;
mod per_source;
mod tfrecord;

// ---------------------------------------------------------------------------
// Helpers: running bcd
// ---------------------------------------------------------------------------

/// Runs bcd in `dir` (default: the test's working directory).
pub(crate) fn bcd_in<S: AsRef<OsStr>>(dir: Option<&Path>, args: &[S]) -> Run {
    finish(spawn(args, false, dir), &show(args))
}

/// Asserts a clean failure: exit status 1 and one "bcd: " line, never a panic.
pub(crate) fn assert_one_clean_error(run: &Run, what: &str) {
    assert_clean_failure(run, what);
    assert_eq!(
        run.stderr.trim_end().lines().count(),
        1,
        "bcd {what}: more than one line: {}",
        run.stderr
    );
}

/// `bcd ingest SOURCES --into DATASET --quiet EXTRA...`.
pub(crate) fn ingest_args(sources: &[String], into: &Path, extra: &[String]) -> Vec<String> {
    let mut args = vec!["ingest".to_owned()];
    args.extend_from_slice(sources);
    args.extend([
        "--into".to_owned(),
        s(into).to_owned(),
        "--quiet".to_owned(),
    ]);
    args.extend_from_slice(extra);
    args
}

/// Runs an ingest with `--json` in `dir`; asserts success; returns the summary.
pub(crate) fn ingest_in(
    dir: Option<&Path>,
    sources: &[String],
    into: &Path,
    extra: &[String],
) -> Value {
    let mut args = ingest_args(sources, into, extra);
    args.push("--json".into());
    let run = bcd_in(dir, &args);
    assert!(
        run.status.success(),
        "bcd {} failed ({:?}): {}",
        show(&args),
        run.status,
        run.stderr
    );
    serde_json::from_slice(&run.stdout).unwrap_or_else(|e| {
        panic!(
            "bcd {}: summary is not JSON ({e}): {}",
            show(&args),
            String::from_utf8_lossy(&run.stdout)
        )
    })
}

pub(crate) fn ingest(sources: &[String], into: &Path, extra: &[String]) -> Value {
    ingest_in(None, sources, into, extra)
}

pub(crate) fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}
