//! What every interop test shares: the settings of a dataset under test
//! ([`Spec`]), and the steps sent to the Python reference (`reference.py batch`)
//! with the parsing of what it read back.

use std::path::Path;

use bcd::{Compression, CreateOptions};
use bcd_test_support::{hex, unhex_json, Record};
use serde_json::{json, Value};

use crate::corpus::assert_records_eq;

pub const V2: &str = "0.2.0";
pub const V3: &str = "0.3.0";

/// Small enough that the main corpus spans many shards, and that its largest
/// values (over 64 KiB) each get a shard of their own.
pub const SMALL_SHARDS: u64 = 64 * 1024;

/// The reference's default `max_shard_size` (1 GiB), written into manifests by 0.3.0.
pub const DEFAULT_SHARDS: u64 = 1 << 30;

/// The lock file this project's writers take; the reference neither makes nor knows it.
pub const LOCK_NAME: &str = ".bcd.lock";

/// Settings of a dataset under test.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub keyed: bool,
    pub compression: Compression,
}

pub const KEYED_LZ4: Spec = Spec {
    keyed: true,
    compression: Compression::Lz4,
};
pub const KEYED_UNCOMPRESSED: Spec = Spec {
    keyed: true,
    compression: Compression::None,
};
pub const KEYLESS_LZ4: Spec = Spec {
    keyed: false,
    compression: Compression::Lz4,
};
pub const KEYLESS_UNCOMPRESSED: Spec = Spec {
    keyed: false,
    compression: Compression::None,
};
pub const ALL_SPECS: [Spec; 4] = [
    KEYED_LZ4,
    KEYED_UNCOMPRESSED,
    KEYLESS_LZ4,
    KEYLESS_UNCOMPRESSED,
];

impl Spec {
    pub fn name(self) -> String {
        let keyed = if self.keyed { "keyed" } else { "keyless" };
        let compression = match self.compression {
            Compression::Lz4 => "lz4",
            Compression::None => "uncompressed",
        };
        format!("{keyed}-{compression}")
    }

    pub fn options(self, max_shard_size: u64) -> CreateOptions {
        CreateOptions {
            keyed: self.keyed,
            compression: self.compression,
            max_shard_size,
        }
    }
}

// --- The Python reference -------------------------------------------------

/// Runs `steps` in one process of reference `version` (see `reference.py batch`).
pub use bcd_test_support::reference_batch as reference;

pub fn path_text(dir: &Path) -> &str {
    dir.to_str().expect("temporary paths are UTF-8")
}

pub fn compression_text(compression: Compression) -> &'static str {
    compression.as_manifest_str().unwrap_or("none")
}

/// A `create` step; `max_shard_size` `None` leaves the reference's default (and is
/// the only choice for 0.2.0, whose `create` does not take it).
pub fn create_step(dir: &Path, spec: Spec, max_shard_size: Option<u64>) -> Value {
    json!({
        "command": "create",
        "path": path_text(dir),
        "keyed": spec.keyed,
        "compression": compression_text(spec.compression),
        "max_shard_size": max_shard_size,
    })
}

/// An `extend` step; `max_shard_size` is only for 0.2.0, which takes it per extend.
pub fn extend_step(
    dir: &Path,
    keyed: bool,
    records: &[Record],
    max_shard_size: Option<u64>,
) -> Value {
    let input: Vec<Value> = records
        .iter()
        .map(|(key, value)| {
            if keyed {
                json!([hex(key), hex(value)])
            } else {
                assert!(key.is_empty(), "keyless records have no key");
                json!(hex(value))
            }
        })
        .collect();
    json!({
        "command": "extend",
        "path": path_text(dir),
        "max_shard_size": max_shard_size,
        "input": input,
    })
}

pub fn dump_step(dir: &Path) -> Value {
    json!({"command": "dump", "path": path_text(dir)})
}

pub fn compress_step(value: &[u8]) -> Value {
    json!({"command": "compress", "path": hex(value)})
}

/// The value the reference reads from the stored LZ4 value `stored` (its
/// `lz4.block.decompress`), hex in the result.
pub fn decompress_step(stored: &[u8]) -> Value {
    json!({"command": "decompress", "path": hex(stored)})
}

/// What the reference read from a dataset.
#[derive(Debug)]
pub struct Dump {
    keyed: bool,
    compression: Compression,
    shards: u64,
    records: Vec<Record>,
}

pub fn parse_dump(result: &Value) -> Dump {
    let keyed = result["keyed"].as_bool().expect("keyed");
    let compression = match &result["compression"] {
        Value::Null => Compression::None,
        Value::String(s) if s == "lz4" => Compression::Lz4,
        other => panic!("unexpected compression {other}"),
    };
    let records = result["records"]
        .as_array()
        .expect("records")
        .iter()
        .map(|record| match record {
            Value::Array(pair) if keyed => (unhex_json(&pair[0]), unhex_json(&pair[1])),
            value if !keyed => (Vec::new(), unhex_json(value)),
            other => panic!("unexpected record {other}"),
        })
        .collect();
    Dump {
        keyed,
        compression,
        shards: result["shards"].as_u64().expect("shards"),
        records,
    }
}

/// Checks that the reference read exactly `expected` from a dataset of `spec`
/// that Rust sees with `shards` shards.
pub fn assert_dump(result: &Value, spec: Spec, shards: u64, expected: &[Record], context: &str) {
    let dump = parse_dump(result);
    assert_eq!(
        (dump.keyed, dump.compression),
        (spec.keyed, spec.compression),
        "{context}: settings"
    );
    assert_records_eq(&dump.records, expected, context);
    assert_eq!(dump.shards, shards, "{context}: shard count");
}
