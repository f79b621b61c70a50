//! `Dataset.extend_arrow`: records from Arrow data handed over through the
//! Arrow PyCapsule interface (`__arrow_c_stream__`, or `__arrow_c_array__` for
//! one record batch): pyarrow tables, record batches and readers, polars and
//! DuckDB results. The value (and key) bytes are read in place from the Arrow
//! buffers and compressed and written without the GIL; no Python object is made
//! per row. The other columns (or those chosen) become fields beside the records,
//! each row taken as it is in Arrow (any type, nested ones too).

use std::borrow::Cow;
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
use bcd_pipeline::{
    ContentDuplicate, FieldsExtend, FieldsExtendOptions, NewRecord, Numbered, OnDuplicate,
};

use crate::errors::fields_to_py;
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
    /// `dedup=`: keys, or repeated values too.
    pub dedup: bcd::Dedup,
    /// `memory_limit=` of the duplicate checks.
    pub memory_limit: Option<u64>,
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
    // Records go in whole through the one extend with fields, which applies
    // the duplicate policy.
    let checks = FieldsExtendOptions {
        store: bcd::ExtendOptions {
            dedup: options.dedup,
            memory_limit: options.memory_limit,
            ..bcd::ExtendOptions::default()
        },
        ..FieldsExtendOptions::default()
    };
    let mut extend = py
        .detach(|| FieldsExtend::begin_with(dataset, options.on_duplicate, checks))
        .map_err(fields_to_py)?;
    let (batch_records, batch_bytes) = bcd::batch_limits(options.threads);
    let mut rows: u64 = 0;
    let mut duplicates: Vec<ContentDuplicate> = Vec::new();
    let outcome = (|| -> PyResult<()> {
        loop {
            // With the GIL: a stream may be made by Python code (a generator
            // behind a RecordBatchReader), which may read this dataset.
            let next = {
                let _reads = handle.share(extend.dataset());
                batches.next()
            };
            extend.check_process().map_err(fields_to_py)?;
            let Some(batch) = next else { return Ok(()) };
            let batch =
                batch.map_err(|e| PyValueError::new_err(format!("reading Arrow data: {e}")))?;
            let extend = &mut extend;
            let rows = &mut rows;
            let duplicates = &mut duplicates;
            py.detach(move || -> PyResult<()> {
                let field_columns = field_columns(&batch, options)?;
                // A column's field metadata (an Arrow extension type: `arrow.uuid`,
                // `arrow.json`, a tensor's shape) is part of its type.
                let schema = batch.schema();
                for (name, _) in &field_columns {
                    if let Ok(field) = schema.field_with_name(name) {
                        for (key, value) in field.metadata() {
                            extend.set_column_metadata(name, key, value);
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
                        *rows as usize + row,
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
                    let mut entries = Vec::with_capacity(end - start);
                    for row in start..end {
                        let value = columns.value(row).ok_or_else(|| null("value", row))?;
                        let key = match columns.key(row) {
                            Some(key) => key.ok_or_else(|| null("key", row))?,
                            None => &[][..],
                        };
                        let mut fields = Fields::new();
                        for (name, array) in &field_columns {
                            fields.push(name.clone(), FieldValue::Arrow(array.clone(), row));
                        }
                        let origin = Numbered {
                            what: "Arrow data: row",
                            number: *rows + row as u64,
                        };
                        entries.push((key, value, fields, origin));
                    }
                    let records: Vec<NewRecord<'_>> = entries
                        .iter()
                        .map(|(key, value, fields, origin)| NewRecord {
                            key,
                            value,
                            fields: Cow::Borrowed(fields),
                            origin,
                        })
                        .collect();
                    let skipped = extend.push_batch(&records).map_err(fields_to_py)?;
                    for duplicate in skipped.values {
                        let record = &records[duplicate.position];
                        duplicates.push(ContentDuplicate {
                            key: keyed.then(|| record.key.to_vec()),
                            index: *rows + (start + duplicate.position) as u64,
                            origin: record.origin.to_string(),
                            of: duplicate.of,
                            of_key: keyed.then_some(duplicate.of_key),
                        });
                    }
                    start = end;
                }
                *rows += columns.len() as u64;
                Ok(())
            })?;
            py.check_signals()?;
        }
    })();
    if let Err(error) = outcome {
        py.detach(move || drop(extend));
        return Err(error);
    }
    let summary = py.detach(move || extend.commit()).map_err(fields_to_py)?;
    let result = PyDict::new(py);
    result.set_item("records", summary.records)?;
    result.set_item("skipped", summary.skipped)?;
    result.set_item("shards", summary.shards)?;
    result.set_item("bytes_stored", summary.bytes_stored)?;
    if options.dedup == bcd::Dedup::Content {
        let listed =
            serde_json::Value::Array(duplicates.iter().map(ContentDuplicate::to_json).collect());
        result.set_item("skipped_values", summary.skipped_values)?;
        result.set_item(
            "content_duplicates",
            py.import("json")?
                .call_method1("loads", (listed.to_string(),))?,
        )?;
    }
    Ok(result)
}
