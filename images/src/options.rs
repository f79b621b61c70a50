//! What to make of each image: the output size, the crop, the flip, the layout.

use crate::error::OptionsError;

/// How the part of the image that is kept is chosen.
#[derive(Clone, Debug, PartialEq)]
pub enum Crop {
    /// torchvision's `RandomResizedCrop`: a box of `scale` of the image's area
    /// (drawn uniformly) and aspect ratio in `ratio` (drawn log-uniformly), at a
    /// uniform position; ten tries, then the central box the ratio allows.
    RandomResized {
        /// Range of the box's share of the image's area, `0 < low <= high <= 1`.
        scale: (f64, f64),
        /// Range of the box's width / height, `0 < low <= high`.
        ratio: (f64, f64),
    },
    /// Evaluation: the image resized so that its shorter side is `resize`, then
    /// the central output-sized box (torchvision's `Resize(resize)` then
    /// `CenterCrop(size)`), done as one resampling of that box.
    Center {
        /// The shorter side after the resize, at least the output's longer side.
        resize: u32,
    },
    /// The whole image resized to the output size (aspect ratio not kept).
    Resize,
}

/// What to make of each image. Build with [`ImageOptions::new`] and check with
/// [`ImageOptions::validate`].
#[derive(Clone, Debug, PartialEq)]
pub struct ImageOptions {
    /// Output height and width in pixels.
    pub size: (u32, u32),
    /// How the kept box is chosen.
    pub crop: Crop,
    /// Flip horizontally with probability 1/2 (drawn with the crop box).
    pub flip: bool,
    /// Write `3 x H x W` (channels first, as torchvision's tensors) instead of
    /// `H x W x 3`.
    pub channels_first: bool,
    /// Let libjpeg decode at 1/2, 1/4 or 1/8 scale (in the DCT domain) when
    /// the box is still at least the output size at that scale. Off, every
    /// JPEG is decoded at full size (slower; closest to decode-then-resize).
    pub dct_scaling: bool,
}

impl ImageOptions {
    /// `size` x `size` random resized crops with torchvision's defaults
    /// (`scale=(0.08, 1)`, `ratio=(3/4, 4/3)`), flipped at random, channels
    /// last, DCT scaling on.
    pub fn new(size: u32) -> ImageOptions {
        ImageOptions {
            size: (size, size),
            crop: Crop::RandomResized {
                scale: (0.08, 1.0),
                ratio: (3.0 / 4.0, 4.0 / 3.0),
            },
            flip: true,
            channels_first: false,
            dct_scaling: true,
        }
    }

    /// Bytes one output image takes: `height * width * 3`.
    pub fn image_bytes(&self) -> usize {
        self.size.0 as usize * self.size.1 as usize * 3
    }

    /// Refuses what cannot be done, naming the option.
    pub fn validate(&self) -> Result<(), OptionsError> {
        let (height, width) = self.size;
        if height == 0 || width == 0 || height > MAX_SIDE || width > MAX_SIDE {
            return Err(OptionsError {
                option: "size",
                reason: format!("{height} x {width}: each side must be 1..={MAX_SIDE}"),
            });
        }
        match self.crop {
            Crop::RandomResized { scale, ratio } => {
                let ordered = |(low, high): (f64, f64)| {
                    low.is_finite() && high.is_finite() && 0.0 < low && low <= high
                };
                if !ordered(scale) || scale.1 > 1.0 {
                    return Err(OptionsError {
                        option: "scale",
                        reason: format!("{scale:?}: expected 0 < low <= high <= 1"),
                    });
                }
                if !ordered(ratio) {
                    return Err(OptionsError {
                        option: "ratio",
                        reason: format!("{ratio:?}: expected 0 < low <= high"),
                    });
                }
            }
            Crop::Center { resize } => {
                if resize < height.max(width) || resize > MAX_SIDE {
                    return Err(OptionsError {
                        option: "resize",
                        reason: format!(
                            "{resize}: the shorter side after the resize must be at least the output's longer side ({}) and at most {MAX_SIDE}",
                            height.max(width)
                        ),
                    });
                }
            }
            Crop::Resize => {}
        }
        Ok(())
    }
}

/// The largest output side accepted.
pub const MAX_SIDE: u32 = 8192;
