//! `bcd.merge` and `bcd.gc`: `bcd merge` and `bcd gc` as functions, run by the
//! same pipeline code; they return the summaries `--json` prints.

use std::path::PathBuf;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyFloat, PyInt, PyString};

use bcd::{Dataset, GcOptions};
use bcd_pipeline::{parse_duration, MergeRunOptions, OnDuplicate};

use crate::errors::to_py;
use crate::options::invalid;

/// A JSON value as the Python object `json.loads` makes of it.
fn to_python<'py>(py: Python<'py>, value: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?
        .call_method1("loads", (value.to_string(),))
}

fn paths(py: Python<'_>, value: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<PathBuf>> {
    let os = py.import("os")?;
    if value.is_instance_of::<PyString>() || value.hasattr("__fspath__")? {
        return Err(PyTypeError::new_err(format!(
            "{name} must be a list of paths, not one path"
        )));
    }
    value
        .try_iter()
        .map_err(|_| PyTypeError::new_err(format!("{name} must be a list of paths")))?
        .map(|item| os.call_method1("fspath", (item?,))?.extract::<PathBuf>())
        .collect()
}

/// Appends the datasets `parts`, in order, to the dataset `into` in one commit
/// (`bcd merge`); returns the summary `bcd merge --json` prints. With
/// `dedup="content"` a part record whose value repeats an earlier record's is
/// left out and listed (`content_duplicates`; also written to `dedup_report`,
/// JSON Lines); `memory_limit` bounds the duplicate checks' memory (an int or
/// a size such as `"4G"`).
#[pyfunction]
#[pyo3(signature = (
    parts, into, *, copy = false, on_duplicate = "error", dedup = None,
    dedup_report = None, memory_limit = None,
))]
#[allow(clippy::too_many_arguments)]
pub fn merge<'py>(
    py: Python<'py>,
    parts: &Bound<'py, PyAny>,
    into: PathBuf,
    copy: bool,
    on_duplicate: &str,
    dedup: Option<&str>,
    dedup_report: Option<&Bound<'py, PyAny>>,
    memory_limit: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let parts = paths(py, parts, "parts")?;
    let options = MergeRunOptions {
        copy,
        on_duplicate: on_duplicate
            .parse::<OnDuplicate>()
            .map_err(|error| invalid("on_duplicate", error))?,
        dedup: crate::options::dedup_arg(dedup)?,
        dedup_report: crate::args::dedup_report_arg(py, dedup, dedup_report)?,
        memory_limit: crate::options::memory_limit_arg(memory_limit)?,
    };
    let report = py
        .detach(|| bcd_pipeline::merge(&parts, &into, &options))
        .map_err(to_py)?;
    to_python(py, &report.to_json())
}

/// Removes what no manifest references from the dataset `path` (`bcd gc`);
/// returns the report `bcd gc --json` prints. `older_than` is a duration like
/// `"30m"`, `"1h"`, `"2d"`, or seconds.
#[pyfunction]
#[pyo3(signature = (path, *, dry_run = false, older_than = None))]
pub fn gc<'py>(
    py: Python<'py>,
    path: PathBuf,
    dry_run: bool,
    older_than: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let older_than = match older_than.filter(|v| !v.is_none()) {
        None => None,
        Some(v) if v.is_instance_of::<PyString>() => {
            Some(parse_duration(&v.extract::<String>()?).map_err(|e| invalid("older_than", e))?)
        }
        Some(v) if v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>() => {
            let seconds: f64 = v.extract()?;
            Some(
                std::time::Duration::try_from_secs_f64(seconds).map_err(|_| {
                    PyValueError::new_err(format!(
                        "older_than: {seconds}: expected a non-negative number of seconds"
                    ))
                })?,
            )
        }
        Some(v) => {
            return Err(PyTypeError::new_err(format!(
                "older_than must be a str like \"1h\" or a number of seconds, not {}",
                v.get_type().name()?
            )))
        }
    };
    let options = GcOptions {
        dry_run,
        older_than,
    };
    let report = py.detach(|| Dataset::gc(&path, &options)).map_err(to_py)?;
    to_python(py, &bcd_pipeline::gc_json(&report, &options))
}
