//! Bad input never panics, and round trips hold.
//!
//! * `manifest_*`: `Manifest::parse` on arbitrary bytes, on structurally plausible
//!   manifests and on mutated valid ones never panics, and every error names the file.
//! * `mutated_dataset_*`: small valid datasets (keyed/keyless, lz4/none, several shards,
//!   a 0.2.0 manifest, an empty dataset) get arbitrary mutations (bit flips, overwritten
//!   bytes and index sizes, truncation, appended bytes, whole files replaced, files
//!   deleted, the manifest rewritten). An independent model of the format, reading the
//!   files itself, decides whether `Dataset::open` must succeed and, if not, which file
//!   it must name; if it opens, every read API is exercised and checked against the
//!   model, and every `CorruptValue` must name the shard file and record.
//! * `refresh_*`: the same for `Dataset::refresh` picking up shards another writer
//!   committed (some of them damaged); a failed refresh leaves the handle unchanged.
//! * `lz4_*`: `declared_len`/`decompress`/`decompress_into` never panic on arbitrary or
//!   mutated input, never declare more than `255 * (len - 4) + 64` bytes, and
//!   compress -> decompress round trips in every mode.
//! * `round_trip_*`: random records in one or several extends with a small
//!   `max_shard_size` read back identically, and land in exactly the shards an
//!   independent model of the sharding rule predicts, byte for byte.
//!
//! Modules: [`edits`] (byte edits and manifest strategies) and [`model`] (the
//! independent model) serve [`manifest`] (a), [`bases`] builds the small valid
//! datasets that [`mutated_dataset`] (b) and [`refresh`] (b') damage, and [`lz4`]
//! (c) and [`round_trip`] (d) stand alone.
//!
//! Proptest keeps the seeds of past failures beside each module, in
//! `<module>.proptest-regressions` (see [`config`]), and re-runs them first.

use proptest::test_runner::{Config, FileFailurePersistence};

mod bases;
mod edits;
mod model;

mod lz4;
mod manifest;
mod mutated_dataset;
mod refresh;
mod round_trip;

pub const MANIFEST: &str = bcd::format::MANIFEST_NAME;
pub const MAX_MANIFEST_BYTES: usize = bcd::format::MAX_MANIFEST_BYTES as usize;

pub fn shard_name(id: u64, ext: &str) -> String {
    format!("{id:06}.{ext}")
}

/// `cases` for a test, unless `PROPTEST_CASES` asks for more or fewer (for a deeper
/// one-off run: `PROPTEST_CASES=5000 cargo test --release --test corrupt_input`).
pub fn config(cases: u32) -> Config {
    Config {
        cases: bcd_test_support::proptest_cases(cases),
        // Shrinking file-system cases is slow; keep it bounded.
        max_shrink_iters: 2048,
        // Beside the source file of the test, as `<module>.proptest-regressions`.
        // (The default looks for a sibling `proptest-regressions/` directory of
        // the directory holding `main.rs`, i.e. `tests/proptest-regressions/`,
        // shared by every test binary and named after the module alone.)
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..Config::default()
    }
}
