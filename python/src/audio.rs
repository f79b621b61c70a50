//! Audio values (WAV files) decoded in Rust (`bcd-images`' audio) into one
//! float32 batch buffer, on scoped threads without the GIL: `bcd.AudioOptions`,
//! `bcd.decode_audio` and `Dataset.get_audio_into` (what `bcd.torch`'s
//! `audio=` calls in each DataLoader worker).

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use bcd_images::{decode_audio_many, AudioCrop, AudioFailure, AudioOptions};

use crate::decode::{self, Values};
use crate::errors::message;

/// What to make of each audio value: AudioOptions(frames, *, channels=1,
/// crop="random", sample_rate=None). Each WAV clip becomes `channels x frames`
/// float32 samples in [-1, 1): cut to `frames` ("random": from an offset drawn
/// from the record's (seed, epoch); "start"; "center"), zero-padded when
/// shorter; with channels=1 a clip of several channels is mixed down.
/// `sample_rate`, when given, is the rate every clip must have (clips are not
/// resampled). Checked here: a ValueError names the keyword.
#[pyclass(module = "bcd", name = "AudioOptions", frozen)]
pub struct PyAudioOptions {
    pub options: AudioOptions,
}

fn crop_name(crop: AudioCrop) -> &'static str {
    match crop {
        AudioCrop::Start => "start",
        AudioCrop::Center => "center",
        AudioCrop::Random => "random",
    }
}

#[pymethods]
impl PyAudioOptions {
    #[new]
    #[pyo3(signature = (frames, *, channels = 1, crop = "random", sample_rate = None))]
    fn new(frames: i64, channels: i64, crop: &str, sample_rate: Option<i64>) -> PyResult<Self> {
        let frames = u32::try_from(frames).map_err(|_| {
            PyValueError::new_err(format!(
                "frames: {frames}: expected 1 to {}",
                bcd_images::MAX_FRAMES
            ))
        })?;
        let channels = u16::try_from(channels).map_err(|_| {
            PyValueError::new_err(format!(
                "channels: {channels}: expected 1 to {}",
                bcd_images::MAX_CHANNELS
            ))
        })?;
        let sample_rate = sample_rate
            .map(|rate| {
                u32::try_from(rate).map_err(|_| {
                    PyValueError::new_err(format!("sample_rate: {rate}: expected a positive rate"))
                })
            })
            .transpose()?;
        let crop = match crop {
            "random" => AudioCrop::Random,
            "start" => AudioCrop::Start,
            "center" => AudioCrop::Center,
            other => {
                return Err(PyValueError::new_err(format!(
                    "crop: {other:?}: expected \"random\", \"start\" or \"center\""
                )))
            }
        };
        let options = AudioOptions {
            frames,
            channels,
            crop,
            sample_rate,
        };
        options
            .validate()
            .map_err(|e| PyValueError::new_err(format!("{}: {}", e.option, e.reason)))?;
        Ok(PyAudioOptions { options })
    }

    /// The shape of one clip: `(channels, frames)`.
    #[getter]
    fn shape(&self) -> (usize, usize) {
        (
            usize::from(self.options.channels),
            self.options.frames as usize,
        )
    }

    /// Float32 samples of one clip: `channels * frames`.
    #[getter]
    fn clip_floats(&self) -> usize {
        self.options.clip_floats()
    }

    #[getter]
    fn frames(&self) -> u32 {
        self.options.frames
    }

    #[getter]
    fn channels(&self) -> u16 {
        self.options.channels
    }

    #[getter]
    fn crop(&self) -> &'static str {
        crop_name(self.options.crop)
    }

    #[getter]
    fn sample_rate(&self) -> Option<u32> {
        self.options.sample_rate
    }

    /// Pickles as its keyword arguments (DataLoader workers started by spawn).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let options = &slf.get().options;
        let kwargs = PyDict::new(py);
        kwargs.set_item("channels", options.channels)?;
        kwargs.set_item("crop", crop_name(options.crop))?;
        kwargs.set_item("sample_rate", options.sample_rate)?;
        // functools.partial(AudioOptions, frames, **kwargs)() rebuilds it.
        let partial = py.import("functools")?.getattr("partial")?;
        let build = partial.call((slf.get_type(), options.frames), Some(&kwargs))?;
        Ok(PyTuple::new(py, [build, PyTuple::empty(py).into_any()])?.into_any())
    }

    fn __repr__(&self) -> String {
        let o = &self.options;
        format!(
            "bcd.AudioOptions(frames={}, channels={}, crop=\"{}\", sample_rate={})",
            o.frames,
            o.channels,
            crop_name(o.crop),
            o.sample_rate
                .map_or_else(|| "None".to_owned(), |rate| rate.to_string())
        )
    }
}

/// The writable, C-contiguous float32 buffer `out`, of at least `len` floats
/// (taken before any lock: an exporter is the caller's code).
pub fn output(out: &Bound<'_, PyAny>, len: usize) -> PyResult<PyBuffer<f32>> {
    decode::output(out, len, "float32 (a float32 array or tensor)")
}

/// The frames each clip kept, and the failures as `(i, message)`.
pub type Decoded = (Vec<u32>, Vec<(usize, String)>);

/// Decodes `values` into `buffer` (from [`output`]), clip `i` with its
/// record's crop key; returns each clip's frames (0 for a failure) and the
/// failures, each message naming the value (its slot left as it was).
pub fn decode_into(
    py: Python<'_>,
    values: &Values<'_>,
    options: &AudioOptions,
    seed: u64,
    epoch: u64,
    buffer: PyBuffer<f32>,
) -> PyResult<Decoded> {
    let keys = values.keys(seed, epoch);
    let (count, value, threads) = (values.count, values.value, values.threads);
    let outcomes = decode::fill_detached(py, buffer, count * options.clip_floats(), |data| {
        decode_audio_many(count, value, &keys, options, data, threads)
    })?;
    let mut frames = Vec::with_capacity(count);
    let mut failures = Vec::new();
    for (i, outcome) in outcomes.into_iter().enumerate() {
        match outcome {
            Ok(clip) => frames.push(clip.frames),
            Err(failure) => {
                frames.push(0);
                failures.push(values.failure(
                    i,
                    match failure {
                        AudioFailure::Read(error) => error,
                        AudioFailure::Audio(error) => message(&error),
                    },
                ));
            }
        }
    }
    Ok((frames, failures))
}

/// decode_audio(values, out, options, *, seed=0, epoch=0, records=None, threads=None):
/// decodes audio values (WAV bytes) into `out` (a writable float32 buffer of
/// len(values) * options.clip_floats floats) as `options` says, on `threads`
/// threads (all cores by default) without the GIL; value i draws its crop from
/// (seed, epoch, records[i]), records defaulting to 0..len(values). Returns
/// (frames, failures): the frames each clip kept (0 for a failure) and the
/// failures as (i, message); their slots are left as they were.
#[pyfunction]
#[pyo3(signature = (values, out, options, *, seed = 0, epoch = 0, records = None, threads = None))]
#[allow(clippy::too_many_arguments)]
pub fn decode_audio(
    py: Python<'_>,
    values: Vec<PyBuffer<u8>>,
    out: &Bound<'_, PyAny>,
    options: &Bound<'_, PyAudioOptions>,
    seed: u64,
    epoch: u64,
    records: Option<Vec<u64>>,
    threads: Option<usize>,
) -> PyResult<Decoded> {
    let options = &options.get().options;
    let buffer = output(out, values.len() * options.clip_floats())?;
    decode::from_python(&values, records, threads, |values| {
        decode_into(py, values, options, seed, epoch, buffer)
    })
}
