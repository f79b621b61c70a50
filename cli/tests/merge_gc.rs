//! `bcd merge` and `bcd gc` end to end: parts written by different processes
//! (bcd ingest, the library, the Python reference) merged into one dataset that
//! the reference reads; duplicates both ways; gc of leftovers and staging.

use std::fs;
use std::path::Path;

use bcd::{Compression, CreateOptions, Dataset};
use bcd_test_support::{hex, read_all, reference_batch, Record};
use serde_json::{json, Value};

mod common;
use common::{fails, ok, s, usage_error};

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

/// The reference's view of a dataset: (key, value) pairs.
fn reference_reads(path: &Path) -> Vec<Record> {
    let step = json!({"command": "dump", "path": s(path)});
    let dump = &reference_batch("0.3.0", &[step])[0];
    dump["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let unhex = |v: &Value| bcd_test_support::unhex(v.as_str().unwrap());
            (unhex(&r[0]), unhex(&r[1]))
        })
        .collect()
}

#[test]
fn parts_from_bcd_ingest_the_library_and_the_reference_merge_into_one_the_reference_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    // Part 1: `bcd ingest` of a directory tree (its own process).
    let tree = root.join("tree");
    fs::create_dir_all(tree.join("cats")).unwrap();
    for i in 0..5 {
        fs::write(
            tree.join(format!("cats/{i}.jpg")),
            format!("cat {i}").repeat(20),
        )
        .unwrap();
    }
    let from_ingest = root.join("from-ingest");
    ok(&[
        "ingest",
        s(&tree),
        "--into",
        s(&from_ingest),
        "--max-shard-size",
        "100",
        "--quiet",
    ]);
    // Part 2: the Python reference 0.3.0 (another process, another implementation).
    let from_reference = root.join("from-reference");
    let reference_records: Vec<Record> = (0..6)
        .map(|i| {
            (
                format!("ref/{i}").into_bytes(),
                format!("reference {i}").repeat(9).into_bytes(),
            )
        })
        .collect();
    let input: Vec<Value> = reference_records
        .iter()
        .map(|(k, v)| json!([hex(k), hex(v)]))
        .collect();
    reference_batch(
        "0.3.0",
        &[
            json!({"command": "create", "path": s(&from_reference), "keyed": true,
                   "compression": "lz4", "max_shard_size": 100}),
            json!({"command": "extend", "path": s(&from_reference), "input": input}),
        ],
    );
    // Part 3: this process, through the library.
    let from_library = root.join("from-library");
    let library_records: Vec<Record> = (0..4)
        .map(|i| (format!("lib/{i}").into_bytes(), vec![i as u8; 50]))
        .collect();
    Dataset::create(
        &from_library,
        CreateOptions {
            keyed: true,
            max_shard_size: 100,
            ..Default::default()
        },
    )
    .unwrap()
    .extend(library_records.iter().map(|(k, v)| (k, v)))
    .unwrap();
    let mut expected = read_all(&Dataset::open(&from_ingest).unwrap());
    expected.extend(reference_records);
    expected.extend(library_records);

    // Into a dataset that does not exist yet: created with the first part's settings.
    let target = root.join("merged");
    let out = ok(&[
        "merge",
        s(&from_ingest),
        s(&from_reference),
        s(&from_library),
        "--into",
        s(&target),
        "--json",
    ]);
    let summary = json_of(&out);
    assert_eq!(summary["parts"], 3);
    assert_eq!(summary["records"], expected.len());
    assert_eq!(summary["created"], true);
    assert_eq!(summary["copied_files"], 0);
    assert!(summary["linked_files"].as_u64().unwrap() >= 6, "{summary}");
    assert_eq!(summary["parts_not_removed"], json!([]));
    for part in [&from_ingest, &from_reference, &from_library] {
        assert!(!part.exists(), "{} was not removed", part.display());
    }
    assert_eq!(read_all(&Dataset::open(&target).unwrap()), expected);
    assert_eq!(reference_reads(&target), expected);
    let verified = String::from_utf8(ok(&["verify", s(&target)])).unwrap();
    assert!(verified.starts_with("ok:"), "{verified}");
}

#[test]
fn duplicates_fail_naming_both_places_or_are_skipped_first_copy_winning() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let create = |name: &str, records: &[(&str, &str)]| {
        let path = root.join(name);
        Dataset::create(
            &path,
            CreateOptions {
                keyed: true,
                compression: Compression::None,
                max_shard_size: 1000,
            },
        )
        .unwrap()
        .extend(records.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())))
        .unwrap();
        path
    };
    let target = create("target", &[("a", "target a"), ("b", "target b")]);
    let one = create("one", &[("c", "one c"), ("a", "one a")]);
    let two = create("two", &[("c", "two c"), ("d", "two d")]);
    let message = fails(&["merge", s(&one), s(&two), "--into", s(&target)]);
    assert!(message.contains("duplicate key \"a\""), "{message}");
    assert!(message.contains(s(&target.join("000000.bin"))), "{message}");
    assert!(message.contains(s(&one.join("000000.bin"))), "{message}");
    assert!(message.contains("nothing was merged"), "{message}");
    assert_eq!(Dataset::open(&target).unwrap().len(), 2);
    assert_eq!(Dataset::open(&one).unwrap().len(), 2);

    // --copy --on-duplicate skip: the target's a, one's c; the parts stay.
    let out = ok(&[
        "merge",
        s(&one),
        s(&two),
        "--into",
        s(&target),
        "--on-duplicate",
        "skip",
        "--copy",
        "--json",
    ]);
    let summary = json_of(&out);
    assert_eq!(summary["skipped"], 2);
    assert_eq!(summary["rewritten_shards"], 2);
    let got: Vec<(String, String)> = read_all(&Dataset::open(&target).unwrap())
        .into_iter()
        .map(|(k, v)| (String::from_utf8(k).unwrap(), String::from_utf8(v).unwrap()))
        .collect();
    let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert_eq!(
        got,
        pairs(&[
            ("a", "target a"),
            ("b", "target b"),
            ("c", "one c"),
            ("d", "two d")
        ])
    );
    assert_eq!(Dataset::open(&one).unwrap().len(), 2);
    assert_eq!(Dataset::open(&two).unwrap().len(), 2);
    assert_eq!(reference_reads(&target).len(), 4);

    // Text summary; settings that differ are an error naming the part.
    let keyless = root.join("keyless");
    Dataset::create(&keyless, CreateOptions::default()).unwrap();
    let message = fails(&["merge", s(&keyless), "--into", s(&target)]);
    assert!(message.contains(s(&keyless)), "{message}");
    assert!(message.contains("keyless"), "{message}");
    usage_error(&["merge", "--into", s(&target)]);
    usage_error(&[
        "merge",
        s(&one),
        "--into",
        s(&target),
        "--on-duplicate",
        "x",
    ]);
}

#[test]
fn gc_lists_then_removes_leftovers_and_abandoned_staging_and_refuses_while_locked() {
    let tmp = tempfile::tempdir().unwrap();
    let dataset = tmp.path().join("ds");
    let mut handle = Dataset::create(&dataset, CreateOptions::default()).unwrap();
    handle.extend_values([b"one", b"two"]).unwrap();
    fs::write(dataset.join("000001.bin"), b"leftover").unwrap();
    let part = dataset.join("_staging/job-1/000000-abc");
    Dataset::create(&part, CreateOptions::default())
        .unwrap()
        .extend_values([b"staged"])
        .unwrap();

    let listed = String::from_utf8(ok(&["gc", s(&dataset), "--dry-run"])).unwrap();
    assert!(listed.contains(&format!("would remove {}", s(&dataset.join("000001.bin")))));
    assert!(listed.contains(s(&part.join("000000.bin"))), "{listed}");
    assert!(listed.contains(s(&part.join("manifest.json"))), "{listed}");
    assert!(dataset.join("000001.bin").exists() && part.exists());
    // Nothing is old enough.
    let young = json_of(&ok(&["gc", s(&dataset), "--older-than", "1h", "--json"]));
    assert_eq!(young["files"], json!([]));
    assert_eq!(
        young["kept_jobs"],
        json!([s(&dataset.join("_staging/job-1"))])
    );
    usage_error(&["gc", s(&dataset), "--older-than", "1w"]);

    let extend = handle.begin_extend().unwrap();
    let message = fails(&["gc", s(&dataset)]);
    assert!(message.contains("lock"), "{message}");
    drop(extend);

    let report = json_of(&ok(&["gc", s(&dataset), "--json"]));
    assert!(report["files"].as_array().unwrap().len() >= 4, "{report}");
    assert!(!dataset.join("000001.bin").exists());
    assert!(!dataset.join("_staging").exists());
    assert_eq!(read_all(&Dataset::open(&dataset).unwrap()).len(), 2);
}

/// Records' fields as `bcd ls --fields` prints them, one object per record.
fn listed_fields(dataset: &Path) -> Vec<Value> {
    String::from_utf8(ok(&["ls", s(dataset), "--fields"]))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// A labelled tree of `n` files per class, a few bytes each.
fn labelled_tree(root: &Path, classes: &[&str], n: usize, tag: &str) {
    for class in classes {
        fs::create_dir_all(root.join(class)).unwrap();
        for i in 0..n {
            let name = format!("{class}/{tag}{i:02}.jpg");
            fs::write(root.join(&name), format!("{name} ").repeat(9)).unwrap();
        }
    }
}

#[test]
fn fields_and_statistics_come_along_moved_whole_or_rewritten_without_duplicates() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    // Two parts with labels (one with a class the other lacks), and a third
    // holding copies of part one's keys: with skip, its shards are rewritten.
    let ingest = |tree: &Path, into: &Path| {
        ok(&[
            "ingest",
            s(tree),
            "--into",
            s(into),
            "--labels",
            "folder",
            "--max-shard-size",
            "600",
            "--quiet",
        ]);
    };
    labelled_tree(&root.join("t1"), &["cat", "dog"], 6, "a");
    labelled_tree(&root.join("t2"), &["cat", "dog", "owl"], 4, "b");
    labelled_tree(&root.join("t3"), &["cat"], 6, "a");
    labelled_tree(&root.join("t3"), &["cat"], 3, "c");
    for n in ["1", "2", "3"] {
        ingest(&root.join(format!("t{n}")), &root.join(format!("p{n}")));
    }
    let parts: Vec<Vec<Value>> = ["p1", "p2", "p3"]
        .iter()
        .map(|p| listed_fields(&root.join(p)))
        .collect();
    let target = root.join("merged");
    let summary = json_of(&ok(&[
        "merge",
        s(&root.join("p1")),
        s(&root.join("p2")),
        s(&root.join("p3")),
        "--into",
        s(&target),
        "--on-duplicate",
        "skip",
        "--json",
    ]));
    assert_eq!(summary["skipped"], 6, "{summary}");
    assert!(
        summary["rewritten_shards"].as_u64().unwrap() > 0,
        "{summary}"
    );

    // Every record keeps its fields; part three keeps only its new records.
    let mut expected: Vec<Value> = parts[0].iter().chain(&parts[1]).cloned().collect();
    expected.extend(
        parts[2]
            .iter()
            .filter(|r| r["key"].as_str().unwrap().contains("/c"))
            .cloned(),
    );
    assert_eq!(listed_fields(&target), expected);
    // The statistics are those of the records merged, without a scan.
    let stats = json_of(&ok(&["stats", s(&target), "--json"]));
    assert_eq!(stats["records"], expected.len());
    let counts = |label: &str| expected.iter().filter(|r| r["label"] == label).count();
    assert_eq!(
        stats["fields"]["label"]["counts"],
        json!([
            ["cat", counts("cat")],
            ["dog", counts("dog")],
            ["owl", counts("owl")]
        ])
    );
    // The same as one ingest of the same records would report.
    let info = json_of(&ok(&["info", s(&target), "--json"]));
    assert_eq!(
        info["schema"],
        json!([{"name": "label", "type": "Utf8"}, {"name": "label_index", "type": "Int64"}])
    );
    // verify exits non-zero on any record, sidecar or index problem.
    ok(&["verify", s(&target)]);
    // The reference reads every record.
    assert_eq!(
        reference_reads(&target),
        read_all(&Dataset::open(&target).unwrap())
    );
}
