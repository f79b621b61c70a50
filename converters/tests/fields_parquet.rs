//! Parquet columns as fields, against files written at test time by pyarrow and
//! by Hugging Face `datasets`, and read back by pyarrow for the expected values.

mod fields_common;

use std::path::PathBuf;

use arrow_schema::{DataType, Field};
use bcd_converters::parquet_source::ParquetSource;
use bcd_converters::TableOptions;
use bcd_converters::{FieldSelection, Source, SourceError};
use fields_common::{arrow_type, fields_json, python, read_all, PRELUDE};
use serde_json::{json, Value};

/// Writes `typed.parquet` (every kind of column beside an id key and a binary
/// value, in two row groups, with nulls) and prints what pyarrow reads back.
const TYPED: &str = r#"
import pyarrow as pa, pyarrow.parquet as pq
n = 300
table = pa.table({
    "id": pa.array([f"id-{i}" for i in range(n)]),
    "label": pa.array([i % 7 if i % 11 else None for i in range(n)], pa.int64()),
    "value": pa.array([bytes([i % 256]) * (i % 5) for i in range(n)], pa.binary()),
    "caption": pa.array([None if i % 13 == 0 else f"caption {i} ü" for i in range(n)]),
    "tags": pa.array([[f"t{j}" for j in range(i % 3)] if i % 17 else None for i in range(n)],
                     pa.list_(pa.string())),
    "meta": pa.array([{"a": i, "b": str(i)} for i in range(n)],
                     pa.struct([("a", pa.int32()), ("b", pa.string())])),
    "day": pa.array([datetime.date(2020, 1, 1) + datetime.timedelta(days=i) for i in range(n)]),
    "kind": pa.array(["cat" if i % 2 else "dog" for i in range(n)]).dictionary_encode(),
    "score": pa.array([i / 3 for i in range(n)], pa.float64()),
    "ok": pa.array([i % 3 == 0 for i in range(n)]),
    "blob": pa.array([bytes([255, i % 256]) for i in range(n)], pa.binary()),
})
pq.write_table(table, out / "typed.parquet", row_group_size=128)
back = pq.read_table(out / "typed.parquet")
print(json.dumps({
    "columns": back.column_names,
    "rows": [hexed(r) for r in back.to_pylist()],
}))
"#;

fn options(value: &str, key: Option<&str>, fields: FieldSelection) -> TableOptions {
    TableOptions {
        value_column: value.into(),
        key_column: key.map(Into::into),
        skip_nulls: false,
        fields,
    }
}

fn source(paths: &[PathBuf], options: TableOptions) -> bcd_converters::Fused<ParquetSource> {
    ParquetSource::new(paths, options).unwrap()
}

#[test]
fn every_other_column_becomes_a_field_with_its_arrow_type_and_pyarrows_values() {
    let dir = tempfile::tempdir().unwrap();
    let expected = python(dir.path(), &format!("{PRELUDE}{TYPED}"));
    let path = dir.path().join("typed.parquet");
    let records = read_all(source(
        std::slice::from_ref(&path),
        options("value", Some("id"), FieldSelection::All),
    ))
    .unwrap();
    let rows = expected["rows"].as_array().unwrap();
    assert_eq!(records.len(), rows.len());
    let names = [
        "label", "caption", "tags", "meta", "day", "kind", "score", "ok", "blob",
    ];
    for (record, row) in records.iter().zip(rows) {
        let (got_names, got) = fields_json(&record.fields);
        assert_eq!(got_names, names);
        let mut want = row.clone();
        let want = want.as_object_mut().unwrap();
        want.remove("id");
        want.remove("value");
        assert_eq!(&got, &Value::Object(want.clone()), "{}", record.origin);
        assert_eq!(record.key, row["id"].as_str().unwrap().as_bytes());
    }
    // The types are the file's, exactly: nested, dates and dictionaries kept.
    let types: Vec<DataType> = records[0]
        .fields
        .iter()
        .map(|(_, v)| arrow_type(v).unwrap())
        .collect();
    assert_eq!(
        types,
        [
            DataType::Int64,
            DataType::Utf8,
            DataType::List(std::sync::Arc::new(Field::new(
                "element",
                DataType::Utf8,
                true
            ))),
            DataType::Struct(
                vec![
                    Field::new("a", DataType::Int32, true),
                    Field::new("b", DataType::Utf8, true)
                ]
                .into()
            ),
            DataType::Date32,
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            DataType::Float64,
            DataType::Boolean,
            DataType::Binary,
        ]
    );
    // (pyarrow names list items "element": the name is kept too.)

    // Chosen fields come in the order given; none means none.
    let chosen = read_all(source(
        std::slice::from_ref(&path),
        options(
            "value",
            None,
            FieldSelection::Only(vec!["kind".into(), "id".into()]),
        ),
    ))
    .unwrap();
    let (names, values) = fields_json(&chosen[5].fields);
    assert_eq!(names, ["kind", "id"]);
    assert_eq!(values, json!({"kind": rows[5]["kind"], "id": "id-5"}));
    let none = read_all(source(
        std::slice::from_ref(&path),
        options("value", Some("id"), FieldSelection::None),
    ))
    .unwrap();
    assert!(none.iter().all(|r| r.fields.is_empty()));
    let metadata = source(&[path], options("value", None, FieldSelection::None))
        .get_ref()
        .metadata();
    assert_eq!(
        Value::Object(metadata),
        json!({"value": {"column": "value", "hf_struct": false}})
    );
}

/// Writes `large.parquet`: 30,000 rows in one row group of small values and
/// three fields as the ingest benchmark has them (a string id, an int64, a
/// float64), with nulls and a long caption now and then; pyarrow's default
/// dictionary encoding, with a dictionary page limit that makes the string
/// columns fall back to plain pages partway through. Prints what pyarrow reads.
const LARGE: &str = r#"
import pyarrow as pa, pyarrow.parquet as pq
n = 30000
table = pa.table({
    "value": pa.array([f"v{i}".encode() for i in range(n)], pa.binary()),
    "id": pa.array([None if i % 997 == 5 else f"id{i:012d}" for i in range(n)]),
    "caption": pa.array([("long " * 2000 + str(i)) if i % 4099 == 7 else f"c{i % 50}"
                         for i in range(n)]),
    "n": pa.array([None if i % 1013 == 3 else i * 7 % 1000003 for i in range(n)], pa.int64()),
    "x": pa.array([i * 0.5 for i in range(n)], pa.float64()),
})
pq.write_table(table, out / "large.parquet", row_group_size=n, dictionary_pagesize_limit=64 << 10)
back = pq.read_table(out / "large.parquet")
print(json.dumps({"rows": [hexed(r) for r in back.to_pylist()]}))
"#;

#[test]
fn a_large_row_group_read_in_several_batches_gives_pyarrows_fields_for_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let expected = python(dir.path(), &format!("{PRELUDE}{LARGE}"));
    let path = dir.path().join("large.parquet");
    let records = read_all(source(
        std::slice::from_ref(&path),
        options("value", None, FieldSelection::All),
    ))
    .unwrap();
    let rows = expected["rows"].as_array().unwrap();
    assert_eq!(records.len(), rows.len());
    for (i, (record, row)) in records.iter().zip(rows).enumerate() {
        let (names, got) = fields_json(&record.fields);
        assert_eq!(names, ["id", "caption", "n", "x"], "row {i}");
        let mut want = row.as_object().unwrap().clone();
        want.remove("value");
        assert_eq!(got, Value::Object(want), "row {i}");
        assert_eq!(record.value, format!("v{i}").as_bytes());
    }
    // The rows came in batches (of up to 8192 rows, sized by the longest
    // caption, not by the whole dictionary): more than one, fewer than 256-row
    // batches would make.
    let mut batches: Vec<*const ()> = Vec::new();
    for record in &records {
        let (columns, _) = record.fields.source_row().expect("rows of a batch");
        let at = std::sync::Arc::as_ptr(columns) as *const ();
        if batches.last() != Some(&at) {
            batches.push(at);
        }
    }
    assert!(
        (2..30_000 / 256).contains(&batches.len()),
        "{} batches",
        batches.len()
    );
}

#[test]
fn a_missing_chosen_column_names_the_file_and_lists_the_columns() {
    let dir = tempfile::tempdir().unwrap();
    python(dir.path(), &format!("{PRELUDE}{TYPED}print(1)"));
    let path = dir.path().join("typed.parquet");
    let error = read_all(source(
        std::slice::from_ref(&path),
        options(
            "value",
            Some("id"),
            FieldSelection::Only(vec!["label".into(), "nope".into()]),
        ),
    ))
    .unwrap_err()
    .to_string();
    assert!(
        error.contains(&path.display().to_string())
            && error.contains("no column \"nope\"")
            && error.contains("\"label\", \"caption\", \"tags\""),
        "{error}"
    );
}

/// A `datasets` export: Image (struct<bytes, path>), ClassLabel, Value("string"),
/// and rows whose image is only a path (bytes null), as `datasets` writes images
/// made from local files.
const HF: &str = r#"
import io
from PIL import Image as PILImage
from datasets import Dataset, Features, Image, ClassLabel, Value
import pyarrow.parquet as pq
def png(color):
    buf = io.BytesIO()
    PILImage.new("RGB", (3, 2), color).save(buf, format="PNG")
    return buf.getvalue()
(out / "images").mkdir()
(out / "images" / "green.png").write_bytes(png((0, 255, 0)))
images = [{"bytes": png((255, 0, 0)), "path": "red.png"}, "images/green.png",
          {"bytes": png((0, 0, 255)), "path": None}]
features = Features({"image": Image(), "label": ClassLabel(names=["cat", "dog", "bird"]),
                     "caption": Value("string")})
ds = Dataset.from_dict({"image": images, "label": [2, 0, 1],
                        "caption": ["a red one", None, "blue"]}, features=features)
ds.to_parquet(str(out / "hf.parquet"))
f = pq.ParquetFile(out / "hf.parquet")
back = f.read()
print(json.dumps({
    "huggingface": json.loads(f.schema_arrow.metadata[b"huggingface"]),
    "rows": [hexed(r) for r in back.to_pylist()],
}))
"#;

#[test]
fn a_hugging_face_export_gives_image_bytes_path_label_and_its_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let expected = python(dir.path(), &format!("{PRELUDE}{HF}"));
    let path = dir.path().join("hf.parquet");
    let source = source(
        std::slice::from_ref(&path),
        options("image", None, FieldSelection::All),
    );
    let metadata = Value::Object(source.get_ref().metadata());
    let records = read_all(source).unwrap();
    let rows = expected["rows"].as_array().unwrap();
    assert_eq!(records.len(), 3);
    let green = std::fs::read(dir.path().join("images/green.png")).unwrap();
    for (i, (record, row)) in records.iter().zip(rows).enumerate() {
        let image = &row["image"];
        // Row 1 holds only a path: its bytes come from the file beside the Parquet.
        let want_value = match image["bytes"]["hex"].as_str() {
            Some(hex) => bcd_test_support::unhex(hex),
            None => green.clone(),
        };
        assert_eq!(record.value, want_value, "row {i}");
        let (names, values) = fields_json(&record.fields);
        assert_eq!(names, ["image.path", "label", "caption"]);
        assert_eq!(
            values,
            json!({"image.path": image["path"], "label": row["label"], "caption": row["caption"]})
        );
    }
    assert_eq!(
        rows[1]["image"]["bytes"],
        Value::Null,
        "datasets wrote a path only"
    );
    assert_eq!(
        metadata,
        json!({
            "huggingface": expected["huggingface"],
            "class_labels": {"label": ["cat", "dog", "bird"]},
            "class_names": ["cat", "dog", "bird"],
            "value": {"column": "image", "hf_struct": true},
        })
    );
    // Without the label among the fields, no class names.
    let source = ParquetSource::new(
        &[path],
        options("image", None, FieldSelection::Only(vec!["caption".into()])),
    )
    .unwrap();
    let metadata = source.get_ref().metadata();
    assert!(!metadata.contains_key("class_labels"), "{metadata:?}");
    assert!(metadata.contains_key("huggingface"));
}

/// struct<bytes, path> rows whose bytes are null, with paths the source must not
/// read (absolute, escaping the directory) or cannot (missing), and a row whose
/// bytes and path are both null.
const PATHS: &str = r#"
import pyarrow as pa, pyarrow.parquet as pq
image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
(out / "beside.bin").write_bytes(b"beside")
for name, path in [("ok", "beside.bin"), ("absolute", str(out / "beside.bin")),
                   ("escape", "../beside.bin"), ("missing", "gone.bin"), ("null", None)]:
    rows = [{"bytes": b"first", "path": "first.png"}, {"bytes": None, "path": path}]
    pq.write_table(pa.table({"image": pa.array(rows, image)}), out / f"{name}.parquet")
print(1)
"#;

#[test]
fn null_bytes_fall_back_to_a_path_inside_the_files_directory_only() {
    let dir = tempfile::tempdir().unwrap();
    python(dir.path(), &format!("{PRELUDE}{PATHS}"));
    let file = |name: &str| dir.path().join(format!("{name}.parquet"));
    let run = |name: &str, skip_nulls: bool| {
        let mut options = options("image", None, FieldSelection::All);
        options.skip_nulls = skip_nulls;
        let mut source = ParquetSource::new(&[file(name)], options).unwrap();
        let records = read_all(source.by_ref());
        (records, source.skipped().total())
    };
    let (records, _) = run("ok", false);
    let values: Vec<Vec<u8>> = records.unwrap().into_iter().map(|r| r.value).collect();
    assert_eq!(values, [b"first".to_vec(), b"beside".to_vec()]);
    for (name, reason) in [
        (
            "absolute",
            "is not a relative path inside the Parquet file's directory",
        ),
        (
            "escape",
            "is not a relative path inside the Parquet file's directory",
        ),
        ("missing", "cannot be read"),
        ("null", "column \"image\" is null"),
    ] {
        let error = run(name, false).0.unwrap_err().to_string();
        let shown = file(name).display().to_string();
        assert!(
            error.contains(&format!("{shown}: row 1: "))
                && error.contains("\"image\"")
                && error.contains(reason),
            "{name}: {error}"
        );
    }
    // With skip_nulls, a null, and a path that names no file it may read (one
    // outside the file's directory is never opened), are skipped and counted
    // (the issue: "else it is an error, or skipped with --skip-nulls").
    for name in ["missing", "null", "escape", "absolute"] {
        let (records, skipped) = run(name, true);
        assert_eq!(records.unwrap().len(), 1, "{name}");
        assert_eq!(skipped, 1, "{name}");
    }
}

/// Files whose field columns disagree: label int32 then int64 (widens), then
/// string (conflicts).
const MIXED: &str = r#"
import pyarrow as pa, pyarrow.parquet as pq
for name, label in [("a", pa.array([1, 2], pa.int32())), ("b", pa.array([3, 4], pa.int64())),
                    ("c", pa.array(["x", "y"]))]:
    pq.write_table(pa.table({"value": pa.array([b"v", b"w"]), "label": label}),
                   out / f"{name}.parquet")
print(1)
"#;

#[test]
fn field_types_must_agree_across_files_or_the_error_names_both() {
    let dir = tempfile::tempdir().unwrap();
    python(dir.path(), &format!("{PRELUDE}{MIXED}"));
    let file = |name: &str| dir.path().join(format!("{name}.parquet"));
    let widened = read_all(source(
        &[file("a"), file("b")],
        options("value", None, FieldSelection::All),
    ))
    .unwrap();
    let types: Vec<DataType> = widened
        .iter()
        .map(|r| arrow_type(r.fields.get("label").unwrap()).unwrap())
        .collect();
    assert_eq!(
        types,
        [
            DataType::Int32,
            DataType::Int32,
            DataType::Int64,
            DataType::Int64
        ]
    );
    let mut source = source(
        &[file("a"), file("b"), file("c")],
        options("value", None, FieldSelection::All),
    );
    let error = loop {
        match source.next() {
            Some(Ok(_)) => {}
            Some(Err(error)) => break error.to_string(),
            None => panic!("no error"),
        }
    };
    let (a, c) = (
        file("a").display().to_string(),
        file("c").display().to_string(),
    );
    assert!(
        error.starts_with(&format!("{c}: schema: column \"label\" has type Utf8"))
            && error.contains(&format!("conflicts with type Int64 in {a}")),
        "{error}"
    );
    // Leaving the column out reads all three.
    let records = read_all(self::source(
        &[file("a"), file("b"), file("c")],
        options("value", None, FieldSelection::None),
    ))
    .unwrap();
    assert_eq!(records.len(), 6);
}

/// parquet-cpp 1.5.1 (Arrow C++ before 3.0) wrote its compressed v2 data pages
/// with `is_compressed = false` (ARROW-10353). pyarrow reads them as compressed;
/// the `parquet` crate alone failed with "eof decoding byte array" on the plain
/// string column. `fixtures/parquet/ARROW-17100.parquet` is apache/arrow-testing's
/// example of such a file (fixtures/README.md).
#[test]
fn parquet_cpp_1_5_v2_pages_marked_uncompressed_read_as_pyarrow_reads_them() {
    let path = bcd_test_support::repo_root().join("fixtures/parquet/ARROW-17100.parquet");
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "{PRELUDE}
import pyarrow.parquet as pq
file = pq.ParquetFile({path:?})
print(json.dumps({{\"created_by\": file.metadata.created_by,
                  \"rows\": [hexed(r) for r in file.read().to_pylist()]}}))
",
        path = path.display().to_string()
    );
    let expected = python(dir.path(), &script);
    assert_eq!(expected["created_by"], "parquet-cpp version 1.5.1-SNAPSHOT");
    let rows = expected["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 5);
    for value in ["col2", "col4"] {
        let records = read_all(source(
            std::slice::from_ref(&path),
            options(value, None, FieldSelection::All),
        ))
        .unwrap_or_else(|e| panic!("value column {value}: {e}"));
        assert_eq!(records.len(), rows.len());
        for (record, row) in records.iter().zip(rows) {
            assert_eq!(record.value, row[value].as_str().unwrap().as_bytes());
            let mut want = row.as_object().unwrap().clone();
            want.remove(value);
            let (_, got) = fields_json(&record.fields);
            assert_eq!(got, Value::Object(want), "{}", record.origin);
        }
    }
}

/// A string column whose bytes are not UTF-8 (Daft's `invalid_utf8.parquet`
/// test file is such a file): pyarrow writes and reads it; the source refuses
/// it naming the file and rows, and does not call it truncated or corrupt.
#[test]
fn a_string_column_holding_bytes_that_are_not_utf8_is_refused_as_invalid_not_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    python(
        dir.path(),
        &format!(
            "{PRELUDE}
import pyarrow as pa, pyarrow.parquet as pq
raw = pa.array([b\"ok\", b\"\\x80bad\"], pa.binary())
text = pa.Array.from_buffers(pa.string(), len(raw), raw.buffers())
pq.write_table(pa.table({{\"value\": pa.array([b\"a\", b\"b\"]), \"text\": text}}), out / \"bad.parquet\")
back = pq.read_table(out / \"bad.parquet\").column(\"text\").cast(pa.binary()).to_pylist()
print(json.dumps([v.hex() for v in back]))
"
        ),
    );
    let path = dir.path().join("bad.parquet");
    let error = read_all(source(
        std::slice::from_ref(&path),
        options("value", None, FieldSelection::All),
    ))
    .unwrap_err();
    assert!(matches!(error, SourceError::Invalid { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.starts_with(&format!("{}: rows from 0: ", path.display()))
            && message.contains("bytes that are not UTF-8")
            && !message.contains("truncated"),
        "{message}"
    );
}
