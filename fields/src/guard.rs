//! The one panic guard: the last line of defence of every decoder, in this
//! crate (the fields, schema and statistics files) and above it (the Parquet
//! source). A panic in a dependency's code on a hostile file (Arrow's IPC
//! reader, the `parquet` crate on definition levels that disagree with their
//! page) becomes an error naming the file instead of unwinding into the caller.
//!
//! The decoders check what they hand to their dependencies first (FORMAT.md,
//! "Fields": what a reader checks), so this should rarely fire; the fuzz
//! targets abort on any panic, caught or not, to find the ones that would.
//!
//! While a guard runs, [`containing_panics`] is true on its thread, so a front
//! end's panic hook can stay quiet about a panic that is about to be reported
//! as an error (the CLI's hook does).

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{FieldsError, Result};

thread_local! {
    static CONTAINING: Cell<u32> = const { Cell::new(0) };
}

/// Whether this thread is inside [`contain_panics`]: a panic now is caught and
/// reported as an error about the file being decoded.
pub fn containing_panics() -> bool {
    CONTAINING.with(|c| c.get() > 0)
}

/// Runs `f`, returning the message of a panic in it (on one line: assertion
/// messages span several) instead of unwinding further.
pub fn contain_panics<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    // A counter, not a flag: guards nest (a Parquet source decoding a column
    // through this crate's decoders).
    CONTAINING.with(|c| c.set(c.get() + 1));
    // AssertUnwindSafe: after a panic nothing `f` touched is used again; the
    // caller gets an error and the decoder's state is dropped.
    let result = catch_unwind(AssertUnwindSafe(f));
    CONTAINING.with(|c| c.set(c.get() - 1));
    result.map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_owned())
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    })
}

/// Runs `f`, turning a panic into an error about `what` of file `name`.
pub(crate) fn no_panic<T>(name: &str, what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    contain_panics(f).unwrap_or_else(|message| {
        Err(FieldsError::invalid(
            name,
            format!("decoding {what} failed (Arrow panicked: {message})"),
        ))
    })
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

    #[test]
    fn the_thread_knows_while_a_guard_runs_even_nested() {
        assert!(!containing_panics());
        let inner = contain_panics(|| {
            let nested = contain_panics(containing_panics).unwrap();
            (nested, containing_panics())
        });
        assert_eq!(inner, Ok((true, true)));
        assert!(!containing_panics());
        let _ = contain_panics(|| panic!("multi\n  line"));
        assert!(!containing_panics());
        assert_eq!(
            contain_panics(|| -> () { panic!("a\n  b") }),
            Err("a b".to_owned())
        );
    }
}
