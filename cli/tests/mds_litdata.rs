//! `bcd ingest` of MosaicML MDS and LitData directories (`fixtures/mds/`,
//! `fixtures/litdata/`, written by `MDSWriter` and `litdata.optimize`), end to
//! end through the binary: detected by their `index.json`, the records and
//! their typed fields against what the tools' readers gave (`expected.json`),
//! read back through `export --to OUT.parquet` by pyarrow; damaged directories
//! failing with nothing committed.

use std::fs;
use std::path::{Path, PathBuf};

use bcd_test_support::tree_snapshot;
use serde_json::Value;

mod common;
use common::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(name)
}

fn expected(format: &str) -> Value {
    let text = fs::read_to_string(fixture(&format!("{format}/expected.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// What pyarrow reads of an exported Parquet file: each column's type, and
/// the rows with binary as hex.
const PARQUET_ROWS: &str = r#"
import json, sys, pyarrow.parquet as pq
table = pq.read_table(sys.argv[1])
def plain(v):
    if isinstance(v, bytes): return v.hex()
    if isinstance(v, list): return [plain(x) for x in v]
    return v
rows = [{k: plain(v) for k, v in row.items()} for row in table.to_pylist()]
print(json.dumps({"types": {f.name: str(f.type) for f in table.schema}, "rows": rows}))
"#;

fn parquet_rows(path: &Path) -> Value {
    serde_json::from_slice(&run_python(PARQUET_ROWS, &[s(path)])).unwrap()
}

#[test]
fn an_mds_directory_keeps_its_samples_and_typed_columns_through_parquet() {
    let tmp = tempfile::tempdir().unwrap();
    let want = &expected("mds")["every-encoding"];
    let ds = tmp.path().join("ds");
    ok(&[
        "ingest",
        s(&fixture("mds/every-encoding")),
        "--into",
        s(&ds),
        "--value-column",
        "blob",
        "--key-column",
        "id",
        "--quiet",
    ]);
    let samples = want["samples"].as_array().unwrap();
    let keys = String::from_utf8(ok(&["ls", s(&ds)])).unwrap();
    let ids: Vec<&str> = samples
        .iter()
        .map(|x| x["id"]["read"].as_str().unwrap())
        .collect();
    assert_eq!(keys.lines().collect::<Vec<_>>(), ids);
    let out = tmp.path().join("out.parquet");
    ok(&["export", s(&ds), "--to", s(&out)]);
    let seen = parquet_rows(&out);
    let types = &seen["types"];
    for (column, arrow) in [
        ("i8", "int8"),
        ("u64", "uint64"),
        ("f16", "halffloat"),
        ("f32", "float"),
        ("sd", "string"),
        ("si", "int64"),
        ("jpg", "binary"),
        ("arr.shape", "list<item: int64>"),
    ] {
        assert_eq!(types[column], arrow, "{column}: {types}");
    }
    for (row, sample) in seen["rows"].as_array().unwrap().iter().zip(samples) {
        assert_eq!(row["blob"], sample["blob"]["stored"]);
        assert_eq!(row["id"], sample["id"]["read"]);
        for column in ["u64", "i64", "text", "sd", "si"] {
            assert_eq!(row[column], sample[column]["read"], "{column}");
        }
        assert_eq!(row["jpg"], sample["jpg"]["stored"]);
        assert_eq!(row["arr.shape"], sample["arr"]["read"]["shape"]);
    }
}

#[test]
fn a_litdata_directory_keeps_its_items_and_leaves_through_parquet() {
    let tmp = tempfile::tempdir().unwrap();
    let want = &expected("litdata")["zstd-batch"];
    let ds = tmp.path().join("ds");
    // The image is the only binary leaf: the value without --value-column.
    ok(&[
        "ingest",
        s(&fixture("litdata/zstd-batch")),
        "--into",
        s(&ds),
        "--key-column",
        "name",
        "--quiet",
    ]);
    let out = tmp.path().join("out.parquet");
    ok(&["export", s(&ds), "--to", s(&out)]);
    let seen = parquet_rows(&out);
    assert_eq!(seen["types"]["label"], "int64");
    let items = want["items"].as_array().unwrap();
    let rows = seen["rows"].as_array().unwrap();
    assert_eq!(rows.len(), items.len());
    for (row, item) in rows.iter().zip(items) {
        assert_eq!(row["image"], item["image"]["stored"]);
        assert_eq!(row["name"], item["name"]["read"]);
        assert_eq!(row["label"], item["label"]["read"]);
    }
}

/// The README's command for a LitData text corpus (its "Migrating" table),
/// on the fixture LitData wrote as Arrow footers with IPC zstd.
const README_TEXT_COMMAND: &str =
    "bcd ingest optimized/ --into ds --value-column text --key-column id";

#[test]
fn a_litdata_text_corpus_kept_as_arrow_footers_ingests_with_the_readme_command() {
    let readme = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    assert!(readme.contains(README_TEXT_COMMAND));
    let tmp = tempfile::tempdir().unwrap();
    let want = &expected("litdata")["text-zstd"];
    let ds = tmp.path().join("ds");
    let source = fixture("litdata/text-zstd");
    let args: Vec<&str> = (README_TEXT_COMMAND.split(' ').skip(1))
        .map(|a| match a {
            "optimized/" => s(&source),
            "ds" => s(&ds),
            other => other,
        })
        .chain(["--quiet"])
        .collect();
    ok(&args);
    let rows = want["rows"].as_array().unwrap();
    let keys = String::from_utf8(ok(&["ls", s(&ds)])).unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(keys.lines().collect::<Vec<_>>(), ids);
    let out = tmp.path().join("out.parquet");
    ok(&["export", s(&ds), "--to", s(&out)]);
    let seen = parquet_rows(&out);
    let types = &seen["types"];
    for (column, arrow) in [
        ("text", "binary"),
        ("n", "int64"),
        ("score", "double"),
        ("flag", "bool"),
        ("meta.src", "string"),
        ("meta.page", "int64"),
        ("toks", "list<item: int64>"),
        ("extra", "string"),
    ] {
        assert_eq!(types[column], arrow, "{column}: {types}");
    }
    let seen = seen["rows"].as_array().unwrap();
    assert_eq!(seen.len(), rows.len());
    for (got, row) in seen.iter().zip(rows) {
        let text = row["text"].as_str().unwrap().as_bytes();
        let hex: String = text.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(got["text"], hex.as_str());
        assert_eq!(got["id"], row["id"]);
        for column in ["n", "score", "flag", "toks"] {
            assert_eq!(got[column], row[column], "{column}");
        }
        assert_eq!(got["meta.src"], row["meta"]["src"]);
        assert_eq!(got["meta.page"], row["meta"]["page"]);
        // A key only some items have: null where StreamingDataset gave None
        // or (in a chunk where no item has it) nothing.
        assert_eq!(got["extra"], *row.get("extra").unwrap_or(&Value::Null));
    }
}

/// A copy of the fixture directory `name` in `dir`.
fn copy_dir(name: &str, dir: &Path) -> PathBuf {
    let copy = dir.join(name.replace('/', "-"));
    fs::create_dir(&copy).unwrap();
    for entry in fs::read_dir(fixture(name)).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
    }
    copy
}

#[test]
fn damaged_directories_are_refused_naming_the_file_with_nothing_committed() {
    let tmp = tempfile::tempdir().unwrap();
    let existing = tmp.path().join("existing");
    ok(&[
        "ingest",
        s(&fixture("mds/gz")),
        "--into",
        s(&existing),
        "--quiet",
    ]);
    let before = tree_snapshot(&existing);
    // A hash mismatch in the last shard: the records of the first were read.
    let mds = copy_dir("mds/zstd", tmp.path());
    let shard = mds.join("shard.00002.mds.zstd");
    let mut bytes = fs::read(&shard).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    fs::write(&shard, bytes).unwrap();
    // A pickled leaf, and a chunk cut short.
    let pickled = fixture("litdata/pickled");
    let litdata = copy_dir("litdata/tuple", tmp.path());
    let chunk = litdata.join("chunk-0-2.bin");
    let bytes = fs::read(&chunk).unwrap();
    fs::write(&chunk, &bytes[..bytes.len() - 7]).unwrap();
    // A pickled leaf is a usage error (exit 2): --fields would leave it out.
    for (source, message, usage) in [
        (&mds, "shard.00002.mds.zstd", false),
        (
            &pickled,
            "never unpickles; leave it out with --fields",
            true,
        ),
        (&litdata, "chunk-0-2.bin", false),
    ] {
        let run = |into: &Path| {
            let args = ["ingest", s(source), "--into", s(into)];
            match usage {
                true => usage_error(&args),
                false => fails(&args),
            }
        };
        let fresh = tmp.path().join("fresh");
        let error = run(&fresh);
        assert!(error.contains(message), "{message}: {error}");
        assert_eq!(tree_snapshot(&fresh), None, "{message}");
        run(&existing);
        assert_eq!(tree_snapshot(&existing), before, "{message}");
    }
}
