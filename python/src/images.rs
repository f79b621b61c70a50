//! Image values decoded and cropped in Rust (`bcd-images`) into one batch
//! buffer, on scoped threads without the GIL: `bcd.ImageOptions`,
//! `bcd.decode_images` and `Dataset.get_images_into` (what `bcd.torch`'s
//! `image=` calls in each DataLoader worker). Where the values come from is
//! `decode.rs`'s, shared with the audio clips.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use bcd_images::{decode_many, Crop, CropKey, Failure, ImageOptions};

use crate::decode::{self, Values};
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
    decode::output(out, len, "bytes (a uint8 array or tensor)")
}

/// Decodes `values` into `buffer` (from [`output`]), value `i` with its
/// record's crop key; returns the failures as `(i, message)`, each message
/// naming the value (its slot left as it was).
pub fn decode_into(
    py: Python<'_>,
    values: &Values<'_>,
    options: &ImageOptions,
    seed: u64,
    epoch: u64,
    buffer: PyBuffer<u8>,
) -> PyResult<Vec<(usize, String)>> {
    let keys = values.keys(seed, epoch);
    let (count, value, threads) = (values.count, values.value, values.threads);
    let outcomes = decode::fill_detached(py, buffer, count * options.image_bytes(), |data| {
        decode_many(count, value, &keys, options, data, threads)
    })?;
    Ok(outcomes
        .into_iter()
        .enumerate()
        .filter_map(|(i, outcome)| {
            outcome.err().map(|failure| {
                values.failure(
                    i,
                    match failure {
                        Failure::Read(error) => error,
                        Failure::Image(error) => message(&error),
                    },
                )
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
    let options = &options.get().options;
    let buffer = output(out, values.len() * options.image_bytes())?;
    decode::from_python(&values, records, threads, |values| {
        decode_into(py, values, options, seed, epoch, buffer)
    })
}
