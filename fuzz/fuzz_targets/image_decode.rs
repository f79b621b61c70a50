//! Image values (bcd-images): decoding arbitrary bytes as a JPEG or PNG, with
//! any crop, flip, layout and DCT scaling, never panics, never writes outside
//! its output, and either fills the output or fails with a message.
#![no_main]

use bcd_images::{decode_into, Crop, CropKey, ImageOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Byte 0: crop (bits 0-1), flip (2), channels first (3), DCT scaling (4);
    // byte 1: output side 1..=64; byte 2: the record; the rest is the value.
    let [flags, side, record, ref value @ ..] = *data else { return };
    let side = u32::from(side % 64) + 1;
    let crop = match flags & 3 {
        0 => Crop::RandomResized { scale: (0.08, 1.0), ratio: (0.75, 4.0 / 3.0) },
        1 => Crop::Center { resize: side + u32::from(flags >> 5) },
        2 => Crop::Resize,
        _ => Crop::RandomResized { scale: (1.0, 1.0), ratio: (5.0, 9.0) }, // the fallback box
    };
    let options = ImageOptions {
        size: (side, side + u32::from(flags >> 6)),
        crop,
        flip: flags & 4 != 0,
        channels_first: flags & 8 != 0,
        dct_scaling: flags & 16 != 0,
    };
    options.validate().expect("valid options");
    // A guard byte past the output: decoding writes exactly the output.
    let mut out = vec![0xA5u8; options.image_bytes() + 1];
    let key = CropKey { seed: 1, epoch: 2, record: u64::from(record) };
    let (image, guard) = out.split_at_mut(options.image_bytes());
    if let Err(error) = decode_into(value, &options, key, image) {
        assert!(!error.to_string().is_empty());
    }
    assert_eq!(guard, [0xA5]);
});
