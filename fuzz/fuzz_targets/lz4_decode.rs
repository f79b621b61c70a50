//! The LZ4 value codec: decoding arbitrary bytes never panics and never declares
//! more than a block can hold; a block read in place as literals decodes to those
//! bytes; compressing arbitrary bytes in any mode round trips.
#![no_main]

use bcd::lz4_block::{self, Lz4Mode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // 1. The input as a stored value.
    let declared = lz4_block::declared_len(data);
    match &declared {
        Ok(d) if data.is_empty() => assert_eq!(*d, 0),
        Ok(d) => {
            assert!(data.len() >= 4);
            assert!(*d as u64 <= 255 * (data.len() as u64 - 4) + 64);
        }
        Err(_) => assert!(!data.is_empty()),
    }
    let decoded = lz4_block::decompress(data);
    if let Ok(v) = &decoded {
        assert_eq!(Ok(v.len()), declared.clone());
    }
    // A reused buffer longer or shorter than the value: same answer, never shrunk.
    let buffer_len = data.first().map_or(0, |&b| b as usize);
    let mut buffer = vec![0xAB; buffer_len];
    match (lz4_block::decompress_into(data, &mut buffer), &decoded) {
        (Ok(n), Ok(v)) => assert_eq!(&buffer[..n], &v[..]),
        (Err(a), Err(b)) => assert_eq!(&a, b),
        (a, b) => panic!("decompress_into gave {a:?}, decompress gave {b:?}"),
    }
    assert!(buffer.len() >= buffer_len);
    // A literal-only block is read in place: exactly what decoding gives.
    if let Some(range) = lz4_block::literal_range(data) {
        assert_eq!(decoded.as_deref().expect("a literal block decodes"), &data[range]);
    }

    // 2. The input as a value to store: the first byte picks the mode.
    let (mode, value) = match data.split_first() {
        Some((&m, rest)) => {
            let level = (m & 0x3f) as i32 - 16; // out-of-range levels included
            let mode = if m & 0x80 != 0 {
                Lz4Mode::Adaptive(level)
            } else if m & 0x40 != 0 {
                Lz4Mode::Fast(level)
            } else {
                Lz4Mode::High(level)
            };
            (mode, rest)
        }
        None => (Lz4Mode::default(), data),
    };
    let mut stored = Vec::new();
    lz4_block::compress_into(value, mode, &mut stored).expect("small values compress");
    if value.is_empty() {
        assert!(stored.is_empty());
    }
    assert_eq!(lz4_block::declared_len(&stored), Ok(value.len()));
    assert_eq!(lz4_block::decompress(&stored).expect("round trip"), value);
    if let Lz4Mode::Adaptive(_) = mode {
        assert!(stored.len() <= lz4_block::literal_block_len(value.len()));
    }
    // The batch encoder stores the same bytes, with its parts in order.
    let many = lz4_block::compress_many(&[value], mode, 2).expect("small values compress");
    assert_eq!(many[0].parts(value).concat(), stored);
});
