//! Audio values (WAV files' bytes) decoded into training batches, without
//! Python: each value becomes one `channels x frames` float32 clip, its
//! samples scaled to `[-1, 1)` as libsndfile (`soundfile`) and torchaudio
//! scale them, cut to `frames` at the start, the centre or a random offset
//! drawn from the record's [`CropKey`], and zero-padded when shorter.
//! [`decode_audio_many`] does a batch on scoped threads into one buffer.
//!
//! ```
//! use bcd_images::{decode_audio_into, AudioCrop, AudioOptions, CropKey};
//!
//! // A mono 16-bit WAV of three frames, as Python's `wave` module writes it.
//! let mut wav = b"RIFF\x2a\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00".to_vec();
//! wav.extend_from_slice(b"\x40\x1f\x00\x00\x80\x3e\x00\x00\x02\x00\x10\x00data\x06\x00\x00\x00");
//! wav.extend_from_slice(&[0x00, 0x40, 0x00, 0xc0, 0xff, 0x7f]); // 16384, -16384, 32767
//! let options = AudioOptions { crop: AudioCrop::Start, ..AudioOptions::new(4) };
//! let mut out = vec![9.0f32; options.clip_floats()];
//! let clip = decode_audio_into(&wav, &options, CropKey { seed: 0, epoch: 0, record: 0 }, &mut out).unwrap();
//! assert_eq!((clip.frames, clip.sample_rate, clip.source_frames), (3, 8000, 3));
//! assert_eq!(out, [0.5, -0.5, 32767.0 / 32768.0, 0.0]);
//! ```
//!
//! The RIFF chunks are read here rather than with `hound`: it skips an odd-sized
//! chunk without its pad byte (so a file with an odd `LIST` chunk before its data,
//! which Python's `wave` and libsndfile read, fails), and it hands out samples one
//! at a time through `io::Read`, where the data chunk is a slice of the value to
//! convert in place.

use bcd_sampling::rng::{Purpose, Xoshiro256};

use crate::crop_box::CropKey;
use crate::error::OptionsError;
use crate::slots;
use crate::ValueFn;

/// The most frames a clip of the output may have (about 1.5 hours at 48 kHz),
/// so a batch's buffer stays addressable.
pub const MAX_FRAMES: u32 = 1 << 28;
/// The most channels of the output.
pub const MAX_CHANNELS: u16 = 64;
/// The most samples of one output clip (1 GiB of float32), whatever its
/// frames and channels.
pub const MAX_CLIP_FLOATS: usize = 1 << 28;

/// Which `frames` of a longer clip are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AudioCrop {
    /// The first ones.
    Start,
    /// The middle ones (the offset rounded down).
    Center,
    /// From an offset drawn uniformly from the record's stream
    /// `(seed, epoch, AudioCrop, record)`.
    Random,
}

/// What to make of each clip. Build with [`AudioOptions::new`] and check with
/// [`AudioOptions::validate`].
#[derive(Clone, Debug, PartialEq)]
pub struct AudioOptions {
    /// Frames of each output clip: longer clips are cut, shorter ones padded
    /// with zeros after their end.
    pub frames: u32,
    /// Channels of each output clip. A clip with as many is kept as it is;
    /// with 1, a clip of several channels is mixed down to their mean. Any
    /// other difference is an error.
    pub channels: u16,
    /// Which frames of a longer clip are kept.
    pub crop: AudioCrop,
    /// The sample rate every clip must have (no resampling), or any.
    pub sample_rate: Option<u32>,
}

impl AudioOptions {
    /// Mono clips of `frames` frames from a random offset, at any sample rate.
    pub fn new(frames: u32) -> AudioOptions {
        AudioOptions {
            frames,
            channels: 1,
            crop: AudioCrop::Random,
            sample_rate: None,
        }
    }

    /// Floats of one output clip: `channels * frames`.
    pub fn clip_floats(&self) -> usize {
        usize::from(self.channels) * self.frames as usize
    }

    /// Checks the options, naming the one that is wrong.
    pub fn validate(&self) -> Result<(), OptionsError> {
        if self.frames == 0 || self.frames > MAX_FRAMES {
            return Err(OptionsError {
                option: "frames",
                reason: format!("{}: expected 1 to {MAX_FRAMES}", self.frames),
            });
        }
        if self.channels == 0 || self.channels > MAX_CHANNELS {
            return Err(OptionsError {
                option: "channels",
                reason: format!("{}: expected 1 to {MAX_CHANNELS}", self.channels),
            });
        }
        if self.clip_floats() > MAX_CLIP_FLOATS {
            return Err(OptionsError {
                option: "frames",
                reason: format!(
                    "{} frames of {} channels: more than {MAX_CLIP_FLOATS} samples (1 GiB) a clip",
                    self.frames, self.channels
                ),
            });
        }
        if self.sample_rate == Some(0) {
            return Err(OptionsError {
                option: "sample_rate",
                reason: "0: expected a positive rate".into(),
            });
        }
        Ok(())
    }
}

/// Why an audio value could not be decoded. It names no record: the caller
/// knows which record the value is and says so.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum AudioError {
    /// Not a RIFF/WAVE file, or its chunks do not fit in the value.
    #[error("not a WAV file: {0}")]
    NotWav(String),
    /// A WAV file whose `fmt ` chunk says what this crate does not decode.
    #[error("a WAV file of {0}: only PCM integers of 8 to 32 bits and IEEE floats of 32 or 64 bits are decoded")]
    Unsupported(String),
    /// The clip's channels cannot become the output's.
    #[error("a clip of {clip} channels: expected {wanted} (or any number, mixed down, for 1)")]
    Channels {
        /// Channels of the clip.
        clip: u16,
        /// Channels of the output.
        wanted: u16,
    },
    /// The clip's sample rate is not the one asked for.
    #[error("a clip at {clip} Hz: expected {wanted} Hz (clips are not resampled)")]
    SampleRate {
        /// The clip's rate.
        clip: u32,
        /// The rate asked for.
        wanted: u32,
    },
}

/// What a decoded clip was: the frames written (the rest of its slot is
/// zeros), its sample rate, and the frames the value holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clip {
    /// Frames written from the start of the slot (at most the output's).
    pub frames: u32,
    /// The value's sample rate.
    pub sample_rate: u32,
    /// Frames in the value.
    pub source_frames: u64,
}

/// How the samples are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Encoding {
    /// Unsigned 8-bit PCM.
    U8,
    /// Signed little-endian PCM in 2, 3 or 4 bytes.
    Int(usize),
    F32,
    F64,
}

impl Encoding {
    fn bytes(self) -> usize {
        match self {
            Encoding::U8 => 1,
            Encoding::Int(bytes) => bytes,
            Encoding::F32 => 4,
            Encoding::F64 => 8,
        }
    }
}

/// A WAV file's format and where its samples are.
struct Wav<'v> {
    channels: u16,
    sample_rate: u32,
    encoding: Encoding,
    /// Whole frames of the data chunk.
    data: &'v [u8],
}

const FORMAT_PCM: u16 = 1;
const FORMAT_FLOAT: u16 = 3;
const FORMAT_EXTENSIBLE: u16 = 0xfffe;
/// The GUID of `WAVE_FORMAT_EXTENSIBLE`'s sub-format after its first two bytes
/// (which carry the format code): `xxxx0000-0000-0010-8000-00aa00389b71`.
const SUBFORMAT_TAIL: [u8; 14] = [
    0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71,
];
/// A data chunk length that streaming writers (ffmpeg to a pipe) leave in
/// place of the one they could not know: the data runs to the end.
const LENGTH_UNKNOWN: u32 = u32::MAX;

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn not_wav(why: impl Into<String>) -> AudioError {
    AudioError::NotWav(why.into())
}

/// Reads the RIFF chunks up to the data chunk (every length checked against
/// the value: nothing is allocated).
fn parse(value: &[u8]) -> Result<Wav<'_>, AudioError> {
    if value.len() < 12 || &value[..4] != b"RIFF" || &value[8..12] != b"WAVE" {
        let start: String = value.iter().take(12).map(|b| format!("{b:02x}")).collect();
        return Err(not_wav(if start.is_empty() {
            "it is empty".to_owned()
        } else {
            format!("it starts with {start}, not RIFF....WAVE")
        }));
    }
    let mut at = 12;
    let mut format = None;
    loop {
        if value.len() - at < 8 {
            return Err(not_wav(match format {
                None => "no fmt chunk",
                Some(_) => "no data chunk",
            }));
        }
        let id = &value[at..at + 4];
        let declared = u32_at(value, at + 4);
        let body_at = at + 8;
        let left = value.len() - body_at;
        if id == b"data" {
            let Some(format) = format else {
                return Err(not_wav("the data chunk comes before the fmt chunk"));
            };
            let len = if declared == LENGTH_UNKNOWN {
                left
            } else if declared as usize > left {
                return Err(not_wav(format!(
                    "the data chunk at byte {at} declares {declared} bytes, the value holds {left} after it (truncated?)"
                )));
            } else {
                declared as usize
            };
            let (channels, sample_rate, encoding) = format;
            let frame = usize::from(channels) * Encoding::bytes(encoding);
            // A partial frame at the end is left out, as `wave` and libsndfile do.
            let whole = len - len % frame;
            return Ok(Wav {
                channels,
                sample_rate,
                encoding,
                data: &value[body_at..body_at + whole],
            });
        }
        let len = declared as usize;
        if len > left {
            return Err(not_wav(format!(
                "the {:?} chunk at byte {at} declares {declared} bytes, the value holds {left} after it",
                String::from_utf8_lossy(id)
            )));
        }
        if id == b"fmt " {
            format = Some(read_format(&value[body_at..body_at + len])?);
        }
        // A chunk of odd length is followed by a pad byte.
        at = body_at + len + (len & 1);
        at = at.min(value.len());
    }
}

/// The `fmt ` chunk: channels, rate and how samples are stored.
fn read_format(chunk: &[u8]) -> Result<(u16, u32, Encoding), AudioError> {
    if chunk.len() < 16 {
        return Err(not_wav(format!(
            "a fmt chunk of {} bytes (at least 16)",
            chunk.len()
        )));
    }
    let mut tag = u16_at(chunk, 0);
    let channels = u16_at(chunk, 2);
    let sample_rate = u32_at(chunk, 4);
    let block_align = usize::from(u16_at(chunk, 12));
    let bits = u16_at(chunk, 14);
    if tag == FORMAT_EXTENSIBLE {
        if chunk.len() < 40 || u16_at(chunk, 16) < 22 {
            return Err(not_wav(
                "a WAVE_FORMAT_EXTENSIBLE fmt chunk without its extension",
            ));
        }
        if chunk[26..40] != SUBFORMAT_TAIL {
            return Err(AudioError::Unsupported(
                "a WAVE_FORMAT_EXTENSIBLE sub-format that is not PCM or IEEE float".into(),
            ));
        }
        tag = u16_at(chunk, 24);
    }
    if channels == 0 {
        return Err(not_wav("a fmt chunk of 0 channels"));
    }
    if sample_rate == 0 {
        return Err(not_wav("a fmt chunk of 0 samples a second"));
    }
    let encoding = match (tag, bits) {
        (FORMAT_PCM, 1..=8) => Encoding::U8,
        // Samples of fewer bits than their bytes are left-aligned in them, so
        // scaling by the bytes' range scales them by theirs.
        (FORMAT_PCM, 9..=32) => Encoding::Int(usize::from(bits).div_ceil(8)),
        (FORMAT_FLOAT, 32) => Encoding::F32,
        (FORMAT_FLOAT, 64) => Encoding::F64,
        (FORMAT_PCM | FORMAT_FLOAT, _) => {
            return Err(AudioError::Unsupported(format!(
                "{bits}-bit {} samples",
                if tag == FORMAT_PCM { "PCM" } else { "float" }
            )))
        }
        _ => {
            return Err(AudioError::Unsupported(format!(
                "format code {tag:#06x} (compressed audio)"
            )))
        }
    };
    if block_align != usize::from(channels) * encoding.bytes() {
        return Err(not_wav(format!(
            "a fmt chunk whose frames are {block_align} bytes, for {channels} channels of {} bytes",
            encoding.bytes()
        )));
    }
    Ok((channels, sample_rate, encoding))
}

/// Sample `i` of `data` scaled to `[-1, 1)`.
#[inline(always)]
fn sample(data: &[u8], encoding: Encoding, i: usize) -> f32 {
    match encoding {
        Encoding::U8 => (f32::from(data[i]) - 128.0) * (1.0 / 128.0),
        Encoding::Int(2) => {
            f32::from(i16::from_le_bytes([data[2 * i], data[2 * i + 1]])) * (1.0 / 32768.0)
        }
        Encoding::Int(3) => {
            let b = &data[3 * i..3 * i + 3];
            // The three bytes in the top of an i32, shifted back with their sign.
            let v = i32::from_le_bytes([0, b[0], b[1], b[2]]) >> 8;
            v as f32 * (1.0 / 8_388_608.0)
        }
        Encoding::Int(_) => {
            let b = &data[4 * i..4 * i + 4];
            // In f64: an i32 near its maximum rounds up to 1.0 in f32 first.
            (f64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])) / 2_147_483_648.0) as f32
        }
        Encoding::F32 => {
            let b = &data[4 * i..4 * i + 4];
            f32::from_le_bytes([b[0], b[1], b[2], b[3]])
        }
        Encoding::F64 => {
            let b: [u8; 8] = data[8 * i..8 * i + 8].try_into().expect("8 bytes");
            f64::from_le_bytes(b) as f32
        }
    }
}

/// Writes `frames` frames from frame `first` of `wav` into `out` (`channels x
/// frames_out`, channels first), mixed down to one channel when asked.
fn convert(wav: &Wav<'_>, first: usize, frames: usize, channels_out: u16, out: &mut [f32]) {
    let channels = usize::from(wav.channels);
    let stride = out.len() / usize::from(channels_out);
    if channels == 1 {
        let dst = &mut out[..frames];
        let bytes = wav.encoding.bytes();
        let src = &wav.data[bytes * first..bytes * (first + frames)];
        // Each encoding in a loop over fixed-size arrays, which the compiler
        // vectorises (the per-sample `sample` does not).
        match wav.encoding {
            Encoding::U8 => {
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d = (f32::from(s) - 128.0) * (1.0 / 128.0);
                }
            }
            Encoding::Int(2) => {
                for (d, s) in dst.iter_mut().zip(src.as_chunks::<2>().0) {
                    *d = f32::from(i16::from_le_bytes(*s)) * (1.0 / 32768.0);
                }
            }
            Encoding::Int(3) => {
                for (d, s) in dst.iter_mut().zip(src.as_chunks::<3>().0) {
                    let v = i32::from_le_bytes([0, s[0], s[1], s[2]]) >> 8;
                    *d = v as f32 * (1.0 / 8_388_608.0);
                }
            }
            Encoding::Int(_) => {
                for (d, s) in dst.iter_mut().zip(src.as_chunks::<4>().0) {
                    *d = (f64::from(i32::from_le_bytes(*s)) / 2_147_483_648.0) as f32;
                }
            }
            Encoding::F32 => {
                for (d, s) in dst.iter_mut().zip(src.as_chunks::<4>().0) {
                    *d = f32::from_le_bytes(*s);
                }
            }
            Encoding::F64 => {
                for (d, s) in dst.iter_mut().zip(src.as_chunks::<8>().0) {
                    *d = f64::from_le_bytes(*s) as f32;
                }
            }
        }
    } else if channels_out == 1 {
        let scale = 1.0 / channels as f32;
        for (t, d) in out[..frames].iter_mut().enumerate() {
            let base = (first + t) * channels;
            let sum: f32 = (0..channels)
                .map(|c| sample(wav.data, wav.encoding, base + c))
                .sum();
            *d = sum * scale;
        }
    } else {
        for c in 0..channels {
            let dst = &mut out[c * stride..c * stride + frames];
            for (t, d) in dst.iter_mut().enumerate() {
                *d = sample(wav.data, wav.encoding, (first + t) * channels + c);
            }
        }
    }
}

/// Decodes one value into `out` (exactly [`AudioOptions::clip_floats`] long,
/// channels first): the frames the crop keeps for `key`, then zeros. `options`
/// must have passed [`AudioOptions::validate`].
pub fn decode_audio_into(
    value: &[u8],
    options: &AudioOptions,
    key: CropKey,
    out: &mut [f32],
) -> Result<Clip, AudioError> {
    debug_assert_eq!(out.len(), options.clip_floats());
    let wav = parse(value)?;
    if wav.channels != options.channels && options.channels != 1 {
        return Err(AudioError::Channels {
            clip: wav.channels,
            wanted: options.channels,
        });
    }
    if let Some(wanted) = options.sample_rate {
        if wav.sample_rate != wanted {
            return Err(AudioError::SampleRate {
                clip: wav.sample_rate,
                wanted,
            });
        }
    }
    let source_frames = wav.data.len() / (usize::from(wav.channels) * wav.encoding.bytes());
    let wanted = options.frames as usize;
    let excess = source_frames.saturating_sub(wanted);
    let first = match options.crop {
        AudioCrop::Start => 0,
        AudioCrop::Center => excess / 2,
        AudioCrop::Random => {
            let mut rng = Xoshiro256::stream(key.seed, key.epoch, Purpose::AudioCrop, key.record);
            rng.below(excess as u64 + 1) as usize
        }
    };
    let frames = source_frames.min(wanted);
    convert(&wav, first, frames, options.channels, out);
    // Zeros after each channel's frames (only there: a clip is mostly samples).
    for row in out.chunks_exact_mut(wanted) {
        row[frames..].fill(0.0);
    }
    Ok(Clip {
        frames: frames as u32,
        sample_rate: wav.sample_rate,
        source_frames: source_frames as u64,
    })
}

/// Why clip `i` of a [`decode_audio_many`] is missing: its value could not be
/// read (the caller's error), or not decoded.
#[derive(Debug)]
pub enum AudioFailure<E> {
    /// `value(i)` failed.
    Read(E),
    /// The value is not a clip this crate decodes.
    Audio(AudioError),
}

/// Decodes `count` values into `out` (`count * clip_floats` floats, clip `i`
/// at `i * clip_floats`), clip `i` from `value(i, ..)` with `keys[i]`, on up
/// to `threads` scoped threads that each read and decode the next clip;
/// returns each clip's outcome in order. A clip that fails leaves its slot as
/// it was.
pub fn decode_audio_many<E: Send>(
    count: usize,
    value: &ValueFn<'_, E>,
    keys: &[CropKey],
    options: &AudioOptions,
    out: &mut [f32],
    threads: usize,
) -> Vec<Result<Clip, AudioFailure<E>>> {
    assert_eq!(count, keys.len(), "one key per value");
    let one = |i: usize, slot: &mut [f32], stored: &mut Vec<u8>| {
        let mut decoded = None;
        value(i, stored, &mut |bytes| {
            decoded = Some(decode_audio_into(bytes, options, keys[i], slot));
        })
        .map_err(AudioFailure::Read)?;
        decoded
            .expect("the value is given to its decoder")
            .map_err(AudioFailure::Audio)
    };
    slots::fill(count, options.clip_floats(), out, threads, &one)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A WAV file as Python's `wave` writes one: `fmt ` of 16 bytes (or 40 for
    /// the extensible format), then `data`; `extra` chunks go before `data`.
    fn wav(tag: u16, channels: u16, rate: u32, bits: u16, data: &[u8], extra: &[u8]) -> Vec<u8> {
        let bytes = u32::from(bits).div_ceil(8);
        let align = channels as u32 * bytes;
        let mut fmt = Vec::new();
        fmt.extend_from_slice(&tag.to_le_bytes());
        fmt.extend_from_slice(&channels.to_le_bytes());
        fmt.extend_from_slice(&rate.to_le_bytes());
        fmt.extend_from_slice(&(rate * align).to_le_bytes());
        fmt.extend_from_slice(&(align as u16).to_le_bytes());
        fmt.extend_from_slice(&bits.to_le_bytes());
        let mut body = b"WAVEfmt ".to_vec();
        body.extend_from_slice(&(fmt.len() as u32).to_le_bytes());
        body.extend_from_slice(&fmt);
        body.extend_from_slice(extra);
        body.extend_from_slice(b"data");
        body.extend_from_slice(&(data.len() as u32).to_le_bytes());
        body.extend_from_slice(data);
        let mut file = b"RIFF".to_vec();
        file.extend_from_slice(&(body.len() as u32).to_le_bytes());
        file.extend_from_slice(&body);
        file
    }

    fn key(record: u64) -> CropKey {
        CropKey {
            seed: 7,
            epoch: 1,
            record,
        }
    }

    fn decode(value: &[u8], options: &AudioOptions) -> Result<(Clip, Vec<f32>), AudioError> {
        let mut out = vec![f32::NAN; options.clip_floats()];
        decode_audio_into(value, options, key(0), &mut out).map(|clip| (clip, out))
    }

    fn start(frames: u32) -> AudioOptions {
        AudioOptions {
            crop: AudioCrop::Start,
            ..AudioOptions::new(frames)
        }
    }

    #[test]
    fn every_pcm_width_and_float_scales_as_libsndfile_does() {
        let cases: Vec<(u16, u16, Vec<u8>, Vec<f32>)> = vec![
            (
                FORMAT_PCM,
                8,
                vec![0, 128, 255],
                vec![-1.0, 0.0, 127.0 / 128.0],
            ),
            (
                FORMAT_PCM,
                16,
                [i16::MIN, 0, i16::MAX, -1]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
                vec![-1.0, 0.0, 32767.0 / 32768.0, -1.0 / 32768.0],
            ),
            (
                FORMAT_PCM,
                24,
                vec![0, 0, 0x80, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff],
                vec![-1.0, 8_388_607.0 / 8_388_608.0, -1.0 / 8_388_608.0],
            ),
            (
                FORMAT_PCM,
                32,
                [i32::MIN, i32::MAX, 1 << 16]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
                vec![
                    -1.0,
                    (f64::from(i32::MAX) / 2_147_483_648.0) as f32,
                    1.0 / 32768.0,
                ],
            ),
            (
                FORMAT_FLOAT,
                32,
                [0.25f32, -1.5]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
                vec![0.25, -1.5],
            ),
            (
                FORMAT_FLOAT,
                64,
                [0.125f64, -0.5]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
                vec![0.125, -0.5],
            ),
        ];
        for (tag, bits, data, expected) in cases {
            let file = wav(tag, 1, 16_000, bits, &data, b"");
            let (clip, out) = decode(&file, &start(expected.len() as u32 + 2)).unwrap();
            assert_eq!(clip.frames as usize, expected.len(), "{bits} bits");
            assert_eq!(&out[..expected.len()], &expected[..], "{bits} bits");
            assert_eq!(
                &out[expected.len()..],
                &[0.0, 0.0],
                "{bits} bits: padded with zeros"
            );
            assert_eq!(clip.sample_rate, 16_000);
        }
    }

    #[test]
    fn the_extensible_format_reads_as_its_sub_format() {
        let mut file = wav(FORMAT_PCM, 2, 8000, 16, &[0, 0x40, 0, 0xc0], b"");
        // Rewrite the fmt chunk as WAVE_FORMAT_EXTENSIBLE (40 bytes).
        let mut fmt = file[20..36].to_vec();
        fmt[0..2].copy_from_slice(&FORMAT_EXTENSIBLE.to_le_bytes());
        fmt.extend_from_slice(&22u16.to_le_bytes());
        fmt.extend_from_slice(&16u16.to_le_bytes());
        fmt.extend_from_slice(&3u32.to_le_bytes());
        fmt.extend_from_slice(&FORMAT_PCM.to_le_bytes());
        fmt.extend_from_slice(&SUBFORMAT_TAIL);
        let mut extensible = b"RIFF\0\0\0\0WAVEfmt \x28\0\0\0".to_vec();
        extensible.extend_from_slice(&fmt);
        extensible.extend_from_slice(&file.split_off(36));
        let options = AudioOptions {
            channels: 2,
            ..start(1)
        };
        let (_, out) = decode(&extensible, &options).unwrap();
        assert_eq!(out, [0.5, -0.5]);
    }

    #[test]
    fn channels_are_laid_out_first_or_mixed_down() {
        // Two stereo frames: (0.5, -0.5), (0.25, 0.75).
        let data: Vec<u8> = [16384i16, -16384, 8192, 24576]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let file = wav(FORMAT_PCM, 2, 8000, 16, &data, b"");
        let stereo = AudioOptions {
            channels: 2,
            ..start(3)
        };
        let (_, out) = decode(&file, &stereo).unwrap();
        assert_eq!(out, [0.5, 0.25, 0.0, -0.5, 0.75, 0.0]);
        let (_, mono) = decode(&file, &start(2)).unwrap();
        assert_eq!(mono, [0.0, 0.5]);
        let four = AudioOptions {
            channels: 4,
            ..start(2)
        };
        assert_eq!(
            decode(&file, &four).unwrap_err(),
            AudioError::Channels { clip: 2, wanted: 4 }
        );
    }

    #[test]
    fn crops_keep_the_start_the_centre_or_the_keys_offset() {
        let data: Vec<u8> = (0..100i16).flat_map(|v| (v * 256).to_le_bytes()).collect();
        let file = wav(FORMAT_PCM, 1, 8000, 16, &data, b"");
        let first = |options: &AudioOptions, record: u64| {
            let mut out = vec![0.0; options.clip_floats()];
            decode_audio_into(&file, options, key(record), &mut out).unwrap();
            (out[0] * 128.0).round() as i64
        };
        assert_eq!(first(&start(10), 0), 0);
        let center = AudioOptions {
            crop: AudioCrop::Center,
            ..AudioOptions::new(10)
        };
        assert_eq!(first(&center, 0), 45);
        let random = AudioOptions::new(10);
        let offsets: Vec<i64> = (0..1000).map(|r| first(&random, r)).collect();
        assert!(offsets.iter().all(|&o| (0..=90).contains(&o)));
        assert!(
            offsets.contains(&0) && offsets.contains(&90),
            "both ends drawn"
        );
        assert_eq!(
            offsets,
            (0..1000).map(|r| first(&random, r)).collect::<Vec<_>>()
        );
        // A clip no longer than the output is kept whole whatever the crop.
        assert_eq!(first(&AudioOptions::new(100), 3), 0);
    }

    #[test]
    fn odd_chunks_are_padded_and_a_partial_frame_is_left_out() {
        // An odd-sized LIST chunk and its pad byte before the data.
        let extra = b"LIST\x03\x00\x00\x00abc\x00";
        let mut data: Vec<u8> = [100i16, 200].iter().flat_map(|v| v.to_le_bytes()).collect();
        data.push(7); // half a sample
        let file = wav(FORMAT_PCM, 1, 8000, 16, &data, extra);
        let (clip, out) = decode(&file, &start(4)).unwrap();
        assert_eq!(clip.frames, 2);
        assert_eq!(out, [100.0 / 32768.0, 200.0 / 32768.0, 0.0, 0.0]);
    }

    #[test]
    fn a_streaming_writers_unknown_length_runs_to_the_end() {
        let data: Vec<u8> = [1000i16, 2000]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let mut file = wav(FORMAT_PCM, 1, 8000, 16, &data, b"");
        let at = file.len() - data.len() - 4;
        file[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode(&file, &start(2)).unwrap().0.frames, 2);
    }

    #[test]
    fn bad_values_are_errors_that_say_why() {
        let good = wav(FORMAT_PCM, 1, 8000, 16, &[0, 0, 0, 0], b"");
        let says = |value: &[u8], options: &AudioOptions, text: &str| {
            let error = decode(value, options).unwrap_err().to_string();
            assert!(error.contains(text), "{error:?} should say {text:?}");
        };
        says(b"", &start(1), "it is empty");
        says(b"ID3\x04 an mp3", &start(1), "not RIFF....WAVE");
        says(
            &good[..good.len() - 1],
            &start(1),
            "declares 4 bytes, the value holds 3",
        );
        says(&good[..30], &start(1), "declares 16 bytes");
        let mut no_data = good.clone();
        no_data.truncate(36);
        says(&no_data, &start(1), "no data chunk");
        says(
            &wav(FORMAT_PCM, 1, 8000, 40, &[], b""),
            &start(1),
            "40-bit PCM",
        );
        says(
            &wav(2, 1, 8000, 4, &[], b""),
            &start(1),
            "format code 0x0002",
        );
        says(
            &wav(FORMAT_FLOAT, 1, 8000, 16, &[], b""),
            &start(1),
            "16-bit float",
        );
        says(
            &wav(FORMAT_PCM, 0, 8000, 16, &[], b""),
            &start(1),
            "0 channels",
        );
        let rate = AudioOptions {
            sample_rate: Some(16_000),
            ..start(1)
        };
        says(&good, &rate, "at 8000 Hz: expected 16000 Hz");
        let mut misaligned = good.clone();
        misaligned[32] = 3; // block_align
        says(&misaligned, &start(1), "frames are 3 bytes");
    }

    #[test]
    fn options_are_checked() {
        assert!(AudioOptions::new(16_000).validate().is_ok());
        assert_eq!(
            AudioOptions::new(0).validate().unwrap_err().option,
            "frames"
        );
        let channels = AudioOptions {
            channels: 0,
            ..AudioOptions::new(1)
        };
        assert_eq!(channels.validate().unwrap_err().option, "channels");
        let rate = AudioOptions {
            sample_rate: Some(0),
            ..AudioOptions::new(1)
        };
        assert_eq!(rate.validate().unwrap_err().option, "sample_rate");
        let huge = AudioOptions {
            channels: 2,
            ..AudioOptions::new(MAX_FRAMES)
        };
        assert!(huge.validate().unwrap_err().reason.contains("1 GiB"));
    }

    #[test]
    fn a_batch_on_threads_is_the_clips_one_by_one() {
        let values: Vec<Vec<u8>> = (0..37u16)
            .map(|i| {
                let data: Vec<u8> = (0..(i * 13 % 50))
                    .flat_map(|v| (v as i16 * 97 - 2000).to_le_bytes())
                    .collect();
                if i == 5 {
                    b"not audio".to_vec()
                } else {
                    wav(FORMAT_PCM, 1, 8000, 16, &data, b"")
                }
            })
            .collect();
        let options = AudioOptions::new(20);
        let keys: Vec<CropKey> = (0..values.len() as u64).map(key).collect();
        let value = |i: usize, _: &mut Vec<u8>, with: &mut dyn FnMut(&[u8])| {
            with(&values[i]);
            Ok::<_, ()>(())
        };
        let mut one_thread = vec![0.0; values.len() * 20];
        let mut three = vec![0.0; values.len() * 20];
        let a = decode_audio_many(values.len(), &value, &keys, &options, &mut one_thread, 1);
        let b = decode_audio_many(values.len(), &value, &keys, &options, &mut three, 3);
        assert_eq!(one_thread, three);
        for (i, (a, b)) in a.iter().zip(&b).enumerate() {
            match (a, b) {
                (Ok(x), Ok(y)) => assert_eq!(x, y),
                (Err(AudioFailure::Audio(x)), Err(AudioFailure::Audio(y))) => {
                    assert_eq!(i, 5);
                    assert_eq!(x, y);
                }
                other => panic!("clip {i}: {other:?}"),
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        /// Any bytes, and any bytes after a valid header: an error or a clip,
        /// never a panic, and a clip writes only its slot.
        #[test]
        fn hostile_values_never_panic(
            tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
            cut in 0usize..80,
            channels in 1u16..4,
        ) {
            let header = wav(FORMAT_PCM, 2, 8000, 16, &[1, 2, 3, 4, 5, 6, 7, 8], b"");
            let mut value = header[..cut.min(header.len())].to_vec();
            value.extend_from_slice(&tail);
            let options = AudioOptions { channels, ..AudioOptions::new(5) };
            let mut out = vec![0.0; options.clip_floats()];
            let _ = decode_audio_into(&value, &options, key(1), &mut out);
            let _ = decode_audio_into(&tail, &options, key(1), &mut out);
        }
    }
}
