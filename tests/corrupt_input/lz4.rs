//! (c) LZ4 values: `declared_len`/`decompress`/`decompress_into` on arbitrary
//! and mutated input, and round trips in every mode.

use bcd::lz4_block::{self, Lz4Mode};
use proptest::prelude::*;

use crate::config;
use crate::edits::{apply_byte_op, byte_op};

fn check_lz4_decode(stored: &[u8], buffer_len: usize) {
    let declared = lz4_block::declared_len(stored);
    match &declared {
        Ok(d) if stored.is_empty() => assert_eq!(*d, 0),
        Ok(d) => {
            assert!(stored.len() >= 4);
            let bound = 255 * (stored.len() as u64 - 4) + 64;
            assert!(
                *d as u64 <= bound,
                "declared {d} > {bound} for {} bytes",
                stored.len()
            );
            let prefix = u32::from_le_bytes(stored[..4].try_into().unwrap());
            assert_eq!(*d, prefix as usize);
        }
        Err(_) => assert!(!stored.is_empty()),
    }
    if (1..4).contains(&stored.len()) {
        assert!(declared.is_err());
    }

    let decoded = lz4_block::decompress(stored);
    match (&decoded, &declared) {
        (Ok(v), Ok(d)) => assert_eq!(v.len(), *d),
        (Ok(_), Err(e)) => panic!("decompress accepted what declared_len rejected: {e:?}"),
        (Err(_), _) => {}
    }

    let mut buffer = vec![0xAB; buffer_len];
    let result = lz4_block::decompress_into(stored, &mut buffer);
    assert!(
        buffer.len() >= buffer_len,
        "decompress_into shrank the buffer"
    );
    match (&result, &decoded) {
        (Ok(n), Ok(v)) => assert_eq!(&buffer[..*n], &v[..]),
        (Err(a), Err(b)) => assert_eq!(a, b),
        (a, b) => panic!("decompress_into gave {a:?}, decompress gave {b:?}"),
    }
}

fn lz4_mode() -> impl Strategy<Value = Lz4Mode> {
    prop_oneof![
        4 => (1i32..=12).prop_map(Lz4Mode::High),
        2 => (1i32..=16).prop_map(Lz4Mode::Fast),
        1 => prop::sample::select(vec![
            Lz4Mode::High(0),
            Lz4Mode::High(-7),
            Lz4Mode::High(13),
            Lz4Mode::High(i32::MAX),
            Lz4Mode::High(i32::MIN),
            Lz4Mode::Fast(0),
            Lz4Mode::Fast(-3),
            Lz4Mode::Fast(70_000),
            Lz4Mode::Fast(i32::MAX),
            Lz4Mode::Fast(i32::MIN),
        ]),
    ]
}

/// Values that compress (runs and repeated patterns) as well as noise.
pub fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop::collection::vec(any::<u8>(), 0..48),
        2 => (any::<u8>(), 0usize..120).prop_map(|(b, n)| vec![b; n]),
        2 => (prop::collection::vec(any::<u8>(), 1..6), 1usize..30)
            .prop_map(|(pattern, n)| pattern.repeat(n)),
        1 => Just(Vec::new()),
    ]
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn lz4_arbitrary_bytes_never_panic(
        stored in prop::collection::vec(any::<u8>(), 0..200),
        buffer_len in 0usize..64,
    ) {
        check_lz4_decode(&stored, buffer_len);
    }

    /// A plausible size prefix, so the block itself reaches the decoder.
    #[test]
    fn lz4_plausible_prefix_arbitrary_block_never_panics(
        (declared, block) in prop::collection::vec(any::<u8>(), 0..120)
            .prop_flat_map(|block| (0..=255 * block.len() as u32 + 70, Just(block))),
        buffer_len in 0usize..64,
    ) {
        let mut stored = declared.to_le_bytes().to_vec();
        stored.extend_from_slice(&block);
        check_lz4_decode(&stored, buffer_len);
    }

    #[test]
    fn lz4_mutated_valid_values_never_panic(
        value in value(),
        mode in lz4_mode(),
        ops in prop::collection::vec(byte_op(), 1..4),
        buffer_len in 0usize..200,
    ) {
        let mut stored = Vec::new();
        lz4_block::compress_into(&value, mode, &mut stored).unwrap();
        for op in &ops {
            apply_byte_op(&mut stored, op);
        }
        check_lz4_decode(&stored, buffer_len);
    }

    #[test]
    fn lz4_round_trips_in_every_mode(value in value(), mode in lz4_mode()) {
        let mut stored = vec![1, 2, 3];
        lz4_block::compress_into(&value, mode, &mut stored).unwrap();
        if value.is_empty() {
            prop_assert!(stored.is_empty());
        } else {
            prop_assert_eq!(&stored[..4], &(value.len() as u32).to_le_bytes()[..]);
        }
        prop_assert_eq!(lz4_block::declared_len(&stored).unwrap(), value.len());
        prop_assert_eq!(lz4_block::decompress(&stored).unwrap(), value.clone());
        let mut buffer = vec![9; 3];
        let n = lz4_block::decompress_into(&stored, &mut buffer).unwrap();
        prop_assert_eq!(&buffer[..n], &value[..]);
        check_lz4_decode(&stored, 0);
    }
}

#[test]
fn lz4_hostile_prefixes_at_the_bound() {
    for block_len in [0usize, 1, 2, 5, 100] {
        let block = vec![0u8; block_len];
        let bound = 255 * block_len as u64 + 64;
        for declared in [bound - 1, bound, bound + 1, u32::MAX as u64] {
            let Ok(declared) = u32::try_from(declared) else {
                continue;
            };
            let mut stored = declared.to_le_bytes().to_vec();
            stored.extend_from_slice(&block);
            check_lz4_decode(&stored, 0);
            assert_eq!(
                lz4_block::declared_len(&stored).is_ok(),
                declared as u64 <= bound
            );
        }
    }
}
