//! A shard's fields written into its file as its batches are built (issue
//! 27): the fingerprint, known at the shard's end, goes in the file's footer.
//! The files, statistics and commit files are those written when every
//! shard's batches are held until its end: across shard splits, duplicates
//! left out within a batch (by key and by content), nulls and fields some
//! records lack; and when a later batch changes the columns (a wider type, a
//! new column, a column absent from a whole batch), the batches written are
//! read back and the shard's file is written anew. A failure at any storage
//! operation leaves the dataset as it was.

mod common;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int32Array};
use bcd::{CreateOptions, Dataset, Dedup, ExtendOptions};
use bcd_fields::{FieldValue, Fields, FIELDS_SUFFIX};
use bcd_pipeline::{
    FieldsBuffering, FieldsExtend, FieldsExtendOptions, NewRecord, Numbered, OnDuplicate,
};
use bcd_test_support::sim_storage::{Config, OpKind, Policy, SimStorage};
use bcd_test_support::snapshot;
use common::all_fields;

/// Batches of 7 rows written into the shard's file as they are built.
const AS_BUILT: FieldsBuffering = FieldsBuffering {
    batch_rows: 7,
    batch_bytes: 1 << 20,
    shard_memory: 0,
    write_as_built: true,
};
/// The same batches held until the shard's end (in the scratch file).
const HELD: FieldsBuffering = FieldsBuffering {
    write_as_built: false,
    ..AS_BUILT
};
/// One batch per shard, held in memory (as every shard was written before
/// issue 27).
const WHOLE: FieldsBuffering = FieldsBuffering {
    batch_rows: usize::MAX,
    batch_bytes: usize::MAX,
    shard_memory: usize::MAX,
    write_as_built: false,
};

/// The fields of the benchmark's records: a string id, an integer (null in
/// every seventh record) and a float that every fourth record lacks.
fn simple_fields(i: u64) -> Fields {
    let mut f = Fields::new();
    f.push("id", FieldValue::String(format!("id{i:012}")));
    let n = match i % 7 {
        3 => FieldValue::Null,
        _ => FieldValue::Int64(i as i64 * 7),
    };
    f.push("n", n);
    if i % 4 != 1 {
        f.push("x", FieldValue::Float64(i as f64 / 2.0));
    }
    f
}

/// Record `i`: its key (`key{i / 3 * 3}` when `repeat`: two of every three
/// keys repeat the one before, left out as duplicates within the batches),
/// value (every third one the same when `repeat`, for content dedup) and
/// fields.
struct Records {
    keys: Vec<Vec<u8>>,
    values: Vec<Vec<u8>>,
    fields: Vec<Fields>,
    origins: Vec<Numbered>,
}

impl Records {
    fn new(range: std::ops::Range<u64>, repeat: bool, fields: impl Fn(u64) -> Fields) -> Records {
        let key = |i: u64| match repeat && i % 3 == 2 {
            true => i - 1,
            false => i,
        };
        Records {
            keys: range
                .clone()
                .map(|i| format!("key{:05}", key(i)).into_bytes())
                .collect(),
            values: range
                .clone()
                .map(|i| match repeat && i % 5 == 4 {
                    true => b"the same value".to_vec(),
                    false => format!("value {i} ").repeat(3).into_bytes(),
                })
                .collect(),
            fields: range.clone().map(fields).collect(),
            origins: range
                .map(|number| Numbered {
                    what: "entry",
                    number,
                })
                .collect(),
        }
    }
}

/// Extends `dataset` with `records` in pushes of 11 (so shards and batches
/// end within pushes); an error is returned as it comes.
fn extend_with(
    dataset: &mut Dataset,
    records: &Records,
    buffering: FieldsBuffering,
    dedup: Dedup,
) -> Result<(), bcd_pipeline::fields::FieldsIoError> {
    let options = FieldsExtendOptions {
        buffering,
        store: ExtendOptions {
            dedup,
            ..ExtendOptions::default()
        },
    };
    let mut extend = FieldsExtend::begin_with(dataset, OnDuplicate::Skip, options)?;
    for start in (0..records.keys.len()).step_by(11) {
        let end = (start + 11).min(records.keys.len());
        let batch: Vec<NewRecord<'_>> = (start..end)
            .map(|i| NewRecord {
                key: &records.keys[i],
                value: &records.values[i],
                fields: Cow::Borrowed(&records.fields[i]),
                origin: &records.origins[i],
            })
            .collect();
        extend.push_batch(&batch)?;
    }
    extend.commit()?;
    Ok(())
}

fn create(path: &Path, keyed: bool) {
    create_sized(path, keyed, 1200);
}

fn create_sized(path: &Path, keyed: bool, max_shard_size: u64) {
    let options = CreateOptions {
        keyed,
        max_shard_size,
        ..CreateOptions::default()
    };
    Dataset::create(path, options).unwrap();
}

/// The files of the dataset but its fields files and manifest (whose bytes
/// differ as described), by name.
fn other_files(path: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = snapshot(path);
    files.retain(|name, _| !name.ends_with(FIELDS_SUFFIX) && !name.starts_with(".bcd"));
    files
}

/// How many times each shard's fields file holds the `bcd.shard` metadata
/// key: once when written as built (the footer's schema), twice when written
/// at the shard's end (the leading schema message too).
fn fingerprint_copies(path: &Path) -> Vec<usize> {
    let dataset = Dataset::open(path).unwrap();
    (0..dataset.shards())
        .map(|shard| {
            let bytes = std::fs::read(dataset.sidecar_path(shard, FIELDS_SUFFIX)).unwrap();
            bytes.windows(9).filter(|w| w == b"bcd.shard").count()
        })
        .collect()
}

/// Writes `records` in datasets with each buffering, and checks they hold the
/// same fields, statistics and commit files; returns the as-built dataset's
/// fingerprint copies per shard.
fn same_as_held(records: &Records, keyed: bool, dedup: Dedup) -> Vec<usize> {
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for (name, buffering) in [("built", AS_BUILT), ("held", HELD), ("whole", WHOLE)] {
        let path = dir.path().join(name);
        create(&path, keyed);
        let mut dataset = Dataset::open(&path).unwrap();
        extend_with(&mut dataset, records, buffering, dedup).unwrap();
        paths.push(path);
    }
    let shards = Dataset::open(&paths[0]).unwrap().shards();
    assert!(shards > 3, "{shards} shards");
    for other in &paths[1..] {
        assert_eq!(Dataset::open(other).unwrap().shards(), shards);
        assert_eq!(all_fields(&paths[0]), all_fields(other), "{other:?}");
        // Statistics, commit file, shards: byte for byte.
        assert_eq!(other_files(&paths[0]), other_files(other), "{other:?}");
    }
    assert!(fingerprint_copies(&paths[1]).iter().all(|&n| n == 2));
    fingerprint_copies(&paths[0])
}

#[test]
fn fields_written_as_built_are_those_held_to_the_shards_end() {
    let records = Records::new(0..200, false, simple_fields);
    let copies = same_as_held(&records, true, Dedup::Keys);
    // Every shard's file was written as its batches came.
    assert!(copies.iter().all(|&n| n == 1), "{copies:?}");
}

#[test]
fn duplicates_left_out_within_batches_are_left_out_of_the_fields_written_as_built() {
    let records = Records::new(0..240, true, simple_fields);
    // Keys repeated within pushes and batches.
    let copies = same_as_held(&records, true, Dedup::Keys);
    assert!(copies.iter().all(|&n| n == 1), "{copies:?}");
    // Values repeated, keyless, by content.
    let copies = same_as_held(&records, false, Dedup::Content);
    assert!(copies.iter().all(|&n| n == 1), "{copies:?}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    create(&path, true);
    extend_with(
        &mut Dataset::open(&path).unwrap(),
        &records,
        AS_BUILT,
        Dedup::Keys,
    )
    .unwrap();
    assert_eq!(Dataset::open(&path).unwrap().len(), 160);
}

/// A narrow integer column from an Arrow array.
fn narrow() -> ArrayRef {
    Arc::new(Int32Array::from((0..10).collect::<Vec<_>>()))
}

#[test]
fn a_batch_of_other_columns_has_the_shards_file_written_anew() {
    let narrow = narrow();
    // Records 0..30 of every 60: `n` an Int32 from an Arrow array, then Int64
    // (wider); `caption` from record 40 of every 60 on (a new column); `x`
    // only in records 0..20 of every 60 (absent from whole batches).
    let fields = move |i: u64| {
        let mut f = Fields::new();
        f.push("id", FieldValue::String(format!("id{i}")));
        let n = match i % 60 < 30 {
            true => FieldValue::Arrow(narrow.clone(), (i % 10) as usize),
            false => FieldValue::Int64(i as i64 * 1000),
        };
        f.push("n", n);
        if i % 60 >= 40 {
            f.push("caption", FieldValue::String(format!("record {i}")));
        }
        if i % 60 < 20 {
            f.push("x", FieldValue::Float64(i as f64));
        }
        f
    };
    let records = Records::new(0..240, false, fields);
    let copies = same_as_held(&records, true, Dedup::Keys);
    // Some shards' files were written anew at their end, some as built.
    assert!(copies.contains(&2), "{copies:?}");
    assert!(copies.contains(&1), "{copies:?}");
}

#[test]
fn a_failure_at_any_storage_operation_leaves_the_dataset_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    // About 13 records a shard.
    create_sized(&base, true, 400);
    // A 160 KB caption each: a batch of 7 rows passes the sidecar's buffer
    // of 1 MiB, so the fields file is written while its shard is.
    let fields = |i: u64| {
        let mut f = simple_fields(i);
        f.push(
            "caption",
            FieldValue::String(format!("{i:>16000}").repeat(10)),
        );
        f
    };
    let first = Records::new(0..10, false, fields);
    extend_with(
        &mut Dataset::open(&base).unwrap(),
        &first,
        AS_BUILT,
        Dedup::Keys,
    )
    .unwrap();
    let before = snapshot(&base);
    let second = Records::new(10..52, true, fields);

    // The reference: the second extend through the storage, nothing failing.
    let copy = |name: &str| {
        let path = dir.path().join(name);
        std::fs::create_dir(&path).unwrap();
        for (file, bytes) in &before {
            std::fs::write(path.join(file), bytes).unwrap();
        }
        path
    };
    let reference = copy("reference");
    let storage = SimStorage::new(&reference, Config::pass());
    extend_with(
        &mut storage.open(&reference),
        &second,
        AS_BUILT,
        Dedup::Keys,
    )
    .unwrap();
    let total = storage.ops().len();
    // The fields files were written in pieces while their shards were (a
    // write of a fields file between the creation of its shard's data file
    // and its fsync).
    let ops = storage.ops();
    let shards = Dataset::open(&reference).unwrap().shards();
    assert!(shards >= 3, "{shards} shards");
    let during = |shard: u64| {
        let named = |kind: OpKind, suffix: &str| {
            let name = format!("{shard:06}.{suffix}");
            ops.iter()
                .position(|op| op.kind == kind && op.name == name)
                .unwrap_or_else(|| panic!("no {kind:?} of {name}: {ops:?}"))
        };
        let (created, synced) = (named(OpKind::Create, "bin"), named(OpKind::SyncFile, "bin"));
        let name = format!("{shard:06}.{FIELDS_SUFFIX}");
        ops[created..synced]
            .iter()
            .any(|op| op.kind == OpKind::Write && op.name == name)
    };
    let new_shards = Dataset::open(&base).unwrap().shards()..shards;
    assert!(
        new_shards.clone().filter(|&s| during(s)).count() >= 2,
        "{ops:?}"
    );
    let expected = all_fields(&reference);

    for n in 1..=total {
        let work = copy(&format!("fail-{n}"));
        let config = Config {
            policy: Policy::FailOnce(n),
            ..Config::pass()
        };
        let storage = SimStorage::new(&work, config);
        let mut dataset = storage.open(&work);
        let failing = storage.ops().len();
        let result = extend_with(&mut dataset, &second, AS_BUILT, Dedup::Keys);
        let op = &storage.ops()[failing + n - 1];
        if n == total {
            // The directory's fsync after the manifest's rename: committed,
            // its durability in doubt.
            assert!(result.is_err(), "operation {n}: {op:?}");
            continue;
        }
        let err = result.expect_err(&format!("operation {n} ({op:?}) failed unseen"));
        // Nothing committed, nothing left: the files are those before.
        assert_eq!(snapshot(&work), before, "operation {n} ({op:?}): {err}");
        // A retry writes what the reference wrote.
        drop(dataset);
        extend_with(
            &mut Dataset::open(&work).unwrap(),
            &second,
            AS_BUILT,
            Dedup::Keys,
        )
        .unwrap_or_else(|e| panic!("operation {n}: retry: {e}"));
        assert_eq!(all_fields(&work), expected, "operation {n}");
        std::fs::remove_dir_all(&work).unwrap();
    }
}
