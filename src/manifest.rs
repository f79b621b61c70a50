//! manifest.json: parsing (both reference versions, strictly) and writing (the
//! 0.3.0 form, byte-identical to what the reference writes).

use std::io::Read;
use std::path::Path;

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::format::{DEFAULT_MAX_SHARD_SIZE, MANIFEST_NAME, MAX_MANIFEST_BYTES};

/// How values are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compression {
    /// Values are stored as they are (`"compression": null`).
    None,
    /// Each non-empty value is an independent LZ4 block with a 4-byte
    /// little-endian uncompressed-size prefix (`"compression": "lz4"`).
    Lz4,
}

impl Compression {
    /// The manifest's spelling: `"lz4"`, or `None` for JSON `null`.
    pub fn as_manifest_str(self) -> Option<&'static str> {
        match self {
            Compression::None => None,
            Compression::Lz4 => Some("lz4"),
        }
    }
}

/// Which reference release's manifest layout a file uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ManifestVersion {
    /// `{"keyed", "compression", "shards"}`: written by bitcask-dataset 0.2.0.
    V0_2,
    /// `{"keyed", "compression", "max_shard_size", "shards"}`: written by 0.3.0 and by this crate.
    V0_3,
}

/// The committed state of a dataset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// Whether records carry keys.
    pub keyed: bool,
    /// How values are stored.
    pub compression: Compression,
    /// Shard size limit in bytes ([`DEFAULT_MAX_SHARD_SIZE`] for 0.2.0 manifests).
    pub max_shard_size: u64,
    /// Number of committed shards: `000000` up to `shards - 1`.
    pub shards: u64,
    /// Layout the manifest was read in (writes always use [`ManifestVersion::V0_3`]).
    pub version: ManifestVersion,
}

impl Manifest {
    /// Parses manifest bytes. `path` is only used in error messages.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Manifest> {
        let invalid = |reason: String| Error::InvalidManifest {
            path: path.to_owned(),
            reason,
        };
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| invalid(format!("not JSON: {e}")))?;
        let Value::Object(object) = value else {
            return Err(invalid("expected a JSON object".into()));
        };
        let version = match object.len() {
            3 => ManifestVersion::V0_2,
            _ => ManifestVersion::V0_3,
        };
        let expected: &[&str] = match version {
            ManifestVersion::V0_2 => &["keyed", "compression", "shards"],
            ManifestVersion::V0_3 => &["keyed", "compression", "max_shard_size", "shards"],
        };
        if object.len() != expected.len() || expected.iter().any(|k| !object.contains_key(*k)) {
            let mut found: Vec<&str> = object.keys().map(String::as_str).collect();
            found.sort_unstable();
            return Err(invalid(format!(
                "expected exactly the fields {{\"keyed\", \"compression\", \"max_shard_size\", \"shards\"}} \
                 (or, from bitcask-dataset 0.2.0, without \"max_shard_size\"), found {found:?}"
            )));
        }

        let keyed = match &object["keyed"] {
            Value::Bool(b) => *b,
            other => {
                return Err(invalid(format!(
                    "\"keyed\" must be true or false, not {other}"
                )))
            }
        };
        let compression = match &object["compression"] {
            Value::Null => Compression::None,
            Value::String(s) if s == "lz4" => Compression::Lz4,
            other => {
                return Err(invalid(format!(
                    "unsupported \"compression\" {other}: expected \"lz4\" or null"
                )))
            }
        };
        let max_shard_size = match version {
            ManifestVersion::V0_2 => DEFAULT_MAX_SHARD_SIZE,
            ManifestVersion::V0_3 => match positive_integer(&object, "max_shard_size") {
                Some(n) if n > 0 => n,
                _ => {
                    return Err(invalid(format!(
                        "\"max_shard_size\" must be a positive integer, not {}",
                        object["max_shard_size"]
                    )))
                }
            },
        };
        let Some(shards) = positive_integer(&object, "shards") else {
            return Err(invalid(format!(
                "\"shards\" must be a non-negative integer, not {}",
                object["shards"]
            )));
        };
        Ok(Manifest {
            keyed,
            compression,
            max_shard_size,
            shards,
            version,
        })
    }

    /// Reads and parses `dir/manifest.json`.
    pub fn read(dir: &Path) -> Result<Manifest> {
        let path = dir.join(MANIFEST_NAME);
        // Not File::open: a FIFO in its place must not block the open.
        let file = match crate::mapping::open_regular(&path) {
            Ok((file, _)) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NotADataset {
                    path: dir.to_owned(),
                })
            }
            Err(e) => return Err(Error::io("open", path, e)),
        };
        let mut bytes = Vec::new();
        file.take(MAX_MANIFEST_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io("read", &path, e))?;
        if bytes.len() as u64 > MAX_MANIFEST_BYTES {
            return Err(Error::InvalidManifest {
                path,
                reason: format!("larger than {MAX_MANIFEST_BYTES} bytes"),
            });
        }
        Manifest::parse(&bytes, &path)
    }

    /// The bytes the reference (0.3.0) would write for this manifest: Python's
    /// `json.dumps` of the four fields in order, no trailing newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        let compression = match self.compression.as_manifest_str() {
            Some(name) => format!("\"{name}\""),
            None => "null".to_owned(),
        };
        format!(
            "{{\"keyed\": {}, \"compression\": {}, \"max_shard_size\": {}, \"shards\": {}}}",
            self.keyed, compression, self.max_shard_size, self.shards
        )
        .into_bytes()
    }
}

/// A JSON integer >= 0 that fits in `u64`; `true`, floats and strings are not integers.
fn positive_integer(object: &Map<String, Value>, field: &str) -> Option<u64> {
    match &object[field] {
        Value::Number(n) => n.as_u64(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Manifest> {
        Manifest::parse(text.as_bytes(), Path::new("m.json"))
    }

    #[test]
    fn reads_both_reference_layouts() {
        let v2 = parse(r#"{"keyed": true, "compression": "lz4", "shards": 2}"#).unwrap();
        assert_eq!(
            (
                v2.keyed,
                v2.compression,
                v2.max_shard_size,
                v2.shards,
                v2.version
            ),
            (
                true,
                Compression::Lz4,
                DEFAULT_MAX_SHARD_SIZE,
                2,
                ManifestVersion::V0_2
            )
        );
        let v3 =
            parse(r#"{"keyed": false, "compression": null, "max_shard_size": 40, "shards": 0}"#)
                .unwrap();
        assert_eq!(
            (
                v3.keyed,
                v3.compression,
                v3.max_shard_size,
                v3.shards,
                v3.version
            ),
            (false, Compression::None, 40, 0, ManifestVersion::V0_3)
        );
    }

    #[test]
    fn writes_what_python_json_dumps_writes() {
        let m =
            parse(r#"{"keyed":true,"compression":"lz4","max_shard_size":1073741824,"shards":3}"#)
                .unwrap();
        assert_eq!(
            String::from_utf8(m.to_bytes()).unwrap(),
            r#"{"keyed": true, "compression": "lz4", "max_shard_size": 1073741824, "shards": 3}"#
        );
    }

    #[test]
    fn rejects_anything_else_naming_the_file() {
        for bad in [
            "",
            "[]",
            "{}",
            r#"{"keyed": "false", "compression": null, "shards": 0}"#,
            r#"{"keyed": true, "compression": "zstd", "shards": 0}"#,
            r#"{"keyed": true, "compression": null, "shards": -1}"#,
            r#"{"keyed": true, "compression": null, "shards": 1.0}"#,
            r#"{"keyed": true, "compression": null, "shards": true}"#,
            r#"{"keyed": true, "compression": null, "shards": 18446744073709551616}"#,
            r#"{"keyed": true, "compression": null, "max_shard_size": 0, "shards": 0}"#,
            r#"{"keyed": true, "compression": null, "max_shard_size": 5, "shards": 0, "x": 1}"#,
            r#"{"keyed": true, "compression": null, "extra": 5, "shards": 0}"#,
            r#"{"keyed": true, "compression": null}"#,
        ] {
            let err = parse(bad).expect_err(bad);
            assert!(
                err.to_string().starts_with("m.json: invalid manifest"),
                "{err}"
            );
        }
    }
}
