//! Strict reading of this crate's JSON documents: sizes bounded before
//! parsing, every member checked for its type, errors naming the file and the
//! member.

use serde_json::{Map, Value};

use crate::error::{FieldsError, Result};

/// Parses `bytes` as a JSON object, refusing more than `limit` bytes unread.
/// (serde_json limits nesting to 128 levels, so no input overflows the stack.)
pub(crate) fn parse_object(bytes: &[u8], limit: usize, name: &str) -> Result<Map<String, Value>> {
    if bytes.len() > limit {
        return Err(FieldsError::invalid(
            name,
            format!("{} bytes, more than the {limit} allowed", bytes.len()),
        ));
    }
    let value: Value =
        serde_json::from_slice(bytes).map_err(|source| FieldsError::InvalidJson {
            name: name.to_owned(),
            what: "not valid JSON".to_owned(),
            source,
        })?;
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(FieldsError::invalid(name, "not a JSON object")),
    }
}

/// Member `key` of `obj`, required.
pub(crate) fn member<'a>(obj: &'a Map<String, Value>, key: &str, name: &str) -> Result<&'a Value> {
    obj.get(key)
        .ok_or_else(|| FieldsError::invalid(name, format!("\"{key}\" is missing")))
}

/// A non-negative integer below 2^64 (not a float, not a boolean).
pub(crate) fn as_u64(value: &Value, what: &str, name: &str) -> Result<u64> {
    value
        .as_u64()
        .filter(|_| value.is_u64())
        .ok_or_else(|| FieldsError::invalid(name, format!("{what} is not a non-negative integer")))
}

/// Member `key` of `obj`, a non-negative integer.
pub(crate) fn u64_member(obj: &Map<String, Value>, key: &str, name: &str) -> Result<u64> {
    as_u64(member(obj, key, name)?, &format!("\"{key}\""), name)
}

/// A JSON object.
pub(crate) fn as_object<'a>(
    value: &'a Value,
    what: &str,
    name: &str,
) -> Result<&'a Map<String, Value>> {
    value
        .as_object()
        .ok_or_else(|| FieldsError::invalid(name, format!("{what} is not a JSON object")))
}

/// A JSON string.
pub(crate) fn as_str<'a>(value: &'a Value, what: &str, name: &str) -> Result<&'a str> {
    value
        .as_str()
        .ok_or_else(|| FieldsError::invalid(name, format!("{what} is not a string")))
}

/// Refuses members other than `allowed`.
pub(crate) fn only_members(
    obj: &Map<String, Value>,
    allowed: &[&str],
    what: &str,
    name: &str,
) -> Result<()> {
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(FieldsError::invalid(
            name,
            format!("{what} has an unknown member \"{k}\""),
        )),
        None => Ok(()),
    }
}

/// A float as JSON: a number, or `"inf"` / `"-inf"` (NaN is never stored).
pub(crate) fn float_json(v: f64) -> Value {
    if v.is_finite() {
        serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
    } else if v.is_nan() {
        Value::String("NaN".into())
    } else if v > 0.0 {
        Value::String("inf".into())
    } else {
        Value::String("-inf".into())
    }
}
