//! Checking what a dataset holds, three ways (the library, `bcd ls`/`bcd get`,
//! the Python reference), the summary, and the cases of `expected.json`.

use std::path::{Path, PathBuf};

use bcd::Dataset;
use bcd_test_support::{hex, read_all, reference_batch};
use serde_json::{json, Value};

use crate::common::*;
use crate::datasets::{as_dump, fixture, fixtures, json_strings, parse_records};
use crate::ingest;

/// A dataset and what it must hold.
pub(crate) struct Holds {
    pub(crate) dataset: PathBuf,
    pub(crate) keyed: bool,
    pub(crate) records: Records,
    pub(crate) what: String,
}

/// Asserts the dataset holds exactly the records, through the library (every
/// record by index, and by key), `bcd ls -0` (every key, in order) and `bcd get`
/// (first, middle and last record, by index and by key).
pub(crate) fn assert_holds(holds: &Holds) {
    let Holds {
        dataset,
        keyed,
        records: want,
        what,
    } = holds;
    let opened = Dataset::open(dataset).unwrap();
    assert_eq!(opened.keyed(), *keyed, "{what}: keyed");
    assert_eq!(
        read_all(&Dataset::open(dataset).unwrap()),
        *want,
        "{what}: records read by the library"
    );
    if *keyed {
        for (key, value) in want {
            assert_eq!(
                opened.get(key).unwrap().as_deref(),
                Some(&value[..]),
                "{what}: get({key:?}) through the library"
            );
        }
    }
    let listed = ok(&["ls", s(dataset), "-0"]);
    let mut expected_list = Vec::new();
    for (i, (key, _)) in want.iter().enumerate() {
        match keyed {
            true => expected_list.extend_from_slice(key),
            false => expected_list.extend_from_slice(i.to_string().as_bytes()),
        }
        expected_list.push(0);
    }
    assert_eq!(listed, expected_list, "{what}: bcd ls -0");
    let mut sample = vec![0, want.len() / 2, want.len().saturating_sub(1)];
    sample.dedup();
    for i in sample.into_iter().filter(|&i| i < want.len()) {
        let (key, value) = &want[i];
        let by_index = ok(&["get", s(dataset), "--index", &i.to_string()]);
        assert_eq!(&by_index, value, "{what}: bcd get --index {i}");
        if *keyed && !key.is_empty() {
            let by_key = ok(&["get", s(dataset), "--hex", &hex(key)]);
            assert_eq!(&by_key, value, "{what}: bcd get --hex {}", hex(key));
        }
    }
}

/// `reference.py 0.3.0 dump` of every dataset, in one process (each start costs
/// about 0.3 s).
pub(crate) fn reference_dumps(datasets: &[&Path]) -> Vec<Value> {
    let steps: Vec<Value> = datasets
        .iter()
        .map(|d| json!({"command": "dump", "path": s(d)}))
        .collect();
    reference_batch("0.3.0", &steps)
}

/// Checks every dataset with [`assert_holds`], then all of them through the
/// Python reference in one process.
pub(crate) fn assert_all_hold(all: &[Holds]) {
    for holds in all {
        assert_holds(holds);
    }
    let paths: Vec<&Path> = all.iter().map(|h| h.dataset.as_path()).collect();
    for (holds, dump) in all.iter().zip(reference_dumps(&paths)) {
        assert_eq!(dump["keyed"], json!(holds.keyed), "{}: keyed", holds.what);
        assert_eq!(
            dump["records"],
            as_dump(&holds.records, holds.keyed),
            "{}: the Python reference reads other records",
            holds.what
        );
    }
}

/// Expected summary counts of an ingest: records written, `skipped_members`.
pub(crate) fn assert_summary(summary: &Value, records: usize, skipped_members: Value, what: &str) {
    assert_eq!(
        summary["records"],
        json!(records),
        "{what}: records in {summary}"
    );
    assert_eq!(
        summary["skipped_members"], skipped_members,
        "{what}: skipped_members in {summary}"
    );
}

/// Ingests every case of `cases` that has "records" into a dataset of its own
/// under `tmp`, checks the summary, and returns what each dataset must hold.
pub(crate) fn ingest_cases(
    tmp: &Path,
    kind: &str,
    cases: &[&Value],
    sources: impl Fn(&Value) -> Vec<String>,
    extra: impl Fn(&Value) -> Vec<String>,
) -> Vec<Holds> {
    let mut all = Vec::new();
    for (n, case) in cases.iter().enumerate() {
        let keyed = case["keyed"].as_bool().unwrap_or(true);
        let want = parse_records(&case["records"], keyed);
        let dataset = tmp.join(format!("{kind}-{n}"));
        let (sources, extra) = (sources(case), extra(case));
        let what = format!("{kind} {sources:?} {extra:?}");
        let summary = ingest(&sources, &dataset, &extra);
        let skipped = case["skipped_nulls"].as_u64().unwrap_or(0);
        let members = match skipped {
            0 => json!({}),
            n => json!({"row with a null": n}),
        };
        assert_summary(&summary, want.len(), members, &what);
        assert_eq!(summary["skipped"], json!(0), "{what}: duplicates skipped");
        assert_eq!(summary["created"], json!(true), "{what}: created");
        all.push(Holds {
            dataset,
            keyed,
            records: want,
            what,
        });
    }
    all
}

/// The cases that must succeed.
pub(crate) fn with_records(cases: &[Value]) -> Vec<&Value> {
    cases
        .iter()
        .filter(|c| c.get("records").is_some())
        .collect()
}

/// The cases that must fail.
pub(crate) fn with_errors(cases: &[Value]) -> Vec<&Value> {
    cases.iter().filter(|c| c.get("error").is_some()).collect()
}

/// The fixture Parquet files of a case, as paths.
pub(crate) fn parquet_sources(case: &Value) -> Vec<String> {
    json_strings(&case["files"])
        .iter()
        .map(|f| fixture("parquet", f))
        .collect()
}

/// A case's source options, as given to `bcd ingest`.
pub(crate) fn case_args(case: &Value) -> Vec<String> {
    json_strings(&case["args"])
}

/// A copy of fixture `name` with `edit` applied, written under `tmp` as `as_name`.
pub(crate) fn edited(
    tmp: &Path,
    kind: &str,
    name: &str,
    as_name: &str,
    edit: impl Fn(&mut Vec<u8>),
) -> String {
    let mut bytes = std::fs::read(fixtures(kind).join(name)).unwrap();
    edit(&mut bytes);
    let path = tmp.join(as_name);
    std::fs::write(&path, bytes).unwrap();
    s(&path).to_owned()
}
