//! The dataset owns its class vocabularies (FORMAT.md, "Merging metadata"): an
//! append or a merge whose source numbers its classes differently keeps every
//! stored record's class, renumbering the new records to the dataset's names.
//! Checked through the binary: `ls --fields`, `info --json`, `stats --json`,
//! `export --to x.parquet` read back by Hugging Face `datasets`.

use std::fs;
use std::path::Path;

use serde_json::{json, Value};

mod common;
use common::{fails, ok, run_python, s};

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

/// `n` files per class folder, named `<class>/<tag><i>.jpg`.
fn labelled_tree(root: &Path, classes: &[&str], n: usize, tag: &str) {
    for class in classes {
        fs::create_dir_all(root.join(class)).unwrap();
        for i in 0..n {
            let name = format!("{class}/{tag}{i:02}.jpg");
            fs::write(root.join(&name), format!("{name} ").repeat(9)).unwrap();
        }
    }
}

fn ingest_folders(tree: &Path, into: &Path) {
    ok(&[
        "ingest",
        s(tree),
        "--into",
        s(into),
        "--labels",
        "folder",
        "--max-shard-size",
        "400",
        "--quiet",
    ]);
}

/// Asserts that every record's `class_names[label_index]` is the folder its
/// key starts with (and its `label`), and that the statistics count the
/// indices the records hold; returns the class names.
fn assert_every_record_names_its_folder(dataset: &Path, records: usize) -> Vec<String> {
    let info = json_of(&ok(&["info", s(dataset), "--json"]));
    let names: Vec<String> = serde_json::from_value(info["metadata"]["class_names"].clone())
        .unwrap_or_else(|e| panic!("class_names in {info}: {e}"));
    let listed = String::from_utf8(ok(&["ls", s(dataset), "--fields"])).unwrap();
    let mut indices = std::collections::BTreeMap::new();
    for line in listed.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        let key = record["key"].as_str().unwrap();
        let folder = key.split('/').next().unwrap();
        let index = record["label_index"].as_u64().unwrap();
        assert_eq!(names[index as usize], folder, "{record} with {names:?}");
        assert_eq!(record["label"], folder, "{record}");
        *indices.entry(index).or_insert(0u64) += 1;
    }
    assert_eq!(indices.values().sum::<u64>(), records as u64, "{listed}");
    let stats = json_of(&ok(&["stats", s(dataset), "--json"]));
    let mut counted: Vec<(u64, u64)> =
        serde_json::from_value(stats["fields"]["label_index"]["counts"].clone()).unwrap();
    counted.sort();
    assert_eq!(counted, indices.into_iter().collect::<Vec<_>>(), "{stats}");
    ok(&["verify", s(dataset)]);
    names
}

#[test]
fn an_append_of_other_classes_keeps_every_records_class_and_numbers_new_classes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let (t1, t2, ds) = (
        tmp.path().join("t1"),
        tmp.path().join("t2"),
        tmp.path().join("ds"),
    );
    labelled_tree(&t1, &["cat", "dog"], 5, "a");
    labelled_tree(&t2, &["ant", "cat"], 5, "b");
    ingest_folders(&t1, &ds);
    ingest_folders(&t2, &ds);
    // cat and dog keep 0 and 1; ant, new, is 2; the second run's cat is 0.
    assert_eq!(
        assert_every_record_names_its_folder(&ds, 20),
        ["cat", "dog", "ant"]
    );
}

#[test]
fn a_merge_of_parts_with_other_class_numbers_renumbers_each_part_into_the_target() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    labelled_tree(&root.join("t1"), &["cat", "dog"], 5, "a");
    labelled_tree(&root.join("t2"), &["ant", "cat"], 5, "b");
    labelled_tree(&root.join("t3"), &["dog", "eel"], 4, "c");
    for n in ["1", "2", "3"] {
        ingest_folders(&root.join(format!("t{n}")), &root.join(format!("p{n}")));
    }
    // Into a new target (the first part's numbers) ...
    let merged = root.join("merged");
    ok(&[
        "merge",
        s(&root.join("p1")),
        s(&root.join("p2")),
        "--into",
        s(&merged),
    ]);
    assert_eq!(
        assert_every_record_names_its_folder(&merged, 20),
        ["cat", "dog", "ant"]
    );
    // ... and into an existing one, with copies: part three's eel is 3.
    ok(&["merge", s(&root.join("p3")), "--into", s(&merged), "--copy"]);
    assert_eq!(
        assert_every_record_names_its_folder(&merged, 28),
        ["cat", "dog", "ant", "eel"]
    );
    // The part merged by copy is untouched: its own numbers, its own names.
    assert_eq!(
        assert_every_record_names_its_folder(&root.join("p3"), 8),
        ["dog", "eel"]
    );
}

#[test]
fn a_merge_that_drops_duplicates_renumbers_the_rewritten_shards_too() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    labelled_tree(&root.join("t1"), &["cat", "dog"], 5, "a");
    // t2 repeats t1's cat files (same keys) beside new ant files.
    labelled_tree(&root.join("t2"), &["ant"], 5, "b");
    labelled_tree(&root.join("t2"), &["cat"], 5, "a");
    ingest_folders(&root.join("t1"), &root.join("p1"));
    ingest_folders(&root.join("t2"), &root.join("p2"));
    let target = root.join("merged");
    let summary = json_of(&ok(&[
        "merge",
        s(&root.join("p1")),
        s(&root.join("p2")),
        "--into",
        s(&target),
        "--on-duplicate",
        "skip",
        "--json",
    ]));
    assert_eq!(summary["skipped"], 5, "{summary}");
    assert!(
        summary["rewritten_shards"].as_u64().unwrap() > 0,
        "{summary}"
    );
    assert_eq!(
        assert_every_record_names_its_folder(&target, 15),
        ["cat", "dog", "ant"]
    );
}

/// Writes a Parquet file as `datasets` would: an `id`, an `image` binary and a
/// ClassLabel `label`, with the `huggingface` schema metadata naming `names`.
const WRITE_DUMP: &str = r#"
import json, sys, pyarrow as pa, pyarrow.parquet as pq
path, names, rows = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
description = sys.argv[4] if len(sys.argv) > 4 else None
features = {"id": {"dtype": "string", "_type": "Value"},
            "image": {"dtype": "binary", "_type": "Value"},
            "label": {"names": names, "_type": "ClassLabel"}}
table = pa.table({"id": [r[0] for r in rows],
                  "image": [r[0].encode() * 3 for r in rows],
                  "label": pa.array([names.index(r[1]) for r in rows], pa.int64())})
info = {"features": features}
if description is not None:
    info["description"] = description
table = table.replace_schema_metadata({"huggingface": json.dumps({"info": info})})
pq.write_table(table, path)
"#;

/// Every row of a Parquet file as `datasets` reads it: id and label name.
const READ_BACK: &str = r#"
import json, sys, datasets
ds = datasets.Dataset.from_parquet(sys.argv[1])
label = ds.features["label"]
print(json.dumps({"names": label.names,
                  "rows": [[r["id"], label.int2str(r["label"])] for r in ds]}))
"#;

#[test]
fn hugging_face_dumps_naming_other_classes_append_and_export_with_every_rows_name() {
    let tmp = tempfile::tempdir().unwrap();
    let (one, two, ds, out) = (
        tmp.path().join("one.parquet"),
        tmp.path().join("two.parquet"),
        tmp.path().join("ds"),
        tmp.path().join("x.parquet"),
    );
    let first = json!([["a0", "cat"], ["a1", "dog"], ["a2", "cat"]]);
    let second = json!([["b0", "ant"], ["b1", "cat"], ["b2", "ant"]]);
    for (path, names, rows) in [
        (&one, json!(["cat", "dog"]), &first),
        (&two, json!(["ant", "cat"]), &second),
    ] {
        run_python(
            WRITE_DUMP,
            &[s(path), &names.to_string(), &rows.to_string()],
        );
        ok(&ingest_dump(path, &ds));
    }
    let info = json_of(&ok(&["info", s(&ds), "--json"]));
    assert_eq!(
        info["metadata"]["class_labels"],
        json!({"label": ["cat", "dog", "ant"]}),
        "{info}"
    );
    assert_eq!(
        info["metadata"]["huggingface"]["info"]["features"]["label"]["names"],
        json!(["cat", "dog", "ant"]),
        "{info}"
    );
    ok(&["export", s(&ds), "--to", s(&out)]);
    let back = json_of(&run_python(READ_BACK, &[s(&out)]));
    let expected: Vec<Value> = first
        .as_array()
        .unwrap()
        .iter()
        .chain(second.as_array().unwrap())
        .cloned()
        .collect();
    assert_eq!(back["rows"], Value::Array(expected), "{back}");
    assert_eq!(back["names"], json!(["cat", "dog", "ant"]));
}

fn ingest_dump(path: &Path, into: &Path) -> Vec<String> {
    [
        "ingest",
        s(path),
        "--into",
        s(into),
        "--value-column",
        "image",
        "--key-column",
        "id",
        "--quiet",
    ]
    .map(str::to_owned)
    .to_vec()
}

#[test]
fn metadata_that_conflicts_with_the_datasets_is_refused_leaving_it_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let (one, two, ds) = (
        tmp.path().join("one.parquet"),
        tmp.path().join("two.parquet"),
        tmp.path().join("ds"),
    );
    // Two dumps whose Hugging Face descriptions differ: no rule merges them.
    for (path, description) in [(&one, "pets"), (&two, "insects")] {
        let rows = json!([[format!("{description}0"), "cat"]]);
        run_python(
            WRITE_DUMP,
            &[s(path), r#"["cat"]"#, &rows.to_string(), description],
        );
    }
    ok(&ingest_dump(&one, &ds));
    let before = bcd_test_support::tree_snapshot(&ds).unwrap();
    let message = fails(&ingest_dump(&two, &ds));
    assert!(
        message.contains(
            r#"metadata "huggingface.info.description": "insects" conflicts with "pets" already in the dataset"#
        ),
        "{message}"
    );
    assert_eq!(bcd_test_support::tree_snapshot(&ds).unwrap(), before);
    // The same dumps as parts of a merge: refused before anything is written.
    let part = tmp.path().join("part");
    ok(&ingest_dump(&two, &part));
    let message = fails(&["merge", s(&part), "--into", s(&ds)]);
    assert!(
        message.contains(r#"metadata "huggingface.info.description""#),
        "{message}"
    );
    assert_eq!(bcd_test_support::tree_snapshot(&ds).unwrap(), before);
    // The part is still whole, to be merged once it agrees.
    ok(&["verify", s(&part)]);
}

#[test]
fn class_names_a_later_file_of_the_run_gives_that_would_renumber_its_records_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (one, plain, named, ds) = (
        tmp.path().join("one.parquet"),
        tmp.path().join("a-plain.parquet"),
        tmp.path().join("b-named.parquet"),
        tmp.path().join("ds"),
    );
    run_python(
        WRITE_DUMP,
        &[s(&one), r#"["cat", "dog"]"#, r#"[["c0", "cat"]]"#],
    );
    // The run's first file has no Hugging Face metadata: its labels have no
    // names until the second file's, ant and cat, which the records already
    // written would need to be renumbered into.
    run_python(
        WRITE_DUMP,
        &[s(&named), r#"["ant", "cat"]"#, r#"[["b0", "ant"]]"#],
    );
    run_python(
        r#"
import sys, pyarrow as pa, pyarrow.parquet as pq
pq.write_table(pa.table({"id": ["p0"], "image": [b"p"], "label": pa.array([1], pa.int64())}), sys.argv[1])
"#,
        &[s(&plain)],
    );
    ok(&ingest_dump(&one, &ds));
    let before = bcd_test_support::tree_snapshot(&ds).unwrap();
    let mut args = ingest_dump(&plain, &ds);
    args.insert(2, s(&named).to_owned());
    let message = fails(&args);
    assert!(
        message.contains("class names given after 2 records would renumber them"),
        "{message}"
    );
    assert_eq!(bcd_test_support::tree_snapshot(&ds).unwrap(), before);
}

/// A `datasets` dump with a list of objects, each with a ClassLabel category.
const WRITE_OBJECTS: &str = r#"
import json, sys
from datasets import ClassLabel, Dataset, Features, List, Value
path, names, rows = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
features = Features({"id": Value("string"), "image": Value("binary"),
                     "objects": List({"category": ClassLabel(names=names)})})
Dataset.from_dict({"id": [r[0] for r in rows],
                   "image": [r[0].encode() for r in rows],
                   "objects": [[{"category": names.index(c)} for c in r[1]] for r in rows]},
                  features=features).to_parquet(path)
"#;

/// Every row as `datasets` reads it: id and its objects' category names.
const READ_OBJECTS: &str = r#"
import json, sys, datasets
ds = datasets.Dataset.from_parquet(sys.argv[1])
category = ds.features["objects"].feature["category"]
print(json.dumps({"names": category.names,
                  "rows": [[r["id"], [category.int2str(o["category"]) for o in r["objects"]]]
                           for r in ds]}))
"#;

#[test]
fn a_nested_class_label_of_appended_dumps_is_renumbered_inside_its_lists() {
    let tmp = tempfile::tempdir().unwrap();
    let (one, two, ds, out) = (
        tmp.path().join("one.parquet"),
        tmp.path().join("two.parquet"),
        tmp.path().join("ds"),
        tmp.path().join("x.parquet"),
    );
    let first = json!([["a0", ["cat", "dog"]], ["a1", []], ["a2", ["dog"]]]);
    let second = json!([["b0", ["ant", "cat", "ant"]], ["b1", ["cat"]]]);
    for (path, names, rows) in [
        (&one, json!(["cat", "dog"]), &first),
        (&two, json!(["ant", "cat"]), &second),
    ] {
        run_python(
            WRITE_OBJECTS,
            &[s(path), &names.to_string(), &rows.to_string()],
        );
        ok(&ingest_dump(path, &ds));
    }
    let info = json_of(&ok(&["info", s(&ds), "--json"]));
    assert_eq!(
        info["metadata"]["class_labels"],
        json!({"objects.category": ["cat", "dog", "ant"]}),
        "{info}"
    );
    ok(&["export", s(&ds), "--to", s(&out)]);
    let back = json_of(&run_python(READ_OBJECTS, &[s(&out)]));
    let expected: Vec<Value> = first
        .as_array()
        .unwrap()
        .iter()
        .chain(second.as_array().unwrap())
        .cloned()
        .collect();
    assert_eq!(back["rows"], Value::Array(expected), "{back}");
    assert_eq!(back["names"], json!(["cat", "dog", "ant"]));
}
