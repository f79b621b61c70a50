//! `bcd.ingest`: `bcd ingest` as a function. The sources are opened and read
//! through [`bcd_pipeline::Destination`], the same code and rules as the command
//! (a local dataset, or one in object storage staged and pushed); options are
//! the command's flags in snake_case.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use bcd::Compression;
use bcd_converters::SourceError;
use bcd_pipeline::{
    spell_options, IngestError, IngestOptions, IngestSummary, OnDuplicate, SourceFormat,
    SourceSetupError,
};

use crate::args::{dedup_report_arg, location};
use crate::errors::{message, os_error, to_py};
use crate::options::{dedup_arg, invalid, lz4_mode_arg, memory_limit_arg, shard_size_arg};
use crate::source_keywords::{source_options, strings};

/// How often the calling thread checks for Ctrl-C while the pipeline runs.
const SIGNAL_POLL: Duration = Duration::from_millis(50);
/// The most `jobs=` accepted: each job adds a batch's worth of memory.
const MAX_JOBS: usize = 1024;

/// `compression=` of `ingest`: not given (the dataset's own, or lz4 for a new
/// one), `"lz4"`, or `None`/`"none"`.
#[derive(Clone, Copy)]
pub enum CompressionChoice {
    Unset,
    Given(Compression),
}

impl<'a, 'py> FromPyObject<'a, 'py> for CompressionChoice {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if obj.is_none() {
            return Ok(CompressionChoice::Given(Compression::None));
        }
        match obj.extract::<String>().as_deref() {
            Ok("lz4") => Ok(CompressionChoice::Given(Compression::Lz4)),
            Ok("none") => Ok(CompressionChoice::Given(Compression::None)),
            _ => Err(PyValueError::new_err(format!(
                "unsupported compression: {}; use \"lz4\" or None",
                obj.repr()?
            ))),
        }
    }
}

/// A setup error, spelling options as this function's keyword arguments.
fn setup_error(error: SourceSetupError) -> PyErr {
    match error {
        SourceSetupError::Unreadable { ref source, .. } => os_error(source, message(&error)),
        SourceSetupError::Open(error) => source_error(error),
        // The formats as Python spells them: `format="dir"|"tar"|...`.
        SourceSetupError::UndetectableFormat { name, known } => PyValueError::new_err(format!(
            "{name}: cannot tell its format from the name or the first bytes; pass format={}",
            known
                .iter()
                .map(|format| format!("\"{format}\""))
                .collect::<Vec<_>>()
                .join("|")
        )),
        SourceSetupError::OptionForOtherFormat {
            option,
            owner,
            format,
        } => PyValueError::new_err(format!(
            "{option}= applies to {owner} sources only, not {format}"
        )),
        SourceSetupError::MissingValueColumn { format } => PyValueError::new_err(format!(
            "{format} sources need value_column=COL (and key_column=COL for a keyed dataset)"
        )),
        other => PyValueError::new_err(python_message(&other)),
    }
}

/// The error and its causes, with the options the libraries name by field
/// spelled as this function's keyword arguments (`value_column=`).
fn python_message(error: &(dyn std::error::Error + 'static)) -> String {
    spell_options(&message(error), |field| format!("{field}="))
}

fn source_error(error: SourceError) -> PyErr {
    let message = python_message(&error);
    match error {
        SourceError::Io { source, .. } => os_error(&source, message),
        _ => PyValueError::new_err(message),
    }
}

fn ingest_error(error: IngestError) -> PyErr {
    let message = python_message(&error);
    match error {
        IngestError::Source(error) => source_error(error),
        IngestError::Store(error) => to_py(error),
        IngestError::Remote(error) => crate::errors::remote_to_py(error),
        IngestError::Interrupted => PyKeyboardInterrupt::new_err(message),
        IngestError::Report(error) => os_error(&error.source, message),
        IngestError::Internal(_) => PyRuntimeError::new_err(message),
        // Duplicates, and options that contradict the dataset or the source.
        _ => PyValueError::new_err(message),
    }
}

/// Reads directory trees, tar / WebDataset archives, Parquet, Hugging Face
/// `save_to_disk` directories, CSV-of-paths,
/// TFRecord or JSON Lines files, Megatron indexed datasets or LMDB environments into the dataset at `into` in one all-or-nothing commit, as
/// `bcd ingest` does; the options are its flags in snake_case (`fields` a str
/// as `--fields` takes it or a list of names, `field_type` a dict of name to
/// type). Returns the summary of `bcd ingest --json` as a dict.
///
/// A missing or empty `into` is created (keyed unless `keyless` or the source has
/// no keys); an existing one keeps its settings. The pipeline runs without the
/// GIL. On any error nothing is committed and a dataset the call created is
/// removed; Ctrl-C does the same and raises KeyboardInterrupt.
#[pyfunction]
#[pyo3(signature = (
    sources, into, *, format = None, keyless = false,
    compression = CompressionChoice::Unset, max_shard_size = None, on_duplicate = "error",
    jobs = None, level = None, dedup = None, dedup_report = None, memory_limit = None,
    **source_keywords,
), text_signature = "(sources, into, *, format=None, keyless=False, compression=..., max_shard_size=None, on_duplicate='error', jobs=None, level=None, dedup=None, dedup_report=None, memory_limit=None, **source_keywords)")]
#[allow(clippy::too_many_arguments)]
pub fn ingest<'py>(
    py: Python<'py>,
    sources: &Bound<'py, PyAny>,
    into: &Bound<'py, PyAny>,
    format: Option<&str>,
    keyless: bool,
    compression: CompressionChoice,
    max_shard_size: Option<&Bound<'py, PyAny>>,
    on_duplicate: &str,
    jobs: Option<usize>,
    level: Option<&Bound<'py, PyAny>>,
    dedup: Option<&str>,
    dedup_report: Option<&Bound<'py, PyAny>>,
    memory_limit: Option<&Bound<'py, PyAny>>,
    source_keywords: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let sources = strings(Some(sources), "sources")?;
    let into = location(py, into)?;
    let format = format
        .map(|name| name.parse::<SourceFormat>().map_err(setup_error))
        .transpose()?;
    let source_options = source_options(format, source_keywords)?;
    // One flag per call, so that concurrent ingests cannot stop each other.
    let interrupt = Arc::new(AtomicBool::new(false));
    let options = IngestOptions {
        keyless,
        compression: match compression {
            CompressionChoice::Unset => None,
            CompressionChoice::Given(compression) => Some(compression),
        },
        max_shard_size: max_shard_size.map(shard_size_arg).transpose()?,
        on_duplicate: on_duplicate
            .parse::<OnDuplicate>()
            .map_err(|error| invalid("on_duplicate", error))?,
        jobs: match jobs {
            Some(0) => return Err(PyValueError::new_err("jobs must be at least 1")),
            // Batches are sized per job: an absurd count would lift the memory bound.
            Some(jobs) if jobs > MAX_JOBS => {
                return Err(PyValueError::new_err(format!(
                    "jobs must be at most {MAX_JOBS}, not {jobs}"
                )))
            }
            Some(jobs) => jobs,
            None => IngestOptions::default().jobs,
        },
        lz4_mode: lz4_mode_arg(level, IngestOptions::default().lz4_mode)?,
        dedup: dedup_arg(dedup)?,
        dedup_report: dedup_report_arg(py, dedup, dedup_report)?,
        // The summary dict lists them, as `bcd ingest --json` does.
        list_content_duplicates: true,
        memory_limit: memory_limit_arg(memory_limit)?,
        interrupt: Some(Arc::clone(&interrupt)),
    };

    // The client of a remote destination first: nothing is requested yet.
    let into = bcd_pipeline::Destination::new(into, bcd_pipeline::Staging::default())
        .map_err(crate::errors::remote_to_py)?;
    let opened = py
        .detach(|| into.open_sources(&sources, &source_options))
        .map_err(setup_error)?;
    let summary = run_interruptibly(
        py,
        |options| into.ingest(opened.source, options, &mut |_| {}),
        &options,
        &interrupt,
    )?;
    summary_dict(py, &PathBuf::from(into.to_string()), &summary)
}

/// Runs the pipeline on another thread while this one, attached to Python, checks
/// for signals: on Ctrl-C it stops the pipeline (nothing is committed) and raises
/// the KeyboardInterrupt once the pipeline has stopped.
fn run_interruptibly<F>(
    py: Python<'_>,
    run: F,
    options: &IngestOptions,
    interrupt: &AtomicBool,
) -> PyResult<IngestSummary>
where
    F: FnOnce(&IngestOptions) -> Result<IngestSummary, IngestError> + Send,
{
    std::thread::scope(|scope| {
        let (done, mut finished) = mpsc::channel();
        scope.spawn(move || {
            let _ = done.send(run(options));
        });
        loop {
            // The receiver is not Sync, so it is moved to the waiting side and back.
            let (receiver, received) = py.detach(move || {
                let received = finished.recv_timeout(SIGNAL_POLL);
                (finished, received)
            });
            finished = receiver;
            match received {
                Ok(result) => return result.map_err(ingest_error),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    // The thread ended without sending: it panicked.
                    return Err(PyRuntimeError::new_err(
                        "internal error: the ingest thread panicked; nothing was committed",
                    ));
                }
            }
            if let Err(signal) = py.check_signals() {
                interrupt.store(true, Ordering::Relaxed);
                // Wait for the pipeline to roll back before raising.
                let _ = py.detach(move || finished.recv());
                return Err(signal);
            }
        }
    })
}

/// The summary as a dict with exactly the keys and values of `bcd ingest --json`:
/// the pipeline's JSON, read back by Python's `json` module.
fn summary_dict<'py>(
    py: Python<'py>,
    into: &std::path::Path,
    summary: &IngestSummary,
) -> PyResult<Bound<'py, PyDict>> {
    let json = summary.to_json(into).to_string();
    Ok(py
        .import("json")?
        .call_method1("loads", (json,))?
        .cast_into::<PyDict>()?)
}
