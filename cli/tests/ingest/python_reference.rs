//! The Python reference reads what ingest wrote.

use bcd::Dataset;
use bcd_test_support::{hex, reference_batch, Rng};
use serde_json::{json, Value};

use crate::common::*;
use crate::harness::{as_dump, fixture_files, mixed_records, tar_of};
use crate::ingest;

/// Checks that `stored` is `value` as a literal-only LZ4 block: size prefix, one
/// token 0xF0, the literal length in 255-steps, the bytes verbatim.
fn assert_literal_only_block(stored: &[u8], value: &[u8]) {
    let mut wanted = (value.len() as u32).to_le_bytes().to_vec();
    wanted.push(0xF0);
    let mut rest = value.len() - 15;
    while rest >= 255 {
        wanted.push(255);
        rest -= 255;
    }
    wanted.push(rest as u8);
    wanted.extend_from_slice(value);
    assert!(stored == wanted, "not stored as a literal-only LZ4 block");
}

#[test]
fn python_reference_reads_what_ingest_wrote_at_every_level_and_without_compression() {
    let dir = tempfile::tempdir().unwrap();
    let random = Rng::new(100).bytes(100 * 1024);
    let mut source = fixture_files("pax.tar");
    source.push((b"random-100k.bin".to_vec(), random.clone()));
    source.extend(mixed_records(30, 5));
    let archive = dir.path().join("source.tar");
    std::fs::write(&archive, tar_of(&source)).unwrap();

    let settings: [(&str, &[&str]); 4] = [
        ("default", &[]),
        ("reference", &["--level", "reference"]),
        ("fast", &["--level", "fast"]),
        ("none", &["--compression", "none"]),
    ];
    let mut steps = Vec::new();
    for (name, extra) in settings {
        let ds = dir.path().join(name);
        let summary = ingest(&[s(&archive)], &ds, extra);
        assert_eq!(summary["records"], source.len(), "{name}");
        steps.push(json!({"command": "dump", "path": s(&ds)}));
    }
    // The reference writes the same records itself, for the byte comparison below.
    let by_reference = dir.path().join("by-reference");
    steps.push(json!({"command": "create", "path": s(&by_reference), "keyed": true}));
    let input: Vec<Value> = source
        .iter()
        .map(|(k, v)| json!([hex(k), hex(v)]))
        .collect();
    steps.push(json!({"command": "extend", "path": s(&by_reference), "input": input}));
    let results = reference_batch("0.3.0", &steps);

    for ((name, _), dump) in settings.iter().zip(&results) {
        let compression = if *name == "none" {
            json!(null)
        } else {
            json!("lz4")
        };
        assert_eq!(dump["keyed"], true, "{name}");
        assert_eq!(dump["compression"], compression, "{name}");
        assert!(
            dump["records"] == as_dump(&source),
            "{name}: the reference reads other records than the source's"
        );
    }

    // The default adaptive mode stores the random member as literals only.
    let default = Dataset::open(dir.path().join("default")).unwrap();
    let index = default.position(b"random-100k.bin").unwrap().unwrap();
    assert_literal_only_block(default.stored_at(index).unwrap(), &random);
    // --level reference writes the reference's bytes.
    for file in ["000000.bin", "000000.idx", "manifest.json"] {
        assert!(
            std::fs::read(dir.path().join("reference").join(file)).unwrap()
                == std::fs::read(by_reference.join(file)).unwrap(),
            "--level reference: {file} differs from the reference's"
        );
    }
}
