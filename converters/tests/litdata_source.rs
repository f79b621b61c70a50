//! The LitData source against datasets `litdata.optimize` wrote
//! (`fixtures/litdata/`, with what `litdata.StreamingDataset` reads from them in
//! `expected.json`), in every chunk layout (plain, whole-file zstd, zstd frames
//! of items, one frame per item), and against copies damaged as a hostile or
//! broken writer could.

use std::fs;
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::Array;
use arrow_schema::DataType;
use bcd_converters::litdata_source::LitdataSource;
use bcd_converters::sample_shards::ColumnOptions;
use bcd_converters::{FieldSelection, FieldValue, Record, Source, SourceError};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/litdata")
        .join(name)
}

fn expected() -> Value {
    serde_json::from_str(&fs::read_to_string(fixture("expected.json")).unwrap()).unwrap()
}

fn options(value: Option<&str>, key: Option<&str>, fields: FieldSelection) -> ColumnOptions {
    ColumnOptions {
        value_column: value.map(str::to_owned),
        key_column: key.map(str::to_owned),
        fields,
    }
}

fn read(dir: &Path, options: &ColumnOptions) -> Result<Vec<Record>, SourceError> {
    LitdataSource::open(&[dir.to_owned()], options)?.collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn field<'a>(record: &'a Record, name: &str) -> (&'a dyn Array, usize) {
    match record.fields.get(name) {
        Some(FieldValue::Arrow(array, row)) => (array.as_ref(), *row),
        other => panic!("field {name} of {}: {other:?}", record.origin),
    }
}

/// Checks `record`'s field `name` against what StreamingDataset read.
fn check_leaf(record: &Record, name: &str, want: &Value) {
    let format = want["format"].as_str().unwrap();
    let stored = want["stored"].as_str().unwrap();
    let read = &want["read"];
    let array_format = ["numpy", "tensor", "no_header_numpy", "no_header_tensor"]
        .iter()
        .any(|f| format.split(':').next() == Some(f));
    if array_format {
        let (dtype, row) = field(record, &format!("{name}.dtype"));
        assert_eq!(dtype.as_string::<i32>().value(row), read["dtype"], "{name}");
        let (shape, row) = field(record, &format!("{name}.shape"));
        let shape = shape.as_list::<i32>().value(row);
        let shape: Vec<Value> = (shape.as_primitive::<Int64Type>().values().iter())
            .map(|d| Value::from(*d))
            .collect();
        assert_eq!(Value::from(shape), read["shape"], "{name}");
        let (data, row) = field(record, name);
        let data = hex(data.as_binary::<i32>().value(row));
        assert!(
            stored.ends_with(&data),
            "{name}: {data} is not the end of {stored}"
        );
        return;
    }
    let (array, row) = field(record, name);
    match format {
        "str" | "text" => {
            assert_eq!(array.data_type(), &DataType::Utf8, "{name}");
            assert_eq!(
                array.as_string::<i32>().value(row),
                read.as_str().unwrap(),
                "{name}"
            );
        }
        "int" => assert_eq!(
            array.as_primitive::<Int64Type>().value(row),
            read.as_i64().unwrap(),
            "{name}"
        ),
        "float" => assert_eq!(
            array.as_primitive::<Float64Type>().value(row),
            read.as_f64().unwrap(),
            "{name}"
        ),
        "bool" => assert_eq!(
            array.as_boolean().value(row),
            read.as_bool().unwrap(),
            "{name}"
        ),
        _ => {
            assert_eq!(array.data_type(), &DataType::Binary, "{name} ({format})");
            assert_eq!(hex(array.as_binary::<i32>().value(row)), stored, "{name}");
        }
    }
}

#[test]
fn every_leaf_format_is_read_as_litdata_reads_it() {
    let expected = expected();
    let items = expected["dict"]["items"].as_array().unwrap();
    let records = read(
        &fixture("dict"),
        &options(Some("image"), Some("meta.id"), FieldSelection::All),
    )
    .unwrap();
    assert_eq!(records.len(), items.len());
    for (record, item) in records.iter().zip(items) {
        assert_eq!(
            record.key,
            item["meta.id"]["read"].as_str().unwrap().as_bytes()
        );
        assert_eq!(hex(&record.value), item["image"]["stored"]);
        for (name, want) in item.as_object().unwrap() {
            if name == "image" || name == "meta.id" {
                assert!(record.fields.get(name).is_none());
                continue;
            }
            check_leaf(record, name, want);
        }
    }
}

#[test]
fn tuples_and_lone_leaves_are_named_by_position_and_item() {
    let expected = expected();
    let records = read(&fixture("tuple"), &ColumnOptions::default()).unwrap();
    let items = expected["tuple"]["items"].as_array().unwrap();
    assert_eq!(records.len(), items.len());
    for (record, item) in records.iter().zip(items) {
        assert_eq!(hex(&record.value), item["0"]["stored"]);
        check_leaf(record, "1", &item["1"]);
    }
    let records = read(&fixture("leaf"), &ColumnOptions::default()).unwrap();
    let values: Vec<&[u8]> = records.iter().map(|r| &r.value[..]).collect();
    assert_eq!(values, [&b"leaf-0"[..], b"leaf-1", b"leaf-2", b"leaf-3"]);
    assert!(records.iter().all(|r| r.fields.is_empty()));
}

#[test]
fn every_zstd_layout_reads_the_same_items() {
    let expected = expected();
    for name in ["zstd-chunk", "zstd-batch", "zstd-sample"] {
        let items = expected[name]["items"].as_array().unwrap();
        let mut source = LitdataSource::open(
            &[fixture(name)],
            &options(None, Some("name"), FieldSelection::All),
        )
        .unwrap();
        let records: Vec<Record> = source.by_ref().map(Result::unwrap).collect();
        assert_eq!(records.len(), items.len(), "{name}");
        for (record, item) in records.iter().zip(items) {
            assert_eq!(hex(&record.value), item["image"]["stored"], "{name}");
            assert_eq!(
                record.key,
                item["name"]["read"].as_str().unwrap().as_bytes()
            );
            check_leaf(record, "label", &item["label"]);
        }
        let metadata = source.metadata();
        assert_eq!(metadata["litdata"]["leaves"]["image"], "jpeg");
        assert_eq!(
            metadata["value"],
            serde_json::json!({"column": "image", "key_column": "name"})
        );
    }
}

#[test]
fn pickled_leaves_are_refused_unless_left_out() {
    for opts in [
        options(None, None, FieldSelection::All),
        options(Some("obj"), None, FieldSelection::None),
    ] {
        let error = read(&fixture("pickled"), &opts).unwrap_err().to_string();
        assert!(
            error.contains("\"obj\"") && error.contains("never unpickles"),
            "{error}"
        );
    }
    let records = read(
        &fixture("pickled"),
        &options(None, None, FieldSelection::None),
    )
    .unwrap();
    let values: Vec<&[u8]> = records.iter().map(|r| &r.value[..]).collect();
    assert_eq!(values, [&b"r0"[..], b"r1", b"r2"]);
}

/// A copy of fixture `name` in a temporary directory.
fn copy(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(name);
    fs::create_dir(&dir).unwrap();
    for entry in fs::read_dir(fixture(name)).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    (tmp, dir)
}

fn edit_index(dir: &Path, edit: impl FnOnce(&mut Value)) {
    let path = dir.join("index.json");
    let mut index: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut index);
    fs::write(&path, serde_json::to_string(&index).unwrap()).unwrap();
}

fn error_of(dir: &Path) -> String {
    let result = LitdataSource::open(
        &[dir.to_owned()],
        &options(None, Some("name"), FieldSelection::All),
    )
    .and_then(|source| source.collect::<Result<Vec<_>, _>>());
    result.unwrap_err().to_string()
}

fn damage(dir: &Path, file: &str, edit: impl FnOnce(&mut Vec<u8>)) {
    let path = dir.join(file);
    let mut bytes = fs::read(&path).unwrap();
    edit(&mut bytes);
    fs::write(&path, bytes).unwrap();
}

/// A damage: a name, the chunk it is done to, what is done, what the error says.
type ChunkDamage = (&'static str, &'static str, fn(&mut Vec<u8>), &'static str);

#[test]
fn damaged_chunks_are_refused_naming_the_file() {
    let cases: [ChunkDamage; 7] = [
        // Truncated: the chunk is shorter than the index says.
        (
            "zstd-sample",
            "chunk-0-1.bin",
            |b| b.truncate(b.len() - 5),
            "index says",
        ),
        // An offset past the end.
        (
            "zstd-sample",
            "chunk-0-0.bin",
            |b| b[8..12].copy_from_slice(&u32::MAX.to_le_bytes()),
            "offset 2",
        ),
        // A whole-file zstd chunk cut short.
        (
            "zstd-chunk",
            "chunk-0-1.zstd.bin",
            |b| b.truncate(b.len() / 2),
            "chunk-0-1.zstd.bin",
        ),
        // A framed chunk claiming 2^32 - 1 items.
        (
            "zstd-batch",
            "chunk-0-0.bin",
            |b| b[12..16].copy_from_slice(&u32::MAX.to_le_bytes()),
            "do not fit",
        ),
        // A frame declaring 4 GiB decompressed.
        (
            "zstd-batch",
            "chunk-0-0.bin",
            |b| {
                let at = 24 + 4 * 5 + 20;
                b[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
            },
            "frame 0",
        ),
        // A frame's bytes changed.
        (
            "zstd-batch",
            "chunk-0-0.bin",
            |b| {
                let last = b.len() - 3;
                b[last] ^= 0xff;
            },
            "chunk-0-0.bin",
        ),
        // An item's leaf sizes that overrun it.
        (
            "zstd-sample",
            "chunk-0-0.bin",
            |b| {
                let first = u32::from_le_bytes(b[4..8].try_into().unwrap()) as usize;
                b[first + 5] ^= 0x40;
            },
            "chunk-0-0.bin",
        ),
    ];
    for (name, file, edit, expected) in cases {
        let (_t, dir) = copy(name);
        damage(&dir, file, edit);
        let error = error_of(&dir);
        assert!(
            error.contains(file) && error.contains(expected),
            "{name}/{file}: {expected}: {error}"
        );
    }
}

/// A change to an index, and what the error says.
type IndexChange = (fn(&mut Value), &'static str);

#[test]
fn configs_asking_for_what_bcd_does_not_do_are_refused_naming_the_key() {
    let cases: [IndexChange; 6] = [
        (
            |i| i["config"]["item_loader"] = "TokensLoader".into(),
            "item_loader",
        ),
        (
            |i| i["config"]["encryption"] = serde_json::json!({"algorithm": "fernet"}),
            "encrypted",
        ),
        (|i| i["config"]["compression"] = "lz4".into(), "\"lz4\""),
        (
            |i| i["config"]["data_format"][0] = "mystery".into(),
            "\"mystery\"",
        ),
        (|i| i["config"]["data_spec"] = "[1, {}]".into(), "data_spec"),
        (
            |i| i["chunks"][0]["filename"] = "../../etc/passwd".into(),
            "not a relative name",
        ),
    ];
    for (edit, expected) in cases {
        let (_t, dir) = copy("zstd-chunk");
        edit_index(&dir, edit);
        let error = error_of(&dir);
        assert!(
            error.contains(expected) && error.contains("index.json"),
            "{expected}: {error}"
        );
    }
    // A chunk whose item count is not its entry's.
    let (_t, dir) = copy("zstd-sample");
    edit_index(&dir, |i| i["chunks"][1]["chunk_size"] = 3.into());
    let error = error_of(&dir);
    assert!(
        error.contains("chunk-0-1.bin") && error.contains("entry says 3"),
        "{error}"
    );
    // A whole-file chunk claiming a terabyte decompressed.
    let (_t, dir) = copy("zstd-chunk");
    edit_index(&dir, |i| {
        i["chunks"][0]["chunk_bytes"] = (1u64 << 40).into()
    });
    let error = error_of(&dir);
    assert!(
        error.contains("chunk-0-0.zstd.bin") && error.contains("over the limit"),
        "{error}"
    );
}

#[cfg(unix)]
#[test]
fn fifos_are_refused_unopened() {
    for file in ["chunk-0-1.bin", "index.json"] {
        let (_t, dir) = copy("zstd-batch");
        fs::remove_file(dir.join(file)).unwrap();
        let status = std::process::Command::new("mkfifo")
            .arg(dir.join(file))
            .status()
            .unwrap();
        assert!(status.success());
        let error = error_of(&dir);
        assert!(error.contains(file) && error.contains("FIFO"), "{error}");
    }
}
