//! What the cache records beside its mirror, in small files replaced whole: the
//! version and checksum of each object mirrored (`.bcd-remote-versions.json`),
//! the checksum of each cached data file (`data/NNNNNN.bin.xxh3`), the sizes and
//! times of the data files (`.bcd-remote-stamps.json`).

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{RemoteError, Result};
use crate::objects::RemoteObject;

/// What the mirror records of an object: the write its copy was made from
/// ([`version_of`]), and the checksum of the copy.
pub(crate) type Recorded = (String, Option<u64>);

pub(crate) fn record_of(object: &RemoteObject, xxh3: Option<u64>) -> Recorded {
    (version_of(object), xxh3)
}

/// Where the checksum of the cached data file `path` is kept.
pub(crate) fn checksum_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(".xxh3");
    path.with_file_name(name)
}

pub(crate) fn read_checksum(path: &Path) -> Option<u64> {
    let text = fs::read_to_string(path).ok()?;
    u64::from_str_radix(text.trim(), 16).ok()
}

/// What tells one write of an object from another: size, ETag, time written.
pub(crate) fn version_of(object: &RemoteObject) -> String {
    format!(
        "{} {} {}",
        object.size,
        object.e_tag.as_deref().unwrap_or("-"),
        object.last_modified.to_rfc3339()
    )
}

pub(crate) fn read_versions(path: &Path) -> BTreeMap<String, Recorded> {
    fs::read(path)
        .ok()
        .and_then(|text| serde_json::from_slice(&text).ok())
        .unwrap_or_default()
}

pub(crate) fn write_versions(path: &Path, versions: &BTreeMap<String, Recorded>) -> Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    replace_file(
        path,
        &tmp,
        &serde_json::to_vec(versions).expect("serializable"),
    )
}

/// Replaces `path` with `bytes`, written to `tmp` first and renamed over it.
pub(crate) fn replace_file(path: &Path, tmp: &Path, bytes: &[u8]) -> Result<()> {
    fs::write(tmp, bytes).map_err(|e| RemoteError::io(tmp, "write", e))?;
    fs::rename(tmp, path).map_err(|e| RemoteError::io(tmp, "rename", e))
}

/// Removes `path`; a file already gone is no error.
pub(crate) fn remove_if_present(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(RemoteError::io(path, "remove", e)),
        _ => Ok(()),
    }
}

/// What the mirror records of a shard's data file: its size and time (what a
/// persisted index records) and the ETag of the object it was synced from, on
/// which every download of it is conditional.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct DataStamp {
    pub(crate) len: u64,
    /// Modification time in ns, or 0.
    pub(crate) mtime_ns: u64,
    pub(crate) e_tag: Option<String>,
}

/// The stamps file: `{"N": [len, mtime_ns, e_tag or null]}`. Entries of another
/// form (the two-element ones of earlier versions, without the ETag) are left
/// out, so the next sync lists the remote and records them again.
pub(crate) fn read_stamps(path: &Path) -> BTreeMap<u64, DataStamp> {
    let Ok(text) = fs::read(path) else {
        return BTreeMap::new();
    };
    let Ok(map) = serde_json::from_slice::<BTreeMap<String, serde_json::Value>>(&text) else {
        return BTreeMap::new();
    };
    map.into_iter()
        .filter_map(|(key, value)| {
            let id = key.parse().ok()?;
            let [len, mtime, e_tag] = value.as_array()?.as_slice() else {
                return None;
            };
            let e_tag = match e_tag {
                serde_json::Value::Null => None,
                other => Some(other.as_str()?.to_owned()),
            };
            let stamp = DataStamp {
                len: len.as_u64()?,
                mtime_ns: mtime.as_u64()?,
                e_tag,
            };
            Some((id, stamp))
        })
        .collect()
}

pub(crate) fn write_stamps(path: &Path, stamps: &BTreeMap<u64, DataStamp>) -> Result<()> {
    let map: serde_json::Map<String, serde_json::Value> = stamps
        .iter()
        .map(|(id, s)| {
            (
                id.to_string(),
                serde_json::json!([s.len, s.mtime_ns, s.e_tag]),
            )
        })
        .collect();
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    replace_file(path, &tmp, &serde_json::to_vec(&map).expect("serializable"))
}
