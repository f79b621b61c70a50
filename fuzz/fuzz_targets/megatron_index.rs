//! The Megatron `.idx` parser: arbitrary bytes never panic and never make it
//! allocate beyond them; an index it accepts has every sequence inside the
//! `.bin`, and the writer writes back the bytes of a non-multimodal index.
//!
//! Input: 8 bytes of the `.bin`'s size (little-endian, taken modulo 2^40), then
//! the `.idx` file's bytes.
#![no_main]

use bcd_converters::megatron_index::{write_index, MegatronIndex};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let bin_len = u64::from_le_bytes(data[..8].try_into().unwrap()) % (1 << 40);
    let bytes = data[8..].to_vec();
    let Ok(index) = MegatronIndex::parse(bytes.clone(), bin_len) else {
        return;
    };
    let size = index.dtype().size() as u64;
    let mut contiguous = true;
    let mut pointer = 0u64;
    for sequence in 0..index.sequences() {
        let end = index.pointer(sequence) + index.length(sequence) * size;
        assert!(end <= bin_len);
        contiguous &= index.pointer(sequence) == pointer;
        pointer = end;
    }
    if contiguous && !index.multimodal() {
        let lengths: Vec<i32> = (0..index.sequences())
            .map(|i| index.length(i) as i32)
            .collect();
        let starts: Vec<i64> = (0..index.documents())
            .map(|d| index.document_start(d))
            .collect();
        assert_eq!(write_index(index.dtype(), &lengths, &starts, None), bytes);
    }
});
