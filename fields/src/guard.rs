//! The last guard of every decoder: a panic in Arrow's code on a hostile file
//! becomes an error naming the file instead of unwinding into the caller.
//!
//! The decoders check what they hand to Arrow first (FORMAT.md, "Fields": what
//! a reader checks), so this should never fire; the fuzz target
//! (`fuzz/fuzz_targets/fields_file.rs`) aborts on any panic, caught or not, to
//! find the ones that would.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{FieldsError, Result};

/// Runs `f`, turning a panic into an error about `what` of file `name`.
pub(crate) fn no_panic<T>(name: &str, what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    // AssertUnwindSafe: after a panic nothing `f` touched is used again; the
    // caller gets an error and the decoder's state is dropped.
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_owned());
            Err(FieldsError::invalid(
                name,
                format!("decoding {what} failed (Arrow panicked: {message})"),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_error_naming_the_file() {
        let err = no_panic::<()>("000002.fields.arrow", "the batches", || {
            panic!("index out of bounds")
        })
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "000002.fields.arrow: decoding the batches failed (Arrow panicked: index out of bounds)"
        );
        assert_eq!(no_panic("f", "x", || Ok(3)).unwrap(), 3);
    }
}
