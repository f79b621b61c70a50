//! Alternating writers: Rust and the reference take turns extending the same
//! datasets.

use std::fs;
use std::path::PathBuf;

use bcd::{Dataset, ManifestVersion};
use bcd_test_support::Record;
use serde_json::Value;

use crate::checks::{assert_rust_reads, rust_extend};
use crate::corpus::small_corpus;
use crate::harness::{
    assert_dump, create_step, dump_step, extend_step, reference, ALL_SPECS, V2, V3,
};

/// Shard size limit of the alternating tests: each turn's records span several shards.
const TURN_SHARDS: u64 = 8 * 1024;

/// The records each side adds on `turn`, per dataset of [`ALL_SPECS`].
fn turn_records(turn: usize) -> Vec<Vec<Record>> {
    ALL_SPECS
        .iter()
        .map(|spec| small_corpus(spec.keyed, &format!("turn {turn}/")))
        .collect()
}

/// Checks, once the turns are over, that the reference's `dumps` and Rust (through
/// `handles` if given, and a freshly opened handle) all see exactly `expected`.
fn assert_union_seen(
    dirs: &[PathBuf],
    dumps: &[Value],
    handles: Option<&mut [Dataset]>,
    expected: &[Vec<Record>],
    version: &str,
) {
    let mut handles = handles.map(|h| h.iter_mut());
    for (i, spec) in ALL_SPECS.iter().enumerate() {
        let context = format!("{} after extends alternating with {version}", spec.name());
        let dataset = Dataset::open(&dirs[i]).unwrap();
        assert_rust_reads(&dataset, *spec, &expected[i], &context);
        assert_dump(&dumps[i], *spec, dataset.shards(), &expected[i], &context);
        assert!(
            dataset.shards() > 8,
            "{context}: {} shards",
            dataset.shards()
        );
        if let Some(handle) = handles.as_mut().and_then(Iterator::next) {
            handle.refresh().unwrap();
            assert_rust_reads(handle, *spec, &expected[i], &context);
            assert_eq!(handle.shards(), dataset.shards(), "{context}");
        }
    }
}

/// Rust and reference 0.3.0 take turns extending the same datasets (Rust, Python,
/// Rust, Python); both see the union, in order. One Rust handle per dataset lives
/// through all turns, so its extends must pick up the reference's shards first.
#[test]
fn extends_alternating_with_reference_0_3_0_see_the_union_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = ALL_SPECS
        .iter()
        .map(|spec| tmp.path().join(spec.name()))
        .collect();
    let mut handles: Vec<Dataset> = ALL_SPECS
        .iter()
        .zip(&dirs)
        .map(|(spec, dir)| Dataset::create(dir, spec.options(TURN_SHARDS)).unwrap())
        .collect();
    let mut expected: Vec<Vec<Record>> = vec![Vec::new(); ALL_SPECS.len()];
    let mut dumps = Vec::new();

    for turn in 0..4 {
        let records = turn_records(turn);
        if turn % 2 == 0 {
            for (i, records) in records.iter().enumerate() {
                let committed = Dataset::open(&dirs[i]).unwrap().shards();
                rust_extend(&mut handles[i], records);
                assert!(
                    handles[i].shards() >= committed + 2,
                    "several shards per turn"
                );
                assert_eq!(handles[i].len(), expected[i].len() + records.len());
            }
        } else {
            let mut steps: Vec<Value> = (0..ALL_SPECS.len())
                .map(|i| extend_step(&dirs[i], ALL_SPECS[i].keyed, &records[i], None))
                .collect();
            let last = turn == 3;
            if last {
                steps.extend(dirs.iter().map(|dir| dump_step(dir)));
            }
            let results = reference(V3, &steps);
            if last {
                dumps = results[ALL_SPECS.len()..].to_vec();
            }
        }
        for (expected, records) in expected.iter_mut().zip(records) {
            expected.extend(records);
        }
    }
    assert_union_seen(&dirs, &dumps, Some(&mut handles), &expected, V3);
}

/// The same with reference 0.2.0, which creates the datasets and takes its
/// max_shard_size per extend (Python, Rust, Python, Rust, Python). Rust extends a
/// 0.2.0 manifest with the default shard size and rewrites it in the 0.3.0 layout,
/// which 0.2.0 reads and extends in turn.
#[test]
fn extends_alternating_with_reference_0_2_0_see_the_union_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = ALL_SPECS
        .iter()
        .map(|spec| tmp.path().join(spec.name()))
        .collect();
    let mut expected: Vec<Vec<Record>> = vec![Vec::new(); ALL_SPECS.len()];
    let mut dumps = Vec::new();

    for turn in 0..5 {
        let records = turn_records(turn);
        if turn % 2 == 1 {
            for (i, records) in records.iter().enumerate() {
                let mut dataset = Dataset::open(&dirs[i]).unwrap();
                assert_eq!(dataset.manifest().version, ManifestVersion::V0_2);
                assert_rust_reads(&dataset, ALL_SPECS[i], &expected[i], "before Rust's turn");
                let shards = dataset.shards();
                rust_extend(&mut dataset, records);
                // 0.2.0 manifests carry no max_shard_size: Rust uses the default.
                assert_eq!(dataset.shards(), shards + 1);
                let manifest = fs::read_to_string(dirs[i].join("manifest.json")).unwrap();
                assert!(
                    manifest.contains("\"max_shard_size\": 1073741824"),
                    "{manifest}"
                );
            }
        } else {
            let mut steps = Vec::new();
            for (i, spec) in ALL_SPECS.iter().enumerate() {
                if turn == 0 {
                    steps.push(create_step(&dirs[i], *spec, None));
                }
                steps.push(extend_step(
                    &dirs[i],
                    spec.keyed,
                    &records[i],
                    Some(TURN_SHARDS),
                ));
            }
            let last = turn == 4;
            if last {
                steps.extend(dirs.iter().map(|dir| dump_step(dir)));
            }
            let results = reference(V2, &steps);
            if last {
                dumps = results[ALL_SPECS.len()..].to_vec();
            }
        }
        for (expected, records) in expected.iter_mut().zip(records) {
            expected.extend(records);
        }
    }
    assert_union_seen(&dirs, &dumps, None, &expected, V2);
}
