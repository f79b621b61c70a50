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

/// Row `row` of `array` as JSON, as Python's `json` writes the value
/// StreamingDataset returned: lists of scalars, null for a null.
fn arrow_json(array: &dyn Array, row: usize) -> Value {
    if array.is_null(row) {
        return Value::Null;
    }
    match array.data_type() {
        DataType::Utf8 => array.as_string::<i32>().value(row).into(),
        DataType::Int64 => array.as_primitive::<Int64Type>().value(row).into(),
        DataType::Float64 => array.as_primitive::<Float64Type>().value(row).into(),
        DataType::Boolean => array.as_boolean().value(row).into(),
        DataType::List(_) => {
            let items = array.as_list::<i32>().value(row);
            (0..items.len())
                .map(|i| arrow_json(items.as_ref(), i))
                .collect::<Vec<_>>()
                .into()
        }
        other => panic!("a field of type {other}"),
    }
}

/// A row StreamingDataset returned, its nested dicts' keys joined by `.`.
fn flatten(row: &Value, prefix: &str, out: &mut serde_json::Map<String, Value>) {
    for (key, value) in row.as_object().unwrap() {
        let name = match prefix {
            "" => key.clone(),
            _ => format!("{prefix}.{key}"),
        };
        match value {
            Value::Object(_) => flatten(value, &name, out),
            other => {
                out.insert(name, other.clone());
            }
        }
    }
}

/// The leaves of the footer fixtures: `data_spec`'s, then `extra`, which only
/// `types` names (the first item lacks it).
const TEXT_LEAVES: [&str; 9] = [
    "id",
    "text",
    "n",
    "score",
    "flag",
    "meta.src",
    "meta.page",
    "toks",
    "extra",
];

#[test]
fn arrow_footer_rows_are_read_as_streaming_dataset_reads_them() {
    let expected = expected();
    for name in ["text", "text-zstd"] {
        let want = &expected[name];
        assert!(want["chunks"].as_array().unwrap().len() > 1, "{name}");
        assert!(
            (want["chunks"].as_array().unwrap().iter()).all(|c| c["layout"] == "footer"),
            "{name}"
        );
        let mut source = LitdataSource::open(
            &[fixture(name)],
            &options(Some("text"), Some("id"), FieldSelection::All),
        )
        .unwrap();
        let records: Vec<Record> = source.by_ref().map(Result::unwrap).collect();
        let rows = want["rows"].as_array().unwrap();
        assert_eq!(records.len(), rows.len(), "{name}");
        for (record, row) in records.iter().zip(rows) {
            let mut flat = serde_json::Map::new();
            flatten(row, "", &mut flat);
            assert_eq!(record.key, flat["id"].as_str().unwrap().as_bytes());
            assert_eq!(record.value, flat["text"].as_str().unwrap().as_bytes());
            assert!(record.fields.get("id").is_none() && record.fields.get("text").is_none());
            for leaf in &TEXT_LEAVES[2..] {
                let (array, i) = field(record, leaf);
                // A key no item of a chunk has is not in StreamingDataset's
                // rows of that chunk: null here.
                let read = flat.get(*leaf).cloned().unwrap_or(Value::Null);
                assert_eq!(
                    arrow_json(array, i),
                    read,
                    "{name} {} {leaf}",
                    record.origin
                );
            }
        }
        // Typed as `types` says; a list as a list whatever a chunk's lists hold.
        let types: Vec<DataType> = ["n", "score", "flag", "meta.page", "extra"]
            .iter()
            .map(|leaf| {
                let (array, _) = field(&records[0], leaf);
                array.data_type().clone()
            })
            .collect();
        use DataType::*;
        assert_eq!(types, [Int64, Float64, Boolean, Int64, Utf8], "{name}");
        assert!(matches!(field(&records[0], "toks").0.data_type(), List(_)));
        let metadata = source.metadata();
        let leaves = metadata["litdata"]["leaves"].as_object().unwrap();
        let mut names = TEXT_LEAVES.to_vec();
        names.sort();
        assert_eq!(leaves.keys().collect::<Vec<_>>(), names);
        assert_eq!(leaves["toks"], "json");
        assert_eq!(leaves["meta.page"], "int");
        assert_eq!(leaves["extra"], "str");
        assert_eq!(metadata["litdata"]["rows"], "arrow_footer");
        assert_eq!(
            metadata["value"],
            serde_json::json!({"column": "text", "key_column": "id"})
        );
    }
}

#[test]
fn arrow_footer_leaves_are_chosen_as_pytree_leaves_are() {
    // The value by default: the only str leaf besides the key... of which
    // there are several here, so it is asked for, naming them.
    let error = read(
        &fixture("text"),
        &options(None, Some("id"), FieldSelection::All),
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("value_column") && error.contains("meta.src (str)"),
        "{error}"
    );
    // Fields by name, a nested dict's keys joined by `.`; an integer key.
    let records = read(
        &fixture("text-zstd"),
        &options(
            Some("text"),
            Some("meta.page"),
            FieldSelection::Only(vec!["toks".into(), "meta.src".into()]),
        ),
    );
    // Item 5's meta lacks "page": a None key is refused, naming the row.
    let error = records.unwrap_err().to_string();
    assert!(
        error.contains("chunk-0-1.bin") && error.contains("row 1") && error.contains("meta.page"),
        "{error}"
    );
    let records = read(
        &fixture("text-zstd"),
        &options(
            Some("text"),
            Some("n"),
            FieldSelection::Only(vec!["toks".into(), "meta.src".into()]),
        ),
    )
    .unwrap();
    assert_eq!(records[1].key, b"9223372036854775807");
    // In the leaves' order, as for pytree leaves.
    let names: Vec<&str> = records[0].fields.iter().map(|(n, _)| &**n).collect();
    assert_eq!(names, ["meta.src", "toks"]);
    // A leaf that is not text or bytes is no value.
    let error = read(
        &fixture("text"),
        &options(Some("toks"), None, FieldSelection::All),
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("\"toks\"") && error.contains("str or bytes"),
        "{error}"
    );
}

/// The Arrow IPC data of a footer chunk.
fn footer_ipc(chunk: &[u8]) -> &[u8] {
    let len = chunk.len();
    let ipc_len = u32::from_le_bytes(chunk[len - 12..len - 8].try_into().unwrap()) as usize;
    &chunk[len - 12 - ipc_len..len - 12]
}

/// A footer-only chunk: a header of `items` items, then `ipc`.
fn footer_chunk(items: u32, ipc: &[u8]) -> Vec<u8> {
    let header = 4 + 4 * (items + 1);
    let mut chunk = items.to_le_bytes().to_vec();
    for _ in 0..=items {
        chunk.extend(header.to_le_bytes());
    }
    chunk.extend(ipc);
    chunk.extend((ipc.len() as u32).to_le_bytes());
    chunk.extend(b"LDARW01\0");
    chunk
}

fn text_error(dir: &Path) -> String {
    let result = LitdataSource::open(
        &[dir.to_owned()],
        &options(Some("text"), Some("id"), FieldSelection::All),
    )
    .and_then(|source| source.collect::<Result<Vec<_>, _>>());
    result.unwrap_err().to_string()
}

/// Sets chunk `i`'s entry to the chunk file's length and `items` items.
fn match_entry(dir: &Path, i: usize, items: u32) {
    let file = format!("chunk-0-{i}.bin");
    let len = fs::metadata(dir.join(&file)).unwrap().len();
    edit_index(dir, |index| {
        index["chunks"][i]["chunk_bytes"] = len.into();
        index["chunks"][i]["chunk_size"] = items.into();
    });
}

/// The offset of the 8-byte decompressed size before the first zstd frame
/// of an IPC-compressed footer.
fn first_zstd_prefix(chunk: &[u8]) -> usize {
    let magic = [0x28, 0xb5, 0x2f, 0xfd];
    chunk.windows(4).position(|w| w == magic).unwrap() - 8
}

#[test]
fn damaged_arrow_footers_are_refused_naming_the_chunk() {
    // A damage done to chunk-0-0.bin (4 items), and what the error says;
    // `true`: the index entry is made to match the damaged file's length.
    type FooterDamage = (&'static str, fn(&mut Vec<u8>), bool, &'static str);
    let cases: [FooterDamage; 9] = [
        ("text", |b| b.truncate(b.len() - 5), false, "index says"),
        ("text", |b| b.truncate(b.len() - 5), true, "no Arrow footer"),
        // The IPC length past the start of the file.
        (
            "text",
            |b| {
                let at = b.len() - 12;
                b[at..at + 4].copy_from_slice(&0xffff_ff00u32.to_le_bytes());
            },
            false,
            "do not fit",
        ),
        // The first message's metadata claiming 2 GiB, then 16 MiB.
        (
            "text",
            |b| b[36..40].copy_from_slice(&0x7fff_ffffu32.to_le_bytes()),
            false,
            "over the limit",
        ),
        (
            "text",
            |b| b[36..40].copy_from_slice(&(16u32 << 20).to_le_bytes()),
            false,
            "ends inside a message",
        ),
        // The schema's flatbuffer overwritten.
        (
            "text",
            |b| b[40..72].fill(0xee),
            false,
            "Arrow footer, byte 32",
        ),
        // An IPC-compressed buffer declaring a terabyte, then one byte more
        // than its frame holds.
        (
            "text-zstd",
            |b| {
                let at = first_zstd_prefix(b);
                b[at..at + 8].copy_from_slice(&(1i64 << 40).to_le_bytes());
            },
            false,
            "over the limit",
        ),
        (
            "text-zstd",
            |b| {
                let at = first_zstd_prefix(b);
                let size = i64::from_le_bytes(b[at..at + 8].try_into().unwrap());
                b[at..at + 8].copy_from_slice(&(size + 1).to_le_bytes());
            },
            false,
            "Arrow footer, byte",
        ),
        // Nothing after the IPC file's end-of-stream marker but its footer.
        (
            "text",
            |b| {
                let ipc = footer_ipc(b).to_vec();
                let mut longer = ipc.clone();
                longer.truncate(ipc.len() - 10);
                longer.extend([0; 8]);
                longer.extend(&ipc[ipc.len() - 10..]);
                *b = footer_chunk(4, &longer);
            },
            true,
            "footer does not end it",
        ),
    ];
    for (name, edit, matched, expected) in cases {
        let (_t, dir) = copy(name);
        damage(&dir, "chunk-0-0.bin", edit);
        if matched {
            match_entry(&dir, 0, 4);
        }
        let error = text_error(&dir);
        assert!(
            error.contains("chunk-0-0.bin") && error.contains(expected),
            "{name}: {expected}: {error}"
        );
    }
}

#[test]
fn a_mapped_footer_chunk_shorter_than_its_declared_lengths_is_refused_naming_it() {
    // The chunk is mapped, not read: every length it or its index entry
    // declares is checked against the mapping's before a byte past it is
    // touched. `true`: the index entry is made to match the cut file.
    type Cut = (fn(&mut Vec<u8>), bool, &'static str);
    let cases: [Cut; 5] = [
        // Cut in half, the index still giving the whole length.
        (|b| b.truncate(b.len() / 2), false, "but the index says"),
        // Empty (nothing to map), as the index says and not.
        (|b| b.clear(), false, "0 bytes, but the index says"),
        (|b| b.clear(), true, "no Arrow footer"),
        // Its end kept, the IPC data before it cut: the footer's length runs
        // past the file's start.
        (
            |b| {
                let tail = b[b.len() - 12..].to_vec();
                b.truncate(40);
                b.extend(tail);
            },
            true,
            "do not fit before it",
        ),
        // A header counting more items than the file has room for offsets.
        (
            |b| b[..4].copy_from_slice(&0x4000_0000u32.to_le_bytes()),
            false,
            "offsets do not fit before the Arrow footer",
        ),
    ];
    for (cut, matched, expected) in cases {
        let (_t, dir) = copy("text");
        damage(&dir, "chunk-0-0.bin", cut);
        if matched {
            match_entry(&dir, 0, 4);
        }
        let error = text_error(&dir);
        assert!(
            error.contains("chunk-0-0.bin") && error.contains(expected),
            "{expected}: {error}"
        );
    }
}

#[test]
fn an_arrow_footer_must_hold_the_items_its_header_and_entry_count() {
    let ipc = footer_ipc(&fs::read(fixture("text/chunk-0-0.bin")).unwrap()).to_vec();
    for (items, expected) in [
        (5, "it holds 4 rows, but the header counts 5 items"),
        (
            3,
            "a batch of 4 rows after 0 rows, but the header counts 3 items",
        ),
    ] {
        let (_t, dir) = copy("text");
        fs::write(dir.join("chunk-0-0.bin"), footer_chunk(items, &ipc)).unwrap();
        match_entry(&dir, 0, items);
        let error = text_error(&dir);
        assert!(
            error.contains("chunk-0-0.bin") && error.contains(expected),
            "{items}: {error}"
        );
    }
    // The header's count against the index entry's.
    let (_t, dir) = copy("text-zstd");
    edit_index(&dir, |i| i["chunks"][1]["chunk_size"] = 3.into());
    let error = text_error(&dir);
    assert!(
        error.contains("chunk-0-1.bin") && error.contains("entry says 3"),
        "{error}"
    );
    // Offsets that do not lead to the footer (a body cut out of them).
    let (_t, dir) = copy("text");
    damage(&dir, "chunk-0-0.bin", |b| {
        b[20..24].copy_from_slice(&23u32.to_le_bytes())
    });
    let error = text_error(&dir);
    assert!(
        error.contains("chunk-0-0.bin") && error.contains("offsets"),
        "{error}"
    );
}

#[test]
fn an_arrow_footer_is_read_only_where_the_index_says_rows_are_kept_so() {
    // Without "types", the index describes pytree leaves: the footer is
    // refused, not read as what it is not.
    let (_t, dir) = copy("text");
    edit_index(&dir, |i| i["config"]["types"] = Value::Null);
    let error = text_error(&dir);
    assert!(
        error.contains("chunk-0-0.bin") && error.contains("Arrow IPC footer"),
        "{error}"
    );
    let (_t, dir) = copy("text-zstd");
    edit_index(&dir, |i| i["config"]["types"] = Value::Null);
    let error = text_error(&dir);
    assert!(
        error.contains("index.json") && error.contains("ipc_compression"),
        "{error}"
    );
    // A key the footer has and "types" does not name.
    let (_t, dir) = copy("text");
    edit_index(&dir, |i| {
        i["config"]["types"]
            .as_object_mut()
            .unwrap()
            .remove("extra");
    });
    let error = text_error(&dir);
    assert!(
        error.contains("chunk-0-0.bin") && error.contains("\"extra\""),
        "{error}"
    );
}

#[test]
fn an_arrow_ipc_stream_footer_reads_as_the_file_one() {
    // Older LitData writers kept the rows as an IPC stream, not a file.
    use arrow_ipc::reader::FileReader;
    use arrow_ipc::writer::StreamWriter;
    let (_t, dir) = copy("text");
    for i in 0..3 {
        let file = format!("chunk-0-{i}.bin");
        let chunk = fs::read(dir.join(&file)).unwrap();
        let items = u32::from_le_bytes(chunk[..4].try_into().unwrap());
        let reader =
            FileReader::try_new(std::io::Cursor::new(footer_ipc(&chunk).to_vec()), None).unwrap();
        let mut stream = Vec::new();
        let mut writer = StreamWriter::try_new(&mut stream, &reader.schema()).unwrap();
        for batch in reader {
            writer.write(&batch.unwrap()).unwrap();
        }
        writer.finish().unwrap();
        drop(writer);
        fs::write(dir.join(&file), footer_chunk(items, &stream)).unwrap();
        match_entry(&dir, i, items);
    }
    let read_all =
        |dir: &Path| read(dir, &options(Some("text"), Some("id"), FieldSelection::All)).unwrap();
    let (streamed, filed) = (read_all(&dir), read_all(&fixture("text")));
    assert_eq!(streamed.len(), filed.len());
    for (a, b) in streamed.iter().zip(&filed) {
        assert_eq!((&a.key, &a.value), (&b.key, &b.value));
        for leaf in &TEXT_LEAVES[2..] {
            let ((x, i), (y, j)) = (field(a, leaf), field(b, leaf));
            assert_eq!(arrow_json(x, i), arrow_json(y, j), "{leaf}");
        }
    }
}

#[test]
fn randomly_damaged_arrow_footers_never_panic_and_errors_name_the_chunk() {
    // A fixed xorshift: the same damages every run. Each flips, zeroes or
    // cuts bytes of the first chunk (its entry made to match its length);
    // what still reads is fine (IPC has no checksums), what fails must
    // name the chunk.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % bound as u64) as usize
    };
    let mut failed = 0;
    for name in ["text", "text-zstd"] {
        let original = fs::read(fixture(name).join("chunk-0-0.bin")).unwrap();
        for _ in 0..300 {
            let (_t, dir) = copy(name);
            let mut bytes = original.clone();
            for _ in 0..1 + next(4) {
                let at = next(bytes.len());
                match next(8) {
                    0..=3 => bytes[at] ^= 1 << next(8),
                    4..=6 => bytes[at] = [0, 0xff, 0x7f][next(3)],
                    _ => bytes.truncate(at.max(1)),
                }
            }
            fs::write(dir.join("chunk-0-0.bin"), &bytes).unwrap();
            match_entry(&dir, 0, 4);
            let result = LitdataSource::open(
                &[dir.to_owned()],
                &options(Some("text"), Some("id"), FieldSelection::All),
            )
            .and_then(|source| source.collect::<Result<Vec<_>, _>>());
            if let Err(error) = result {
                failed += 1;
                let error = error.to_string();
                assert!(error.contains("chunk-0-0.bin"), "{error}");
            }
        }
    }
    assert!(failed > 200, "{failed} of 600 damages refused");
}
