//! Image values decoded and cropped in Rust (`bcd-images`) into one batch
//! buffer, on scoped threads without the GIL: `bcd.ImageOptions`,
//! `bcd.decode_images` and `Dataset.get_images_into` (what `bcd.torch`'s
//! `image=` calls in each DataLoader worker).

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use bcd::Dataset;
use bcd_images::{decode_many, Crop, CropKey, Failure, ImageOptions, ValueFn};

use crate::errors::message;

/// What to make of each image value: ImageOptions(size, *, crop="random_resized",
/// scale=None, ratio=None, resize=None, flip=None, channels_first=False,
/// dct_scaling=True). `crop` is "random_resized" (torchvision's
/// RandomResizedCrop: scale (0.08, 1.0), ratio (3/4, 4/3)), "center" (Resize(resize)
/// then CenterCrop(size); resize defaults to size / 0.875) or "resize" (the
/// whole image); a random horizontal flip by default with random crops. Checked
/// here: a ValueError or TypeError names the keyword.
#[pyclass(module = "bcd", name = "ImageOptions", frozen)]
pub struct PyImageOptions {
    pub options: ImageOptions,
}

/// The crop keywords of `ImageOptions` an options value was made with (for
/// pickling).
struct CropKeywords {
    crop: &'static str,
    scale: Option<(f64, f64)>,
    ratio: Option<(f64, f64)>,
    resize: Option<u32>,
}

fn crop_keywords(options: &ImageOptions) -> CropKeywords {
    let (crop, scale, ratio, resize) = match options.crop {
        Crop::RandomResized { scale, ratio } => ("random_resized", Some(scale), Some(ratio), None),
        Crop::Center { resize } => ("center", None, None, Some(resize)),
        Crop::Resize => ("resize", None, None, None),
    };
    CropKeywords {
        crop,
        scale,
        ratio,
        resize,
    }
}

#[pymethods]
impl PyImageOptions {
    #[new]
    #[pyo3(signature = (size, *, crop = "random_resized", scale = None, ratio = None, resize = None, flip = None, channels_first = false, dct_scaling = true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        size: &Bound<'_, PyAny>,
        crop: &str,
        scale: Option<(f64, f64)>,
        ratio: Option<(f64, f64)>,
        resize: Option<u32>,
        flip: Option<bool>,
        channels_first: bool,
        dct_scaling: bool,
    ) -> PyResult<Self> {
        let size = match size.extract::<u32>() {
            Ok(side) => (side, side),
            Err(_) => size.extract::<(u32, u32)>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "size: {}: expected an int or a (height, width) pair",
                    size.repr().map(|r| r.to_string()).unwrap_or_default()
                ))
            })?,
        };
        let refuse = |option: &str| {
            Err(PyValueError::new_err(format!(
                "{option}: applies only to crop=\"{}\"",
                if option == "resize" {
                    "center"
                } else {
                    "random_resized"
                }
            )))
        };
        let crop = match crop {
            "random_resized" => {
                if resize.is_some() {
                    return refuse("resize");
                }
                Crop::RandomResized {
                    scale: scale.unwrap_or((0.08, 1.0)),
                    ratio: ratio.unwrap_or((3.0 / 4.0, 4.0 / 3.0)),
                }
            }
            "center" | "resize" => {
                if scale.is_some() {
                    return refuse("scale");
                }
                if ratio.is_some() {
                    return refuse("ratio");
                }
                if crop == "center" {
                    // torchvision's evaluation recipe: Resize(256) for 224, the
                    // crop taking 0.875 of the shorter side.
                    let longer = size.0.max(size.1);
                    Crop::Center {
                        resize: resize.unwrap_or((f64::from(longer) / 0.875) as u32),
                    }
                } else {
                    if resize.is_some() {
                        return Err(PyValueError::new_err(
                            "resize: applies only to crop=\"center\"",
                        ));
                    }
                    Crop::Resize
                }
            }
            other => {
                return Err(PyValueError::new_err(format!(
                    "crop: {other:?}: expected \"random_resized\", \"center\" or \"resize\""
                )))
            }
        };
        // A random flip is the training default; evaluation crops do not flip.
        let flip = flip.unwrap_or(matches!(crop, Crop::RandomResized { .. }));
        let options = ImageOptions {
            size,
            crop,
            flip,
            channels_first,
            dct_scaling,
        };
        options
            .validate()
            .map_err(|e| PyValueError::new_err(format!("{}: {}", e.option, e.reason)))?;
        Ok(PyImageOptions { options })
    }

    /// The shape of one image: `(height, width, 3)`, or `(3, height, width)`.
    #[getter]
    fn shape(&self) -> (usize, usize, usize) {
        let (h, w) = (self.options.size.0 as usize, self.options.size.1 as usize);
        if self.options.channels_first {
            (3, h, w)
        } else {
            (h, w, 3)
        }
    }

    /// Bytes of one image.
    #[getter]
    fn image_bytes(&self) -> usize {
        self.options.image_bytes()
    }

    #[getter]
    fn size(&self) -> (u32, u32) {
        self.options.size
    }

    #[getter]
    fn crop(&self) -> &'static str {
        crop_keywords(&self.options).crop
    }

    #[getter]
    fn flip(&self) -> bool {
        self.options.flip
    }

    #[getter]
    fn channels_first(&self) -> bool {
        self.options.channels_first
    }

    /// The box kept from a `width` x `height` image for record `record` of
    /// epoch `epoch` under `seed`: `(left, top, width, height, flipped)` in the
    /// image's pixels (fractional for `crop="center"`).
    #[pyo3(signature = (width, height, *, seed = 0, epoch = 0, record = 0))]
    fn crop_box(
        &self,
        width: u32,
        height: u32,
        seed: u64,
        epoch: u64,
        record: u64,
    ) -> PyResult<(f64, f64, f64, f64, bool)> {
        if width == 0 || height == 0 {
            return Err(PyValueError::new_err(format!(
                "an image of {width} x {height} pixels has no box"
            )));
        }
        let b = bcd_images::crop_box(
            &self.options,
            width,
            height,
            CropKey {
                seed,
                epoch,
                record,
            },
        );
        Ok((b.x, b.y, b.width, b.height, b.flip))
    }

    /// Pickles as its keyword arguments (DataLoader workers started by spawn).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let options = &slf.get().options;
        let CropKeywords {
            crop,
            scale,
            ratio,
            resize,
        } = crop_keywords(options);
        let kwargs = PyDict::new(py);
        kwargs.set_item("crop", crop)?;
        kwargs.set_item("scale", scale)?;
        kwargs.set_item("ratio", ratio)?;
        kwargs.set_item("resize", resize)?;
        kwargs.set_item("flip", options.flip)?;
        kwargs.set_item("channels_first", options.channels_first)?;
        kwargs.set_item("dct_scaling", options.dct_scaling)?;
        // functools.partial(ImageOptions, size, **kwargs)() rebuilds it.
        let partial = py.import("functools")?.getattr("partial")?;
        let build = partial.call((slf.get_type(), options.size), Some(&kwargs))?;
        Ok(PyTuple::new(py, [build, PyTuple::empty(py).into_any()])?.into_any())
    }

    fn __repr__(&self) -> String {
        let o = &self.options;
        let crop = match o.crop {
            Crop::RandomResized { scale, ratio } => {
                format!("crop=\"random_resized\", scale={scale:?}, ratio={ratio:?}")
            }
            Crop::Center { resize } => format!("crop=\"center\", resize={resize}"),
            Crop::Resize => "crop=\"resize\"".into(),
        };
        format!(
            "bcd.ImageOptions(size={:?}, {crop}, flip={}, channels_first={}, dct_scaling={})",
            o.size,
            if o.flip { "True" } else { "False" },
            if o.channels_first { "True" } else { "False" },
            if o.dct_scaling { "True" } else { "False" }
        )
    }
}

/// The writable, C-contiguous buffer `out`, at least `len` bytes (taken before
/// any lock: an exporter is the caller's code).
pub fn output(out: &Bound<'_, PyAny>, len: usize) -> PyResult<PyBuffer<u8>> {
    let buffer = PyBuffer::<u8>::get(out).map_err(|_| {
        PyTypeError::new_err(
            "out: expected a writable, C-contiguous buffer of bytes (a uint8 array or tensor)",
        )
    })?;
    if buffer.readonly() || !buffer.is_c_contiguous() || buffer.len_bytes() < len {
        return Err(PyValueError::new_err(format!(
            "out: expected a writable, C-contiguous buffer of at least {len} bytes, got {} bytes{}",
            buffer.len_bytes(),
            if buffer.readonly() { ", read-only" } else { "" }
        )));
    }
    Ok(buffer)
}

/// Decodes `count` values (`value(i)`) into `buffer` (from [`output`]), image
/// `i` with record `records[i]`'s key; returns the failures as `(i, message)`,
/// each message naming the record through `name`.
#[allow(clippy::too_many_arguments)]
fn decode_into_buffer<E: Send + std::fmt::Display>(
    py: Python<'_>,
    count: usize,
    value: &ValueFn<'_, E>,
    records: &[u64],
    options: &ImageOptions,
    seed: u64,
    epoch: u64,
    buffer: PyBuffer<u8>,
    threads: usize,
    name: &dyn Fn(usize) -> String,
) -> PyResult<Vec<(usize, String)>> {
    let len = count * options.image_bytes();
    if buffer.len_bytes() < len {
        return Err(PyValueError::new_err(format!(
            "out: {} bytes for {len}",
            buffer.len_bytes()
        )));
    }
    let keys: Vec<CropKey> = records
        .iter()
        .map(|&record| CropKey {
            seed,
            epoch,
            record,
        })
        .collect();
    // SAFETY: the exporter keeps the memory alive and in place while `buffer`
    // is held (to the end of this function), it is writable and C-contiguous
    // (checked above), and the documented contract is that nothing else uses it
    // during the call.
    let data = unsafe { std::slice::from_raw_parts_mut(buffer.buf_ptr().cast::<u8>(), len) };
    let outcomes = py.detach(|| decode_many(count, value, &keys, options, data, threads));
    drop(buffer);
    Ok(outcomes
        .into_iter()
        .enumerate()
        .filter_map(|(i, outcome)| {
            outcome.err().map(|failure| {
                let why = match failure {
                    Failure::Read(error) => error.to_string(),
                    Failure::Image(error) => message(&error),
                };
                (i, format!("{}: {why}", name(i)))
            })
        })
        .collect())
}

/// decode_images(values, out, options, *, seed=0, epoch=0, records=None, threads=None):
/// decodes image values (JPEG or PNG bytes) into `out` (a writable uint8 buffer
/// of len(values) * options.image_bytes bytes) as `options` says, on `threads`
/// threads (all cores by default) without the GIL; value i draws its crop from
/// (seed, epoch, records[i]), records defaulting to 0..len(values). Returns the
/// failures as (i, message); their slots are left as they were.
#[pyfunction]
#[pyo3(signature = (values, out, options, *, seed = 0, epoch = 0, records = None, threads = None))]
#[allow(clippy::too_many_arguments)]
pub fn decode_images(
    py: Python<'_>,
    values: Vec<PyBuffer<u8>>,
    out: &Bound<'_, PyAny>,
    options: &Bound<'_, PyImageOptions>,
    seed: u64,
    epoch: u64,
    records: Option<Vec<u64>>,
    threads: Option<usize>,
) -> PyResult<Vec<(usize, String)>> {
    let records = checked_records(records, values.len())?;
    let slices = value_slices(&values)?;
    let value = |i: usize, _: &mut Vec<u8>, with: &mut dyn FnMut(&[u8])| {
        with(slices[i]);
        Ok::<_, std::convert::Infallible>(())
    };
    let threads = threads_or_cores(threads);
    let options = &options.get().options;
    let buffer = output(out, values.len() * options.image_bytes())?;
    decode_into_buffer(
        py,
        values.len(),
        &value,
        &records,
        options,
        seed,
        epoch,
        buffer,
        threads,
        &|i| format!("values[{i}] (record {})", records[i]),
    )
}

/// `Dataset.get_images_into`: the values at `indices` (in range) decoded into
/// `out`, each read by the thread that decodes it: through the mapping (LZ4
/// values stored verbatim are not copied), or with `positional` by a
/// positional read of the shard's file into the thread's scratch space
/// (nothing mapped: a DataLoader worker's memory does not grow with the
/// shards it reads).
#[allow(clippy::too_many_arguments)]
pub fn dataset_images_into(
    py: Python<'_>,
    dataset: &Dataset,
    indices: &[usize],
    buffer: PyBuffer<u8>,
    options: &ImageOptions,
    seed: u64,
    epoch: u64,
    threads: usize,
    positional: bool,
) -> PyResult<Vec<(usize, String)>> {
    let records: Vec<u64> = indices.iter().map(|&i| i as u64).collect();
    let value = |i: usize, stored: &mut Vec<u8>, with: &mut dyn FnMut(&[u8])| {
        let read = if positional {
            dataset.at_unmapped(indices[i], stored)
        } else {
            dataset.at(indices[i])
        };
        with(&read.map_err(|e| crate::errors::message(&e))?);
        Ok::<_, String>(())
    };
    let path = dataset.path().display().to_string();
    decode_into_buffer(
        py,
        indices.len(),
        &value,
        &records,
        options,
        seed,
        epoch,
        buffer,
        threads,
        &|i| record_name(dataset, &path, indices[i]),
    )
}

/// `PATH: record N (key K)`, how a failure names a dataset's record.
pub fn record_name(dataset: &Dataset, path: &str, index: usize) -> String {
    match dataset
        .keyed()
        .then(|| dataset.key_at(index).ok())
        .flatten()
    {
        Some(key) => format!(
            "{path}: record {index} (key {:?})",
            String::from_utf8_lossy(key)
        ),
        None => format!("{path}: record {index}"),
    }
}

/// The records values are keyed by: `records`, one per value, or `0..count`.
pub fn checked_records(records: Option<Vec<u64>>, count: usize) -> PyResult<Vec<u64>> {
    let records = records.unwrap_or_else(|| (0..count as u64).collect());
    if records.len() != count {
        return Err(PyValueError::new_err(format!(
            "records: {} for {count} values: expected one per value",
            records.len()
        )));
    }
    Ok(records)
}

/// The bytes of each buffer of `values` (held by the caller while the slices
/// are used), each checked to be contiguous.
pub fn value_slices(values: &[PyBuffer<u8>]) -> PyResult<Vec<&[u8]>> {
    let mut slices = Vec::with_capacity(values.len());
    for (i, value) in values.iter().enumerate() {
        if !value.is_c_contiguous() {
            return Err(PyValueError::new_err(format!(
                "values[{i}]: expected a C-contiguous buffer"
            )));
        }
        // SAFETY: each buffer is held by the caller (in `values`, borrowed for
        // the slices' lifetime), contiguous, and only read.
        slices.push(unsafe {
            std::slice::from_raw_parts(value.buf_ptr().cast::<u8>(), value.len_bytes())
        });
    }
    Ok(slices)
}

/// `threads`, or every core.
pub fn threads_or_cores(threads: Option<usize>) -> usize {
    threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
