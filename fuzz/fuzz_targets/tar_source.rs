//! The tar source (`TarSource::from_reader`) on arbitrary bytes: every record and
//! the error that ends the source, never a panic, a hang, or an allocation beyond
//! the limits (run with `-malloc_limit_mb=512` so a memory bomb is a crash).
//!
//! Input layout: one flag byte, then the archive.
//!
//! * bit 0: fix the checksum of every 512-byte block of the archive (as a writer
//!   would; a data block gets garbage in bytes 148..156, which does no harm), so
//!   that most headers parse and the fuzzer reaches names, PAX records, sizes and
//!   sparse maps;
//! * bit 1: compress the archive with zstd, bit 2: with gzip (after bit 0), so the
//!   decoders run on well-formed frames (raw inputs with their magic bytes reach
//!   them on malformed ones);
//! * bit 3: group members into WebDataset samples (`samples.rs`) with JSON fields,
//!   bit 4: and skip bad samples.
//!
//! What holds: every record has a non-empty key of at most `MAX_NAME_BYTES` and a
//! value of at most `MAX_MEMBER_SIZE`, no longer than the input unless compressed;
//! its origin names the archive; the error, if any, names the archive too; and
//! after an error the source yields nothing more. A sample's fields end with its
//! value's extension (the member count is bounded by `MAX_SAMPLE_MEMBERS`, which
//! the tests check).
#![no_main]

use std::io::{Cursor, Write};

use bcd_converters::compression::Compression;
use bcd_converters::samples::{SampleOptions, VALUE_EXT_FIELD};
use bcd_converters::tar_source::{TarOptions, TarSource, MAX_MEMBER_SIZE, MAX_NAME_BYTES};
use bcd_converters::{FieldValue, Origin, SourceError};
use libfuzzer_sys::fuzz_target;

const NAME: &str = "fuzz.tar";

fn fix_checksums(archive: &mut [u8]) {
    for block in archive.chunks_exact_mut(512) {
        block[148..156].copy_from_slice(b"        ");
        let sum: u32 = block.iter().map(|&b| u32::from(b)).sum();
        block[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mut archive = rest.to_vec();
    if flags & 1 != 0 {
        fix_checksums(&mut archive);
    }
    // Raw inputs with a gzip or zstd magic are decompressed too.
    let compressed = flags & 6 != 0 || Compression::sniff(&archive) != Compression::None;
    if flags & 2 != 0 {
        archive = zstd::encode_all(&archive[..], 1).expect("zstd in memory");
    }
    if flags & 4 != 0 {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(&archive).expect("gzip in memory");
        archive = encoder.finish().expect("gzip in memory");
    }
    let input_len = archive.len();
    let options = TarOptions {
        samples: (flags & 8 != 0).then(|| SampleOptions {
            json_fields: true,
            skip_bad_samples: flags & 16 != 0,
            ..SampleOptions::default()
        }),
    };
    let samples = options.samples.is_some();
    let mut source =
        TarSource::from_reader_with_options(NAME, Box::new(Cursor::new(archive)), &options)
            .expect("starting the reader thread");
    while let Some(item) = source.next() {
        match item {
            Ok(record) => {
                assert!(!record.key.is_empty() && record.key != b".");
                assert!(record.key.len() as u64 <= MAX_NAME_BYTES);
                assert!(record.value.len() as u64 <= MAX_MEMBER_SIZE);
                assert!(compressed || record.value.len() <= input_len);
                match &record.origin {
                    Origin::Member { archive, .. } => assert_eq!(archive, NAME),
                    other => panic!("origin {other:?}"),
                }
                if samples {
                    let (last, _) = record.fields.as_slice().last().expect("the value's extension");
                    assert_eq!(&**last, VALUE_EXT_FIELD);
                    let extension = record.fields.get(VALUE_EXT_FIELD);
                    assert!(matches!(extension, Some(FieldValue::String(_))));
                } else {
                    assert!(record.fields.is_empty());
                }
            }
            Err(error) => {
                let message = error.to_string();
                assert!(
                    matches!(
                        error,
                        SourceError::Corrupt { .. }
                            | SourceError::Usage(_)
                            | SourceError::Io { .. }
                    ) || (samples && matches!(error, SourceError::Invalid { .. })),
                    "{error:?}"
                );
                assert!(message.starts_with(NAME), "{message}");
                assert!(source.next().is_none(), "records after the error");
                break;
            }
        }
    }
});
