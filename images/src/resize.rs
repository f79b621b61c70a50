//! A box of a decoded region resampled to the output: Pillow's convolution
//! resampling (bilinear, with the filter widened by the reduction factor when
//! shrinking, which is what antialiasing means in Pillow and torchvision),
//! done by `fast_image_resize` in SIMD; then the flip and the layout.

use std::cell::RefCell;

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};

use crate::error::ImageError;

thread_local! {
    // A resizer per thread: it keeps its scratch buffers between images.
    static RESIZER: RefCell<Resizer> = RefCell::new(Resizer::new());
}

/// Resamples the box `(left, top, width, height)` of `pixels` (`src_w` x
/// `src_h` RGB) to `out` (`size` = (height, width)), mirrored when `flip`,
/// as `3 x H x W` when `channels_first`, else `H x W x 3`. `scratch` holds the
/// intermediate image when the layout needs one.
#[allow(clippy::too_many_arguments)]
pub(crate) fn resample(
    pixels: &[u8],
    (src_w, src_h): (usize, usize),
    (left, top, width, height): (f64, f64, f64, f64),
    size: (u32, u32),
    flip: bool,
    channels_first: bool,
    out: &mut [u8],
    scratch: &mut Vec<u8>,
) -> Result<(), ImageError> {
    let (out_h, out_w) = size;
    let src = ImageRef::new(src_w as u32, src_h as u32, pixels, PixelType::U8x3)
        .map_err(|e| ImageError::Resize(e.to_string()))?;
    let options = ResizeOptions::new()
        .resize_alg(ResizeAlg::Convolution(FilterType::Bilinear))
        .crop(left, top, width, height);
    let target: &mut [u8] = if channels_first {
        scratch.resize(out.len(), 0);
        scratch
    } else {
        out
    };
    {
        let mut dst = Image::from_slice_u8(out_w, out_h, target, PixelType::U8x3)
            .map_err(|e| ImageError::Resize(e.to_string()))?;
        RESIZER
            .with(|resizer| resizer.borrow_mut().resize(&src, &mut dst, &options))
            .map_err(|e| ImageError::Resize(e.to_string()))?;
    }
    let row = out_w as usize * 3;
    if flip {
        for line in target.chunks_exact_mut(row) {
            let pixels = line.as_chunks_mut::<3>().0;
            pixels.reverse();
        }
    }
    if channels_first {
        let plane = out_w as usize * out_h as usize;
        let (r, rest) = out.split_at_mut(plane);
        let (g, b) = rest.split_at_mut(plane);
        for (i, pixel) in scratch.as_chunks::<3>().0.iter().enumerate() {
            r[i] = pixel[0];
            g[i] = pixel[1];
            b[i] = pixel[2];
        }
    }
    Ok(())
}
