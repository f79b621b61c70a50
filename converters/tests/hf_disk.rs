//! Hugging Face `save_to_disk` directories (the committed fixtures written by
//! `datasets`, `fixtures/hf_disk/`), against what `datasets.load_from_disk` reads
//! and against the same table as a Parquet file; and the directory's files when
//! they are truncated, corrupt or claim more than they hold.

mod fields_common;

use std::fs;
use std::path::{Path, PathBuf};

use bcd_converters::hf_disk_source::{HfDiskOptions, HfDiskSource, MAX_MESSAGE_METADATA};
use bcd_converters::parquet_source::ParquetSource;
use bcd_converters::TableOptions;
use bcd_converters::{FieldSelection, Record, Source, SourceError};
use fields_common::{fields_json, python, read_all, PRELUDE};
use serde_json::{json, Value};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/hf_disk")
        .join(name)
}

fn options(value: &str, key: Option<&str>, split: Option<&str>) -> HfDiskOptions {
    HfDiskOptions {
        columns: TableOptions {
            value_column: value.into(),
            key_column: key.map(Into::into),
            skip_nulls: false,
            fields: FieldSelection::All,
        },
        split: split.map(Into::into),
    }
}

/// The rows as (key, value hex, fields as JSON).
fn rows(records: &[Record]) -> Vec<Value> {
    records
        .iter()
        .map(|r| {
            json!({
                "key": String::from_utf8_lossy(&r.key),
                "value": r.value.iter().map(|b| format!("{b:02x}")).collect::<String>(),
                "fields": fields_json(&r.fields).1,
            })
        })
        .collect()
}

/// What `datasets.load_from_disk` reads of the photos fixture (images not decoded).
const LOAD_PHOTOS: &str = r#"
import datasets
ds = datasets.load_from_disk(sys.argv[2]).cast_column("image", datasets.Image(decode=False))
print(json.dumps({
    "rows": [{"key": str(r["id"]), "value": r["image"]["bytes"].hex(),
              "fields": {"image.path": r["image"]["path"], "label": r["label"], "caption": r["caption"]}}
             for r in ds],
    "names": ds.features["label"].names,
}))
"#;

fn python_with(dir: &Path, script: &str, arg: &Path) -> Value {
    // `python` passes the directory as argv[1]; the fixture follows as argv[2].
    let script = format!(
        "import sys\nsys.argv.append({:?})\n{PRELUDE}{script}",
        arg.display().to_string()
    );
    python(dir, &script)
}

#[test]
fn a_dataset_gives_the_rows_labels_and_image_bytes_that_load_from_disk_gives() {
    let tmp = tempfile::tempdir().unwrap();
    let expected = python_with(tmp.path(), LOAD_PHOTOS, &fixture("photos"));
    let source = HfDiskSource::new(&fixture("photos"), options("image", Some("id"), None)).unwrap();
    let metadata_before = source.metadata();
    let records = read_all(source).unwrap();
    assert_eq!(Value::Array(rows(&records)), expected["rows"]);
    // The labels are the ClassLabel's ints; its names are the dataset's.
    assert_eq!(metadata_before["class_names"], expected["names"]);
    assert_eq!(
        metadata_before["class_labels"],
        json!({"label": expected["names"]})
    );
    assert_eq!(
        metadata_before["huggingface"]["info"]["features"]["image"],
        json!({"_type": "Image"})
    );
    // Rows name the data file they are in, in state.json's order.
    let origins: Vec<String> = records.iter().map(|r| r.origin.to_string()).collect();
    assert!(
        origins[0].ends_with("data-00000-of-00002.arrow: row 0"),
        "{origins:?}"
    );
    assert!(
        origins[3].ends_with("data-00001-of-00002.arrow: row 1"),
        "{origins:?}"
    );
}

#[test]
fn a_saved_table_gives_what_the_same_table_in_parquet_gives() {
    let tmp = tempfile::tempdir().unwrap();
    let parquet = tmp.path().join("photos.parquet");
    python_with(
        tmp.path(),
        &format!(
            "import datasets\ndatasets.load_from_disk(sys.argv[2]).to_parquet({:?})\nprint('{{}}')",
            parquet.display().to_string()
        ),
        &fixture("photos"),
    );
    let columns = options("image", Some("id"), None).columns;
    let from_parquet = ParquetSource::new(std::slice::from_ref(&parquet), columns).unwrap();
    let parquet_metadata = from_parquet.metadata();
    let parquet_rows = rows(&read_all(from_parquet).unwrap());
    let from_disk =
        HfDiskSource::new(&fixture("photos"), options("image", Some("id"), None)).unwrap();
    let disk_metadata = from_disk.metadata();
    assert_eq!(rows(&read_all(from_disk).unwrap()), parquet_rows);
    for key in ["class_labels", "class_names", "value", "huggingface"] {
        assert_eq!(disk_metadata[key], parquet_metadata[key], "{key}");
    }
}

#[test]
fn a_split_of_a_dataset_dict_is_chosen_and_a_missing_one_names_the_splits() {
    let train = HfDiskSource::new(
        &fixture("splits"),
        options("text", Some("id"), Some("train")),
    );
    let records = read_all(train.unwrap()).unwrap();
    let keys: Vec<&[u8]> = records.iter().map(|r| &r.key[..]).collect();
    assert_eq!(keys, [&b"1"[..], b"2", b"3"]);
    assert_eq!(records[0].value, b"good");

    for (split, wanted) in [
        (
            Some("validation"),
            "no split \"validation\"; the splits are [\"train\", \"test\"]",
        ),
        (
            None,
            "a DatasetDict of splits [\"train\", \"test\"]: choose one with `split`",
        ),
    ] {
        let error = HfDiskSource::new(&fixture("splits"), options("text", None, split))
            .err()
            .unwrap();
        assert!(matches!(error, SourceError::Usage(_)), "{error:?}");
        assert!(error.to_string().contains(wanted), "{error}");
    }
    let error = HfDiskSource::new(&fixture("photos"), options("image", None, Some("train")));
    let error = error.err().unwrap().to_string();
    assert!(error.contains("a single Dataset"), "{error}");
}

/// A copy of the photos fixture that `change` may break.
fn photos_copy(change: impl FnOnce(&Path)) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for entry in fs::read_dir(fixture("photos")).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), tmp.path().join(entry.file_name())).unwrap();
    }
    change(tmp.path());
    tmp
}

fn first_error(dir: &Path) -> String {
    match HfDiskSource::new(dir, options("image", Some("id"), None)) {
        Err(error) => error.to_string(),
        Ok(source) => read_all(source).expect_err("an error").to_string(),
    }
}

#[test]
fn a_truncated_data_file_is_an_error_naming_it_at_every_length() {
    let data = fs::read(fixture("photos/data-00001-of-00002.arrow")).unwrap();
    // Every cut, at a message boundary too: `datasets` ends every stream with its
    // end-of-stream marker, so a stream without it is truncated.
    for cut in 0..data.len() {
        let tmp = photos_copy(|dir| {
            fs::write(dir.join("data-00001-of-00002.arrow"), &data[..cut]).unwrap()
        });
        let error = first_error(tmp.path());
        assert!(
            error.contains("data-00001-of-00002.arrow"),
            "cut {cut}: {error}"
        );
    }
}

#[test]
fn a_corrupt_state_json_is_an_error_naming_it() {
    for (state, wanted) in [
        ("{\"_data_files\": [", "state.json: line 1"),
        (
            "{\"_data_files\": 3}",
            "state.json: \"_data_files\": no list of data files",
        ),
        (
            "{\"_data_files\": [{\"filename\": \"../photos.arrow\"}]}",
            "does not name a file of the directory",
        ),
        (
            "{\"_data_files\": [{\"filename\": \"/etc/passwd\"}]}",
            "does not name a file of the directory",
        ),
        (
            "{\"_data_files\": [{\"filename\": \"data-00009-of-00009.arrow\"}]}",
            "data-00009-of-00009.arrow",
        ),
    ] {
        let tmp = photos_copy(|dir| fs::write(dir.join("state.json"), state).unwrap());
        let error = first_error(tmp.path());
        assert!(error.contains(wanted), "{state}: {error}");
    }
}

#[test]
fn a_message_claiming_more_than_the_limit_or_the_file_is_refused_before_it_is_read() {
    let mut huge = vec![0xff; 4];
    huge.extend((MAX_MESSAGE_METADATA + 1).to_le_bytes());
    let tmp = photos_copy(|dir| fs::write(dir.join("data-00000-of-00002.arrow"), &huge).unwrap());
    let error = first_error(tmp.path());
    assert!(error.contains("data-00000-of-00002.arrow: message at byte 0: the message metadata of 67108865 bytes is over the limit"), "{error}");

    let mut claims = vec![0xff; 4];
    claims.extend(1_000_000u32.to_le_bytes());
    claims.extend([0; 64]);
    let tmp = photos_copy(|dir| fs::write(dir.join("data-00000-of-00002.arrow"), &claims).unwrap());
    let error = first_error(tmp.path());
    assert!(
        error.contains("declares 1000000 more bytes, but the file holds only 64 more"),
        "{error}"
    );
}

#[cfg(unix)]
#[test]
fn a_fifo_in_place_of_a_data_file_is_refused_without_blocking() {
    let tmp = photos_copy(|dir| {
        let fifo = dir.join("data-00000-of-00002.arrow");
        fs::remove_file(&fifo).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
    });
    let error = first_error(tmp.path());
    assert!(error.contains("is a FIFO, not a regular file"), "{error}");
}

/// A `save_to_disk` directory of 50 rows of 64 KiB values with an int label, in
/// one record batch.
const BIG_VALUES: &str = r#"
import datasets
ds = datasets.Dataset.from_dict({"value": [bytes([i]) * 65536 for i in range(50)],
                                 "label": list(range(50))})
ds.save_to_disk(str(out / "big"))
print("{}")
"#;

#[test]
fn a_records_fields_do_not_hold_the_message_its_batch_was_read_from() {
    let tmp = tempfile::tempdir().unwrap();
    python(tmp.path(), &format!("{PRELUDE}{BIG_VALUES}"));
    let source = HfDiskSource::new(&tmp.path().join("big"), options("value", None, None)).unwrap();
    let records = read_all(source).unwrap();
    assert_eq!(records.len(), 50);
    for record in &records {
        let (_, value) = &record.fields.as_slice()[0];
        let bcd_converters::FieldValue::Arrow(array, _) = value else {
            panic!("{value:?}");
        };
        // The fields wait for their shard to be written; a label column sliced
        // from the 3 MiB message would keep it alive for each of them.
        assert!(
            array.get_array_memory_size() < 4096,
            "{}",
            array.get_array_memory_size()
        );
    }
}

/// A `save_to_disk` directory of one data file holding several record batches
/// (of 40 rows) whose bodies grow, then shrink, then grow again,
/// and what `load_from_disk` reads of it: each row's id, the sha1 of its value,
/// its label, and the number of batches in the file.
const MANY_BATCHES: &str = r#"
import hashlib
import datasets, pyarrow as pa
sizes = [1000] * 40 + [9000] * 40 + [10] * 40 + [5000] * 40 + [20000] * 13
values = [bytes([(i * 7 + j) % 251 for j in range(64)]) * (size // 64 + 1) for i, size in enumerate(sizes)]
ds = datasets.Dataset.from_dict({"id": [f"row-{i}" for i in range(len(values))], "value": values,
                                 "label": list(range(len(values)))})
datasets.config.DEFAULT_MAX_BATCH_SIZE = 40  # save_to_disk's batches (1,000 rows by default)
ds.save_to_disk(str(out / "batches"), num_shards=1)
data = next((out / "batches").glob("data-*.arrow"))
batches = sum(1 for _ in pa.ipc.open_stream(str(data)))
back = datasets.load_from_disk(str(out / "batches"))
print(json.dumps({"batches": batches,
                  "rows": [[r["id"], hashlib.sha1(r["value"]).hexdigest(), r["label"]] for r in back]}))
"#;

#[test]
fn the_batches_of_a_file_each_give_their_own_rows_when_their_memory_is_reused() {
    use sha1::{Digest, Sha1};
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let tmp = tempfile::tempdir().unwrap();
    let expected = python(tmp.path(), &format!("{PRELUDE}{MANY_BATCHES}"));
    // The body of each batch is read into the memory of the one before: more
    // than one batch, of several sizes, is what this test is about.
    assert!(expected["batches"].as_u64().unwrap() > 3, "{expected}");
    let source = HfDiskSource::new(
        &tmp.path().join("batches"),
        options("value", Some("id"), None),
    )
    .unwrap();
    let got: Vec<Value> = read_all(source)
        .unwrap()
        .iter()
        .map(|r| {
            let label = fields_json(&r.fields).1["label"].clone();
            json!([
                String::from_utf8_lossy(&r.key),
                hex(&Sha1::digest(&r.value)),
                label
            ])
        })
        .collect();
    assert_eq!(Value::Array(got), expected["rows"]);
}

/// Two saved datasets whose ClassLabel `label` names differ.
const TWO_VOCABULARIES: &str = r#"
import datasets
for name, names in (("a", ["cat", "dog"]), ("b", ["dog", "cat"])):
    features = datasets.Features({"text": datasets.Value("string"),
                                  "label": datasets.ClassLabel(names=names)})
    datasets.Dataset.from_dict({"text": ["x"], "label": [0]}, features=features).save_to_disk(str(out / name))
print("{}")
"#;

#[test]
fn directories_read_together_must_agree_on_their_class_label_names() {
    let tmp = tempfile::tempdir().unwrap();
    python(tmp.path(), &format!("{PRELUDE}{TWO_VOCABULARIES}"));
    let dirs = [tmp.path().join("a"), tmp.path().join("b")];
    let source = HfDiskSource::from_dirs(&dirs, options("text", None, None)).unwrap();
    let error = read_all(source).expect_err("names differ").to_string();
    assert!(
        error.contains("the ClassLabel names of column \"label\", [\"dog\",\"cat\"], differ from [\"cat\",\"dog\"]"),
        "{error}"
    );
    assert!(error.contains("/b/data-00000-of-00001.arrow"), "{error}");
}
