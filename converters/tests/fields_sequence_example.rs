//! `tf.train.SequenceExample` records (issue 20, item 10): their context features
//! are fields as an Example's features are, and each feature list is a list field
//! with one item per step, not dropped. Against
//! `fixtures/tfrecord/sequence-examples.tfrecord`, written by the `tfrecord`
//! package, with the fields worked out from protobuf's parse of it
//! (`make_sequence_fixtures.py`), then hand-built records for what that writer
//! cannot write (a step without a value list, names that clash, bad bytes).

mod fields_common;

use std::path::{Path, PathBuf};

use arrow_schema::DataType;
use bcd_converters::tfrecord_source::{masked_crc32c, TfRecordOptions, TfRecordSource};
use bcd_converters::{FieldSelection, Record, SourceError};
use fields_common::{arrow_type, fields_json, read_all};
use serde_json::{json, Value};

fn fixture(name: &str) -> PathBuf {
    bcd_test_support::repo_root()
        .join("fixtures/tfrecord")
        .join(name)
}

fn read(path: &Path, feature: Option<&str>) -> Result<Vec<Record>, SourceError> {
    let options = TfRecordOptions {
        feature: feature.map(Into::into),
        key_feature: None,
        fields: None,
    };
    read_all(TfRecordSource::new(&[path.to_owned()], options).unwrap())
}

/// A field's Arrow type as the fixture script names it.
fn type_name(data_type: &DataType) -> String {
    match data_type {
        DataType::Int64 => "int64".into(),
        DataType::Float32 => "float32".into(),
        DataType::Utf8 => "utf8".into(),
        DataType::Binary => "binary".into(),
        DataType::List(item) => format!("list<{}>", type_name(item.data_type())),
        other => panic!("no name for {other}"),
    }
}

#[test]
fn context_features_and_feature_lists_become_fields_as_protobuf_parses_them() {
    let expected: Value =
        serde_json::from_slice(&std::fs::read(fixture("sequence-expected.json")).unwrap()).unwrap();
    let feature = expected["value_feature"].as_str().unwrap();
    let records = read(&fixture("sequence-examples.tfrecord"), Some(feature)).unwrap();
    let rows = expected["rows"].as_array().unwrap();
    assert_eq!(records.len(), rows.len());
    let columns: Vec<String> = serde_json::from_value(expected["columns"].clone()).unwrap();
    assert_eq!(
        columns,
        ["boxes", "fps", "frames", "length", "name", "tokens", "words"]
    );
    for (i, (record, row)) in records.iter().zip(rows).enumerate() {
        let (names, values) = fields_json(&record.fields);
        assert_eq!(names, columns, "record {i}");
        assert_eq!(&values, row, "record {i}");
        assert_eq!(
            bcd_test_support::hex(&record.value),
            expected["values"][i].as_str().unwrap()
        );
        // Every record's columns have the one type of the dataset's column.
        for (name, value) in record.fields.iter() {
            if let Some(data_type) = arrow_type(value) {
                assert_eq!(
                    type_name(&data_type),
                    expected["types"][&**name].as_str().unwrap(),
                    "record {i}, {name}"
                );
            }
        }
    }
    // The whole record as the value keeps the feature lists in it, no fields.
    let whole = read(&fixture("sequence-examples.tfrecord"), None).unwrap();
    assert!(whole.iter().all(|r| r.fields.is_empty()));
}

fn len_delimited(number: u64, payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() < 128);
    let mut out = vec![(number << 3 | 2) as u8, payload.len() as u8];
    out.extend_from_slice(payload);
    out
}

/// A map entry `name` -> `value` of Features or FeatureLists.
fn entry(name: &str, value: &[u8]) -> Vec<u8> {
    let mut entry = len_delimited(1, name.as_bytes());
    entry.extend(len_delimited(2, value));
    len_delimited(1, &entry)
}

/// A SequenceExample: context `context` (entries), feature lists `lists`
/// (name, serialized steps).
fn sequence_example(context: &[Vec<u8>], lists: &[(&str, Vec<Vec<u8>>)]) -> Vec<u8> {
    let mut out = len_delimited(1, &context.concat());
    let mut map = Vec::new();
    for (name, steps) in lists {
        let list: Vec<u8> = steps.iter().flat_map(|s| len_delimited(1, s)).collect();
        map.extend(entry(name, &list));
    }
    out.extend(len_delimited(2, &map));
    out
}

fn int64s(values: &[u8]) -> Vec<u8> {
    let list: Vec<u8> = values.iter().flat_map(|&v| [0x08, v]).collect();
    len_delimited(3, &list)
}

fn bytes_value(value: &[u8]) -> Vec<u8> {
    len_delimited(1, &len_delimited(1, value))
}

fn framed(records: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for data in records {
        let length = (data.len() as u64).to_le_bytes();
        out.extend_from_slice(&length);
        out.extend_from_slice(&masked_crc32c(&length).to_le_bytes());
        out.extend_from_slice(data);
        out.extend_from_slice(&masked_crc32c(data).to_le_bytes());
    }
    out
}

#[test]
fn a_step_without_values_is_a_null_item_and_a_record_without_the_list_is_null() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("steps.tfrecord");
    let value = entry("v", &bytes_value(b"x"));
    let records = [
        // Steps 7, Feature{} (no value list), 9.
        sequence_example(
            std::slice::from_ref(&value),
            &[("t", vec![int64s(&[7]), vec![], int64s(&[9])])],
        ),
        // No feature lists at all: an Example.
        len_delimited(1, &value),
        sequence_example(std::slice::from_ref(&value), &[("t", vec![])]),
    ];
    std::fs::write(&path, framed(&records)).unwrap();
    let read = read(&path, Some("v")).unwrap();
    let values: Vec<Value> = read.iter().map(|r| fields_json(&r.fields).1).collect();
    assert_eq!(
        values,
        [
            json!({"t": [7, null, 9]}),
            json!({"t": null}),
            json!({"t": []})
        ]
    );
}

#[test]
fn a_context_feature_and_a_feature_list_of_one_name_are_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clash.tfrecord");
    let value = entry("v", &bytes_value(b"x"));
    let records = [
        sequence_example(&[value.clone(), entry("t", &int64s(&[1]))], &[]),
        sequence_example(std::slice::from_ref(&value), &[("t", vec![int64s(&[2])])]),
    ];
    std::fs::write(&path, framed(&records)).unwrap();
    let error = read(&path, Some("v")).unwrap_err().to_string();
    let shown = path.display().to_string();
    assert!(
        error.starts_with(&format!("{shown}: record 1 at byte "))
            && error.contains("\"t\" is both a context feature and a feature list")
            && error.contains(&format!("{shown}: record 0 at byte 0")),
        "{error}"
    );
    // Left out, the rest is read.
    let options = TfRecordOptions {
        feature: Some("v".into()),
        key_feature: None,
        fields: Some(FieldSelection::None),
    };
    let read = read_all(TfRecordSource::new(&[path], options).unwrap()).unwrap();
    assert_eq!(read.len(), 2);
}

#[test]
fn malformed_feature_lists_are_an_error_naming_the_file_and_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.tfrecord");
    let value = entry("v", &bytes_value(b"x"));
    let good = sequence_example(std::slice::from_ref(&value), &[("t", vec![int64s(&[1])])]);
    // Record 1: its feature_lists field claims 9 bytes and holds 1.
    let bad = [len_delimited(1, &value), vec![0x12, 0x09, 0x0a]].concat();
    std::fs::write(&path, framed(&[good.clone(), bad])).unwrap();
    let error = read(&path, Some("v")).unwrap_err().to_string();
    let shown = path.display().to_string();
    assert!(
        error.starts_with(&format!("{shown}: record 1 at byte {}", 16 + good.len()))
            && error.contains("runs past the end"),
        "{error}"
    );
}

#[test]
fn a_value_feature_that_is_a_feature_list_is_named_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lists.tfrecord");
    let record = sequence_example(&[], &[("frames", vec![bytes_value(b"\xff")])]);
    std::fs::write(&path, framed(&[record])).unwrap();
    let error = read(&path, Some("frames")).unwrap_err().to_string();
    assert!(
        error.starts_with(&format!("{}: record 0 at byte 0: ", path.display()))
            && error.contains("\"frames\" is a feature list of this SequenceExample"),
        "{error}"
    );
}
