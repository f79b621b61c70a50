//! Arguments both `bcd.Dataset` and `bcd.ingest` take: paths (local or in
//! object storage) and `fields=`. Shared here so neither module needs the other.

use std::path::PathBuf;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use bcd_converters::FieldSelection;
use bcd_pipeline::{fields_from_names, parse_fields};
use bcd_remote::Location;

use crate::errors::remote_to_py;
use crate::options::invalid;

/// A path argument as the OS names it (`os.fspath`): a str, bytes or path-like.
pub fn fspath(py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<std::ffi::OsString> {
    let text = py.import("os")?.getattr("fspath")?.call1((path,))?;
    if let Ok(bytes) = text.cast::<PyBytes>() {
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            return Ok(std::ffi::OsStr::from_bytes(bytes.as_bytes()).to_owned());
        }
        #[cfg(not(unix))]
        return Ok(String::from_utf8_lossy(bytes.as_bytes())
            .into_owned()
            .into());
    }
    text.extract()
}

/// Where a path argument points: a local path, or a URI of a store; an
/// unsupported `scheme://` is a ValueError, never a local path.
pub fn location(py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<Location> {
    Location::parse(&fspath(py, path)?).map_err(remote_to_py)
}

/// `fields=`: `"all"`, `"none"`, `"label,caption"`, or an iterable of names.
pub fn fields_arg(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<FieldSelection>> {
    let Some(value) = value.filter(|value| !value.is_none()) else {
        return Ok(None);
    };
    if value.is_instance_of::<PyString>() {
        let text: String = value.extract()?;
        return parse_fields(&text)
            .map(Some)
            .map_err(|error| invalid("fields", error));
    }
    let mut names = Vec::new();
    for item in value.try_iter().map_err(|_| {
        PyTypeError::new_err("fields must be \"all\", \"none\", a str of names separated by commas, or a list of str")
    })? {
        names.push(
            item?
                .extract::<String>()
                .map_err(|_| PyTypeError::new_err("fields must hold str items"))?,
        );
    }
    fields_from_names(names)
        .map(Some)
        .map_err(|expected| PyValueError::new_err(format!("fields: {expected}")))
}

/// `dedup_report=`: a path, given only with `dedup="content"`.
pub(crate) fn dedup_report_arg(
    py: Python<'_>,
    dedup: Option<&str>,
    report: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<PathBuf>> {
    let Some(report) = report.filter(|r| !r.is_none()) else {
        return Ok(None);
    };
    if dedup != Some("content") {
        return Err(PyValueError::new_err(
            "dedup_report applies only with dedup=\"content\"",
        ));
    }
    Ok(Some(PathBuf::from(fspath(py, report)?)))
}
