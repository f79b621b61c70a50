//! The one extend with fields (issue 21): the duplicate policy in one place, and
//! nothing committed that cannot be read back (issue 20): a file of fields that
//! a faulty disk tore is found before the manifest moves, the error names it,
//! and the dataset reads as before.

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

use bcd::{CreateOptions, Dataset, LeftOut};
use bcd_fields::{FieldValue, Fields};
use bcd_fields::{FIELDS_SUFFIX, STATS_SUFFIX};
use bcd_pipeline::fields::{DatasetFields, FieldsIoError};
use bcd_pipeline::{FieldsExtend, NewRecord, Numbered, OnDuplicate};
use bcd_test_support::TornWrites;

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

/// An extend through a disk that tears the files `torn` picks fails naming
/// `file`, and leaves the dataset as it was.
fn a_torn_file_is_never_committed(torn: fn(&str) -> bool, file: &str, records: bool) {
    let dir = tempfile::tempdir().unwrap();
    let path = keyed_dataset(dir.path());
    let manifest = std::fs::read(path.join("manifest.json")).unwrap();

    let commit_file = std::fs::read(path.join("commit.000001.json")).unwrap();
    let storage = Arc::new(TornWrites { torn });
    let mut faulty = Dataset::open_with_storage(&path, storage).unwrap();
    let error = match records {
        true => extend(&mut faulty, "b", 0..5, OnDuplicate::Error).unwrap_err(),
        false => {
            // A commit of metadata alone replaces the commit file.
            let mut extend = FieldsExtend::begin(&mut faulty, OnDuplicate::Error).unwrap();
            let mut metadata = serde_json::Map::new();
            metadata.insert("description".into(), "cats".into());
            extend.add_metadata(metadata).unwrap();
            extend.commit().unwrap_err()
        }
    };

    let message = bcd_pipeline::error_chain(&error);
    assert!(message.contains(file), "{message}");
    assert!(message.contains("nothing was committed"), "{message}");
    assert_eq!(
        std::fs::read(path.join("manifest.json")).unwrap(),
        manifest,
        "the manifest moved"
    );
    let reopened = Dataset::open(&path).unwrap();
    assert_eq!(reopened.len(), 3);
    assert_eq!(labels(&reopened), vec![Some(0), Some(1), Some(2)]);
    assert_eq!(
        std::fs::read(path.join("commit.000001.json")).unwrap(),
        commit_file,
        "the commit file changed"
    );
    let metadata = DatasetFields::load(&reopened).unwrap().metadata;
    assert!(!metadata.contains_key("description"), "{metadata:?}");
    for name in [
        format!("000001.{FIELDS_SUFFIX}"),
        format!("000001.{STATS_SUFFIX}"),
    ] {
        assert!(!path.join(&name).exists(), "{name} left behind");
    }
}

#[test]
fn a_fields_file_that_does_not_read_back_is_never_committed() {
    let torn = |name: &str| name.ends_with(".fields.arrow");
    a_torn_file_is_never_committed(
        torn,
        "000001.fields.arrow: written, but it does not read back",
        true,
    );
}

#[test]
fn a_statistics_file_that_does_not_read_back_is_never_committed() {
    let torn = |name: &str| name.ends_with(".stats.json");
    a_torn_file_is_never_committed(
        torn,
        "000001.stats.json: written, but it does not read back",
        true,
    );
}

#[test]
fn a_commit_file_that_does_not_read_back_is_never_committed() {
    // The commit file holds the schema and the metadata.
    let torn = |name: &str| name.starts_with("commit.");
    a_torn_file_is_never_committed(torn, "commit.000002.json: the file holds other bytes", true);
}

#[test]
fn a_commit_of_metadata_alone_that_does_not_read_back_is_never_committed() {
    // Written to a temporary file, renamed over the commit file once read back.
    let torn = |name: &str| name.contains("commit") && name.ends_with(".tmp");
    a_torn_file_is_never_committed(torn, "the file holds other bytes", false);
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
    assert_eq!(
        skipping
            .push_stored(b"a0", &stored, &labelled(7), &origin)
            .unwrap(),
        Some(LeftOut::Key)
    );
    assert_eq!(
        skipping
            .push_stored(b"c0", &stored, &labelled(7), &origin)
            .unwrap(),
        None
    );
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
