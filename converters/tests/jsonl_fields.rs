//! JSON Lines: the fields of each record against pyarrow's `pyarrow.json.read_json`
//! of the same file (types and values, row by row), compressed inputs, given
//! schemas, and lines that must fail naming their file and line.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use bcd_converters::jsonl_source::{JsonlOptions, JsonlSource, INFER_LINES, MAX_LINE_BYTES};
use bcd_converters::{FieldValue, Origin, Record, RowAt, Source, SourceError};
use bcd_test_support::venv_python;
use serde_json::{json, Value};

/// pyarrow's reading of argv[1]: its schema as `[name, str(type)]` pairs and its
/// rows.
const PYARROW: &str = r#"
import json, sys
import pyarrow.json
table = pyarrow.json.read_json(sys.argv[1])
print(json.dumps({
    "schema": [[f.name, str(f.type)] for f in table.schema],
    "rows": table.to_pylist(),
}))
"#;

fn python(code: &str, args: &[&str]) -> std::process::Output {
    Command::new(venv_python())
        .arg("-c")
        .arg(code)
        .args(args)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run python")
}

fn pyarrow(path: &Path) -> Value {
    let out = python(PYARROW, &[path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "pyarrow failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Whether pyarrow refuses the file too.
fn pyarrow_refuses(path: &Path) -> bool {
    !python(PYARROW, &[path.to_str().unwrap()]).status.success()
}

/// An Arrow type as pyarrow prints it.
fn pyarrow_type(data_type: &DataType) -> String {
    match data_type {
        DataType::Int64 => "int64".into(),
        DataType::Float64 => "double".into(),
        DataType::Utf8 => "string".into(),
        DataType::Boolean => "bool".into(),
        DataType::Null => "null".into(),
        DataType::List(item) => format!("list<item: {}>", pyarrow_type(item.data_type())),
        DataType::Struct(fields) => format!(
            "struct<{}>",
            fields
                .iter()
                .map(|f| format!("{}: {}", f.name(), pyarrow_type(f.data_type())))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => panic!("no pyarrow spelling for {other}"),
    }
}

/// A record's fields as one JSON object, written by arrow-json's writer with
/// nulls kept.
fn fields_json(record: &Record) -> serde_json::Map<String, Value> {
    let mut columns: Vec<(Arc<Field>, ArrayRef)> = Vec::new();
    for (name, value) in record.fields.iter() {
        let FieldValue::Arrow(array, row) = value else {
            panic!("{name}: {value:?} is not an Arrow row")
        };
        let slice = array.slice(*row, 1);
        let field = Field::new(&**name, slice.data_type().clone(), true);
        columns.push((Arc::new(field), slice));
    }
    let mut object = serde_json::Map::new();
    if !columns.is_empty() {
        let schema = Schema::new(columns.iter().map(|(f, _)| f.clone()).collect::<Vec<_>>());
        let batch = RecordBatch::try_new(
            Arc::new(schema),
            columns.iter().map(|(_, a)| a.clone()).collect(),
        )
        .unwrap();
        let mut writer = arrow_json::WriterBuilder::new()
            .with_explicit_nulls(true)
            .build::<_, arrow_json::writer::JsonArray>(Vec::new());
        writer.write(&batch).unwrap();
        writer.finish().unwrap();
        let written: Value = serde_json::from_slice(&writer.into_inner()).unwrap();
        object = written[0].as_object().unwrap().clone();
    }
    object
}

/// [`fields_json`] with the value under `value_field` and the key under
/// `key_field` (as an integer if the flag says so).
fn record_json(record: &Record, value_field: &str, key_field: Option<(&str, bool)>) -> Value {
    let mut object = fields_json(record);
    object.insert(
        value_field.into(),
        json!(String::from_utf8(record.value.clone()).unwrap()),
    );
    if let Some((name, integer)) = key_field {
        let key = String::from_utf8(record.key.clone()).unwrap();
        let key = match integer {
            true => json!(key.parse::<i64>().unwrap()),
            false => json!(key),
        };
        object.insert(name.into(), key);
    }
    Value::Object(object)
}

/// The keys of `object` in order, for comparing field order.
fn names(object: &Value) -> Vec<String> {
    object.as_object().unwrap().keys().cloned().collect()
}

fn write_lines(dir: &Path, name: &str, lines: &[String]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// Every record, or the error that ended the source.
fn read(paths: &[PathBuf], options: JsonlOptions) -> Result<Vec<Record>, SourceError> {
    JsonlSource::new(paths, options)?.collect()
}

fn keyed_by(key: &str) -> JsonlOptions {
    JsonlOptions {
        key_field: Some(key.into()),
        ..JsonlOptions::default()
    }
}

/// Lines with every JSON type: numbers that are integers in one line and floats in
/// another, lists, nested objects with keys appearing late, nulls, a field always
/// null, and text with escapes and non-ASCII characters.
fn varied_lines() -> Vec<String> {
    let mut lines = Vec::new();
    for i in 0..40i64 {
        let mut object = json!({
            "id": i * 1000 - 7,
            "text": format!("line {i}: caf\u{e9} \"quoted\" \\ \u{1f600}"),
            "label": i % 3,
            "score": if i % 2 == 0 { json!(i) } else { json!(i as f64 / 4.0) },
            "ok": i % 4 == 0,
            "tags": (0..(i % 3)).map(|t| format!("t{t}")).collect::<Vec<_>>(),
            "box": {"x": i, "y": [i as f64 + 0.5]},
            "never": null,
        });
        if i % 5 == 0 {
            object["sometimes"] = json!(format!("s{i}"));
            object["box"]["late"] = json!(true);
        }
        if i % 7 == 0 {
            object["label"] = Value::Null;
        }
        lines.push(object.to_string());
    }
    lines
}

#[test]
fn fields_are_pyarrows_types_and_values() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_lines(dir.path(), "varied.jsonl", &varied_lines());
    let reference = pyarrow(&path);

    let source = JsonlSource::new(std::slice::from_ref(&path), keyed_by("id")).unwrap();
    assert!(source.keyed());
    let schema: Vec<Value> = source
        .get_ref()
        .schema()
        .fields()
        .iter()
        .map(|f| json!([f.name(), pyarrow_type(f.data_type())]))
        .collect();
    assert_eq!(Value::Array(schema), reference["schema"]);

    let records: Vec<Record> = source.map(Result::unwrap).collect();
    let rows = reference["rows"].as_array().unwrap();
    assert_eq!(records.len(), rows.len());
    for (i, (record, row)) in records.iter().zip(rows).enumerate() {
        let mut got = record_json(record, "text", Some(("id", true)));
        // Compared with pyarrow's column order.
        let mut ordered = serde_json::Map::new();
        for name in names(row) {
            ordered.insert(name.clone(), got[&name].take());
        }
        assert_eq!(Value::Object(ordered), *row, "line {}", i + 1);
        assert_eq!(
            record.origin,
            Origin::Row {
                file: Arc::from(path.as_path()),
                row: RowAt::Line(i as u64 + 1)
            }
        );
        // The value and key are not fields.
        assert!(record.fields.get("text").is_none() && record.fields.get("id").is_none());
    }
    assert_eq!(records[0].key, b"-7");
    assert_eq!(records[3].key, b"2993");
}

#[test]
fn compressed_files_and_several_files_read_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let lines = varied_lines();
    let plain = write_lines(dir.path(), "a.jsonl", &lines[..10]);
    let text = lines[10..25].join("\n") + "\n";
    let gz = dir.path().join("b.jsonl.gz");
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(text.as_bytes()).unwrap();
    std::fs::write(&gz, encoder.finish().unwrap()).unwrap();
    let zst = dir.path().join("c.jsonl.zst");
    let text = lines[25..].join("\r\n");
    std::fs::write(&zst, zstd::encode_all(text.as_bytes(), 3).unwrap()).unwrap();
    let all = write_lines(dir.path(), "all.jsonl", &lines);

    let whole = read(std::slice::from_ref(&all), keyed_by("id")).unwrap();
    let parts = read(&[plain, gz.clone(), zst], keyed_by("id")).unwrap();
    let json = |records: &[Record]| -> Vec<Value> {
        records
            .iter()
            .map(|r| record_json(r, "text", Some(("id", true))))
            .collect()
    };
    assert_eq!(json(&parts), json(&whole));
    assert_eq!(
        parts[10].origin,
        Origin::Row {
            file: Arc::from(gz.as_path()),
            row: RowAt::Line(1)
        }
    );
}

#[test]
fn values_in_base64_string_keys_and_a_given_schema() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"name": "a", "data": "AAEC/w==", "n": 1, "extra": {"x": 1}}"#,
        r#"{"name": "b", "data": "AAEC/w", "n": 2, "extra": "whatever"}"#,
        "",
        "   ",
        r#"{"n": 3, "data": "", "name": "c"}"#,
    ]
    .map(str::to_owned);
    let path = write_lines(dir.path(), "b64.jsonl", &lines);
    let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Float64, true)]));
    let options = JsonlOptions {
        value_field: "data".into(),
        value_base64: true,
        key_field: Some("name".into()),
        schema: Some(schema),
        ..JsonlOptions::default()
    };
    let records = read(std::slice::from_ref(&path), options).unwrap();
    let got: Vec<(Vec<u8>, Vec<u8>, String)> = records
        .iter()
        .map(|r| {
            let fields = fields_json(r);
            (r.key.clone(), r.value.clone(), fields["n"].to_string())
        })
        .collect();
    // `extra` is not in the schema: left out, whatever its type.
    assert_eq!(
        got,
        [
            (b"a".to_vec(), vec![0, 1, 2, 255], "1.0".to_owned()),
            (b"b".to_vec(), vec![0, 1, 2, 255], "2.0".to_owned()),
            (b"c".to_vec(), vec![], "3.0".to_owned()),
        ]
    );
    // Blank lines count: the third record is on line 5.
    assert_eq!(
        records[2].origin.to_string(),
        format!("{}: line 5", path.display())
    );

    let wrong = JsonlOptions {
        schema: Some(Arc::new(Schema::new(vec![Field::new(
            "text",
            DataType::Int64,
            true,
        )]))),
        ..JsonlOptions::default()
    };
    let error = read(&[path], wrong).err().unwrap().to_string();
    assert_eq!(
        error,
        r#"the value field "text" is Int64 in `schema`; it must be string"#
    );
}

/// The error reading `lines` (as file `name`) with `options`, checked to name
/// the file and `line`.
fn error_at(
    dir: &Path,
    name: &str,
    lines: &[String],
    options: JsonlOptions,
    line: usize,
) -> String {
    let path = write_lines(dir, name, lines);
    let error = read(std::slice::from_ref(&path), options)
        .err()
        .unwrap_or_else(|| panic!("{name}: no error"))
        .to_string();
    let prefix = format!("{}: line {line}: ", path.display());
    assert!(error.starts_with(&prefix), "{name}: {error}");
    error[prefix.len()..].to_owned()
}

fn good(i: usize) -> String {
    json!({"text": format!("t{i}"), "a": i}).to_string()
}

/// `INFER_LINES + 500` good lines with `bad` as line `at`.
fn lines_with(bad: &str, at: usize) -> Vec<String> {
    let mut lines: Vec<String> = (1..=INFER_LINES + 500).map(good).collect();
    lines[at - 1] = bad.to_owned();
    lines
}

#[test]
fn malformed_lines_fail_naming_file_and_line_inside_and_after_the_inference_window() {
    let dir = tempfile::tempdir().unwrap();
    let late = INFER_LINES + 300;
    for (at, kind) in [(3, "early"), (late, "late")] {
        let default = JsonlOptions::default;
        let cases: [(&str, &str, &str); 6] = [
            ("syntax", r#"{"text": "x", "a": 1,}"#, "not valid JSON"),
            ("not an object", r#"[1, 2]"#, ""),
            ("truncated", r#"{"text": "x", "a": "#, ""),
            ("two objects", r#"{"text": "x"} {"text": "y"}"#, ""),
            (
                "no value",
                r#"{"a": 1}"#,
                "no value: the field \"text\" is missing or null",
            ),
            (
                "null value",
                r#"{"text": null, "a": 1}"#,
                "no value: the field \"text\" is missing or null",
            ),
        ];
        for (name, bad, message) in cases {
            let file = format!("{kind}-{}.jsonl", name.replace(' ', "-"));
            let lines = lines_with(bad, at);
            let error = error_at(dir.path(), &file, &lines, default(), at);
            assert!(error.contains(message), "{file}: {error}");
            if at == 3 && name != "two objects" && !name.contains("value") {
                assert!(pyarrow_refuses(&dir.path().join(&file)), "{file}");
            }
        }
        // A value that is not a string.
        let lines = lines_with(r#"{"text": 5, "a": 1}"#, at);
        let error = error_at(
            dir.path(),
            &format!("{kind}-number.jsonl"),
            &lines,
            JsonlOptions::default(),
            at,
        );
        assert!(error.contains("expected string"), "{error}");
        // Bad base64.
        let mut lines: Vec<String> = (1..=INFER_LINES + 500)
            .map(|i| json!({"text": "AAAA", "a": i}).to_string())
            .collect();
        lines[at - 1] = r#"{"text": "A!AA", "a": 0}"#.into();
        let options = JsonlOptions {
            value_base64: true,
            ..JsonlOptions::default()
        };
        let error = error_at(
            dir.path(),
            &format!("{kind}-base64.jsonl"),
            &lines,
            options,
            at,
        );
        assert!(
            error.starts_with("the field \"text\" is not valid base64"),
            "{error}"
        );
        // A key that is missing, or neither string nor integer.
        for (name, bad) in [
            ("no-key", r#"{"text": "x", "a": 1}"#),
            ("float-key", r#"{"text": "x", "a": 1, "id": 1.5}"#),
        ] {
            let mut lines: Vec<String> = (1..=INFER_LINES + 500)
                .map(|i| json!({"text": "x", "a": i, "id": format!("k{i}")}).to_string())
                .collect();
            lines[at - 1] = bad.into();
            let error = error_at(
                dir.path(),
                &format!("{kind}-{name}.jsonl"),
                &lines,
                keyed_by("id"),
                at,
            );
            assert!(!error.is_empty(), "{error}");
        }
    }
}

#[test]
fn types_that_change_and_keys_that_appear_fail_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    // Inside the inference window: the line that brings the conflict.
    let error = error_at(
        dir.path(),
        "early-conflict.jsonl",
        &lines_with(r#"{"text": "x", "a": "not a number"}"#, 5),
        JsonlOptions::default(),
        5,
    );
    assert!(
        error.starts_with("its fields' types conflict with the lines before it"),
        "{error}"
    );
    assert!(pyarrow_refuses(&dir.path().join("early-conflict.jsonl")));
    // After it: the inferred schema holds, as arrow-json decodes with it.
    let late = INFER_LINES + 10;
    let error = error_at(
        dir.path(),
        "late-conflict.jsonl",
        &lines_with(r#"{"text": "x", "a": "not a number"}"#, late),
        JsonlOptions::default(),
        late,
    );
    assert!(error.contains("a"), "{error}");
    let error = error_at(
        dir.path(),
        "late-key.jsonl",
        &lines_with(r#"{"text": "x", "a": 1, "new": true}"#, late),
        JsonlOptions::default(),
        late,
    );
    assert!(
        error.contains("column 'new' missing from schema"),
        "{error}"
    );
    // An integer where the window had floats is fine (a float column).
    let mut lines: Vec<String> = (1..=INFER_LINES + 10)
        .map(|i| json!({"text": "x", "a": i as f64 + 0.5}).to_string())
        .collect();
    lines.push(json!({"text": "x", "a": 7}).to_string());
    let path = write_lines(dir.path(), "late-int.jsonl", &lines);
    let records = read(&[path], JsonlOptions::default()).unwrap();
    assert_eq!(
        record_json(records.last().unwrap(), "text", None)["a"],
        json!(7.0)
    );
}

#[test]
fn hostile_lines_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    // Nested 100,000 levels deep, inside and after the inference window.
    let deep = format!(
        r#"{{"text": "x", "a": {}1{}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    for at in [2, INFER_LINES + 2] {
        let error = error_at(
            dir.path(),
            &format!("deep-{at}.jsonl"),
            &lines_with(&deep, at),
            JsonlOptions::default(),
            at,
        );
        assert!(
            error.contains("recursion limit exceeded") || error.contains("nested more than 128"),
            "{error}"
        );
    }
    // A line longer than the limit, after a good one: refused before it is held.
    let path = dir.path().join("long.jsonl");
    let mut file = std::fs::File::create(&path).unwrap();
    writeln!(file, "{}", good(1)).unwrap();
    file.write_all(br#"{"text": ""#).unwrap();
    file.write_all(&vec![b'a'; MAX_LINE_BYTES]).unwrap();
    file.write_all(b"\"}\n").unwrap();
    drop(file);
    let error = read(std::slice::from_ref(&path), JsonlOptions::default())
        .err()
        .unwrap();
    assert!(
        matches!(&error, SourceError::TooLarge { location, limit, .. }
            if location == "line 2" && *limit == MAX_LINE_BYTES as u64),
        "{error}"
    );
}

#[test]
fn the_source_ends_at_its_first_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines: Vec<String> = (1..=5).map(good).collect();
    lines[2] = r#"{"a": 1}"#.into();
    let path = write_lines(dir.path(), "x.jsonl", &lines);
    let mut source = JsonlSource::new(&[path.clone(), path], JsonlOptions::default()).unwrap();
    let keys: Vec<bool> = source.by_ref().map(|r| r.is_ok()).collect();
    assert_eq!(keys, [true, true, false]);
    assert!(source.next().is_none());
}

/// Each record as JSON with its origin, or the error's text: what a source gives.
fn given(source: impl Iterator<Item = Result<Record, SourceError>>) -> Vec<Value> {
    source
        .map(|item| match item {
            Ok(record) => json!([
                record_json(&record, "text", None),
                format!("{:?}", record.origin),
            ]),
            Err(error) => json!(error.to_string()),
        })
        .collect()
}

#[test]
fn decode_threads_give_what_the_reading_thread_alone_gives() {
    let dir = tempfile::tempdir().unwrap();
    // Many chunks (BATCH_ROWS lines each) over three files, one compressed.
    let line = |i: usize| {
        json!({"text": format!("document {i}"), "n": i, "x": i as f64 / 7.0,
               "tags": (0..i % 4).map(|t| format!("t{t}")).collect::<Vec<_>>()})
        .to_string()
    };
    let first: Vec<String> = (0..2500).map(line).collect();
    let second: Vec<String> = (2500..2600).map(line).collect();
    let third: Vec<String> = (2600..6000).map(line).collect();
    let a = write_lines(dir.path(), "a.jsonl", &first);
    let b = write_lines(dir.path(), "b.jsonl", &second);
    let c = dir.path().join("c.jsonl.gz");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all((third.join("\n") + "\n").as_bytes()).unwrap();
    std::fs::write(&c, gz.finish().unwrap()).unwrap();
    let paths = [a, b, c];
    let with = |threads: usize| JsonlOptions {
        threads,
        ..JsonlOptions::default()
    };
    let alone = given(JsonlSource::new(&paths, with(0)).unwrap());
    assert_eq!(alone.len(), 6000);
    for threads in [1, 2, 3, 8] {
        let got = given(JsonlSource::new(&paths, with(threads)).unwrap());
        assert!(got == alone, "{threads} decode threads");
    }

    // An error ends the source after the records before it, whichever thread
    // decodes it: a line that is not JSON, a record without a value, each deep
    // in the stream (chunks after it are being decoded when it comes).
    for (at, bad) in [(3100, "{\"text\": \"x\", }"), (4400, "{\"n\": 1}")] {
        let mut lines: Vec<String> = (0..6000).map(line).collect();
        lines[at - 1] = bad.to_owned();
        let path = write_lines(dir.path(), "bad.jsonl", &lines);
        let alone = given(JsonlSource::new(std::slice::from_ref(&path), with(0)).unwrap());
        let last = alone.last().unwrap().as_str().unwrap();
        assert!(last.contains(&format!("line {at}: ")), "{last}");
        for threads in [1, 2, 3] {
            let got = given(JsonlSource::new(std::slice::from_ref(&path), with(threads)).unwrap());
            assert!(got == alone, "{threads} decode threads, bad line {at}");
        }
    }

    // A source dropped part way stops its threads (the test would hang if not).
    let mut source = JsonlSource::new(&paths, with(2)).unwrap();
    assert_eq!(source.by_ref().take(10).count(), 10);
    drop(source);
}

#[test]
fn decode_threads_agree_with_one_thread_on_random_files() {
    // xorshift64*: a fixed seed, so a failure repeats.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: u64| {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    };
    let dir = tempfile::tempdir().unwrap();
    for case in 0..40 {
        let files = 1 + next(3) as usize;
        let mut paths = Vec::new();
        for f in 0..files {
            let lines: Vec<String> = (0..next(2500))
                .map(|i| match next(1000) {
                    // Rare bad lines: not JSON, no value, a value of another type.
                    0 => "{\"text\": ".to_owned(),
                    1 => json!({"n": i}).to_string(),
                    2 => json!({"text": 5}).to_string(),
                    3..=20 => String::new(),
                    k => json!({"text": format!("v{k}"), "n": k, "x": (k as f64) / 3.0,
                                "s": "é".repeat((k % 5) as usize)})
                    .to_string(),
                })
                .collect();
            paths.push(write_lines(
                dir.path(),
                &format!("r{case}-{f}.jsonl"),
                &lines,
            ));
        }
        let with = |threads: usize| JsonlOptions {
            threads,
            ..JsonlOptions::default()
        };
        let alone = JsonlSource::new(&paths, with(0)).map(given);
        let threads = 1 + next(4) as usize;
        let got = JsonlSource::new(&paths, with(threads)).map(given);
        match (alone, got) {
            (Ok(alone), Ok(got)) => {
                assert!(got == alone, "case {case}, {threads} decode threads")
            }
            // Inference failed the same way, before any decoding.
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
            (a, b) => panic!("case {case}: {:?} against {:?}", a.is_ok(), b.is_ok()),
        }
    }
}
