//! Records with fields coming in from Python: `extend` takes dicts
//! (`{"key": ..., "value": ..., "label": 3}`) beside the reference's tuples.
//! Field values become [`FieldValue`]s: `None` null, `bool`, `int` (Int64),
//! `float` (Float64), `str`, bytes-like (Binary), lists and tuples (List), dicts
//! with string keys (Struct). Anything with `__index__` (NumPy integers) is an
//! int, anything else with `__float__` (NumPy floats) a float.

use std::sync::Arc;

use bcd_fields::{FieldValue, Fields};
use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::buffers::{self, Role};

/// Nesting beyond this is refused (a self-referencing list would recurse forever).
const MAX_DEPTH: usize = 64;

/// A record given as a dict: its key (`None` for keyless datasets), value and
/// fields. `"key"` is required for keyed datasets and refused for keyless ones;
/// `"value"` is required; every other item is a field.
pub fn dict_entry(
    dict: &Bound<'_, PyDict>,
    keyed: bool,
) -> PyResult<(Option<Vec<u8>>, Vec<u8>, Fields)> {
    let mut key = None;
    let mut value = None;
    let mut fields = Fields::new();
    for (name, item) in dict.iter() {
        let name = name.cast::<PyString>().map_err(|_| {
            let accepted = if keyed {
                "(key, value) pairs or record dicts {\"key\": ..., \"value\": ..., \"<field>\": ...}"
            } else {
                "values or record dicts {\"value\": ..., \"<field>\": ...}"
            };
            PyTypeError::new_err(format!(
                "record dicts have string keys, not {}: entries are {accepted}",
                type_name(&name)
            ))
        })?;
        let name = name.to_str()?;
        match name {
            "key" if keyed => key = Some(buffers::copy_bytes(&item, Role::Key)?),
            "key" => {
                return Err(PyTypeError::new_err(
                    "keyless datasets take no keys: a record dict has no \"key\"",
                ))
            }
            "value" => value = Some(buffers::copy_bytes(&item, Role::Value)?),
            _ => fields.push(name, field_value(&item, name, 0)?),
        }
    }
    let value = value.ok_or_else(|| PyTypeError::new_err("a record dict needs a \"value\""))?;
    if keyed && key.is_none() {
        return Err(PyTypeError::new_err(
            "keyed datasets take a \"key\" in every record dict",
        ));
    }
    Ok((key, value, fields))
}

/// Dataset metadata given to `extend(metadata=...)`: a dict with string keys
/// whose values are JSON-serialisable (through Python's `json` module).
pub fn metadata_arg(
    metadata: Option<&Bound<'_, PyAny>>,
) -> PyResult<serde_json::Map<String, serde_json::Value>> {
    let Some(metadata) = metadata.filter(|m| !m.is_none()) else {
        return Ok(serde_json::Map::new());
    };
    if !metadata.is_instance_of::<PyDict>() {
        return Err(PyTypeError::new_err(format!(
            "metadata must be a dict, not {}",
            type_name(metadata)
        )));
    }
    let json = metadata.py().import("json")?;
    // NaN and infinities are not JSON: refused here, by name.
    let kwargs = PyDict::new(metadata.py());
    kwargs.set_item("allow_nan", false)?;
    let text: String = json
        .call_method("dumps", (metadata,), Some(&kwargs))
        .map_err(|e| PyValueError::new_err(format!("metadata is not JSON-serialisable: {e}")))?
        .extract()?;
    // Exactly: an integer JSON readers would round is refused, not stored as a float.
    bcd_fields::metadata_from_json(&text, "metadata")
        .map_err(|e| PyValueError::new_err(crate::errors::message(&e)))
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

/// The [`FieldValue`] of `obj`, the value of field `name`.
pub fn field_value(obj: &Bound<'_, PyAny>, name: &str, depth: usize) -> PyResult<FieldValue> {
    if depth > MAX_DEPTH {
        return Err(PyValueError::new_err(format!(
            "field {name:?}: nested more than {MAX_DEPTH} levels deep"
        )));
    }
    if obj.is_none() {
        return Ok(FieldValue::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(FieldValue::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() || (obj.hasattr("__index__")? && !buffers::is_buffer(obj)) {
        let index = obj.call_method0("__index__")?;
        return index.extract::<i64>().map(FieldValue::Int64).map_err(|_| {
            PyOverflowError::new_err(format!(
                "field {name:?}: {} does not fit a signed 64-bit integer",
                index
                    .repr()
                    .map_or_else(|_| "the value".to_owned(), |r| r.to_string())
            ))
        });
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(FieldValue::Float64(f.value()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(FieldValue::String(s.to_str()?.to_owned()));
    }
    if buffers::is_buffer(obj) {
        return Ok(FieldValue::Binary(buffers::copy_bytes(obj, Role::Value)?));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let items = obj
            .try_iter()?
            .map(|item| field_value(&item?, name, depth + 1))
            .collect::<PyResult<Vec<_>>>()?;
        return Ok(FieldValue::List(items));
    }
    if let Ok(dict) = obj.cast::<PyDict>() {
        let mut children = Vec::with_capacity(dict.len());
        for (child, item) in dict.iter() {
            let child = child.cast::<PyString>().map_err(|_| {
                PyTypeError::new_err(format!("field {name:?}: struct fields have string names"))
            })?;
            let child: Arc<str> = child.to_str()?.into();
            children.push((child, field_value(&item, name, depth + 1)?));
        }
        return Ok(FieldValue::Struct(children));
    }
    if obj.hasattr("__float__")? {
        let f: f64 = obj.call_method0("__float__")?.extract()?;
        return Ok(FieldValue::Float64(f));
    }
    Err(PyTypeError::new_err(format!(
        "field {name:?}: a {} cannot be stored (use None, bool, int, float, str, bytes, list or dict)",
        type_name(obj)
    )))
}
