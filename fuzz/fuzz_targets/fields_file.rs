//! The decoders of `bcd-fields` on arbitrary bytes: shard fields files (Arrow
//! IPC), statistics files, commit files and encoded schemas.
//!
//! Input: a mode byte, then
//! - mode 0: a `u16` (little-endian) record count, then a `NNNNNN.fields.arrow`
//!   file, decoded with `decode_shard` against the fingerprint
//!   `{records, data_len: 1, index_xxh3: 2, edges_xxh3: 3}`;
//! - mode 1: a `NNNNNN.stats.json` file (`ShardStats::decode`);
//! - mode 2: a `commit.NNNNNN.json` file (`CommitFile::decode`);
//! - mode 3: the base64 text of a schema (`DatasetSchema::decode`), also read
//!   as a fingerprint's JSON.
//!
//! Nothing may panic (libFuzzer aborts on a panic even where the decoder would
//! catch it, so a panic inside Arrow is found too); every error names the file;
//! what decodes is consistent (row counts, Arrow's full validation), renders
//! (`row_to_json`, `member_bytes`, statistics) and encodes back to what decodes
//! the same. Run with `-rss_limit_mb=1024 -malloc_limit_mb=512`: no input may
//! make a decoder allocate what it claims.
//!
//! Seeds: `BCD_FUZZ_WRITE_SEED=corpus/fields_file cargo fuzz run fields_file --
//! -runs=1` writes valid inputs of every mode there (shard files of one record
//! batch and of several, with and without a dictionary).
#![no_main]

use std::path::Path;
use std::sync::{Arc, Once};

use arrow_array::{ArrayRef, DictionaryArray, Int32Array, RecordBatch, StringArray};
use bcd_fields::{
    decode_shard, encode_shard, member_bytes, row_to_json, BatchBuilder, CommitFile, DatasetSchema,
    FieldValue, Fields, Fingerprint, ShardFileWriter, ShardStats,
};
use libfuzzer_sys::fuzz_target;

const NAME: &str = "000007.fields.arrow";

fn fingerprint(records: u64) -> Fingerprint {
    Fingerprint {
        records,
        data_len: 1,
        index_xxh3: 2,
        edges_xxh3: 3,
    }
}

fn shard_input(batch: &RecordBatch) -> Vec<u8> {
    let records = batch.num_rows() as u16;
    let mut input = vec![0];
    input.extend_from_slice(&records.to_le_bytes());
    input.extend(encode_shard(batch, &fingerprint(u64::from(records))).expect("encode"));
    input
}

/// `batch` as a file of several record batches of `rows` rows, as a writer
/// writes a shard batch by batch.
fn shard_input_in_batches(batch: &RecordBatch, rows: usize) -> Vec<u8> {
    let records = batch.num_rows() as u16;
    let mut input = vec![0];
    input.extend_from_slice(&records.to_le_bytes());
    let fp = fingerprint(u64::from(records));
    let mut writer =
        ShardFileWriter::try_new(Vec::new(), batch.schema().fields(), &fp).expect("writer");
    for start in (0..batch.num_rows()).step_by(rows) {
        let slice = batch.slice(start, rows.min(batch.num_rows() - start));
        writer.write(&slice).expect("write");
    }
    input.extend(writer.finish().expect("finish"));
    input
}

fn write_seeds(dir: &Path) {
    std::fs::create_dir_all(dir).expect("seed directory");
    let mut builder = BatchBuilder::new();
    for i in 0..5i64 {
        let mut f = Fields::new();
        f.push("label", FieldValue::Int64(i % 2));
        f.push("caption", FieldValue::String(format!("photo {i}")));
        f.push("score", FieldValue::Float32(i as f32 / 3.0));
        f.push("raw", FieldValue::Binary(vec![i as u8; i as usize]));
        f.push(
            "tags",
            FieldValue::List(vec![FieldValue::String("a".into()), FieldValue::Null]),
        );
        f.push(
            "meta",
            FieldValue::Struct(vec![
                ("w".into(), FieldValue::Int64(i)),
                ("ok".into(), FieldValue::Bool(i > 2)),
            ]),
        );
        f.push("nothing", FieldValue::Null);
        builder.push(&f, "seed").expect("push");
    }
    let batch = builder.finish().expect("finish");
    std::fs::write(dir.join("shard"), shard_input(&batch)).expect("seed");
    let dict: DictionaryArray<arrow_array::types::Int32Type> =
        vec!["x", "y", "x"].into_iter().collect();
    let small = RecordBatch::try_from_iter([
        ("d", Arc::new(dict) as ArrayRef),
        (
            "n",
            Arc::new(Int32Array::from(vec![Some(1), None, Some(3)])) as ArrayRef,
        ),
        (
            "s",
            Arc::new(StringArray::from(vec!["a", "b", "c"])) as ArrayRef,
        ),
    ])
    .expect("batch");
    std::fs::write(dir.join("dictionary"), shard_input(&small)).expect("seed");
    // Several record batches (of 2 rows, the last of 1), as shards of more
    // records than a batch holds are written; and a dictionary the batches
    // share, written once.
    std::fs::write(dir.join("batches"), shard_input_in_batches(&batch, 2)).expect("seed");
    std::fs::write(
        dir.join("dictionary_batches"),
        shard_input_in_batches(&small, 1),
    )
    .expect("seed");

    let mut stats = ShardStats::new();
    for i in 0..5 {
        stats.add_record(4, 10 + i, 100 * i);
    }
    stats.add_fields(&batch).expect("stats");
    stats.fingerprint = Some(fingerprint(5));
    let mut input = vec![1];
    input.extend(stats.encode());
    std::fs::write(dir.join("stats"), input).expect("seed");

    let mut schema = DatasetSchema::new();
    schema.unify(&batch.schema()).expect("schema");
    let mut commit = CommitFile::new(schema.clone());
    stats.fingerprint = None;
    commit.totals = stats;
    commit.last_shard = Some(fingerprint(5));
    commit.shards_with_stats = 1;
    commit
        .metadata
        .insert("class_names".into(), serde_json::json!(["cat", "dog"]));
    let mut input = vec![2];
    input.extend(commit.encode().expect("commit"));
    std::fs::write(dir.join("commit"), input).expect("seed");

    let mut input = vec![3];
    input.extend(
        schema.to_json().expect("schema")["ipc"]
            .as_str()
            .expect("ipc")
            .as_bytes(),
    );
    std::fs::write(dir.join("schema"), input).expect("seed");
}

fn check_error(e: impl std::fmt::Display, name: &str) {
    let message = e.to_string();
    assert!(message.starts_with(&format!("{name}: ")), "{message}");
}

fn shard(data: &[u8]) {
    let Some((records, file)) = data.split_first_chunk::<2>() else {
        return;
    };
    let records = u64::from(u16::from_le_bytes(*records));
    let expected = fingerprint(records);
    let batches = match decode_shard(Arc::new(file.to_vec()), &expected, NAME) {
        Ok(Some(batches)) => batches,
        Ok(None) => return,
        Err(e) => return check_error(e, NAME),
    };
    assert_eq!(
        batches.iter().map(|b| b.num_rows() as u64).sum::<u64>(),
        records
    );
    let mut stats = ShardStats::new();
    for batch in &batches {
        for column in batch.columns() {
            column
                .to_data()
                .validate_full()
                .expect("decoded arrays are valid");
        }
        for row in 0..batch.num_rows() {
            row_to_json(batch, row);
            for column in batch.columns() {
                member_bytes(column.as_ref(), row);
            }
        }
        // Statistics of any decoded column work; types may conflict between
        // batches only if the file's schema did, which it cannot.
        stats
            .add_fields(batch)
            .expect("statistics of a decoded batch");
        // Each batch encodes back to a file that decodes to it.
        let fp = fingerprint(batch.num_rows() as u64);
        let again = encode_shard(batch, &fp).expect("re-encode");
        let back = decode_shard(Arc::new(again), &fp, NAME)
            .expect("re-decode")
            .expect("same fingerprint");
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].columns(), batch.columns());
    }
    let json = stats.encode();
    assert_eq!(
        ShardStats::decode(&json, NAME).expect("statistics decode"),
        stats
    );
    // The batches written again batch by batch (as a writer writes a shard)
    // decode to themselves: their dictionaries are the file's one per field.
    if let Some(first) = batches.first() {
        let mut writer = ShardFileWriter::try_new(Vec::new(), first.schema().fields(), &expected)
            .expect("writer");
        for batch in &batches {
            writer.write(batch).expect("write a decoded batch");
        }
        let again = writer.finish().expect("finish");
        let back = decode_shard(Arc::new(again), &expected, NAME)
            .expect("re-decode")
            .expect("same fingerprint");
        let written: Vec<&RecordBatch> = batches.iter().filter(|b| b.num_rows() > 0).collect();
        assert_eq!(back.len(), written.len());
        for (back, batch) in back.iter().zip(written) {
            assert_eq!(back.columns(), batch.columns());
        }
    }
}

fuzz_target!(|data: &[u8]| {
    static SEEDS: Once = Once::new();
    SEEDS.call_once(|| {
        if let Some(dir) = std::env::var_os("BCD_FUZZ_WRITE_SEED") {
            write_seeds(Path::new(&dir));
        }
    });
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 4 {
        0 => shard(rest),
        1 => match ShardStats::decode(rest, "000007.stats.json") {
            Ok(stats) => {
                let back = ShardStats::decode(&stats.encode(), "again").expect("re-decode");
                assert_eq!(back, stats);
            }
            Err(e) => check_error(e, "000007.stats.json"),
        },
        2 => match CommitFile::decode(rest, "commit.000007.json") {
            Ok(commit) => {
                let back = CommitFile::decode(&commit.encode().expect("encode"), "again")
                    .expect("re-decode");
                assert_eq!(back, commit);
            }
            Err(e) => check_error(e, "commit.000007.json"),
        },
        _ => {
            let text = String::from_utf8_lossy(rest);
            match DatasetSchema::decode(&text, "schema") {
                Ok(schema) => {
                    let json = schema.to_json().expect("encode");
                    assert_eq!(
                        DatasetSchema::from_json(&json, "again").expect("re-decode"),
                        schema
                    );
                }
                Err(e) => check_error(e, "schema"),
            }
            if let Err(e) = Fingerprint::from_json_str(&text, "fp") {
                check_error(e, "fp");
            }
        }
    }
});
