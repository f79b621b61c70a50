//! What an extend with fields holds (issue 27): a bounded part of the open
//! shard's fields, not all of them. A million records with three small fields
//! (a 14-character id, an int64, a float64: 34 bytes of Arrow data a record)
//! go into one shard; the heap this process uses at its peak while they are
//! pushed and committed, counted by a counting allocator, stays under a fixed
//! bound that holding the shard's fields (as before) passes several times.
//!
//! Its own test binary: the allocator counts the whole process.

use std::alloc::{GlobalAlloc, Layout, System};
use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Float64Array, Int64Array, StringArray};
use bcd::{Compression, CreateOptions, Dataset};
use bcd_fields::{FieldValue, Fields};
use bcd_pipeline::fields::DatasetFields;
use bcd_pipeline::{FieldsExtend, NewRecord, Numbered, OnDuplicate};

/// The system allocator, counting the bytes allocated now and at the peak.
struct Counting;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is System's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = NOW.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is System's.
        unsafe { System.dealloc(ptr, layout) };
        NOW.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is System's.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            let now = NOW.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract is System's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                let grown = new_size - layout.size();
                let now = NOW.fetch_add(grown, Ordering::Relaxed) + grown;
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                NOW.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const RECORDS: usize = 1_000_000;
/// Records a source hands over at once (a Parquet or JSON Lines batch).
const BATCH: usize = 4096;
/// The bound on the heap above what it was before the first record: the
/// shard's fields held whole took over 200 MiB here.
const BOUND: usize = 96 << 20;

#[test]
fn an_extend_with_fields_holds_a_bounded_part_of_a_shards_fields() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    let options = CreateOptions {
        keyed: false,
        compression: Compression::None,
        ..CreateOptions::default()
    };
    let mut dataset = Dataset::create(&path, options).unwrap();
    let names: [Arc<str>; 3] = ["id".into(), "n".into(), "x".into()];
    let mut extend = FieldsExtend::begin(&mut dataset, OnDuplicate::Error).unwrap();
    let before = NOW.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    for start in (0..RECORDS).step_by(BATCH) {
        let rows = start..(start + BATCH).min(RECORDS);
        // The source's batch: each record's fields are rows of its columns.
        let columns: [ArrayRef; 3] = [
            Arc::new(StringArray::from_iter_values(
                rows.clone().map(|i| format!("id{i:012}")),
            )),
            Arc::new(Int64Array::from_iter_values(
                rows.clone().map(|i| i as i64 * 7),
            )),
            Arc::new(Float64Array::from_iter_values(
                rows.clone().map(|i| i as f64 / 2.0),
            )),
        ];
        let fields: Vec<Fields> = (0..rows.len())
            .map(|row| {
                let mut f = Fields::new();
                for (name, column) in names.iter().zip(&columns) {
                    f.push(name.clone(), FieldValue::Arrow(column.clone(), row));
                }
                f
            })
            .collect();
        let origins: Vec<Numbered> = rows
            .clone()
            .map(|i| Numbered {
                what: "record",
                number: i as u64,
            })
            .collect();
        let records: Vec<NewRecord<'_>> = fields
            .iter()
            .zip(&origins)
            .map(|(fields, origin)| NewRecord {
                key: b"",
                value: b"8 bytes!",
                fields: Cow::Borrowed(fields),
                origin,
            })
            .collect();
        extend.push_batch(&records).unwrap();
    }
    extend.commit().unwrap();
    let peak = PEAK.load(Ordering::Relaxed) - before;
    eprintln!("peak heap above the start: {} MiB", peak >> 20);
    assert!(
        peak < BOUND,
        "the heap grew by {} MiB at its peak (bound {} MiB)",
        peak >> 20,
        BOUND >> 20
    );

    // And the fields are all there.
    let dataset = Dataset::open(&path).unwrap();
    assert_eq!((dataset.len(), dataset.shards()), (RECORDS, 1));
    let state = DatasetFields::load(&dataset).unwrap();
    let batches = state.shard_batches(&dataset, 0, None).unwrap();
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, RECORDS);
    let last = batches.last().unwrap();
    let id = last.column_by_name("id").unwrap();
    let id = id.as_any().downcast_ref::<StringArray>().unwrap();
    assert_eq!(id.value(id.len() - 1), format!("id{:012}", RECORDS - 1));
}
