//! Keyword arguments shared by `Dataset` and `bcd.ingest`, parsed by the
//! pipeline's option parsers ([`bcd_pipeline::parse_lz4_mode`],
//! [`bcd_pipeline::parse_size`]) so that `level=` and `max_shard_size=` mean what
//! `bcd ingest --level` and `--max-shard-size` mean. Errors name the keyword.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyString};

use bcd::Lz4Mode;
use bcd_pipeline::{parse_lz4_mode, parse_size, InvalidValue};

/// A value the pipeline's parser refused, as a ValueError naming the keyword:
/// `level: "13": expected 1..12, fast or reference`.
pub fn invalid(keyword: &str, error: InvalidValue) -> PyErr {
    PyValueError::new_err(format!("{keyword}: {error}"))
}

/// The text an int or str option is parsed from: a str as given, an int as its
/// decimal digits (so `5` and `"5"` mean the same). A bool, an int to Python,
/// is spelled `True` or `False`, which no option accepts.
fn option_text(value: &Bound<'_, PyAny>, keyword: &str) -> PyResult<String> {
    if value.is_instance_of::<PyString>() {
        value.extract()
    } else if value.is_instance_of::<PyInt>() {
        Ok(value.str()?.to_str()?.to_owned())
    } else {
        Err(PyTypeError::new_err(format!(
            "{keyword} must be an int or a str, not {}",
            value.get_type().name()?
        )))
    }
}

/// `level=`: 1..12 (liblz4's high compression, values that do not compress stored
/// as literal-only blocks), `"fast"`, or `"reference"` (level 9 on every value,
/// the reference's bytes); `None` or absent is `default`.
pub fn lz4_mode_arg(level: Option<&Bound<'_, PyAny>>, default: Lz4Mode) -> PyResult<Lz4Mode> {
    let Some(level) = level.filter(|level| !level.is_none()) else {
        return Ok(default);
    };
    parse_lz4_mode(&option_text(level, "level")?).map_err(|error| invalid("level", error))
}

/// A size keyword other than `max_shard_size` (`cache_limit=`): a non-negative
/// int, or a size string such as `"20G"`, as `bcd ingest --max-shard-size` reads.
pub fn size_arg(value: &Bound<'_, PyAny>, keyword: &str) -> PyResult<u64> {
    if value.is_instance_of::<PyString>() {
        let text: String = value.extract()?;
        parse_size(&text).map_err(|error| invalid(keyword, error))
    } else if value.is_instance_of::<PyInt>() {
        value
            .extract::<u64>()
            .map_err(|_| PyValueError::new_err(format!("{keyword} must be in 0..2**64")))
    } else {
        Err(PyTypeError::new_err(format!(
            "{keyword} must be an int or a size string such as \"20G\", not {}",
            value.get_type().name()?
        )))
    }
}

/// `max_shard_size=`: a positive int below 2**64, or a size string such as
/// `"64M"` or `"1.5GiB"` (K/M/G/T and KiB.. are powers of 1024, KB.. of 1000).
pub fn shard_size_arg(value: &Bound<'_, PyAny>) -> PyResult<u64> {
    let size = if value.is_instance_of::<PyString>() {
        let text: String = value.extract()?;
        parse_size(&text).map_err(|error| invalid("max_shard_size", error))?
    } else if value.is_instance_of::<PyInt>() {
        if !value.gt(0)? {
            return Err(PyValueError::new_err("max_shard_size must be positive"));
        }
        value
            .extract::<u64>()
            .map_err(|_| PyValueError::new_err("max_shard_size must be below 2**64"))?
    } else {
        return Err(PyTypeError::new_err(format!(
            "max_shard_size must be an int or a size string such as \"64M\", not {}",
            value.get_type().name()?
        )));
    };
    if size == 0 {
        return Err(PyValueError::new_err("max_shard_size must be positive"));
    }
    Ok(size)
}

/// `dedup=`: `None` or `"keys"` (keys only), `"content"` (repeated values too).
pub(crate) fn dedup_arg(dedup: Option<&str>) -> PyResult<bcd::Dedup> {
    match dedup {
        None => Ok(bcd::Dedup::Keys),
        Some(text) => bcd_pipeline::parse_dedup(text).map_err(|error| invalid("dedup", error)),
    }
}

/// `memory_limit=`: bytes as an int or a size string (`"4G"`), or `None`.
pub(crate) fn memory_limit_arg(limit: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u64>> {
    limit
        .filter(|l| !l.is_none())
        .map(|l| size_arg(l, "memory_limit"))
        .transpose()
}
