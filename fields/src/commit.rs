//! The commit file, `commit.NNNNNN.json` (FORMAT.md, "Fields"): the dataset
//! schema, the dataset metadata and the statistics totals of the state with
//! NNNNNN shards, and the fingerprint of its last shard.

use serde_json::{json, Map, Value};

use crate::error::{FieldsError, Result};
use crate::fingerprint::Fingerprint;
use crate::schema::DatasetSchema;
use crate::stats::ShardStats;

/// Version of the commit file's JSON.
pub const COMMIT_FORMAT: u64 = 1;

/// What a commit file holds.
#[derive(Clone, Debug)]
pub struct CommitFile {
    /// The dataset schema.
    pub schema: DatasetSchema,
    /// The dataset metadata.
    pub metadata: Map<String, Value>,
    /// Statistics of every shard of the state.
    pub totals: ShardStats,
    /// The fingerprint of the state's last shard (None with no shards).
    pub last_shard: Option<Fingerprint>,
}

impl CommitFile {
    /// The JSON bytes.
    pub fn to_json_bytes(&self) -> Result<Vec<u8>> {
        let value = json!({
            "format": COMMIT_FORMAT,
            "last_shard": self.last_shard.as_ref().map(Fingerprint::to_json),
            "schema": self.schema.to_json()?,
            "metadata": self.metadata,
            "totals": self.totals.to_json(None),
        });
        Ok(serde_json::to_vec(&value).expect("JSON values serialize"))
    }

    /// Reads what [`CommitFile::to_json_bytes`] wrote; `name` names the file.
    pub fn from_json_bytes(bytes: &[u8], name: &str) -> Result<CommitFile> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| FieldsError::InvalidJson {
            name: name.to_owned(),
            what: "the commit file is not JSON".into(),
            source: e,
        })?;
        let bad = |what: &str| FieldsError::Invalid {
            name: name.to_owned(),
            what: format!("commit file: {what}"),
        };
        if value.get("format").and_then(Value::as_u64) != Some(COMMIT_FORMAT) {
            return Err(bad("unknown or missing format"));
        }
        let last_shard = match value.get("last_shard") {
            None | Some(Value::Null) => None,
            Some(f) => Some(Fingerprint::from_json(f, name)?),
        };
        let schema =
            DatasetSchema::from_json(value.get("schema").ok_or_else(|| bad("no schema"))?, name)?;
        let metadata = match value.get("metadata") {
            Some(Value::Object(map)) => map.clone(),
            _ => return Err(bad("metadata is not an object")),
        };
        let (totals, _) =
            ShardStats::from_json(value.get("totals").ok_or_else(|| bad("no totals"))?, name)?;
        Ok(CommitFile {
            schema,
            metadata,
            totals,
            last_shard,
        })
    }
}
