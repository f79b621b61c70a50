//! Reading a shard's column as the dataset's type: nulls for what it lacks,
//! integers widened, nested children matched by name.

use std::sync::Arc;

use arrow_array::{
    new_null_array, Array, ArrayRef, FixedSizeListArray, GenericListArray, OffsetSizeTrait,
    RecordBatch, RecordBatchOptions, StructArray,
};
use arrow_schema::{DataType, FieldRef, SchemaRef};

use crate::error::{FieldsError, Result};
use crate::schema::DatasetSchema;

/// `array` as type `target`, which the schema rules made from its type (so
/// every value converts): the same array if the types are equal; nulls of
/// `target` for a `Null` array; integers widened; a list's elements and a
/// struct's children (matched by name, missing ones null) converted in turn.
/// `path` names the column in errors.
pub(crate) fn conform(array: &ArrayRef, target: &DataType, path: &str) -> Result<ArrayRef> {
    let source = array.data_type();
    if source == target {
        return Ok(array.clone());
    }
    let fail = |what: String| FieldsError::Unsupported(format!("field \"{path}\": {what}"));
    match (source, target) {
        (DataType::Null, _) => Ok(new_null_array(target, array.len())),
        (DataType::List(_), DataType::List(to)) => list::<i32>(array, to, path),
        (DataType::LargeList(_), DataType::LargeList(to)) => list::<i64>(array, to, path),
        (DataType::FixedSizeList(_, n), DataType::FixedSizeList(to, m)) if n == m => {
            let a = array
                .as_any()
                .downcast_ref::<FixedSizeListArray>()
                .ok_or_else(|| fail("not a fixed-size list".into()))?;
            let values = conform(a.values(), to.data_type(), &format!("{path}[]"))?;
            let out = FixedSizeListArray::try_new(to.clone(), *n, values, a.nulls().cloned())
                .map_err(|e| {
                    FieldsError::arrow(format!("field \"{path}\": converting to {target}"), e)
                })?;
            Ok(Arc::new(out))
        }
        (DataType::Struct(_), DataType::Struct(to)) => {
            let a = array
                .as_any()
                .downcast_ref::<StructArray>()
                .ok_or_else(|| fail("not a struct".into()))?;
            let mut columns = Vec::with_capacity(to.len());
            for field in to.iter() {
                let child_path = format!("{path}.{}", field.name());
                columns.push(match a.column_by_name(field.name()) {
                    Some(child) => conform(child, field.data_type(), &child_path)?,
                    None => new_null_array(field.data_type(), a.len()),
                });
            }
            let out =
                StructArray::try_new_with_length(to.clone(), columns, a.nulls().cloned(), a.len())
                    .map_err(|e| {
                        FieldsError::arrow(format!("field \"{path}\": converting to {target}"), e)
                    })?;
            Ok(Arc::new(out))
        }
        _ if source.is_integer() && target.is_integer() => {
            arrow_cast::cast(array, target).map_err(|e| {
                FieldsError::arrow(
                    format!("field \"{path}\": widening {source} to {target}"),
                    e,
                )
            })
        }
        _ => Err(fail(format!("type {source} cannot be read as {target}"))),
    }
}

fn list<O: OffsetSizeTrait>(array: &ArrayRef, to: &FieldRef, path: &str) -> Result<ArrayRef> {
    let a = array
        .as_any()
        .downcast_ref::<GenericListArray<O>>()
        .ok_or_else(|| FieldsError::Unsupported(format!("field \"{path}\": not a list")))?;
    let values = conform(a.values(), to.data_type(), &format!("{path}[]"))?;
    let out =
        GenericListArray::<O>::try_new(to.clone(), a.offsets().clone(), values, a.nulls().cloned())
            .map_err(|e| {
                FieldsError::arrow(format!("field \"{path}\": converting its elements"), e)
            })?;
    Ok(Arc::new(out))
}

/// A shard's batches as the dataset schema's columns (FORMAT.md, "Fields":
/// reading): each dataset column from the batch's column of that name,
/// converted to the dataset's type (narrower integers widened, nested children
/// matched by name), or all nulls where the shard lacks it; in the schema's
/// order. Columns the dataset schema does not name are left out.
///
/// An error names the column that cannot be read as the dataset's type (the
/// shard's file and the commit file disagree).
pub fn align(batches: &[RecordBatch], schema: &DatasetSchema) -> Result<Vec<RecordBatch>> {
    let arrow_schema = schema.arrow_schema();
    batches
        .iter()
        .map(|batch| {
            conform_batch(
                batch,
                &arrow_schema,
                "aligning a shard's fields to the dataset schema",
            )
        })
        .collect()
}

/// `batch` as the columns of `schema` (by name; each converted to the
/// schema's type by the rules of [`align`], all null where `batch` lacks it),
/// in the schema's order; other columns are left out. `context` says what is
/// done, for an error of assembling the batch.
pub(crate) fn conform_batch(
    batch: &RecordBatch,
    schema: &SchemaRef,
    context: &str,
) -> Result<RecordBatch> {
    let rows = batch.num_rows();
    let columns = schema
        .fields()
        .iter()
        .map(|field| match batch.column_by_name(field.name()) {
            Some(column) => conform(column, field.data_type(), field.name()),
            None => Ok(new_null_array(field.data_type(), rows)),
        })
        .collect::<Result<Vec<_>>>()?;
    RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )
    .map_err(|e| FieldsError::arrow(context, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int32Array, Int64Array, ListArray, StringArray};
    use arrow_schema::{Field, Schema};

    #[test]
    fn align_widens_fills_and_reorders() {
        let batch = RecordBatch::try_from_iter([
            (
                "b",
                Arc::new(StringArray::from(vec![Some("x"), None])) as ArrayRef,
            ),
            ("a", Arc::new(Int32Array::from(vec![1, -2])) as ArrayRef),
            ("gone", Arc::new(Int32Array::from(vec![1, 2])) as ArrayRef),
        ])
        .unwrap();
        let schema = DatasetSchema::from_fields([
            Arc::new(Field::new("a", DataType::Int64, true)),
            Arc::new(Field::new("c", DataType::Boolean, true)),
            Arc::new(Field::new("b", DataType::Utf8, true)),
        ])
        .unwrap();
        let out = align(&[batch], &schema).unwrap();
        let out = &out[0];
        assert_eq!(out.schema(), schema.arrow_schema());
        assert_eq!(
            out.column(0).as_ref(),
            &Int64Array::from(vec![1, -2]) as &dyn Array
        );
        assert_eq!(out.column(1).null_count(), 2);
        assert_eq!(
            out.column(2).as_ref(),
            &StringArray::from(vec![Some("x"), None]) as &dyn Array
        );
    }

    #[test]
    fn nested_children_convert_by_name() {
        let inner = StructArray::from(vec![(
            Arc::new(Field::new("x", DataType::Int32, false)),
            Arc::new(Int32Array::from(vec![7, 8, 9])) as ArrayRef,
        )]);
        let list = ListArray::try_new(
            Arc::new(Field::new("element", inner.data_type().clone(), false)),
            arrow_buffer::OffsetBuffer::from_lengths([2, 0, 1]),
            Arc::new(inner),
            None,
        )
        .unwrap();
        let target_struct = DataType::Struct(
            vec![
                Field::new("y", DataType::Utf8, true),
                Field::new("x", DataType::Int64, true),
            ]
            .into(),
        );
        let target = DataType::List(Arc::new(Field::new("element", target_struct, true)));
        let out = conform(&(Arc::new(list) as ArrayRef), &target, "l").unwrap();
        assert_eq!(out.data_type(), &target);
        let out = out.as_any().downcast_ref::<ListArray>().unwrap();
        let values = out.values().as_any().downcast_ref::<StructArray>().unwrap();
        assert_eq!(values.column(0).null_count(), 3);
        assert_eq!(
            values.column(1).as_ref(),
            &Int64Array::from(vec![7, 8, 9]) as &dyn Array
        );
        assert_eq!(
            (0..3).map(|i| out.value_length(i)).collect::<Vec<_>>(),
            [2, 0, 1]
        );
    }

    #[test]
    fn an_unconvertible_column_is_an_error_naming_it() {
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("a", DataType::Utf8, true)])),
            vec![Arc::new(StringArray::from(vec!["x"]))],
        )
        .unwrap();
        let schema =
            DatasetSchema::from_fields([Arc::new(Field::new("a", DataType::Int64, true))]).unwrap();
        let err = align(&[batch], &schema).unwrap_err().to_string();
        assert_eq!(err, "field \"a\": type Utf8 cannot be read as Int64");
    }
}
