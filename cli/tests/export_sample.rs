//! `bcd export --sample N [--seed S]` and `--into NEWDS` (issue 11): a uniform,
//! deterministic subset in record order, to tar or into a new dataset that
//! reads back identical (and that the Python reference opens), with nothing left
//! behind when the copy cannot be made.

use std::io::Read;
use std::path::Path;

use bcd::{Compression, CreateOptions, Dataset};

mod common;
use common::*;

fn dataset(path: &Path, keyed: bool, compression: Compression, count: usize) {
    let mut dataset = Dataset::create(
        path,
        CreateOptions {
            keyed,
            compression,
            max_shard_size: 4096,
        },
    )
    .unwrap();
    let values: Vec<Vec<u8>> = (0..count)
        .map(|i| format!("value {i:04} ").repeat(1 + i % 7).into_bytes())
        .collect();
    if keyed {
        let keys: Vec<Vec<u8>> = (0..count)
            .map(|i| format!("k/{i:04}").into_bytes())
            .collect();
        dataset
            .extend(keys.iter().zip(&values).map(|(k, v)| (&k[..], &v[..])))
            .unwrap();
    } else {
        dataset
            .extend_values(values.iter().map(|v| &v[..]))
            .unwrap();
    }
}

fn members(archive: &Path) -> Vec<(String, Vec<u8>)> {
    let mut tar = tar::Archive::new(std::fs::File::open(archive).unwrap());
    tar.entries()
        .unwrap()
        .map(|entry| {
            let mut entry = entry.unwrap();
            let name = String::from_utf8(entry.path_bytes().into_owned()).unwrap();
            let mut data = Vec::new();
            entry.read_to_end(&mut data).unwrap();
            (name, data)
        })
        .collect()
}

#[test]
fn a_sample_is_uniform_in_record_order_and_the_same_for_the_same_seed() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    dataset(&ds, true, Compression::Lz4, 200);
    let export = |seed: &str, out: &str| {
        let archive = dir.path().join(out);
        ok(&[
            "export",
            s(&ds),
            "--to",
            s(&archive),
            "--sample",
            "30",
            "--seed",
            seed,
        ]);
        members(&archive)
    };
    let first = export("7", "a.tar");
    assert_eq!(first.len(), 30);
    let names: Vec<&String> = first.iter().map(|(n, _)| n).collect();
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(names, sorted, "record order, no repeats");
    // Values are the records' own.
    let source = Dataset::open(&ds).unwrap();
    for (name, value) in &first {
        assert_eq!(
            &source.get(name.as_bytes()).unwrap().unwrap()[..],
            &value[..]
        );
    }
    assert_eq!(export("7", "b.tar"), first);
    assert_ne!(export("8", "c.tar"), first);
    // The same set bcd.partition (and bcd_sampling) picks for the seed.
    let expected = bcd_sampling::uniform_subset(200, 30, 7).unwrap();
    let got: Vec<u64> = first
        .iter()
        .map(|(n, _)| n.trim_start_matches("k/").parse().unwrap())
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn into_copies_the_records_as_stored_into_a_new_dataset() {
    for (keyed, compression) in [
        (true, Compression::Lz4),
        (false, Compression::Lz4),
        (true, Compression::None),
        (false, Compression::None),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let ds = dir.path().join("ds");
        dataset(&ds, keyed, compression, 120);
        let subset = dir.path().join("subset");
        ok(&[
            "export",
            s(&ds),
            "--into",
            s(&subset),
            "--sample",
            "25",
            "--seed",
            "3",
        ]);
        let (source, copy) = (Dataset::open(&ds).unwrap(), Dataset::open(&subset).unwrap());
        assert_eq!((copy.keyed(), copy.compression()), (keyed, compression));
        assert_eq!(copy.manifest().max_shard_size, 4096);
        assert_eq!(copy.len(), 25);
        let chosen = bcd_sampling::uniform_subset(120, 25, 3).unwrap();
        for (i, &record) in chosen.iter().enumerate() {
            let record = record as usize;
            assert_eq!(
                copy.stored_at(i).unwrap(),
                source.stored_at(record).unwrap()
            );
            assert_eq!(copy.at(i).unwrap(), source.at(record).unwrap());
            if keyed {
                assert_eq!(copy.key_at(i).unwrap(), source.key_at(record).unwrap());
            }
        }
        // Without --sample: the whole dataset.
        let whole = dir.path().join("whole");
        ok(&["export", s(&ds), "--into", s(&whole)]);
        assert_eq!(Dataset::open(&whole).unwrap().len(), 120);
    }
}

#[test]
fn the_reference_opens_a_copy() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    dataset(&ds, true, Compression::Lz4, 50);
    let subset = dir.path().join("subset");
    ok(&["export", s(&ds), "--into", s(&subset), "--sample", "10"]);
    let ours = bcd_test_support::read_all(&Dataset::open(&subset).unwrap());
    let step = serde_json::json!({"command": "dump", "path": s(&subset)});
    let dump = &bcd_test_support::reference_batch("0.3.0", &[step])[0];
    let theirs: Vec<(Vec<u8>, Vec<u8>)> = dump["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pair| {
            (
                bcd_test_support::unhex_json(&pair[0]),
                bcd_test_support::unhex_json(&pair[1]),
            )
        })
        .collect();
    assert_eq!(theirs, ours);
}

#[test]
fn a_copy_that_cannot_be_made_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    dataset(&ds, true, Compression::Lz4, 10);
    // A non-empty target directory is refused, and kept as it was.
    let busy = dir.path().join("busy");
    std::fs::create_dir(&busy).unwrap();
    std::fs::write(busy.join("note"), b"mine").unwrap();
    let message = fails(&["export", s(&ds), "--into", s(&busy)]);
    assert!(
        message.contains("not empty") || message.contains("empty"),
        "{message}"
    );
    assert_eq!(std::fs::read_dir(&busy).unwrap().count(), 1);
    // A sample larger than the dataset: nothing is created.
    let target = dir.path().join("new");
    let message = fails(&["export", s(&ds), "--into", s(&target), "--sample", "11"]);
    assert!(
        message.contains("--sample asks for 11 records, but"),
        "{message}"
    );
    assert!(!target.exists());
    // Balancing needs a stored field; this dataset has none.
    let message = fails(&[
        "export",
        s(&ds),
        "--into",
        s(&target),
        "--sample",
        "5",
        "--balance-by",
        "label",
    ]);
    assert!(
        message.contains("no field \"label\" for --balance-by (it has no fields)"),
        "{message}"
    );
    assert!(!target.exists());
}

#[test]
fn usage_errors_are_found_before_anything_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    dataset(&ds, true, Compression::Lz4, 10);
    for args in [
        vec!["export", s(&ds)],
        vec!["export", s(&ds), "--to", "a.tar", "--into", "b"],
        vec!["export", s(&ds), "--into", "b", "--split-count", "2"],
        vec!["export", s(&ds), "--to", "a.tar", "--seed", "3"],
        vec!["export", s(&ds), "--to", "a.tar", "--balance-by", "label"],
        vec!["export", s(&ds), "--to", "a.tar", "--sample", "x"],
    ] {
        let run = finish(spawn(&args, false, Some(dir.path())), &show(&args));
        assert_eq!(run.status.code(), Some(2), "{args:?}: {}", run.stderr);
    }
    assert!(!dir.path().join("a.tar").exists() && !dir.path().join("b").exists());
}

/// Rows of `bcd ls --fields`: one JSON object per record.
fn field_rows(dataset: &Path) -> Vec<serde_json::Value> {
    String::from_utf8(ok(&["ls", s(dataset), "--fields"]))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn json_out(args: &[&str]) -> serde_json::Value {
    serde_json::from_slice(&ok(args)).unwrap()
}

/// The reference's (key, value) pairs of a dataset.
fn reference_dump(dataset: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let step = serde_json::json!({"command": "dump", "path": s(dataset)});
    let dump = &bcd_test_support::reference_batch("0.3.0", &[step])[0];
    dump["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pair| {
            (
                bcd_test_support::unhex_json(&pair[0]),
                bcd_test_support::unhex_json(&pair[1]),
            )
        })
        .collect()
}

#[test]
fn into_carries_the_fields_statistics_and_metadata_of_the_records_it_copies() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    for i in 0..40 {
        let class = ["cat", "dog", "bird"][i % 3];
        std::fs::create_dir_all(tree.join(class)).unwrap();
        let value = format!("picture {i} ").repeat(10 + i);
        std::fs::write(tree.join(format!("{class}/{i:02}.jpg")), value).unwrap();
    }
    let ds = dir.path().join("ds");
    ok(&[
        "ingest",
        s(&tree),
        "--into",
        s(&ds),
        "--labels",
        "folder",
        "--max-shard-size",
        "1K",
        "--quiet",
    ]);
    let source_rows = field_rows(&ds);
    let source_info = json_out(&["info", s(&ds), "--json"]);
    assert_eq!(
        source_info["metadata"]["class_names"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    for sample in [None, Some(12u64)] {
        let copy = dir.path().join(format!("copy-{sample:?}"));
        let mut args = vec!["export", s(&ds), "--into", s(&copy)];
        let count = sample.map(|n| n.to_string());
        if let Some(count) = &count {
            args.extend(["--sample", count, "--seed", "5"]);
        }
        ok(&args);
        let chosen: Vec<u64> = match sample {
            Some(n) => bcd_sampling::uniform_subset(40, n, 5).unwrap(),
            None => (0..40).collect(),
        };
        let context = format!("--sample {sample:?}");
        // Each record's fields (label, label_index), in the new order.
        let expected: Vec<&serde_json::Value> =
            chosen.iter().map(|&r| &source_rows[r as usize]).collect();
        let rows = field_rows(&copy);
        assert_eq!(rows.iter().collect::<Vec<_>>(), expected, "{context}");
        // The schema and the metadata (the class names).
        let info = json_out(&["info", s(&copy), "--json"]);
        assert_eq!(info["schema"], source_info["schema"], "{context}");
        assert_eq!(info["metadata"], source_info["metadata"], "{context}");
        // Statistics of the new dataset: its records and label counts.
        let stats = json_out(&["stats", s(&copy), "--json"]);
        assert_eq!(stats["records"], chosen.len(), "{context}");
        let mut counts = std::collections::BTreeMap::new();
        for row in &expected {
            *counts.entry(row["label"].as_str().unwrap()).or_insert(0u64) += 1;
        }
        let label = &stats["fields"]["label"];
        assert_eq!(label["count"], chosen.len(), "{context}: {label}");
        let stored: std::collections::BTreeMap<&str, u64> = label["counts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|pair| (pair[0].as_str().unwrap(), pair[1].as_u64().unwrap()))
            .collect();
        assert_eq!(stored, counts, "{context}");
        ok(&["verify", s(&copy)]);
        let ours = bcd_test_support::read_all(&Dataset::open(&copy).unwrap());
        assert_eq!(
            reference_dump(&copy),
            ours,
            "{context}: the reference reads it"
        );
    }
}

#[test]
fn into_carries_webdataset_members_so_a_sample_exports_as_the_samples_it_chose() {
    let dir = tempfile::tempdir().unwrap();
    let shard = dir.path().join("shard.tar");
    let mut tar = Vec::new();
    for i in 0..20 {
        let key = format!("s/{i:05}");
        write_member(
            &mut tar,
            format!("{key}.jpg").as_bytes(),
            &vec![i as u8; 50 + i],
        )
        .unwrap();
        write_member(
            &mut tar,
            format!("{key}.cls").as_bytes(),
            (i % 4).to_string().as_bytes(),
        )
        .unwrap();
        if i % 3 != 0 {
            write_member(
                &mut tar,
                format!("{key}.txt").as_bytes(),
                format!("text {i}").as_bytes(),
            )
            .unwrap();
        }
    }
    tar.extend_from_slice(&[0; 1024]);
    std::fs::write(&shard, &tar).unwrap();
    let ds = dir.path().join("ds");
    ok(&[
        "ingest",
        s(&shard),
        "--into",
        s(&ds),
        "--samples",
        "--quiet",
        "--max-shard-size",
        "300",
    ]);
    let copy = dir.path().join("copy");
    ok(&[
        "export",
        s(&ds),
        "--into",
        s(&copy),
        "--sample",
        "7",
        "--seed",
        "2",
    ]);
    let (all, some) = (dir.path().join("all.tar"), dir.path().join("some.tar"));
    ok(&["export", s(&ds), "--to", s(&all), "--samples"]);
    ok(&["export", s(&copy), "--to", s(&some), "--samples"]);
    let chosen = bcd_sampling::uniform_subset(20, 7, 2).unwrap();
    let keys: Vec<String> = chosen.iter().map(|i| format!("s/{i:05}.")).collect();
    let expected: Vec<(String, Vec<u8>)> = members(&all)
        .into_iter()
        .filter(|(name, _)| keys.iter().any(|key| name.starts_with(key)))
        .collect();
    assert!(expected.len() >= 14, "{expected:?}");
    assert_eq!(members(&some), expected);
}
