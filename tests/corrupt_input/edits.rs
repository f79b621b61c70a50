//! Strategies shared by the sections: edits of a byte string, and manifests
//! that get past the JSON parser.

use proptest::prelude::*;
use proptest::sample::Index;

/// An edit of a byte string.
#[derive(Clone, Debug)]
pub enum ByteOp {
    Flip(Index, u8),
    Set(Index, u8),
    /// Overwrites 4 bytes at a 4-aligned offset: in an .idx file, one size.
    SetU32(Index, u32),
    Insert(Index, Vec<u8>),
    Remove(Index, usize),
    Truncate(Index),
    Append(Vec<u8>),
    Replace(Vec<u8>),
}

pub fn interesting_u32() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0u32),
        Just(1u32),
        Just(u32::MAX),
        Just(u32::MAX - 1),
        Just(i32::MAX as u32),
        Just(0x7E00_0000u32),
        0u32..80,
        any::<u32>(),
    ]
}

pub fn byte_op() -> impl Strategy<Value = ByteOp> {
    prop_oneof![
        3 => (any::<Index>(), 0u8..8).prop_map(|(i, bit)| ByteOp::Flip(i, bit)),
        2 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| ByteOp::Set(i, b)),
        3 => (any::<Index>(), interesting_u32()).prop_map(|(i, v)| ByteOp::SetU32(i, v)),
        1 => (any::<Index>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(i, b)| ByteOp::Insert(i, b)),
        1 => (any::<Index>(), 1usize..9).prop_map(|(i, n)| ByteOp::Remove(i, n)),
        2 => any::<Index>().prop_map(ByteOp::Truncate),
        1 => prop::collection::vec(any::<u8>(), 1..12).prop_map(ByteOp::Append),
        1 => prop::collection::vec(any::<u8>(), 0..40).prop_map(ByteOp::Replace),
    ]
}

pub fn apply_byte_op(bytes: &mut Vec<u8>, op: &ByteOp) {
    let len = bytes.len();
    match op {
        ByteOp::Flip(i, bit) if len > 0 => bytes[i.index(len)] ^= 1 << bit,
        ByteOp::Set(i, b) if len > 0 => bytes[i.index(len)] = *b,
        ByteOp::SetU32(i, v) if len >= 4 => {
            let at = i.index(len / 4) * 4;
            bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
        ByteOp::SetU32(_, v) => bytes.extend_from_slice(&v.to_le_bytes()),
        ByteOp::Insert(i, b) => {
            let at = i.index(len + 1);
            bytes.splice(at..at, b.iter().copied());
        }
        ByteOp::Remove(i, n) if len > 0 => {
            let at = i.index(len);
            let end = (at + n).min(len);
            bytes.drain(at..end);
        }
        ByteOp::Truncate(i) => bytes.truncate(i.index(len + 1)),
        ByteOp::Append(b) => bytes.extend_from_slice(b),
        ByteOp::Replace(b) => *bytes = b.clone(),
        // Edits of a byte that does not exist.
        ByteOp::Flip(..) | ByteOp::Set(..) | ByteOp::Remove(..) => {}
    }
}

/// Manifests that get past the JSON parser: every field of either reference layout,
/// with plausible and implausible values, missing, extra or duplicated fields, in
/// any order.
pub fn manifest_text() -> impl Strategy<Value = String> {
    fn one_of(options: &[&'static str]) -> impl Strategy<Value = String> {
        prop::sample::select(options.to_vec()).prop_map(str::to_owned)
    }
    let keyed = prop_oneof![
        6 => one_of(&["true", "false"]),
        1 => one_of(&["null", "1", "0", "\"true\"", "[]"]),
    ];
    let compression = prop_oneof![
        6 => one_of(&["null", "\"lz4\""]),
        1 => one_of(&["\"LZ4\"", "\"zstd\"", "\"\"", "0", "{}", "false"]),
    ];
    let number = prop_oneof![
        4 => (0u64..6).prop_map(|n| n.to_string()),
        2 => (1u64..200).prop_map(|n| n.to_string()),
        1 => one_of(&[
            "1073741824",
            "18446744073709551615",
            "18446744073709551616",
            "-1",
            "-0",
            "0.0",
            "1.0",
            "2e0",
            "1e400",
            "true",
            "null",
            "\"1\"",
        ]),
    ];
    let max_shard_size = prop::option::weighted(0.8, number.clone());
    let extra = prop::option::weighted(
        0.15,
        (
            one_of(&["keyed", "shards", "max_shard_size", "x", ""]),
            number.clone(),
        ),
    );
    (
        keyed,
        compression,
        max_shard_size,
        number,
        extra,
        any::<bool>(),
    )
        .prop_flat_map(|(keyed, compression, max, shards, extra, compact)| {
            let mut fields = vec![
                ("keyed".to_owned(), keyed),
                ("compression".to_owned(), compression),
                ("shards".to_owned(), shards),
            ];
            if let Some(max) = max {
                fields.push(("max_shard_size".to_owned(), max));
            }
            if let Some(extra) = extra {
                fields.push(extra);
            }
            Just(fields).prop_shuffle().prop_map(move |fields| {
                let sep = if compact { "," } else { ", " };
                let colon = if compact { ":" } else { ": " };
                let body: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| format!("\"{k}\"{colon}{v}"))
                    .collect();
                format!("{{{}}}", body.join(sep))
            })
        })
}
