//! `bcd._bcd._partition_mix` and `_mix_rank_len`: the epochs of
//! `bcd_sampling::Mixture`, written straight into NumPy arrays without the GIL.
//! `bcd/mixture.py` documents them and checks only that arguments are ints and
//! arrays one-dimensional; the library checks the settings.

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use bcd_sampling::{part_len, Index, Mixture, PlanError};

use crate::sampling::{index_dtype, new_filled, order_arg, plan_error, IndexType, Input};

/// The mixture the arguments describe, borrowed from them.
#[allow(clippy::too_many_arguments)]
fn mixture<'a>(
    lengths: &'a [u64],
    weights: &'a Input<f64>,
    num_samples: Option<u64>,
    seed: u64,
    epoch: u64,
    world_size: u64,
    drop_last: bool,
    shuffle: bool,
    block_size: Option<u64>,
    resumed_from: &'a [Vec<u64>],
) -> PyResult<Mixture<'a>> {
    Ok(Mixture {
        num_samples,
        seed,
        epoch,
        world_size,
        drop_last,
        order: order_arg(shuffle, block_size)?,
        resumed_from,
        ..Mixture::new(lengths, weights.slice())
    })
}

/// The seed of the image crops of a mixture's source `source`:
/// `stream_key(seed, 0, MixSource, source)`, the key of that source's first
/// pass (`bcd.torch.Mix` with sources that decode images).
#[pyfunction]
pub fn _mix_source_seed(seed: u64, source: u64) -> u64 {
    bcd_sampling::rng::stream_key(seed, 0, bcd_sampling::rng::Purpose::MixSource, source)
}

/// The samples each rank of a mixture's epoch gets (`m`): see
/// `bcd.partition_mix`. Checks every setting as `_partition_mix` does (with
/// `rank`, that it is one of the ranks).
#[pyfunction]
#[pyo3(signature = (lengths, weights, num_samples, world_size, drop_last, shuffle, block_size, resumed_from, rank))]
#[allow(clippy::too_many_arguments)]
pub fn _mix_rank_len(
    py: Python<'_>,
    lengths: Vec<u64>,
    weights: &Bound<'_, PyAny>,
    num_samples: Option<u64>,
    world_size: u64,
    drop_last: bool,
    shuffle: bool,
    block_size: Option<u64>,
    resumed_from: Option<Vec<Vec<u64>>>,
    rank: Option<u64>,
) -> PyResult<u64> {
    let resumed_from = resumed_from.unwrap_or_default();
    let weights = Input::<f64>::get(weights, "weights=", "float64")?;
    let mix = mixture(
        &lengths,
        &weights,
        num_samples,
        0,
        0,
        world_size,
        drop_last,
        shuffle,
        block_size,
        &resumed_from,
    )?;
    let per_rank = py.detach(|| mix.per_rank()).map_err(plan_error)?;
    if let Some(rank) = rank {
        part_len(per_rank, world_size, rank, 0).map_err(plan_error)?;
    }
    Ok(per_rank)
}

/// One rank's part of a mixture's epoch from position `start` on: a new NumPy
/// array of `dtype` of indices in the sources' common index space, or with
/// `pairs` a tuple `(sources, records)`: each sample's source (`uint8`,
/// `uint16` or `uint32`, the narrowest that holds the sources) and its record in
/// that source (`dtype`). See `bcd.partition_mix`.
#[pyfunction]
#[pyo3(signature = (lengths, weights, num_samples, seed, epoch, rank, world_size, shuffle, block_size, drop_last, resumed_from, start, dtype, pairs))]
#[allow(clippy::too_many_arguments)]
pub fn _partition_mix<'py>(
    py: Python<'py>,
    lengths: Vec<u64>,
    weights: &Bound<'py, PyAny>,
    num_samples: Option<u64>,
    seed: u64,
    epoch: u64,
    rank: u64,
    world_size: u64,
    shuffle: bool,
    block_size: Option<u64>,
    drop_last: bool,
    resumed_from: Option<Vec<Vec<u64>>>,
    start: u64,
    dtype: &str,
    pairs: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let resumed_from = resumed_from.unwrap_or_default();
    let weights = Input::<f64>::get(weights, "weights=", "float64")?;
    let mix = mixture(
        &lengths,
        &weights,
        num_samples,
        seed,
        epoch,
        world_size,
        drop_last,
        shuffle,
        block_size,
        &resumed_from,
    )?;
    let per_rank = py.detach(|| mix.per_rank()).map_err(plan_error)?;
    let len = part_len(per_rank, world_size, rank, start).map_err(plan_error)?;
    let index_type = index_dtype(dtype)?;
    let records = match index_type {
        IndexType::I64 => new_filled::<i64>(py, len, dtype, |out| mix.rank_into(rank, start, out)),
        IndexType::U64 => new_filled::<u64>(py, len, dtype, |out| mix.rank_into(rank, start, out)),
        IndexType::U32 => new_filled::<u32>(py, len, dtype, |out| mix.rank_into(rank, start, out)),
    }?;
    if !pairs {
        return Ok(records);
    }
    let offsets = mix.offsets().map_err(plan_error)?;
    let sources = match lengths.len() {
        0..=256 => split::<u8>(py, &records, &index_type, &offsets, "uint8"),
        257..=65536 => split::<u16>(py, &records, &index_type, &offsets, "uint16"),
        _ => split::<u32>(py, &records, &index_type, &offsets, "uint32"),
    }?;
    Ok(PyTuple::new(py, [sources, records])?.into_any())
}

/// A source number in a NumPy array of sources.
trait SourceNumber: pyo3::buffer::Element + Send + Copy {
    fn from_source(source: usize) -> Self;
}

impl SourceNumber for u8 {
    fn from_source(source: usize) -> u8 {
        source as u8
    }
}

impl SourceNumber for u16 {
    fn from_source(source: usize) -> u16 {
        source as u16
    }
}

impl SourceNumber for u32 {
    fn from_source(source: usize) -> u32 {
        source as u32
    }
}

/// Splits the indices of `records` (a new array of `index_type`, not yet seen
/// by Python code) into their sources, returned as a new array of `S`, and their
/// records within the sources, written back into `records`.
fn split<'py, S: SourceNumber>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    index_type: &IndexType,
    offsets: &[u64],
    dtype: &str,
) -> PyResult<Bound<'py, PyAny>> {
    match index_type {
        IndexType::I64 => split_as::<S, i64>(py, records, offsets, dtype),
        IndexType::U64 => split_as::<S, u64>(py, records, offsets, dtype),
        IndexType::U32 => split_as::<S, u32>(py, records, offsets, dtype),
    }
}

fn split_as<'py, S: SourceNumber, I: Index + pyo3::buffer::Element>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    offsets: &[u64],
    dtype: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let buffer = pyo3::buffer::PyBuffer::<I>::get(records)?;
    let Some(mut data) = crate::sampling::writable(&buffer) else {
        return Err(pyo3::exceptions::PyTypeError::new_err(
            "internal: the new array is not writable",
        ));
    };
    // SAFETY: `records` was made by `new_filled` in this call and has not been
    // handed to any Python code; `buffer` keeps it alive and in place.
    let indices = unsafe { data.as_mut() };
    new_filled::<S>(py, indices.len() as u64, dtype, |sources| {
        for (index, source) in indices.iter_mut().zip(sources.iter_mut()) {
            let (s, record) =
                Mixture::source_of(offsets, index.to_u64()).ok_or(PlanError::SourcesTotal)?;
            *source = S::from_source(s);
            *index = I::from_u64(record);
        }
        Ok(())
    })
}
