//! `bcd._bcd._partition` and `_rank_len`: the epoch orders of `bcd-sampling`,
//! written straight into a NumPy array without the GIL; `_category_codes` and
//! `_field_categories`: the category codes of `bcd-fields`, of pyarrow chunks or
//! of a stored field. `bcd/sampling.py` normalises the arguments (weights to
//! `float64`, user values to `uint32` codes) and documents them; this module
//! takes them as exact buffers, and its library calls check them: a setting that
//! cannot work is a `ValueError` in the library's words.

use std::ffi::CStr;
use std::ptr::NonNull;

use arrow_array::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::make_array;
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyTuple};

use bcd_fields::CategoryCodes;
use bcd_pipeline::{spell_options, CategoriesError};
use bcd_sampling::{part_len, Order, Plan, PlanError, Weights};

use crate::dataset::PyDataset;
use crate::errors::{fields_to_py, message};

/// A library message with the settings it names by field spelled as keywords
/// (`` `world_size` `` becomes `world_size=`).
fn keywords(message: &str) -> String {
    spell_options(message, |field| format!("{field}="))
}

/// A sampling error as a `ValueError`.
pub(crate) fn plan_error(error: PlanError) -> PyErr {
    PyValueError::new_err(keywords(&error.to_string()))
}

/// A read-only, C-contiguous buffer of `T` (checked), as a slice that lives as
/// long as the buffer.
pub(crate) struct Input<T: pyo3::buffer::Element> {
    buffer: PyBuffer<T>,
    data: NonNull<[T]>,
}

impl<T: pyo3::buffer::Element> Input<T> {
    pub(crate) fn get(obj: &Bound<'_, PyAny>, what: &str, dtype: &str) -> PyResult<Input<T>> {
        let buffer = PyBuffer::<T>::get(obj).map_err(|_| {
            PyTypeError::new_err(format!(
                "{what} must be a contiguous {dtype} buffer (bcd.partition converts array-likes)"
            ))
        })?;
        let data = buffer
            .as_slice_ptr()
            .ok_or_else(|| PyTypeError::new_err(format!("{what} must be C-contiguous")))?;
        Ok(Input { buffer, data })
    }

    /// The buffer's items.
    pub(crate) fn slice(&self) -> &[T] {
        let _held = &self.buffer;
        // SAFETY: the buffer's exporter keeps the memory alive and in place while
        // `self.buffer` is held (a NumPy array cannot be resized while exported).
        // The caller's contract (documented on `partition`) is that nothing writes
        // to the array during the call, which runs without the GIL.
        unsafe { self.data.as_ref() }
    }
}

/// The `weights` argument: a float64 buffer or `"inverse_frequency"`.
enum WeightsArg {
    PerRecord(Input<f64>),
    InverseFrequency,
}

fn weights_arg(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<WeightsArg>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(None);
    };
    if let Ok(text) = obj.extract::<String>() {
        return match text.as_str() {
            "inverse_frequency" => Ok(Some(WeightsArg::InverseFrequency)),
            _ => Err(PyValueError::new_err(format!(
                "weights={text:?}: expected per-record weights or \"inverse_frequency\""
            ))),
        };
    }
    Ok(Some(WeightsArg::PerRecord(Input::get(
        obj, "weights=", "float64",
    )?)))
}

/// The order `shuffle` and `block_size` ask for.
pub(crate) fn order_arg(shuffle: bool, block_size: Option<u64>) -> PyResult<Order> {
    match (shuffle, block_size) {
        (false, None) => Ok(Order::Sequential),
        (true, None) => Ok(Order::Shuffled),
        (true, Some(size)) => Ok(Order::Blocks(size)),
        (false, Some(_)) => Err(PyValueError::new_err(
            "block_size= shuffles blocks: it needs shuffle=True",
        )),
    }
}

fn categories_arg<'py>(obj: Option<&Bound<'py, PyAny>>) -> PyResult<Option<Input<u32>>> {
    match obj.filter(|c| !c.is_none()) {
        Some(obj) => Ok(Some(Input::<u32>::get(obj, "categories=", "uint32")?)),
        None => Ok(None),
    }
}

/// The settings shared by `_partition` and `_rank_len`, borrowed from the
/// buffers.
#[allow(clippy::too_many_arguments)]
fn plan<'a>(
    n: u64,
    seed: u64,
    epoch: u64,
    world_size: u64,
    order: Order,
    drop_last: bool,
    categories: Option<&'a Input<u32>>,
    weights: Option<&'a WeightsArg>,
    num_samples: Option<u64>,
    resumed_from: &'a [Vec<u64>],
) -> Plan<'a> {
    Plan {
        len: n,
        seed,
        epoch,
        world_size,
        drop_last,
        order,
        categories: categories.map(Input::slice),
        weights: weights.map(|w| match w {
            WeightsArg::PerRecord(input) => Weights::PerRecord(input.slice()),
            WeightsArg::InverseFrequency => Weights::InverseFrequency,
        }),
        num_samples,
        resumed_from,
    }
}

/// The entries each rank gets in an epoch (`m`): see `bcd.partition`. Checks
/// every setting given as `bcd.partition` does (with `rank`, that it is one of
/// the ranks), so `EpochSampler` refuses what cannot work when it is made.
#[pyfunction]
#[pyo3(signature = (n, world_size, drop_last, shuffle, block_size, categories, weights, num_samples, rank, resumed_from))]
#[allow(clippy::too_many_arguments)]
pub fn _rank_len(
    py: Python<'_>,
    n: u64,
    world_size: u64,
    drop_last: bool,
    shuffle: bool,
    block_size: Option<u64>,
    categories: Option<&Bound<'_, PyAny>>,
    weights: Option<&Bound<'_, PyAny>>,
    num_samples: Option<u64>,
    rank: Option<u64>,
    resumed_from: Option<Vec<Vec<u64>>>,
) -> PyResult<u64> {
    let resumed_from = resumed_from.unwrap_or_default();
    let order = order_arg(shuffle, block_size)?;
    let categories = categories_arg(categories)?;
    let weights = weights_arg(weights)?;
    let plan = plan(
        n,
        0,
        0,
        world_size,
        order,
        drop_last,
        categories.as_ref(),
        weights.as_ref(),
        num_samples,
        &resumed_from,
    );
    let per_rank = py.detach(|| plan.per_rank()).map_err(plan_error)?;
    if let Some(rank) = rank {
        plan.check_rank(rank).map_err(plan_error)?;
    }
    Ok(per_rank)
}

/// One rank's part of an epoch from position `start` on, as a new NumPy array of
/// `dtype` ("int64", "uint32" or "uint64"): see `bcd.partition`.
#[pyfunction]
#[pyo3(signature = (n, seed, epoch, rank, world_size, shuffle, block_size, drop_last, categories, weights, num_samples, resumed_from, start, dtype))]
#[allow(clippy::too_many_arguments)]
pub fn _partition<'py>(
    py: Python<'py>,
    n: u64,
    seed: u64,
    epoch: u64,
    rank: u64,
    world_size: u64,
    shuffle: bool,
    block_size: Option<u64>,
    drop_last: bool,
    categories: Option<&Bound<'py, PyAny>>,
    weights: Option<&Bound<'py, PyAny>>,
    num_samples: Option<u64>,
    resumed_from: Option<Vec<Vec<u64>>>,
    start: u64,
    dtype: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let resumed_from = resumed_from.unwrap_or_default();
    let order = order_arg(shuffle, block_size)?;
    let categories = categories_arg(categories)?;
    let weights = weights_arg(weights)?;
    let plan = plan(
        n,
        seed,
        epoch,
        world_size,
        order,
        drop_last,
        categories.as_ref(),
        weights.as_ref(),
        num_samples,
        &resumed_from,
    );
    let per_rank = py.detach(|| plan.per_rank()).map_err(plan_error)?;
    let len = part_len(per_rank, world_size, rank, start).map_err(plan_error)?;
    match index_dtype(dtype)? {
        IndexType::I64 => new_filled::<i64>(py, len, dtype, |out| plan.rank_into(rank, start, out)),
        IndexType::U64 => new_filled::<u64>(py, len, dtype, |out| plan.rank_into(rank, start, out)),
        IndexType::U32 => new_filled::<u32>(py, len, dtype, |out| plan.rank_into(rank, start, out)),
    }
}

/// The index types an order is written as.
pub(crate) enum IndexType {
    I64,
    U64,
    U32,
}

/// The `dtype` argument of an order.
pub(crate) fn index_dtype(dtype: &str) -> PyResult<IndexType> {
    match dtype {
        "int64" => Ok(IndexType::I64),
        "uint64" => Ok(IndexType::U64),
        "uint32" => Ok(IndexType::U32),
        _ => Err(PyValueError::new_err(format!(
            "dtype={dtype:?}: expected \"int64\", \"uint64\" or \"uint32\""
        ))),
    }
}

/// The items of a writable, C-contiguous buffer.
pub(crate) fn writable<T: pyo3::buffer::Element>(buffer: &PyBuffer<T>) -> Option<NonNull<[T]>> {
    buffer.as_slice_ptr().filter(|_| !buffer.readonly())
}

/// A new NumPy array of `len` items of `T` (NumPy's `dtype`), written by
/// `fill` without the GIL.
pub(crate) fn new_filled<'py, T: pyo3::buffer::Element + Send>(
    py: Python<'py>,
    len: u64,
    dtype: &str,
    fill: impl FnOnce(&mut [T]) -> Result<(), PlanError> + Send,
) -> PyResult<Bound<'py, PyAny>> {
    let array = py.import("numpy")?.call_method1("empty", (len, dtype))?;
    let buffer = PyBuffer::<T>::get(&array)?;
    let Some(mut data) = writable(&buffer) else {
        return Err(PyTypeError::new_err(
            "internal: the new array is not writable",
        ));
    };
    // SAFETY: `array` was just created by numpy.empty and has not been handed to
    // any Python code, so nothing else reads or writes it; `buffer` keeps it alive
    // and in place until the end of this function.
    let out = unsafe { data.as_mut() };
    py.detach(|| fill(out)).map_err(plan_error)?;
    drop(buffer);
    Ok(array)
}

const SCHEMA: &CStr = c"arrow_schema";
const ARRAY: &CStr = c"arrow_array";

/// Each row's category code (`bcd_fields::CategoryCodes`) over `chunks`, the
/// chunks of one column (objects with `__arrow_c_array__`, such as pyarrow
/// arrays), as a new `uint32` NumPy array. `what` names the column in errors.
#[pyfunction]
pub fn _category_codes<'py>(
    py: Python<'py>,
    chunks: Vec<Bound<'py, PyAny>>,
    what: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let mut arrays = Vec::with_capacity(chunks.len());
    for chunk in &chunks {
        arrays.push(import_array(chunk)?);
    }
    let Some(first) = arrays.first() else {
        return codes_array(py, &[]);
    };
    let not_codes = |error| PyValueError::new_err(keywords(&message(&error)));
    let mut codes = CategoryCodes::new(what, first.data_type()).map_err(not_codes)?;
    py.detach(|| {
        for array in &arrays {
            codes.push(array.as_ref())?;
        }
        Ok(())
    })
    .map_err(not_codes)?;
    codes_array(py, &codes.finish())
}

/// Each record's category code from the stored field `field` of `dataset`
/// (`bcd_pipeline::field_categories`, what `bcd export --balance-by` uses), as a
/// new `uint32` NumPy array.
#[pyfunction]
pub fn _field_categories<'py>(
    py: Python<'py>,
    dataset: PyRef<'py, PyDataset>,
    field: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let handle = dataset.handle(py)?;
    let codes = {
        let dataset = handle.read(py);
        let dataset: &bcd::Dataset = &dataset;
        py.detach(|| bcd_pipeline::field_categories(dataset, field))
    };
    match codes {
        Ok(codes) => codes_array(py, &codes),
        // A field without classes, a corrupt file: ValueError; the store's
        // errors as the store maps them.
        Err(CategoriesError::Fields(error)) => Err(fields_to_py(error)),
        Err(error) => Err(PyValueError::new_err(keywords(&message(&error)))),
    }
}

/// One Arrow array through the PyCapsule interface.
fn import_array(obj: &Bound<'_, PyAny>) -> PyResult<arrow_array::ArrayRef> {
    if !obj.hasattr("__arrow_c_array__")? {
        return Err(PyTypeError::new_err(format!(
            "expected an Arrow array (an object with __arrow_c_array__), got {}",
            obj.get_type().name()?
        )));
    }
    let pair = obj.call_method0("__arrow_c_array__")?;
    let pair = pair.cast::<PyTuple>()?;
    let schema = pair.get_item(0)?;
    let array = pair.get_item(1)?;
    let schema = schema.cast::<PyCapsule>()?.pointer_checked(Some(SCHEMA))?;
    let array = array.cast::<PyCapsule>()?.pointer_checked(Some(ARRAY))?;
    // SAFETY: capsules named "arrow_schema" and "arrow_array" hold an
    // ArrowSchema and an ArrowArray (the PyCapsule interface's contract). The
    // array is moved out (its capsule then releases nothing), the schema only
    // read while its capsule is alive.
    let data = unsafe {
        let array = FFI_ArrowArray::from_raw(array.as_ptr().cast());
        let schema: &FFI_ArrowSchema = &*schema.as_ptr().cast::<FFI_ArrowSchema>();
        from_ffi(array, schema)
    }
    .map_err(|e| PyValueError::new_err(format!("reading the Arrow array: {e}")))?;
    Ok(make_array(data))
}

/// `codes` as a new `uint32` NumPy array.
fn codes_array<'py>(py: Python<'py>, codes: &[u32]) -> PyResult<Bound<'py, PyAny>> {
    let array = py
        .import("numpy")?
        .call_method1("empty", (codes.len(), "uint32"))?;
    let buffer = PyBuffer::<u32>::get(&array)?;
    buffer.copy_from_slice(py, codes)?;
    Ok(array)
}
