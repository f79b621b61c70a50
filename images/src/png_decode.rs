//! PNG values through the `png` crate, to RGB as Pillow's `convert("RGB")`
//! makes them: palettes expanded, 16-bit samples cut to their high byte,
//! greyscale repeated, alpha dropped (not composited).

use std::io::Cursor;

use crate::crop_box::CropBox;
use crate::error::ImageError;
use crate::region::Region;
use crate::MAX_PIXELS;

/// The PNG signature.
const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

pub(crate) fn is_png(data: &[u8]) -> bool {
    data.starts_with(SIGNATURE)
}

/// The whole image as RGB, with the box `choose(width, height)` returns.
pub(crate) fn decode(
    data: &[u8],
    choose: &mut dyn FnMut(u32, u32) -> CropBox,
) -> Result<(Region, CropBox), ImageError> {
    let mut decoder = png::Decoder::new(Cursor::new(data));
    // The decoder's own bound on what it allocates (the frame, at most
    // MAX_PIXELS of 8 bytes, and its chunks).
    decoder.set_limits(png::Limits {
        bytes: (MAX_PIXELS as usize) * 8 + (64 << 20),
    });
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let header = decoder.read_header_info()?;
    let (width, height) = (header.width, header.height);
    if width == 0 || height == 0 || u64::from(width) * u64::from(height) > MAX_PIXELS {
        return Err(ImageError::Size {
            width: width.into(),
            height: height.into(),
        });
    }
    let mut reader = decoder.read_info()?;
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| ImageError::Size {
            width: width.into(),
            height: height.into(),
        })?;
    let mut frame = vec![0u8; size];
    let info = reader.next_frame(&mut frame)?;
    let (w, h) = (info.width as usize, info.height as usize);
    let channels = match info.color_type {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        // EXPAND turns palettes into RGB(A).
        png::ColorType::Indexed => return Err(ImageError::UnsupportedColorSpace("palette")),
    };
    let row = info.line_size;
    let mut rgb = Vec::with_capacity(w * h * 3);
    for line in frame.chunks(row).take(h) {
        for pixel in line[..w * channels].chunks_exact(channels) {
            match channels {
                1 | 2 => rgb.extend_from_slice(&[pixel[0]; 3]),
                _ => rgb.extend_from_slice(&pixel[..3]),
            }
        }
    }
    let kept = choose(width, height);
    let region = Region {
        pixels: rgb,
        width: w,
        height: h,
        left: 0,
        top: 0,
        denom: 1,
    };
    Ok((region, kept))
}
