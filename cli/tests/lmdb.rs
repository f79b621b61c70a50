//! LMDB environments through the binary (issue 23): `bcd ingest ENV` stores
//! every entry py-lmdb reads of the fixtures (`fixtures/lmdb/`), detected from
//! the directory or the data file, with `--lmdb-value`, `--lmdb-db` and
//! `--value-column`; and a damaged environment, or a FIFO, is refused naming
//! its data file with nothing committed, into a new dataset or an existing one.

use std::fs;
use std::path::{Path, PathBuf};

use bcd_test_support::{read_all, tree_snapshot};

mod common;
use common::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/lmdb")
        .join(name)
}

/// Every entry as py-lmdb reads it: (key, value) pairs.
fn py_lmdb(path: &Path, db: Option<&str>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let out = run_python(
        r#"
import sys, lmdb
from pathlib import Path
path = Path(sys.argv[1])
env = lmdb.open(str(path), subdir=path.is_dir(), readonly=True, lock=False, max_dbs=4)
db = env.open_db(sys.argv[2].encode()) if sys.argv[2] else None
with env.begin(db=db) as txn:
    for k, v in txn.cursor():
        print(bytes(k).hex(), bytes(v).hex())
"#,
        &[s(path), db.unwrap_or("")],
    );
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|line| {
            let (k, v) = line.split_once(' ').unwrap();
            let unhex = |h: &str| {
                (0..h.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
                    .collect::<Vec<u8>>()
            };
            (unhex(k), unhex(v))
        })
        .collect()
}

fn records(ds: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    read_all(&bcd::Dataset::open(ds).unwrap())
}

#[test]
fn an_environment_is_ingested_as_py_lmdb_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    // The directory, and the data file itself, are detected as LMDB.
    for (name, source) in [("dir", fixture("raw")), ("file", fixture("raw/data.mdb"))] {
        let ds = dir.path().join(name);
        ok(&["ingest", s(&source), "--into", s(&ds)]);
        assert_eq!(records(&ds), py_lmdb(&fixture("raw"), None), "{name}");
    }
    let ds = dir.path().join("train");
    ok(&[
        "ingest",
        s(&fixture("named")),
        "--lmdb-db",
        "train",
        "--into",
        s(&ds),
    ]);
    assert_eq!(records(&ds), py_lmdb(&fixture("named"), Some("train")));
}

#[test]
fn pickled_values_keep_their_labels_and_the_value_column_chooses_the_value() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("tuple");
    // A file environment: its name says nothing, the option says LMDB.
    ok(&[
        "ingest",
        s(&fixture("pickle-tuple.lmdb")),
        "--lmdb-value",
        "pickle",
        "--into",
        s(&ds),
    ]);
    let listed = String::from_utf8(ok(&["ls", s(&ds), "--fields"])).unwrap();
    assert_eq!(listed.lines().count(), 12, "{listed}");
    assert!(listed.contains(r#"{"key":"4","label":1}"#), "{listed}");
    let ds = dir.path().join("dict");
    ok(&[
        "ingest",
        s(&fixture("pickle-dict")),
        "--lmdb-value",
        "pickle",
        "--value-column",
        "image",
        "--into",
        s(&ds),
    ]);
    let stats = String::from_utf8(ok(&["stats", s(&ds)])).unwrap();
    assert!(
        stats.contains("label (Int64)") && stats.contains("box (List(Float64))"),
        "{stats}"
    );
    // The value column is refused unless the values are pickles.
    let error = usage_error(&[
        "ingest",
        s(&fixture("raw")),
        "--value-column",
        "image",
        "--into",
        s(&dir.path().join("no")),
    ]);
    assert!(error.contains("--lmdb-value pickle"), "{error}");
}

/// A copy of the raw fixture's directory with its data file passed through `edit`.
fn damaged(dir: &Path, name: &str, edit: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let env = dir.join(name);
    fs::create_dir(&env).unwrap();
    let mut data = fs::read(fixture("raw/data.mdb")).unwrap();
    edit(&mut data);
    fs::write(env.join("data.mdb"), data).unwrap();
    env
}

#[test]
fn a_damaged_environment_is_refused_naming_its_file_with_nothing_committed() {
    let dir = tempfile::tempdir().unwrap();
    let existing = dir.path().join("existing");
    ok(&[
        "ingest",
        s(&fixture("named")),
        "--lmdb-db",
        "val",
        "--into",
        s(&existing),
    ]);
    let before = tree_snapshot(&existing);
    type Edit = Box<dyn FnOnce(&mut Vec<u8>)>;
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "truncated",
            Box::new(|d| d.truncate(d.len() / 2)),
            "past the end",
        ),
        ("short", Box::new(|d| d.truncate(100)), "too short"),
        (
            "magic",
            Box::new(|d| {
                d[16] ^= 0xff;
                d[4096 + 16] ^= 0xff;
            }),
            "not LMDB's",
        ),
        (
            "root",
            Box::new(|d| {
                for at in [0, 4096] {
                    d[at + 128..at + 136].copy_from_slice(&(1u64 << 40).to_le_bytes());
                }
            }),
            "root page",
        ),
    ];
    for (what, edit, said) in cases {
        let env = damaged(dir.path(), what, edit);
        let file = env.join("data.mdb");
        let fresh = dir.path().join(format!("fresh-{what}"));
        for into in [&fresh, &existing] {
            let error = fails(&["ingest", s(&env), "--format", "lmdb", "--into", s(into)]);
            assert!(
                error.contains(s(&file)) && error.contains(said),
                "{what}: {error}"
            );
        }
        assert_eq!(tree_snapshot(&fresh), None, "{what}");
        assert_eq!(tree_snapshot(&existing), before, "{what}");
    }
}

#[cfg(unix)]
#[test]
fn a_fifo_for_a_data_file_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("env");
    fs::create_dir(&env).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(env.join("data.mdb"))
        .status()
        .unwrap();
    assert!(status.success());
    let into = dir.path().join("ds");
    let error = fails(&["ingest", s(&env), "--format", "lmdb", "--into", s(&into)]);
    assert!(
        error.contains("data.mdb") && error.contains("a FIFO"),
        "{error}"
    );
    assert_eq!(tree_snapshot(&into), None);
}

#[cfg(unix)]
#[test]
fn a_sparse_data_file_claiming_a_terabyte_is_refused_with_nothing_committed() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let env = damaged(dir.path(), "sparse", |_| {});
    let file = fs::OpenOptions::new()
        .write(true)
        .open(env.join("data.mdb"))
        .unwrap();
    // A terabyte of holes, both meta pages claiming all of it, the root in the holes.
    file.set_len(1 << 40).unwrap();
    for at in [0u64, 4096] {
        let last = (1u64 << 28) - 1;
        file.write_all_at(&(last - 1).to_le_bytes(), at + 128)
            .unwrap();
        file.write_all_at(&last.to_le_bytes(), at + 136).unwrap();
    }
    let into = dir.path().join("ds");
    let error = fails(&["ingest", s(&env), "--into", s(&into)]);
    assert!(
        error.contains("data.mdb") && error.contains("page"),
        "{error}"
    );
    assert_eq!(tree_snapshot(&into), None);
}
