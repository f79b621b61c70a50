//! CSV columns as fields: types inferred from the first rows (compared with
//! pandas' reading of the same file) or declared, and the failures that name the
//! file, line and column.

mod fields_common;

use std::fs;
use std::path::{Path, PathBuf};

use bcd_converters::csv_source::{CsvOptions, CsvSource};
use bcd_converters::{FieldSelection, FieldType, FieldValue, Record, SourceError};
use fields_common::{fields_json, python, read_all, PRELUDE};
use serde_json::{json, Value};

fn csv(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, text).unwrap();
    path
}

fn read(paths: &[PathBuf], options: CsvOptions) -> Result<Vec<Record>, SourceError> {
    read_all(CsvSource::new(paths, options).unwrap())
}

/// pandas' types and values for `t.csv`, read with its default parser and
/// pyarrow-backed dtypes (which keep nulls in integer and boolean columns).
const PANDAS: &str = r#"
import pandas as pd
df = pd.read_csv(out / "t.csv", dtype_backend="pyarrow", keep_default_na=False, na_values=[""])
names = {"int64[pyarrow]": "int64", "double[pyarrow]": "float64", "bool[pyarrow]": "bool",
         "string[pyarrow]": "string", "null[pyarrow]": "null"}
rows = []
for record in df.to_dict(orient="records"):
    rows.append({k: (None if pd.isna(v) else v.item() if hasattr(v, "item") else v)
                 for k, v in record.items()})
print(json.dumps({"types": {c: names[str(t)] for c, t in df.dtypes.items()}, "rows": rows}))
"#;

#[test]
fn inferred_types_and_values_match_pandas() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("f"), b"x").unwrap();
    let mut text = String::from("path,label,score,ok,caption,mixed\n");
    for i in 0..40 {
        let label = if i % 9 == 4 {
            String::new()
        } else {
            format!("{}", (i % 5) as i64 - 2)
        };
        let score = if i % 7 == 0 {
            "1e3".to_owned()
        } else {
            format!("{}.25", i)
        };
        let ok = ["true", "False", "TRUE", ""][i % 4];
        let caption = format!("\"caption, {i}\"");
        let mixed = if i % 2 == 0 { "1" } else { "true" };
        text += &format!("f,{label},{score},{ok},{caption},{mixed}\n");
    }
    let path = csv(dir.path(), "t.csv", &text);
    let pandas = python(dir.path(), &format!("{PRELUDE}{PANDAS}"));
    assert_eq!(
        pandas["types"],
        json!({"path": "string", "label": "int64", "score": "float64", "ok": "bool",
               "caption": "string", "mixed": "string"})
    );
    let records = read(std::slice::from_ref(&path), CsvOptions::default()).unwrap();
    let rows = pandas["rows"].as_array().unwrap();
    assert_eq!(records.len(), rows.len());
    for (record, row) in records.iter().zip(rows) {
        let (names, values) = fields_json(&record.fields);
        assert_eq!(names, ["label", "score", "ok", "caption", "mixed"]);
        let mut want = row.as_object().unwrap().clone();
        want.remove("path");
        assert_eq!(values, Value::Object(want), "{}", record.origin);
    }
    // The types, by variant (pandas does not tell Int64 from Float64 in JSON).
    let first = &records[0].fields;
    assert!(matches!(first.get("label"), Some(FieldValue::Int64(-2))));
    assert!(matches!(first.get("score"), Some(FieldValue::Float64(_))));
    assert!(matches!(first.get("mixed"), Some(FieldValue::String(_))));
    assert_eq!(records[4].fields.get("label"), Some(&FieldValue::Null));
}

#[test]
fn a_later_cell_that_does_not_fit_the_inferred_type_names_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("f"), b"x").unwrap();
    // 1000 integer rows decide the type; line 1003 (row 1002) is not one.
    let mut text = String::from("path,n\n");
    for i in 0..1001 {
        text += &format!("f,{i}\n");
    }
    text += "f,1.5\n";
    let path = csv(dir.path(), "late.csv", &text);
    let mut source = CsvSource::new(std::slice::from_ref(&path), CsvOptions::default()).unwrap();
    let mut ok = 0;
    let error = loop {
        match source.next() {
            Some(Ok(_)) => ok += 1,
            Some(Err(error)) => break error.to_string(),
            None => panic!("no error"),
        }
    };
    assert_eq!(ok, 1001);
    assert_eq!(
        error,
        format!(
            "{}: line 1003: column \"n\": \"1.5\" is not an int64 value (the column's type, inferred from the first 1000 rows of {}); declare its type with `field_type` n=string (or another type)",
            path.display(),
            path.display()
        )
    );
    // Declared as float64, every row is read.
    let declared = CsvOptions {
        field_type: vec![("n".into(), FieldType::Float64)],
        ..Default::default()
    };
    let records = read(std::slice::from_ref(&path), declared).unwrap();
    assert_eq!(
        records[1001].fields.get("n"),
        Some(&FieldValue::Float64(1.5))
    );
    assert_eq!(records[7].fields.get("n"), Some(&FieldValue::Float64(7.0)));
}

#[test]
fn declared_types_are_checked_from_the_first_row() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("f"), b"x").unwrap();
    let path = csv(dir.path(), "d.csv", "path,flag,n\nf,yes,1\n");
    let options = CsvOptions {
        field_type: vec![
            ("flag".into(), FieldType::Bool),
            ("n".into(), FieldType::String),
        ],
        ..Default::default()
    };
    let error = read(std::slice::from_ref(&path), options)
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(&format!("{}: line 2: column \"flag\": \"yes\" is not a bool value (the column's type, declared with `field_type`)", path.display())),
        "{error}"
    );
    let options = CsvOptions {
        field_type: vec![("nope".into(), FieldType::Bool)],
        ..Default::default()
    };
    let error = read(std::slice::from_ref(&path), options)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("line 1 (header)")
            && error.contains("`field_type` declares column \"nope\", which this file does not have; the columns are [\"path\", \"flag\", \"n\"]"),
        "{error}"
    );
}

#[test]
fn types_inferred_in_the_first_file_hold_for_the_next() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("f"), b"x").unwrap();
    let a = csv(dir.path(), "a.csv", "path,n,only_a\nf,1,x\n");
    let b = csv(
        dir.path(),
        "b.csv",
        "path,n,only_b\nf,2,true\nf,oops,false\n",
    );
    let error = read(&[a.clone(), b.clone()], CsvOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(&format!("{}: line 3: column \"n\": \"oops\" is not an int64 value (the column's type, inferred from the first 1 rows of {})", b.display(), a.display())),
        "{error}"
    );
    let b = csv(dir.path(), "b.csv", "path,n,only_b\nf,2,true\n");
    let records = read(&[a, b], CsvOptions::default()).unwrap();
    assert_eq!(
        fields_json(&records[0].fields).1,
        json!({"n": 1, "only_a": "x"})
    );
    assert_eq!(
        fields_json(&records[1].fields).1,
        json!({"n": 2, "only_b": true})
    );
}

#[test]
fn headers_that_cannot_name_fields_are_refused_unless_left_out() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("f"), b"x").unwrap();
    // pandas' to_csv writes its index under an empty name.
    let unnamed = csv(dir.path(), "unnamed.csv", ",path,label\n0,f,a\n");
    let error = read(std::slice::from_ref(&unnamed), CsvOptions::default())
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        format!("{}: line 1 (header): column 1 has an empty name, so it cannot be a field; name it in the header, or choose the fields with `fields`", unnamed.display())
    );
    let chosen = CsvOptions {
        fields: FieldSelection::Only(vec!["label".into()]),
        ..Default::default()
    };
    let records = read(std::slice::from_ref(&unnamed), chosen).unwrap();
    assert_eq!(fields_json(&records[0].fields).1, json!({"label": "a"}));
    let twice = csv(dir.path(), "twice.csv", "path,x,y,x\nf,1,2,3\n");
    let error = read(std::slice::from_ref(&twice), CsvOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("line 1 (header): columns 2 and 4 are both named \"x\""),
        "{error}"
    );
    let none = CsvOptions {
        fields: FieldSelection::None,
        ..Default::default()
    };
    let records = read(&[unnamed, twice], none).unwrap();
    assert!(records.iter().all(|r| r.fields.is_empty()));
    // A chosen column the file lacks lists the columns.
    let missing = CsvOptions {
        fields: FieldSelection::Only(vec!["caption".into()]),
        ..Default::default()
    };
    let list = csv(dir.path(), "l.csv", "path,label\nf,a\n");
    let error = read(std::slice::from_ref(&list), missing)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("l.csv: line 1 (header): no column \"caption\" (asked for by `fields`); the columns are [\"path\", \"label\"]"),
        "{error}"
    );
}

#[test]
fn the_key_column_is_not_a_field_and_a_non_utf8_text_cell_fails() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("f"), b"x").unwrap();
    let path = dir.path().join("k.csv");
    fs::write(&path, b"id,path,note\nk1,f,fine\nk2,f,\xff\xfe\n").unwrap();
    let options = CsvOptions {
        key_column: Some("id".into()),
        ..Default::default()
    };
    let mut source = CsvSource::new(std::slice::from_ref(&path), options).unwrap();
    let first = source.next().unwrap().unwrap();
    assert_eq!(fields_json(&first.fields).1, json!({"note": "fine"}));
    let error = source.next().unwrap().unwrap_err().to_string();
    assert!(
        error.contains("k.csv: line 3: column \"note\"") && error.contains("not UTF-8"),
        "{error}"
    );
}
