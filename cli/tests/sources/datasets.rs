//! Datasets to ingest into, clean-failure checks, and the fixtures with the
//! records their `expected.json` lists.

use std::path::{Path, PathBuf};

use bcd::{CreateOptions, Dataset};
use bcd_test_support::{hex, tree_snapshot, unhex};
use serde_json::{json, Value};

use crate::common::*;
use crate::{assert_one_clean_error, bcd_in, ingest_args};

/// A dataset holding one record that no fixture has, keyed or not, as a failed
/// ingest must leave it.
pub(crate) fn existing_dataset(dir: &Path, keyed: bool) -> PathBuf {
    let path = dir.join(format!(
        "existing-{}",
        if keyed { "keyed" } else { "keyless" }
    ));
    if !path.exists() {
        let options = CreateOptions {
            keyed,
            ..Default::default()
        };
        let mut dataset = Dataset::create(&path, options).unwrap();
        match keyed {
            true => dataset.extend([(b"already here", b"before")]).unwrap(),
            false => dataset.extend_values([b"before"]).unwrap(),
        };
    }
    path
}

/// Asserts that `bcd ingest SOURCES EXTRA` fails cleanly, with every one of
/// `fragments` in its message, both into a new path (which must not be created)
/// and into an existing dataset of the right kind (which must stay byte-identical).
/// Returns the first message.
pub(crate) fn assert_fails_cleanly(
    tmp: &Path,
    sources: &[String],
    extra: &[String],
    keyed: bool,
    fragments: &[String],
) -> String {
    let fresh = tmp.join("never-created");
    let existing = existing_dataset(tmp, keyed);
    let before = tree_snapshot(&existing);
    let mut first = None;
    for into in [&fresh, &existing] {
        let args = ingest_args(sources, into, extra);
        let run = bcd_in(None, &args);
        let what = show(&args);
        assert_one_clean_error(&run, &what);
        for fragment in fragments {
            assert!(
                run.stderr.contains(fragment.as_str()),
                "bcd {what}: the message lacks {fragment:?}: {}",
                run.stderr
            );
        }
        first.get_or_insert(run.stderr);
    }
    assert!(
        !fresh.exists(),
        "a failed ingest created {}",
        fresh.display()
    );
    assert_eq!(
        tree_snapshot(&existing),
        before,
        "a failed ingest ({sources:?} {extra:?}) changed the existing dataset"
    );
    first.unwrap()
}

// ---------------------------------------------------------------------------
// Helpers: fixtures and expectations
// ---------------------------------------------------------------------------

pub(crate) fn fixtures(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(kind)
}

pub(crate) fn fixture(kind: &str, name: &str) -> String {
    s(&fixtures(kind).join(name)).to_owned()
}

/// `fixtures/KIND/expected.json`.
pub(crate) fn expected(kind: &str) -> Value {
    let path = fixtures(kind).join("expected.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

pub(crate) fn json_strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

/// An expected.json record list (as the reference's dump prints records) as Records.
pub(crate) fn parse_records(records: &Value, keyed: bool) -> Records {
    records
        .as_array()
        .unwrap()
        .iter()
        .map(|record| match keyed {
            true => (
                unhex(record[0].as_str().unwrap()),
                unhex(record[1].as_str().unwrap()),
            ),
            false => (Vec::new(), unhex(record.as_str().unwrap())),
        })
        .collect()
}

/// Records as the reference's `dump` prints them.
pub(crate) fn as_dump(records: &Records, keyed: bool) -> Value {
    Value::Array(
        records
            .iter()
            .map(|(k, v)| match keyed {
                true => json!([hex(k), hex(v)]),
                false => json!(hex(v)),
            })
            .collect(),
    )
}
