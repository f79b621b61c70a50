//! Reading fields from Python: `Dataset.schema`, `fields()`, `sample(i)`,
//! `stats()` and `metadata`. Tables go to pyarrow through the Arrow C stream
//! interface, so the columns of a shard's fields file stay in its mapping (no
//! copy where the type needs no conversion); pyarrow is imported only here,
//! when one of them is called.

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{RecordBatch, RecordBatchIterator};
use bcd::Dataset;
use bcd_pipeline::fields::{DatasetFields, FieldsIoError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::errors::fields_to_py;

/// The dataset schema as a `pyarrow.Schema`.
pub fn schema<'py>(py: Python<'py>, dataset: &Dataset) -> PyResult<Bound<'py, PyAny>> {
    let fields = DatasetFields::load(dataset).map_err(fields_to_py)?;
    let message = fields
        .schema
        .ipc_message()
        .map_err(|e| fields_to_py(e.into()))?;
    let pyarrow = py.import("pyarrow")?;
    let buffer = pyarrow.call_method1("py_buffer", (pyo3::types::PyBytes::new(py, &message),))?;
    pyarrow
        .getattr("ipc")?
        .call_method1("read_schema", (buffer,))
}

/// The dataset metadata, as JSON text.
pub fn metadata_json(dataset: &Dataset) -> PyResult<String> {
    let fields = DatasetFields::load(dataset).map_err(fields_to_py)?;
    Ok(serde_json::Value::Object(fields.metadata).to_string())
}

/// The batches of every shard (`columns` only), or of record `only` alone.
pub fn batches(
    dataset: &Dataset,
    columns: Option<&[String]>,
    only: Option<usize>,
) -> Result<(arrow_schema::SchemaRef, Vec<RecordBatch>), FieldsIoError> {
    let fields = DatasetFields::load(dataset)?;
    let schema = fields.projection(columns)?.arrow_schema();
    let mut out = Vec::new();
    match only {
        Some(index) => {
            let located = dataset.value_location(index)?;
            let local = (index as u64 - dataset.shard_first_record(located.shard)) as usize;
            let mut skip = local;
            for batch in fields.shard_batches(dataset, located.shard, columns)? {
                if skip < batch.num_rows() {
                    out.push(batch.slice(skip, 1));
                    break;
                }
                skip -= batch.num_rows();
            }
        }
        None => {
            for shard in 0..dataset.shards() {
                out.extend(fields.shard_batches(dataset, shard, columns)?);
            }
        }
    }
    Ok((schema, out))
}

/// A `pyarrow.Table` of `batches`, through the C stream interface.
pub fn to_pyarrow<'py>(
    py: Python<'py>,
    schema: arrow_schema::SchemaRef,
    batches: Vec<RecordBatch>,
) -> PyResult<Bound<'py, PyAny>> {
    let reader = RecordBatchIterator::new(batches.into_iter().map(Ok), schema);
    let stream = FFI_ArrowArrayStream::new(Box::new(reader));
    let capsule = PyCapsule::new_with_value(py, stream, c"arrow_array_stream")?;
    let pyarrow = py.import("pyarrow")?;
    pyarrow
        .getattr("RecordBatchReader")?
        .call_method1("_import_from_c_capsule", (capsule,))?
        .call_method0("read_all")
}
