//! The objects under a prefix: listing, the manifest with its version, the
//! checksum stored with each object, and local file checksums.
//!
//! Every object this crate uploads carries two user-metadata fields (S3
//! `x-amz-meta-*`, GCS `x-goog-meta-*`, Azure `x-ms-meta-*`):
//!
//! - `bcd-xxh3`: the xxh3-64 of the object's bytes, 16 lower-case hex digits:
//!   what makes a local file and an object the same file ([`same_content`]). A
//!   push skips a file the remote has with the same checksum, and a pull a local
//!   file with the same checksum; sizes are never compared for that. ETags are
//!   not compared: a multipart upload's ETag is not the MD5 of the bytes, and it
//!   depends on the part size. An object without the field (uploaded by another
//!   tool) is compared by the checksum of its bytes, read whole.
//! - `bcd-mtime-ns`: the local file's modification time in nanoseconds, which a
//!   pull gives the file back, so a pulled persisted index (`.bcd-index`, which
//!   records its shards' times) stays usable.
//!
//! A push also writes, on each shard's `.idx`, what the cache needs of its
//! `.bin` to check a persisted index, so that a cold open asks nothing of the
//! data objects ([`DataClaim`]):
//!
//! - `bcd-data-etag`: the ETag of the shard's data object as the push left it;
//! - `bcd-data-mtime-ns`: the modification time of the data file the pushed
//!   persisted index was built from.
//!
//! The claim holds only while the data object has that ETag (every write of an
//! object gives it another); a reader that finds another reads the data
//! object's own metadata instead.
//!
//! A push also writes `bcd-commit` on `manifest.json`: an id of that write of
//! the manifest, new at every commit. A commit that changes only files beside
//! the shards (a view, a sidecar) writes the same manifest bytes again, maybe
//! within the second of the last write, so neither the ETag nor the time tells
//! the two writes apart; the id does, and the cache's check that its mirror is
//! current compares it.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use object_store::{
    Attribute, AttributeValue, Attributes, GetOptions, ObjectStore, ObjectStoreExt, UpdateVersion,
};

use bcd::format::MAX_MANIFEST_BYTES;

use crate::error::{RemoteError, Result};
use crate::store::Remote;

/// User-metadata key of the checksum.
pub const CHECKSUM_KEY: &str = "bcd-xxh3";
/// User-metadata key of the modification time.
pub const MTIME_KEY: &str = "bcd-mtime-ns";
/// User-metadata key, on a shard's `.idx`, of its data object's ETag.
pub const DATA_ETAG_KEY: &str = "bcd-data-etag";
/// User-metadata key, on a shard's `.idx`, of its data file's modification time.
pub const DATA_MTIME_KEY: &str = "bcd-data-mtime-ns";
/// User-metadata key of the id of a write of the manifest.
pub const COMMIT_KEY: &str = "bcd-commit";

/// A new id for a write of the manifest: the time in nanoseconds, the process
/// and a count within it, so two commits never share one.
pub(crate) fn new_commit_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let count = COUNT.fetch_add(1, Ordering::Relaxed);
    format!("{nanos:x}-{:x}-{count:x}", std::process::id())
}

/// The remote state a push may build on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Base {
    /// No dataset under the prefix yet.
    Absent,
    /// The manifest of this version (an ETag and version seen earlier).
    Version(UpdateVersion),
}

impl Base {
    /// The state of a prefix whose manifest is `manifest` (`None`: none).
    pub fn of(manifest: Option<&RemoteManifest>) -> Base {
        match manifest {
            None => Base::Absent,
            Some(m) => Base::Version(m.version.clone()),
        }
    }
}

/// One object directly under the prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteObject {
    /// Its name relative to the prefix.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its ETag, when the store gives one.
    pub e_tag: Option<String>,
    /// When it was last written (the store's clock).
    pub last_modified: DateTime<Utc>,
}

/// The checksum and time stored with an object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    /// xxh3-64 of the bytes, if recorded.
    pub xxh3: Option<u64>,
    /// Modification time (ns since the epoch) of the file it was uploaded from.
    pub mtime_ns: Option<u64>,
}

impl Stamp {
    /// The metadata attributes of an upload of a file with this checksum and time.
    pub(crate) fn attributes(xxh3: u64, mtime_ns: Option<u64>) -> Attributes {
        let mut attributes = Attributes::new();
        attributes.insert(
            Attribute::Metadata(CHECKSUM_KEY.into()),
            AttributeValue::from(format!("{xxh3:016x}")),
        );
        if let Some(mtime) = mtime_ns {
            attributes.insert(
                Attribute::Metadata(MTIME_KEY.into()),
                AttributeValue::from(mtime.to_string()),
            );
        }
        attributes
    }

    /// The checksum and time that `attributes` (of a read or a HEAD) carry.
    pub(crate) fn from_attributes(attributes: &Attributes) -> Stamp {
        let field = |key: &'static str| {
            attributes
                .get(&Attribute::Metadata(key.into()))
                .map(|v| v.as_ref().to_owned())
        };
        Stamp {
            xxh3: field(CHECKSUM_KEY).and_then(|v| u64::from_str_radix(v.trim(), 16).ok()),
            mtime_ns: field(MTIME_KEY).and_then(|v| v.trim().parse().ok()),
        }
    }
}

/// What a shard's `.idx` object says of the shard's data object: the ETag it had
/// when the `.idx` was pushed, and the time of the data file it was pushed
/// from (what the persisted index records). Good for the data object only
/// while it has that ETag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataClaim {
    pub e_tag: String,
    pub mtime_ns: u64,
}

impl DataClaim {
    /// Adds the claim to the attributes of an upload.
    pub(crate) fn insert_into(&self, attributes: &mut Attributes) {
        attributes.insert(
            Attribute::Metadata(DATA_ETAG_KEY.into()),
            AttributeValue::from(self.e_tag.clone()),
        );
        attributes.insert(
            Attribute::Metadata(DATA_MTIME_KEY.into()),
            AttributeValue::from(self.mtime_ns.to_string()),
        );
    }

    /// The claim `attributes` (of a read) carry, if whole.
    pub(crate) fn from_attributes(attributes: &Attributes) -> Option<DataClaim> {
        let field = |key: &'static str| attributes.get(&Attribute::Metadata(key.into()));
        Some(DataClaim {
            e_tag: field(DATA_ETAG_KEY)?.as_ref().to_owned(),
            mtime_ns: field(DATA_MTIME_KEY)?.as_ref().trim().parse().ok()?,
        })
    }

    /// The time it claims for `data`, if `data` is the write it was made for.
    pub(crate) fn mtime_of(&self, data: &RemoteObject) -> Option<u64> {
        (data.e_tag.as_deref() == Some(self.e_tag.as_str())).then_some(self.mtime_ns)
    }
}

/// Whether a file whose bytes have checksum `xxh3` and the object stamped
/// `stamp` are the same file: the one rule of push, pull, verify and the cache.
/// Only equal content checksums make two files the same; equal sizes never do,
/// and an object without a recorded checksum (uploaded by another tool) is the
/// same as nothing ([`Remote::content_stamp`] reads its bytes to compare).
pub fn same_content(stamp: Stamp, xxh3: u64) -> bool {
    stamp.xxh3 == Some(xxh3)
}

/// The manifest of a remote dataset, with the version a conditional put compares.
#[derive(Clone, Debug)]
pub struct RemoteManifest {
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Parsed.
    pub manifest: bcd::Manifest,
    /// What the commit compares against (ETag and version).
    pub version: UpdateVersion,
    /// When it was written: with the version, what tells a rewrite of the same
    /// bytes (a prefix removed and pushed again) from the manifest read before.
    pub last_modified: DateTime<Utc>,
    /// The id of this write (`bcd-commit`), when a push wrote it.
    pub commit: Option<String>,
}

impl Remote {
    /// The objects directly under the prefix, by name.
    pub async fn list(&self) -> Result<BTreeMap<String, RemoteObject>> {
        let store = self.store()?;
        let listing = store
            .list_with_delimiter(self.prefix_path().as_ref())
            .await
            .map_err(|e| RemoteError::store(self.uri().to_string(), "list", e))?;
        Ok(listing
            .objects
            .into_iter()
            .filter_map(|meta| {
                let name = self.name_of(&meta.location)?;
                Some((
                    name.clone(),
                    RemoteObject {
                        name,
                        size: meta.size,
                        e_tag: meta.e_tag,
                        last_modified: meta.last_modified,
                    },
                ))
            })
            .collect())
    }

    /// The objects under `sub/` below the prefix (one level), by name.
    pub(crate) async fn list_sub(&self, sub: &str) -> Result<Vec<RemoteObject>> {
        let store = self.store()?;
        let path = self.path(sub);
        let listing = store
            .list_with_delimiter(Some(&path))
            .await
            .map_err(|e| RemoteError::store(self.uri().join(sub).to_string(), "list", e))?;
        Ok(listing
            .objects
            .into_iter()
            .filter_map(|meta| {
                let name = meta.location.filename()?.to_owned();
                Some(RemoteObject {
                    name,
                    size: meta.size,
                    e_tag: meta.e_tag,
                    last_modified: meta.last_modified,
                })
            })
            .collect())
    }

    /// The manifest, or `None` when there is none under the prefix.
    pub async fn manifest(&self) -> Result<Option<RemoteManifest>> {
        let uri = self.object_uri(bcd::format::MANIFEST_NAME);
        let store = self.store()?;
        let result = match store
            .get_opts(
                &self.path(bcd::format::MANIFEST_NAME),
                GetOptions::default(),
            )
            .await
        {
            Ok(result) => result,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(RemoteError::store(uri, "read", e)),
        };
        if result.meta.size > MAX_MANIFEST_BYTES {
            return Err(RemoteError::Corrupt {
                uri,
                reason: format!("invalid manifest: larger than {MAX_MANIFEST_BYTES} bytes"),
            });
        }
        let version = UpdateVersion {
            e_tag: result.meta.e_tag.clone(),
            version: result.meta.version.clone(),
        };
        let last_modified = result.meta.last_modified;
        let commit = (result.attributes)
            .get(&Attribute::Metadata(COMMIT_KEY.into()))
            .map(|v| v.as_ref().to_owned());
        let bytes = result
            .bytes()
            .await
            .map_err(|e| RemoteError::store(uri.clone(), "read", e))?
            .to_vec();
        let manifest = bcd::Manifest::parse(&bytes, Path::new(&uri))?;
        Ok(Some(RemoteManifest {
            bytes,
            manifest,
            version,
            last_modified,
            commit,
        }))
    }

    /// The state a push onto this remote would build on now: [`Base::Absent`], or
    /// the version of its manifest (blocking).
    pub fn base(&self) -> Result<Base> {
        Ok(Base::of(crate::store::block_on(self.manifest())?.as_ref()))
    }

    /// The checksum and time stored with object `name` (a HEAD request).
    pub async fn stamp(&self, name: &str) -> Result<Stamp> {
        let store = self.store()?;
        let options = GetOptions {
            head: true,
            ..GetOptions::default()
        };
        let result = store
            .get_opts(&self.path(name), options)
            .await
            .map_err(|e| RemoteError::store(self.object_uri(name), "read metadata", e))?;
        Ok(Stamp::from_attributes(&result.attributes))
    }

    /// [`Remote::stamp`], with the checksum of the object's bytes, read whole,
    /// when none is stored with it (an object uploaded by another tool): what
    /// [`same_content`] compares a local file with.
    pub async fn content_stamp(&self, name: &str) -> Result<Stamp> {
        let stamp = self.stamp(name).await?;
        if stamp.xxh3.is_some() {
            return Ok(stamp);
        }
        let store = self.store()?;
        let read = |e| RemoteError::store(self.object_uri(name), "read", e);
        let mut stream = store
            .get_opts(&self.path(name), GetOptions::default())
            .await
            .map_err(read)?
            .into_stream();
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        while let Some(chunk) = futures::StreamExt::next(&mut stream).await {
            hasher.update(&chunk.map_err(read)?);
        }
        Ok(Stamp {
            xxh3: Some(hasher.digest()),
            ..stamp
        })
    }

    /// Object `name`'s bytes in `range`.
    pub async fn read_range(&self, name: &str, range: std::ops::Range<u64>) -> Result<Bytes> {
        let store = self.store()?;
        store
            .get_range(&self.path(name), range)
            .await
            .map_err(|e| RemoteError::store(self.object_uri(name), "read", e))
    }

    /// Object `name` whole.
    pub async fn read_all(&self, name: &str) -> Result<Bytes> {
        let store = self.store()?;
        let result = store
            .get_opts(&self.path(name), GetOptions::default())
            .await
            .map_err(|e| RemoteError::store(self.object_uri(name), "read", e))?;
        result
            .bytes()
            .await
            .map_err(|e| RemoteError::store(self.object_uri(name), "read", e))
    }
}

/// xxh3-64 of a local file's bytes, and its length.
pub fn file_checksum(path: &Path) -> Result<(u64, u64)> {
    let mut file = File::open(path).map_err(|e| RemoteError::io(path, "open", e))?;
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let mut buffer = vec![0u8; 1 << 20];
    let mut len = 0u64;
    loop {
        let n = file
            .read(&mut buffer)
            .map_err(|e| RemoteError::io(path, "read", e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        len += n as u64;
    }
    Ok((hasher.digest(), len))
}

/// Modification time of `metadata` in nanoseconds since the epoch.
pub fn mtime_ns(metadata: &std::fs::Metadata) -> Option<u64> {
    metadata
        .modified()
        .ok()?
        .duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| u64::try_from(d.as_nanos()).ok())
}

/// The time `mtime_ns` nanoseconds after the epoch.
pub fn time_of(mtime_ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(mtime_ns)
}

/// Whether `error` says a conditional request's condition did not hold (the object
/// exists, or it changed).
pub(crate) fn is_conflict(error: &object_store::Error) -> bool {
    matches!(
        error,
        object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }
    )
}
