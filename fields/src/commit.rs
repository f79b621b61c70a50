//! The commit file `commit.NNNNNN.json`: the dataset schema, its metadata and
//! the statistics of shards `0..N-1`, as of the commit that made `N` shards.

use serde_json::{Map, Value};

use crate::error::{FieldsError, Result};
use crate::fingerprint::Fingerprint;
use crate::json_util;
use crate::schema::DatasetSchema;
use crate::stats::ShardStats;

/// The commit file format this crate writes (`"format"`).
pub const COMMIT_FORMAT: u64 = 1;
/// The largest commit file [`CommitFile::decode`] reads.
pub const MAX_COMMIT_BYTES: usize = 64 << 20;

/// `commit.NNNNNN.json` for a dataset of `shards` shards (at least six digits).
pub fn commit_file_name(shards: u64) -> String {
    format!("commit.{shards:06}.json")
}

/// The shard count a commit file's name gives: `Some(n)` exactly for the names
/// [`commit_file_name`] makes.
pub fn parse_commit_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("commit.")?.strip_suffix(".json")?;
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    (commit_file_name(n) == name).then_some(n)
}

/// Suffix of a shard's fields file, the sidecar `NNNNNN.fields.arrow`.
pub const FIELDS_SUFFIX: &str = "fields.arrow";
/// Suffix of a shard's statistics file, the sidecar `NNNNNN.stats.json`.
pub const STATS_SUFFIX: &str = "stats.json";

/// `NNNNNN.fields.arrow`, shard `shard`'s fields.
pub fn fields_file_name(shard: u64) -> String {
    format!("{shard:06}.{FIELDS_SUFFIX}")
}

/// `NNNNNN.stats.json`, shard `shard`'s statistics.
pub fn stats_file_name(shard: u64) -> String {
    format!("{shard:06}.{STATS_SUFFIX}")
}

/// What a commit records beside the manifest (FORMAT.md, "Fields").
///
/// ```
/// use bcd_fields::{CommitFile, DatasetSchema, ShardStats};
///
/// let mut commit = CommitFile::new(DatasetSchema::new());
/// commit.metadata.insert("description".into(), "cats and dogs".into());
/// let bytes = commit.encode().unwrap();
/// assert_eq!(CommitFile::decode(&bytes, "commit.000000.json").unwrap(), commit);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct CommitFile {
    /// The dataset schema.
    pub schema: DatasetSchema,
    /// Dataset metadata: a free-form JSON object (FORMAT.md lists the
    /// standard keys).
    pub metadata: Map<String, Value>,
    /// The merged statistics of the shards that have statistics (no fingerprint).
    pub totals: ShardStats,
    /// The fingerprint of the dataset's last shard, `N-1`; `None` when `N` is 0.
    pub last_shard: Option<Fingerprint>,
    /// How many of shards `0..N-1` the totals include (shards written without
    /// statistics, by the reference, are not).
    pub shards_with_stats: u64,
}

impl CommitFile {
    /// A commit of a dataset with no shards.
    pub fn new(schema: DatasetSchema) -> CommitFile {
        CommitFile {
            schema,
            metadata: Map::new(),
            totals: ShardStats::new(),
            last_shard: None,
            shards_with_stats: 0,
        }
    }

    /// The JSON object of FORMAT.md.
    pub fn to_json(&self) -> Result<Value> {
        let mut totals = self.totals.clone();
        totals.fingerprint = None;
        let mut m = Map::new();
        m.insert("format".into(), COMMIT_FORMAT.into());
        m.insert("schema".into(), self.schema.to_json()?);
        m.insert("metadata".into(), Value::Object(self.metadata.clone()));
        m.insert("totals".into(), totals.to_json());
        m.insert(
            "last_shard".into(),
            self.last_shard.map_or(Value::Null, |f| f.to_json()),
        );
        m.insert("shards_with_stats".into(), self.shards_with_stats.into());
        Ok(Value::Object(m))
    }

    /// The file's bytes: [`CommitFile::to_json`], compact.
    pub fn encode(&self) -> Result<Vec<u8>> {
        Ok(self.to_json()?.to_string().into_bytes())
    }

    /// Reads a commit file (at most [`MAX_COMMIT_BYTES`]), checking it: format
    /// 1, a readable schema, an object of metadata, consistent totals with no
    /// fingerprint whose columns are all in the schema. `name` names the file
    /// in errors. Members this version does not know are ignored.
    pub fn decode(bytes: &[u8], name: &str) -> Result<CommitFile> {
        let obj = json_util::parse_object(bytes, MAX_COMMIT_BYTES, name)?;
        let format = json_util::u64_member(&obj, "format", name)?;
        if format != COMMIT_FORMAT {
            return Err(FieldsError::invalid(
                name,
                format!("commit format {format} is not {COMMIT_FORMAT}"),
            ));
        }
        let schema = DatasetSchema::from_json(json_util::member(&obj, "schema", name)?, name)?;
        let metadata = json_util::as_object(
            json_util::member(&obj, "metadata", name)?,
            "\"metadata\"",
            name,
        )?
        .clone();
        let totals = ShardStats::from_json(json_util::member(&obj, "totals", name)?, name)?;
        if totals.fingerprint.is_some() {
            return Err(FieldsError::invalid(name, "\"totals\" has a fingerprint"));
        }
        if let Some((field, _)) = totals.fields().find(|(f, _)| schema.field(f).is_none()) {
            return Err(FieldsError::invalid(
                name,
                format!("\"totals\" has statistics of field \"{field}\", which the schema lacks"),
            ));
        }
        let last_shard = match json_util::member(&obj, "last_shard", name)? {
            Value::Null => None,
            v => Some(Fingerprint::from_json(v, name)?),
        };
        Ok(CommitFile {
            schema,
            metadata,
            totals,
            last_shard,
            shards_with_stats: json_util::u64_member(&obj, "shards_with_stats", name)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array, RecordBatch};
    use arrow_schema::{DataType, Field};
    use serde_json::json;

    fn sample() -> CommitFile {
        let schema =
            DatasetSchema::from_fields([Arc::new(Field::new("label", DataType::Int64, true))])
                .unwrap();
        let mut totals = ShardStats::new();
        for _ in 0..3 {
            totals.add_record(4, 10, 20);
        }
        let batch = RecordBatch::try_from_iter([(
            "label",
            Arc::new(Int64Array::from(vec![0, 1, 1])) as ArrayRef,
        )])
        .unwrap();
        totals.add_fields(&batch).unwrap();
        let mut commit = CommitFile::new(schema);
        commit.totals = totals;
        commit.metadata = json!({"class_names": ["cat", "dog"], "description": "pets"})
            .as_object()
            .unwrap()
            .clone();
        commit.last_shard = Some(Fingerprint {
            records: 3,
            data_len: 42,
            index_xxh3: 5,
            edges_xxh3: 6,
        });
        commit.shards_with_stats = 1;
        commit
    }

    #[test]
    fn round_trips() {
        let commit = sample();
        let bytes = commit.encode().unwrap();
        let back = CommitFile::decode(&bytes, "commit.000001.json").unwrap();
        assert_eq!(back, commit);
        let json: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            json["schema"]["fields"],
            json!([{"name": "label", "type": "Int64"}])
        );
        assert_eq!(json["totals"]["records"], 3);
        assert!(json["totals"].get("fingerprint").is_none());
    }

    #[test]
    fn decoding_refuses_inconsistent_files() {
        let good = sample().to_json().unwrap();
        let edits: Vec<(&str, Value)> = vec![
            ("format", json!(2)),
            ("schema", json!({"ipc": "AAAA"})),
            ("metadata", json!([])),
            ("last_shard", json!({"records": 3})),
            ("shards_with_stats", json!(-1)),
            ("totals", json!({"format": 1})),
        ];
        for (key, value) in edits {
            let mut bad = good.clone();
            bad[key] = value;
            let err = CommitFile::decode(bad.to_string().as_bytes(), "commit.000001.json")
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("commit.000001.json: "), "{key}: {err}");
        }
        let mut stranger = good.clone();
        stranger["totals"]["fields"]["other"] = stranger["totals"]["fields"]["label"].clone();
        let err = CommitFile::decode(stranger.to_string().as_bytes(), "c")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "c: \"totals\" has statistics of field \"other\", which the schema lacks"
        );
        let mut with_fp = good.clone();
        with_fp["totals"]["fingerprint"] = good["last_shard"].clone();
        assert!(CommitFile::decode(with_fp.to_string().as_bytes(), "c").is_err());
        assert!(CommitFile::decode(&vec![b' '; MAX_COMMIT_BYTES + 1], "c").is_err());
        let mut extra = good;
        extra["later_version_member"] = json!(1);
        assert!(CommitFile::decode(extra.to_string().as_bytes(), "c").is_ok());
    }

    #[test]
    fn file_names() {
        assert_eq!(commit_file_name(12), "commit.000012.json");
        assert_eq!(commit_file_name(1_234_567), "commit.1234567.json");
        assert_eq!(fields_file_name(3), "000003.fields.arrow");
        assert_eq!(stats_file_name(1_000_000), "1000000.stats.json");
        for (name, want) in [
            ("commit.000012.json", Some(12)),
            ("commit.1234567.json", Some(1_234_567)),
            ("commit.000000.json", Some(0)),
            ("commit.00012.json", None),
            ("commit.0000012.json", None),
            ("commit.+00012.json", None),
            ("commit.000012.json.tmp", None),
            ("commit.99999999999999999999.json", None),
        ] {
            assert_eq!(parse_commit_file_name(name), want, "{name}");
        }
    }
}
