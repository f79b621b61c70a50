//! Decodes every file of a directory tree (JPEGs, PNGs) as a training batch
//! would, on one thread, and prints the time per image: the cost `bcd-images`
//! pays per image, to set beside a whole-image decode (bench/read_bench.py's
//! `floor` prints torchvision's and Pillow's on the same files).
//!
//! cargo run --release -p bcd-images --example decode_files -- DIR [SIZE] [REPEATS]

use std::time::Instant;

use bcd_images::{decode_into, CropKey, ImageOptions};

fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("a directory")
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .expect("usage: decode_files DIR [SIZE] [REPEATS]");
    let size: u32 = args.next().map_or(224, |s| s.parse().expect("a size"));
    let repeats: usize = args.next().map_or(3, |s| s.parse().expect("a count"));
    let mut paths = Vec::new();
    files(std::path::Path::new(&dir), &mut paths);
    let values: Vec<Vec<u8>> = paths
        .iter()
        .map(|p| std::fs::read(p).expect("readable"))
        .collect();
    for dct_scaling in [false, true] {
        let options = ImageOptions {
            dct_scaling,
            channels_first: true,
            ..ImageOptions::new(size)
        };
        let mut out = vec![0u8; options.image_bytes()];
        let mut best = f64::INFINITY;
        for repeat in 0..repeats {
            let start = Instant::now();
            for (record, value) in values.iter().enumerate() {
                let key = CropKey {
                    seed: 0,
                    epoch: repeat as u64,
                    record: record as u64,
                };
                decode_into(value, &options, key, &mut out).expect("an image");
            }
            best = best.min(start.elapsed().as_secs_f64());
        }
        println!(
            "{} images, RandomResizedCrop({size}) + flip, dct_scaling={dct_scaling}: {:.3} ms per image, {:.0} images/s on one thread (best of {repeats})",
            values.len(),
            best / values.len() as f64 * 1e3,
            values.len() as f64 / best
        );
    }
}
