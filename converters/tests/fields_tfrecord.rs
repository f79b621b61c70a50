//! TFRecord features as fields, against files written at test time by the
//! `tfrecord` package (its TFRecordWriter and protobuf-generated Example), with
//! the expected fields worked out in Python by the rules: scalar when every
//! record that has the feature holds one value, Utf8 when every bytes value is
//! UTF-8, null when a record lacks the feature; columns sorted by name.

mod fields_common;

use std::fs;
use std::path::{Path, PathBuf};

use arrow_schema::DataType;
use bcd_converters::tfrecord_source::{TfRecordOptions, TfRecordSource};
use bcd_converters::{FieldSelection, FieldValue, Record, SourceError};
use fields_common::{arrow_type, fields_json, python, read_all, PRELUDE};
use serde_json::{json, Value};

/// Writes a.tfrecord and b.tfrecord (records spread over both files, as the
/// rules look at every record of the ingest) and prints each record's expected
/// fields.
const WRITE: &str = r#"
import random
from tfrecord.writer import TFRecordWriter
rng = random.Random(7)
records = []
for i in range(12):
    r = {
        "image/encoded": (bytes([0xff, 0xd8, i]), "byte"),
        "label": (i % 3, "int"),
        "sizes": ([i, i + 1][: 1 + i % 2], "int"),
        "score": (i / 8, "float"),
        "box": ([0.5, i / 4, 1.0], "float"),
        "name": (f"näme {i}".encode(), "byte"),
        "raw": ((b"\xff\xfe" if i == 9 else b"ok") + bytes([i]), "byte"),
        "words": ([b"a", b"b"] if i % 2 else [], "byte"),
    }
    if i % 4 == 1:
        del r["label"]
    if i == 5:
        r["late"] = (42, "int")
    records.append(r)
for name, part in [("a", records[:7]), ("b", records[7:])]:
    writer = TFRecordWriter(str(out / f"{name}.tfrecord"))
    for r in part:
        writer.write(r)
    writer.close()
skip = {"image/encoded"}
# Sorted by name: an Example's map has no order a writer keeps.
order = sorted({k for r in records for k in r} - skip)
def values(r, k):
    v, kind = r[k]
    return v if isinstance(v, list) else [v]
scalar = {k: all(len(values(r, k)) == 1 for r in records if k in r) for k in order}
kinds = {k: next(r[k][1] for r in records if k in r) for k in order}
utf8 = {}
for k in order:
    ok = True
    for r in records:
        if k in r and kinds[k] == "byte":
            for v in values(r, k):
                try:
                    v.decode("utf-8")
                except UnicodeDecodeError:
                    ok = False
    utf8[k] = ok
import numpy as np
def show(k, v):
    if kinds[k] == "float":
        v = float(np.float32(v))
    if kinds[k] == "byte":
        v = v.decode() if utf8[k] else {"hex": v.hex()}
    return v
expected = []
for r in records:
    row = {}
    for k in order:
        if k not in r:
            row[k] = None
        elif scalar[k]:
            row[k] = show(k, values(r, k)[0])
        else:
            row[k] = [show(k, v) for v in values(r, k)]
    expected.append(row)
print(json.dumps({"order": order, "rows": expected,
                  "images": [r["image/encoded"][0].hex() for r in records]}))
"#;

fn options(feature: Option<&str>, fields: Option<FieldSelection>) -> TfRecordOptions {
    TfRecordOptions {
        feature: feature.map(Into::into),
        key_feature: None,
        fields,
    }
}

fn files(dir: &Path) -> Vec<PathBuf> {
    vec![dir.join("a.tfrecord"), dir.join("b.tfrecord")]
}

fn read(paths: &[PathBuf], options: TfRecordOptions) -> Result<Vec<Record>, SourceError> {
    read_all(TfRecordSource::new(paths, options).unwrap())
}

#[test]
fn every_other_feature_becomes_a_field_typed_over_all_records() {
    let dir = tempfile::tempdir().unwrap();
    let expected = python(dir.path(), &format!("{PRELUDE}{WRITE}"));
    let records = read(&files(dir.path()), options(Some("image/encoded"), None)).unwrap();
    let rows = expected["rows"].as_array().unwrap();
    assert_eq!(records.len(), rows.len());
    let order: Vec<String> = serde_json::from_value(expected["order"].clone()).unwrap();
    assert_eq!(
        order,
        ["box", "label", "late", "name", "raw", "score", "sizes", "words"]
    );
    for (i, (record, row)) in records.iter().zip(rows).enumerate() {
        let (names, values) = fields_json(&record.fields);
        assert_eq!(names, order, "record {i}");
        assert_eq!(&values, row, "record {i}");
        assert_eq!(
            bcd_test_support::hex(&record.value),
            expected["images"][i].as_str().unwrap()
        );
    }
    // The decided types: scalars as plain values, lists as Arrow lists.
    let first = &records[0].fields;
    assert!(matches!(first.get("label"), Some(FieldValue::Int64(0))));
    assert!(matches!(first.get("score"), Some(FieldValue::Float32(_))));
    assert!(matches!(first.get("name"), Some(FieldValue::String(_))));
    assert!(matches!(first.get("raw"), Some(FieldValue::Binary(_))));
    let list = |t| Some(DataType::new_list(t, true));
    assert_eq!(
        arrow_type(first.get("sizes").unwrap()),
        list(DataType::Int64)
    );
    assert_eq!(
        arrow_type(first.get("box").unwrap()),
        list(DataType::Float32)
    );
    assert_eq!(
        arrow_type(first.get("words").unwrap()),
        list(DataType::Utf8)
    );
    assert_eq!(records[1].fields.get("label"), Some(&FieldValue::Null));
    assert_eq!(records[5].fields.get("late"), Some(&FieldValue::Int64(42)));
}

#[test]
fn chosen_features_come_in_the_order_given_and_a_missing_one_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let expected = python(dir.path(), &format!("{PRELUDE}{WRITE}"));
    let chosen = FieldSelection::Only(vec!["name".into(), "label".into()]);
    // With the whole record as the value, fields only when asked for.
    let records = read(&files(dir.path()), options(None, Some(chosen))).unwrap();
    for (record, row) in records.iter().zip(expected["rows"].as_array().unwrap()) {
        let (names, values) = fields_json(&record.fields);
        assert_eq!(names, ["name", "label"]);
        assert_eq!(values, json!({"name": row["name"], "label": row["label"]}));
    }
    let whole = read(&files(dir.path()), options(None, None)).unwrap();
    assert!(whole.iter().all(|r| r.fields.is_empty()));
    let none = read(
        &files(dir.path()),
        options(Some("image/encoded"), Some(FieldSelection::None)),
    )
    .unwrap();
    assert!(none.iter().all(|r| r.fields.is_empty()));

    let error = read(
        &files(dir.path()),
        options(None, Some(FieldSelection::Only(vec!["nope".into()]))),
    )
    .unwrap_err()
    .to_string();
    let a = dir.path().join("a.tfrecord").display().to_string();
    assert!(
        error.starts_with(&a)
            && error.contains("no Example has a feature \"nope\" (asked for by `fields`)")
            && error.contains("\"label\""),
        "{error}"
    );
}

/// Writes conflict.tfrecord: feature "x" an int64_list in record 0 and a
/// bytes_list in record 2.
const CONFLICT: &str = r#"
from tfrecord.writer import TFRecordWriter
writer = TFRecordWriter(str(out / "conflict.tfrecord"))
for r in [{"x": (1, "int")}, {"y": (2, "int")}, {"x": (b"one", "byte")}]:
    writer.write(r)
writer.close()
print(1)
"#;

#[test]
fn a_feature_of_two_kinds_names_both_records() {
    let dir = tempfile::tempdir().unwrap();
    python(dir.path(), &format!("{PRELUDE}{CONFLICT}"));
    let path = dir.path().join("conflict.tfrecord");
    let error = read(
        std::slice::from_ref(&path),
        options(None, Some(FieldSelection::All)),
    )
    .unwrap_err()
    .to_string();
    let shown = path.display().to_string();
    assert!(
        error.starts_with(&format!("{shown}: record 2 at byte "))
            && error.contains(&format!(
                "feature \"x\" is a bytes_list, but an int64_list in {shown}: record 0 at byte 0"
            )),
        "{error}"
    );
    // Left out, the rest is read.
    let records = read(
        &[path],
        options(None, Some(FieldSelection::Only(vec!["y".into()]))),
    )
    .unwrap();
    let values: Vec<Value> = records.iter().map(|r| fields_json(&r.fields).1).collect();
    assert_eq!(
        values,
        [json!({"y": null}), json!({"y": 2}), json!({"y": null})]
    );
}

#[test]
fn truncated_and_corrupt_files_fail_the_prescan_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    python(dir.path(), &format!("{PRELUDE}{WRITE}"));
    let whole = fs::read(dir.path().join("a.tfrecord")).unwrap();
    let cut = dir.path().join("cut.tfrecord");
    for keep in [whole.len() - 1, whole.len() - 5, 20, 7] {
        fs::write(&cut, &whole[..keep]).unwrap();
        let mut source = TfRecordSource::new(
            std::slice::from_ref(&cut),
            options(Some("image/encoded"), None),
        )
        .unwrap();
        // The prescan finds it before any record is yielded.
        let error = source.next().unwrap().unwrap_err().to_string();
        assert!(
            error.contains("cut.tfrecord: record ") && error.contains("truncated"),
            "{error}"
        );
        assert!(source.next().is_none());
    }
    let mut flipped = whole.clone();
    let at = whole.len() / 2;
    flipped[at] ^= 0x40;
    fs::write(&cut, &flipped).unwrap();
    let error = read(
        std::slice::from_ref(&cut),
        options(Some("image/encoded"), None),
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("checksum mismatch"), "{error}");
    // A record that is not an Example (a valid frame): named by the prescan.
    let mut framed = whole.clone();
    framed.extend(frame(b"\x0a\xff\xff"));
    fs::write(&cut, &framed).unwrap();
    let error = read(
        std::slice::from_ref(&cut),
        options(Some("image/encoded"), None),
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("cut.tfrecord: record 7 at byte ")
            && error.contains("not a valid tf.train.Example"),
        "{error}"
    );
}

fn frame(data: &[u8]) -> Vec<u8> {
    let length = (data.len() as u64).to_le_bytes();
    let mut out = length.to_vec();
    out.extend(bcd_converters::tfrecord_source::masked_crc32c(&length).to_le_bytes());
    out.extend_from_slice(data);
    out.extend(bcd_converters::tfrecord_source::masked_crc32c(data).to_le_bytes());
    out
}

#[cfg(unix)]
#[test]
fn a_pipe_cannot_be_prescanned_and_the_message_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.tfrecord");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let error = read(
        std::slice::from_ref(&fifo),
        options(Some("image/encoded"), None),
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("pipe.tfrecord: not a regular file")
            && error.contains("pass the files themselves, or `fields` none"),
        "{error}"
    );
}
