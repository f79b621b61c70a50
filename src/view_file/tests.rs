use super::*;

fn fingerprint(n: u64) -> ShardFingerprint {
    ShardFingerprint {
        records: n,
        data_len: 10 * n,
        index_xxh3: 0x1234_5678_9abc_def0 ^ n,
        edges_xxh3: 0x0fed_cba9_8765_4321 ^ n,
    }
}

fn view(records: u64, indices: &[u64], expression: Option<&str>) -> View {
    let mut list = ViewRecords::new(records);
    for &index in indices {
        list.push(index).unwrap();
    }
    View {
        expression: expression.map(str::to_owned),
        binding: ViewBinding {
            records,
            shards: 3,
            last_shard: Some(fingerprint(records)),
        },
        indices: list.finish(),
    }
}

fn decode(bytes: Vec<u8>) -> Result<View, ViewFileError> {
    View::decode(Arc::new(bytes))
}

/// Rewrites the checksum of an edited file, as a hostile writer would.
fn reseal(bytes: &mut [u8]) {
    bytes[CHECKSUM_AT..CHECKSUM_AT + 8].fill(0);
    let sum = xxhash_rust::xxh3::xxh3_64(bytes);
    bytes[CHECKSUM_AT..CHECKSUM_AT + 8].copy_from_slice(&sum.to_le_bytes());
}

#[test]
fn round_trips_narrow_and_wide_with_and_without_an_expression() {
    let cases = [
        view(10, &[0, 3, 9], Some("label = 'cat'")),
        view(10, &[], None),
        view(0, &[], Some("")),
        view(
            5_000_000_000,
            &[1, 4_294_967_296, 4_999_999_999],
            Some("size > 1"),
        ),
    ];
    for original in cases {
        let bytes = original.encode();
        let width = original.indices.width();
        assert_eq!(
            width,
            if original.binding.records > 1 << 32 {
                8
            } else {
                4
            }
        );
        let expression = original.expression.as_deref().unwrap_or("");
        assert_eq!(
            bytes.len(),
            VIEW_HEADER_LEN + pad8(expression.len()) + width * original.indices.len()
        );
        let decoded = decode(bytes).unwrap();
        assert_eq!(decoded.expression, original.expression);
        assert_eq!(decoded.binding, original.binding);
        assert_eq!(
            decoded.indices.iter().collect::<Vec<_>>(),
            original.indices.iter().collect::<Vec<_>>()
        );
    }
}

#[test]
fn a_view_of_no_shards_has_no_fingerprint() {
    let mut empty = view(0, &[], None);
    empty.binding.shards = 0;
    empty.binding.last_shard = None;
    let decoded = decode(empty.encode()).unwrap();
    assert_eq!(decoded.binding.last_shard, None);
}

/// Every truncation and every flipped bit of a view file is refused, never
/// read as other records.
#[test]
fn every_truncation_and_bit_flip_is_refused() {
    let bytes = view(100, &[2, 50, 99], Some("a > 1")).encode();
    for len in 0..bytes.len() {
        assert!(decode(bytes[..len].to_vec()).is_err(), "truncated to {len}");
    }
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0; 4]);
    assert!(decode(longer).is_err());
    for at in 0..bytes.len() {
        for bit in 0..8 {
            let mut flipped = bytes.clone();
            flipped[at] ^= 1 << bit;
            assert!(decode(flipped).is_err(), "byte {at} bit {bit}");
        }
    }
}

/// A file whose checksum was recomputed after an edit is still checked:
/// indices out of order, repeated or past the count, and headers that lie.
#[test]
fn a_resealed_file_is_checked_against_itself() {
    let good = view(100, &[2, 50, 99], Some("a > 1")).encode();
    let start = VIEW_HEADER_LEN + 8;
    let message = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut bytes = good.clone();
        edit(&mut bytes);
        reseal(&mut bytes);
        decode(bytes).unwrap_err().0
    };
    let put = |bytes: &mut Vec<u8>, at: usize, n: u32| {
        bytes[at..at + 4].copy_from_slice(&n.to_le_bytes())
    };
    assert!(
        message(&|b| put(b, start + 4, 2)).contains("index 2 at position 1 does not follow 2"),
        "{}",
        message(&|b| put(b, start + 4, 2))
    );
    assert!(message(&|b| put(b, start + 4, 1)).contains("does not follow 2"));
    assert!(message(&|b| put(b, start + 8, 100))
        .contains("index 100 at position 2 is past the 100 records"));
    // Records shrunk below an index.
    assert!(message(&|b| b[16..24].copy_from_slice(&99u64.to_le_bytes())).contains("past the 99"));
    // More selected than the count, or than the file holds.
    assert!(
        message(&|b| b[32..40].copy_from_slice(&101u64.to_le_bytes()))
            .contains("101 records selected out of 100")
    );
    assert!(message(&|b| b[32..40].copy_from_slice(&4u64.to_le_bytes()))
        .contains("bytes, but its header makes it"));
    // Counts that would overflow a length.
    assert!(message(&|b| {
        b[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        b[12] |= FLAG_WIDE as u8;
        b[32..40].copy_from_slice(&(u64::MAX / 4).to_le_bytes());
    })
    .contains("more than 2^64"));
    // The width must follow the count.
    assert!(message(&|b| b[12] |= FLAG_WIDE as u8).contains("8-byte indices for a view over 100"));
    assert!(message(&|b| b[12] |= 4).contains("unknown flags"));
    assert!(message(&|b| b[8] = 2).contains("version 2"));
    assert!(
        message(&|b| b[40..48].copy_from_slice(&(1u64 << 40).to_le_bytes()))
            .contains("more than the 65536")
    );
    assert!(message(&|b| b[12] &= !(FLAG_EXPRESSION as u8)).contains("the flag saying it has one"));
    assert!(message(&|b| b[VIEW_HEADER_LEN] = 0xff).contains("not UTF-8"));
    assert!(message(&|b| b[VIEW_HEADER_LEN + 6] = 1).contains("padding"));
    assert!(message(&|b| b[90] = 1).contains("reserved"));
    assert!(message(&|b| b[..8].copy_from_slice(b"BCDINDX1")).contains("magic"));
}

#[test]
fn records_are_pushed_in_increasing_order_below_the_count() {
    let mut list = ViewRecords::new(10);
    list.push(3).unwrap();
    assert_eq!(
        list.push(3),
        Err(ViewRecordsError::NotIncreasing {
            index: 3,
            previous: 3
        })
    );
    assert_eq!(
        list.push(10),
        Err(ViewRecordsError::OutOfRange {
            index: 10,
            records: 10
        })
    );
    let sorted = ViewRecords::from_unsorted(10, vec![7, 1, 7, 4])
        .unwrap()
        .finish();
    assert_eq!(sorted.iter().collect::<Vec<_>>(), [1, 4, 7]);
    assert_eq!(sorted.position_of(4), Some(1));
    assert_eq!(sorted.position_of(5), None);
    assert_eq!(sorted.get(3), None);
    assert!(ViewRecords::from_unsorted(10, vec![1, 10]).is_err());
}

/// A view extended past 2^32 records widens its indices.
#[test]
fn extending_past_2_to_the_32_widens() {
    let narrow = view(100, &[5, 7], None).indices;
    let mut wide = ViewRecords::extending(&narrow, 5_000_000_000);
    wide.push(4_999_999_999).unwrap();
    assert!(wide.push(6).is_err());
    let wide = wide.finish();
    assert_eq!(wide.width(), 8);
    assert_eq!(wide.iter().collect::<Vec<_>>(), [5, 7, 4_999_999_999]);
    let same = ViewRecords::extending(&narrow, 200).finish();
    assert_eq!(same.as_bytes(), narrow.as_bytes());
}

#[test]
fn a_binding_holds_only_for_the_state_it_names() {
    let binding = ViewBinding {
        records: 10,
        shards: 2,
        last_shard: Some(fingerprint(4)),
    };
    let firsts = |s: u64| [0u64, 6, 10, 15][s as usize];
    let ok = |s: u64| -> Result<ShardFingerprint, ()> {
        assert_eq!(s, 1);
        Ok(fingerprint(4))
    };
    assert_eq!(binding.mismatch(15, 3, firsts, ok), Ok(None));
    assert_eq!(binding.mismatch(10, 2, firsts, ok), Ok(None));
    let fewer = binding.mismatch(9, 2, firsts, ok).unwrap().unwrap();
    assert!(
        fewer.contains("evaluated over 10 records in 2 shards, and the dataset has 9"),
        "{fewer}"
    );
    let moved = binding
        .mismatch(15, 3, |s| [0, 5, 9, 15][s as usize], ok)
        .unwrap()
        .unwrap();
    assert!(moved.contains("which now hold 9"), "{moved}");
    let other = binding
        .mismatch(15, 3, firsts, |_| Ok::<_, ()>(fingerprint(5)))
        .unwrap()
        .unwrap();
    assert!(other.contains("shard 1 is not the one"), "{other}");
}

/// Indices are checked a block of [`SCAN_BLOCK`] bytes at a time: an index
/// that does not follow the one before it is refused wherever it is, at the
/// first or last entry of a block as within one, in narrow and wide files.
#[test]
fn an_index_out_of_order_is_found_at_every_block_edge() {
    for (records, width) in [(1_000_000u64, 4usize), (5_000_000_000, 8)] {
        let per_block = SCAN_BLOCK / width;
        let count = 3 * per_block + 5;
        let indices: Vec<u64> = (0..count as u64).map(|i| 1 + i * 3).collect();
        let good = view(records, &indices, None).encode();
        assert!(decode(good.clone()).is_ok());
        let start = VIEW_HEADER_LEN;
        for position in [
            1,
            per_block - 1,
            per_block,
            per_block + 1,
            2 * per_block,
            count - 1,
        ] {
            for value in [indices[position - 1], indices[position - 1] - 1] {
                let mut bytes = good.clone();
                let at = start + position * width;
                bytes[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
                reseal(&mut bytes);
                let message = decode(bytes).unwrap_err().0;
                assert!(
                    message.contains(&format!(
                        "index {value} at position {position} does not follow"
                    )),
                    "width {width}, position {position}: {message}"
                );
            }
        }
    }
}
