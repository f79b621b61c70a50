//! `bcd._bcd`, the native part of the Python package `bcd`: read and write
//! bitcask-dataset stores (FORMAT.md) from Python, with the Rust core.
//!
//! The Python-facing documentation is in `bcd/_bcd.pyi` and the docstrings
//! below; `bcd/__init__.py` re-exports everything.

mod args;
mod arrow_extend;
mod audio;
mod batch_read;
mod buffers;
mod dataset;
mod decode;
mod errors;
mod field_values;
mod fields_read;
mod handle;
mod images;
mod ingest;
mod merge;
mod mixture;
mod options;
mod sampling;
mod shard_views;
mod source_keywords;

use pyo3::prelude::*;

/// Native part of the `bcd` package: import `bcd`, not this module.
#[pymodule]
fn _bcd(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<dataset::PyDataset>()?;
    module.add_class::<images::PyImageOptions>()?;
    module.add_function(wrap_pyfunction!(images::decode_images, module)?)?;
    module.add_class::<audio::PyAudioOptions>()?;
    module.add_function(wrap_pyfunction!(audio::decode_audio, module)?)?;
    module.add_function(wrap_pyfunction!(ingest::ingest, module)?)?;
    module.add_function(wrap_pyfunction!(merge::merge, module)?)?;
    module.add_function(wrap_pyfunction!(merge::gc, module)?)?;
    module.add("STAGING_DIR", bcd::format::STAGING_DIR)?;
    module.add("JOB_LOCK_NAME", bcd::format::JOB_LOCK_NAME)?;
    module.add("PART_CLAIM_SUFFIX", bcd::format::PART_CLAIM_SUFFIX)?;
    module.add_function(wrap_pyfunction!(sampling::_partition, module)?)?;
    module.add_function(wrap_pyfunction!(sampling::_rank_len, module)?)?;
    module.add_function(wrap_pyfunction!(mixture::_partition_mix, module)?)?;
    module.add_function(wrap_pyfunction!(mixture::_mix_rank_len, module)?)?;
    module.add_function(wrap_pyfunction!(mixture::_mix_source_seed, module)?)?;
    module.add_function(wrap_pyfunction!(sampling::_category_codes, module)?)?;
    module.add_function(wrap_pyfunction!(sampling::_field_categories, module)?)?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    module.add(
        "DEFAULT_MAX_SHARD_SIZE",
        bcd::format::DEFAULT_MAX_SHARD_SIZE,
    )?;
    Ok(())
}
