//! The LitData source: a chunk of arbitrary bytes (or an arbitrary
//! `index.json`) never panics, never allocates what a count or size claims
//! beyond its bounds (run with `-malloc_limit_mb`), and every error names the
//! chunk or the index.
//!
//! Input: a flag byte, then the bytes. Flag bit 7: the bytes are `index.json`
//! (beside a chunk of zeros); else they are the one chunk, under the config of
//! a fixture chosen by bits 0-2 (0 `fixtures/litdata/dict`, every leaf format,
//! plain; 1 `zstd-batch`, zstd frames of items; 2 `zstd-sample`, a frame per
//! item; 3 `zstd-chunk`, the whole chunk zstd-compressed first; 4 `text` and
//! 5 `text-zstd`, rows kept as an Arrow IPC footer, plain and IPC-compressed;
//! 6 and 7 as 4 and 5), whose entry declares the chunk's length and its own
//! item count. The value is `image` (`text` for the footers, keyed by `id`),
//! every other leaf a field.
#![no_main]

use std::path::Path;

use bcd_converters::litdata_source::LitdataSource;
use bcd_converters::sample_shards::ColumnOptions;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

const CONFIGS: [&str; 6] = [
    include_str!("../../fixtures/litdata/dict/index.json"),
    include_str!("../../fixtures/litdata/zstd-batch/index.json"),
    include_str!("../../fixtures/litdata/zstd-sample/index.json"),
    include_str!("../../fixtures/litdata/zstd-chunk/index.json"),
    include_str!("../../fixtures/litdata/text/index.json"),
    include_str!("../../fixtures/litdata/text-zstd/index.json"),
];

fn read(dir: &Path, names: &[&Path], footer: bool) {
    let options = match footer {
        false => ColumnOptions {
            value_column: Some("image".into()),
            ..Default::default()
        },
        true => ColumnOptions {
            value_column: Some("text".into()),
            key_column: Some("id".into()),
            ..Default::default()
        },
    };
    let source = match LitdataSource::open(&[dir.to_owned()], &options) {
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
    if flag & 0x80 != 0 {
        let chunk = dir.join("chunk-0-0.bin");
        std::fs::write(&chunk, [0u8; 8]).unwrap();
        std::fs::write(&index_path, bytes).unwrap();
        read(dir, &[&index_path, &chunk], false);
        return;
    }
    let which = match usize::from(flag & 7) {
        w @ 0..=5 => w,
        w => w - 2,
    };
    let mut index: Value = serde_json::from_str(CONFIGS[which]).unwrap();
    let count_at = if which == 1 { 12 } else { 0 };
    let items = bytes
        .get(count_at..count_at + 4)
        .map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()));
    let (name, stored) = match which {
        3 => ("chunk-0-0.zstd.bin", zstd::encode_all(bytes, 1).unwrap()),
        _ => ("chunk-0-0.bin", bytes.to_vec()),
    };
    let chunk = dir.join(name);
    std::fs::write(&chunk, stored).unwrap();
    index["chunks"] = json!([{"chunk_bytes": bytes.len(), "chunk_size": items, "dim": null, "filename": name}]);
    std::fs::write(&index_path, serde_json::to_vec(&index).unwrap()).unwrap();
    read(dir, &[&index_path, &chunk], which >= 4);
});
