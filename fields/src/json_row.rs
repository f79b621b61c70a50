//! One record's fields as JSON (`bcd ls --fields`, `bcd get --fields`):
//! integers and floats as numbers (NaN and infinities as the strings "NaN",
//! "inf", "-inf"), strings as strings, binaries base64 (standard alphabet,
//! padded), lists as arrays, structs and maps as objects, dates and times as
//! their ISO 8601 text, nulls as null.

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use base64::Engine as _;
use serde_json::{Map, Value};

/// Row `row` of `batch` as a JSON object, one member per column.
pub fn row_to_json(batch: &RecordBatch, row: usize) -> Map<String, Value> {
    batch
        .schema()
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(field, column)| (field.name().clone(), value_to_json(column.as_ref(), row)))
        .collect()
}

fn float(v: f64) -> Value {
    if v.is_nan() {
        Value::String("NaN".into())
    } else if v.is_infinite() {
        Value::String(if v > 0.0 { "inf" } else { "-inf" }.into())
    } else {
        serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
    }
}

fn base64(bytes: &[u8]) -> Value {
    Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// Element `row` of `array` as JSON.
pub fn value_to_json(array: &dyn Array, row: usize) -> Value {
    if array.is_null(row) {
        return Value::Null;
    }
    macro_rules! prim {
        ($t:ty) => {
            Value::from(array.as_primitive::<$t>().value(row))
        };
    }
    match array.data_type() {
        DataType::Null => Value::Null,
        DataType::Boolean => Value::Bool(array.as_boolean().value(row)),
        DataType::Int8 => prim!(Int8Type),
        DataType::Int16 => prim!(Int16Type),
        DataType::Int32 => prim!(Int32Type),
        DataType::Int64 => prim!(Int64Type),
        DataType::UInt8 => prim!(UInt8Type),
        DataType::UInt16 => prim!(UInt16Type),
        DataType::UInt32 => prim!(UInt32Type),
        DataType::UInt64 => prim!(UInt64Type),
        DataType::Float16 => float(array.as_primitive::<Float16Type>().value(row).to_f64()),
        DataType::Float32 => float(array.as_primitive::<Float32Type>().value(row) as f64),
        DataType::Float64 => float(array.as_primitive::<Float64Type>().value(row)),
        DataType::Utf8 => Value::String(array.as_string::<i32>().value(row).to_owned()),
        DataType::LargeUtf8 => Value::String(array.as_string::<i64>().value(row).to_owned()),
        DataType::Utf8View => Value::String(array.as_string_view().value(row).to_owned()),
        DataType::Binary => base64(array.as_binary::<i32>().value(row)),
        DataType::LargeBinary => base64(array.as_binary::<i64>().value(row)),
        DataType::BinaryView => base64(array.as_binary_view().value(row)),
        DataType::FixedSizeBinary(_) => base64(array.as_fixed_size_binary().value(row)),
        DataType::List(_) => list(array.as_list::<i32>().value(row).as_ref()),
        DataType::LargeList(_) => list(array.as_list::<i64>().value(row).as_ref()),
        DataType::FixedSizeList(_, _) => list(array.as_fixed_size_list().value(row).as_ref()),
        DataType::Struct(fields) => {
            let s = array.as_struct();
            Value::Object(
                fields
                    .iter()
                    .zip(s.columns())
                    .map(|(f, c)| (f.name().clone(), value_to_json(c.as_ref(), row)))
                    .collect(),
            )
        }
        DataType::Dictionary(_, _) => {
            let dict = array.as_any_dictionary();
            let key = dict.normalized_keys()[row];
            value_to_json(dict.values().as_ref(), key)
        }
        _ => {
            // Dates, times, decimals and the rest: Arrow's own display.
            match arrow_cast::display::ArrayFormatter::try_new(
                array,
                &arrow_cast::display::FormatOptions::default(),
            ) {
                Ok(formatter) => Value::String(formatter.value(row).to_string()),
                Err(_) => Value::Null,
            }
        }
    }
}

fn list(values: &dyn Array) -> Value {
    Value::Array(
        (0..values.len())
            .map(|i| value_to_json(values, i))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{BinaryArray, Float64Array, Int64Array, ListArray, StringArray};
    use std::sync::Arc;

    #[test]
    fn rows_render_as_the_module_says() {
        let list =
            ListArray::from_iter_primitive::<Int64Type, _, _>(vec![Some(vec![Some(1), None])]);
        let batch = RecordBatch::try_from_iter([
            ("label", Arc::new(Int64Array::from(vec![3])) as _),
            (
                "caption",
                Arc::new(StringArray::from(vec![Some("a cat")])) as _,
            ),
            (
                "raw",
                Arc::new(BinaryArray::from(vec![&b"\x00\xff"[..]])) as _,
            ),
            ("score", Arc::new(Float64Array::from(vec![f64::NAN])) as _),
            ("tags", Arc::new(list) as _),
        ])
        .unwrap();
        let row = Value::Object(row_to_json(&batch, 0));
        assert_eq!(
            row,
            serde_json::json!({"label": 3, "caption": "a cat", "raw": "AP8=", "score": "NaN", "tags": [1, null]})
        );
    }
}
