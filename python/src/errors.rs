//! The store's errors as the Python exceptions a user would expect, carrying the
//! core's message (which names the file and the shard, record or byte offset).

use std::io;

use pyo3::exceptions::{
    PyBlockingIOError, PyFileExistsError, PyFileNotFoundError, PyIndexError, PyKeyError, PyOSError,
    PyRuntimeError, PyTypeError, PyValueError,
};
use pyo3::{PyErr, Python};

/// Converts a core error into a Python exception:
///
/// | core error | Python exception |
/// | --- | --- |
/// | no manifest.json, a missing shard file | `FileNotFoundError` |
/// | `create` in a non-empty directory | `FileExistsError` |
/// | an invalid manifest, a corrupt shard, value or persisted index, a duplicate key, an invalid option, a too-large record, fields a merge refused (a type conflict between parts) | `ValueError` |
/// | an invalid, corrupt or stale view | `ValueError` |
/// | no view of that name | `KeyError` |
/// | a view of that name exists | `FileExistsError` |
/// | an index past either end | `IndexError` |
/// | a key operation on a keyless dataset | `TypeError` |
/// | the writer lock is held | `BlockingIOError` |
/// | an operating-system failure | `OSError` (the subclass its errno selects) |
/// | the dataset changed on disk, a failed extend reused, an extend inherited by a forked child, an extend committed but not loaded by this handle | `RuntimeError` |
pub fn to_py(error: bcd::Error) -> PyErr {
    use bcd::Error as E;
    let message = message(&error);
    match &error {
        E::Io { source, .. } | E::CommittedNotDurable { source, .. } => os_error(source, message),
        E::NotADataset { .. } | E::MissingShard { .. } => {
            PyFileNotFoundError::new_err((ENOENT, message))
        }
        E::DirectoryNotEmpty { .. } | E::ForeignFile { .. } => {
            PyFileExistsError::new_err((EEXIST, message))
        }
        E::InvalidManifest { .. }
        | E::CorruptShard { .. }
        | E::CorruptIndexFile { .. }
        | E::CorruptValue { .. }
        | E::ContentMismatch { .. }
        | E::NoContentHashes { .. }
        | E::CorruptContentHashes { .. }
        | E::DuplicateKeyInDataset { .. }
        | E::DuplicateKey { .. }
        | E::DuplicateKeyInMerge { .. }
        | E::MergePart { .. }
        | E::TooLarge { .. }
        | E::CorruptView { .. }
        | E::StaleView { .. }
        | E::InvalidViewName { .. }
        | E::InvalidOption(_) => PyValueError::new_err(message),
        E::NoSuchView { .. } => PyKeyError::new_err(message),
        E::ViewExists { .. } => PyFileExistsError::new_err((EEXIST, message)),
        E::IndexOutOfRange { .. } => PyIndexError::new_err(message),
        E::WrongKeying(_) => PyTypeError::new_err(message),
        E::Locked { .. } => PyBlockingIOError::new_err((EAGAIN, message)),
        // A merge's fields hook refusing the parts' fields (a type conflict
        // between them) is the same error as an extend's: a `ValueError`.
        E::Hook { source, .. } if refused_fields(source.as_ref()) => PyValueError::new_err(message),
        _ => PyRuntimeError::new_err(message),
    }
}

/// Whether a hook failed because fields were refused (not because the store or
/// the file system failed).
fn refused_fields(source: &(dyn std::error::Error + 'static)) -> bool {
    matches!(
        source.downcast_ref::<bcd_pipeline::fields::FieldsIoError>(),
        Some(bcd_pipeline::fields::FieldsIoError::Fields(_))
    )
}

/// A fields error as a Python exception: the store's as [`to_py`] maps them, a
/// refused field (a type conflict, a wrong value) or a corrupt file of fields
/// as `ValueError`.
pub fn fields_to_py(error: bcd_pipeline::fields::FieldsIoError) -> PyErr {
    match error {
        bcd_pipeline::fields::FieldsIoError::Store(e) => to_py(e),
        other => PyValueError::new_err(message(&other)),
    }
}

/// A view error as a Python exception: the store's and the fields' as
/// [`to_py`] and [`fields_to_py`] map them, an expression naming a missing
/// field or comparing types that cannot be compared (and a view without one to
/// refresh with, a key that is not text) a `ValueError`, indices out of range
/// an `IndexError`.
pub fn view_to_py(error: bcd_pipeline::views::ViewError) -> PyErr {
    use bcd_pipeline::views::ViewError as E;
    match error {
        E::Store(e) => to_py(e),
        E::Fields(e) => fields_to_py(e),
        E::Indices { .. } => PyIndexError::new_err(message(&error)),
        other => PyValueError::new_err(message(&other)),
    }
}

/// Converts an object-storage error into a Python exception: a URI that cannot be
/// used is a `ValueError`, a prefix without a dataset a `FileNotFoundError`, a
/// concurrent writer's commit or a dataset that differs a `RuntimeError`, a
/// failed request an `OSError`, and the local store's errors as [`to_py`] says.
pub fn remote_to_py(error: bcd_remote::RemoteError) -> PyErr {
    use bcd_remote::RemoteError as E;
    let text = message(&error);
    match error {
        E::Local(error) => to_py(error),
        E::UnsupportedScheme { .. } | E::InvalidUri { .. } | E::RemoteNotSupported { .. } => {
            PyValueError::new_err(text)
        }
        E::NotADataset { .. } => PyFileNotFoundError::new_err((ENOENT, text)),
        E::Corrupt { .. } => PyValueError::new_err(text),
        E::Io { ref source, .. } => os_error(source, text),
        E::Interrupted => PyRuntimeError::new_err(text),
        E::Conflict { .. } | E::Diverged { .. } => PyRuntimeError::new_err(text),
        _ => PyOSError::new_err(text),
    }
}

/// An error and its causes (its `source()` chain), joined by ": ": the core's
/// errors print their own message only and chain their cause, and a Python
/// exception's message carries both.
pub fn message(error: &(dyn std::error::Error + 'static)) -> String {
    bcd_pipeline::error_chain(error)
}

/// `OSError(errno, message)`: Python picks the subclass from the errno
/// (`FileNotFoundError`, `PermissionError`, ...), and `str()` shows the message
/// (the whole chain). Its `__cause__` is the operating system's error alone.
pub fn os_error(source: &io::Error, message: String) -> PyErr {
    let (error, cause) = match source.raw_os_error() {
        Some(errno) => (
            PyOSError::new_err((errno, message)),
            PyOSError::new_err((errno, source.to_string())),
        ),
        None => (
            PyOSError::new_err(message),
            PyOSError::new_err(source.to_string()),
        ),
    };
    Python::attach(|py| error.set_cause(py, Some(cause)));
    error
}

// The errno values that make Python pick these subclasses; ENOENT and EEXIST are the
// same on every platform. BlockingIOError is raised explicitly, so its errno is
// informative only.
const ENOENT: i32 = 2;
const EEXIST: i32 = 17;
#[cfg(any(target_os = "linux", windows))]
const EAGAIN: i32 = 11;
#[cfg(not(any(target_os = "linux", windows)))]
const EAGAIN: i32 = 35;
