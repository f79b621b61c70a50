//! One dictionary per column for a shard's batches: the IPC file holds one
//! dictionary per field (FORMAT.md, "Fields"), and batches built apart (from
//! different Parquet row groups, Arrow tables or merges) each have their own.
//! A first pass over the shard's batches gathers the distinct values every
//! batch's keys point to, in order of first use; a second pass points every
//! batch's keys into that one dictionary. What is held is the distinct values,
//! not the shard's rows.

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::{make_array, new_empty_array, Array, ArrayRef, Int64Array, RecordBatch};
use arrow_data::ArrayData;
use arrow_schema::{DataType, Schema};

use crate::error::{FieldsError, Result};

/// The dictionaries of a shard's top-level dictionary columns, joined over its
/// batches: [`SharedDictionaries::add`] each batch, then
/// [`SharedDictionaries::apply`] to each.
pub(crate) struct SharedDictionaries {
    columns: Vec<Union>,
}

/// One column's joined dictionary.
struct Union {
    /// The column's position in the shard's columns.
    column: usize,
    name: String,
    key_type: DataType,
    value_type: DataType,
    /// Each distinct value's identity (see [`identity`]) and its position.
    seen: HashMap<Vec<u8>, u64>,
    /// The distinct values, in order, as gathered (joined by `finish`).
    pieces: Vec<ArrayRef>,
    values: Option<ArrayRef>,
}

impl SharedDictionaries {
    /// The joiner of a shard with columns `schema`, or `None` when some
    /// dictionary cannot be joined a batch at a time: one nested in another
    /// type, or of values [`identity`] does not know (then the shard's batches
    /// are joined into one instead).
    pub(crate) fn for_schema(schema: &Schema) -> Option<SharedDictionaries> {
        let mut columns = Vec::new();
        for (i, field) in schema.fields().iter().enumerate() {
            match field.data_type() {
                DataType::Dictionary(k, v) if identifiable(v) => columns.push(Union {
                    column: i,
                    name: field.name().clone(),
                    key_type: (**k).clone(),
                    value_type: (**v).clone(),
                    seen: HashMap::new(),
                    pieces: Vec::new(),
                    values: None,
                }),
                t if has_dictionary(t) => return None,
                _ => {}
            }
        }
        Some(SharedDictionaries { columns })
    }

    /// Whether there is nothing to join.
    pub(crate) fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// Gathers the values `batch`'s keys point to (the first pass).
    pub(crate) fn add(&mut self, batch: &RecordBatch) -> Result<()> {
        for union in &mut self.columns {
            let column = batch.column(union.column);
            let dictionary = column.as_any_dictionary();
            let values = dictionary.values();
            let data = values.to_data();
            let (_, used) = keys_and_used(column.as_ref(), || union.context())?;
            let mut new = Vec::new();
            let mut key = Vec::new();
            for (i, _) in used.iter().enumerate().filter(|(_, &u)| u) {
                identity(values.as_ref(), &data, i, &mut key);
                if !union.seen.contains_key(&key) {
                    union.seen.insert(key.clone(), union.seen.len() as u64);
                    new.push(i as u64);
                }
            }
            if !new.is_empty() {
                let indices = arrow_array::UInt64Array::from(new);
                let piece = arrow_select::take::take(values.as_ref(), &indices, None)
                    .map_err(|e| FieldsError::arrow(union.context(), e))?;
                union.pieces.push(piece);
            }
        }
        Ok(())
    }

    /// Ends the first pass: every column's dictionary, checked to fit its keys.
    pub(crate) fn finish(&mut self) -> Result<()> {
        for union in &mut self.columns {
            let count = union.seen.len() as u64;
            let fits = match union.key_type {
                DataType::Int8 => i8::MAX as u64,
                DataType::Int16 => i16::MAX as u64,
                DataType::Int32 => i32::MAX as u64,
                DataType::UInt8 => u8::MAX as u64,
                DataType::UInt16 => u16::MAX as u64,
                DataType::UInt32 => u32::MAX as u64,
                _ => i64::MAX as u64,
            };
            if count > fits.saturating_add(1) {
                return Err(FieldsError::Unsupported(format!(
                    "field \"{}\": a shard's records hold {count} distinct values, more than its dictionary's {} keys can number; give the column wider keys",
                    union.name, union.key_type
                )));
            }
            let pieces: Vec<&dyn Array> = union.pieces.iter().map(|p| p.as_ref()).collect();
            let values = match pieces.is_empty() {
                true => new_empty_array(&union.value_type),
                false => arrow_select::concat::concat(&pieces)
                    .map_err(|e| FieldsError::arrow(union.context(), e))?,
            };
            union.pieces.clear();
            union.values = Some(values);
        }
        Ok(())
    }

    /// `batch` with every joined column's keys pointing into its joined
    /// dictionary (the second pass, after [`SharedDictionaries::finish`]).
    pub(crate) fn apply(&self, batch: RecordBatch) -> Result<RecordBatch> {
        if self.columns.is_empty() {
            return Ok(batch);
        }
        let mut columns = batch.columns().to_vec();
        for union in &self.columns {
            let shared = union.values.as_ref().expect("finish is called first");
            let column = &columns[union.column];
            let dictionary = column.as_any_dictionary();
            let values = dictionary.values();
            // Each of the batch's values' position in the joined dictionary.
            let data = values.to_data();
            let (keys, used) = keys_and_used(column.as_ref(), || union.context())?;
            let mut at = vec![0i64; values.len()];
            let mut key = Vec::new();
            for (i, _) in used.iter().enumerate().filter(|(_, &u)| u) {
                identity(values.as_ref(), &data, i, &mut key);
                at[i] = *union.seen.get(&key).ok_or_else(|| {
                    FieldsError::Unsupported(format!(
                        "internal error: field \"{}\": a value missing from the shard's dictionary",
                        union.name
                    ))
                })? as i64;
            }
            // A null key's slot may hold anything: it is left pointing at 0.
            let nulls = keys.nulls().cloned();
            let keys = keys.values().iter().enumerate().map(|(row, &k)| {
                match nulls.as_ref().is_none_or(|n| n.is_valid(row)) {
                    true => at[k as usize],
                    false => 0,
                }
            });
            let keys = Int64Array::new(keys.collect(), nulls);
            let keys = arrow_cast::cast(&keys, &union.key_type)
                .map_err(|e| FieldsError::arrow(union.context(), e))?;
            let dictionary_type = DataType::Dictionary(
                Box::new(union.key_type.clone()),
                Box::new(union.value_type.clone()),
            );
            let data = keys
                .to_data()
                .into_builder()
                .data_type(dictionary_type)
                .child_data(vec![shared.to_data()])
                .build()
                .map_err(|e| FieldsError::arrow(union.context(), e))?;
            columns[union.column] = make_array(data);
        }
        RecordBatch::try_new(batch.schema(), columns).map_err(|e| {
            FieldsError::arrow("pointing a batch's keys into its shard's dictionary", e)
        })
    }
}

impl Union {
    fn context(&self) -> String {
        format!(
            "joining the dictionaries of field \"{}\" over a shard's batches",
            self.name
        )
    }
}

/// A dictionary column's keys as `Int64`, and which of its values its
/// (non-null) keys point to.
fn keys_and_used(
    column: &dyn Array,
    context: impl Fn() -> String,
) -> Result<(Int64Array, Vec<bool>)> {
    let dictionary = column.as_any_dictionary();
    let values = dictionary.values().len();
    let keys = arrow_cast::cast(dictionary.keys(), &DataType::Int64)
        .map_err(|e| FieldsError::arrow(context(), e))?;
    let keys = keys.as_primitive::<arrow_array::types::Int64Type>().clone();
    let mut used = vec![false; values];
    for k in keys.iter().flatten() {
        match usize::try_from(k).ok().filter(|&k| k < values) {
            Some(k) => used[k] = true,
            None => {
                return Err(FieldsError::Unsupported(format!(
                    "{}: key {k} is past the dictionary's {values} values",
                    context()
                )))
            }
        }
    }
    Ok((keys, used))
}

/// Whether [`identity`] knows values of type `t`.
fn identifiable(t: &DataType) -> bool {
    use DataType::*;
    t.primitive_width().is_some()
        || matches!(
            t,
            Boolean
                | Utf8
                | LargeUtf8
                | Utf8View
                | Binary
                | LargeBinary
                | BinaryView
                | FixedSizeBinary(_)
        )
}

/// Value `i` of `values` (whose data is `data`) as bytes that are equal
/// exactly when the values are the same (same bits, same bytes; null apart),
/// written into `out`.
fn identity(values: &dyn Array, data: &ArrayData, i: usize, out: &mut Vec<u8>) {
    out.clear();
    if values.is_null(i) {
        out.push(0);
        return;
    }
    out.push(1);
    let t = values.data_type();
    match t {
        DataType::Boolean => out.push(values.as_boolean().value(i) as u8),
        DataType::Utf8 => out.extend_from_slice(values.as_string::<i32>().value(i).as_bytes()),
        DataType::LargeUtf8 => out.extend_from_slice(values.as_string::<i64>().value(i).as_bytes()),
        DataType::Utf8View => out.extend_from_slice(values.as_string_view().value(i).as_bytes()),
        DataType::Binary => out.extend_from_slice(values.as_binary::<i32>().value(i)),
        DataType::LargeBinary => out.extend_from_slice(values.as_binary::<i64>().value(i)),
        DataType::BinaryView => out.extend_from_slice(values.as_binary_view().value(i)),
        DataType::FixedSizeBinary(_) => {
            out.extend_from_slice(values.as_fixed_size_binary().value(i))
        }
        _ => {
            // A primitive: its bytes in the values buffer.
            let width = t.primitive_width().expect("identifiable");
            let start = (data.offset() + i) * width;
            out.extend_from_slice(&data.buffers()[0].as_slice()[start..start + width]);
        }
    }
}

/// Whether `t` is or holds a dictionary (at any depth): its batches must share
/// one dictionary in a shard's file ([`ShardBatches`](crate::ShardBatches) joins them).
pub fn has_dictionary(t: &DataType) -> bool {
    match t {
        DataType::Dictionary(..) => true,
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::FixedSizeList(f, _)
        | DataType::Map(f, _) => has_dictionary(f.data_type()),
        DataType::Struct(fields) => fields.iter().any(|f| has_dictionary(f.data_type())),
        DataType::RunEndEncoded(_, v) => has_dictionary(v.data_type()),
        _ => false,
    }
}
