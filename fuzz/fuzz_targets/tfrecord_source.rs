//! The TFRecord source: a file of arbitrary bytes (plain, or GZIP-compressed by
//! the harness) never panics, every error names the file, and no record is larger
//! than the decompressed file.
//!
//! Input: one flag byte, then the file's bytes. Flag bit 0: GZIP-compress them;
//! bit 1: store feature `f` of each Example; bit 2: key records by feature `k`.
#![no_main]

use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;

use bcd_converters::tfrecord_source::{TfRecordOptions, TfRecordSource};
use libfuzzer_sys::fuzz_target;

/// One directory per process: the file is rewritten for every input.
fn path() -> &'static PathBuf {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, path) = DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("input.tfrecord");
        (dir, path)
    });
    path
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, bytes)) = data.split_first() else {
        return;
    };
    let path = path();
    let file = if flags & 1 != 0 {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    } else {
        bytes.to_vec()
    };
    std::fs::write(path, &file).unwrap();
    let options = TfRecordOptions {
        feature: (flags & 2 != 0).then(|| "f".to_owned()),
        key_feature: (flags & 4 != 0).then(|| "k".to_owned()),
        // The prescan and the decoding of every feature as a field.
        fields: (flags & 8 != 0).then_some(bcd_converters::FieldSelection::All),
    };
    let source = TfRecordSource::new(std::slice::from_ref(path), options).unwrap();
    let mut total = 0usize;
    for record in source {
        match record {
            Ok(record) => {
                total += record.value.len() + record.key.len();
                // Frames are at least 16 bytes; a raw GZIP input may inflate, but
                // never past deflate's 1032:1 on this file.
                assert!(total <= bytes.len().max(file.len() * 1032));
            }
            Err(error) => {
                let message = error.to_string();
                assert!(message.contains(&*path.to_string_lossy()), "{message}");
            }
        }
    }
});
