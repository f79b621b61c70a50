//! Which part of an image is kept: the box in the image's pixels, and the flip.
//!
//! Random choices come from the stream `(seed, epoch, ImageCrop, record)` of
//! `bcd-sampling`'s generator, so a record's crop depends only on the seed,
//! the epoch and the record: the same in every worker, every run and after a
//! resume, whatever the batches or the order.

use bcd_sampling::rng::{Purpose, Xoshiro256};

use crate::options::{Crop, ImageOptions};

/// The box kept from an image (in its full-size pixels, fractional for the
/// centre crop), and whether the output is flipped left to right.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CropBox {
    /// Left edge.
    pub x: f64,
    /// Top edge.
    pub y: f64,
    /// Width.
    pub width: f64,
    /// Height.
    pub height: f64,
    /// Mirror the output horizontally.
    pub flip: bool,
}

/// What makes a record's random draws its own: the seed, the epoch and the
/// record's index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CropKey {
    /// The run's seed (the sampler's).
    pub seed: u64,
    /// The epoch.
    pub epoch: u64,
    /// The record.
    pub record: u64,
}

/// The box and flip for an image of `width` x `height` pixels (both > 0).
pub fn crop_box(options: &ImageOptions, width: u32, height: u32, key: CropKey) -> CropBox {
    let mut rng = Xoshiro256::stream(key.seed, key.epoch, Purpose::ImageCrop, key.record);
    let (w, h) = (width as f64, height as f64);
    let mut kept = match options.crop {
        Crop::RandomResized { scale, ratio } => {
            random_resized(&mut rng, width, height, scale, ratio)
        }
        Crop::Center { resize } => {
            // torchvision's Resize(resize) then CenterCrop(size), in the image's
            // pixels: the resize makes the shorter side `resize` (the longer one
            // rounded down as torchvision's int() does), the crop is centred
            // with its offset rounded as CenterCrop rounds it.
            let (out_h, out_w) = (options.size.0 as f64, options.size.1 as f64);
            let (new_w, new_h) = if width <= height {
                (resize as f64, (resize as f64 * h / w).floor())
            } else {
                ((resize as f64 * w / h).floor(), resize as f64)
            };
            let (sx, sy) = (w / new_w, h / new_h);
            let left = ((new_w - out_w) / 2.0).round_ties_even();
            let top = ((new_h - out_h) / 2.0).round_ties_even();
            CropBox {
                x: left * sx,
                y: top * sy,
                width: out_w * sx,
                height: out_h * sy,
                flip: false,
            }
        }
        Crop::Resize => CropBox {
            x: 0.0,
            y: 0.0,
            width: w,
            height: h,
            flip: false,
        },
    };
    // The flip is drawn after the box, from the same stream.
    kept.flip = options.flip && rng.next_u64() >> 63 == 1;
    kept
}

/// torchvision's `RandomResizedCrop.get_params`, with this crate's random
/// numbers: ten tries of an area share uniform in `scale` and a ratio
/// log-uniform in `ratio`, kept if it fits; else the centred box of the
/// image's own ratio clamped to `ratio`.
fn random_resized(
    rng: &mut Xoshiro256,
    width: u32,
    height: u32,
    scale: (f64, f64),
    ratio: (f64, f64),
) -> CropBox {
    let area = width as f64 * height as f64;
    let (log_low, log_high) = (ratio.0.ln(), ratio.1.ln());
    for _ in 0..10 {
        let target = area * (scale.0 + (scale.1 - scale.0) * rng.open01());
        let aspect = (log_low + (log_high - log_low) * rng.open01()).exp();
        let w = (target * aspect).sqrt().round_ties_even();
        let h = (target / aspect).sqrt().round_ties_even();
        if 0.0 < w && w <= width as f64 && 0.0 < h && h <= height as f64 {
            let (w, h) = (w as u32, h as u32);
            let top = rng.below(u64::from(height - h) + 1) as u32;
            let left = rng.below(u64::from(width - w) + 1) as u32;
            return CropBox {
                x: left as f64,
                y: top as f64,
                width: w as f64,
                height: h as f64,
                flip: false,
            };
        }
    }
    let in_ratio = width as f64 / height as f64;
    let (w, h) = if in_ratio < ratio.0 {
        (
            width,
            ((width as f64 / ratio.0).round_ties_even() as u32).clamp(1, height),
        )
    } else if in_ratio > ratio.1 {
        (
            ((height as f64 * ratio.1).round_ties_even() as u32).clamp(1, width),
            height,
        )
    } else {
        (width, height)
    };
    CropBox {
        x: ((width - w) / 2) as f64,
        y: ((height - h) / 2) as f64,
        width: w as f64,
        height: h as f64,
        flip: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(record: u64) -> CropKey {
        CropKey {
            seed: 7,
            epoch: 2,
            record,
        }
    }

    #[test]
    fn random_boxes_fit_follow_the_key_and_keep_their_share_of_the_area() {
        let options = ImageOptions::new(224);
        let mut flips = 0;
        let mut shares = Vec::new();
        for record in 0..20_000 {
            let (w, h) = if record % 2 == 0 {
                (500, 500)
            } else {
                (
                    300 + (record as u32 * 37) % 500,
                    200 + (record as u32 * 53) % 400,
                )
            };
            let b = crop_box(&options, w, h, key(record));
            assert_eq!(
                b,
                crop_box(&options, w, h, key(record)),
                "same key, same box"
            );
            assert!(b.x >= 0.0 && b.y >= 0.0 && b.width >= 1.0 && b.height >= 1.0);
            assert!(
                b.x + b.width <= w as f64 && b.y + b.height <= h as f64,
                "{b:?} in {w}x{h}"
            );
            assert_eq!(
                b.x.fract() + b.y.fract() + b.width.fract() + b.height.fract(),
                0.0
            );
            flips += b.flip as u32;
            if w == 500 && h == 500 {
                shares.push(b.width * b.height / (w as f64 * h as f64));
            }
        }
        assert!((9_700..10_300).contains(&flips), "{flips} flips of 20000");
        let mean = shares.iter().sum::<f64>() / shares.len() as f64;
        // torchvision's get_params, run 400,000 times in Python on 500 x 500
        // (boxes that do not fit are drawn again), keeps 0.4786 of the area on
        // average; 10,000 draws give about +-0.004.
        assert!((mean - 0.4786).abs() < 0.012, "mean share {mean}");
        let other = CropKey { epoch: 3, ..key(5) };
        assert_ne!(
            crop_box(&options, 640, 480, key(5)),
            crop_box(&options, 640, 480, other)
        );
    }

    #[test]
    fn a_ratio_the_image_cannot_hold_falls_back_to_the_central_box() {
        let options = ImageOptions {
            crop: Crop::RandomResized {
                scale: (1.0, 1.0),
                ratio: (3.0, 3.0),
            },
            flip: false,
            ..ImageOptions::new(32)
        };
        // A square image cannot hold a full-area 3:1 box: the central 3:1 one.
        let b = crop_box(&options, 300, 300, key(1));
        assert_eq!(
            b,
            CropBox {
                x: 0.0,
                y: 100.0,
                width: 300.0,
                height: 100.0,
                flip: false
            }
        );
    }

    #[test]
    fn the_centre_crop_is_resize_then_center_crop() {
        let options = ImageOptions {
            crop: Crop::Center { resize: 256 },
            ..ImageOptions::new(224)
        };
        // 512 x 384 -> Resize(256) makes 341 x 256; CenterCrop(224) takes
        // columns 58..282 and rows 16..240 of it.
        let b = crop_box(&options, 512, 384, key(0));
        let s = 384.0 / 256.0;
        assert!(!b.flip);
        assert!((b.y - 16.0 * s).abs() < 1e-9 && (b.height - 224.0 * s).abs() < 1e-9);
        let sx = 512.0 / 341.0;
        assert!((b.x - 58.0 * sx).abs() < 1e-9 && (b.width - 224.0 * sx).abs() < 1e-9);
    }
}
