//! Rendering fields for people and for other formats: a row as a JSON object
//! (`bcd ls --fields`) and one value as the bytes of a WebDataset member.

use arrow_array::cast::AsArray;
use arrow_array::types::{Float16Type, Float32Type, Float64Type};
use arrow_array::{downcast_dictionary_array, downcast_run_array, Array, RecordBatch};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::DataType;
use base64::Engine as _;
use serde_json::{Map, Number, Value};

use crate::canonical;

/// Row `row` of `batch` as a JSON object, one member per column (nulls
/// included); values render as [`value_to_json`] does.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{BinaryArray, Float64Array, RecordBatch};
/// use bcd_fields::row_to_json;
///
/// let batch = RecordBatch::try_from_iter([
///     ("score", Arc::new(Float64Array::from(vec![0.25, f64::NAN])) as _),
///     ("raw", Arc::new(BinaryArray::from_vec(vec![b"\x00\xff", b"hi"])) as _),
/// ])
/// .unwrap();
/// assert_eq!(
///     serde_json::Value::Object(row_to_json(&batch, 1)),
///     serde_json::json!({"score": "NaN", "raw": "aGk="})
/// );
/// ```
pub fn row_to_json(batch: &RecordBatch, row: usize) -> Map<String, Value> {
    batch
        .schema()
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(f, c)| (f.name().clone(), value_to_json(c.as_ref(), row)))
        .collect()
}

/// Row `row` of `array` as JSON: null as `null`; booleans and integers as
/// themselves; floats as numbers (their shortest round-trip decimal), NaN and
/// infinities as the strings `"NaN"`, `"inf"`, `"-inf"`; strings as strings;
/// binary as base64 (standard alphabet, padded); lists as arrays; structs as
/// objects; maps as objects when their keys are strings, else as arrays of
/// `[key, value]`; dictionary and run-end encoded values as the value; every
/// other type (dates, times, timestamps, decimals, intervals) as the string
/// Arrow displays.
pub fn value_to_json(array: &dyn Array, row: usize) -> Value {
    use DataType::*;
    if row >= array.len() || array.is_null(row) {
        return Value::Null;
    }
    let t = array.data_type();
    match t {
        Null => Value::Null,
        Boolean => Value::Bool(array.as_boolean().value(row)),
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 => {
            match canonical::int_at(array, row) {
                Some(v) => i64::try_from(v)
                    .map(Value::from)
                    .unwrap_or_else(|_| Value::from(v as u64)),
                None => Value::Null,
            }
        }
        Float16 => float32_json(array.as_primitive::<Float16Type>().value(row).to_f32()),
        Float32 => float32_json(array.as_primitive::<Float32Type>().value(row)),
        Float64 => crate::json_util::float_json(array.as_primitive::<Float64Type>().value(row)),
        Utf8 | LargeUtf8 | Utf8View => Value::String(
            canonical::utf8_at(array, row)
                .unwrap_or_default()
                .to_owned(),
        ),
        Binary | LargeBinary | BinaryView | FixedSizeBinary(_) => Value::String(
            base64::engine::general_purpose::STANDARD
                .encode(canonical::binary_at(array, row).unwrap_or_default()),
        ),
        List(_) | LargeList(_) | FixedSizeList(..) | ListView(_) | LargeListView(_) => {
            match canonical::list_at(array, row) {
                Some(values) => Value::Array(
                    (0..values.len())
                        .map(|i| value_to_json(values.as_ref(), i))
                        .collect(),
                ),
                None => Value::Null,
            }
        }
        Struct(fields) => {
            let s = array.as_struct();
            Value::Object(
                fields
                    .iter()
                    .zip(s.columns())
                    .map(|(f, c)| (f.name().clone(), value_to_json(c.as_ref(), row)))
                    .collect(),
            )
        }
        Map(..) => {
            let entries = array.as_map().value(row);
            let (keys, values) = (entries.column(0), entries.column(1));
            if matches!(keys.data_type(), Utf8 | LargeUtf8 | Utf8View) {
                Value::Object(
                    (0..entries.len())
                        .map(|i| {
                            let k = canonical::utf8_at(keys.as_ref(), i)
                                .unwrap_or_default()
                                .to_owned();
                            (k, value_to_json(values.as_ref(), i))
                        })
                        .collect(),
                )
            } else {
                Value::Array(
                    (0..entries.len())
                        .map(|i| {
                            Value::Array(vec![
                                value_to_json(keys.as_ref(), i),
                                value_to_json(values.as_ref(), i),
                            ])
                        })
                        .collect(),
                )
            }
        }
        Dictionary(..) => downcast_dictionary_array!(
            array => match array.key(row) {
                Some(k) => value_to_json(array.values().as_ref(), k),
                None => Value::Null,
            },
            _ => Value::Null
        ),
        RunEndEncoded(..) => downcast_run_array!(
            array => {
                let physical = array.get_physical_index(row);
                value_to_json(array.values().as_ref(), physical)
            },
            _ => Value::Null
        ),
        _ => displayed(array, row).map_or(Value::Null, Value::String),
    }
}

/// A float32 as JSON: its shortest decimal (0.1, not 0.10000000149011612).
fn float32_json(v: f32) -> Value {
    if v.is_finite() {
        // f32's shortest round-trip decimal, read as the f64 nearest to it.
        let shortest: f64 = v.to_string().parse().unwrap_or(f64::from(v));
        Number::from_f64(shortest).map_or(Value::Null, Value::Number)
    } else {
        crate::json_util::float_json(f64::from(v))
    }
}

/// What Arrow displays for the value.
fn displayed(array: &dyn Array, row: usize) -> Option<String> {
    let formatter = ArrayFormatter::try_new(array, &FormatOptions::default()).ok()?;
    Some(formatter.value(row).to_string())
}

/// Row `row` of `array` as the bytes of a WebDataset member (FORMAT.md,
/// "Fields": export): `None` for null; integers in decimal; floats as their
/// shortest round-trip decimal (Rust's `{}`: `0.1`, `1e-7` as `0.0000001`,
/// `NaN`, `inf`, `-inf`); booleans as `True`/`False` (Python's spelling);
/// strings as their UTF-8 bytes; binary as is; lists, structs and maps as
/// compact JSON ([`value_to_json`]); dictionary and run-end encoded values as
/// their value; other types as Arrow displays them.
///
/// ```
/// use arrow_array::{BooleanArray, Float32Array, Int64Array};
/// use bcd_fields::member_bytes;
///
/// assert_eq!(member_bytes(&Int64Array::from(vec![-42]), 0).unwrap(), b"-42");
/// assert_eq!(member_bytes(&Float32Array::from(vec![0.1]), 0).unwrap(), b"0.1");
/// assert_eq!(member_bytes(&BooleanArray::from(vec![true]), 0).unwrap(), b"True");
/// assert_eq!(member_bytes(&Int64Array::from(vec![None]), 0), None);
/// ```
pub fn member_bytes(array: &dyn Array, row: usize) -> Option<Vec<u8>> {
    use DataType::*;
    if row >= array.len() || array.is_null(row) {
        return None;
    }
    Some(match array.data_type() {
        Null => return None,
        Boolean => (if array.as_boolean().value(row) {
            "True"
        } else {
            "False"
        })
        .into(),
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 => {
            canonical::int_at(array, row)?.to_string().into()
        }
        Float16 => array
            .as_primitive::<Float16Type>()
            .value(row)
            .to_f32()
            .to_string()
            .into(),
        Float32 => array
            .as_primitive::<Float32Type>()
            .value(row)
            .to_string()
            .into(),
        Float64 => array
            .as_primitive::<Float64Type>()
            .value(row)
            .to_string()
            .into(),
        Utf8 | LargeUtf8 | Utf8View => canonical::utf8_at(array, row)?.as_bytes().to_vec(),
        Binary | LargeBinary | BinaryView | FixedSizeBinary(_) => {
            canonical::binary_at(array, row)?.to_vec()
        }
        List(_) | LargeList(_) | FixedSizeList(..) | ListView(_) | LargeListView(_) | Struct(_)
        | Map(..) => value_to_json(array, row).to_string().into_bytes(),
        Dictionary(..) => downcast_dictionary_array!(
            array => return member_bytes(array.values().as_ref(), array.key(row)?),
            _ => return None
        ),
        RunEndEncoded(..) => downcast_run_array!(
            array => return member_bytes(array.values().as_ref(), array.get_physical_index(row)),
            _ => return None
        ),
        _ => displayed(array, row)?.into_bytes(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow_array::builder::{Int32Builder, MapBuilder, StringBuilder};
    use arrow_array::types::{Int32Type, Int64Type};
    use arrow_array::{
        ArrayRef, BinaryArray, Date32Array, Decimal128Array, DictionaryArray, Float32Array,
        Float64Array, Int64Array, ListArray, StringArray, StructArray, TimestampMillisecondArray,
        UInt64Array,
    };
    use arrow_schema::Field;
    use serde_json::json;

    #[test]
    fn scalars_render_as_json() {
        assert_eq!(
            value_to_json(&UInt64Array::from(vec![u64::MAX]), 0),
            json!(u64::MAX)
        );
        assert_eq!(
            value_to_json(&Int64Array::from(vec![i64::MIN]), 0),
            json!(i64::MIN)
        );
        assert_eq!(value_to_json(&Float32Array::from(vec![0.1]), 0), json!(0.1));
        assert_eq!(
            value_to_json(&Float64Array::from(vec![f64::INFINITY]), 0),
            json!("inf")
        );
        assert_eq!(
            value_to_json(&Float64Array::from(vec![f64::NEG_INFINITY]), 0),
            json!("-inf")
        );
        assert_eq!(
            value_to_json(&Float32Array::from(vec![f32::NAN]), 0),
            json!("NaN")
        );
        assert_eq!(
            value_to_json(&BinaryArray::from_vec(vec![&[0xfb, 0xff]]), 0),
            json!("+/8=")
        );
        assert_eq!(
            value_to_json(&Date32Array::from(vec![19723]), 0),
            json!("2024-01-01")
        );
        assert_eq!(
            value_to_json(&TimestampMillisecondArray::from(vec![1_700_000_000_123]), 0),
            json!("2023-11-14T22:13:20.123")
        );
        let dec = Decimal128Array::from(vec![12345])
            .with_precision_and_scale(10, 2)
            .unwrap();
        assert_eq!(value_to_json(&dec, 0), json!("123.45"));
        assert_eq!(value_to_json(&Int64Array::from(vec![None]), 0), Value::Null);
        assert_eq!(value_to_json(&Int64Array::from(vec![1]), 5), Value::Null);
    }

    #[test]
    fn nested_values_render_as_arrays_and_objects() {
        let list = ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
            Some(vec![Some(1), None]),
            None,
        ]);
        assert_eq!(value_to_json(&list, 0), json!([1, null]));
        assert_eq!(value_to_json(&list, 1), Value::Null);
        let s = StructArray::from(vec![
            (
                Arc::new(Field::new("a", DataType::Utf8, true)),
                Arc::new(StringArray::from(vec!["x"])) as ArrayRef,
            ),
            (
                Arc::new(Field::new("b", DataType::Boolean, true)),
                Arc::new(arrow_array::BooleanArray::from(vec![false])) as ArrayRef,
            ),
        ]);
        assert_eq!(value_to_json(&s, 0), json!({"a": "x", "b": false}));
        let dict: DictionaryArray<Int32Type> = vec!["p", "q", "p"].into_iter().collect();
        assert_eq!(value_to_json(&dict, 2), json!("p"));
        let mut map = MapBuilder::new(None, StringBuilder::new(), Int32Builder::new());
        map.keys().append_value("k");
        map.values().append_value(7);
        map.append(true).unwrap();
        assert_eq!(value_to_json(&map.finish(), 0), json!({"k": 7}));
    }

    #[test]
    fn rows_render_every_column() {
        let batch = RecordBatch::try_from_iter([
            (
                "n",
                Arc::new(Int64Array::from(vec![Some(1), None])) as ArrayRef,
            ),
            ("s", Arc::new(StringArray::from(vec!["a", "b"])) as ArrayRef),
        ])
        .unwrap();
        assert_eq!(
            Value::Object(row_to_json(&batch, 1)),
            json!({"n": null, "s": "b"})
        );
    }

    #[test]
    fn member_bytes_follow_the_export_rules() {
        let cases: Vec<(ArrayRef, Option<&[u8]>)> = vec![
            (Arc::new(Int64Array::from(vec![7])), Some(b"7")),
            (
                Arc::new(UInt64Array::from(vec![u64::MAX])),
                Some(b"18446744073709551615"),
            ),
            (
                Arc::new(Float64Array::from(vec![0.1 + 0.2])),
                Some(b"0.30000000000000004"),
            ),
            (Arc::new(Float64Array::from(vec![1e-7])), Some(b"0.0000001")),
            (Arc::new(Float64Array::from(vec![2.0])), Some(b"2")),
            (Arc::new(Float64Array::from(vec![f64::NAN])), Some(b"NaN")),
            (
                Arc::new(Float32Array::from(vec![f32::NEG_INFINITY])),
                Some(b"-inf"),
            ),
            (
                Arc::new(arrow_array::BooleanArray::from(vec![false])),
                Some(b"False"),
            ),
            (
                Arc::new(StringArray::from(vec!["héllo"])),
                Some("héllo".as_bytes()),
            ),
            (
                Arc::new(BinaryArray::from_vec(vec![&[0, 255]])),
                Some(&[0, 255]),
            ),
            (
                Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
                    Some(vec![Some(1), Some(2)]),
                ])),
                Some(b"[1,2]"),
            ),
            (Arc::new(StringArray::from(vec![None::<&str>])), None),
            (Arc::new(arrow_array::NullArray::new(1)), None),
        ];
        for (array, want) in cases {
            assert_eq!(
                member_bytes(array.as_ref(), 0).as_deref(),
                want,
                "{array:?}"
            );
        }
    }
}
