//! The datasets under fixtures/reference/ were written by the real Python reference
//! releases (fixtures/make_reference_datasets.py); expected.json lists their records.
//! These tests need no Python: they read the committed bytes.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use bcd::{Compression, CreateOptions, Dataset, ManifestVersion};
use bcd_test_support::{read_all, unhex_json, Record};
use serde_json::Value;

struct Case {
    name: String,
    dir: PathBuf,
    version: String,
    keyed: bool,
    compression: Compression,
    shards: u64,
    /// (key, value); keys empty for keyless cases.
    records: Vec<Record>,
}

fn cases() -> Vec<Case> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/reference");
    let expected: BTreeMap<String, Value> =
        serde_json::from_slice(&fs::read(root.join("expected.json")).unwrap()).unwrap();
    assert_eq!(expected.len(), 8, "two versions x keyed/keyless x lz4/none");
    expected
        .into_iter()
        .map(|(name, case)| {
            let keyed = case["keyed"].as_bool().unwrap();
            let records = case["records"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| match keyed {
                    true => (unhex_json(&r[0]), unhex_json(&r[1])),
                    false => (Vec::new(), unhex_json(r)),
                })
                .collect();
            Case {
                dir: root.join(&name),
                name,
                version: case["version"].as_str().unwrap().to_owned(),
                keyed,
                compression: match case["compression"].as_str() {
                    Some("lz4") => Compression::Lz4,
                    _ => Compression::None,
                },
                shards: case["shards"].as_u64().unwrap(),
                records,
            }
        })
        .collect()
}

#[test]
fn reference_written_datasets_read_back_exactly() {
    for case in cases() {
        let dataset = Dataset::open(&case.dir).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert_eq!(dataset.keyed(), case.keyed, "{}", case.name);
        assert_eq!(dataset.compression(), case.compression, "{}", case.name);
        assert_eq!(dataset.shards(), case.shards, "{}", case.name);
        let version = match case.version.as_str() {
            "0.2.0" => ManifestVersion::V0_2,
            _ => ManifestVersion::V0_3,
        };
        assert_eq!(dataset.manifest().version, version, "{}", case.name);
        assert!(
            read_all(&dataset) == case.records,
            "{}: records differ",
            case.name
        );
        assert!(dataset.verify().is_empty(), "{}", case.name);
        if case.keyed {
            for (i, (key, value)) in case.records.iter().enumerate() {
                assert!(dataset.contains(key));
                assert_eq!(dataset.position(key).unwrap(), Some(i));
                assert_eq!(dataset.get(key).unwrap().as_deref(), Some(&value[..]));
            }
            assert!(!dataset.contains(b"not a key"));
        } else {
            assert!(
                dataset.get(b"anything").is_err(),
                "keyless key lookups are errors"
            );
        }
    }
}

/// Writing the same records with the same settings reproduces the reference's shard
/// files byte for byte (and, for 0.3.0, its manifest too).
#[test]
fn rust_writes_the_same_bytes_as_the_reference() {
    let scratch = tempfile::tempdir().unwrap();
    for case in cases() {
        let dir = scratch.path().join(&case.name);
        let mut dataset = Dataset::create(
            &dir,
            CreateOptions {
                keyed: case.keyed,
                compression: case.compression,
                max_shard_size: 8192,
            },
        )
        .unwrap();
        // The fixtures were written in two extends of 30 records each.
        for batch in case.records.chunks(30) {
            if case.keyed {
                dataset.extend(batch.iter().map(|(k, v)| (k, v))).unwrap();
            } else {
                dataset.extend_values(batch.iter().map(|(_, v)| v)).unwrap();
            }
        }
        let mut names: Vec<String> = fs::read_dir(&case.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names.len() as u64, 2 * case.shards + 1, "{}", case.name);
        for name in names {
            let theirs = fs::read(case.dir.join(&name)).unwrap();
            let ours = fs::read(dir.join(&name)).unwrap();
            if name == "manifest.json" && case.version == "0.2.0" {
                // We always write the 0.3.0 layout, which 0.2.0 also reads.
                assert!(String::from_utf8(ours)
                    .unwrap()
                    .contains("\"max_shard_size\": 8192"));
                continue;
            }
            assert!(
                theirs == ours,
                "{}/{name} differs from the reference's",
                case.name
            );
        }
    }
}
