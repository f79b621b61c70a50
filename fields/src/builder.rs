//! Building a shard's columns from the records' fields.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Float32Builder, Float64Builder, Int64Builder, StringBuilder,
};
use arrow_array::{
    new_null_array, Array, ArrayRef, ListArray, NullArray, RecordBatch, RecordBatchOptions,
    StructArray,
};
use arrow_buffer::{NullBuffer, OffsetBuffer};
use arrow_schema::{DataType, Field, Schema};

use crate::conform::conform;
use crate::error::{FieldsError, Result};
use crate::types::value_type;
use crate::unify::unify_types;
use crate::value::{FieldValue, Fields, SourceColumns};

mod column;
use column::Column;

static NULL: FieldValue = FieldValue::Null;

/// Collects records' [`Fields`] and builds them into one [`RecordBatch`]: the
/// union of the records' fields as columns in order of first appearance, null
/// where a record lacks a field (FORMAT.md, "Fields").
///
/// Typed values take the types of FORMAT.md's table; rows of Arrow arrays
/// ([`FieldValue::Arrow`], from Parquet or JSON Lines) keep their arrays' types
/// and are copied once per column, with `arrow_select::interleave`. A value
/// whose type does not unify with the column's earlier values is refused with
/// an error naming the field, both types and the record, and leaves the
/// builder as it was.
///
/// ```
/// use bcd_fields::{BatchBuilder, FieldValue, Fields};
/// use arrow_schema::DataType;
///
/// let mut builder = BatchBuilder::new();
/// let mut a = Fields::new();
/// a.push("label", FieldValue::Int64(3));
/// builder.push(&a, "cat/1.jpg").unwrap();
/// let mut b = Fields::new();
/// b.push("caption", FieldValue::String("a dog".into()));
/// builder.push(&b, "dog/2.jpg").unwrap();
///
/// let mut c = Fields::new();
/// c.push("label", FieldValue::String("three".into()));
/// let err = builder.push(&c, "cat/3.jpg").unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "field \"label\" of cat/3.jpg: type Utf8 conflicts with Int64 of earlier records"
/// );
///
/// let batch = builder.finish().unwrap();
/// assert_eq!(batch.num_rows(), 2);
/// assert_eq!(batch.schema().field(0).data_type(), &DataType::Int64);
/// assert_eq!(batch.schema().field(1).name(), "caption");
/// assert_eq!(batch.column(0).null_count(), 1);
/// ```
#[derive(Debug, Default)]
pub struct BatchBuilder {
    columns: Vec<Column>,
    by_name: HashMap<Arc<str>, usize>,
    rows: usize,
    /// Calls of `push`, to stamp the columns a record gives.
    pushes: u64,
    /// About how many bytes the pending records' values take as Arrow data.
    bytes: usize,
}

impl BatchBuilder {
    /// No records yet.
    pub fn new() -> BatchBuilder {
        BatchBuilder::default()
    }

    /// The records pushed and not yet built.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether no records are pending.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// About how many bytes the pending records' fields will take as Arrow
    /// columns (a row of an Arrow array counts the average row of its array):
    /// what a writer bounds, with [`BatchBuilder::len`], to build batches of a
    /// bounded size.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The columns of a shard whose batches (built by [`BatchBuilder::take`])
    /// have the columns `present` accepts: in the builder's order (of first
    /// appearance), each with its type as of now (unified over every record
    /// pushed so far, so every earlier batch's column converts to it) and its
    /// metadata. What one batch of all the shard's records would have had.
    pub fn shard_fields(&self, present: impl Fn(&str) -> bool) -> arrow_schema::Fields {
        self.columns
            .iter()
            .filter(|c| present(&c.name))
            .map(|c| {
                Field::new(c.name.as_ref(), c.data_type.clone(), true)
                    .with_metadata(c.metadata.clone())
            })
            .collect()
    }

    /// Sets metadata on a column's field (e.g. `bcd.member_ext`), creating the
    /// column (with no values so far) if it does not exist; kept across
    /// [`BatchBuilder::take`].
    pub fn set_metadata(&mut self, column: &str, key: impl Into<String>, value: impl Into<String>) {
        let i = match self.by_name.get(column) {
            Some(&i) => i,
            None => self.add_column(Arc::from(column)),
        };
        self.columns[i].metadata.insert(key.into(), value.into());
    }

    fn add_column(&mut self, name: Arc<str>) -> usize {
        let i = self.columns.len();
        self.columns.push(Column::new(name.clone()));
        self.by_name.insert(name, i);
        i
    }

    /// The column named `name`, which is often the `k`th (records of one
    /// source give their fields in the same order).
    fn find(&self, name: &Arc<str>, k: usize) -> Option<usize> {
        match self.columns.get(k) {
            Some(c) if Arc::ptr_eq(&c.name, name) || c.name == *name => Some(k),
            _ => self.by_name.get(name).copied(),
        }
    }

    /// Adds one record's fields. `origin` names the record in errors (its
    /// file, line, member; formatted only for an error). On an error nothing
    /// of the record is added.
    pub fn push<O: std::fmt::Display + ?Sized>(
        &mut self,
        fields: &Fields,
        origin: &O,
    ) -> Result<()> {
        if self.push_runs(fields) {
            return Ok(());
        }
        // Check everything first, so a refused record changes nothing.
        self.pushes += 1;
        let mut new_types: Vec<(usize, DataType)> = Vec::new();
        let mut new_names: Vec<&str> = Vec::new();
        let mut columns: Vec<Option<usize>> = Vec::with_capacity(fields.len());
        for (k, (name, value)) in fields.iter().enumerate() {
            let column = self.find(name, k);
            let twice = match column {
                Some(i) => {
                    std::mem::replace(&mut self.columns[i].stamp, self.pushes) == self.pushes
                }
                None => {
                    new_names.contains(&&**name) || {
                        new_names.push(name);
                        false
                    }
                }
            };
            if twice {
                return Err(FieldsError::DuplicateField {
                    field: name.to_string(),
                    origin: origin.to_string(),
                });
            }
            if let FieldValue::Arrow(array, row) = value {
                if *row >= array.len() {
                    return Err(FieldsError::Unsupported(format!(
                        "field \"{name}\" of {origin}: row {row} of an array of {} rows",
                        array.len()
                    )));
                }
            }
            let existing = match column {
                Some(i) => &self.columns[i].data_type,
                None => &DataType::Null,
            };
            if let Some(t) =
                widened(existing, value, name).map_err(|c| c.in_record(&origin.to_string()))?
            {
                new_types.push((k, t));
            }
            columns.push(column);
        }
        let row = self.rows;
        let mut new_types = new_types.into_iter().peekable();
        for (k, ((name, value), column)) in fields.iter().zip(columns).enumerate() {
            let i = match column {
                Some(i) => i,
                None => self.add_column(name.clone()),
            };
            let column = &mut self.columns[i];
            if new_types.peek().is_some_and(|(j, _)| *j == k) {
                column.data_type = new_types.next().map(|(_, t)| t).unwrap_or(DataType::Null);
            }
            column.append(row, value);
            self.bytes += value_bytes(value, &mut column.estimate);
        }
        self.rows += 1;
        Ok(())
    }

    /// Adds the records that are rows `rows` of `source` (a source's batch
    /// read in order), one record a row: what as many [`BatchBuilder::push`]es
    /// of [`Fields::row`] would add, the same columns built. Once a row
    /// continues every column's current run of `source`'s arrays (after the
    /// first row of a batch, usually), the rest of the rows are added at once,
    /// a few compares per column; until then they are pushed one by one.
    /// `origin` names the record of a row in errors (formatted only for an
    /// error). On an error the rows before the refused one stay added.
    pub fn push_rows<O: std::fmt::Display>(
        &mut self,
        source: &Arc<SourceColumns>,
        rows: std::ops::Range<usize>,
        origin: impl Fn(usize) -> O,
    ) -> Result<()> {
        for at in rows.clone() {
            if rows.end <= source.rows() && self.source_continues(source, at) {
                self.extend_runs(source.names().len(), rows.end - at);
                return Ok(());
            }
            let fields = Fields::row(Arc::clone(source), at).ok_or_else(|| {
                FieldsError::Unsupported(format!(
                    "{}: row {at} of a batch of {} rows",
                    origin(at),
                    source.rows()
                ))
            })?;
            self.push(&fields, &origin(at))?;
        }
        Ok(())
    }

    /// Whether row `at` of `source` is the row after the last of its column's
    /// current Arrow run for each of `source`'s columns, in the columns' order
    /// (then it, and the rows after it in `source`, need no check).
    fn source_continues(&self, source: &SourceColumns, at: usize) -> bool {
        let row = self.rows;
        source.names().len() <= self.columns.len()
            && source
                .names()
                .iter()
                .zip(source.arrays())
                .zip(&self.columns)
                .all(|((name, array), c)| Arc::ptr_eq(&c.name, name) && c.continues(row, array, at))
    }

    /// Adds `n` rows to the current runs of the first `columns` columns (which
    /// [`Column::continues`] accepted, and whose arrays hold `n` more rows).
    fn extend_runs(&mut self, columns: usize, n: usize) {
        for column in &mut self.columns[..columns] {
            column.extend_run(n);
            // The run's array is the one its estimate is of.
            self.bytes += column.estimate.1 * n;
        }
        self.rows += n;
    }

    /// Adds a record whose every field is the row after the last of its
    /// column's current Arrow run, in the columns' order (the rows of a
    /// Parquet or JSON Lines batch read in order): a few compares per field,
    /// nothing to check (the names are distinct columns, the types those of
    /// the runs' arrays). Returns false, adding nothing, for any other record.
    fn push_runs(&mut self, fields: &Fields) -> bool {
        let row = self.rows;
        let fits = fields.len() <= self.columns.len()
            && match fields.source_row() {
                // A row of a source's batch: nothing to make.
                Some((source, at)) => self.source_continues(source, at),
                None => fields.iter().zip(&self.columns).all(|((name, value), c)| {
                    matches!(value, FieldValue::Arrow(array, at)
                        if Arc::ptr_eq(&c.name, name) && c.continues(row, array, *at))
                }),
            };
        if !fits {
            return false;
        }
        self.extend_runs(fields.len(), 1);
        true
    }

    /// Builds all pending records into one batch and empties the builder.
    pub fn finish(mut self) -> Result<RecordBatch> {
        self.take(self.rows)
    }

    /// Builds the first `rows` pending records (all if fewer are pending) into
    /// a batch and keeps the rest: what a writer does at a shard's end. The
    /// batch's columns are those that appear in its records. On an error the
    /// builder is unchanged.
    pub fn take(&mut self, rows: usize) -> Result<RecordBatch> {
        let rows = rows.min(self.rows);
        let mut fields = Vec::new();
        let mut arrays = Vec::new();
        for column in &self.columns {
            if column.first_row.is_none_or(|first| first >= rows) {
                continue;
            }
            // What the readers refuse is never written (a union would commit and
            // then make every read of the dataset fail).
            crate::types::check_supported(&column.data_type).map_err(|what| {
                FieldsError::Unsupported(format!(
                    "field \"{}\": {what}; store it as another type",
                    column.name
                ))
            })?;
            let array = column.build(rows)?;
            fields.push(
                Field::new(column.name.as_ref(), column.data_type.clone(), true)
                    .with_metadata(column.metadata.clone()),
            );
            arrays.push(array);
        }
        let batch = RecordBatch::try_new_with_options(
            Arc::new(Schema::new(fields)),
            arrays,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )
        .map_err(|e| FieldsError::arrow("assembling a shard's fields", e))?;
        // Drop the built rows.
        for column in &mut self.columns {
            column.drop_front(rows);
        }
        self.rows -= rows;
        self.bytes = match self.rows {
            0 => 0,
            // The rows kept hold about their share.
            n => (self.bytes as u128 * n as u128 / (n + rows) as u128) as usize,
        };
        Ok(batch)
    }
}

/// About how many bytes `value` takes in an Arrow column; `estimate` caches
/// the average row of the last Arrow array seen.
fn value_bytes(value: &FieldValue, estimate: &mut (usize, usize)) -> usize {
    match value {
        FieldValue::Null => 1,
        FieldValue::Bool(_) => 1,
        FieldValue::Int64(_) | FieldValue::Float64(_) => 8,
        FieldValue::Float32(_) => 4,
        FieldValue::String(s) => s.len() + 4,
        FieldValue::Binary(b) => b.len() + 4,
        FieldValue::List(items) => {
            4 + items
                .iter()
                .map(|v| value_bytes(v, &mut (0, 0)))
                .sum::<usize>()
        }
        FieldValue::Struct(children) => {
            1 + children
                .iter()
                .map(|(_, v)| value_bytes(v, &mut (0, 0)))
                .sum::<usize>()
        }
        FieldValue::Arrow(array, _) => {
            let key = Arc::as_ptr(array) as *const () as usize;
            if estimate.0 != key {
                // The bytes of the array's own rows (a slice counts its part).
                let bytes = array.to_data().get_slice_memory_size().unwrap_or(0);
                *estimate = (key, bytes / array.len().max(1) + 1);
            }
            estimate.1
        }
    }
}

/// The column's type after `value`, if it changes.
fn widened(
    existing: &DataType,
    value: &FieldValue,
    name: &str,
) -> std::result::Result<Option<DataType>, crate::unify::TypeConflict> {
    // The common cases decide without building the value's type.
    let same = match (value, existing) {
        (FieldValue::Null, _) => true,
        (FieldValue::Bool(_), DataType::Boolean)
        | (FieldValue::Int64(_), DataType::Int64)
        | (FieldValue::Float32(_), DataType::Float32)
        | (FieldValue::Float64(_), DataType::Float64)
        | (FieldValue::String(_), DataType::Utf8)
        | (FieldValue::Binary(_), DataType::Binary) => true,
        (FieldValue::Arrow(array, _), t) => array.data_type() == t,
        _ => false,
    };
    if same {
        return Ok(None);
    }
    let t = value_type(value, name)?;
    let unified = unify_types(existing, &t, name)?;
    Ok((&unified != existing).then_some(unified))
}

/// An array of type `target` holding `values` (which the schema rules typed
/// as `target`): rows of Arrow arrays copied with `interleave`, the others
/// built with Arrow's builders.
pub(super) fn build(values: &[&FieldValue], target: &DataType, path: &str) -> Result<ArrayRef> {
    let mut sources: Vec<ArrayRef> = Vec::new();
    let mut by_array: HashMap<*const (), usize> = HashMap::new();
    let mut last: Option<(*const (), usize)> = None;
    let mut dynamic: Vec<&FieldValue> = Vec::new();
    let mut indices: Vec<(usize, usize)> = Vec::with_capacity(values.len());
    for value in values {
        match value {
            FieldValue::Arrow(array, row) => {
                let key = Arc::as_ptr(array) as *const ();
                let source = match last {
                    Some((k, s)) if k == key => s,
                    _ => {
                        let s = *by_array.entry(key).or_insert_with(|| {
                            sources.push(array.clone());
                            sources.len()
                        });
                        last = Some((key, s));
                        s
                    }
                };
                indices.push((source, *row));
            }
            other => {
                indices.push((0, dynamic.len()));
                dynamic.push(other);
            }
        }
    }
    let dynamic_array = build_dynamic(&dynamic, target, path)?;
    if sources.is_empty() {
        return Ok(dynamic_array);
    }
    let mut arrays = Vec::with_capacity(sources.len() + 1);
    arrays.push(dynamic_array);
    for source in &sources {
        arrays.push(conform(source, target, path)?);
    }
    // One source read in order from its start: a slice, no copy.
    if sources.len() == 1
        && dynamic.is_empty()
        && indices.iter().enumerate().all(|(k, &(_, r))| r == k)
    {
        return Ok(arrays[1].slice(0, indices.len()));
    }
    let refs: Vec<&dyn Array> = arrays.iter().map(|a| a.as_ref()).collect();
    arrow_select::interleave::interleave(&refs, &indices)
        .map_err(|e| FieldsError::arrow(format!("field \"{path}\": copying its Arrow values"), e))
}

fn mismatch(path: &str, value: &FieldValue, target: &DataType) -> FieldsError {
    FieldsError::Unsupported(format!(
        "field \"{path}\": a value {value:?} in a column of type {target}"
    ))
}

/// Builds the values that are not rows of Arrow arrays (their nested values
/// may be).
fn build_dynamic(values: &[&FieldValue], target: &DataType, path: &str) -> Result<ArrayRef> {
    macro_rules! primitive {
        ($builder:ty, $variant:ident, $conv:expr) => {{
            let mut b = <$builder>::with_capacity(values.len());
            for v in values {
                match v {
                    FieldValue::$variant(x) => b.append_value($conv(x)),
                    FieldValue::Null => b.append_null(),
                    other => return Err(mismatch(path, other, target)),
                }
            }
            Ok(Arc::new(b.finish()) as ArrayRef)
        }};
    }
    match target {
        DataType::Null => {
            if let Some(other) = values.iter().find(|v| !matches!(v, FieldValue::Null)) {
                return Err(mismatch(path, other, target));
            }
            Ok(Arc::new(NullArray::new(values.len())))
        }
        DataType::Boolean => primitive!(BooleanBuilder, Bool, |x: &bool| *x),
        DataType::Int64 => primitive!(Int64Builder, Int64, |x: &i64| *x),
        DataType::Float32 => primitive!(Float32Builder, Float32, |x: &f32| *x),
        DataType::Float64 => primitive!(Float64Builder, Float64, |x: &f64| *x),
        DataType::Utf8 => {
            let bytes = values
                .iter()
                .map(|v| {
                    if let FieldValue::String(s) = v {
                        s.len()
                    } else {
                        0
                    }
                })
                .sum();
            let mut b = StringBuilder::with_capacity(values.len(), bytes);
            for v in values {
                match v {
                    FieldValue::String(s) => b.append_value(s),
                    FieldValue::Null => b.append_null(),
                    other => return Err(mismatch(path, other, target)),
                }
            }
            Ok(Arc::new(b.finish()))
        }
        DataType::Binary => {
            let bytes = values
                .iter()
                .map(|v| {
                    if let FieldValue::Binary(s) = v {
                        s.len()
                    } else {
                        0
                    }
                })
                .sum();
            let mut b = BinaryBuilder::with_capacity(values.len(), bytes);
            for v in values {
                match v {
                    FieldValue::Binary(s) => b.append_value(s),
                    FieldValue::Null => b.append_null(),
                    other => return Err(mismatch(path, other, target)),
                }
            }
            Ok(Arc::new(b.finish()))
        }
        DataType::List(item) => {
            let mut lengths = Vec::with_capacity(values.len());
            let mut valid = Vec::with_capacity(values.len());
            let mut items: Vec<&FieldValue> = Vec::new();
            for v in values {
                match v {
                    FieldValue::List(xs) => {
                        lengths.push(xs.len());
                        valid.push(true);
                        items.extend(xs.iter());
                    }
                    FieldValue::Null => {
                        lengths.push(0);
                        valid.push(false);
                    }
                    other => return Err(mismatch(path, other, target)),
                }
            }
            let child = build(&items, item.data_type(), &format!("{path}[]"))?;
            let nulls = NullBuffer::from(valid);
            let nulls = (nulls.null_count() > 0).then_some(nulls);
            let list = ListArray::try_new(
                item.clone(),
                OffsetBuffer::from_lengths(lengths),
                child,
                nulls,
            )
            .map_err(|e| FieldsError::arrow(format!("field \"{path}\": building a list"), e))?;
            Ok(Arc::new(list))
        }
        DataType::Struct(children) => {
            let mut valid = Vec::with_capacity(values.len());
            for v in values {
                match v {
                    FieldValue::Struct(_) => valid.push(true),
                    FieldValue::Null => valid.push(false),
                    other => return Err(mismatch(path, other, target)),
                }
            }
            let mut columns = Vec::with_capacity(children.len());
            for child in children.iter() {
                let child_values: Vec<&FieldValue> = values
                    .iter()
                    .map(|v| match v {
                        FieldValue::Struct(xs) => xs
                            .iter()
                            .find(|(n, _)| n.as_ref() == child.name())
                            .map_or(&NULL, |(_, x)| x),
                        _ => &NULL,
                    })
                    .collect();
                columns.push(build(
                    &child_values,
                    child.data_type(),
                    &format!("{path}.{}", child.name()),
                )?);
            }
            let nulls = NullBuffer::from(valid);
            let nulls = (nulls.null_count() > 0).then_some(nulls);
            let array =
                StructArray::try_new_with_length(children.clone(), columns, nulls, values.len())
                    .map_err(|e| {
                        FieldsError::arrow(format!("field \"{path}\": building a struct"), e)
                    })?;
            Ok(Arc::new(array))
        }
        _ => {
            // Only nulls can be typed otherwise (the type came from Arrow values).
            if let Some(other) = values.iter().find(|v| !matches!(v, FieldValue::Null)) {
                return Err(mismatch(path, other, target));
            }
            Ok(new_null_array(target, values.len()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int32Type, Int64Type};
    use arrow_array::{Int32Array, Int64Array, StringArray};

    fn fields(items: Vec<(&str, FieldValue)>) -> Fields {
        let mut f = Fields::new();
        for (n, v) in items {
            f.push(n, v);
        }
        f
    }

    #[test]
    fn no_records_make_an_empty_batch() {
        let batch = BatchBuilder::new().finish().unwrap();
        assert_eq!((batch.num_rows(), batch.num_columns()), (0, 0));
        let mut b = BatchBuilder::new();
        b.push(&Fields::new(), "r0").unwrap();
        b.push(&Fields::new(), "r1").unwrap();
        let batch = b.finish().unwrap();
        assert_eq!((batch.num_rows(), batch.num_columns()), (2, 0));
    }

    #[test]
    fn all_null_columns_have_the_null_type() {
        let mut b = BatchBuilder::new();
        b.push(&fields(vec![("x", FieldValue::Null)]), "r0")
            .unwrap();
        b.push(&Fields::new(), "r1").unwrap();
        let batch = b.finish().unwrap();
        assert_eq!(batch.schema().field(0).data_type(), &DataType::Null);
        assert_eq!(batch.column(0).len(), 2);
    }

    #[test]
    fn columns_are_in_first_appearance_order_with_nulls_where_missing() {
        let mut b = BatchBuilder::new();
        b.push(&fields(vec![("b", FieldValue::Int64(1))]), "r0")
            .unwrap();
        b.push(
            &fields(vec![
                ("a", FieldValue::String("x".into())),
                ("b", FieldValue::Null),
            ]),
            "r1",
        )
        .unwrap();
        b.push(&Fields::new(), "r2").unwrap();
        b.push(&fields(vec![("b", FieldValue::Int64(4))]), "r3")
            .unwrap();
        let batch = b.finish().unwrap();
        assert_eq!(batch.schema().field(0).name(), "b");
        assert_eq!(
            batch.column(0).as_primitive::<Int64Type>(),
            &Int64Array::from(vec![Some(1), None, None, Some(4)])
        );
        assert_eq!(
            batch.column(1).as_string::<i32>(),
            &StringArray::from(vec![None, Some("x"), None, None])
        );
    }

    #[test]
    fn nested_dynamic_values_build_lists_and_structs() {
        use FieldValue::*;
        let mut b = BatchBuilder::new();
        b.push(
            &fields(vec![("l", List(vec![Int64(1), Null, Int64(3)]))]),
            "r0",
        )
        .unwrap();
        b.push(&fields(vec![("l", Null)]), "r1").unwrap();
        b.push(&fields(vec![("l", List(vec![]))]), "r2").unwrap();
        b.push(
            &fields(vec![("s", Struct(vec![("a".into(), Bool(true))]))]),
            "r3",
        )
        .unwrap();
        b.push(
            &fields(vec![(
                "s",
                Struct(vec![("b".into(), Float64(0.5)), ("a".into(), Null)]),
            )]),
            "r4",
        )
        .unwrap();
        let batch = b.finish().unwrap();
        let l = batch.column(0).as_list::<i32>();
        assert_eq!(l.len(), 5);
        assert_eq!(
            (0..5).map(|i| l.value_length(i)).collect::<Vec<_>>(),
            [3, 0, 0, 0, 0]
        );
        assert_eq!((l.null_count(), l.is_valid(2)), (3, true));
        assert_eq!(
            l.values().as_primitive::<Int64Type>(),
            &Int64Array::from(vec![Some(1), None, Some(3)])
        );
        let s = batch.column(1).as_struct();
        assert_eq!(s.column_names(), ["a", "b"]);
        assert_eq!(s.null_count(), 3);
        assert!(s.column(0).as_boolean().value(3));
        assert!(s.column(0).is_null(4));
        assert_eq!(
            s.column(1)
                .as_primitive::<arrow_array::types::Float64Type>()
                .value(4),
            0.5
        );
    }

    #[test]
    fn arrow_rows_are_copied_from_their_arrays_and_widened() {
        let a: ArrayRef = Arc::new(Int32Array::from(vec![10, 11, 12]));
        let c: ArrayRef = Arc::new(Int64Array::from(vec![20, 21]));
        let mut b = BatchBuilder::new();
        for (array, row) in [(&a, 2), (&c, 0), (&a, 0)] {
            b.push(
                &fields(vec![("n", FieldValue::Arrow(array.clone(), row))]),
                "r",
            )
            .unwrap();
        }
        b.push(&fields(vec![("n", FieldValue::Int64(-1))]), "r")
            .unwrap();
        b.push(&Fields::new(), "r").unwrap();
        let batch = b.finish().unwrap();
        assert_eq!(
            batch.column(0).as_primitive::<Int64Type>(),
            &Int64Array::from(vec![Some(12), Some(20), Some(10), Some(-1), None])
        );
    }

    #[test]
    fn one_array_read_in_order_is_sliced_not_copied() {
        let a: ArrayRef = Arc::new(Int32Array::from((0..100).collect::<Vec<i32>>()));
        let mut b = BatchBuilder::new();
        for row in 0..10 {
            b.push(&fields(vec![("n", FieldValue::Arrow(a.clone(), row))]), "r")
                .unwrap();
        }
        let batch = b.finish().unwrap();
        let n = batch.column(0).as_primitive::<Int32Type>();
        assert_eq!(
            n.values().as_ptr(),
            a.as_primitive::<Int32Type>().values().as_ptr()
        );
        assert_eq!(n.len(), 10);
    }

    #[test]
    fn a_conflict_names_field_types_and_record_and_changes_nothing() {
        let mut b = BatchBuilder::new();
        b.push(&fields(vec![("x", FieldValue::Int64(1))]), "a.csv line 2")
            .unwrap();
        let bad = fields(vec![
            ("y", FieldValue::Bool(true)),
            ("x", FieldValue::Float64(1.5)),
        ]);
        let err = b.push(&bad, "a.csv line 3").unwrap_err().to_string();
        assert_eq!(
            err,
            "field \"x\" of a.csv line 3: type Float64 conflicts with Int64 of earlier records"
        );
        let dup = fields(vec![
            ("y", FieldValue::Bool(true)),
            ("y", FieldValue::Bool(false)),
        ]);
        assert_eq!(
            b.push(&dup, "r").unwrap_err().to_string(),
            "field \"y\" of r is given twice"
        );
        let batch = b.finish().unwrap();
        assert_eq!((batch.num_rows(), batch.num_columns()), (1, 1));
    }

    #[test]
    fn bytes_estimate_the_pending_rows_arrow_size() {
        let mut b = BatchBuilder::new();
        assert_eq!(b.bytes(), 0);
        for i in 0..10 {
            b.push(
                &fields(vec![
                    ("n", FieldValue::Int64(i)),
                    ("s", FieldValue::String("x".repeat(96))),
                ]),
                "r",
            )
            .unwrap();
        }
        assert_eq!(b.bytes(), 10 * (8 + 100));
        b.take(5).unwrap();
        assert_eq!(b.bytes(), 5 * (8 + 100));
        b.take(5).unwrap();
        assert_eq!(b.bytes(), 0);
        // A row of an Arrow array counts its slice's average row, not the
        // buffers the slice shares with the rest of the array.
        let big: ArrayRef = Arc::new(Int64Array::from((0..1_000_000).collect::<Vec<i64>>()));
        let slice = big.slice(10, 100);
        for row in 0..100 {
            b.push(
                &fields(vec![("n", FieldValue::Arrow(slice.clone(), row))]),
                "r",
            )
            .unwrap();
        }
        assert!((800..=1000).contains(&b.bytes()), "{}", b.bytes());
    }

    #[test]
    fn shard_fields_are_the_present_columns_typed_as_of_now() {
        let a: ArrayRef = Arc::new(Int32Array::from(vec![1]));
        let mut b = BatchBuilder::new();
        b.push(&fields(vec![("a", FieldValue::Arrow(a, 0))]), "r0")
            .unwrap();
        b.push(&fields(vec![("b", FieldValue::Bool(true))]), "r1")
            .unwrap();
        b.set_metadata("a", "bcd.member_ext", "cls");
        let first = b.take(1).unwrap();
        assert_eq!(first.schema().field(0).data_type(), &DataType::Int32);
        b.push(&fields(vec![("a", FieldValue::Int64(1 << 40))]), "r2")
            .unwrap();
        let present = |n: &str| n == "a";
        let columns = b.shard_fields(present);
        assert_eq!(columns.len(), 1);
        assert_eq!(columns[0].data_type(), &DataType::Int64);
        assert_eq!(columns[0].metadata()["bcd.member_ext"], "cls");
        let all = b.shard_fields(|_| true);
        let names: Vec<&str> = all.iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["a", "b"]);
    }

    /// Rows `rows` of a source batch of `n` rows: `id` strings, `n` int64
    /// with a null every third row, `x` float64.
    fn source_batch(n: usize) -> Arc<crate::SourceColumns> {
        let ids: ArrayRef = Arc::new(StringArray::from_iter_values(
            (0..n).map(|i| format!("id{i}")),
        ));
        let ns: ArrayRef = Arc::new(Int64Array::from_iter(
            (0..n as i64).map(|i| (i % 3 != 1).then_some(i * 7)),
        ));
        let xs: ArrayRef = Arc::new(arrow_array::Float64Array::from_iter_values(
            (0..n).map(|i| i as f64 / 2.0),
        ));
        let names = vec![Arc::from("id"), Arc::from("n"), Arc::from("x")];
        Arc::new(crate::SourceColumns::new(names, vec![ids, ns, xs], n).unwrap())
    }

    fn expected_id(i: usize) -> Option<String> {
        Some(format!("id{i}"))
    }

    #[test]
    fn rows_of_source_batches_split_and_skipped_build_the_rows_pushed() {
        let batches = [source_batch(10), source_batch(6)];
        // Rows 3 and 7 of the first batch are left out (duplicates), the
        // second batch follows, a record without fields comes between.
        let pushed: Vec<(usize, usize)> = [0, 1, 2, 4, 5, 6, 8, 9]
            .into_iter()
            .map(|r| (0, r))
            .chain((0..6).map(|r| (1, r)))
            .collect();
        let mut b = BatchBuilder::new();
        for (k, &(batch, row)) in pushed.iter().enumerate() {
            let fields = Fields::row(batches[batch].clone(), row).unwrap();
            b.push(&fields, "r").unwrap();
            if k == 9 {
                b.push(&Fields::new(), "no fields").unwrap();
            }
        }
        assert_eq!(b.len(), 15);
        // Taken in two batches, the first ending inside a run.
        let first = b.take(5).unwrap();
        let second = b.take(100).unwrap();
        assert!(b.is_empty());
        let mut rows: Vec<Option<(usize, usize)>> = pushed.iter().copied().map(Some).collect();
        rows.insert(10, None);
        let ids: Vec<Option<String>> = rows
            .iter()
            .map(|r| r.and_then(|(_, i)| expected_id(i)))
            .collect();
        let ns: Vec<Option<i64>> = rows
            .iter()
            .map(|r| r.and_then(|(_, i)| (i % 3 != 1).then_some(i as i64 * 7)))
            .collect();
        let xs: Vec<Option<f64>> = rows
            .iter()
            .map(|r| r.map(|(_, i)| i as f64 / 2.0))
            .collect();
        for (batch, range) in [(&first, 0..5), (&second, 5..15)] {
            let schema = batch.schema();
            let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            assert_eq!(names, ["id", "n", "x"]);
            assert_eq!(
                batch.column(0).as_string::<i32>(),
                &StringArray::from(ids[range.clone()].to_vec())
            );
            assert_eq!(
                batch.column(1).as_primitive::<Int64Type>(),
                &Int64Array::from(ns[range.clone()].to_vec())
            );
            assert_eq!(
                batch
                    .column(2)
                    .as_primitive::<arrow_array::types::Float64Type>(),
                &arrow_array::Float64Array::from(xs[range].to_vec())
            );
        }
    }

    #[test]
    fn a_source_row_is_the_same_record_as_its_values_given_one_by_one() {
        let source = source_batch(8);
        let mut by_row = BatchBuilder::new();
        let mut by_value = BatchBuilder::new();
        // Rows out of order, repeated and interleaved with typed values: the
        // runs break, the rows are still the ones pushed.
        for (k, row) in [5, 6, 7, 0, 0, 3, 4, 1].into_iter().enumerate() {
            let fields = Fields::row(source.clone(), row).unwrap();
            let mut values = Fields::new();
            for (name, value) in fields.iter() {
                values.push(name.clone(), value.clone());
            }
            assert_eq!(fields, values);
            by_row.push(&fields, "r").unwrap();
            by_value.push(&values, "r").unwrap();
            if k == 4 {
                let typed = fields_of_typed();
                by_row.push(&typed, "t").unwrap();
                by_value.push(&typed, "t").unwrap();
            }
        }
        assert_eq!(by_row.finish().unwrap(), by_value.finish().unwrap());
    }

    fn fields_of_typed() -> Fields {
        fields(vec![
            ("n", FieldValue::Int64(-5)),
            ("id", FieldValue::String("typed".into())),
        ])
    }

    #[test]
    fn a_source_row_past_its_batch_is_refused() {
        assert!(Fields::row(source_batch(3), 3).is_none());
        let ids: ArrayRef = Arc::new(StringArray::from(vec!["a"]));
        assert!(crate::SourceColumns::new(vec![Arc::from("id")], vec![ids], 2).is_none());
    }

    #[test]
    fn take_builds_a_prefix_and_keeps_the_rest() {
        let mut b = BatchBuilder::new();
        b.push(&fields(vec![("a", FieldValue::Int64(0))]), "r0")
            .unwrap();
        b.push(&fields(vec![("a", FieldValue::Int64(1))]), "r1")
            .unwrap();
        b.push(&fields(vec![("b", FieldValue::Bool(true))]), "r2")
            .unwrap();
        b.push(&fields(vec![("a", FieldValue::Int64(3))]), "r3")
            .unwrap();
        let first = b.take(2).unwrap();
        assert_eq!((first.num_rows(), first.num_columns()), (2, 1));
        let rest = b.take(10).unwrap();
        assert_eq!(rest.num_rows(), 2);
        assert_eq!(rest.schema().field(0).name(), "a");
        assert_eq!(
            rest.column(0).as_primitive::<Int64Type>(),
            &Int64Array::from(vec![None, Some(3)])
        );
        assert!(rest.column(1).as_boolean().value(0));
        assert!(b.is_empty());
    }
}
