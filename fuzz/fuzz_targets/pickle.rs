//! The plain-data unpickler: arbitrary bytes never panic, never run out of the
//! memory bound (run with `-malloc_limit_mb`: a memo entry used many times, a
//! length past the end, a deep nesting are errors, not allocations), and what
//! is read holds no more bytes than the bound.
//!
//! Input: a pickle (seeds: pickles of `fixtures/lmdb/`'s environments).
#![no_main]

use bcd_converters::pickle::{loads, Limits, Value};
use libfuzzer_sys::fuzz_target;

/// Bytes of strings and bytes, plus 16 per item, as the bound counts them.
fn size(value: &Value) -> usize {
    16 + match value {
        Value::Str(s) => s.len(),
        Value::Bytes(b) => b.len(),
        Value::List(items) | Value::Tuple(items) => items.iter().map(size).sum(),
        Value::Dict(entries) => entries.iter().map(|(k, v)| size(k) + size(v)).sum(),
        _ => 0,
    }
}

fuzz_target!(|data: &[u8]| {
    let limits = Limits::for_len(data.len());
    if let Ok(value) = loads(data, limits) {
        assert!(size(&value) <= limits.max_output);
    }
});
