//! Helpers for one kind of source: TFRecord framing and gzip, CSV options, the
//! nightly workflow's arguments, and a large Parquet file written at test time.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::checks::case_args;
use crate::common::*;
use crate::datasets::{expected, fixture, fixtures, json_strings, parse_records};
use crate::strings;

/// The number N in "rows from N" of a message.
pub(crate) fn rows_from(message: &str) -> u64 {
    let rest = message
        .split("rows from ")
        .nth(1)
        .unwrap_or_else(|| panic!("no 'rows from' in {message}"));
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap()
}

/// The fixture TFRecord files of a case, as paths.
pub(crate) fn tfrecord_sources(case: &Value) -> Vec<String> {
    json_strings(&case["files"])
        .iter()
        .map(|f| fixture("tfrecord", f))
        .collect()
}

/// Decompresses a GZIP file (for editing the TFRecord stream inside).
pub(crate) fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// Compresses a stream as one GZIP member, as TensorFlow's GZIP option does.
pub(crate) fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// A CSV case's options, with "root" (relative to fixtures/csv) as --root DIR.
pub(crate) fn csv_extra(case: &Value) -> Vec<String> {
    let mut args = case_args(case);
    if let Some(root) = case["root"].as_str() {
        args.extend([
            "--root".to_owned(),
            s(&fixtures("csv").join(root)).to_owned(),
        ]);
    }
    args
}

/// The nightly-append command's options: keyed by id, the image bytes as values,
/// ids seen before skipped.
pub(crate) fn nightly_args() -> Vec<String> {
    strings(&[
        "--key-column",
        "id",
        "--value-column",
        "image",
        "--on-duplicate",
        "skip",
    ])
}

/// The records a fixture dump holds, from expected.json.
pub(crate) fn dump_records(name: &str) -> Records {
    let cases = expected("parquet")["cases"].as_array().unwrap().clone();
    let case = cases
        .iter()
        .find(|c| {
            c["files"] == json!([name])
                && c["args"] == json!(["--value-column", "image", "--key-column", "id"])
        })
        .unwrap_or_else(|| panic!("{name} is not in expected.json"));
    parse_records(&case["records"], true)
}

/// Deterministic bytes (xorshift), incompressible, so ingest stores them quickly
/// and the run spreads over many shards.
pub(crate) fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Writes a Parquet file of `ids` and 4 KiB images with the Rust parquet crate.
pub(crate) fn write_big_parquet(path: &Path, ids: &[i64]) -> Records {
    use arrow_array::{ArrayRef, BinaryArray, Int64Array, RecordBatch};
    let images: Vec<Vec<u8>> = ids.iter().map(|&id| noise(id as u64, 4096)).collect();
    let batch = RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
        (
            "image",
            Arc::new(BinaryArray::from_iter_values(images.iter())) as ArrayRef,
        ),
    ])
    .unwrap();
    let file = std::fs::File::create(path).unwrap();
    let properties = ::parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(250))
        .build();
    let mut writer =
        ::parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(properties)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    ids.iter()
        .map(|id| id.to_string().into_bytes())
        .zip(images)
        .collect()
}
