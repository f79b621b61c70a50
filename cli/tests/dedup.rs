//! Duplicates by content and the bounded key check, end to end: `bcd ingest
//! --dedup content` within a run and across appends (with `--json` and
//! `--dedup-report`), a forced hash collision (the test hook's environment
//! variable) keeping both records, `bcd merge --dedup content`, `bcd
//! dedup-index` of a dataset the reference wrote, then read and extended by the
//! reference, `bcd verify --content` naming a flipped byte, an ingest whose
//! key check spills under `--memory-limit`, and `export --into` keeping the
//! content hashes of a dataset that has them.

use std::fs;
use std::path::Path;
use std::process::Command;

use bcd::Dataset;
use bcd_test_support::{read_all, reference_batch, Rng};
use serde_json::{json, Value};

mod common;
use common::{fails, finish, ok, s, show, usage_error};

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

/// A tree of files whose contents repeat: `dir/{group}/{i}.bin` holds value
/// `i % distinct` of a set of random values.
fn repeating_tree(dir: &Path, files: usize, distinct: usize, seed: u64) -> Vec<(String, Vec<u8>)> {
    repeating_tree_named(dir, "g", files, distinct, seed)
}

/// [`repeating_tree`] with folders named `{prefix}0`, `{prefix}1`, `{prefix}2`.
fn repeating_tree_named(
    dir: &Path,
    prefix: &str,
    files: usize,
    distinct: usize,
    seed: u64,
) -> Vec<(String, Vec<u8>)> {
    let mut rng = Rng::new(seed);
    let values: Vec<Vec<u8>> = (0..distinct)
        .map(|_| {
            let len = 1 + rng.below(5000);
            rng.bytes(len)
        })
        .collect();
    let mut written = Vec::new();
    for i in 0..files {
        let name = format!("{prefix}{}/{i:04}.bin", i % 3);
        let path = dir.join(&name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let value = values[(i * 5) % distinct].clone();
        fs::write(&path, &value).unwrap();
        written.push((name, value));
    }
    written.sort();
    written
}

/// What a dedup keeps of `records` (in order): each value's first occurrence,
/// not counting values in `seen` (which it extends).
fn first_of_each_value(
    records: &[(String, Vec<u8>)],
    seen: &mut Vec<Vec<u8>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut kept = Vec::new();
    for (key, value) in records {
        if !seen.contains(value) {
            seen.push(value.clone());
            kept.push((key.as_bytes().to_vec(), value.clone()));
        }
    }
    kept
}

#[test]
fn ingest_dedup_content_leaves_out_repeated_values_within_a_run_and_across_appends() {
    let tmp = tempfile::tempdir().unwrap();
    let first = repeating_tree(&tmp.path().join("first"), 60, 17, 1);
    let ds = tmp.path().join("ds");
    let report = tmp.path().join("dups.jsonl");
    let summary = json_of(&ok(&[
        "ingest",
        s(&tmp.path().join("first")),
        "--into",
        s(&ds),
        "--dedup",
        "content",
        "--dedup-report",
        s(&report),
        "--json",
        "--max-shard-size",
        "40K",
    ]));
    let mut seen = Vec::new();
    let mut expected = first_of_each_value(&first, &mut seen);
    assert_eq!(summary["records"], expected.len());
    assert_eq!(summary["skipped_values"], first.len() - expected.len());
    let listed = summary["content_duplicates"].as_array().unwrap();
    assert_eq!(listed.len(), first.len() - expected.len());
    // The report holds the same objects, one per line.
    let lines: Vec<Value> = fs::read_to_string(&report)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(&lines, listed);
    // Each names a record left out and the one kept, whose value is its value.
    let dataset = Dataset::open(&ds).unwrap();
    let values: std::collections::HashMap<&str, &Vec<u8>> =
        first.iter().map(|(k, v)| (k.as_str(), v)).collect();
    for duplicate in listed {
        let key = duplicate["key"].as_str().unwrap();
        let of = duplicate["duplicate_of"]["index"].as_u64().unwrap() as usize;
        assert_eq!(&*dataset.at(of).unwrap(), &values[key][..], "{duplicate}");
        assert_eq!(
            dataset.key_at(of).unwrap(),
            duplicate["duplicate_of"]["key"]
                .as_str()
                .unwrap()
                .as_bytes()
        );
        assert!(duplicate["origin"].as_str().unwrap().ends_with(key));
    }

    // An append: values already committed are left out too (the same seed: the
    // first 17 values are the first tree's); some keys repeat as well.
    let second = repeating_tree_named(&tmp.path().join("second"), "s", 30, 23, 1);
    let second_g0 = tmp.path().join("second/g0/0000.bin");
    fs::create_dir_all(second_g0.parent().unwrap()).unwrap();
    fs::write(&second_g0, b"a repeated key").unwrap();
    let mut second = second;
    second.push(("g0/0000.bin".to_owned(), b"a repeated key".to_vec()));
    second.sort();
    let summary = json_of(&ok(&[
        "ingest",
        s(&tmp.path().join("second")),
        "--into",
        s(&ds),
        "--dedup",
        "content",
        "--json",
        "--on-duplicate",
        "skip",
    ]));
    // A key seen before is a key duplicate first (skipped, not reported).
    let first_keys: Vec<&str> = first.iter().map(|(k, _)| k.as_str()).collect();
    let new: Vec<(String, Vec<u8>)> = second
        .into_iter()
        .filter(|(k, _)| !first_keys.contains(&k.as_str()))
        .collect();
    expected.extend(first_of_each_value(&new, &mut seen));
    assert_eq!(summary["skipped"], 1);
    assert!(
        summary["skipped_values"].as_u64().unwrap() >= 17,
        "{summary}"
    );
    let dataset = Dataset::open(&ds).unwrap();
    assert_eq!(read_all(&dataset), expected);
    assert!(String::from_utf8(ok(&["verify", s(&ds), "--content"]))
        .unwrap()
        .contains("every value matches its content hash"));
    // The reference reads the dataset as it is.
    let dump = &reference_batch("0.3.0", &[json!({"command": "dump", "path": s(&ds)})])[0];
    assert_eq!(dump["records"].as_array().unwrap().len(), expected.len());
}

#[test]
fn a_forced_hash_collision_keeps_both_records() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    fs::create_dir_all(&tree).unwrap();
    for (name, value) in [("a", "same"), ("b", "other"), ("c", "same"), ("d", "third")] {
        fs::write(tree.join(name), value).unwrap();
    }
    let ds = tmp.path().join("ds");
    let args = [
        "ingest",
        s(&tree),
        "--into",
        s(&ds),
        "--dedup",
        "content",
        "--json",
    ];
    let mut command = Command::new(env!("CARGO_BIN_EXE_bcd"));
    command.args(args).env(bcd::FORCE_COLLISIONS_ENV, "1");
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary = json_of(&output.stdout);
    // Every hash collides: only the bytes tell "same" from the others.
    assert_eq!(summary["records"], 3);
    assert_eq!(summary["content_duplicates"][0]["key"], "c");
    assert_eq!(summary["content_duplicates"][0]["duplicate_of"]["key"], "a");
    let values: Vec<Vec<u8>> = read_all(&Dataset::open(&ds).unwrap())
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(
        values,
        [b"same".to_vec(), b"other".to_vec(), b"third".to_vec()]
    );
}

#[test]
fn merge_dedup_content_leaves_out_values_of_the_target_and_earlier_parts() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let trees: Vec<Vec<(String, Vec<u8>)>> = (0..3)
        .map(|p| {
            let tree = root.join(format!("tree{p}"));
            // Parts 0 and 1 share their values; part 2 has values of its own.
            repeating_tree(&tree, 25, 30, 7 + p / 2)
                .into_iter()
                .map(|(k, v)| {
                    // Distinct keys per part; values shared across parts.
                    let renamed = format!("p{p}-{}", k.replace('/', "-"));
                    fs::rename(tree.join(&k), tree.join(&renamed)).unwrap();
                    (renamed, v)
                })
                .collect()
        })
        .collect();
    let target = root.join("target");
    ok(&[
        "ingest",
        s(&root.join("tree0")),
        "--into",
        s(&target),
        "--dedup",
        "content",
    ]);
    let mut parts = Vec::new();
    for p in 1..3 {
        let part = root.join(format!("part{p}"));
        // The parts without content hashes: the merge computes them.
        ok(&[
            "ingest",
            s(&root.join(format!("tree{p}"))),
            "--into",
            s(&part),
        ]);
        parts.push(part);
    }
    let report = root.join("merge-dups.jsonl");
    let summary = json_of(&ok(&[
        "merge",
        s(&parts[0]),
        s(&parts[1]),
        "--into",
        s(&target),
        "--dedup",
        "content",
        "--dedup-report",
        s(&report),
        "--json",
    ]));
    let mut seen = Vec::new();
    let mut sorted: Vec<Vec<(String, Vec<u8>)>> = trees.clone();
    for tree in &mut sorted {
        tree.sort();
    }
    let mut expected = first_of_each_value(&sorted[0], &mut seen);
    let before = expected.len();
    for tree in &sorted[1..] {
        expected.extend(first_of_each_value(tree, &mut seen));
    }
    assert_eq!(summary["records"], expected.len() - before);
    assert!(expected.len() > before, "part 2 adds records");
    assert_eq!(summary["skipped_values"], 50 - (expected.len() - before));
    assert_eq!(
        fs::read_to_string(&report).unwrap().lines().count(),
        summary["skipped_values"].as_u64().unwrap() as usize
    );
    for duplicate in summary["content_duplicates"].as_array().unwrap() {
        assert!(
            duplicate["origin"].as_str().unwrap().contains("part"),
            "{duplicate}"
        );
    }
    let dataset = Dataset::open(&target).unwrap();
    assert_eq!(read_all(&dataset), expected);
    ok(&["verify", s(&target), "--content"]);
}

#[test]
fn dedup_index_gives_a_reference_dataset_content_hashes_the_reference_still_reads_and_extends() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    let records: Vec<Value> = (0..40)
        .map(|i| {
            json!([
                hex(format!("k{i}").as_bytes()),
                hex(&vec![i as u8 % 7; 100 + i])
            ])
        })
        .collect();
    reference_batch(
        "0.3.0",
        &[
            json!({"command": "create", "path": s(&ds), "keyed": true, "compression": "lz4", "max_shard_size": 1000}),
            json!({"command": "extend", "path": s(&ds), "input": records}),
        ],
    );
    // Without content hashes, dedup is refused naming the command that builds them.
    let tree = tmp.path().join("tree");
    fs::create_dir_all(&tree).unwrap();
    fs::write(tree.join("new"), vec![3u8; 103]).unwrap();
    fs::write(tree.join("fresh"), b"fresh").unwrap();
    let refused = fails(&["ingest", s(&tree), "--into", s(&ds), "--dedup", "content"]);
    assert!(
        refused.contains("no content hashes") && refused.contains("dedup-index"),
        "{refused}"
    );
    let summary = json_of(&ok(&["dedup-index", s(&ds), "--json"]));
    let dataset = Dataset::open(&ds).unwrap();
    assert_eq!(summary["shards_built"], dataset.shards());
    drop(dataset);
    assert_eq!(summary["records"], 40);
    // The hashes are what Python's xxhash computes of each value, the values as
    // the reference reads them.
    let dump = &reference_batch("0.3.0", &[json!({"command": "dump", "path": s(&ds)})])[0];
    let values: Vec<&str> = dump["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[1].as_str().unwrap())
        .collect();
    let check = "import json, sys, xxhash\n\
print(b''.join(xxhash.xxh3_128(bytes.fromhex(v)).digest() for v in json.loads(sys.argv[1])).hex())";
    let printed = common::run_python(check, &[&serde_json::to_string(&values).unwrap()]);
    let dataset = Dataset::open(&ds).unwrap();
    let written: Vec<u8> = (0..dataset.shards())
        .flat_map(|shard| fs::read(dataset.sidecar_path(shard, "xxh128")).unwrap())
        .collect();
    assert_eq!(String::from_utf8_lossy(&printed).trim(), hex(&written));
    assert_eq!(written.len(), 16 * 40);
    // Now dedup checks against every record: `new` repeats record 3's value.
    let summary = json_of(&ok(&[
        "ingest",
        s(&tree),
        "--into",
        s(&ds),
        "--dedup",
        "content",
        "--json",
    ]));
    assert_eq!(
        (
            summary["records"].as_u64(),
            summary["skipped_values"].as_u64()
        ),
        (Some(1), Some(1))
    );
    assert_eq!(
        summary["content_duplicates"][0]["duplicate_of"]["key"],
        "k3"
    );
    // The reference reads and extends the dataset with its sidecars.
    let more: Vec<Value> = vec![json!([hex(b"ref-new"), hex(b"from the reference")])];
    let results = reference_batch(
        "0.3.0",
        &[
            json!({"command": "extend", "path": s(&ds), "input": more}),
            json!({"command": "dump", "path": s(&ds)}),
        ],
    );
    let dumped = results[1]["records"].as_array().unwrap().len();
    assert_eq!(dumped, Dataset::open(&ds).unwrap().len());
    // Its shard has no hashes: dedup refuses until dedup-index runs again.
    let refused = fails(&["ingest", s(&tree), "--into", s(&ds), "--dedup", "content"]);
    assert!(refused.contains("no content hashes"), "{refused}");
    let again = json_of(&ok(&["dedup-index", s(&ds), "--json"]));
    assert_eq!(again["shards_built"], 1);
    ok(&["verify", s(&ds), "--content"]);
}

fn hex(bytes: &[u8]) -> String {
    bcd_test_support::hex(bytes)
}

#[test]
fn verify_content_names_the_shard_and_record_of_a_flipped_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    repeating_tree(&tree, 30, 30, 9);
    let ds = tmp.path().join("ds");
    ok(&[
        "ingest",
        s(&tree),
        "--into",
        s(&ds),
        "--dedup",
        "content",
        "--compression",
        "none",
        "--max-shard-size",
        "20K",
    ]);
    let dataset = Dataset::open(&ds).unwrap();
    // Six distinct values: six records.
    assert_eq!(dataset.len(), 6);
    let target = 3;
    let location = dataset.value_location(target).unwrap();
    let shard_path = dataset.shard_data_path(location.shard);
    let local = target as u64 - dataset.shard_first_record(location.shard);
    drop(dataset);
    let mut bytes = fs::read(&shard_path).unwrap();
    bytes[(location.offset + location.len / 2) as usize] ^= 0x80;
    fs::write(&shard_path, &bytes).unwrap();
    // The plain verify cannot see it (the values are stored uncompressed).
    ok(&["verify", s(&ds)]);
    let run = finish(
        common::spawn(&["verify", s(&ds), "--content"], false, None),
        "verify --content",
    );
    assert_eq!(run.status.code(), Some(1), "{}", run.stderr);
    let expected = format!(
        "{}: record {local} (dataset index {target}): the value does not match its content hash",
        shard_path.display()
    );
    assert!(run.stderr.contains(&expected), "{}", run.stderr);
    // Usage: --content checks local datasets, and --dedup-report needs --dedup.
    usage_error(&["verify", "s3://bucket/ds", "--content"]);
    usage_error(&[
        "ingest",
        s(&tree),
        "--into",
        s(&ds),
        "--dedup-report",
        "x.jsonl",
    ]);
}

#[test]
fn an_ingest_spilling_its_keys_under_a_small_memory_limit_finds_every_duplicate() {
    let tmp = tempfile::tempdir().unwrap();
    // JSON Lines: 30,000 keyed records, the last repeating the first key.
    let source = tmp.path().join("records.jsonl");
    let mut lines = String::new();
    for i in 0..30_000 {
        lines.push_str(&format!(
            "{{\"id\": \"key-{i:06}\", \"text\": \"v{}\"}}\n",
            i % 1000
        ));
    }
    lines.push_str("{\"id\": \"key-000000\", \"text\": \"again\"}\n");
    fs::write(&source, lines).unwrap();
    let ds = tmp.path().join("ds");
    let args = [
        "ingest",
        s(&source),
        "--into",
        s(&ds),
        "--key-field",
        "id",
        "--memory-limit",
        "64K",
    ];
    let refused = fails(&args);
    assert!(refused.contains("key-000000"), "{refused}");
    assert!(!ds.exists(), "the dataset the run created is removed");
    let mut skip = args.to_vec();
    skip.extend(["--on-duplicate", "skip", "--json"]);
    let summary = json_of(&ok(&skip));
    assert_eq!(
        (summary["records"].as_u64(), summary["skipped"].as_u64()),
        (Some(30_000), Some(1))
    );
    assert!(!ds.join(".bcd-spill").exists());
    // Again, with content dedup too: every key and all but 1000 values repeat.
    let mut again = skip.clone();
    again.extend(["--dedup", "content"]);
    let second = tmp.path().join("ds2");
    again[3] = s(&second);
    let summary = json_of(&ok(&again));
    assert_eq!(summary["records"], 1000);
    assert_eq!(summary["skipped_values"], 29_000);
    assert!(!second.join(".bcd-spill").exists(), "{}", show(&again));
}

/// Every shard's content hashes, concatenated in record order, or `None` when
/// a shard has none.
fn content_hashes(ds: &Path) -> Option<Vec<u8>> {
    let dataset = Dataset::open(ds).unwrap();
    let mut all = Vec::new();
    for shard in 0..dataset.shards() {
        all.extend(fs::read(dataset.sidecar_path(shard, "xxh128")).ok()?);
    }
    Some(all)
}

#[test]
fn export_into_keeps_the_content_hashes_of_a_dataset_that_has_them() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    // 40 distinct values of up to 5000 bytes: several shards of 40K.
    repeating_tree(&tree, 40, 41, 9);
    let (hashed, plain) = (tmp.path().join("hashed"), tmp.path().join("plain"));
    for (ds, dedup) in [(&hashed, true), (&plain, false)] {
        let mut args = vec![
            "ingest",
            s(&tree),
            "--into",
            s(ds),
            "--max-shard-size",
            "40K",
        ];
        if dedup {
            args.extend(["--dedup", "content"]);
        }
        ok(&args);
    }
    let source = read_all(&Dataset::open(&hashed).unwrap());
    let source_hashes = content_hashes(&hashed).unwrap();
    assert_eq!(source_hashes.len(), 16 * source.len());
    let hash_of = |key: &[u8]| {
        let at = source.iter().position(|(k, _)| k == key).unwrap();
        source_hashes[16 * at..16 * (at + 1)].to_vec()
    };

    // The whole dataset: the same hashes, record for record.
    let whole = tmp.path().join("whole");
    ok(&["export", s(&hashed), "--into", s(&whole)]);
    assert!(Dataset::open(&whole).unwrap().shards() > 1);
    assert_eq!(content_hashes(&whole).unwrap(), source_hashes);
    ok(&["verify", s(&whole), "--content"]);
    // A sample: each copied record's hash is its source record's.
    let sample = tmp.path().join("sample");
    ok(&[
        "export",
        s(&hashed),
        "--into",
        s(&sample),
        "--sample",
        "7",
        "--seed",
        "3",
    ]);
    let copied = read_all(&Dataset::open(&sample).unwrap());
    assert_eq!(copied.len(), 7);
    let expected: Vec<u8> = copied.iter().flat_map(|(k, _)| hash_of(k)).collect();
    assert_eq!(content_hashes(&sample).unwrap(), expected);
    ok(&["verify", s(&sample), "--content"]);
    // A dataset without them is copied without them, as before.
    let copy = tmp.path().join("copy");
    ok(&["export", s(&plain), "--into", s(&copy)]);
    assert_eq!(content_hashes(&copy), None);
    assert!(!fs::read_dir(&copy).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .ends_with(".xxh128")));
}
