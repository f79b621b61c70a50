//! The decoded part of an image, and where the kept box lies in it.

use crate::crop_box::CropBox;

/// The decoded part of an image: `height` rows of `width` RGB pixels, whose
/// top-left pixel is (`left`, `top`) of the image scaled by `1 / denom`.
pub(crate) struct Region {
    pub pixels: Vec<u8>,
    pub width: usize,
    pub height: usize,
    pub left: usize,
    pub top: usize,
    pub denom: u32,
}

impl Region {
    /// `kept` (in the full-size image's pixels) in this region's pixels:
    /// left, top, width, height.
    pub fn box_within(&self, kept: &CropBox) -> (f64, f64, f64, f64) {
        let d = self.denom as f64;
        let left = (kept.x / d - self.left as f64).max(0.0);
        let top = (kept.y / d - self.top as f64).max(0.0);
        let width = (kept.width / d).min(self.width as f64 - left);
        let height = (kept.height / d).min(self.height as f64 - top);
        (left, top, width, height)
    }
}
