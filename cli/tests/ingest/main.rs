//! `bcd ingest` and `bcd export` end to end, through the binary: round trips,
//! archives made by real tools (the committed fixtures in `fixtures/tar/`, written
//! by `fixtures/tar/make_tar_fixtures.py` with Python's `tarfile`, `gzip` and
//! WebDataset's `TarWriter`; `expected.json` there lists what those tools wrote),
//! the Python reference reading what ingest wrote, duplicate policies,
//! determinism across job counts, bad input, interruption, and export's safety
//! rules.
//!
//! The reference and the tar extraction run in the virtualenv made by
//! `bash tests/python/setup-env.sh` (`<repo>/.venv`, or `$BCD_TEST_VENV`).
//!
//! [`harness`] holds the fixtures and a tar writer and reader independent of the
//! code under test; each other module is one subject: [`round_trips`],
//! [`real_tools`] (archives made by real tools), [`python_reference`],
//! [`duplicates`], [`determinism`], [`bad_input`] and [`export`].

use std::io::Write;
use std::path::Path;
use std::thread;

use serde_json::Value;

#[path = "../common/mod.rs"]
mod common;
use common::*;

mod bad_input;
mod determinism;
mod duplicates;
mod export;
mod harness;
mod python_reference;
mod real_tools;
mod round_trips;

// ---------------------------------------------------------------------------
// Helpers: running bcd
// ---------------------------------------------------------------------------

/// Runs bcd with `input` on stdin (none: stdin is empty).
pub(crate) fn run_with(args: &[&str], input: Option<Vec<u8>>) -> Run {
    let mut child = spawn(args, input.is_some(), None);
    let writer = input.map(|data| {
        let mut stdin = child.stdin.take().expect("piped stdin");
        thread::spawn(move || {
            let _ = stdin.write_all(&data); // bcd may stop reading early
        })
    });
    let run = finish(child, &format!("{args:?}"));
    if let Some(writer) = writer {
        writer.join().unwrap();
    }
    run
}

pub(crate) fn run(args: &[&str]) -> Run {
    run_with(args, None)
}

/// `bcd ingest SOURCES --into DATASET --json EXTRA...`: asserts success and returns
/// the JSON summary.
pub(crate) fn ingest(sources: &[&str], into: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["ingest"];
    args.extend_from_slice(sources);
    args.extend_from_slice(&["--into", s(into), "--json", "--quiet"]);
    args.extend_from_slice(extra);
    let stdout = ok(&args);
    serde_json::from_slice(&stdout).unwrap_or_else(|e| {
        panic!(
            "bcd {args:?}: summary is not JSON ({e}): {}",
            String::from_utf8_lossy(&stdout)
        )
    })
}

/// The arguments of `bcd ingest SOURCES --into DATASET EXTRA...`.
pub(crate) fn ingest_args<'a>(
    sources: &[&'a str],
    into: &'a Path,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec!["ingest"];
    args.extend_from_slice(sources);
    args.extend_from_slice(&["--into", s(into), "--quiet"]);
    args.extend_from_slice(extra);
    args
}
