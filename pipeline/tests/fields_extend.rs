//! The one extend with fields (issue 21): the duplicate policy in one place, and
//! nothing committed that cannot be read back (issue 20): a file of fields that
//! a faulty disk tore is found before the manifest moves, the error names it,
//! and the dataset reads as before.

use std::borrow::Cow;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use bcd::storage::{FileSystem, Storage, StorageFile};
use bcd::{CreateOptions, Dataset};
use bcd_fields::{FieldValue, Fields};
use bcd_pipeline::fields::{DatasetFields, FieldsIoError};
use bcd_pipeline::{FieldsExtend, NewRecord, Numbered, OnDuplicate};

/// A disk that silently loses the second half of every write to files whose
/// name ends with `suffix`, and reports success.
#[derive(Debug)]
struct TornWrites {
    suffix: &'static str,
}

struct TornFile(Box<dyn StorageFile>);

impl Write for TornFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write_all(&buf[..buf.len() / 2])?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl StorageFile for TornFile {
    fn sync(&mut self) -> io::Result<()> {
        self.0.sync()
    }
}

impl Storage for TornWrites {
    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let file = FileSystem.create(path)?;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        Ok(match name.ends_with(self.suffix) {
            true => Box::new(TornFile(file)),
            false => file,
        })
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        FileSystem.sync_dir(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        FileSystem.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        FileSystem.remove(path)
    }
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        FileSystem.hard_link(from, to)
    }
    fn copy(&self, from: &Path, to: &Path) -> io::Result<()> {
        FileSystem.copy(from, to)
    }
    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        FileSystem.remove_dir(dir)
    }
}

fn labelled(label: i64) -> Fields {
    let mut fields = Fields::new();
    fields.push(Arc::from("label"), FieldValue::Int64(label));
    fields
}

/// Extends `dataset` with keys `{prefix}{i}` for `i` in `range`, labelled `i`.
fn extend(
    dataset: &mut Dataset,
    prefix: &str,
    range: std::ops::Range<u64>,
    on_duplicate: OnDuplicate,
) -> Result<bcd_pipeline::Extended, FieldsIoError> {
    let keys: Vec<Vec<u8>> = range
        .clone()
        .map(|i| format!("{prefix}{i}").into_bytes())
        .collect();
    let fields: Vec<Fields> = range.clone().map(|i| labelled(i as i64)).collect();
    let origins: Vec<Numbered> = range
        .map(|number| Numbered {
            what: "entry",
            number,
        })
        .collect();
    let records: Vec<NewRecord<'_>> = (0..keys.len())
        .map(|i| NewRecord {
            key: &keys[i],
            value: b"some value",
            fields: Cow::Borrowed(&fields[i]),
            origin: &origins[i],
        })
        .collect();
    let mut extend = FieldsExtend::begin(dataset, on_duplicate)?;
    extend.push_batch(&records)?;
    extend.commit()
}

fn labels(dataset: &Dataset) -> Vec<Option<i64>> {
    let state = DatasetFields::load(dataset).unwrap();
    let mut out = Vec::new();
    for shard in 0..dataset.shards() {
        for batch in state.shard_batches(dataset, shard, None).unwrap() {
            let column = batch.column_by_name("label").unwrap();
            let ints = column
                .as_any()
                .downcast_ref::<arrow_array::Int64Array>()
                .unwrap();
            out.extend(ints.iter());
        }
    }
    out
}

fn keyed_dataset(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("ds");
    let options = CreateOptions {
        keyed: true,
        ..CreateOptions::default()
    };
    let mut dataset = Dataset::create(&path, options).unwrap();
    extend(&mut dataset, "a", 0..3, OnDuplicate::Error).unwrap();
    path
}

fn a_torn_file_is_never_committed(suffix: &'static str) {
    let dir = tempfile::tempdir().unwrap();
    let path = keyed_dataset(dir.path());
    let manifest = std::fs::read(path.join("manifest.json")).unwrap();

    let storage = Arc::new(TornWrites { suffix });
    let mut faulty = Dataset::open_with_storage(&path, storage).unwrap();
    let error = extend(&mut faulty, "b", 0..5, OnDuplicate::Error).unwrap_err();

    let message = bcd_pipeline::error_chain(&error);
    assert!(
        matches!(&error, FieldsIoError::ReadBack { file, .. } if file.ends_with(format!("000001.{suffix}"))),
        "{message}"
    );
    assert!(message.contains("nothing was committed"), "{message}");
    assert_eq!(
        std::fs::read(path.join("manifest.json")).unwrap(),
        manifest,
        "the manifest moved"
    );
    let reopened = Dataset::open(&path).unwrap();
    assert_eq!(reopened.len(), 3);
    assert_eq!(labels(&reopened), vec![Some(0), Some(1), Some(2)]);
    assert!(!path.join(format!("000001.{suffix}")).exists());
}

#[test]
fn a_fields_file_that_does_not_read_back_is_never_committed() {
    a_torn_file_is_never_committed("fields.arrow");
}

#[test]
fn a_statistics_file_that_does_not_read_back_is_never_committed() {
    a_torn_file_is_never_committed("stats.json");
}

#[test]
fn a_duplicate_is_refused_naming_where_it_came_from_and_nothing_is_committed() {
    let dir = tempfile::tempdir().unwrap();
    let path = keyed_dataset(dir.path());
    let mut dataset = Dataset::open(&path).unwrap();
    // a1 is committed: entry 1 of the new run repeats it.
    let error = extend(&mut dataset, "a", 1..4, OnDuplicate::Error).unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with("entry 1: duplicate key \"a1\""),
        "{message}"
    );
    assert!(message.contains("nothing was committed"), "{message}");
    let reopened = Dataset::open(&path).unwrap();
    assert_eq!(reopened.len(), 3);
}

#[test]
fn with_skip_the_first_wins_and_the_fields_stay_with_their_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = keyed_dataset(dir.path());
    let mut dataset = Dataset::open(&path).unwrap();
    let added = extend(&mut dataset, "a", 1..5, OnDuplicate::Skip).unwrap();
    assert_eq!((added.records, added.skipped), (2, 2));
    let reopened = Dataset::open(&path).unwrap();
    assert_eq!(reopened.key_at(3).unwrap(), b"a3");
    assert_eq!(
        labels(&reopened),
        vec![Some(0), Some(1), Some(2), Some(3), Some(4)]
    );
    let stats = bcd_pipeline::fields::stats_report(&reopened, false).unwrap();
    assert_eq!(stats["records"], 5);
    assert_eq!(stats["fields"]["label"]["count"], 5);
}

#[test]
fn a_stored_copy_follows_the_same_duplicate_policy() {
    let dir = tempfile::tempdir().unwrap();
    let path = keyed_dataset(dir.path());
    let mut dataset = Dataset::open(&path).unwrap();
    let stored = Dataset::open(&path).unwrap().stored_at(0).unwrap().to_vec();
    let origin = "record 0 of elsewhere";

    let mut refusing = FieldsExtend::begin(&mut dataset, OnDuplicate::Error).unwrap();
    let error = refusing
        .push_stored(b"a0", &stored, &labelled(7), &origin)
        .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("record 0 of elsewhere: duplicate key \"a0\""),
        "{error}"
    );
    drop(refusing);

    let mut skipping = FieldsExtend::begin(&mut dataset, OnDuplicate::Skip).unwrap();
    assert!(!skipping
        .push_stored(b"a0", &stored, &labelled(7), &origin)
        .unwrap());
    assert!(skipping
        .push_stored(b"c0", &stored, &labelled(7), &origin)
        .unwrap());
    let added = skipping.commit().unwrap();
    assert_eq!((added.records, added.skipped), (1, 1));
    let reopened = Dataset::open(&path).unwrap();
    assert_eq!(&reopened.get(b"c0").unwrap().unwrap()[..], b"some value");
    assert_eq!(labels(&reopened), vec![Some(0), Some(1), Some(2), Some(7)]);
}

#[test]
fn a_copy_that_lists_a_record_twice_names_it_and_leaves_no_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let path = keyed_dataset(dir.path());
    let source = Dataset::open(&path).unwrap();
    let into = dir.path().join("copy");
    let options = bcd_pipeline::CopyOptions {
        records: Some(vec![1, 2, 1]),
        ..Default::default()
    };
    let error = bcd_pipeline::copy_into(&source, &into, &options).unwrap_err();
    let message = error.to_string();
    let expected = format!("record 1 of {}: duplicate key \"a1\"", path.display());
    assert!(message.starts_with(&expected), "{message}");
    assert!(!into.exists());
}
