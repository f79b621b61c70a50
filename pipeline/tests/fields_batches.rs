//! A shard's fields written a bounded batch at a time (issue 27): with small
//! batches and every shard's batches sent to a scratch file, an extend and a
//! merge write datasets whose fields and statistics are those of the one batch
//! per shard written when a shard's fields fit in memory, and whose files hold
//! several batches.

mod common;

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::{Array, ArrayRef, DictionaryArray, Int32Array, RecordBatch};
use bcd::{CreateOptions, Dataset, ViewRecords};
use bcd_fields::{decode_shard, FieldValue, Fields, Fingerprint, FIELDS_SUFFIX};
use bcd_pipeline::fields::{records_stats_report, stats_report};
use bcd_pipeline::{
    FieldsBuffering, FieldsExtend, FieldsExtendOptions, MergeRunOptions, NewRecord, Numbered,
    OnDuplicate,
};
use common::all_fields;
use serde_json::{Map, Value};

/// Small batches, every shard's batches in a scratch file.
const SMALL: FieldsBuffering = FieldsBuffering {
    batch_rows: 7,
    batch_bytes: 1 << 20,
    shard_memory: 0,
    write_as_built: true,
};
/// One batch per shard, in memory (as every shard was written before).
const WHOLE: FieldsBuffering = FieldsBuffering {
    batch_rows: usize::MAX,
    batch_bytes: usize::MAX,
    shard_memory: usize::MAX,
    write_as_built: false,
};

/// Arrow arrays records' fields point into: Int32 labels, and two
/// dictionaries of species (as two Parquet row groups or Arrow tables have).
struct Sources {
    narrow: ArrayRef,
    species: [ArrayRef; 2],
}

impl Sources {
    fn new() -> Sources {
        let dictionary = |values: &[&str]| -> ArrayRef {
            let d: DictionaryArray<Int32Type> = values.iter().copied().collect();
            Arc::new(d)
        };
        Sources {
            narrow: Arc::new(Int32Array::from((0..8).map(|v| v * 7).collect::<Vec<_>>())),
            species: [
                dictionary(&["cat", "dog", "owl", "cat"]),
                dictionary(&["ant", "owl", "eel"]),
            ],
        }
    }
}

/// Record `i`'s fields: a label (from an Arrow Int32 array in the first 40
/// records, then Int64: a column wider in later batches), a caption from
/// record 25 on (a column new in a later batch), a struct whose `tag` child
/// comes from record 50 on, a dictionary-encoded species from two
/// dictionaries (the first 45 records from one, the rest from the other,
/// every fifth record without one), and a class index renumbered by the
/// metadata.
fn fields_of(i: u64, sources: &Sources) -> Fields {
    let mut f = Fields::new();
    let label = match i < 40 {
        true => FieldValue::Arrow(sources.narrow.clone(), (i % 8) as usize),
        false => FieldValue::Int64(i as i64 * 1000),
    };
    f.push("label", label);
    if i >= 25 && !i.is_multiple_of(3) {
        f.push("caption", FieldValue::String(format!("record {i}")));
    }
    let mut children = vec![("flag".into(), FieldValue::Bool(i.is_multiple_of(2)))];
    if i >= 50 {
        children.push(("tag".into(), FieldValue::String(format!("t{}", i % 5))));
    }
    f.push("meta", FieldValue::Struct(children));
    if !i.is_multiple_of(5) {
        let (from, rows) = if i < 45 { (0, 4) } else { (1, 3) };
        let species = FieldValue::Arrow(sources.species[from].clone(), (i % rows) as usize);
        f.push("species", species);
    }
    f.push("label_index", FieldValue::Int64((i % 2) as i64));
    f
}

/// Extends the dataset at `path` with keys `{prefix}{i}`, `i` in `range`, and
/// class names `names`.
fn extend(
    path: &Path,
    prefix: &str,
    range: std::ops::Range<u64>,
    names: &[&str],
    buffering: FieldsBuffering,
) {
    let sources = Sources::new();
    let keys: Vec<Vec<u8>> = range
        .clone()
        .map(|i| format!("{prefix}{i:03}").into_bytes())
        .collect();
    let values: Vec<Vec<u8>> = range
        .clone()
        .map(|i| format!("value {i} ").repeat(3).into_bytes())
        .collect();
    let fields: Vec<Fields> = range.clone().map(|i| fields_of(i, &sources)).collect();
    let origins: Vec<Numbered> = range
        .map(|number| Numbered {
            what: "entry",
            number,
        })
        .collect();
    let mut dataset = Dataset::open(path).unwrap();
    let options = FieldsExtendOptions {
        buffering,
        ..FieldsExtendOptions::default()
    };
    let mut extend = FieldsExtend::begin_with(&mut dataset, OnDuplicate::Skip, options).unwrap();
    let mut metadata = Map::new();
    metadata.insert("class_names".into(), serde_json::json!(names));
    extend.add_metadata(metadata).unwrap();
    // In pushes of 13, so shards end within pushes.
    for start in (0..keys.len()).step_by(13) {
        let end = (start + 13).min(keys.len());
        let records: Vec<NewRecord<'_>> = (start..end)
            .map(|i| NewRecord {
                key: &keys[i],
                value: &values[i],
                fields: Cow::Borrowed(&fields[i]),
                origin: &origins[i],
            })
            .collect();
        extend.push_batch(&records).unwrap();
    }
    extend.commit().unwrap();
}

fn create(path: &Path) {
    let options = CreateOptions {
        keyed: true,
        max_shard_size: 1500,
        ..CreateOptions::default()
    };
    Dataset::create(path, options).unwrap();
}

/// Every record's species.
fn species(path: &Path) -> Vec<Option<&'static str>> {
    let names = ["cat", "dog", "owl", "ant", "eel"];
    let mut out = Vec::new();
    for batch in all_fields(path) {
        let column = batch.column_by_name("species").unwrap();
        let d = column.as_dictionary::<Int32Type>();
        let values = d.values().as_string::<i32>();
        out.extend(d.keys().iter().map(|k| {
            k.map(|k| {
                *names
                    .iter()
                    .find(|&&n| n == values.value(k as usize))
                    .unwrap()
            })
        }));
    }
    out
}

/// The record batches of each shard's fields file.
fn batch_counts(path: &Path) -> Vec<usize> {
    let dataset = Dataset::open(path).unwrap();
    (0..dataset.shards())
        .map(|shard| {
            let bytes = std::fs::read(dataset.sidecar_path(shard, FIELDS_SUFFIX)).unwrap();
            let f = dataset.shard_fingerprint(shard).unwrap();
            let print = Fingerprint {
                records: f.records,
                data_len: f.data_len,
                index_xxh3: f.index_xxh3,
                edges_xxh3: f.edges_xxh3,
            };
            decode_shard(Arc::new(bytes), &print, "f")
                .unwrap()
                .unwrap()
                .len()
        })
        .collect()
}

fn report(path: &Path) -> Value {
    let mut report = stats_report(&Dataset::open(path).unwrap(), true).unwrap();
    report.as_object_mut().unwrap().remove("path");
    report
}

fn names(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(path)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// Two extends into one dataset, the second renumbering its class indices.
fn two_extends(path: &Path, buffering: FieldsBuffering) {
    create(path);
    extend(path, "a", 0..60, &["cat", "dog"], buffering);
    extend(path, "b", 0..90, &["ant", "cat"], buffering);
}

#[test]
fn an_extend_in_small_batches_writes_what_one_batch_per_shard_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (small, whole) = (dir.path().join("small"), dir.path().join("whole"));
    two_extends(&small, SMALL);
    two_extends(&whole, WHOLE);

    assert_eq!(
        Dataset::open(&small).unwrap().shards(),
        Dataset::open(&whole).unwrap().shards()
    );
    assert!(Dataset::open(&small).unwrap().shards() > 3);
    assert_eq!(all_fields(&small), all_fields(&whole));
    assert_eq!(report(&small), report(&whole));
    // The species as pushed, read back from files of several batches.
    let expected: Vec<Option<&str>> = (0..60)
        .chain(0..90)
        .map(|i: u64| match (i % 5, i < 45) {
            (0, _) => None,
            (_, true) => Some(["cat", "dog", "owl", "cat"][(i % 4) as usize]),
            (_, false) => Some(["ant", "owl", "eel"][(i % 3) as usize]),
        })
        .collect();
    assert_eq!(species(&small), expected);
    // The same files (and no scratch file left), the commit files' bytes equal.
    assert_eq!(names(&small), names(&whole));
    let commit = |p: &PathBuf| {
        std::fs::read(p.join(format!(
            "commit.{:06}.json",
            Dataset::open(p).unwrap().shards()
        )))
        .unwrap()
    };
    assert_eq!(commit(&small), commit(&whole));
    let (small_batches, whole_batches) = (batch_counts(&small), batch_counts(&whole));
    assert!(whole_batches.iter().all(|&n| n == 1), "{whole_batches:?}");
    // Batches of at most 7 rows.
    let dataset = Dataset::open(&small).unwrap();
    for (shard, &n) in small_batches.iter().enumerate() {
        let records = dataset.shard_records(shard as u64) as usize;
        assert!(
            n >= records.div_ceil(7),
            "shard {shard}: {n} batches of {records} records"
        );
    }
    // The renumbered class indices: the second extend's ant (0) is 2, its cat (1) 0.
    let last = all_fields(&small).pop().unwrap();
    let index = last.column_by_name("label_index").unwrap();
    let index = index
        .as_any()
        .downcast_ref::<arrow_array::Int64Array>()
        .unwrap();
    assert!(
        index.iter().all(|v| matches!(v, Some(0) | Some(2))),
        "{index:?}"
    );
}

#[test]
fn a_merge_rewrites_shards_of_several_batches_a_batch_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let mut merged = Vec::new();
    for (name, buffering) in [("small", SMALL), ("whole", WHOLE)] {
        let base = dir.path().join(name);
        let (a, b, into) = (base.join("a"), base.join("b"), base.join("into"));
        create(&a);
        extend(&a, "k", 0..60, &["cat", "dog"], buffering);
        // Keys k030..k089: the first 30 are in part a too, so part b's shards
        // holding them are rewritten without them; its class names renumber.
        create(&b);
        extend(&b, "k", 30..90, &["ant", "cat"], buffering);
        let options = MergeRunOptions {
            copy: true,
            on_duplicate: OnDuplicate::Skip,
            ..MergeRunOptions::default()
        };
        let report = bcd_pipeline::merge(&[a, b], &into, &options).unwrap();
        assert!(report.summary.rewritten_shards > 0, "{report:?}");
        assert_eq!(Dataset::open(&into).unwrap().len(), 90);
        merged.push(into);
    }
    assert_eq!(all_fields(&merged[0]), all_fields(&merged[1]));
    assert_eq!(report(&merged[0]), report(&merged[1]));
    let counts = batch_counts(&merged[0]);
    assert!(counts.iter().any(|&n| n > 1), "{counts:?}");
    let rows: usize = all_fields(&merged[0]).iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, 90);
    let caption = all_fields(&merged[0])
        .iter()
        .map(|b| b.column_by_name("caption").unwrap().len())
        .sum::<usize>();
    assert_eq!(caption, 90);
}

#[test]
fn readers_of_a_record_s_fields_find_it_among_a_shards_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut outputs: Vec<(Vec<RecordBatch>, Vec<u8>, Vec<u8>)> = Vec::new();
    for (name, buffering) in [("small", SMALL), ("whole", WHOLE)] {
        let path = dir.path().join(name);
        two_extends(&path, buffering);
        let dataset = Dataset::open(&path).unwrap();
        // Records out of order, across shards and batches.
        let n = dataset.len() as u64;
        let order: Vec<u64> = (0..n).map(|i| (i * 37) % n).collect();

        let copy = dir.path().join(format!("{name}-copy"));
        let options = bcd_pipeline::CopyOptions {
            records: Some(order.clone()),
            ..Default::default()
        };
        bcd_pipeline::copy_into(&dataset, &copy, &options).unwrap();

        let parquet = dir.path().join(format!("{name}.parquet"));
        let options = bcd_pipeline::ParquetExportOptions {
            records: Some(order.clone()),
            ..Default::default()
        };
        bcd_pipeline::export_parquet(&dataset, &parquet, &options).unwrap();

        let tar = dir.path().join(format!("{name}.tar"));
        let target = bcd_converters::tar_export::Target::File(tar.clone());
        let options = bcd_pipeline::ExportOptions {
            samples: true,
            records: Some(order),
            ..bcd_pipeline::ExportOptions::new(target)
        };
        bcd_pipeline::export(&dataset, &options).unwrap();

        let copied = all_fields(&copy);
        assert_eq!(
            copied.iter().map(|b| b.num_rows()).sum::<usize>(),
            n as usize
        );
        outputs.push((
            copied,
            std::fs::read(parquet).unwrap(),
            std::fs::read(tar).unwrap(),
        ));
    }
    let (small, whole) = (&outputs[0], &outputs[1]);
    assert_eq!(small.0, whole.0, "copies differ");
    assert!(small.1 == whole.1, "Parquet exports differ");
    assert!(small.2 == whole.2, "sample exports differ");
}

/// Which records a view holds.
type Pick = fn(u64) -> bool;

/// The statistics report of the records of the dataset at `path` that `pick`
/// chooses (a view's), without its path.
fn view_report(path: &Path, pick: impl Fn(u64) -> bool) -> Value {
    let dataset = Dataset::open(path).unwrap();
    let mut records = ViewRecords::new(dataset.len() as u64);
    for index in (0..dataset.len() as u64).filter(|&i| pick(i)) {
        records.push(index).unwrap();
    }
    let mut report = records_stats_report(&dataset, &records.finish()).unwrap();
    report.as_object_mut().unwrap().remove("path");
    report
}

#[test]
fn a_views_statistics_over_shards_of_several_batches_are_those_of_one_batch_per_shard() {
    // A view's records filtered a batch at a time from files of batches of 7
    // rows give the report the one batch per shard gave (filtered whole).
    let dir = tempfile::tempdir().unwrap();
    let (small, whole) = (dir.path().join("small"), dir.path().join("whole"));
    two_extends(&small, SMALL);
    two_extends(&whole, WHOLE);
    let several = batch_counts(&small).iter().filter(|&&n| n > 1).count();
    assert!(several >= 3, "{:?}", batch_counts(&small));
    assert!(batch_counts(&whole).iter().all(|&n| n == 1));
    let picks: [(&str, Pick); 5] = [
        ("every third", |i| i % 3 == 0),
        ("one run across shards", |i| (20..95).contains(&i)),
        ("the last of a batch of 7", |i| i % 7 == 6),
        ("one record", |i| i == 64),
        ("all", |_| true),
    ];
    for (what, pick) in picks {
        let report = view_report(&small, pick);
        assert_eq!(report, view_report(&whole, pick), "{what}");
        let chosen = (0..150).filter(|&i| pick(i)).count() as u64;
        assert_eq!(report["records"], chosen, "{what}");
    }
    // Every record: the dataset's own report.
    let mut all = report(&small);
    all.as_object_mut().unwrap().remove("per_shard");
    assert_eq!(view_report(&small, |_| true), all);
}
