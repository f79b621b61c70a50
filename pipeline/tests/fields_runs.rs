//! Records whose fields are consecutive rows of one source's batch (a
//! Parquet or JSON Lines batch read in order) are added to the fields writer
//! as whole runs of the batch's arrays (issue 27), not record by record. The
//! fields files, statistics and commit files are byte for byte those of the
//! same records given one by one (each field a row of the same arrays):
//! across shard splits and batch ends within a run, records left out as
//! duplicates (by key and by content) within a run, nulls, columns some
//! batches lack, columns in another order, and a type widened by a later
//! batch. The values are those of the source's arrays.

mod common;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, Float64Array, Int32Array, Int64Array, StringArray};
use arrow_schema::DataType;
use bcd::{CreateOptions, Dataset, Dedup, ExtendOptions};
use bcd_fields::{FieldValue, Fields, SourceColumns};
use bcd_pipeline::{
    FieldsBuffering, FieldsExtend, FieldsExtendOptions, NewRecord, Numbered, OnDuplicate,
};
use bcd_test_support::snapshot;
use common::all_fields;

/// Batches of 7 rows written into the shard's file as they are built.
const AS_BUILT: FieldsBuffering = FieldsBuffering {
    batch_rows: 7,
    batch_bytes: 1 << 20,
    shard_memory: 0,
    write_as_built: true,
};
/// One batch per shard, held in memory.
const WHOLE: FieldsBuffering = FieldsBuffering {
    batch_rows: usize::MAX,
    batch_bytes: usize::MAX,
    shard_memory: usize::MAX,
    write_as_built: false,
};

/// Rows of each source batch: pushes of 11 records end within its runs.
const BATCH: usize = 13;

/// Source batch `b` of [`BATCH`] rows, records `b * BATCH..`: `id` (a string,
/// null in every ninth record), `n` (null in every seventh; an `Int32` in
/// the batches before `widen_from`, `Int64` from it on), `x` (a float) in
/// every batch but every third; the columns in the order `x, id, n` in
/// batches from `reorder_from` on.
fn source_batch(b: usize, widen_from: usize, reorder_from: usize) -> Arc<SourceColumns> {
    let rows = b * BATCH..(b + 1) * BATCH;
    let id: ArrayRef = Arc::new(StringArray::from_iter(
        rows.clone()
            .map(|i| (i % 9 != 4).then(|| format!("id{i:012}"))),
    ));
    let n = |i: usize| (i % 7 != 3).then_some(i as i64 * 7 - 300);
    let n: ArrayRef = match b < widen_from {
        true => Arc::new(Int32Array::from_iter(
            rows.clone().map(|i| n(i).map(|v| v as i32)),
        )),
        false => Arc::new(Int64Array::from_iter(rows.clone().map(n))),
    };
    let x: ArrayRef = Arc::new(Float64Array::from_iter_values(
        rows.clone().map(|i| i as f64 / 2.0 - 40.0),
    ));
    let mut columns: Vec<(&str, ArrayRef)> = vec![("id", id), ("n", n)];
    if b % 3 != 2 {
        columns.push(("x", x));
    }
    if b >= reorder_from {
        columns.rotate_right(1);
    }
    let (names, arrays) = columns
        .into_iter()
        .map(|(name, array)| (Arc::<str>::from(name), array))
        .unzip();
    Arc::new(SourceColumns::new(names, arrays, BATCH).unwrap())
}

/// Records of `batches` source batches: keys `key{i}` (with `repeat`, every
/// third one repeats the one before, left out as a duplicate), values (with
/// `repeat`, every fifth one the same, for content dedup) and, per record,
/// its fields both as the row of its batch and as one value per field (a row
/// of the same arrays).
struct Records {
    keys: Vec<Vec<u8>>,
    values: Vec<Vec<u8>>,
    rows: Vec<Fields>,
    one_by_one: Vec<Fields>,
    origins: Vec<Numbered>,
}

impl Records {
    fn new(batches: usize, repeat: bool, widen_from: usize, reorder_from: usize) -> Records {
        let sources: Vec<_> = (0..batches)
            .map(|b| source_batch(b, widen_from, reorder_from))
            .collect();
        let count = batches * BATCH;
        let key = |i: usize| match repeat && i % 3 == 2 {
            true => i - 1,
            false => i,
        };
        let rows: Vec<Fields> = (0..count)
            .map(|i| Fields::row(Arc::clone(&sources[i / BATCH]), i % BATCH).unwrap())
            .collect();
        let one_by_one = (0..count)
            .map(|i| {
                let source = &sources[i / BATCH];
                let mut fields = Fields::new();
                for (name, array) in source.names().iter().zip(source.arrays()) {
                    fields.push(name.clone(), FieldValue::Arrow(array.clone(), i % BATCH));
                }
                // Not a row of a batch: pushed record by record.
                assert!(fields.source_row().is_none());
                fields
            })
            .collect();
        Records {
            keys: (0..count)
                .map(|i| format!("key{:05}", key(i)).into_bytes())
                .collect(),
            values: (0..count)
                .map(|i| match repeat && i % 5 == 4 {
                    true => b"the same value".to_vec(),
                    false => format!("value {i} ").repeat(3).into_bytes(),
                })
                .collect(),
            rows,
            one_by_one,
            origins: (0..count as u64)
                .map(|number| Numbered {
                    what: "entry",
                    number,
                })
                .collect(),
        }
    }
}

/// Extends `dataset` with `records` in pushes of 11 (so shards, batches and
/// runs end within pushes), their fields as rows of their batches or one by
/// one.
fn extend_with(
    dataset: &mut Dataset,
    records: &Records,
    as_rows: bool,
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
    let fields = match as_rows {
        true => &records.rows,
        false => &records.one_by_one,
    };
    let mut extend = FieldsExtend::begin_with(dataset, OnDuplicate::Skip, options)?;
    for start in (0..records.keys.len()).step_by(11) {
        let end = (start + 11).min(records.keys.len());
        let batch: Vec<NewRecord<'_>> = (start..end)
            .map(|i| NewRecord {
                key: &records.keys[i],
                value: &records.values[i],
                fields: Cow::Borrowed(&fields[i]),
                origin: &records.origins[i],
            })
            .collect();
        extend.push_batch(&batch)?;
    }
    extend.commit()?;
    Ok(())
}

/// The dataset's files but the manifest and index (which differ between any
/// two runs), by name.
fn files(path: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = snapshot(path);
    files.retain(|name, _| !name.starts_with(".bcd"));
    files
}

/// Writes `records` with their fields as rows and one by one, with each
/// buffering, and checks that both give the same files byte for byte;
/// returns the dataset written from rows, as built.
fn same_as_one_by_one(records: &Records, keyed: bool, dedup: Dedup) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, buffering) in [("built", AS_BUILT), ("whole", WHOLE)] {
        let mut written = Vec::new();
        for as_rows in [true, false] {
            let path = dir.path().join(format!("{name}-{as_rows}"));
            let options = CreateOptions {
                keyed,
                max_shard_size: 1200,
                ..CreateOptions::default()
            };
            Dataset::create(&path, options).unwrap();
            let mut dataset = Dataset::open(&path).unwrap();
            extend_with(&mut dataset, records, as_rows, buffering, dedup).unwrap();
            written.push(path);
        }
        let shards = Dataset::open(&written[0]).unwrap().shards();
        assert!(shards > 3, "{shards} shards");
        // Fields files, statistics, commit file, shards: byte for byte.
        assert_eq!(files(&written[0]), files(&written[1]), "{name}");
    }
    dir
}

/// The values of the dataset's columns `id`, `n` and `x`, record by record.
type Values = Vec<(Option<String>, Option<i64>, Option<f64>)>;

fn values(path: &Path) -> Values {
    let mut out = Vec::new();
    for batch in all_fields(path) {
        let id = batch.column_by_name("id").unwrap().as_string::<i32>();
        let n = batch.column_by_name("n").unwrap();
        // Int32 unless a batch widened it to Int64.
        let n: Vec<Option<i64>> = match n.data_type() {
            DataType::Int32 => n
                .as_primitive::<Int32Type>()
                .iter()
                .map(|v| v.map(i64::from))
                .collect(),
            _ => n.as_primitive::<Int64Type>().iter().collect(),
        };
        let x = batch
            .column_by_name("x")
            .unwrap()
            .as_primitive::<Float64Type>();
        for (i, n) in n.into_iter().enumerate() {
            out.push((
                id.is_valid(i).then(|| id.value(i).to_owned()),
                n,
                x.is_valid(i).then(|| x.value(i)),
            ));
        }
    }
    out
}

/// What record `i` of [`source_batch`]'s records holds (computed from the
/// rule, not from the arrays).
fn expected(i: usize) -> (Option<String>, Option<i64>, Option<f64>) {
    (
        (i % 9 != 4).then(|| format!("id{i:012}")),
        (i % 7 != 3).then_some(i as i64 * 7 - 300),
        ((i / BATCH) % 3 != 2).then_some(i as f64 / 2.0 - 40.0),
    )
}

#[test]
fn fields_added_as_runs_of_rows_are_those_added_one_by_one() {
    // Columns in one order, every type as first seen.
    let records = Records::new(20, false, usize::MAX, usize::MAX);
    let dir = same_as_one_by_one(&records, true, Dedup::Keys);
    let got = values(&dir.path().join("built-true"));
    let want: Values = (0..20 * BATCH).map(expected).collect();
    assert_eq!(got, want);
}

#[test]
fn runs_of_rows_hold_the_sources_values_across_a_widened_type_and_reordered_columns() {
    // `n` widened to Int64 from batch 6 on; columns reordered from batch 12.
    let records = Records::new(20, false, 6, 12);
    let dir = same_as_one_by_one(&records, true, Dedup::Keys);
    let got = values(&dir.path().join("built-true"));
    let want: Values = (0..20 * BATCH).map(expected).collect();
    assert_eq!(got, want);
}

#[test]
fn records_left_out_within_a_run_are_left_out_of_its_fields() {
    let records = Records::new(20, true, 6, 12);
    // Keys repeated within runs.
    let dir = same_as_one_by_one(&records, true, Dedup::Keys);
    let got = values(&dir.path().join("built-true"));
    let want: Values = (0..20 * BATCH)
        .filter(|i| i % 3 != 2)
        .map(expected)
        .collect();
    assert_eq!(got, want);
    // Values repeated, keyless, by content: only the first "the same value".
    let dir = same_as_one_by_one(&records, false, Dedup::Content);
    let got = values(&dir.path().join("built-true"));
    let want: Values = (0..20 * BATCH)
        .filter(|&i| i % 5 != 4 || i == 4)
        .map(expected)
        .collect();
    assert_eq!(got, want);
}

#[test]
fn a_conflicting_type_within_runs_names_the_same_record_as_one_by_one() {
    let mut records = Records::new(6, false, usize::MAX, usize::MAX);
    // Batch 3's `n` as strings: refused at its first row, record 39.
    let batch = source_batch(3, usize::MAX, usize::MAX);
    let strings: ArrayRef = Arc::new(StringArray::from_iter_values(
        (0..BATCH).map(|i| format!("s{i}")),
    ));
    let names = batch.names().to_vec();
    let mut arrays = batch.arrays().to_vec();
    arrays[1] = strings;
    let batch = Arc::new(SourceColumns::new(names, arrays, BATCH).unwrap());
    for i in 3 * BATCH..4 * BATCH {
        records.rows[i] = Fields::row(Arc::clone(&batch), i % BATCH).unwrap();
        let mut fields = Fields::new();
        for (name, array) in batch.names().iter().zip(batch.arrays()) {
            fields.push(name.clone(), FieldValue::Arrow(array.clone(), i % BATCH));
        }
        records.one_by_one[i] = fields;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut errors = Vec::new();
    for as_rows in [true, false] {
        let path = dir.path().join(format!("ds-{as_rows}"));
        Dataset::create(&path, CreateOptions::default()).unwrap();
        let before = files(&path);
        let mut dataset = Dataset::open(&path).unwrap();
        let err = extend_with(&mut dataset, &records, as_rows, AS_BUILT, Dedup::Keys)
            .unwrap_err()
            .to_string();
        drop(dataset);
        // Nothing committed (the lock file aside).
        assert_eq!(files(&path), before);
        errors.push(err);
    }
    assert_eq!(errors[0], errors[1]);
    assert!(errors[0].contains("entry 39"), "{}", errors[0]);
    assert!(errors[0].contains("\"n\""), "{}", errors[0]);
}
