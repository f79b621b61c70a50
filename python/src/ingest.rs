//! `bcd.ingest`: `bcd ingest` as a function. The sources are opened with
//! [`bcd_pipeline::open_sources`] and read by [`bcd_pipeline::ingest`], the same
//! code and rules as the command; options are the command's flags in snake_case.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use bcd::Compression;
use bcd_converters::{FieldType, SourceError};
use bcd_pipeline::{
    parse_delimiter, parse_field_type, parse_labels, parse_schema, parse_value_ext, read_schema,
    spell_options, IngestError, IngestOptions, IngestSummary, OnDuplicate, SourceFormat,
    SourceOptions, SourceSetupError,
};

use crate::args::{fields_arg, location};
use crate::errors::{message, os_error, to_py};
use crate::options::{invalid, lz4_mode_arg, shard_size_arg};

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

/// A list of strings from one str or path-like, or an iterable of them.
fn strings(value: Option<&Bound<'_, PyAny>>, name: &str) -> PyResult<Vec<String>> {
    let Some(value) = value.filter(|value| !value.is_none()) else {
        return Ok(Vec::new());
    };
    let os = value.py().import("os")?;
    if value.is_instance_of::<PyString>() || value.hasattr("__fspath__")? {
        return Ok(vec![os
            .call_method1("fspath", (value,))?
            .extract()
            .map_err(|_| {
                PyTypeError::new_err(format!("{name} must be str or path-like"))
            })?]);
    }
    let mut items = Vec::new();
    for item in value
        .try_iter()
        .map_err(|_| PyTypeError::new_err(format!("{name} must be a str or a list of str")))?
    {
        let item = os.call_method1("fspath", (item?,))?;
        items.push(item.extract::<String>().map_err(|_| {
            PyTypeError::new_err(format!("{name} must hold str or path-like items"))
        })?);
    }
    Ok(items)
}

/// `field_type=`: a dict of column name to type (`{"label": "int64"}`), or an
/// iterable of `"NAME=TYPE"` strings, as `--field-type` takes them.
fn field_type_arg(value: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(String, FieldType)>> {
    let Some(value) = value.filter(|value| !value.is_none()) else {
        return Ok(Vec::new());
    };
    let mut types = Vec::new();
    if let Ok(dict) = value.cast::<PyDict>() {
        for (name, type_name) in dict.iter() {
            let (name, type_name): (String, String) = (name.extract()?, type_name.extract()?);
            let field_type = type_name
                .parse::<FieldType>()
                .map_err(|e| PyValueError::new_err(format!("field_type: {name:?}: {e}")))?;
            types.push((name, field_type));
        }
        return Ok(types);
    }
    if value.is_instance_of::<PyString>() {
        let text: String = value.extract()?;
        return Ok(vec![
            parse_field_type(&text).map_err(|error| invalid("field_type", error))?
        ]);
    }
    for item in value.try_iter().map_err(|_| {
        PyTypeError::new_err(
            "field_type must be a dict of name to type, or a list of \"NAME=TYPE\" str",
        )
    })? {
        let text: String = item?
            .extract()
            .map_err(|_| PyTypeError::new_err("field_type must hold \"NAME=TYPE\" str items"))?;
        types.push(parse_field_type(&text).map_err(|error| invalid("field_type", error))?);
    }
    Ok(types)
}

/// `value_ext=`: `"jpg,png"`, or an iterable of extensions.
fn value_ext_arg(value: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
    let mut exts = Vec::new();
    for text in strings(value, "value_ext")? {
        for ext in text.split(',') {
            exts.push(parse_value_ext(ext).map_err(|error| invalid("value_ext", error))?);
        }
    }
    Ok(exts)
}

/// `schema=`: a path to a schema file (as `--schema` takes it), or the schema
/// itself as a list of `{"name": ..., "type": ...}` dicts.
fn schema_arg(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<arrow_schema::SchemaRef>> {
    let Some(value) = value.filter(|value| !value.is_none()) else {
        return Ok(None);
    };
    if value.is_instance_of::<PyString>() || value.hasattr("__fspath__")? {
        let path: PathBuf = value.extract()?;
        return read_schema(&path)
            .map(Some)
            .map_err(|error| PyValueError::new_err(format!("schema: {}", message(&error))));
    }
    let text: String = value
        .py()
        .import("json")?
        .call_method1("dumps", (value,))
        .map_err(|_| {
            PyTypeError::new_err(
                "schema must be a path or a list of {\"name\": NAME, \"type\": TYPE} dicts",
            )
        })?
        .extract()?;
    parse_schema(&text)
        .map(Some)
        .map_err(|reason| PyValueError::new_err(format!("schema: {reason}")))
}

/// A setup error, spelling options as this function's keyword arguments.
fn setup_error(error: SourceSetupError) -> PyErr {
    match error {
        SourceSetupError::Unreadable { ref source, .. } => os_error(source, message(&error)),
        SourceSetupError::Open(error) => source_error(error),
        SourceSetupError::UndetectableFormat { name } => PyValueError::new_err(format!(
            "{name}: cannot tell its format from the name or the first bytes; pass format=\"dir\"|\"tar\"|\"parquet\"|\"csv\"|\"tfrecord\""
        )),
        SourceSetupError::OptionForOtherFormat {
            option,
            owner,
            format,
        } => PyValueError::new_err(format!(
            "{option}= applies to {owner} sources only, not {format}"
        )),
        SourceSetupError::KeyColumnForOtherFormat { .. } => {
            PyValueError::new_err("key_column= applies to parquet and csv sources only")
        }
        SourceSetupError::FieldsForOtherFormat { format } => PyValueError::new_err(format!(
            "fields= applies to parquet, csv and tfrecord sources only, not {format}"
        )),
        SourceSetupError::MissingValueColumn => PyValueError::new_err(
            "parquet sources need value_column=COL (and key_column=COL for a keyed dataset)",
        ),
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
        IngestError::Internal(_) => PyRuntimeError::new_err(message),
        // Duplicates, and options that contradict the dataset or the source.
        _ => PyValueError::new_err(message),
    }
}

/// Reads directory trees, tar / WebDataset archives, Parquet, CSV-of-paths or
/// TFRecord files into the dataset at `into` in one all-or-nothing commit, as
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
    jobs = None, level = None, include = None, exclude = None, follow_links = false,
    value_column = None, key_column = None, skip_nulls = false, path_column = None,
    root = None, delimiter = None, feature = None, key_feature = None, fields = None,
    field_type = None, labels = None, samples = false, value_ext = None, json_fields = false,
    skip_bad_samples = false, value_field = None, value_base64 = false, key_field = None,
    schema = None,
), text_signature = "(sources, into, *, format=None, keyless=False, compression=..., max_shard_size=None, on_duplicate='error', jobs=None, level=None, include=None, exclude=None, follow_links=False, value_column=None, key_column=None, skip_nulls=False, path_column=None, root=None, delimiter=None, feature=None, key_feature=None, fields=None, field_type=None, labels=None, samples=False, value_ext=None, json_fields=False, skip_bad_samples=False, value_field=None, value_base64=False, key_field=None, schema=None)")]
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
    include: Option<&Bound<'py, PyAny>>,
    exclude: Option<&Bound<'py, PyAny>>,
    follow_links: bool,
    value_column: Option<String>,
    key_column: Option<String>,
    skip_nulls: bool,
    path_column: Option<String>,
    root: Option<&Bound<'py, PyAny>>,
    delimiter: Option<&str>,
    feature: Option<String>,
    key_feature: Option<String>,
    fields: Option<&Bound<'py, PyAny>>,
    field_type: Option<&Bound<'py, PyAny>>,
    labels: Option<&str>,
    samples: bool,
    value_ext: Option<&Bound<'py, PyAny>>,
    json_fields: bool,
    skip_bad_samples: bool,
    value_field: Option<String>,
    value_base64: bool,
    key_field: Option<String>,
    schema: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let sources = strings(Some(sources), "sources")?;
    let into = location(py, into)?;
    let root = match root.filter(|r| !r.is_none()) {
        Some(root) => match location(py, root)? {
            bcd_remote::Location::Local(path) => Some(path),
            bcd_remote::Location::Remote(uri) => {
                return Err(PyValueError::new_err(format!(
                    "root: {uri}: CSV roots must be local directories"
                )))
            }
        },
        None => None,
    };
    let format = format
        .map(|name| name.parse::<SourceFormat>().map_err(setup_error))
        .transpose()?;
    let source_options = SourceOptions {
        format,
        include: strings(include, "include")?,
        exclude: strings(exclude, "exclude")?,
        follow_links,
        value_column,
        key_column,
        skip_nulls,
        path_column,
        root,
        delimiter: delimiter
            .map(|text| parse_delimiter(text).map_err(|error| invalid("delimiter", error)))
            .transpose()?,
        feature,
        key_feature,
        fields: fields_arg(fields)?,
        field_type: field_type_arg(field_type)?,
        labels: labels
            .map(|text| parse_labels(text).map_err(|error| invalid("labels", error)))
            .transpose()?,
        samples,
        value_ext: value_ext_arg(value_ext)?,
        json_fields,
        skip_bad_samples,
        value_field,
        value_base64,
        key_field,
        schema: schema_arg(schema)?,
    };
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
        interrupt: Some(Arc::clone(&interrupt)),
    };

    let (opened, into) = match into {
        bcd_remote::Location::Local(into) => (
            py.detach(|| bcd_pipeline::open_sources_into(&sources, &source_options, &into))
                .map_err(setup_error)?,
            Ok(into),
        ),
        bcd_remote::Location::Remote(uri) => (
            py.detach(|| bcd_pipeline::open_sources(&sources, &source_options))
                .map_err(setup_error)?,
            Err(uri),
        ),
    };
    match into {
        Ok(into) => {
            let summary = run_interruptibly(
                py,
                |into, options| bcd_pipeline::ingest(opened.source, into, options, &mut |_| {}),
                &into,
                &options,
                &interrupt,
            )?;
            summary_dict(py, &into, &summary)
        }
        Err(uri) => {
            // Staged in a temporary directory, then pushed onto the state pulled.
            let remote =
                bcd_remote::Remote::new(uri.clone()).map_err(crate::errors::remote_to_py)?;
            let name = PathBuf::from(uri.to_string());
            let summary = run_interruptibly(
                py,
                |_, options| {
                    bcd_pipeline::ingest_into_remote(
                        opened.source,
                        &remote,
                        &bcd_pipeline::Staging::default(),
                        options,
                        &bcd_remote::TransferOptions::default(),
                        &mut |_| {},
                    )
                    .map(|summary| summary.ingest)
                },
                &name,
                &options,
                &interrupt,
            )?;
            summary_dict(py, &name, &summary)
        }
    }
}

/// Runs the pipeline on another thread while this one, attached to Python, checks
/// for signals: on Ctrl-C it stops the pipeline (nothing is committed) and raises
/// the KeyboardInterrupt once the pipeline has stopped.
fn run_interruptibly<F>(
    py: Python<'_>,
    run: F,
    into: &std::path::Path,
    options: &IngestOptions,
    interrupt: &AtomicBool,
) -> PyResult<IngestSummary>
where
    F: FnOnce(&std::path::Path, &IngestOptions) -> Result<IngestSummary, IngestError> + Send,
{
    std::thread::scope(|scope| {
        let (done, mut finished) = mpsc::channel();
        scope.spawn(move || {
            let _ = done.send(run(into, options));
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
