//! Rust writes, the reference reads.

use bcd::lz4_block::{self, Lz4Mode};
use bcd::{Compression, Dataset};

use crate::checks::rust_extend;
use crate::corpus::{corpus, small_corpus};
use crate::harness::{
    assert_dump, dump_step, reference, Spec, KEYED_LZ4, KEYED_UNCOMPRESSED, KEYLESS_LZ4,
    KEYLESS_UNCOMPRESSED, SMALL_SHARDS, V2, V3,
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
