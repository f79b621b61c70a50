//! `bcd ingest` of Hugging Face `save_to_disk` directories (`fixtures/hf_disk/`,
//! written by `datasets`), end to end through the binary: the records and the
//! ClassLabel names against `datasets.load_from_disk`, through `export --to
//! OUT.parquet` read back by `datasets`; `--split` of a DatasetDict; broken
//! directories failing cleanly with nothing committed.

use std::fs;
use std::path::{Path, PathBuf};

mod common;
use common::*;

use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/hf_disk")
        .join(name)
}

fn python_json(code: &str, args: &[&str]) -> Value {
    let out = run_python(code, args);
    serde_json::from_slice(&out).unwrap_or_else(|e| {
        panic!(
            "python printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out)
        )
    })
}

/// What `datasets` reads of a saved directory and of a Parquet file: the rows
/// (images as their bytes) and the label names.
const SAME_ROWS: &str = r#"
import json, sys, datasets
saved = datasets.load_from_disk(sys.argv[1]).cast_column("image", datasets.Image(decode=False))
back = datasets.Dataset.from_parquet(sys.argv[2]).cast_column("image", datasets.Image(decode=False))
# The key column is stored as the key, an integer as its decimal text.
rows = lambda ds: [{"image": r["image"]["bytes"].hex(), "label": r["label"],
                    "caption": r["caption"], "id": str(r["id"])} for r in ds]
print(json.dumps({"saved": rows(saved), "back": rows(back),
                  "names": saved.features["label"].names,
                  "back_label": str(back.features["label"])}))
"#;

#[test]
fn a_saved_dataset_ingested_and_exported_to_parquet_keeps_its_rows_and_class_label_names() {
    let tmp = tempfile::tempdir().unwrap();
    let dataset = tmp.path().join("ds");
    ok(&[
        "ingest",
        s(&fixture("photos")),
        "--into",
        s(&dataset),
        "--value-column",
        "image",
        "--key-column",
        "id",
        "--quiet",
    ]);
    let keys = String::from_utf8(ok(&["ls", s(&dataset)])).unwrap();
    assert_eq!(keys.lines().collect::<Vec<_>>(), ["10", "11", "12", "13"]);
    let back = tmp.path().join("back.parquet");
    ok(&["export", s(&dataset), "--to", s(&back)]);
    let seen = python_json(SAME_ROWS, &[s(&fixture("photos")), s(&back)]);
    assert_eq!(seen["back"], seen["saved"], "{seen}");
    assert_eq!(
        seen["back_label"], "ClassLabel(names=['cat', 'dog', 'bird'])",
        "{seen}"
    );
}

#[test]
fn split_chooses_a_split_and_a_missing_one_is_a_usage_error_naming_the_splits() {
    let tmp = tempfile::tempdir().unwrap();
    let dataset = tmp.path().join("ds");
    let splits = fixture("splits");
    let ingest = |split: &[&str]| {
        let mut args = vec![
            "ingest",
            s(&splits),
            "--into",
            s(&dataset),
            "--value-column",
            "text",
            "--key-column",
            "id",
            "--quiet",
        ];
        args.extend_from_slice(split);
        args.iter().map(|a| a.to_string()).collect::<Vec<_>>()
    };
    let error = usage_error(&ingest(&["--split", "validation"]));
    assert!(
        error.contains("no split \"validation\"; the splits are [\"train\", \"test\"]"),
        "{error}"
    );
    let error = usage_error(&ingest(&[]));
    assert!(error.contains("choose one with --split"), "{error}");
    assert!(!dataset.exists(), "a refused ingest created the dataset");
    ok(&ingest(&["--split", "test"]));
    let keys = String::from_utf8(ok(&["ls", s(&dataset)])).unwrap();
    assert_eq!(keys.lines().collect::<Vec<_>>(), ["4", "5"]);
}

/// Every file of `dir`, by name, with its bytes.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            let bytes = if e.path().is_file() {
                fs::read(e.path()).unwrap()
            } else {
                Vec::new()
            };
            (name, bytes)
        })
        .collect();
    files.sort();
    files
}

#[test]
fn a_truncated_data_file_or_a_corrupt_state_json_fails_naming_it_with_nothing_committed() {
    let tmp = tempfile::tempdir().unwrap();
    // An existing dataset, which the failed ingests must leave as it was.
    let dataset = tmp.path().join("ds");
    ok(&[
        "ingest",
        s(&fixture("photos")),
        "--into",
        s(&dataset),
        "--value-column",
        "image",
        "--quiet",
    ]);
    let before = snapshot(&dataset);
    let broken = |name: &str, change: &dyn Fn(&Path)| {
        let dir = tmp.path().join(name);
        fs::create_dir(&dir).unwrap();
        for entry in fs::read_dir(fixture("photos")).unwrap() {
            let entry = entry.unwrap();
            fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
        }
        change(&dir);
        dir
    };
    let truncated = broken("truncated", &|dir| {
        let file = dir.join("data-00001-of-00002.arrow");
        let data = fs::read(&file).unwrap();
        fs::write(&file, &data[..data.len() / 2]).unwrap();
    });
    let corrupt = broken("corrupt", &|dir| {
        fs::write(dir.join("state.json"), "{\"_data_files\": [{\"filen").unwrap()
    });
    for (dir, names) in [
        (&truncated, "data-00001-of-00002.arrow: message at byte"),
        (&corrupt, "state.json: line 1"),
    ] {
        let error = fails(&[
            "ingest",
            s(dir),
            "--into",
            s(&dataset),
            "--value-column",
            "image",
            "--quiet",
        ]);
        assert!(error.contains(names), "{error}");
        assert_eq!(snapshot(&dataset), before, "{error}");
    }
}
