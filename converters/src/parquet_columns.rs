//! The Arrow side of the Parquet source: which column types are accepted, the
//! view types they are decoded as, the leaf columns read, and one row's bytes.

use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, StructArray};
use arrow_schema::{DataType, FieldRef, Schema};
use parquet::schema::types::SchemaDescriptor;

use crate::SourceError;

/// `data_type` with binary and string types as views, which the crate decodes
/// without copying: a dictionary-encoded value stays in its dictionary, and a
/// batch has no 2 GiB offset limit. A struct's `bytes` field is converted too.
pub(crate) fn view_type(data_type: &DataType) -> DataType {
    match data_type {
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => DataType::BinaryView,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => DataType::Utf8View,
        DataType::Dictionary(_, inner)
            if is_bytes_like(inner) && !matches!(**inner, DataType::FixedSizeBinary(_)) =>
        {
            view_type(inner)
        }
        DataType::Struct(fields) => DataType::Struct(
            fields
                .iter()
                .map(|field| match field.name() == "bytes" {
                    true => with_type(field, view_type(field.data_type())),
                    false => field.clone(),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

pub(crate) fn with_type(field: &FieldRef, data_type: DataType) -> FieldRef {
    Arc::new(field.as_ref().clone().with_data_type(data_type))
}

/// `schema` with the named columns' binary types as views ([`view_type`]).
pub(crate) fn view_schema(schema: &Schema, columns: &[&str]) -> Schema {
    let fields: Vec<FieldRef> = schema
        .fields()
        .iter()
        .map(|field| match columns.contains(&field.name().as_str()) {
            true => with_type(field, view_type(field.data_type())),
            false => field.clone(),
        })
        .collect();
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

/// The leaf columns to decode, as (leaf, whether it is a field's): the key
/// column's, the value column's (of a struct, only its `bytes` field, and the
/// `path` beside it when `value_path`, not e.g. other children), and every leaf
/// of the `whole` columns (the fields).
pub(crate) fn projected_leaves(
    parquet: &SchemaDescriptor,
    schema: &Schema,
    value: &str,
    key: Option<&str>,
    value_path: bool,
    whole: &[&str],
) -> Vec<(usize, bool)> {
    let mut value_path_parts = vec![value.to_owned()];
    let mut data_type = schema
        .field_with_name(value)
        .ok()
        .map(|f| f.data_type().clone());
    while let Some(DataType::Struct(fields)) = data_type {
        value_path_parts.push("bytes".into());
        data_type = fields
            .iter()
            .find(|f| f.name() == "bytes")
            .map(|f| f.data_type().clone());
    }
    let path_parts = [value.to_owned(), "path".to_owned()];
    parquet
        .columns()
        .iter()
        .enumerate()
        .filter_map(|(i, column)| {
            let parts = column.path().parts();
            let first = parts.first().map(String::as_str);
            if parts.starts_with(&value_path_parts)
                || (value_path && parts == path_parts.as_slice())
                || key.is_some_and(|key| first == Some(key))
            {
                Some((i, false))
            } else if first.is_some_and(|first| whole.contains(&first)) {
                Some((i, true))
            } else {
                None
            }
        })
        .collect()
}

pub(crate) fn type_error(
    path: &Path,
    column: &str,
    found: &DataType,
    expected: &str,
) -> SourceError {
    SourceError::Usage(format!(
        "{}: column {column:?} has type {found}; expected {expected}",
        path.display()
    ))
}

const VALUE_TYPES: &str =
    "binary, large_binary, string, large_string, fixed_size_binary or struct<bytes: binary>";
const KEY_TYPES: &str = "a string, binary or integer column";

/// The types [`bytes_at`] reads directly.
pub(crate) fn is_bytes_like(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Binary
            | DataType::LargeBinary
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::BinaryView
            | DataType::Utf8View
            | DataType::FixedSizeBinary(_)
    )
}

pub(crate) fn check_value_type(
    path: &Path,
    column: &str,
    data_type: &DataType,
) -> Result<(), SourceError> {
    match data_type {
        t if is_bytes_like(t) => Ok(()),
        DataType::Dictionary(_, inner) => check_value_type(path, column, inner),
        DataType::Struct(fields) => match fields.iter().find(|f| f.name() == "bytes") {
            Some(field) => check_value_type(path, column, field.data_type()),
            None => Err(type_error(path, column, data_type, VALUE_TYPES)),
        },
        other => Err(type_error(path, column, other, VALUE_TYPES)),
    }
}

pub(crate) fn check_key_type(
    path: &Path,
    column: &str,
    data_type: &DataType,
) -> Result<(), SourceError> {
    match data_type {
        DataType::Dictionary(_, inner) => check_key_type(path, column, inner),
        t if t.is_integer() || is_bytes_like(t) => Ok(()),
        other => Err(type_error(path, column, other, KEY_TYPES)),
    }
}

/// A value column as a plain bytes-like array: struct<bytes> unwrapped (a null
/// struct row makes a null value), dictionaries decoded.
pub(crate) fn value_bytes_column(
    array: &ArrayRef,
    path: &Path,
    column: &str,
) -> Result<ArrayRef, SourceError> {
    let cast_error =
        |e: arrow_schema::ArrowError| type_error(path, column, array.data_type(), &e.to_string());
    match array.data_type() {
        DataType::Struct(_) => {
            let parent: &StructArray = array.as_struct();
            let child = parent
                .column_by_name("bytes")
                .ok_or_else(|| type_error(path, column, array.data_type(), VALUE_TYPES))?;
            let child = value_bytes_column(child, path, column)?;
            match parent.nulls() {
                // Nulls of the struct itself are nulls of the value.
                Some(nulls) if nulls.null_count() > 0 => {
                    let data = child.to_data();
                    let combined = arrow_buffer_nulls(nulls, data.nulls());
                    let data = data
                        .into_builder()
                        .nulls(Some(combined))
                        .build()
                        .map_err(cast_error)?;
                    Ok(arrow_array::make_array(data))
                }
                _ => Ok(child),
            }
        }
        DataType::Dictionary(_, inner) => arrow_cast::cast(array, inner).map_err(cast_error),
        _ => Ok(array.clone()),
    }
}

/// Child `name` of a struct column, null where the struct is; `None` if the
/// column is not a struct with that child.
pub(crate) fn struct_child(
    array: &ArrayRef,
    name: &str,
    path: &Path,
    column: &str,
) -> Result<Option<ArrayRef>, SourceError> {
    let Some(parent) = array.as_struct_opt() else {
        return Ok(None);
    };
    let Some(child) = parent.column_by_name(name) else {
        return Ok(None);
    };
    match parent.nulls() {
        Some(nulls) if nulls.null_count() > 0 => {
            let data = child.to_data();
            let combined = arrow_buffer_nulls(nulls, data.nulls());
            let data = data
                .into_builder()
                .nulls(Some(combined))
                .build()
                .map_err(|e| type_error(path, column, array.data_type(), &e.to_string()))?;
            Ok(Some(arrow_array::make_array(data)))
        }
        _ => Ok(Some(child.clone())),
    }
}

pub(crate) fn arrow_buffer_nulls(
    a: &arrow_buffer::NullBuffer,
    b: Option<&arrow_buffer::NullBuffer>,
) -> arrow_buffer::NullBuffer {
    arrow_buffer::NullBuffer::union(Some(a), b).expect("one side is present")
}

/// A key column as bytes: integers become their decimal text.
pub(crate) fn key_bytes_column(
    array: &ArrayRef,
    path: &Path,
    column: &str,
) -> Result<ArrayRef, SourceError> {
    let target = match array.data_type() {
        DataType::Dictionary(_, inner) if inner.is_integer() => DataType::Utf8,
        DataType::Dictionary(_, inner) => inner.as_ref().clone(),
        t if t.is_integer() => DataType::Utf8,
        _ => return Ok(array.clone()),
    };
    arrow_cast::cast(array, &target)
        .map_err(|e| type_error(path, column, array.data_type(), &e.to_string()))
}

/// Row `i` of a bytes-like array, or `None` if null.
pub(crate) fn bytes_at(array: &dyn Array, i: usize) -> Option<&[u8]> {
    if array.is_null(i) {
        return None;
    }
    Some(match array.data_type() {
        DataType::Binary => array.as_binary::<i32>().value(i),
        DataType::LargeBinary => array.as_binary::<i64>().value(i),
        DataType::Utf8 => array.as_string::<i32>().value(i).as_bytes(),
        DataType::LargeUtf8 => array.as_string::<i64>().value(i).as_bytes(),
        DataType::BinaryView => array.as_binary_view().value(i),
        DataType::Utf8View => array.as_string_view().value(i).as_bytes(),
        DataType::FixedSizeBinary(_) => array.as_fixed_size_binary().value(i),
        // Types are checked when a file is opened and normalised per batch.
        _ => return None,
    })
}
