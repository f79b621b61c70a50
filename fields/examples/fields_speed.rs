//! Times the fields codec on a shard-sized workload (not a test: timings are
//! not asserted). Run with
//! `cargo run --release -p bcd-fields --example fields_speed [rows]`.

use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, Int32Array, StringArray};
use bcd_fields::{
    decode_shard, encode_shard, BatchBuilder, FieldValue, Fields, Fingerprint, ShardStats,
};

fn main() {
    let rows: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    // Arrow columns as a Parquet source yields them: batches of 8192 rows.
    let chunks: Vec<(ArrayRef, ArrayRef)> = (0..rows.div_ceil(8192))
        .map(|c| {
            let n = (rows - c * 8192).min(8192);
            let ints: ArrayRef =
                Arc::new(Int32Array::from_iter_values((0..n as i32).map(|i| i * 7)));
            let text: ArrayRef = Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("caption {i}")),
            ));
            (ints, text)
        })
        .collect();
    let records: Vec<Fields> = (0..rows)
        .map(|i| {
            let (ints, text) = &chunks[i / 8192];
            let mut f = Fields::new();
            f.push("label", FieldValue::Int64((i % 1000) as i64));
            f.push("name", FieldValue::String(format!("file-{i}.jpg")));
            f.push("width", FieldValue::Arrow(ints.clone(), i % 8192));
            f.push("caption", FieldValue::Arrow(text.clone(), i % 8192));
            f
        })
        .collect();

    let origins: Vec<String> = (0..rows).map(|i| format!("record {i}")).collect();
    let t = Instant::now();
    let mut builder = BatchBuilder::new();
    for (f, origin) in records.iter().zip(&origins) {
        builder.push(f, origin).unwrap();
    }
    let pushed = t.elapsed();
    let batch = builder.finish().unwrap();
    let built = t.elapsed();
    println!("build {rows} rows x 4 columns: push {pushed:?}, push+finish {built:?}");

    let fingerprint = Fingerprint {
        records: rows as u64,
        ..Fingerprint::default()
    };
    let t = Instant::now();
    let bytes = encode_shard(&batch, &fingerprint).unwrap();
    println!("encode: {:?}, {} bytes", t.elapsed(), bytes.len());
    let t = Instant::now();
    let back = decode_shard(Arc::new(bytes), &fingerprint, "f")
        .unwrap()
        .unwrap();
    println!("decode: {:?}, {} batches", t.elapsed(), back.len());

    // Statistics of a million records with three fields: a label of 1000
    // classes, a caption of mostly distinct strings, a float score.
    let n = 1_000_000usize;
    let labels: ArrayRef = Arc::new(arrow_array::Int64Array::from_iter_values(
        (0..n as i64).map(|i| i % 1000),
    ));
    let captions: ArrayRef = Arc::new(StringArray::from_iter_values(
        (0..n).map(|i| format!("a photo number {i}")),
    ));
    let scores: ArrayRef = Arc::new(arrow_array::Float64Array::from_iter_values(
        (0..n).map(|i| i as f64 / 7.0),
    ));
    let batch = arrow_array::RecordBatch::try_from_iter([
        ("label", labels),
        ("caption", captions),
        ("score", scores),
    ])
    .unwrap();
    let t = Instant::now();
    let mut stats = ShardStats::new();
    for i in 0..n as u64 {
        stats.add_record(12, 1000 + i % 5000, 2000 + i % 9000);
    }
    let records = t.elapsed();
    stats.add_fields(&batch).unwrap();
    let total = t.elapsed();
    let json = stats.encode();
    println!(
        "stats of {n} records x 3 fields: add_record {records:?}, + add_fields {total:?}; encode {} bytes, encode+decode {:?}",
        json.len(),
        {
            let t = Instant::now();
            ShardStats::decode(&stats.encode(), "s").unwrap();
            t.elapsed()
        }
    );
    println!(
        "  distinct: label {:?}, caption {:?}, score {:?}",
        stats.field("label").unwrap().distinct(),
        stats.field("caption").unwrap().distinct(),
        stats.field("score").unwrap().distinct()
    );
}
