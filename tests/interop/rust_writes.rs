//! Rust writes, the reference reads.

use bcd::lz4_block::{self, Lz4Mode};
use bcd::{Compression, Dataset};

use bcd_test_support::{unhex_json, Rng};

use crate::checks::rust_extend;
use crate::corpus::{corpus, small_corpus};
use crate::harness::{
    assert_dump, decompress_step, dump_step, reference, Spec, DEFAULT_SHARDS, KEYED_LZ4,
    KEYED_UNCOMPRESSED, KEYLESS_LZ4, KEYLESS_UNCOMPRESSED, SMALL_SHARDS, V2, V3,
};

/// Rust writes a dataset in three extends (plus one that adds nothing), and an
/// empty one; both reference releases read back exactly the records, in order,
/// from the same number of shards. The extends of LZ4 datasets use each
/// compression mode: the default (what the reference writes), the adaptive one
/// (incompressible values as literal-only blocks) and the fast one.
fn reference_reads_what_rust_writes(spec: Spec) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rust");
    let empty_dir = tmp.path().join("rust-empty");
    let first = corpus(spec.keyed, "");
    let second = corpus(spec.keyed, "second/");
    let third = small_corpus(spec.keyed, "third/");

    let mut dataset = Dataset::create(&dir, spec.options(SMALL_SHARDS)).unwrap();
    rust_extend(&mut dataset, &first);
    rust_extend(&mut dataset, &[]);
    dataset.set_lz4_mode(Lz4Mode::Adaptive(9));
    rust_extend(&mut dataset, &second);
    dataset.set_lz4_mode(Lz4Mode::Fast(1));
    rust_extend(&mut dataset, &third);
    let expected = [first.as_slice(), &second, &third].concat();
    let shards = dataset.shards();
    assert!(
        shards > 10,
        "the corpus should span many shards, not {shards}"
    );
    if spec.compression == Compression::Lz4 {
        // The adaptive extend did store some values as literal-only blocks.
        let mut literal = Vec::new();
        let literal_blocks = (first.len()..first.len() + second.len())
            .filter(|&i| {
                lz4_block::literal_block_into(&expected[i].1, &mut literal);
                !expected[i].1.is_empty() && dataset.stored_at(i).unwrap() == literal
            })
            .count();
        assert!(literal_blocks >= 4, "{literal_blocks} literal-only blocks");
    }
    drop(dataset);
    Dataset::create(&empty_dir, spec.options(SMALL_SHARDS)).unwrap();

    for version in [V3, V2] {
        let results = reference(version, &[dump_step(&dir), dump_step(&empty_dir)]);
        let context = format!("reference {version} reading Rust's {}", spec.name());
        assert_dump(&results[0], spec, shards, &expected, &context);
        assert_dump(&results[1], spec, 0, &[], &format!("{context} (empty)"));
    }
}

#[test]
fn reference_reads_what_rust_writes_keyed_lz4() {
    reference_reads_what_rust_writes(KEYED_LZ4);
}

#[test]
fn reference_reads_what_rust_writes_keyed_uncompressed() {
    reference_reads_what_rust_writes(KEYED_UNCOMPRESSED);
}

#[test]
fn reference_reads_what_rust_writes_keyless_lz4() {
    reference_reads_what_rust_writes(KEYLESS_LZ4);
}

#[test]
fn reference_reads_what_rust_writes_keyless_uncompressed() {
    reference_reads_what_rust_writes(KEYLESS_UNCOMPRESSED);
}

/// `n` uint16 token ids uniform in GPT-2's vocabulary, little-endian: a
/// sequence of a Megatron `.bin` of random tokens (incompressible to LZ4).
fn random_tokens(rng: &mut Rng, n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|_| ((rng.below(50257)) as u16).to_le_bytes())
        .collect()
}

/// The literal-only blocks this project writes, at every boundary of the
/// literal-length encoding, and the adaptive mode's choice for values of each
/// kind: the reference's own `lz4.block.decompress` gives back each value.
#[test]
fn the_reference_decompresses_literal_only_and_adaptive_blocks() {
    let mut rng = Rng::new(23);
    let mut values: Vec<Vec<u8>> = [
        1usize,
        14,
        15,
        16,
        254,
        255,
        256,
        269,
        270,
        271,
        65_535,
        65_536,
        65_537,
        (1 << 20) + 3,
    ]
    .iter()
    .map(|&n| rng.bytes(n))
    .collect();
    let literal: Vec<Vec<u8>> = values
        .iter()
        .map(|value| {
            let mut stored = Vec::new();
            lz4_block::literal_block_into(value, &mut stored);
            stored
        })
        .collect();
    let kinds = [
        random_tokens(&mut rng, 3000),
        rng.text(5000),
        [rng.text(3000), rng.bytes(3000)].concat(),
        vec![0u8; 70_000],
        rng.bytes(100_000),
    ];
    let mut stored = literal;
    for value in kinds {
        let mut block = Vec::new();
        lz4_block::compress_into(&value, Lz4Mode::Adaptive(5), &mut block).unwrap();
        stored.push(block);
        values.push(value);
    }
    let steps: Vec<_> = stored.iter().map(|s| decompress_step(s)).collect();
    for version in [V3, V2] {
        let results = reference(version, &steps);
        for (value, result) in values.iter().zip(&results) {
            assert!(
                unhex_json(result) == *value,
                "reference {version}: {} bytes decompressed to other bytes",
                value.len()
            );
        }
    }
}

/// One shard holding values the default ingest mode stores as literals (noise,
/// random tokens, the tiniest values) beside values it compresses (text, tokens
/// that repeat) and empty ones: both reference releases read every record.
#[test]
fn the_reference_reads_a_shard_of_literal_and_compressed_values_mixed() {
    let mut rng = Rng::new(7);
    let mut records = Vec::new();
    for i in 0..60 {
        let (small, large) = (rng.below(40), rng.below(2) * 60_000);
        let len = rng.below(4000);
        let value = match i % 6 {
            0 => random_tokens(&mut rng, 64 + len),
            1 => rng.text(100 + 5 * len),
            2 => rng.bytes(small + large),
            3 => random_tokens(&mut rng, 30).repeat(1 + len % 60),
            4 => Vec::new(),
            _ => rng.bytes(1 + 50 * len),
        };
        records.push((format!("{i:03}").into_bytes(), value));
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mixed");
    let mut dataset = Dataset::create(&dir, KEYED_LZ4.options(DEFAULT_SHARDS)).unwrap();
    dataset.set_lz4_mode(Lz4Mode::Adaptive(5));
    rust_extend(&mut dataset, &records);
    assert_eq!(dataset.shards(), 1);
    let (mut literal, mut compressed) = (0, 0);
    for (index, (_, value)) in records.iter().enumerate() {
        let stored = dataset.stored_at(index).unwrap();
        assert!(stored.len() <= lz4_block::literal_block_len(value.len()));
        match lz4_block::literal_range(stored) {
            _ if value.is_empty() => {}
            Some(_) => literal += 1,
            None => compressed += 1,
        }
    }
    assert!(
        literal >= 25 && compressed >= 10,
        "{literal} literal-only and {compressed} compressed values"
    );
    drop(dataset);
    for version in [V3, V2] {
        let results = reference(version, &[dump_step(&dir)]);
        let context = format!("reference {version} reading a mixed shard");
        assert_dump(&results[0], KEYED_LZ4, 1, &records, &context);
    }
}
