//! CSV sources listing files to ingest, as Python's `csv` module wrote them.

use serde_json::json;

use crate::checks::{
    assert_all_hold, assert_summary, ingest_cases, with_errors, with_records, Holds,
};
use crate::common::*;
use crate::datasets::{assert_fails_cleanly, expected, fixture, fixtures};
use crate::per_source::csv_extra;
use crate::{ingest, ingest_in, strings};

/// Quoted paths with commas, spaces and quotes; minimal and all-quoted CSVs, CRLF
/// and LF; a TSV; a key column; --root. Paths resolve against the CSV's
/// directory, not the working directory, and keys are the paths as written.
#[test]
fn csv_lists_of_quoted_paths_are_ingested_as_written() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = expected("csv")["cases"].as_array().unwrap().clone();
    let cases = with_records(&cases);
    assert_eq!(cases.len(), 5, "csv cases with records in expected.json");
    let mut all = ingest_cases(
        tmp.path(),
        "csv",
        &cases,
        |case| vec![fixture("csv", case["csv"].as_str().unwrap())],
        csv_extra,
    );

    // The same list named relative to the working directory, run from there.
    let dataset = tmp.path().join("relative");
    let summary = ingest_in(
        Some(&fixtures("csv")),
        &strings(&["list.csv"]),
        &dataset,
        &[],
    );
    assert_summary(&summary, 8, json!({}), "list.csv from its directory");
    all.push(Holds {
        dataset,
        keyed: true,
        records: all[0].records.clone(),
        what: "list.csv from its directory".into(),
    });
    assert_all_hold(&all);
}

/// Absolute paths cannot be committed: Python's csv module writes a list of files
/// made here, under a directory whose name needs quoting.
#[test]
fn csv_absolute_paths_are_read_and_kept_as_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data, \"quoted\" dir");
    std::fs::create_dir(&dir).unwrap();
    let mut want = Records::new();
    for (name, value) in [
        ("a b.bin", &b"first"[..]),
        ("c,d.bin", b""),
        ("e\"f.bin", b"\x00\xff third"),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, value).unwrap();
        want.push((s(&path).as_bytes().to_vec(), value.to_vec()));
    }
    let list = tmp.path().join("elsewhere").join("absolute.csv");
    std::fs::create_dir(list.parent().unwrap()).unwrap();
    let paths: Vec<String> = want
        .iter()
        .map(|(k, _)| String::from_utf8(k.clone()).unwrap())
        .collect();
    run_python(
        "import csv, sys\n\
         with open(sys.argv[1], 'w', newline='') as f:\n\
         \x20   w = csv.writer(f)\n\
         \x20   w.writerow(['label', 'path'])\n\
         \x20   w.writerows([[str(i), p] for i, p in enumerate(sys.argv[2:])])\n",
        &[
            &[s(&list)],
            &paths.iter().map(String::as_str).collect::<Vec<_>>()[..],
        ]
        .concat(),
    );
    let written = std::fs::read_to_string(&list).unwrap();
    assert!(
        written.contains("\"\""),
        "the list quotes the quotes: {written}"
    );
    let dataset = tmp.path().join("absolute");
    let summary = ingest(&[s(&list).to_owned()], &dataset, &[]);
    assert_summary(&summary, 3, json!({}), "absolute.csv");
    assert_all_hold(&[Holds {
        dataset,
        keyed: true,
        records: want,
        what: "absolute.csv".into(),
    }]);
}

#[test]
fn csv_row_naming_a_missing_file_fails_naming_the_line_and_path() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = expected("csv")["cases"].as_array().unwrap().clone();
    let errors = with_errors(&cases);
    assert_eq!(errors.len(), 1);
    let error = &errors[0]["error"];
    let csv = fixture("csv", error["csv"].as_str().unwrap());
    assert_fails_cleanly(
        tmp.path(),
        std::slice::from_ref(&csv),
        &[],
        true,
        &[
            format!("{csv}: line {}", error["line"]),
            format!("cannot read {}", error["path"]),
            "No such file or directory".into(),
        ],
    );
    // A column that is not there names the columns found.
    assert_fails_cleanly(
        tmp.path(),
        &[fixture("csv", "list.tsv")],
        &[],
        true,
        &strings(&[
            "list.tsv: line 1 (header)",
            "no column \"path\"",
            "--delimiter",
        ]),
    );
}
