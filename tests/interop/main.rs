//! Byte-for-byte interoperability with the Python reference implementation,
//! bitcask-dataset 0.2.0 and 0.3.0, in both directions.
//!
//! The reference runs through `tests/python/reference.py` in the virtualenv made by
//! `bash tests/python/setup-env.sh` (`<repo>/.venv`, or `$BCD_TEST_VENV`). Without it
//! these tests fail: they never skip. Each Python process costs ~0.3 s, so every test
//! batches its work into one process per reference version and step.
//!
//! The shared parts are [`harness`] (dataset settings, the reference's steps),
//! [`corpus`] (the records) and [`checks`] (reading back, comparing directories);
//! each other module is one subject:
//!
//! * [`rust_writes`]: both reference releases read exactly what Rust writes;
//! * [`reference_writes`]: Rust reads exactly what each release writes, through
//!   every read path;
//! * [`byte_identity`]: the same records give byte-identical files and LZ4 blocks;
//! * [`alternating_writers`]: Rust and the reference take turns on one dataset;
//! * [`duplicate_keys`]: a Rust extend repeating a reference's key changes nothing;
//! * [`index_file`]: the reference extends past this project's `.bcd-index`.

mod checks;
mod corpus;
mod harness;

mod alternating_writers;
mod byte_identity;
mod duplicate_keys;
mod index_file;
mod reference_writes;
mod rust_writes;
