//! Image and audio values decoded and cropped into training batches, without
//! Python. Audio (WAV) clips: the [`audio`](decode_audio_into) functions.
//!
//! A value (a JPEG or PNG file's bytes) becomes one `H x W x 3` (or `3 x H x W`)
//! uint8 image: a box is chosen from the image's size and the record's
//! [`CropKey`] ([`crop_box`]: torchvision's `RandomResizedCrop`, a centre crop
//! after a resize, or the whole image), only what the box needs is decoded
//! (JPEG: at 1/2, 1/4 or 1/8 scale when the box allows, only its columns and
//! rows), and the box is resampled to the output size with Pillow's
//! antialiased bilinear filter, then mirrored if the key's draw says so.
//! [`decode_many`] does a batch on scoped threads into one buffer.
//!
//! ```
//! use bcd_images::{decode_into, CropKey, ImageOptions, Crop};
//!
//! // A 2 x 1 PNG: a red pixel and a blue one.
//! let png = [
//!     0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
//!     0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x7b, 0x40, 0xe8,
//!     0xdd, 0x00, 0x00, 0x00, 0x0f, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xc0,
//!     0xc0, 0xf0, 0x1f, 0x00, 0x07, 0x00, 0x01, 0xff, 0x7e, 0x08, 0xb1, 0xd0, 0x00, 0x00, 0x00, 0x00,
//!     0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
//! ]; // written by Pillow
//! let options = ImageOptions { size: (1, 2), crop: Crop::Resize, flip: false, ..ImageOptions::new(1) };
//! let mut out = vec![0u8; options.image_bytes()];
//! decode_into(&png, &options, CropKey { seed: 0, epoch: 0, record: 0 }, &mut out).unwrap();
//! assert_eq!(out, [255, 0, 0, 0, 0, 255]);
//! ```

mod audio;
mod crop_box;
mod error;
mod jpeg;
mod options;
mod png_decode;
mod region;
mod resize;
mod slots;

pub use audio::{
    decode_audio_into, decode_audio_many, AudioCrop, AudioError, AudioFailure, AudioOptions, Clip,
    MAX_CHANNELS, MAX_CLIP_FLOATS, MAX_FRAMES,
};
pub use crop_box::{crop_box, CropBox, CropKey};
pub use error::{ImageError, OptionsError};
pub use options::{Crop, ImageOptions, MAX_SIDE};

/// The most pixels an image may declare: Pillow's decompression-bomb limit
/// (2 x 89,478,485), so an image Pillow opens is one this crate decodes, and a
/// hostile header cannot make it allocate more than about 0.5 GB.
pub const MAX_PIXELS: u64 = 2 * 89_478_485;

/// Decodes one value into `out` (exactly [`ImageOptions::image_bytes`] long,
/// which the caller checks): the box for `key`, resampled, flipped, laid out
/// as `options` say. `options` must have passed [`ImageOptions::validate`].
pub fn decode_into(
    value: &[u8],
    options: &ImageOptions,
    key: CropKey,
    out: &mut [u8],
) -> Result<(), ImageError> {
    decode_with_scratch(value, options, key, out, &mut Vec::new())
}

fn decode_with_scratch(
    value: &[u8],
    options: &ImageOptions,
    key: CropKey,
    out: &mut [u8],
    scratch: &mut Vec<u8>,
) -> Result<(), ImageError> {
    debug_assert_eq!(out.len(), options.image_bytes());
    let mut choose = |width, height| crop_box(options, width, height, key);
    let (region, kept) = if jpeg::is_jpeg(value) {
        jpeg::decode(value, options.size, options.dct_scaling, &mut choose)?
    } else if png_decode::is_png(value) {
        png_decode::decode(value, &mut choose)?
    } else {
        let start: String = value.iter().take(8).map(|b| format!("{b:02x}")).collect();
        return Err(ImageError::UnknownFormat(if start.is_empty() {
            "nothing: it is empty".into()
        } else {
            format!("bytes {start}")
        }));
    };
    let within = region.box_within(&kept);
    resize::resample(
        &region.pixels,
        (region.width, region.height),
        within,
        options.size,
        kept.flip,
        options.channels_first,
        out,
        scratch,
    )
}

/// Why image `i` of a [`decode_many`] is missing: its value could not be read
/// (the caller's error), or not decoded.
#[derive(Debug)]
pub enum Failure<E> {
    /// `value(i)` failed.
    Read(E),
    /// The value is not an image this crate decodes.
    Image(ImageError),
}

/// Where a batch decoder ([`decode_many`], [`decode_audio_many`]) gets value
/// `i`: `value(i, stored, with)` calls `with` on the value's bytes, which it
/// may read into `stored` (scratch space of the thread that decodes it, reused
/// from value to value: a positional read) or borrow from elsewhere (a
/// mapping), or fails.
pub type ValueFn<'f, E> =
    dyn Fn(usize, &mut Vec<u8>, &mut dyn FnMut(&[u8])) -> Result<(), E> + Sync + 'f;

/// Decodes `count` values into `out` (`count * image_bytes` bytes, image `i`
/// at `i * image_bytes`), image `i` from `value(i, ..)` with `keys[i]`, on up
/// to `threads` scoped threads that each read and decode the next image;
/// returns each image's outcome in order. An image that fails leaves its slot
/// as it was.
pub fn decode_many<E: Send>(
    count: usize,
    value: &ValueFn<'_, E>,
    keys: &[CropKey],
    options: &ImageOptions,
    out: &mut [u8],
    threads: usize,
) -> Vec<Result<(), Failure<E>>> {
    let each = options.image_bytes();
    assert_eq!(count, keys.len(), "one key per value");
    let one = |i: usize, slot: &mut [u8], scratch: &mut (Vec<u8>, Vec<u8>)| {
        let (resized, stored) = scratch;
        let mut decoded = None;
        value(i, stored, &mut |bytes| {
            decoded = Some(decode_with_scratch(bytes, options, keys[i], slot, resized));
        })
        .map_err(Failure::Read)?;
        decoded
            .expect("the value is given to its decoder")
            .map_err(Failure::Image)
    };
    slots::fill(count, each, out, threads, &one)
}
