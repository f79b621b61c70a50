//! The MDS source: a shard file of arbitrary bytes (or an arbitrary
//! `index.json`) never panics, never allocates what a count or size claims
//! beyond its bounds (run with `-malloc_limit_mb`), and every error names the
//! shard or the index.
//!
//! Input: a flag byte, then the bytes. Flag bit 7: the bytes are `index.json`
//! (beside a good shard, `shard.00000.mds`); else they are the shard, under an
//! index with the columns of `fixtures/mds/every-encoding` (every MDS encoding:
//! seeds are its shards) that declares the shard's length and its own sample
//! count, zstd-compressed first when bit 0 is set. The value is `blob`, the key
//! `id`, every other column a field.
#![no_main]

use std::path::{Path, PathBuf};

use bcd_converters::mds_source::MdsSource;
use bcd_converters::sample_shards::ColumnOptions;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

/// The columns of the every-encoding fixture, as its index gives them.
const COLUMNS: &str = include_str!("../../fixtures/mds/every-encoding/index.json");

fn index(len: u64, samples: u64, compressed: Option<u64>) -> Value {
    let fixture: Value = serde_json::from_str(COLUMNS).unwrap();
    let mut shard = fixture["shards"][0].clone();
    shard["raw_data"] = json!({"basename": "shard.00000.mds", "bytes": len, "hashes": {}});
    shard["samples"] = samples.into();
    shard["hashes"] = json!([]);
    match compressed {
        Some(bytes) => {
            shard["compression"] = "zstd".into();
            shard["zip_data"] =
                json!({"basename": "shard.00000.mds.zstd", "bytes": bytes, "hashes": {}});
        }
        None => {
            shard["compression"] = Value::Null;
            shard["zip_data"] = Value::Null;
        }
    }
    json!({"version": 2, "shards": [shard]})
}

fn read(dir: &Path, names: &[PathBuf]) {
    let options = ColumnOptions {
        value_column: Some("blob".into()),
        key_column: Some("id".into()),
        ..Default::default()
    };
    let source = match MdsSource::open(&[dir.to_owned()], &options) {
        Ok(source) => source,
        Err(error) => {
            let message = error.to_string();
            assert!(message.contains("index.json"), "{message}");
            return;
        }
    };
    for record in source.take(100_000) {
        if let Err(error) = record {
            let message = error.to_string();
            // A fuzzed index may name other files of the directory.
            let named = names.iter().any(|n| message.contains(&n.display().to_string()))
                || message.contains(&dir.display().to_string());
            assert!(named, "{message}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flag, bytes)) = data.split_first() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let index_path = dir.join("index.json");
    let raw = dir.join("shard.00000.mds");
    if flag & 0x80 != 0 {
        // A good one-sample shard of the fixture's first sample is not needed:
        // any shard will do, the index is what is fuzzed.
        std::fs::write(&raw, [0u8; 8]).unwrap();
        std::fs::write(&index_path, bytes).unwrap();
        read(dir, &[index_path, raw]);
        return;
    }
    let samples = bytes.get(..4).map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()));
    let compressed = flag & 1 != 0;
    let index = if compressed {
        let zip = dir.join("shard.00000.mds.zstd");
        let stored = zstd::encode_all(bytes, 1).unwrap();
        std::fs::write(&zip, &stored).unwrap();
        index(bytes.len() as u64, samples.into(), Some(stored.len() as u64))
    } else {
        std::fs::write(&raw, bytes).unwrap();
        index(bytes.len() as u64, samples.into(), None)
    };
    std::fs::write(&index_path, serde_json::to_vec(&index).unwrap()).unwrap();
    let shard = match compressed {
        true => dir.join("shard.00000.mds.zstd"),
        false => raw,
    };
    read(dir, &[index_path, shard]);
});
