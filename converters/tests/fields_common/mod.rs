//! Helpers of the field tests: running a Python script of the test environment
//! (pyarrow, `datasets`, `tfrecord`, pandas: the independent writers and readers),
//! and field values as JSON, the form the scripts print what they wrote.

#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::Array;
use arrow_schema::DataType;
use bcd_converters::{FieldValue, Fields, Record, SourceError};
use serde_json::{json, Map, Value};

/// Runs `script` with the test environment's Python in `dir` (also its first
/// argument), and returns the last line it prints, as JSON.
#[track_caller]
pub fn python(dir: &Path, script: &str) -> Value {
    let out = Command::new(bcd_test_support::venv_python())
        .arg("-c")
        .arg(script)
        .arg(dir)
        .current_dir(dir)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("python printed no JSON ({e}): {last:.300}"))
}

/// What every script starts with: `out` = the directory, `hexed` = a value with
/// bytes as {"hex": ...}, dates as days and times as integers, for comparison.
pub const PRELUDE: &str = r#"
import datetime, json, sys
from pathlib import Path
out = Path(sys.argv[1])
def hexed(v):
    if isinstance(v, (bytes, bytearray)):
        return {"hex": bytes(v).hex()}
    if isinstance(v, datetime.datetime):
        raise TypeError("no datetimes in these tests")
    if isinstance(v, datetime.date):
        return (v - datetime.date(1970, 1, 1)).days
    if isinstance(v, dict):
        return {k: hexed(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [hexed(x) for x in v]
    return v
"#;

/// A field value as JSON, the way [`PRELUDE`]'s `hexed` writes Python values.
pub fn json_of(value: &FieldValue) -> Value {
    match value {
        FieldValue::Null => Value::Null,
        FieldValue::Bool(b) => json!(b),
        FieldValue::Int64(n) => json!(n),
        FieldValue::Float32(x) => json!(*x as f64),
        FieldValue::Float64(x) => json!(x),
        FieldValue::String(s) => json!(s),
        FieldValue::Binary(b) => json!({"hex": hex(b)}),
        FieldValue::List(items) => Value::Array(items.iter().map(json_of).collect()),
        FieldValue::Struct(children) => Value::Object(
            children
                .iter()
                .map(|(n, v)| (n.to_string(), json_of(v)))
                .collect(),
        ),
        FieldValue::Arrow(array, i) => json_at(array.as_ref(), *i),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Row `i` of an Arrow array as JSON (the types these tests use).
pub fn json_at(array: &dyn Array, i: usize) -> Value {
    if array.is_null(i) {
        return Value::Null;
    }
    match array.data_type() {
        DataType::Boolean => json!(array.as_boolean().value(i)),
        DataType::Int8 => json!(array.as_primitive::<Int8Type>().value(i)),
        DataType::Int16 => json!(array.as_primitive::<Int16Type>().value(i)),
        DataType::Int32 => json!(array.as_primitive::<Int32Type>().value(i)),
        DataType::Int64 => json!(array.as_primitive::<Int64Type>().value(i)),
        DataType::UInt8 => json!(array.as_primitive::<UInt8Type>().value(i)),
        DataType::UInt32 => json!(array.as_primitive::<UInt32Type>().value(i)),
        DataType::UInt64 => json!(array.as_primitive::<UInt64Type>().value(i)),
        DataType::Float32 => json!(array.as_primitive::<Float32Type>().value(i) as f64),
        DataType::Float64 => json!(array.as_primitive::<Float64Type>().value(i)),
        DataType::Date32 => json!(array.as_primitive::<Date32Type>().value(i)),
        DataType::Utf8 => json!(array.as_string::<i32>().value(i)),
        DataType::LargeUtf8 => json!(array.as_string::<i64>().value(i)),
        DataType::Utf8View => json!(array.as_string_view().value(i)),
        DataType::Binary => json!({"hex": hex(array.as_binary::<i32>().value(i))}),
        DataType::LargeBinary => json!({"hex": hex(array.as_binary::<i64>().value(i))}),
        DataType::List(_) => {
            let row = array.as_list::<i32>().value(i);
            Value::Array((0..row.len()).map(|j| json_at(row.as_ref(), j)).collect())
        }
        DataType::LargeList(_) => {
            let row = array.as_list::<i64>().value(i);
            Value::Array((0..row.len()).map(|j| json_at(row.as_ref(), j)).collect())
        }
        DataType::Struct(fields) => {
            let parent = array.as_struct();
            let mut object = Map::new();
            for (field, child) in fields.iter().zip(parent.columns()) {
                object.insert(field.name().clone(), json_at(child.as_ref(), i));
            }
            Value::Object(object)
        }
        DataType::Dictionary(_, _) => {
            let dictionary = array.as_any_dictionary();
            let key = dictionary.normalized_keys()[i];
            json_at(dictionary.values().as_ref(), key)
        }
        other => panic!("no JSON for {other} in these tests"),
    }
}

/// A record's fields as one JSON object (names in order as a separate list).
pub fn fields_json(fields: &Fields) -> (Vec<String>, Value) {
    let names = fields.iter().map(|(n, _)| n.to_string()).collect();
    let object = fields
        .iter()
        .map(|(n, v)| (n.to_string(), json_of(v)))
        .collect();
    (names, Value::Object(object))
}

/// The Arrow type a field value has.
pub fn arrow_type(value: &FieldValue) -> Option<DataType> {
    match value {
        FieldValue::Arrow(array, _) => Some(array.data_type().clone()),
        _ => None,
    }
}

/// Every record of a source, or the first error.
pub fn read_all(
    source: impl Iterator<Item = Result<Record, SourceError>>,
) -> Result<Vec<Record>, SourceError> {
    source.collect()
}
