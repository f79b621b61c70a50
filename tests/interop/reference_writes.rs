//! The reference writes, Rust reads.

use bcd::{Dataset, ManifestVersion};

use crate::checks::assert_rust_reads;
use crate::corpus::corpus;
use crate::harness::{
    assert_dump, create_step, dump_step, extend_step, reference, Spec, DEFAULT_SHARDS, KEYED_LZ4,
    KEYED_UNCOMPRESSED, KEYLESS_LZ4, KEYLESS_UNCOMPRESSED, SMALL_SHARDS, V2, V3,
};

/// Each reference release writes a dataset in two extends, and an empty one; Rust
/// reads back exactly the records through every read path, from the same number
/// of shards the reference itself maps.
fn rust_reads_what_reference_writes(spec: Spec) {
    let tmp = tempfile::tempdir().unwrap();
    let first = corpus(spec.keyed, "");
    let second = corpus(spec.keyed, "second/");
    let expected = [first.clone(), second.clone()].concat();

    for version in [V3, V2] {
        let dir = tmp.path().join(version);
        let empty_dir = tmp.path().join(format!("{version}-empty"));
        // 0.3.0 keeps max_shard_size in the manifest; 0.2.0 takes it per extend.
        let (at_create, per_extend) = match version {
            V3 => (Some(SMALL_SHARDS), None),
            _ => (None, Some(SMALL_SHARDS)),
        };
        let results = reference(
            version,
            &[
                create_step(&dir, spec, at_create),
                extend_step(&dir, spec.keyed, &first, per_extend),
                extend_step(&dir, spec.keyed, &second, per_extend),
                dump_step(&dir),
                create_step(&empty_dir, spec, at_create),
            ],
        );
        let context = format!("Rust reading reference {version}'s {}", spec.name());

        let dataset = Dataset::open(&dir).unwrap();
        assert_rust_reads(&dataset, spec, &expected, &context);
        // The reference reads its own writing back the same, from as many shards.
        assert_dump(&results[3], spec, dataset.shards(), &expected, &context);
        assert!(
            dataset.shards() > 10,
            "{context}: {} shards",
            dataset.shards()
        );
        let manifest = dataset.manifest();
        match version {
            V3 => assert_eq!(
                (manifest.version, manifest.max_shard_size),
                (ManifestVersion::V0_3, SMALL_SHARDS)
            ),
            _ => assert_eq!(
                (manifest.version, manifest.max_shard_size),
                (ManifestVersion::V0_2, DEFAULT_SHARDS)
            ),
        }

        let empty = Dataset::open(&empty_dir).unwrap();
        assert_rust_reads(&empty, spec, &[], &format!("{context} (empty)"));
        assert_eq!(empty.shards(), 0);
    }
}

#[test]
fn rust_reads_what_reference_writes_keyed_lz4() {
    rust_reads_what_reference_writes(KEYED_LZ4);
}

#[test]
fn rust_reads_what_reference_writes_keyed_uncompressed() {
    rust_reads_what_reference_writes(KEYED_UNCOMPRESSED);
}

#[test]
fn rust_reads_what_reference_writes_keyless_lz4() {
    rust_reads_what_reference_writes(KEYLESS_LZ4);
}

#[test]
fn rust_reads_what_reference_writes_keyless_uncompressed() {
    rust_reads_what_reference_writes(KEYLESS_UNCOMPRESSED);
}
