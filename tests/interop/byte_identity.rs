//! Byte identity: the same records give the same files, and the same LZ4 blocks,
//! whether Rust or the reference writes them.

use std::fs;

use bcd::lz4_block::{self, Lz4Mode};
use bcd::{Compression, CreateOptions, Dataset};
use bcd_test_support::{hex, snapshot, unhex_json, Rng};
use serde_json::Value;

use crate::checks::{assert_same_files, rust_extend, shard_file_count, snapshot_without_lock};
use crate::corpus::corpus;
use crate::harness::{
    compress_step, create_step, extend_step, reference, Spec, ALL_SPECS, KEYED_LZ4, KEYLESS_LZ4,
    SMALL_SHARDS, V2, V3,
};

/// The same records written by Rust with its default settings and by reference
/// 0.3.0 give identical directories: manifest.json and every .bin and .idx, byte
/// for byte (Rust adds only its empty lock file). Covers the default options, all
/// four settings with many shards, and an empty dataset.
#[test]
fn rust_and_reference_0_3_0_write_identical_files() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cases: Vec<(String, Spec, Option<u64>)> = vec![
        ("defaults".into(), KEYLESS_LZ4, None),
        ("keyed-defaults".into(), KEYED_LZ4, None),
    ];
    for spec in ALL_SPECS {
        cases.push((
            format!("{}-small-shards", spec.name()),
            spec,
            Some(SMALL_SHARDS),
        ));
    }

    let mut steps = Vec::new();
    for (name, spec, max_shard_size) in &cases {
        let (rust_dir, reference_dir) = (
            tmp.path().join(format!("rust-{name}")),
            tmp.path().join(format!("ref-{name}")),
        );
        let options = match max_shard_size {
            None => CreateOptions {
                keyed: spec.keyed,
                ..CreateOptions::default()
            },
            Some(size) => spec.options(*size),
        };
        let mut dataset = Dataset::create(&rust_dir, options).unwrap();
        steps.push(create_step(&reference_dir, *spec, *max_shard_size));
        for tag in ["", "second/"] {
            let records = corpus(spec.keyed, tag);
            rust_extend(&mut dataset, &records);
            steps.push(extend_step(&reference_dir, spec.keyed, &records, None));
        }
    }
    let empty = (tmp.path().join("rust-empty"), tmp.path().join("ref-empty"));
    Dataset::create(&empty.0, CreateOptions::default()).unwrap();
    steps.push(create_step(&empty.1, KEYLESS_LZ4, None));
    reference(V3, &steps);

    for (name, _, max_shard_size) in &cases {
        let rust_dir = tmp.path().join(format!("rust-{name}"));
        let reference_dir = tmp.path().join(format!("ref-{name}"));
        assert_same_files(&rust_dir, &reference_dir, name);
        let shards = shard_file_count(&snapshot(&reference_dir));
        match max_shard_size {
            None => assert_eq!(shards, 2, "{name}: one shard per extend"),
            Some(_) => assert!(shards > 10, "{name}: only {shards} shards"),
        }
    }
    assert_same_files(&empty.0, &empty.1, "empty");
    assert_eq!(
        fs::read_to_string(empty.1.join("manifest.json")).unwrap(),
        r#"{"keyed": false, "compression": "lz4", "max_shard_size": 1073741824, "shards": 0}"#
    );
}

/// Reference 0.2.0 writes the same shard files as Rust (given the same
/// max_shard_size per extend); only its manifest lacks max_shard_size.
#[test]
fn rust_and_reference_0_2_0_write_identical_shards() {
    let tmp = tempfile::tempdir().unwrap();
    let mut steps = Vec::new();
    for spec in ALL_SPECS {
        let rust_dir = tmp.path().join(format!("rust-{}", spec.name()));
        let reference_dir = tmp.path().join(format!("ref-{}", spec.name()));
        let mut dataset = Dataset::create(&rust_dir, spec.options(SMALL_SHARDS)).unwrap();
        steps.push(create_step(&reference_dir, spec, None));
        for tag in ["", "second/"] {
            let records = corpus(spec.keyed, tag);
            rust_extend(&mut dataset, &records);
            steps.push(extend_step(
                &reference_dir,
                spec.keyed,
                &records,
                Some(SMALL_SHARDS),
            ));
        }
    }
    reference(V2, &steps);

    for spec in ALL_SPECS {
        let rust_dir = tmp.path().join(format!("rust-{}", spec.name()));
        let reference_dir = tmp.path().join(format!("ref-{}", spec.name()));
        let mut rust = snapshot_without_lock(&rust_dir);
        let mut reference = snapshot(&reference_dir);
        let rust_manifest = String::from_utf8(rust.remove("manifest.json").unwrap()).unwrap();
        let reference_manifest =
            String::from_utf8(reference.remove("manifest.json").unwrap()).unwrap();
        let shards = shard_file_count(&reference);
        assert!(shards > 10, "{}: only {shards} shards", spec.name());
        let compression = match spec.compression {
            Compression::Lz4 => "\"lz4\"",
            Compression::None => "null",
        };
        let fields = format!("\"keyed\": {}, \"compression\": {compression}", spec.keyed);
        assert_eq!(
            reference_manifest,
            format!("{{{fields}, \"shards\": {shards}}}")
        );
        assert_eq!(
            rust_manifest,
            format!("{{{fields}, \"max_shard_size\": {SMALL_SHARDS}, \"shards\": {shards}}}")
        );
        if rust != reference {
            // Same names and bytes apart from the manifests: reuse the explanation.
            assert_same_files(&rust_dir, &reference_dir, &spec.name());
        }
    }
}

/// `lz4_block::compress_into` in the default mode produces exactly the stored
/// bytes of the reference's `_compress` (0.3.0 and 0.2.0) for a spread of inputs.
#[test]
fn lz4_compression_matches_reference() {
    let mut rng = Rng::from_tag("lz4");
    let mut inputs: Vec<Vec<u8>> = Vec::new();
    for len in 0..=40 {
        inputs.push(rng.text(len));
        inputs.push(vec![b'a'; len]);
    }
    for len in [1, 5, 12, 13, 17, 64, 1000, 65_535, 65_536, 65_537, 300_000] {
        inputs.push(rng.bytes(len));
    }
    for len in [4096, 65_536, 300_000] {
        inputs.push(rng.text(len));
    }
    inputs.push(vec![0; 1 << 20]);
    // Repeats beyond the 64 KiB window, and random data with zero runs.
    let block = rng.bytes(70_000);
    inputs.push([block.as_slice(), &block, &block[..1000]].concat());
    let mut patchy = rng.bytes(200_000);
    for start in (0..patchy.len()).step_by(5000) {
        patchy[start..start + 2000].fill(0);
    }
    inputs.push(patchy);
    inputs.push((0..=255u8).cycle().take(100_000).collect());
    // Short periods, which liblz4's HC match finder treats as repeating patterns.
    for period in [&b"ab"[..], b"abc", b"\0\0\0\x01", b"0123456789abcdef0123"] {
        inputs.push(period.iter().copied().cycle().take(50_000).collect());
        let mut mixed = rng.text(20_000);
        mixed.extend(period.iter().copied().cycle().take(10_000));
        mixed.extend(rng.bytes(5_000));
        inputs.push(mixed);
    }

    let steps: Vec<Value> = inputs.iter().map(|input| compress_step(input)).collect();
    for version in [V3, V2] {
        let results = reference(version, &steps);
        let mut ours = Vec::new();
        for (input, result) in inputs.iter().zip(&results) {
            lz4_block::compress_into(input, Lz4Mode::default(), &mut ours).unwrap();
            let theirs = unhex_json(result);
            if ours != theirs {
                let at = ours.iter().zip(&theirs).position(|(a, b)| a != b);
                panic!(
                    "reference {version}: compressing {} bytes starting {}: Rust made {} bytes, \
                     the reference {}, first differing at byte {at:?}",
                    input.len(),
                    hex(&input[..input.len().min(16)]),
                    ours.len(),
                    theirs.len()
                );
            }
            assert_eq!(lz4_block::decompress(&theirs).unwrap(), *input);
        }
    }
}
