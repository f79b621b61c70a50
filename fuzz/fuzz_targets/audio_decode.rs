//! Audio values (bcd-images' audio): decoding arbitrary bytes as a WAV file,
//! with any crop, output channels and length, never panics, never writes
//! outside its output, allocates nothing a chunk declares, and either fills
//! the output (the frames it reports, zeros after them) or fails with a message.
#![no_main]

use bcd_images::{decode_audio_into, AudioCrop, AudioOptions, CropKey};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Byte 0: crop (bits 0-1), output channels 1..=4 (bits 2-3), a required
    // sample rate of 16 kHz (bit 4); byte 1: output frames 1..=256; byte 2:
    // the record; the rest is the value.
    let [flags, frames, record, ref value @ ..] = *data else { return };
    let crop = match flags & 3 {
        0 => AudioCrop::Start,
        1 => AudioCrop::Center,
        _ => AudioCrop::Random,
    };
    let options = AudioOptions {
        frames: u32::from(frames) + 1,
        channels: u16::from((flags >> 2) & 3) + 1,
        crop,
        sample_rate: (flags & 16 != 0).then_some(16_000),
    };
    options.validate().expect("valid options");
    // A guard float past the output: decoding writes exactly the output.
    let floats = options.clip_floats();
    let mut out = vec![f32::NAN; floats + 1];
    let key = CropKey { seed: 1, epoch: 2, record: u64::from(record) };
    let (clip, guard) = out.split_at_mut(floats);
    match decode_audio_into(value, &options, key, clip) {
        Ok(decoded) => {
            assert!(decoded.frames <= options.frames);
            let frames = options.frames as usize;
            for row in clip.chunks_exact(frames) {
                assert!(row[decoded.frames as usize..].iter().all(|&v| v == 0.0));
            }
        }
        Err(error) => assert!(!error.to_string().is_empty()),
    }
    assert!(guard[0].is_nan());
});
