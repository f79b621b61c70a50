//! A `bcd.Dataset`'s views: read (`view`, `views`), made (`create_view`,
//! `select`), refreshed and dropped. A view reaches Python as a `bcd.View`
//! (`python/bcd/views.py`) over this dataset and the view's indices, a
//! zero-copy memoryview of the mapped view file (4 bytes per record).

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use bcd::{Dataset, View, ViewIndices};
use bcd_pipeline::views;

use super::PyDataset;
use crate::errors::{fields_to_py, to_py, view_to_py};
use crate::shard_views::indices_view;

/// What a `bcd.View` is made from, gathered with the dataset's lock held.
pub(super) struct ViewParts {
    indices: ViewIndices,
    name: Option<String>,
    expression: Option<String>,
    evaluated_over: u64,
}

impl ViewParts {
    fn of(view: View, name: Option<&str>) -> ViewParts {
        ViewParts {
            indices: view.indices,
            name: name.map(str::to_owned),
            expression: view.expression,
            evaluated_over: view.binding.records,
        }
    }
}

impl PyDataset {
    /// A `bcd.View` of this dataset.
    pub(super) fn make_view<'py>(
        slf: &Bound<'py, Self>,
        parts: ViewParts,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let width = parts.indices.width();
        let indices = indices_view(py, parts.indices)?;
        py.import("bcd.views")?.getattr("View")?.call1((
            slf,
            indices,
            width,
            parts.name,
            parts.expression,
            parts.evaluated_over,
        ))
    }

    /// Refuses writing views beside a cached mirror of a dataset in object
    /// storage.
    fn check_local(&self, what: &str) -> PyResult<()> {
        match &self.remote {
            None => Ok(()),
            Some(_) => Err(PyValueError::new_err(format!(
                "{what} writes a view beside a local dataset; this one is in object storage: make the view on a local copy (`bcd pull`) and push it"
            ))),
        }
    }

    /// The view `name`; when it was evaluated over more records than this
    /// handle knows (the dataset grew and the view was refreshed since the
    /// open), after picking up the records committed since.
    pub(super) fn open_view(&self, py: Python<'_>, name: &str) -> PyResult<ViewParts> {
        let read = |py: Python<'_>| -> PyResult<Result<View, bcd::Error>> {
            let handle = self.handle(py)?;
            let dataset = handle.read(py);
            let dataset: &Dataset = &dataset;
            Ok(py.detach(|| dataset.view(name)))
        };
        let view = match read(py)? {
            Err(bcd::Error::StaleView { .. }) => {
                self.refresh_handle(py)?;
                read(py)?
            }
            other => other,
        };
        Ok(ViewParts::of(view.map_err(to_py)?, Some(name)))
    }

    pub(super) fn list_views(&self, py: Python<'_>) -> PyResult<String> {
        let handle = self.handle(py)?;
        let dataset = handle.read(py);
        let dataset: &Dataset = &dataset;
        let infos = py
            .detach(|| views::list_views(dataset))
            .map_err(view_to_py)?;
        let array: Vec<_> = infos.iter().map(views::ViewInfo::to_json).collect();
        Ok(serde_json::Value::Array(array).to_string())
    }

    /// `create_view` and `select`: the records of `expression` or `indices`
    /// (exactly one), persisted as `name` when there is one.
    pub(super) fn new_view(
        &self,
        py: Python<'_>,
        name: Option<&str>,
        expression: Option<&str>,
        indices: Option<&Bound<'_, PyAny>>,
        replace: bool,
    ) -> PyResult<ViewParts> {
        if name.is_some() {
            self.check_local("create_view")?;
        }
        let indices = match (expression, indices) {
            (Some(_), Some(_)) | (None, None) => {
                return Err(PyTypeError::new_err(
                    "give the records by where= (an expression) or by indices=, one of them",
                ))
            }
            (None, Some(indices)) => Some(index_array(py, indices)?),
            (Some(_), None) => None,
        };
        let handle = self.handle(py)?;
        let dataset = handle.read(py);
        let dataset: &Dataset = &dataset;
        py.detach(|| -> Result<ViewParts, views::ViewError> {
            match (name, expression, indices) {
                (Some(name), Some(expression), _) => {
                    views::create_view(dataset, name, expression, replace)?;
                    Ok(ViewParts::of(dataset.view(name)?, Some(name)))
                }
                (Some(name), None, Some(indices)) => {
                    views::create_view_from_indices(dataset, name, indices, replace)?;
                    Ok(ViewParts::of(dataset.view(name)?, Some(name)))
                }
                (None, Some(expression), _) => Ok(ViewParts {
                    indices: views::select(dataset, expression)?,
                    name: None,
                    expression: Some(expression.to_owned()),
                    evaluated_over: dataset.len() as u64,
                }),
                (None, None, Some(indices)) => Ok(ViewParts {
                    indices: views::select_indices(dataset, indices)?,
                    name: None,
                    expression: None,
                    evaluated_over: dataset.len() as u64,
                }),
                (_, None, None) => unreachable!("checked above"),
            }
        })
        .map_err(view_to_py)
    }

    pub(super) fn refresh_one_view(&self, py: Python<'_>, name: &str) -> PyResult<ViewParts> {
        self.check_local("refresh_view")?;
        // The records committed since the open are what the view is extended over.
        self.refresh_handle(py)?;
        let handle = self.handle(py)?;
        let dataset = handle.read(py);
        let dataset: &Dataset = &dataset;
        py.detach(|| -> Result<ViewParts, views::ViewError> {
            views::refresh_view(dataset, name)?;
            Ok(ViewParts::of(dataset.view(name)?, Some(name)))
        })
        .map_err(view_to_py)
    }

    pub(super) fn drop_one_view(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        self.check_local("drop_view")?;
        let handle = self.handle(py)?;
        let dataset = handle.read(py);
        let dataset: &Dataset = &dataset;
        py.detach(|| dataset.drop_view(name)).map_err(to_py)
    }

    /// The statistics report of the records `indices` (a view's: increasing).
    pub(super) fn records_stats(
        &self,
        py: Python<'_>,
        indices: &Bound<'_, PyAny>,
    ) -> PyResult<String> {
        let indices = index_array(py, indices)?;
        let handle = self.handle(py)?;
        let dataset = handle.read(py);
        let dataset: &Dataset = &dataset;
        let records = views::select_indices(dataset, indices).map_err(view_to_py)?;
        let report = py
            .detach(|| bcd_pipeline::fields::records_stats_report(dataset, &records))
            .map_err(fields_to_py)?;
        Ok(report.to_string())
    }
}

/// Record indices from any one-dimensional array of integers (a NumPy array of
/// any integer dtype, a list, a pyarrow array, ...): each at least 0 (a view's
/// records are positions; negative ones are refused, naming the first).
fn index_array(py: Python<'_>, indices: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    let numpy = py.import("numpy")?;
    let array = numpy.call_method1("asarray", (indices,))?;
    let ndim: usize = array.getattr("ndim")?.extract()?;
    if ndim != 1 {
        return Err(PyValueError::new_err(format!(
            "indices must be one-dimensional, not of {ndim} dimensions"
        )));
    }
    let kind: String = array.getattr("dtype")?.getattr("kind")?.extract()?;
    let size: usize = array.getattr("size")?.extract()?;
    if size == 0 {
        return Ok(Vec::new());
    }
    match kind.as_str() {
        "u" => {}
        "i" => {
            let low: i64 = array.call_method0("min")?.extract()?;
            if low < 0 {
                let at: usize = numpy.call_method1("argmin", (&array,))?.extract()?;
                return Err(PyValueError::new_err(format!(
                    "index {low} (position {at} of indices) is negative: a view's indices are record positions, 0 to len - 1"
                )));
            }
        }
        _ => {
            let dtype = array.getattr("dtype")?.str()?;
            return Err(PyTypeError::new_err(format!(
                "indices must be integers, not {dtype}"
            )));
        }
    }
    let kwargs = PyDict::new(py);
    kwargs.set_item("dtype", "<u8")?;
    let wide = numpy.call_method("ascontiguousarray", (&array,), Some(&kwargs))?;
    let bytes: Vec<u8> = wide.call_method0("tobytes")?.extract()?;
    Ok(bytes
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect())
}
