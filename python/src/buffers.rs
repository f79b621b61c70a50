//! Keys and values coming in from Python: any C-contiguous buffer, copied into
//! Rust so the GIL can be released while they are compressed and written.
//!
//! Buffers are read through `memoryview`: `memoryview(obj)`, a contiguity check,
//! `tobytes()`, which keeps Python's own checks and messages for odd exporters.
//! `bytes` objects, the common case, are copied directly.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyMemoryView, PyString, PyTuple};

/// What a buffer is used for, to name it in messages.
#[derive(Clone, Copy, Debug)]
pub enum Role {
    Key,
    Value,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Key => "key",
            Role::Value => "value",
        }
    }
}

/// The bytes of `obj`, which must support the buffer protocol and be
/// C-contiguous (bytes, bytearray, memoryview, array.array, mmap, NumPy arrays of
/// any dtype: their raw bytes). Anything else is a `TypeError`.
pub fn copy_bytes(obj: &Bound<'_, PyAny>, role: Role) -> PyResult<Vec<u8>> {
    if let Ok(bytes) = obj.cast::<PyBytes>() {
        return Ok(bytes.as_bytes().to_vec());
    }
    let view = as_view(obj, role)?;
    let copy = view.call_method0("tobytes")?;
    let bytes = copy.cast::<PyBytes>()?.as_bytes().to_vec();
    // Let go of the exporter now (a bytearray cannot be resized while viewed).
    view.call_method0("release")?;
    Ok(bytes)
}

/// Whether `obj` supports the buffer protocol at all (`collections.abc.Buffer`).
pub fn is_buffer(obj: &Bound<'_, PyAny>) -> bool {
    obj.is_instance_of::<PyBytes>()
        || obj.is_instance_of::<PyByteArray>()
        || obj.is_instance_of::<PyMemoryView>()
        || PyMemoryView::from(obj)
            .and_then(|view| view.call_method0("release"))
            .is_ok()
}

/// A C-contiguous memoryview of `obj`, or a `TypeError` that says what was wrong.
fn as_view<'py>(obj: &Bound<'py, PyAny>, role: Role) -> PyResult<Bound<'py, PyMemoryView>> {
    let py = obj.py();
    let view = match PyMemoryView::from(obj) {
        Ok(view) => view,
        Err(error) if error.is_instance_of::<PyTypeError>(py) => {
            return Err(PyTypeError::new_err(format!(
                "{} must support the buffer protocol (bytes, bytearray, memoryview, a NumPy array, ...), not {}",
                role.name(),
                type_name(obj)
            )));
        }
        Err(error) => return Err(error),
    };
    if !view.getattr("c_contiguous")?.is_truthy()? {
        view.call_method0("release")?;
        return Err(PyTypeError::new_err(format!(
            "{} must be a C-contiguous buffer, but this {} is not contiguous (a strided slice?); copy it first, e.g. with numpy.ascontiguousarray or bytes()",
            role.name(),
            type_name(obj)
        )));
    }
    Ok(view)
}

/// One entry of a keyed dataset's `extend`: a `(key, value)` pair, as a tuple or a
/// list of two buffers.
pub fn keyed_entry(entry: &Bound<'_, PyAny>) -> PyResult<(Vec<u8>, Vec<u8>)> {
    let pair = if let Ok(tuple) = entry.cast::<PyTuple>() {
        (tuple.len() == 2).then(|| (tuple.get_item(0), tuple.get_item(1)))
    } else if let Ok(list) = entry.cast::<PyList>() {
        (list.len() == 2).then(|| (list.get_item(0), list.get_item(1)))
    } else {
        None
    };
    let Some((key, value)) = pair else {
        return Err(PyTypeError::new_err(format!(
            "keyed datasets require an iterable of (key, value) pairs; got {}",
            describe(entry)
        )));
    };
    Ok((
        copy_bytes(&key?, Role::Key)?,
        copy_bytes(&value?, Role::Value)?,
    ))
}

/// One entry of a keyless dataset's `extend`: a buffer.
pub fn keyless_entry(entry: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if entry.is_instance_of::<PyTuple>() || entry.is_instance_of::<PyList>() {
        return Err(PyTypeError::new_err(format!(
            "keyless datasets require an iterable of buffers; got {} (keys need a keyed dataset: Dataset.create(path, keyed=True))",
            describe(entry)
        )));
    }
    copy_bytes(entry, Role::Value)
}

/// Refuses an `extend` argument that is one buffer or string rather than an
/// iterable of entries (iterating it would yield ints or characters).
pub fn check_not_single_buffer(entries: &Bound<'_, PyAny>) -> PyResult<()> {
    let single = entries.is_instance_of::<PyBytes>()
        || entries.is_instance_of::<PyByteArray>()
        || entries.is_instance_of::<PyMemoryView>()
        || entries.is_instance_of::<PyString>();
    if single {
        return Err(PyTypeError::new_err(format!(
            "extend takes an iterable of entries, not a single {}; wrap it in a list: extend([value])",
            type_name(entries)
        )));
    }
    Ok(())
}

/// `tuple of 3 items`, `bytes`, `int`, ... for messages.
fn describe(entry: &Bound<'_, PyAny>) -> String {
    let name = type_name(entry);
    match entry.len() {
        Ok(n) if entry.is_instance_of::<PyTuple>() || entry.is_instance_of::<PyList>() => {
            format!("a {name} of {n} items")
        }
        _ => format!("a {name}"),
    }
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|name| name.to_string())
        .unwrap_or_else(|_| "object".to_owned())
}
