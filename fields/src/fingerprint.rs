//! A shard's fingerprint: what ties a sidecar file to the shard it describes.

use serde_json::{Map, Value};

use crate::error::{FieldsError, Result};
use crate::json_util;

/// Identifies the contents of one committed shard cheaply (FORMAT.md,
/// "Fields"): a fields or statistics file whose fingerprint differs from its
/// shard's was written for other records (by a writer that crashed before its
/// commit, whose shard number was reused) and is stale.
///
/// The store computes it (`bcd::ShardFingerprint`); this crate only stores it
/// and compares it.
///
/// ```
/// use bcd_fields::Fingerprint;
/// let f = Fingerprint { records: 3, data_len: 120, index_xxh3: 0xab, edges_xxh3: 1 << 63 };
/// let json = f.to_json();
/// assert_eq!(
///     json,
///     serde_json::json!({"records": 3, "data_len": 120,
///                        "index_xxh3": "00000000000000ab", "edges_xxh3": "8000000000000000"})
/// );
/// assert_eq!(Fingerprint::from_json(&json, "x").unwrap(), f);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Fingerprint {
    /// Records in the shard.
    pub records: u64,
    /// Length of its `.bin` file.
    pub data_len: u64,
    /// xxh3-64 of its whole `.idx` file.
    pub index_xxh3: u64,
    /// xxh3-64 of its `.bin` if at most 8192 bytes, else of its first 4096
    /// bytes followed by its last 4096.
    pub edges_xxh3: u64,
}

const MEMBERS: [&str; 4] = ["records", "data_len", "index_xxh3", "edges_xxh3"];

impl Fingerprint {
    /// `{"records": n, "data_len": n, "index_xxh3": "16 hex", "edges_xxh3": "16 hex"}`
    /// (lowercase hex, zero-padded).
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("records".into(), self.records.into());
        map.insert("data_len".into(), self.data_len.into());
        map.insert(
            "index_xxh3".into(),
            format!("{:016x}", self.index_xxh3).into(),
        );
        map.insert(
            "edges_xxh3".into(),
            format!("{:016x}", self.edges_xxh3).into(),
        );
        Value::Object(map)
    }

    /// Reads what [`Fingerprint::to_json`] writes, strictly: exactly these four
    /// members, the hashes as 16 hex digits. `name` names the file in errors.
    pub fn from_json(value: &Value, name: &str) -> Result<Fingerprint> {
        let obj = json_util::as_object(value, "the fingerprint", name)?;
        json_util::only_members(obj, &MEMBERS, "the fingerprint", name)?;
        let hash = |key: &str| -> Result<u64> {
            let s = json_util::as_str(json_util::member(obj, key, name)?, key, name)?;
            if s.len() != 16 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(FieldsError::invalid(
                    name,
                    format!("fingerprint \"{key}\" is not 16 hexadecimal digits"),
                ));
            }
            u64::from_str_radix(s, 16).map_err(|_| {
                FieldsError::invalid(name, format!("fingerprint \"{key}\" is not hexadecimal"))
            })
        };
        Ok(Fingerprint {
            records: json_util::u64_member(obj, "records", name)?,
            data_len: json_util::u64_member(obj, "data_len", name)?,
            index_xxh3: hash("index_xxh3")?,
            edges_xxh3: hash("edges_xxh3")?,
        })
    }

    /// The compact JSON text of [`Fingerprint::to_json`].
    pub fn to_json_string(&self) -> String {
        self.to_json().to_string()
    }

    /// Parses [`Fingerprint::to_json_string`]'s text (at most 4 KiB).
    pub fn from_json_str(text: &str, name: &str) -> Result<Fingerprint> {
        const LIMIT: usize = 4096;
        let obj = json_util::parse_object(text.as_bytes(), LIMIT, name)?;
        Fingerprint::from_json(&Value::Object(obj), name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_extremes() {
        for f in [
            Fingerprint::default(),
            Fingerprint {
                records: u64::MAX,
                data_len: u64::MAX,
                index_xxh3: u64::MAX,
                edges_xxh3: 0,
            },
        ] {
            assert_eq!(
                Fingerprint::from_json_str(&f.to_json_string(), "f").unwrap(),
                f
            );
        }
    }

    #[test]
    fn rejects_what_it_does_not_write() {
        let good = json!({"records": 1, "data_len": 2, "index_xxh3": "0123456789abcdef", "edges_xxh3": "FFFFFFFFFFFFFFFF"});
        assert_eq!(
            Fingerprint::from_json(&good, "f").unwrap().edges_xxh3,
            u64::MAX
        );
        let bad = [
            json!([]),
            json!({"records": 1, "data_len": 2, "index_xxh3": "0123456789abcdef"}),
            json!({"records": 1.0, "data_len": 2, "index_xxh3": "0123456789abcdef", "edges_xxh3": "0123456789abcdef"}),
            json!({"records": -1, "data_len": 2, "index_xxh3": "0123456789abcdef", "edges_xxh3": "0123456789abcdef"}),
            json!({"records": 1, "data_len": 2, "index_xxh3": "0123456789abcde", "edges_xxh3": "0123456789abcdef"}),
            json!({"records": 1, "data_len": 2, "index_xxh3": "+123456789abcdef", "edges_xxh3": "0123456789abcdef"}),
            json!({"records": 1, "data_len": 2, "index_xxh3": 5, "edges_xxh3": "0123456789abcdef"}),
            json!({"records": 1, "data_len": 2, "index_xxh3": "0123456789abcdef", "edges_xxh3": "0123456789abcdef", "x": 1}),
        ];
        for value in bad {
            let err = Fingerprint::from_json(&value, "000001.stats.json")
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("000001.stats.json: "), "{err}");
        }
        assert!(Fingerprint::from_json_str(&" ".repeat(5000), "f").is_err());
    }
}
