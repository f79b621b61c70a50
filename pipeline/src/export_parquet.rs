//! A dataset, records and fields, to one Parquet file (`bcd export --to
//! out.parquet`): one row per record with the key (keyed datasets), the value
//! and every field, with the metadata Hugging Face `datasets` needs to restore
//! its features (ClassLabel names, Image).
//!
//! Columns: the key, named as the Parquet source's key column was (the
//! dataset metadata's `value.key_column`) or `key`, as `string` when every key
//! exported is UTF-8, else `binary`; the value, named as the source's value
//! column was (`value.column`) or `value`, as `binary`, or with `hf_image` (or
//! when the source's value column was such a struct) as a Hugging Face
//! Image-style struct `{bytes: binary, path: string}` whose `path` is the
//! `<value>.path` field when there is one; then every field in schema order
//! with its Arrow type (`bcd.*` columns left out). The file's `huggingface`
//! metadata is the one the source Parquet file carried, when the dataset has it
//! (a Hugging Face dump ingested and exported comes back with equal columns,
//! values and features); otherwise it is made from the columns when each has a
//! `datasets` feature: `Value` of its dtype, `ClassLabel` for a column the
//! metadata names classes of (`class_labels`, or `class_names` for
//! `label_index`), `Image` for an Image-style value.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, StringBuilder};
use arrow_array::{Array, ArrayRef, RecordBatch, StructArray};
use arrow_schema::{DataType, Field, Fields, Schema};
use bcd::Dataset;
use bcd_converters::parquet_export::ParquetExport;
use bcd_fields::FieldsError;
use serde_json::{json, Map, Value};

use crate::fields::{DatasetFields, FieldsIoError, ShardRows};
use crate::ExportError;

/// Rows per written batch, at most.
const BATCH_ROWS: usize = 1024;
/// Value bytes per written batch, at most (one larger value makes a batch alone).
const BATCH_BYTES: usize = 64 << 20;
/// Shards whose fields one written batch gathers from, at most: a batch ends
/// early rather than hold the fields of more (records in order read one or two
/// per batch; many small shards, such as nightly appends, read more).
const BATCH_SHARDS: usize = 8;

/// Settings of one Parquet export.
#[derive(Clone, Debug, Default)]
pub struct ParquetExportOptions {
    /// Write the value as a Hugging Face Image-style struct `{bytes, path}`
    /// (default: binary, unless the source's value column was such a struct).
    pub hf_image: bool,
    /// The records to export, in this order (default: all, in order).
    pub records: Option<Vec<u64>>,
    /// Set to stop the export at the next batch: the file is not written.
    pub interrupt: Option<Arc<AtomicBool>>,
}

/// What a Parquet export wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParquetExportSummary {
    /// Rows written.
    pub rows: u64,
    /// Value bytes written.
    pub bytes: u64,
}

fn unsupported(what: String) -> ExportError {
    ExportError::Fields(FieldsError::Unsupported(what).into())
}

/// Writes `dataset` (or `options.records` of it) to the Parquet file `path`,
/// all or nothing.
pub fn export_parquet(
    dataset: &Dataset,
    path: &Path,
    options: &ParquetExportOptions,
) -> Result<ParquetExportSummary, ExportError> {
    let fields = DatasetFields::load(dataset)?;
    let records: Vec<usize> = match &options.records {
        Some(records) => records
            .iter()
            .map(|&r| usize::try_from(r).unwrap_or(usize::MAX))
            .collect(),
        None => (0..dataset.len()).collect(),
    };
    let described = fields.metadata.get("value").and_then(Value::as_object);
    let name_of = |member: &str, default: &str| {
        described
            .and_then(|v| v.get(member))
            .and_then(Value::as_str)
            .unwrap_or(default)
            .to_owned()
    };
    let value_name = name_of("column", "value");
    let key_name = name_of("key_column", "key");
    let hf_image = options.hf_image
        || described
            .and_then(|v| v.get("hf_struct"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
    let path_field = format!("{value_name}.path");

    // The key column's type: text when every key is.
    let keyed = dataset.keyed();
    let mut utf8_keys = true;
    if keyed {
        for &index in &records {
            if std::str::from_utf8(dataset.key_at(index)?).is_err() {
                utf8_keys = false;
                break;
            }
        }
    }

    // The fields exported as columns, by their position in the dataset schema.
    let schema_fields = fields.schema.fields();
    let path_column = hf_image
        .then(|| schema_fields.iter().position(|f| f.name() == &path_field))
        .flatten();
    let mut columns: Vec<usize> = Vec::new();
    for (i, field) in schema_fields.iter().enumerate() {
        if field.name().starts_with("bcd.") || Some(i) == path_column {
            continue;
        }
        if field.name() == &value_name || (keyed && field.name() == &key_name) {
            return Err(unsupported(format!(
                "field {:?} has the name of the {} column; export to tar, or rename it",
                field.name(),
                if field.name() == &value_name {
                    "value"
                } else {
                    "key"
                }
            )));
        }
        columns.push(i);
    }
    let value_type = match hf_image {
        true => DataType::Struct(image_fields()),
        false => DataType::Binary,
    };
    let mut out_fields = Vec::new();
    if keyed {
        let key_type = if utf8_keys {
            DataType::Utf8
        } else {
            DataType::Binary
        };
        out_fields.push(Field::new(&key_name, key_type, true));
    }
    out_fields.push(Field::new(&value_name, value_type, true));
    for &i in &columns {
        let field = &schema_fields[i];
        // An Arrow extension type (arrow.uuid, arrow.json, a tensor's shape) is
        // part of the column's type; the project's own keys stay out.
        let extension: HashMap<String, String> = (field.metadata().iter())
            .filter(|(k, _)| k.starts_with("ARROW:extension:"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        out_fields.push(
            Field::new(field.name(), field.data_type().clone(), true).with_metadata(extension),
        );
    }
    let schema = Arc::new(Schema::new(out_fields));

    let mut metadata = HashMap::new();
    let hf = match fields.metadata.get("huggingface") {
        Some(hf) => Some(hf.clone()),
        None => made_features(
            &schema,
            &fields.metadata,
            hf_image.then_some(&value_name[..]),
        ),
    };
    if let Some(hf) = hf {
        metadata.insert("huggingface".to_owned(), hf.to_string());
    }
    let mut file = ParquetExport::create(path, schema.clone(), metadata)?;

    let mut shards: HashMap<u64, ShardRows> = HashMap::new();
    let mut buffer = Vec::new();
    let mut summary = ParquetExportSummary { rows: 0, bytes: 0 };
    let mut last_shard = None;
    let mut start = 0;
    while start < records.len() {
        if options
            .interrupt
            .as_ref()
            .is_some_and(|flag| flag.load(Ordering::Relaxed))
        {
            return Err(ExportError::Interrupted);
        }
        let mut keys_text = StringBuilder::new();
        let mut keys_bytes = BinaryBuilder::new();
        let mut values = BinaryBuilder::new();
        let mut picks: Vec<(u64, usize)> = Vec::new();
        let mut bytes = 0;
        let mut end = start;
        // The fields of the shards this batch reads; the last one read may go on
        // into this batch.
        shards.retain(|&shard, _| Some(shard) == last_shard);
        while end < records.len()
            && end - start < BATCH_ROWS
            && (end == start || bytes < BATCH_BYTES)
        {
            let index = records[end];
            let shard = dataset.value_location(index)?.shard;
            if !shards.contains_key(&shard) {
                if shards.len() >= BATCH_SHARDS && end > start {
                    break;
                }
                let batches = fields.shard_batches(dataset, shard, None)?;
                shards.insert(shard, ShardRows::new(batches));
            }
            if keyed {
                let key = dataset.key_at(index)?;
                match utf8_keys {
                    true => keys_text.append_value(std::str::from_utf8(key).expect("checked")),
                    false => keys_bytes.append_value(key),
                }
            }
            let value = dataset.at_with_buffer(index, &mut buffer)?;
            values.append_value(value);
            bytes += value.len();
            picks.push((shard, index - dataset.shard_first_record(shard) as usize));
            last_shard = Some(shard);
            end += 1;
        }
        // Gather each field column's rows from the shards' batches.
        let order: Vec<u64> = {
            let mut order: Vec<u64> = picks.iter().map(|(s, _)| *s).collect();
            order.dedup();
            order.sort_unstable();
            order.dedup();
            order
        };
        // Every batch of those shards, in order, and where each shard's start.
        let mut firsts = Vec::with_capacity(order.len());
        let mut sources: Vec<&RecordBatch> = Vec::new();
        for shard in &order {
            firsts.push(sources.len());
            sources.extend(shards[shard].batches());
        }
        let at: Vec<(usize, usize)> = picks
            .iter()
            .map(|(shard, row)| {
                let first = firsts[order.binary_search(shard).expect("listed")];
                let (batch, row) = shards[shard].locate(*row);
                (first + batch, row)
            })
            .collect();
        let gather = |column: usize| -> Result<ArrayRef, ExportError> {
            let arrays: Vec<&dyn Array> = sources
                .iter()
                .map(|batch| batch.column(column).as_ref())
                .collect();
            arrow_select::interleave::interleave(&arrays, &at)
                .map_err(arrow_error("gathering the fields of a batch"))
        };
        let mut arrays: Vec<ArrayRef> = Vec::new();
        if keyed {
            arrays.push(match utf8_keys {
                true => Arc::new(keys_text.finish()),
                false => Arc::new(keys_bytes.finish()),
            });
        }
        let values: ArrayRef = Arc::new(values.finish());
        arrays.push(match hf_image {
            false => values,
            true => {
                let paths: ArrayRef = match path_column {
                    Some(column) => arrow_cast::cast(&gather(column)?, &DataType::Utf8)
                        .map_err(arrow_error("reading the image paths"))?,
                    None => arrow_array::new_null_array(&DataType::Utf8, end - start),
                };
                Arc::new(StructArray::new(image_fields(), vec![values, paths], None))
            }
        });
        for &column in &columns {
            arrays.push(gather(column)?);
        }
        let batch = RecordBatch::try_new(schema.clone(), arrays)
            .map_err(arrow_error("building a batch of rows"))?;
        file.write(&batch)?;
        summary.rows += batch.num_rows() as u64;
        summary.bytes += bytes as u64;
        start = end;
    }
    file.finish()?;
    Ok(summary)
}

fn arrow_error(context: &str) -> impl Fn(arrow_schema::ArrowError) -> ExportError + '_ {
    move |source| {
        ExportError::Fields(FieldsIoError::from(FieldsError::Arrow {
            context: context.to_owned(),
            source,
        }))
    }
}

/// The children of a Hugging Face Image (or Audio) struct.
fn image_fields() -> Fields {
    Fields::from(vec![
        Field::new("bytes", DataType::Binary, true),
        Field::new("path", DataType::Utf8, true),
    ])
}

/// The `huggingface` metadata `datasets` writes, made from the columns, when
/// every one has a feature it knows (else none: `datasets` then infers them).
fn made_features(
    schema: &Schema,
    metadata: &Map<String, Value>,
    image: Option<&str>,
) -> Option<Value> {
    let class_labels = |column: &str| -> Option<Value> {
        if let Some(names) = metadata.get("class_labels").and_then(|c| c.get(column)) {
            return Some(names.clone());
        }
        (column == "label_index")
            .then(|| metadata.get("class_names").cloned())
            .flatten()
    };
    let mut features = Map::new();
    for field in schema.fields() {
        let name = field.name().as_str();
        let feature = if Some(name) == image {
            json!({"_type": "Image"})
        } else if let Some(names) = class_labels(name).filter(|_| field.data_type().is_integer()) {
            json!({"names": names, "_type": "ClassLabel"})
        } else {
            feature_of(field.data_type())?
        };
        features.insert(name.to_owned(), feature);
    }
    Some(json!({"info": {"features": features}}))
}

/// A `datasets` feature for an Arrow type, where there is a plain one.
fn feature_of(data_type: &DataType) -> Option<Value> {
    use DataType::*;
    let dtype = match data_type {
        Boolean => "bool",
        Int8 => "int8",
        Int16 => "int16",
        Int32 => "int32",
        Int64 => "int64",
        UInt8 => "uint8",
        UInt16 => "uint16",
        UInt32 => "uint32",
        UInt64 => "uint64",
        Float32 => "float32",
        Float64 => "float64",
        Utf8 => "string",
        LargeUtf8 => "large_string",
        Binary => "binary",
        LargeBinary => "large_binary",
        List(item) | LargeList(item) => {
            return Some(json!({"feature": feature_of(item.data_type())?, "_type": "List"}))
        }
        Struct(children) => {
            let mut object = serde_json::Map::new();
            for child in children {
                object.insert(child.name().clone(), feature_of(child.data_type())?);
            }
            return Some(Value::Object(object));
        }
        _ => return None,
    };
    Some(json!({"dtype": dtype, "_type": "Value"}))
}
