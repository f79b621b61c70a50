//! `Dataset.extend_arrow`: records from Arrow data handed over through the
//! Arrow PyCapsule interface (`__arrow_c_stream__`, or `__arrow_c_array__` for
//! one record batch): pyarrow tables, record batches and readers, polars and
//! DuckDB results. The value (and key) bytes are read in place from the Arrow
//! buffers and compressed and written without the GIL; no Python object is made
//! per row. The other columns (or those chosen) become fields beside the records,
//! each row taken as it is in Arrow (any type, nested ones too).

use std::ffi::CStr;

use arrow_array::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::ffi_stream::{FFI_ArrowArrayStream, RecordBatchStreamReader};
use arrow_array::{ArrayRef, RecordBatch, StructArray};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict, PyTuple};

use bcd::{Dataset, Lz4Mode};
use bcd_converters::arrow_batches::BatchColumns;
use bcd_converters::field_options::FieldSelection;
use bcd_converters::{FieldValue, Fields};
use bcd_pipeline::fields::FieldsWriter;
use bcd_pipeline::OnDuplicate;

use crate::errors::{fields_to_py, to_py};
use crate::handle::Handle;

const STREAM: &CStr = c"arrow_array_stream";
const SCHEMA: &CStr = c"arrow_schema";
const ARRAY: &CStr = c"arrow_array";

/// Where the batches come from.
enum Batches {
    Stream(RecordBatchStreamReader),
    One(Option<RecordBatch>),
}

impl Batches {
    fn next(&mut self) -> Option<Result<RecordBatch, String>> {
        match self {
            Batches::Stream(reader) => reader.next().map(|r| r.map_err(|e| e.to_string())),
            Batches::One(batch) => batch.take().map(Ok),
        }
    }
}

/// The batches of `data`, taken through its PyCapsule interface.
fn batches(data: &Bound<'_, PyAny>) -> PyResult<Batches> {
    if data.hasattr("__arrow_c_stream__")? {
        let capsule = data.call_method0("__arrow_c_stream__")?;
        let capsule = capsule.cast::<PyCapsule>()?;
        let pointer = capsule.pointer_checked(Some(STREAM))?;
        // SAFETY: a capsule named "arrow_array_stream" holds an ArrowArrayStream
        // (the PyCapsule interface's contract). from_raw moves it out and leaves a
        // released stream behind, which the capsule's destructor then ignores.
        let stream = unsafe { FFI_ArrowArrayStream::from_raw(pointer.as_ptr().cast()) };
        let reader = RecordBatchStreamReader::try_new(stream)
            .map_err(|e| PyValueError::new_err(format!("reading the Arrow stream: {e}")))?;
        return Ok(Batches::Stream(reader));
    }
    if data.hasattr("__arrow_c_array__")? {
        let pair = data.call_method0("__arrow_c_array__")?;
        let pair = pair.cast::<PyTuple>()?;
        let schema = pair.get_item(0)?;
        let array = pair.get_item(1)?;
        let schema = schema.cast::<PyCapsule>()?.pointer_checked(Some(SCHEMA))?;
        let array = array.cast::<PyCapsule>()?.pointer_checked(Some(ARRAY))?;
        // SAFETY: as above, for an ArrowSchema and an ArrowArray; the array is
        // moved out (its capsule then releases nothing), the schema only read.
        let data = unsafe {
            let array = FFI_ArrowArray::from_raw(array.as_ptr().cast());
            let schema: &FFI_ArrowSchema = &*schema.as_ptr().cast::<FFI_ArrowSchema>();
            from_ffi(array, schema)
        }
        .map_err(|e| PyValueError::new_err(format!("reading the Arrow array: {e}")))?;
        if !matches!(data.data_type(), arrow_schema::DataType::Struct(_)) {
            return Err(PyTypeError::new_err(format!(
                "expected a record batch (an Arrow struct array), got an array of {}",
                data.data_type()
            )));
        }
        let batch = RecordBatch::from(StructArray::from(data));
        return Ok(Batches::One(Some(batch)));
    }
    Err(PyTypeError::new_err(format!(
        "expected Arrow data (an object with __arrow_c_stream__ or __arrow_c_array__, \
         such as a pyarrow Table, RecordBatch or RecordBatchReader), got {}",
        data.get_type().name()?
    )))
}

/// Options of one call.
pub struct ArrowExtend<'a> {
    pub value_column: &'a str,
    pub key_column: Option<&'a str>,
    pub on_duplicate: OnDuplicate,
    pub mode: Lz4Mode,
    pub threads: usize,
    /// Which other columns become fields.
    pub fields: FieldSelection,
}

/// The columns of `batch` taken as fields, with their names.
fn field_columns(
    batch: &RecordBatch,
    options: &ArrowExtend<'_>,
) -> PyResult<Vec<(std::sync::Arc<str>, ArrayRef)>> {
    let schema = batch.schema();
    let taken = |name: &str| name == options.value_column || Some(name) == options.key_column;
    match &options.fields {
        FieldSelection::None => Ok(Vec::new()),
        FieldSelection::All => Ok(schema
            .fields()
            .iter()
            .zip(batch.columns())
            .filter(|(field, _)| !taken(field.name()))
            .map(|(field, array)| (std::sync::Arc::from(field.name().as_str()), array.clone()))
            .collect()),
        FieldSelection::Only(names) => names
            .iter()
            .map(|name| {
                if taken(name) {
                    return Err(PyValueError::new_err(format!(
                        "fields: {name:?} is the value or key column"
                    )));
                }
                match batch.column_by_name(name) {
                    Some(array) => Ok((std::sync::Arc::from(name.as_str()), array.clone())),
                    None => {
                        let names: Vec<&str> =
                            schema.fields().iter().map(|f| f.name().as_str()).collect();
                        Err(PyValueError::new_err(format!(
                            "fields: Arrow data has no column {name:?} (columns: {names:?})"
                        )))
                    }
                }
            })
            .collect(),
    }
}

/// What one call added.
#[derive(Default)]
struct Added {
    records: u64,
    skipped: u64,
    rows: u64,
}

/// Extends the dataset of `handle` with the rows of `data`, in one commit.
pub fn extend_arrow<'py>(
    py: Python<'py>,
    handle: &Handle,
    data: &Bound<'py, PyAny>,
    options: &ArrowExtend<'_>,
) -> PyResult<Bound<'py, PyDict>> {
    let mut guard = handle.write(py)?;
    let dataset: &mut Dataset = &mut guard;
    let keyed = dataset.keyed();
    match (keyed, options.key_column) {
        (true, None) => {
            return Err(PyValueError::new_err(
                "a keyed dataset needs key_column: the column holding each record's key",
            ))
        }
        (false, Some(column)) => {
            return Err(PyValueError::new_err(format!(
                "key_column={column:?}: a keyless dataset takes no keys"
            )))
        }
        _ => {}
    }
    dataset.set_lz4_mode(options.mode);
    let mut batches = batches(data)?;
    let mut extend = py.detach(|| dataset.begin_extend()).map_err(to_py)?;
    let committed: &Dataset = extend.dataset();
    let mut writer = match py.detach(|| FieldsWriter::begin(committed)) {
        Ok(writer) => writer,
        Err(error) => {
            py.detach(move || drop(extend));
            return Err(fields_to_py(error));
        }
    };
    let (batch_records, batch_bytes) = bcd::batch_limits(options.threads);
    let mut added = Added::default();
    let outcome = (|| -> PyResult<()> {
        loop {
            // With the GIL: a stream may be made by Python code (a generator
            // behind a RecordBatchReader), which may read this dataset.
            let next = {
                let _reads = handle.share(extend.dataset());
                batches.next()
            };
            extend.check_process().map_err(to_py)?;
            let Some(batch) = next else { return Ok(()) };
            let batch =
                batch.map_err(|e| PyValueError::new_err(format!("reading Arrow data: {e}")))?;
            let extend = &mut extend;
            let added = &mut added;
            let writer = &mut writer;
            py.detach(move || -> PyResult<()> {
                let field_columns = field_columns(&batch, options)?;
                // A column's field metadata (an Arrow extension type: `arrow.uuid`,
                // `arrow.json`, a tensor's shape) is part of its type.
                let schema = batch.schema();
                for (name, _) in &field_columns {
                    if let Ok(field) = schema.field_with_name(name) {
                        for (key, value) in field.metadata() {
                            writer.set_column_metadata(name, key, value);
                        }
                    }
                }
                let columns = BatchColumns::new(
                    &batch,
                    options.value_column,
                    options.key_column,
                    "Arrow data",
                )
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
                let null = |what: &str, row: usize| {
                    PyValueError::new_err(format!(
                        "Arrow data: row {}: the {what} column {:?} is null",
                        added.rows as usize + row,
                        if what == "key" {
                            options.key_column.unwrap_or("")
                        } else {
                            options.value_column
                        }
                    ))
                };
                let mut start = 0;
                while start < columns.len() {
                    let mut end = start;
                    let mut bytes = 0;
                    while end < columns.len() && end - start < batch_records && bytes < batch_bytes
                    {
                        bytes += columns.value(end).map_or(0, <[u8]>::len);
                        end += 1;
                    }
                    let mut values = Vec::with_capacity(end - start);
                    let mut pairs = Vec::with_capacity(if keyed { end - start } else { 0 });
                    for row in start..end {
                        let value = columns.value(row).ok_or_else(|| null("value", row))?;
                        match columns.key(row) {
                            Some(key) => pairs.push((key.ok_or_else(|| null("key", row))?, value)),
                            None => values.push(value),
                        }
                    }
                    let pushed = if !keyed {
                        extend.push_value_batch(&values).map(|()| Vec::new())
                    } else if options.on_duplicate == OnDuplicate::Skip {
                        extend.push_batch_skipping_duplicates(&pairs)
                    } else {
                        extend.push_batch(&pairs).map(|()| Vec::new())
                    };
                    let skipped: Vec<usize> = pushed.map_err(to_py)?;
                    // Fields of the records written, in order (skipped ones are
                    // not), then the sidecars of the shards that filled.
                    let mut left_out = skipped.iter().peekable();
                    for row in start..end {
                        if left_out.next_if(|&&at| at == row - start).is_some() {
                            continue;
                        }
                        let mut fields = Fields::new();
                        for (name, array) in &field_columns {
                            fields.push(name.clone(), FieldValue::Arrow(array.clone(), row));
                        }
                        let key_len = match columns.key(row) {
                            Some(Some(key)) => key.len(),
                            _ => 0,
                        };
                        let raw_len = columns.value(row).map_or(0, <[u8]>::len);
                        let place = added.rows as usize + row;
                        writer
                            .push(
                                key_len,
                                raw_len,
                                &fields,
                                &format_args!("Arrow data: row {place}"),
                            )
                            .map_err(fields_to_py)?;
                    }
                    writer.shards_finished(extend).map_err(fields_to_py)?;
                    added.skipped += skipped.len() as u64;
                    added.records += (end - start - skipped.len()) as u64;
                    start = end;
                }
                added.rows += columns.len() as u64;
                Ok(())
            })?;
            py.check_signals()?;
        }
    })();
    if let Err(error) = outcome {
        py.detach(move || drop(extend));
        return Err(error);
    }
    let summary = py.detach(move || -> PyResult<bcd::ExtendSummary> {
        if let Err(error) = writer.finish(&mut extend) {
            drop(extend);
            return Err(fields_to_py(error));
        }
        extend.commit().map_err(to_py)
    })?;
    let result = PyDict::new(py);
    result.set_item("records", added.records)?;
    result.set_item("skipped", added.skipped)?;
    result.set_item("shards", summary.shards)?;
    result.set_item("bytes_stored", summary.bytes_stored)?;
    Ok(result)
}
