//! The MDS source against datasets `streaming.MDSWriter` wrote
//! (`fixtures/mds/`, with what `StreamingDataset` reads from them in
//! `expected.json`), and against copies of them damaged as a hostile or broken
//! writer could: truncated shards, offsets past the end, hashes that do not
//! match, sizes no file holds, FIFOs.

use std::fs;
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float16Type, Float32Type, Float64Type, Int64Type};
use arrow_array::Array;
use arrow_schema::DataType;
use bcd_converters::mds_source::MdsSource;
use bcd_converters::sample_shards::ColumnOptions;
use bcd_converters::{FieldSelection, FieldValue, Record, Source, SourceError};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/mds")
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
    MdsSource::open(&[dir.to_owned()], options)?.collect()
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

/// The Arrow type each MDS encoding's field takes.
fn arrow_type(encoding: &str) -> DataType {
    match encoding {
        "str" | "str_decimal" | "json" => DataType::Utf8,
        "int" | "int64" | "str_int" => DataType::Int64,
        "int8" => DataType::Int8,
        "int16" => DataType::Int16,
        "int32" => DataType::Int32,
        "uint8" => DataType::UInt8,
        "uint16" => DataType::UInt16,
        "uint32" => DataType::UInt32,
        "uint64" => DataType::UInt64,
        "float16" => DataType::Float16,
        "float32" => DataType::Float32,
        "float64" | "str_float" => DataType::Float64,
        _ => DataType::Binary,
    }
}

/// Checks `record`'s field `name` (encoding `encoding`) against what
/// StreamingDataset read (`want`: the stored bytes, and the value read).
fn check_field(record: &Record, name: &str, encoding: &str, want: &Value) {
    let stored = want["stored"].as_str().unwrap();
    let read = &want["read"];
    if encoding.starts_with("ndarray") {
        let (dtype, row) = field(record, &format!("{name}.dtype"));
        assert_eq!(dtype.as_string::<i32>().value(row), read["dtype"], "{name}");
        let (shape, row) = field(record, &format!("{name}.shape"));
        let shape = shape.as_list::<i32>().value(row);
        let shape: Vec<i64> = shape.as_primitive::<Int64Type>().values().to_vec();
        let want_shape: Vec<i64> = (read["shape"].as_array().unwrap().iter())
            .map(|d| d.as_i64().unwrap())
            .collect();
        assert_eq!(shape, want_shape, "{name}");
        let (data, row) = field(record, name);
        let data = hex(data.as_binary::<i32>().value(row));
        // The elements are the stored bytes after the header.
        assert!(
            stored.ends_with(&data),
            "{name}: {data} is not the end of {stored}"
        );
        let element = match read["dtype"].as_str().unwrap() {
            "uint8" | "int8" => 1,
            "int16" => 2,
            "float32" => 4,
            _ => 8,
        };
        let count: i64 = want_shape.iter().product();
        assert_eq!(data.len() as i64, 2 * count * element, "{name}");
        return;
    }
    let (array, row) = field(record, name);
    assert_eq!(array.data_type(), &arrow_type(encoding), "{name}");
    let value = bcd_fields::value_to_json(array, row);
    match array.data_type() {
        DataType::Binary => {
            assert_eq!(hex(array.as_binary::<i32>().value(row)), stored, "{name}")
        }
        DataType::Utf8 if encoding == "json" => {
            let text = array.as_string::<i32>().value(row);
            assert_eq!(
                serde_json::from_str::<Value>(text).unwrap(),
                *read,
                "{name}"
            );
            assert_eq!(hex(text.as_bytes()), stored, "{name}");
        }
        DataType::Utf8 => assert_eq!(value, *read, "{name}"),
        DataType::Float16 => assert_eq!(
            f64::from(array.as_primitive::<Float16Type>().value(row).to_f32()),
            read.as_f64().unwrap(),
            "{name}"
        ),
        DataType::Float32 => assert_eq!(
            f64::from(array.as_primitive::<Float32Type>().value(row)),
            read.as_f64().unwrap(),
            "{name}"
        ),
        DataType::Float64 => assert_eq!(
            array.as_primitive::<Float64Type>().value(row),
            read.as_f64().unwrap(),
            "{name}"
        ),
        _ => assert_eq!(value, *read, "{name}"),
    }
}

#[test]
fn every_encoding_is_read_as_streaming_dataset_reads_it() {
    let expected = expected();
    let want = &expected["every-encoding"];
    let columns = want["columns"].as_object().unwrap();
    let records = read(
        &fixture("every-encoding"),
        &options(Some("blob"), Some("id"), FieldSelection::All),
    )
    .unwrap();
    let samples = want["samples"].as_array().unwrap();
    assert_eq!(records.len(), samples.len());
    for (record, sample) in records.iter().zip(samples) {
        assert_eq!(
            record.key,
            sample["id"]["read"].as_str().unwrap().as_bytes()
        );
        assert_eq!(hex(&record.value), sample["blob"]["stored"]);
        for (name, encoding) in columns {
            if name == "id" || name == "blob" {
                assert!(record.fields.get(name).is_none(), "{name}");
                continue;
            }
            check_field(record, name, encoding.as_str().unwrap(), &sample[name]);
        }
        // An array column is three fields; every other column one.
        let arrays = columns
            .values()
            .filter(|e| e.as_str().unwrap().starts_with("ndarray"))
            .count();
        assert_eq!(record.fields.len(), columns.len() - 2 + 2 * arrays);
    }
}

#[test]
fn an_array_value_is_its_elements_with_its_dtype_and_shape_as_fields() {
    let expected = expected();
    let samples = expected["every-encoding"]["samples"].as_array().unwrap();
    let records = read(
        &fixture("every-encoding"),
        &options(Some("arr"), None, FieldSelection::Only(vec!["i8".into()])),
    )
    .unwrap();
    for (record, sample) in records.iter().zip(samples) {
        let stored = sample["arr"]["stored"].as_str().unwrap();
        assert!(stored.ends_with(&hex(&record.value)) && !record.value.is_empty());
        assert!(record.key.is_empty());
        let names: Vec<&str> = record.fields.iter().map(|(n, _)| &**n).collect();
        assert_eq!(names, ["arr.dtype", "arr.shape", "i8"]);
        let (dtype, row) = field(record, "arr.dtype");
        assert_eq!(
            dtype.as_string::<i32>().value(row),
            sample["arr"]["read"]["dtype"]
        );
    }
}

#[test]
fn compressed_and_hashed_shards_read_the_same_and_the_image_is_the_default_value() {
    let expected = expected();
    for name in ["zstd", "gz", "bz2", "br", "snappy"] {
        let want = &expected[name]["samples"];
        let mut source = MdsSource::open(
            &[fixture(name)],
            &options(None, Some("id"), FieldSelection::All),
        )
        .unwrap();
        let records: Vec<Record> = source.by_ref().map(Result::unwrap).collect();
        assert_eq!(records.len(), want.as_array().unwrap().len(), "{name}");
        for (record, sample) in records.iter().zip(want.as_array().unwrap()) {
            assert_eq!(hex(&record.value), sample["image"]["stored"], "{name}");
            assert_eq!(
                record.key,
                sample["id"]["read"].as_str().unwrap().as_bytes()
            );
            check_field(record, "label", "int", &sample["label"]);
            assert_eq!(record.fields.len(), 1);
        }
        assert!(source.keyed());
        let metadata = source.metadata();
        assert_eq!(metadata["mds"]["columns"]["image"], "jpeg");
        assert_eq!(
            metadata["value"],
            serde_json::json!({"column": "image", "key_column": "id"})
        );
    }
}

#[test]
fn pickled_columns_are_refused_unless_left_out() {
    let dir = fixture("pickled");
    for opts in [
        options(None, None, FieldSelection::All),
        options(None, None, FieldSelection::Only(vec!["obj".into()])),
        options(Some("obj"), None, FieldSelection::None),
    ] {
        let error = read(&dir, &opts).unwrap_err().to_string();
        assert!(
            error.contains("\"obj\"") && error.contains("pkl") && error.contains("never unpickles"),
            "{error}"
        );
    }
    let records = read(&dir, &options(None, None, FieldSelection::None)).unwrap();
    let values: Vec<&[u8]> = records.iter().map(|r| &r.value[..]).collect();
    assert_eq!(values, [&b"b0"[..], b"b1", b"b2"]);
}

#[test]
fn the_value_column_must_be_given_when_several_could_be() {
    let error = read(&fixture("every-encoding"), &ColumnOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("`value_column`") && error.contains("jpg (jpeg)"),
        "{error}"
    );
    let error = read(
        &fixture("zstd"),
        &options(Some("nope"), None, FieldSelection::All),
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("no column \"nope\"") && error.contains("index.json"),
        "{error}"
    );
    let error = read(
        &fixture("every-encoding"),
        &options(Some("blob"), Some("f32"), FieldSelection::All),
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("key column \"f32\" is float32"), "{error}");
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

/// Reads `dir` as the compressed fixtures are read; the error's message.
fn error_of(dir: &Path) -> String {
    let result = MdsSource::open(
        &[dir.to_owned()],
        &options(None, Some("id"), FieldSelection::All),
    )
    .and_then(|source| source.collect::<Result<Vec<_>, _>>());
    result.unwrap_err().to_string()
}

#[test]
fn damaged_shards_are_refused_naming_the_file() {
    // Truncated: the stored file is shorter than the index says.
    let (_t, dir) = copy("every-encoding");
    let shard = dir.join("shard.00001.mds");
    let bytes = fs::read(&shard).unwrap();
    fs::write(&shard, &bytes[..bytes.len() - 10]).unwrap();
    let error = error_of_every(&dir);
    assert!(
        error.contains("shard.00001.mds") && error.contains("index says"),
        "{error}"
    );

    // A byte of a sample changed: its sha1 (the first hash checked) fails.
    let (_t, dir) = copy("every-encoding");
    let shard = dir.join("shard.00002.mds");
    let mut bytes = fs::read(&shard).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x55;
    fs::write(&shard, &bytes).unwrap();
    let error = error_of_every(&dir);
    assert!(
        error.contains("shard.00002.mds") && error.contains("sha1 hash"),
        "{error}"
    );

    // The last offset points past the end (and the index agrees on the size).
    let (_t, dir) = copy("every-encoding");
    let shard = dir.join("shard.00000.mds");
    let mut bytes = fs::read(&shard).unwrap();
    bytes[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    fs::write(&shard, &bytes).unwrap();
    let error = error_of_every(&dir);
    assert!(
        error.contains("shard.00000.mds") && error.contains("offset 2"),
        "{error}"
    );

    // A compressed shard cut short.
    let (_t, dir) = copy("zstd");
    let shard = dir.join("shard.00001.mds.zstd");
    let bytes = fs::read(&shard).unwrap();
    fs::write(&shard, &bytes[..bytes.len() / 2]).unwrap();
    let error = error_of(&dir);
    assert!(error.contains("shard.00001.mds.zstd"), "{error}");
}

/// Uncompressed shards are mapped: one cut short, with its index entry
/// edited to the cut length (and its hashes dropped) so the size check
/// passes, is refused by its own table, naming the shard, whether the cut
/// falls in the table, in a sample or before the last byte.
#[test]
fn a_mapped_shard_cut_short_with_its_index_agreeing_is_refused_naming_it() {
    let original = fs::read(fixture("every-encoding").join("shard.00001.mds")).unwrap();
    for cut in [2, 9, original.len() / 2, original.len() - 1] {
        let (_t, dir) = copy("every-encoding");
        let shard = dir.join("shard.00001.mds");
        fs::write(&shard, &original[..cut]).unwrap();
        edit_index(&dir, |index| {
            let entry = &mut index["shards"][1]["raw_data"];
            entry["bytes"] = cut.into();
            entry["hashes"] = serde_json::json!({});
        });
        let error = error_of_every(&dir);
        assert!(error.contains("shard.00001.mds"), "cut at {cut}: {error}");
    }
}

fn error_of_every(dir: &Path) -> String {
    let result = MdsSource::open(
        &[dir.to_owned()],
        &options(Some("blob"), Some("id"), FieldSelection::All),
    )
    .and_then(|source| source.collect::<Result<Vec<_>, _>>());
    result.unwrap_err().to_string()
}

#[test]
fn sizes_no_file_holds_are_refused_before_anything_that_large_is_allocated() {
    // A compressed shard whose index claims a terabyte decompressed.
    let (_t, dir) = copy("zstd");
    edit_index(&dir, |index| {
        index["shards"][0]["raw_data"]["bytes"] = (1u64 << 40).into()
    });
    let error = error_of(&dir);
    assert!(
        error.contains("shard.00000.mds.zstd") && error.contains("over the limit"),
        "{error}"
    );
    // ... or a few bytes more than it holds.
    let (_t, dir) = copy("zstd");
    edit_index(&dir, |index| {
        let bytes = index["shards"][1]["raw_data"]["bytes"].as_u64().unwrap();
        index["shards"][1]["raw_data"]["bytes"] = (bytes + 3).into();
    });
    let error = error_of(&dir);
    assert!(error.contains("shard.00001.mds.zstd"), "{error}");
    // A sample count that is not the shard's.
    let (_t, dir) = copy("gz");
    edit_index(&dir, |index| {
        index["shards"][0]["samples"] = 1_000_000.into()
    });
    let error = error_of(&dir);
    assert!(
        error.contains("shard.00000.mds.gz") && error.contains("says 1000000"),
        "{error}"
    );
    // A sample count the shard's table cannot hold.
    let (_t, dir) = copy("every-encoding");
    let shard = dir.join("shard.00003.mds");
    let mut bytes = fs::read(&shard).unwrap();
    bytes[..4].copy_from_slice(&0x4000_0000u32.to_le_bytes());
    fs::write(&shard, &bytes).unwrap();
    let error = error_of_every(&dir);
    assert!(
        error.contains("shard.00003.mds") && error.contains("samples need a table"),
        "{error}"
    );
}

/// A fixture, a change to its index, and what the error says.
type IndexChange = (&'static str, fn(&mut Value), &'static str);

#[test]
fn indexes_asking_for_what_bcd_does_not_do_are_refused_naming_the_shard() {
    let cases: [IndexChange; 6] = [
        (
            "gz",
            |i| i["shards"][1]["compression"] = "lz4".into(),
            "shard 1: \"compression\": \"lz4\"",
        ),
        (
            "gz",
            |i| i["shards"][0]["zip_data"]["hashes"]["sm3"] = "00".into(),
            "hash algorithm \"sm3\"",
        ),
        (
            "gz",
            |i| i["shards"][0]["zip_data"]["basename"] = "../../etc/passwd".into(),
            "not a relative name",
        ),
        (
            "gz",
            |i| i["shards"][0]["format"] = "json".into(),
            "bcd reads MDS shards",
        ),
        (
            "gz",
            |i| i["shards"][1]["column_encodings"][1] = "float128".into(),
            "encoding \"float128\"",
        ),
        (
            "gz",
            |i| i["shards"][1]["column_names"][0] = "other".into(),
            "differ from those of",
        ),
    ];
    for (name, edit, expected) in cases {
        let (_t, dir) = copy(name);
        edit_index(&dir, edit);
        let error = error_of(&dir);
        assert!(
            error.contains(expected) && error.contains("index.json"),
            "{expected}: {error}"
        );
    }
}

#[cfg(unix)]
#[test]
fn fifos_are_refused_unopened() {
    let mkfifo = |path: &Path| {
        fs::remove_file(path).unwrap();
        let status = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success());
    };
    let (_t, dir) = copy("gz");
    mkfifo(&dir.join("shard.00001.mds.gz"));
    let error = error_of(&dir);
    assert!(
        error.contains("shard.00001.mds.gz") && error.contains("FIFO"),
        "{error}"
    );
    let (_t, dir) = copy("gz");
    mkfifo(&dir.join("index.json"));
    let error = error_of(&dir);
    assert!(
        error.contains("index.json") && error.contains("FIFO"),
        "{error}"
    );
}

#[test]
fn a_decompressed_copy_beside_a_missing_compressed_shard_is_read() {
    // A StreamingDataset cache keeps the decompressed shard alone.
    let (_t, dir) = copy("zstd");
    let raw = zstd::decode_all(&fs::read(dir.join("shard.00000.mds.zstd")).unwrap()[..]).unwrap();
    fs::remove_file(dir.join("shard.00000.mds.zstd")).unwrap();
    fs::write(dir.join("shard.00000.mds"), &raw).unwrap();
    let records = read(&dir, &options(None, None, FieldSelection::All)).unwrap();
    assert_eq!(records.len(), 6);
    // Its raw hashes still hold it to the index.
    let mut bad = raw.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    fs::write(dir.join("shard.00000.mds"), &bad).unwrap();
    let error = read(&dir, &options(None, None, FieldSelection::All))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("shard.00000.mds") && error.contains("hash"),
        "{error}"
    );
}
